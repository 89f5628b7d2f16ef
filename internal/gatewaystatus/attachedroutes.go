package gatewaystatus

import (
	"context"
	"fmt"
	"log/slog"
	"maps"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// RoutesFieldManager is the field manager of what the chaperone writes
// about the routes of its Gateway: the listeners' attachedRoutes
// (AttachedRoutesWriter) and the ResolvedRefs condition of the routes'
// parent entries for the Gateway (RouteWriter). It is neither FieldManager
// nor ListenerFieldManager: a server-side apply removes the fields its
// manager owned and left out.
const RoutesFieldManager = status.ChaperoneRoutesManager

// AttachedRoutes is the desired status.listeners[].attachedRoutes of one
// Gateway generation: the number of accepted routes per listener name.
type AttachedRoutes struct {
	Generation int64
	Counts     map[string]int32
}

func (a *AttachedRoutes) equal(o *AttachedRoutes) bool {
	return a != nil && o != nil && a.Generation == o.Generation && maps.Equal(a.Counts, o.Counts)
}

// AttachedRoutesWriter keeps status.listeners[].attachedRoutes of one
// Gateway equal to the routes the chaperone serves, with server-side apply
// under RoutesFieldManager: the chaperone sees every RoutingFragment
// change, so the count follows a route applied or destroyed on its own,
// without an apply of the gateway. The provider writes a listener's
// entry (and the count at its creation); this writer sets the count of the
// entries that exist, for the Gateway generation it was computed for, and
// leaves alone a generation it has not seen yet. Every pod of the Gateway
// writes the same value; an apply that would change nothing is skipped.
type AttachedRoutesWriter struct {
	client          gatewayclient.Interface
	namespace, name string
	log             *slog.Logger
	// loop forgets the counts it applied: the provider's applies write
	// them too, so equal counts are written again when the Gateway the
	// caller saw does not show them.
	loop *writer[struct{}, AttachedRoutes]
}

// NewAttachedRoutesWriter returns an AttachedRoutesWriter for the Gateway
// namespace/name.
func NewAttachedRoutesWriter(client gatewayclient.Interface, namespace, name string, log *slog.Logger) *AttachedRoutesWriter {
	if log == nil {
		log = slog.Default()
	}
	w := &AttachedRoutesWriter{
		client: client, namespace: namespace, name: name,
		log: log.With("component", "gatewaystatus", "gateway", namespace+"/"+name),
	}
	w.loop = newWriter(w.log, "the listeners' attachedRoutes", func(a, b AttachedRoutes) bool { return a.equal(&b) },
		func(ctx context.Context, _ struct{}, a AttachedRoutes) error { return w.Apply(ctx, a) })
	w.loop.forget = true
	return w
}

// Set records the desired counts when live, the Gateway as the caller
// last saw it, does not already show them; Run applies them. It never
// blocks.
func (w *AttachedRoutesWriter) Set(a AttachedRoutes, live *gatewayv1.Gateway) {
	a.Counts = maps.Clone(a.Counts)
	if live != nil && live.Generation == a.Generation && showsCounts(live, a.Counts) {
		w.loop.unset(struct{}{}) // nothing to write, and an older wish is moot
		return
	}
	if cur, ok := w.loop.wanted(struct{}{}); ok && a.equal(&cur) {
		return
	}
	w.loop.set(struct{}{}, a)
}

// showsCounts reports whether every listener entry of gw's status that
// counts has an entry for shows that count.
func showsCounts(gw *gatewayv1.Gateway, counts map[string]int32) bool {
	for _, ls := range gw.Status.Listeners {
		if n, ok := counts[string(ls.Name)]; ok && ls.AttachedRoutes != n {
			return false
		}
	}
	return true
}

// Run applies the desired counts until ctx ends, retrying failures with
// backoff.
func (w *AttachedRoutesWriter) Run(ctx context.Context) { w.loop.run(ctx) }

// Apply sets the counts now: on the listener entries of the Gateway's
// status that exist, when the Gateway is still at a.Generation.
func (w *AttachedRoutesWriter) Apply(ctx context.Context, a AttachedRoutes) error {
	gw, err := w.client.GatewayV1().Gateways(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Gateway %s/%s: %w", w.namespace, w.name, err)
	}
	if gw.Generation != a.Generation || showsCounts(gw, a.Counts) {
		// Another generation: its own sync sets its counts. Or nothing
		// to change.
		return nil
	}
	st := gwapply.GatewayStatus()
	for _, ls := range gw.Status.Listeners {
		if n, ok := a.Counts[string(ls.Name)]; ok {
			st.WithListeners(gwapply.ListenerStatus().WithName(ls.Name).WithAttachedRoutes(n))
		}
	}
	// The resource version makes the apply fail rather than write counts
	// of a generation the Gateway has left since the read.
	cfg := gwapply.Gateway(w.name, w.namespace).WithResourceVersion(gw.ResourceVersion).WithStatus(st)
	if _, err := w.client.GatewayV1().Gateways(w.namespace).ApplyStatus(ctx, cfg,
		metav1.ApplyOptions{FieldManager: RoutesFieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply the listeners' attachedRoutes on Gateway %s/%s: %w", w.namespace, w.name, err)
	}
	w.log.Info("listeners' attachedRoutes set", "listeners", fmt.Sprint(a.Counts), "generation", a.Generation)
	return nil
}
