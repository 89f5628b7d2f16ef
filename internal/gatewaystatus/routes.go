package gatewaystatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// RouteResolvedRefs is the desired ResolvedRefs condition of one route's
// parent entries for the Gateway, for the route generation its fragment
// was built from.
type RouteResolvedRefs struct {
	Route     routing.RouteRef
	Condition routing.Condition
	// Parents are the route's parentRefs the fragment covers (those that
	// name the Gateway, or a ListenerSet of it): the writer sets the
	// condition in their entries. Empty: the entries that name the
	// Gateway.
	Parents []gatewayv1.ParentReference
	// Applied is the condition in the route's fragment: the one the
	// provider writes at an apply. While Condition differs, the writer
	// checks the route again every RecheckInterval, so that a status an
	// apply wrote with older information is corrected without waiting for
	// the next change.
	Applied routing.Condition
}

// same reports whether r and o want the same write.
func (r RouteResolvedRefs) same(o RouteResolvedRefs) bool {
	return r.Route == o.Route && r.Condition == o.Condition && r.Applied == o.Applied &&
		slices.EqualFunc(r.Parents, o.Parents, func(a, b gatewayv1.ParentReference) bool {
			return routing.SameParentRef(a, b, r.Route.Namespace)
		})
}

// RecheckInterval is how often the RouteWriter reads again the routes
// whose condition differs from their fragment's.
const RecheckInterval = 10 * time.Second

// EntryWait is how long the RouteWriter keeps reading a route whose
// status has no entry for the Gateway yet, every entryPoll: the provider
// writes the entry when it has applied the route, right after the pods
// serve its fragment.
const (
	EntryWait = 2 * time.Minute
	entryPoll = 200 * time.Millisecond
)

// errNoEntry is an apply that found no status entry to set the condition
// in, for the route generation of the fragment.
var errNoEntry = errors.New("no status entry for the Gateway yet")

// RouteWriter is the writer of the ResolvedRefs condition of the routes
// the Gateway serves (accepted fragments): for each route generation it
// serves, and again when a backend Service or a ReferenceGrant appears or
// disappears, the chaperone checks the route's references
// (routing.Fragment.ResolvedRefs) and this writer sets the condition in
// the route's status.parents entries of the fragment's parentRefs that
// carry varnishgw's controller name, and nowhere else, building each
// entry with status.RouteParent as the provider does. The provider
// writes the entries and their Accepted condition, and leaves ResolvedRefs
// to the pods while they serve the route (docs/guides/architecture.md,
// "Status: who writes what"). A route whose entry the provider has not
// written yet is read again every entryPoll for up to EntryWait.
//
// status.parents is a list that server-side apply treats as one value
// (atomic), so an apply would make one manager own every entry. The
// writer reads the route and writes the changed list back with a merge
// patch that carries the resource version it read (the API server refuses
// it when the route changed since: the writer reads it again), under
// RoutesFieldManager: the entries of other Gateways and controllers are
// written back as they were read. It writes only for the route generation
// its fragment was built from: a route applied again is written when the
// pods serve its new fragment. Every pod of the Gateway writes the same
// value; a write that would change nothing is skipped.
type RouteWriter struct {
	client     gatewayclient.Interface
	gateway    object.Ref
	controller gatewayv1.GatewayController
	log        *slog.Logger
	now        func() time.Time
	// loop's applied values are the conditions this writer found or
	// wrote, so that a sync that changes nothing reads no route.
	loop *writer[object.Ref, RouteResolvedRefs]

	mu sync.Mutex // before loop.mu when both are held
	// denied are the conditions the writer may not write (Forbidden),
	// not checked again until they change.
	denied map[object.Ref]RouteResolvedRefs
	// waiting are the routes without an entry for the Gateway yet
	// (errNoEntry), with when the writer first found none.
	waiting map[object.Ref]time.Time
}

// NewRouteWriter returns a RouteWriter for the routes of the Gateway gw,
// whose GatewayClass has the controller name controller.
func NewRouteWriter(client gatewayclient.Interface, gw object.Ref, controller gatewayv1.GatewayController, log *slog.Logger) *RouteWriter {
	if log == nil {
		log = slog.Default()
	}
	w := &RouteWriter{
		client: client, gateway: gw, controller: controller,
		log:     log.With("component", "gatewaystatus", "gateway", gw.String()),
		now:     time.Now,
		denied:  map[object.Ref]RouteResolvedRefs{},
		waiting: map[object.Ref]time.Time{},
	}
	w.loop = newWriter(w.log, "the routes' ResolvedRefs condition", RouteResolvedRefs.same, w.applyRoute)
	w.loop.soon = entryPoll
	return w
}

// Set records the desired conditions of every route of the Gateway (a
// route left out is no longer the writer's concern). It never blocks.
func (w *RouteWriter) Set(routes []RouteResolvedRefs) {
	want := make(map[object.Ref]RouteResolvedRefs, len(routes))
	for _, r := range routes {
		want[object.Ref{Namespace: r.Route.Namespace, Name: r.Route.Name}] = r
	}
	w.mu.Lock()
	for k := range w.denied {
		if _, ok := want[k]; !ok {
			delete(w.denied, k)
		}
	}
	for k := range w.waiting {
		old, _ := w.loop.wanted(k)
		if r, ok := want[k]; !ok || !r.same(old) {
			delete(w.waiting, k)
		}
	}
	w.mu.Unlock()
	w.loop.setAll(want)
}

// Run writes the desired conditions until ctx ends, retrying failures
// with backoff, and every RecheckInterval reads again the routes whose
// condition differs from their fragment's.
func (w *RouteWriter) Run(ctx context.Context) {
	go func() {
		tick := time.NewTicker(RecheckInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			recheck := false
			w.mu.Lock()
			w.loop.mu.Lock()
			for k, r := range w.loop.applied {
				if d, denied := w.denied[k]; r.Condition != r.Applied && (!denied || !d.same(r)) {
					delete(w.loop.applied, k)
					recheck = true
				}
			}
			w.loop.mu.Unlock()
			w.mu.Unlock()
			if recheck {
				w.loop.wake()
			}
		}
	}()
	w.loop.run(ctx)
}

// applyRoute is the loop's apply of route k's condition: a route without
// an entry for the Gateway yet is tried again soon (errSoon) for up to
// EntryWait, then left to the apply that creates the entry; a write the
// writer may not do is not tried again until the condition changes.
func (w *RouteWriter) applyRoute(ctx context.Context, k object.Ref, r RouteResolvedRefs) error {
	err := w.Apply(ctx, r)
	if errors.Is(err, errNoEntry) {
		// The provider writes the entry once the pods serve the route:
		// read it again soon, for a while.
		w.mu.Lock()
		first, ok := w.waiting[k]
		if !ok {
			first = w.now()
			w.waiting[k] = first
		}
		w.mu.Unlock()
		if w.now().Sub(first) < EntryWait {
			return errSoon
		}
		w.log.Info("the route has no status entry for the Gateway; its ResolvedRefs condition is written when an apply creates the entry",
			"route", r.Route.String())
		err = nil
	}
	if apierrors.IsForbidden(err) {
		// No right on this route (it was applied by a provider that did
		// not grant it yet): not retried until its condition changes
		// again.
		w.mu.Lock()
		w.denied[k] = r
		w.mu.Unlock()
		w.log.Warn("may not write the route's ResolvedRefs condition; apply the route again with this provider release, which grants it",
			"route", r.Route.String(), "error", err)
	} else if err != nil {
		return err
	}
	w.mu.Lock()
	delete(w.waiting, k)
	w.mu.Unlock()
	return nil
}

// Apply sets the condition in the route's parent entries for the Gateway
// now, reading the route again when it changed between the read and the
// write.
func (w *RouteWriter) Apply(ctx context.Context, r RouteResolvedRefs) error {
	var err error
	for range 5 {
		if err = w.apply(ctx, r); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

func (w *RouteWriter) apply(ctx context.Context, r RouteResolvedRefs) error {
	routes := w.client.GatewayV1().HTTPRoutes(r.Route.Namespace)
	route, err := routes.Get(ctx, r.Route.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted: its fragment goes next
		}
		return fmt.Errorf("read HTTPRoute %s: %w", r.Route, err)
	}
	if route.Generation != r.Route.Generation || (r.Route.UID != "" && string(route.UID) != r.Route.UID) {
		return nil // another generation (or object): its apply writes the status
	}
	parents := slices.Clone(route.Status.Parents)
	changed, found := false, false
	set := r.Condition.Metav1()
	now := metav1.NewTime(w.now().UTC().Truncate(time.Second))
	for i := range parents {
		p := &parents[i]
		if p.ControllerName != w.controller || !w.covers(r, p.ParentRef, route.Namespace) {
			continue
		}
		found = true
		// The provider owns the entry's other conditions.
		entry := status.RouteParent{ParentRef: p.ParentRef, Controller: w.controller, Generation: route.Generation,
			Set: []metav1.Condition{set}, Keep: func(t string) bool { return t != set.Type }}.Build(p, now)
		if apiequality.Semantic.DeepEqual(entry.Conditions, p.Conditions) {
			continue
		}
		p.Conditions = entry.Conditions
		changed = true
	}
	if !found {
		return errNoEntry
	}
	if !changed {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": route.ResourceVersion},
		"status":   map[string]any{"parents": parents},
	})
	if err != nil {
		return fmt.Errorf("encode the status of HTTPRoute %s: %w", r.Route, err)
	}
	if _, err := routes.Patch(ctx, r.Route.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: RoutesFieldManager}, "status"); err != nil {
		return fmt.Errorf("set ResolvedRefs=%s on HTTPRoute %s for Gateway %s: %w", r.Condition.Status, r.Route, w.gateway, err)
	}
	w.log.Info("route ResolvedRefs condition set", "route", r.Route.String(), "status", r.Condition.Status,
		"reason", r.Condition.Reason, "observedGeneration", route.Generation)
	return nil
}

// covers reports whether the status entry of parentRef pr of a route in
// routeNS is one of r's: one of r.Parents, or without them, one that
// names the writer's Gateway.
func (w *RouteWriter) covers(r RouteResolvedRefs, pr gatewayv1.ParentReference, routeNS string) bool {
	if len(r.Parents) == 0 {
		return w.names(pr, routeNS)
	}
	return slices.ContainsFunc(r.Parents, func(p gatewayv1.ParentReference) bool { return routing.SameParentRef(p, pr, routeNS) })
}

// names reports whether the parentRef of a route in routeNS names the
// writer's Gateway.
func (w *RouteWriter) names(pr gatewayv1.ParentReference, routeNS string) bool {
	if pr.Group != nil && *pr.Group != gatewayv1.GroupName || pr.Kind != nil && *pr.Kind != "Gateway" {
		return false
	}
	ns := routeNS
	if pr.Namespace != nil {
		ns = string(*pr.Namespace)
	}
	return ns == w.gateway.Namespace && string(pr.Name) == w.gateway.Name
}
