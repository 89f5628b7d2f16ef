package status

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RouteParent is what one writer of route status sets in varnishgw's
// status.parents entry for one parentRef of a route. Both writers build
// the entry with it (Build): the provider, which writes the entries at an
// apply with server-side apply, and the gateway pods, which write the
// ResolvedRefs condition between applies with a merge patch.
type RouteParent struct {
	// ParentRef is the route's parentRef the entry is for.
	ParentRef gatewayv1.ParentReference
	// Controller is varnishgw's controller name (the GatewayClass's).
	Controller gatewayv1.GatewayController
	// Generation is the route generation the conditions were computed
	// for: their observedGeneration.
	Generation int64
	// Set are the conditions this writer sets, in order. Their
	// ObservedGeneration and LastTransitionTime are ignored: Build sets
	// them.
	Set []metav1.Condition
	// Keep reports the condition types another writer owns in the entry:
	// the existing entry's conditions of these types stay as they are,
	// and Set's of these types are left out. Nil: the writer owns every
	// condition of the entry.
	Keep func(conditionType string) bool
}

// Build returns the entry p describes, given the entry as it is (nil
// when the route has none yet):
//
//   - parentRef and controllerName from p;
//   - existing's conditions of the types p.Keep reports, as they are, in
//     their place; its other conditions of types p.Set lacks are removed;
//   - each condition of p.Set (but those of kept types) in existing's
//     place of its type or appended, with observedGeneration
//     p.Generation, its message cut to MaxMessage (TruncateMessage), and
//     lastTransitionTime kept from existing's condition of the type while
//     the status stays, now when it changes or the type is new
//     (meta.SetStatusCondition's rule).
//
// An entry that Build returns equal to existing (apiequality.Semantic)
// needs no write. existing is not changed.
func (p RouteParent) Build(existing *gatewayv1.RouteParentStatus, now metav1.Time) gatewayv1.RouteParentStatus {
	kept := func(t string) bool { return p.Keep != nil && p.Keep(t) }
	set := func(t string) bool {
		return slices.ContainsFunc(p.Set, func(c metav1.Condition) bool { return c.Type == t })
	}
	var conds []metav1.Condition
	if existing != nil {
		for _, c := range existing.Conditions {
			if kept(c.Type) || set(c.Type) {
				conds = append(conds, c)
			}
		}
	}
	for _, c := range p.Set {
		if kept(c.Type) {
			continue
		}
		c.ObservedGeneration = p.Generation
		c.Message = TruncateMessage(c.Message)
		c.LastTransitionTime = now
		meta.SetStatusCondition(&conds, c)
	}
	return gatewayv1.RouteParentStatus{ParentRef: p.ParentRef, ControllerName: p.Controller, Conditions: conds}
}
