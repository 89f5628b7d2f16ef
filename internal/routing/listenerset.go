package routing

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListenerSet support (GEP-1713). A ListenerSet adds listeners to the
// Gateway its parentRef names, when the Gateway's allowedListeners admits
// the ListenerSet's namespace. ComposeGateway computes a Gateway's
// effective listeners: its own first, then those of the ListenerSets that
// attach to it, in creation order (then namespace/name), a listener that
// conflicts with an earlier one (same port with another protocol, or same
// port and hostname) left out and marked Conflicted. The listeners of a
// ListenerSet appear among the effective listeners under a key
// (ListenerSetListenerKey) that no Gateway listener name can take, so that
// fragments, the merged Table and ghost.json name them without ambiguity.

// listenerKeySep separates the parts of a ListenerSet listener key; a '/'
// is not allowed in a Gateway listener name.
const listenerKeySep = "/"

// ListenerSetListenerKey is the name the listener of ListenerSet
// setNS/setName has among the effective listeners of its Gateway:
// "<namespace>/<listener set>/<listener>".
func ListenerSetListenerKey(setNS, setName, listener string) string {
	return setNS + listenerKeySep + setName + listenerKeySep + listener
}

// parseListenerKey splits a ListenerSetListenerKey; ok is false for the
// name of a Gateway's own listener.
func parseListenerKey(name string) (set object.Ref, listener string, ok bool) {
	parts := strings.SplitN(name, listenerKeySep, 3)
	if len(parts) != 3 {
		return object.Ref{}, "", false
	}
	return object.Ref{Namespace: parts[0], Name: parts[1]}, parts[2], true
}

// ParseListenerSetListenerKey splits a ListenerSetListenerKey into the
// ListenerSet and the listener's name in it; ok is false for the name of
// a Gateway's own listener.
func ParseListenerSetListenerKey(key string) (set object.Ref, listener string, ok bool) {
	return parseListenerKey(key)
}

// ListenerSetOf returns the ListenerSet whose listener name is, among a
// Gateway's effective listeners (a ListenerSetListenerKey); false for one
// of the Gateway's own listeners. The status of such a listener belongs
// on the ListenerSet, not on the Gateway.
func ListenerSetOf(name string) (object.Ref, bool) {
	set, _, ok := parseListenerKey(name)
	return set, ok
}

// ListenerSetParent is the Gateway the ListenerSet's parentRef names, and
// false when the parentRef names another kind than a Gateway of the
// Gateway API group.
func ListenerSetParent(ls *gatewayv1.ListenerSet) (object.Ref, bool) {
	pr := ls.Spec.ParentRef
	if (pr.Group != nil && *pr.Group != gatewayv1.GroupName) || (pr.Kind != nil && *pr.Kind != "Gateway") {
		return object.Ref{}, false
	}
	ref := object.Ref{Namespace: ls.Namespace, Name: string(pr.Name)}
	if pr.Namespace != nil && *pr.Namespace != "" {
		ref.Namespace = string(*pr.Namespace)
	}
	return ref, true
}

// ListenerSetsAllowed returns "" when gw's spec.allowedListeners admits
// ListenerSets from namespace ns, else why not. Without allowedListeners
// (or with from: None) a Gateway admits none.
func ListenerSetsAllowed(gw *gatewayv1.Gateway, ns string, objs *Objects) string {
	from := gatewayv1.NamespacesFromNone
	var sel *metav1.LabelSelector
	if al := gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil {
		if al.Namespaces.From != nil {
			from = *al.Namespaces.From
		}
		sel = al.Namespaces.Selector
	}
	gwName := gw.Namespace + "/" + gw.Name
	switch from {
	case gatewayv1.NamespacesFromAll:
		return ""
	case gatewayv1.NamespacesFromSame:
		if ns == gw.Namespace {
			return ""
		}
		return fmt.Sprintf("Gateway %s admits ListenerSets from its own namespace only (allowedListeners.namespaces.from: Same)", gwName)
	case gatewayv1.NamespacesFromSelector:
		s, err := metav1.LabelSelectorAsSelector(sel)
		if sel == nil || err != nil {
			return fmt.Sprintf("Gateway %s has an invalid allowedListeners.namespaces.selector", gwName)
		}
		if s.Matches(objs.namespaceLabels(ns)) {
			return ""
		}
		return fmt.Sprintf("namespace %s does not match the allowedListeners.namespaces.selector of Gateway %s", ns, gwName)
	default:
		return fmt.Sprintf("Gateway %s admits no ListenerSets: set its allowedListeners.namespaces.from to Same, All or Selector", gwName)
	}
}

// ValidateAllowedListeners checks a Gateway's spec.allowedListeners: from
// is one of None, Same, All and Selector, and Selector comes with a valid
// selector (and only then).
func ValidateAllowedListeners(gw *gatewayv1.Gateway) field.ErrorList {
	al := gw.Spec.AllowedListeners
	if al == nil || al.Namespaces == nil {
		return nil
	}
	p := field.NewPath("spec", "allowedListeners", "namespaces")
	var errs field.ErrorList
	from := gatewayv1.NamespacesFromNone
	if al.Namespaces.From != nil {
		from = *al.Namespaces.From
	}
	switch from {
	case gatewayv1.NamespacesFromNone, gatewayv1.NamespacesFromSame, gatewayv1.NamespacesFromAll:
		if al.Namespaces.Selector != nil {
			errs = append(errs, field.Forbidden(p.Child("selector"), fmt.Sprintf("a selector applies to from: Selector only, not %s: remove the selector or set from to Selector", from)))
		}
	case gatewayv1.NamespacesFromSelector:
		if al.Namespaces.Selector == nil {
			errs = append(errs, field.Required(p.Child("selector"), "from: Selector needs a selector"))
		} else if _, err := metav1.LabelSelectorAsSelector(al.Namespaces.Selector); err != nil {
			errs = append(errs, field.Invalid(p.Child("selector"), al.Namespaces.Selector.String(), err.Error()))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("from"), from, []string{"None", "Same", "All", "Selector"}))
	}
	return errs
}

// ValidateListenerSet checks the spec of a ListenerSet as varnishgw serves
// it: a parentRef to a Gateway, one to 64 listeners with unique valid
// names, ports, HTTP or HTTPS as the protocol, TLS as for a Gateway's
// HTTPS listeners (ValidateListenerTLS), hostnames, no two listeners with
// the same port and hostname, allowed route kinds (HTTPRoute only) and
// namespace selectors. Conflicts with the Gateway's listeners or other
// ListenerSets, and certificate references a ReferenceGrant does not
// permit, are not errors of the spec: ComposeGateway reports them in the
// status.
func ValidateListenerSet(ls *gatewayv1.ListenerSet) field.ErrorList {
	if ls == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "nil ListenerSet")}
	}
	var errs field.ErrorList
	pp := field.NewPath("spec", "parentRef")
	pr := ls.Spec.ParentRef
	if pr.Group != nil && *pr.Group != gatewayv1.GroupName {
		errs = append(errs, field.NotSupported(pp.Child("group"), *pr.Group, []string{gatewayv1.GroupName}))
	}
	if pr.Kind != nil && *pr.Kind != "Gateway" {
		errs = append(errs, field.NotSupported(pp.Child("kind"), *pr.Kind, []string{"Gateway"}))
	}
	if msg := objectNameProblem(string(pr.Name), false, "Gateway names"); msg != "" {
		errs = append(errs, field.Invalid(pp.Child("name"), pr.Name, msg))
	}
	if pr.Namespace != nil && *pr.Namespace != "" {
		if msg := objectNameProblem(string(*pr.Namespace), true, "namespace names"); msg != "" {
			errs = append(errs, field.Invalid(pp.Child("namespace"), *pr.Namespace, msg))
		}
	}
	// The listeners are checked as those of a Gateway, whose rules they
	// share; only the protocol differs.
	gw := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: make([]gatewayv1.Listener, len(ls.Spec.Listeners))}}
	for i, e := range ls.Spec.Listeners {
		gw.Spec.Listeners[i] = listenerOf(e)
	}
	return append(errs, ValidateGateway(gw)...)
}

func listenerOf(e gatewayv1.ListenerEntry) gatewayv1.Listener {
	return gatewayv1.Listener(e)
}

// ComposedGateway is a Gateway with the listeners of its ListenerSets.
type ComposedGateway struct {
	// Gateway is a copy of the Gateway whose spec.listeners are its own
	// followed by the accepted listeners of its accepted ListenerSets,
	// named by ListenerSetListenerKey. Attach and Merge take it.
	Gateway *gatewayv1.Gateway
	// ListenerSets are the results for every ListenerSet whose parentRef
	// names the Gateway, in precedence order (creation time, then
	// namespace/name).
	ListenerSets []ListenerSetResult
}

// AttachedListenerSets is the number of accepted ListenerSets: the
// Gateway's status.attachedListenerSets.
func (c *ComposedGateway) AttachedListenerSets() int32 {
	var n int32
	for i := range c.ListenerSets {
		if c.ListenerSets[i].Accepted() {
			n++
		}
	}
	return n
}

// ListenerSetResult is the outcome for one ListenerSet: its conditions
// (Accepted, Programmed) and those of each listener.
type ListenerSetResult struct {
	Set        object.Ref
	Generation int64
	Conditions []Condition
	// Listeners are in spec order; empty when the Gateway does not admit
	// the ListenerSet.
	Listeners []ListenerEntryResult
}

// Accepted reports whether the ListenerSet's Accepted condition is True.
func (r *ListenerSetResult) Accepted() bool {
	return len(r.Conditions) > 0 && r.Conditions[0].Status == string(metav1.ConditionTrue)
}

// ListenerEntryResult is the outcome for one listener of a ListenerSet.
type ListenerEntryResult struct {
	Name string
	// Key is the listener's name among the effective listeners
	// (ListenerSetListenerKey).
	Key      string
	Port     int32
	Protocol gatewayv1.ProtocolType
	// Served is true when the listener is among the effective listeners.
	Served bool
	// SupportedKinds are the route kinds the listener accepts.
	SupportedKinds []gatewayv1.RouteGroupKind
	// Conditions are Accepted, Programmed, Conflicted and ResolvedRefs.
	Conditions []Condition
}

// ComposeGateway returns gw with the listeners of the ListenerSets in sets
// that name it as parent, and the result for each of these ListenerSets.
// A ListenerSet is accepted when gw's allowedListeners admits its
// namespace and at least one of its listeners is accepted. A listener is
// accepted when no listener before it (the Gateway's own, then those of
// ListenerSets created earlier, then those of the same ListenerSet earlier
// in its spec) uses its port with another protocol (ProtocolConflict) or
// its port and hostname (HostnameConflict), its protocol is HTTP or HTTPS,
// and it allows HTTPRoutes (else ResolvedRefs is False with
// InvalidRouteKinds and it is not served). An HTTPS listener is served
// when objs's ReferenceGrants permit each of its certificateRefs (else
// ResolvedRefs is False with RefNotPermitted), with the refs' namespaces
// made explicit: the ListenerSet's when unset. Whether the Secrets exist
// is not checked here. gw's own listeners are never displaced. gw is not
// changed; listeners of gw that already are ListenerSet keys are dropped
// first, so composing a composed Gateway again gives the same result.
func ComposeGateway(gw *gatewayv1.Gateway, sets []*gatewayv1.ListenerSet, objs *Objects) *ComposedGateway {
	out := gw.DeepCopy()
	out.Spec.Listeners = slices.DeleteFunc(out.Spec.Listeners, func(l gatewayv1.Listener) bool {
		_, _, ok := parseListenerKey(string(l.Name))
		return ok
	})
	c := &ComposedGateway{Gateway: out}
	self := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
	var mine []*gatewayv1.ListenerSet
	for _, ls := range sets {
		if ls == nil {
			continue
		}
		if p, ok := ListenerSetParent(ls); ok && p == self {
			mine = append(mine, ls)
		}
	}
	slices.SortStableFunc(mine, func(a, b *gatewayv1.ListenerSet) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})

	type portHost struct {
		port int32
		host string
	}
	protocols := map[int32]gatewayv1.ProtocolType{}
	hosts := map[portHost]bool{}
	for i := range out.Spec.Listeners {
		l := &out.Spec.Listeners[i]
		if _, ok := protocols[l.Port]; !ok {
			protocols[l.Port] = l.Protocol
		}
		hosts[portHost{l.Port, listenerHost(l)}] = true
	}
	for _, ls := range mine {
		r := ListenerSetResult{Set: object.Ref{Namespace: ls.Namespace, Name: ls.Name}, Generation: ls.Generation}
		if why := ListenerSetsAllowed(gw, ls.Namespace, objs); why != "" {
			r.Conditions = setConditions(false, gatewayv1.ListenerSetReasonNotAllowed, why)
			c.ListenerSets = append(c.ListenerSets, r)
			continue
		}
		served := 0
		for _, e := range ls.Spec.Listeners {
			l := listenerOf(e)
			l.Name = gatewayv1.SectionName(ListenerSetListenerKey(ls.Namespace, ls.Name, string(e.Name)))
			er := ListenerEntryResult{Name: string(e.Name), Key: string(l.Name), Port: e.Port, Protocol: e.Protocol}
			host := listenerHost(&l)
			prev, portTaken := protocols[e.Port]
			kinds, kindsOK := supportedKinds(e.AllowedRoutes)
			er.SupportedKinds = kinds
			switch {
			case portTaken && prev != e.Protocol:
				er.Conditions = conflicted(gatewayv1.ListenerEntryReasonProtocolConflict,
					fmt.Sprintf("port %d already serves %s for a listener that takes precedence (the Gateway's own, or an older ListenerSet's): use another port", e.Port, prev))
			case hosts[portHost{e.Port, host}]:
				er.Conditions = conflicted(gatewayv1.ListenerEntryReasonHostnameConflict,
					fmt.Sprintf("a listener that takes precedence (the Gateway's own, or an older ListenerSet's) already serves hostname %s on port %d: use another hostname or port", host, e.Port))
			case e.Protocol != gatewayv1.HTTPProtocolType && e.Protocol != gatewayv1.HTTPSProtocolType:
				msg := fmt.Sprintf("varnishgw serves HTTP and HTTPS listeners of ListenerSets, not %s", e.Protocol)
				// HTTPRoutes, the only kind varnishgw serves, need HTTP or
				// HTTPS.
				er.SupportedKinds = []gatewayv1.RouteGroupKind{}
				er.Conditions = entryConditions(false, gatewayv1.ListenerEntryReasonUnsupportedProtocol, msg, gatewayv1.ListenerEntryReasonInvalidRouteKinds,
					fmt.Sprintf("HTTPRoute, the only route kind varnishgw serves, does not attach to protocol %s", e.Protocol))
			case !kindsOK:
				er.Conditions = entryConditions(true, gatewayv1.ListenerEntryReasonAccepted, "", gatewayv1.ListenerEntryReasonInvalidRouteKinds,
					"the listener allows no route kind varnishgw serves: allow HTTPRoute in allowedRoutes.kinds")
			default:
				if ve := ValidateGateway(&gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{listenerOf(e)}}}); len(ve) > 0 {
					er.Conditions = entryConditions(false, gatewayv1.ListenerEntryReasonInvalid, status.TruncateMessage(ve.ToAggregate().Error()), "", "")
					break
				}
				if l.Protocol == gatewayv1.HTTPSProtocolType {
					var grants []*gatewayv1.ReferenceGrant
					if objs != nil {
						grants = objs.ReferenceGrants
					}
					if why := listenerSetCertificateRefs(ls, &l, grants); why != "" {
						er.Conditions = entryConditions(true, gatewayv1.ListenerEntryReasonAccepted, "", gatewayv1.ListenerEntryReasonRefNotPermitted, why)
						break
					}
				}
				er.Conditions = entryConditions(true, gatewayv1.ListenerEntryReasonAccepted, "", "", "")
				er.Served = true
				served++
				out.Spec.Listeners = append(out.Spec.Listeners, l)
			}
			// The first listener on a port fixes its protocol; an
			// unsupported or invalid one too, so that what wins does not
			// depend on what varnishgw serves.
			if !portTaken {
				protocols[e.Port] = e.Protocol
			}
			if !portTaken || prev == e.Protocol {
				hosts[portHost{e.Port, host}] = true
			}
			r.Listeners = append(r.Listeners, er)
		}
		if served == 0 {
			r.Conditions = setConditions(false, gatewayv1.ListenerSetReasonListenersNotValid, "no listener of the ListenerSet is accepted: see the conditions of its listeners")
		} else {
			r.Conditions = setConditions(true, gatewayv1.ListenerSetReasonAccepted, fmt.Sprintf("%d of %d listeners accepted", served, len(ls.Spec.Listeners)))
		}
		c.ListenerSets = append(c.ListenerSets, r)
	}
	return c
}

// listenerSetCertificateRefs makes the namespace of every certificateRef
// of l, the composed HTTPS listener of ls, explicit (a ref without one is
// in the ListenerSet's namespace, not the Gateway's), and returns why a
// ref is not permitted: a Secret in another namespace than the
// ListenerSet's needs a ReferenceGrant there from kind ListenerSet of the
// ListenerSet's namespace (ListenerCertificateRefPermitted); "" when all
// are. l.TLS is copied first: it is shared with ls.
func listenerSetCertificateRefs(ls *gatewayv1.ListenerSet, l *gatewayv1.Listener, grants []*gatewayv1.ReferenceGrant) string {
	l.TLS = l.TLS.DeepCopy()
	var denied []string
	for i := range l.TLS.CertificateRefs {
		r := &l.TLS.CertificateRefs[i]
		if r.Namespace == nil || *r.Namespace == "" {
			r.Namespace = ptrTo(gatewayv1.Namespace(ls.Namespace))
		}
		if !certificateRefPermitted(grants, "ListenerSet", ls.Namespace, string(*r.Namespace), string(r.Name)) {
			denied = append(denied, string(*r.Namespace)+"/"+string(r.Name))
		}
	}
	if len(denied) == 0 {
		return ""
	}
	return status.TruncateMessage(fmt.Sprintf("no ReferenceGrant lets ListenerSets of namespace %s reference the Secret %s: create one in the Secret's namespace (from group %s kind ListenerSet namespace %s, to group \"\" kind Secret), or use a Secret in namespace %s",
		ls.Namespace, strings.Join(denied, ", "), gatewayv1.GroupName, ls.Namespace, ls.Namespace))
}

var httpRouteKind = gatewayv1.RouteGroupKind{Group: ptrTo(gatewayv1.Group(gatewayv1.GroupName)), Kind: "HTTPRoute"}

// supportedKinds returns the route kinds of ar that varnishgw serves and
// false when ar names kinds but none of them is served.
func supportedKinds(ar *gatewayv1.AllowedRoutes) ([]gatewayv1.RouteGroupKind, bool) {
	if ar == nil || len(ar.Kinds) == 0 {
		return []gatewayv1.RouteGroupKind{httpRouteKind}, true
	}
	if slices.ContainsFunc(ar.Kinds, func(k gatewayv1.RouteGroupKind) bool {
		return (k.Group == nil || *k.Group == gatewayv1.GroupName) && k.Kind == "HTTPRoute"
	}) {
		return []gatewayv1.RouteGroupKind{httpRouteKind}, true
	}
	return []gatewayv1.RouteGroupKind{}, false
}

func setConditions(ok bool, reason gatewayv1.ListenerSetConditionReason, msg string) []Condition {
	s, progReason := string(metav1.ConditionFalse), string(reason)
	if ok {
		s, progReason = string(metav1.ConditionTrue), string(gatewayv1.ListenerSetReasonProgrammed)
	}
	return []Condition{
		{Type: string(gatewayv1.ListenerSetConditionAccepted), Status: s, Reason: string(reason), Message: msg},
		{Type: string(gatewayv1.ListenerSetConditionProgrammed), Status: s, Reason: progReason, Message: msg},
	}
}

func conflicted(reason gatewayv1.ListenerEntryConditionReason, msg string) []Condition {
	f := string(metav1.ConditionFalse)
	return []Condition{
		{Type: string(gatewayv1.ListenerEntryConditionAccepted), Status: f, Reason: string(reason), Message: msg},
		{Type: string(gatewayv1.ListenerEntryConditionProgrammed), Status: f, Reason: string(reason), Message: msg},
		{Type: string(gatewayv1.ListenerEntryConditionConflicted), Status: string(metav1.ConditionTrue), Reason: string(reason), Message: msg},
		{Type: string(gatewayv1.ListenerEntryConditionResolvedRefs), Status: string(metav1.ConditionTrue), Reason: string(gatewayv1.ListenerEntryReasonResolvedRefs), Message: ""},
	}
}

// entryConditions are the conditions of a listener without conflict:
// accepted (or not, with reason and msg) and with resolved references
// (refsReason "") or not (refsReason, such as InvalidRouteKinds or
// RefNotPermitted, with refsMsg; the listener is then not programmed).
func entryConditions(accepted bool, reason gatewayv1.ListenerEntryConditionReason, msg string, refsReason gatewayv1.ListenerEntryConditionReason, refsMsg string) []Condition {
	t, f := string(metav1.ConditionTrue), string(metav1.ConditionFalse)
	c := []Condition{
		{Type: string(gatewayv1.ListenerEntryConditionAccepted), Status: t, Reason: string(reason), Message: msg},
		{Type: string(gatewayv1.ListenerEntryConditionProgrammed), Status: t, Reason: string(gatewayv1.ListenerEntryReasonProgrammed), Message: msg},
		{Type: string(gatewayv1.ListenerEntryConditionConflicted), Status: f, Reason: "NoConflicts", Message: ""},
		{Type: string(gatewayv1.ListenerEntryConditionResolvedRefs), Status: t, Reason: string(gatewayv1.ListenerEntryReasonResolvedRefs), Message: ""},
	}
	if !accepted {
		c[0].Status, c[1].Status, c[1].Reason = f, f, string(reason)
	}
	if refsReason != "" {
		c[1].Status, c[1].Reason, c[1].Message = f, string(gatewayv1.ListenerEntryReasonInvalid), refsMsg
		c[3].Status, c[3].Reason, c[3].Message = f, string(refsReason), refsMsg
	}
	return c
}

// ListenerSetListenersAnnotation is the Gateway annotation in which the
// provider records the accepted listeners of the Gateway's ListenerSets
// (ComposedGateway.ListenerSetListeners), for the chaperone: it serves
// them (WithListenerSetListeners) without reading ListenerSets, whose
// namespaces the Gateway's allowedListeners may leave open. Its field
// manager is ListenerSetListenersManager.
const ListenerSetListenersAnnotation = "varnishgw.dev/listener-set-listeners"

// ListenerSetListenersManager is the server-side apply field manager of
// ListenerSetListenersAnnotation: the Gateway and every ListenerSet of it
// write the whole value, computed from the same objects, with it.
const ListenerSetListenersManager = status.ListenerSetListenersManager

// ListenerSetListeners returns the value of ListenerSetListenersAnnotation
// for c: the accepted ListenerSet listeners as a JSON array of Gateway
// listeners named by ListenerSetListenerKey, in precedence order; "" when
// there are none.
func (c *ComposedGateway) ListenerSetListeners() (string, error) {
	var ls []gatewayv1.Listener
	for _, l := range c.Gateway.Spec.Listeners {
		if _, _, ok := parseListenerKey(string(l.Name)); ok {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return "", nil
	}
	b, err := json.Marshal(ls)
	if err != nil {
		return "", fmt.Errorf("encode the ListenerSet listeners of Gateway %s/%s: %w", c.Gateway.Namespace, c.Gateway.Name, err)
	}
	return string(b), nil
}

// WithListenerSetListeners returns gw with the ListenerSet listeners its
// ListenerSetListenersAnnotation records appended to its own (gw itself
// when there are none). A value that does not decode, a listener whose
// name is not a ListenerSetListenerKey or that is not a valid HTTP or
// HTTPS listener is an error naming the annotation: the caller keeps what
// it serves. Conflicts with the Gateway's own listeners are resolved
// again: the Gateway's win. The certificateRefs of HTTPS listeners are
// taken as the provider recorded them (with their namespaces); whether a
// ReferenceGrant permits them is for the reader of the certificates to
// check again (ListenerCertificateRefPermitted), not decided here.
func WithListenerSetListeners(gw *gatewayv1.Gateway) (*gatewayv1.Gateway, error) {
	v := gw.Annotations[ListenerSetListenersAnnotation]
	if v == "" {
		return gw, nil
	}
	var ls []gatewayv1.Listener
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ls); err != nil {
		return nil, fmt.Errorf("annotation %s of Gateway %s/%s: %w; apply the gateway or a ListenerSet again to rewrite it", ListenerSetListenersAnnotation, gw.Namespace, gw.Name, err)
	}
	// Rebuild ListenerSets from the keys and compose them like the
	// provider did; all of them were admitted by the provider.
	byKey := map[object.Ref]*gatewayv1.ListenerSet{}
	var sets []*gatewayv1.ListenerSet
	objs := &Objects{}
	for i, l := range ls {
		set, name, ok := parseListenerKey(string(l.Name))
		if !ok || (l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType) {
			return nil, fmt.Errorf("annotation %s of Gateway %s/%s: listener %d (%q, %s) is not an HTTP or HTTPS listener of a ListenerSet; apply the gateway or a ListenerSet again to rewrite it", ListenerSetListenersAnnotation, gw.Namespace, gw.Name, i, l.Name, l.Protocol)
		}
		if l.TLS != nil {
			// The provider recorded permitted references only; they
			// are composed as such.
			for _, r := range l.TLS.CertificateRefs {
				if r.Namespace != nil && string(*r.Namespace) != set.Namespace {
					objs.ReferenceGrants = append(objs.ReferenceGrants, &gatewayv1.ReferenceGrant{
						ObjectMeta: metav1.ObjectMeta{Namespace: string(*r.Namespace)},
						Spec: gatewayv1.ReferenceGrantSpec{
							From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "ListenerSet", Namespace: gatewayv1.Namespace(set.Namespace)}},
							To:   []gatewayv1.ReferenceGrantTo{{Kind: "Secret", Name: ptrTo(r.Name)}},
						},
					})
				}
			}
		}
		s := byKey[set]
		if s == nil {
			s = &gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: set.Namespace, Name: set.Name,
				// Precedence is the annotation's order.
				CreationTimestamp: metav1.Unix(int64(len(sets)), 0)}}
			s.Spec.ParentRef = gatewayv1.ParentGatewayReference{Name: gatewayv1.ObjectName(gw.Name), Namespace: ptrTo(gatewayv1.Namespace(gw.Namespace))}
			byKey[set] = s
			sets = append(sets, s)
		}
		l.Name = gatewayv1.SectionName(name)
		s.Spec.Listeners = append(s.Spec.Listeners, gatewayv1.ListenerEntry(l))
	}
	for _, s := range sets {
		if errs := ValidateListenerSet(s); len(errs) > 0 {
			return nil, fmt.Errorf("annotation %s of Gateway %s/%s: ListenerSet %s/%s: %w; apply the gateway or a ListenerSet again to rewrite it", ListenerSetListenersAnnotation, gw.Namespace, gw.Name, s.Namespace, s.Name, errs.ToAggregate())
		}
	}
	// The Gateway's allowedListeners still applies (it may have changed
	// since), except a selector, which the provider evaluated with the
	// namespaces' labels the chaperone does not read.
	admit := gw
	if al := gw.Spec.AllowedListeners; al != nil && al.Namespaces != nil && al.Namespaces.From != nil && *al.Namespaces.From == gatewayv1.NamespacesFromSelector {
		admit = gw.DeepCopy()
		admit.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptrTo(gatewayv1.NamespacesFromAll)}}
	}
	out := ComposeGateway(admit, sets, objs).Gateway
	out.Spec.AllowedListeners = gw.Spec.AllowedListeners
	return out, nil
}

// ListenerSetGenerationsAnnotation is the Gateway annotation in which the
// provider records, beside ListenerSetListenersAnnotation and with the
// same field manager, the generation of each ListenerSet whose listeners
// that annotation records: a JSON object from "namespace/name" to the
// generation the listeners were composed from
// (ComposedGateway.ListenerSetGenerations). The gateway pods write it as
// the observedGeneration of the ListenerSet listeners' ResolvedRefs
// condition, which they own. It is an annotation of its own so that pods
// of a release that does not know it still decode the listeners.
const ListenerSetGenerationsAnnotation = "varnishgw.dev/listener-set-generations"

// ListenerSetGenerations returns the value of
// ListenerSetGenerationsAnnotation for c: the generations of the
// ListenerSets with a served listener; "" when there are none.
func (c *ComposedGateway) ListenerSetGenerations() (string, error) {
	gens := map[string]int64{}
	for i := range c.ListenerSets {
		r := &c.ListenerSets[i]
		if slices.ContainsFunc(r.Listeners, func(l ListenerEntryResult) bool { return l.Served }) {
			gens[r.Set.String()] = r.Generation
		}
	}
	if len(gens) == 0 {
		return "", nil
	}
	b, err := json.Marshal(gens) // sorted keys: the value is stable
	if err != nil {
		return "", fmt.Errorf("encode the ListenerSet generations of Gateway %s/%s: %w", c.Gateway.Namespace, c.Gateway.Name, err)
	}
	return string(b), nil
}

// ListenerSetGenerations decodes gw's ListenerSetGenerationsAnnotation:
// the generation of each ListenerSet whose listeners the Gateway's
// ListenerSetListenersAnnotation records; nil without the annotation. A
// value that does not decode, a key that is not namespace/name or a
// generation below 1 is an error naming the annotation.
func ListenerSetGenerations(gw *gatewayv1.Gateway) (map[object.Ref]int64, error) {
	v := gw.Annotations[ListenerSetGenerationsAnnotation]
	if v == "" {
		return nil, nil
	}
	var raw map[string]int64
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return nil, fmt.Errorf("annotation %s of Gateway %s/%s: %w; apply the gateway or a ListenerSet again to rewrite it", ListenerSetGenerationsAnnotation, gw.Namespace, gw.Name, err)
	}
	out := make(map[object.Ref]int64, len(raw))
	for k, g := range raw {
		ns, name, ok := strings.Cut(k, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") || g < 1 {
			return nil, fmt.Errorf("annotation %s of Gateway %s/%s: entry %q: %d is not a ListenerSet's namespace/name and generation; apply the gateway or a ListenerSet again to rewrite it", ListenerSetGenerationsAnnotation, gw.Namespace, gw.Name, k, g)
		}
		out[object.Ref{Namespace: ns, Name: name}] = g
	}
	return out, nil
}
