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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// RouteResolvedRefs is the desired ResolvedRefs condition of one route's
// parent entries for the Gateway, for the route generation its fragment
// was built from.
type RouteResolvedRefs struct {
	Route     routing.RouteRef
	Condition routing.Condition
	// Applied is the condition in the route's fragment: the one the
	// provider writes at an apply. While Condition differs, the writer
	// checks the route again every RecheckInterval, so that a status an
	// apply wrote with older information is corrected without waiting for
	// the next change.
	Applied routing.Condition
}

// RecheckInterval is how often the RouteWriter reads again the routes
// whose condition differs from their fragment's.
const RecheckInterval = 10 * time.Second

// RouteWriter keeps the ResolvedRefs condition of the Gateway's routes
// true between applies: when a backend Service or a ReferenceGrant
// appears or disappears, the chaperone checks the routes' references again
// (routing.Fragment.ResolvedRefs) and this writer sets the condition in
// the route's status.parents entries that name the Gateway and carry
// varnishgw's controller name, and nowhere else.
//
// status.parents is a list that server-side apply treats as one value
// (atomic), so an apply would make one manager own every entry. The
// writer reads the route and writes the changed list back with a merge
// patch that carries the resource version it read (the API server refuses
// it when the route changed since: the writer reads it again), under
// RoutesFieldManager: the entries of other Gateways and controllers are
// written back as they were read. It writes only for the route generation
// its fragment was built from: during an apply, the provider writes the
// status of the new generation. Every pod of the Gateway writes the same
// value; a write that would change nothing is skipped.
type RouteWriter struct {
	client     gatewayclient.Interface
	gateway    routing.ObjectRef
	controller gatewayv1.GatewayController
	log        *slog.Logger
	now        func() time.Time

	mu   sync.Mutex
	want map[routing.ObjectRef]RouteResolvedRefs
	// done are the conditions this writer found or wrote, so that a sync
	// that changes nothing reads no route.
	done map[routing.ObjectRef]RouteResolvedRefs
	// denied are the conditions the writer may not write (Forbidden),
	// not checked again until they change.
	denied map[routing.ObjectRef]RouteResolvedRefs
	kick   chan struct{}
}

// NewRouteWriter returns a RouteWriter for the routes of the Gateway gw,
// whose GatewayClass has the controller name controller.
func NewRouteWriter(client gatewayclient.Interface, gw routing.ObjectRef, controller gatewayv1.GatewayController, log *slog.Logger) *RouteWriter {
	if log == nil {
		log = slog.Default()
	}
	return &RouteWriter{
		client: client, gateway: gw, controller: controller,
		log:    log.With("component", "gatewaystatus", "gateway", gw.String()),
		now:    time.Now,
		want:   map[routing.ObjectRef]RouteResolvedRefs{},
		done:   map[routing.ObjectRef]RouteResolvedRefs{},
		denied: map[routing.ObjectRef]RouteResolvedRefs{},
		kick:   make(chan struct{}, 1),
	}
}

// Set records the desired conditions of every route of the Gateway (a
// route left out is no longer the writer's concern). It never blocks.
func (w *RouteWriter) Set(routes []RouteResolvedRefs) {
	want := make(map[routing.ObjectRef]RouteResolvedRefs, len(routes))
	for _, r := range routes {
		want[routing.ObjectRef{Namespace: r.Route.Namespace, Name: r.Route.Name}] = r
	}
	pending := false
	w.mu.Lock()
	w.want = want
	for k := range w.done {
		if _, ok := want[k]; !ok {
			delete(w.done, k)
			delete(w.denied, k)
		}
	}
	for k, r := range want {
		if w.done[k] != r {
			pending = true
		}
	}
	w.mu.Unlock()
	if !pending {
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run writes the desired conditions until ctx ends, retrying failures
// with backoff.
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
			for k, r := range w.done {
				if r.Condition != r.Applied && w.denied[k] != r {
					delete(w.done, k)
					recheck = true
				}
			}
			w.mu.Unlock()
			if recheck {
				select {
				case w.kick <- struct{}{}:
				default:
				}
			}
		}
	}()
	retryLoop(ctx, w.kick, w.log, "the routes' ResolvedRefs condition", func(ctx context.Context) error {
		w.mu.Lock()
		var todo []RouteResolvedRefs
		for k, r := range w.want {
			if w.done[k] != r {
				todo = append(todo, r)
			}
		}
		w.mu.Unlock()
		var errs []error
		for _, r := range todo {
			k := routing.ObjectRef{Namespace: r.Route.Namespace, Name: r.Route.Name}
			if err := w.Apply(ctx, r); apierrors.IsForbidden(err) {
				// No right on this route (it was applied by a provider
				// that did not grant it yet): not retried until its
				// condition changes again.
				w.mu.Lock()
				w.denied[k] = r
				w.mu.Unlock()
				w.log.Warn("may not write the route's ResolvedRefs condition; apply the route again with this provider release, which grants it",
					"route", r.Route.String(), "error", err)
			} else if err != nil {
				errs = append(errs, err)
				continue
			}
			w.mu.Lock()
			if w.want[k] == r {
				w.done[k] = r
			}
			w.mu.Unlock()
		}
		return errors.Join(errs...)
	})
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
	changed := false
	for i := range parents {
		p := &parents[i]
		if p.ControllerName != w.controller || !w.names(p.ParentRef, route.Namespace) {
			continue
		}
		conds := slices.Clone(p.Conditions)
		c := metav1.Condition{Type: r.Condition.Type, Status: metav1.ConditionStatus(r.Condition.Status), Reason: r.Condition.Reason,
			Message: truncateMessage(r.Condition.Message), ObservedGeneration: route.Generation,
			LastTransitionTime: metav1.NewTime(w.now().UTC().Truncate(time.Second))}
		if old := meta.FindStatusCondition(conds, c.Type); old != nil && old.Status == c.Status && old.Reason == c.Reason &&
			old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			continue
		}
		meta.SetStatusCondition(&conds, c)
		p.Conditions = conds
		changed = true
	}
	if !changed {
		return nil // nothing to change, or no entry of ours yet: the provider writes it with the same condition
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
