// Package gatewaystatus writes the gateway pods' part of the status of
// their Gateway and of the routes they serve: the Programmed condition,
// which says whether ghost has loaded the routing of the Gateway's
// current generation (Writer); the ResolvedRefs condition of the HTTPS
// listeners, which says whether their certificates are served
// (ListenerWriter), and the same condition of the HTTPS listeners of its
// ListenerSets, on the ListenerSets (ListenerSetWriter); the listeners'
// attachedRoutes (AttachedRoutesWriter); and the ResolvedRefs condition
// of the routes' parent entries for the Gateway between applies
// (RouteWriter). docs/guides/architecture.md ("Status: who writes what")
// names the writer of every status field and its fallback.
//
// Each writer type is the package's one generic writer (writer, in
// writer.go) with what it writes: it keeps the latest desired value per
// key, Set never blocks, and Run applies what differs from what it applied
// last, retrying failures with backoff.
//
// The chaperone runs these writers. The package is shared so that the
// provider's tests write as the pods do, with the pods' identity, to check
// the RBAC rules the provider grants them.
//
// The Gateway's fields are written with server-side apply on the status
// subresource, each writer under its own field manager (FieldManager,
// ListenerFieldManager, RoutesFieldManager): a server-side apply removes
// the fields its manager owned and left out, and conditions and listener
// entries are maps keyed by type and name, so the fields the provider or
// another writer owns are left alone. A route's status.parents is one
// value for server-side apply; RouteWriter writes it with a merge patch
// that carries the resource version it read.
package gatewaystatus

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// FieldManager is the server-side apply field manager of the chaperone.
const FieldManager = status.ChaperoneManager

// Programmed is the desired state of the Programmed condition.
type Programmed struct {
	// Generation is the Gateway generation the routing was built from
	// (observedGeneration).
	Generation int64
	Status     metav1.ConditionStatus
	// Reason is Programmed, Invalid or Pending.
	Reason  gatewayv1.GatewayConditionReason
	Message string
}

// ForError returns the Programmed condition for a sync of generation that
// ended with err: True/Programmed for nil, False/Pending when pending (the
// routing could not be loaded yet, e.g. ghost is not up), False/Invalid
// otherwise with err as message.
func ForError(generation int64, err error, pending bool) Programmed {
	switch {
	case err == nil:
		return Programmed{generation, metav1.ConditionTrue, gatewayv1.GatewayReasonProgrammed, "ghost loaded the routing of this generation"}
	case pending:
		return Programmed{generation, metav1.ConditionFalse, gatewayv1.GatewayReasonPending, err.Error()}
	default:
		return Programmed{generation, metav1.ConditionFalse, gatewayv1.GatewayReasonInvalid, err.Error()}
	}
}

// Writer applies the Programmed condition of one Gateway. Set never
// blocks; Run applies the latest desired condition, retrying failures with
// backoff, and skips applies that would change nothing.
type Writer struct {
	client          gatewayclient.Interface
	namespace, name string
	log             *slog.Logger
	now             func() time.Time
	loop            *writer[struct{}, Programmed]
}

// NewWriter returns a Writer for the Gateway namespace/name.
func NewWriter(client gatewayclient.Interface, namespace, name string, log *slog.Logger) *Writer {
	if log == nil {
		log = slog.Default()
	}
	w := &Writer{
		client: client, namespace: namespace, name: name,
		log: log.With("component", "gatewaystatus", "gateway", namespace+"/"+name),
		now: time.Now,
	}
	w.loop = newWriter(w.log, "the Programmed condition", func(a, b Programmed) bool { return a == b },
		func(ctx context.Context, _ struct{}, p Programmed) error { return w.Apply(ctx, p) })
	return w
}

// Set records the desired condition; Run applies it.
func (w *Writer) Set(p Programmed) { w.loop.set(struct{}{}, p) }

// Run applies desired conditions until ctx ends.
func (w *Writer) Run(ctx context.Context) { w.loop.run(ctx) }

// Apply sets the Programmed condition now. lastTransitionTime is kept when
// the status does not change.
func (w *Writer) Apply(ctx context.Context, p Programmed) error {
	gw, err := w.client.GatewayV1().Gateways(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("set Programmed on Gateway %s/%s: %w", w.namespace, w.name, err)
		}
		return fmt.Errorf("read Gateway %s/%s: %w", w.namespace, w.name, err)
	}
	msg := status.TruncateMessage(p.Message)
	typ := string(gatewayv1.GatewayConditionProgrammed)
	if c := meta.FindStatusCondition(gw.Status.Conditions, typ); c != nil &&
		c.Status == p.Status && c.Reason == string(p.Reason) && c.Message == msg && c.ObservedGeneration == p.Generation {
		return nil // nothing to change
	}
	cfg := gwapply.Gateway(w.name, w.namespace).WithStatus(gwapply.GatewayStatus().WithConditions(
		status.Condition(gw.Status.Conditions, metav1.Condition{Type: typ, Status: p.Status, Reason: string(p.Reason), Message: msg,
			ObservedGeneration: p.Generation, LastTransitionTime: metav1.NewTime(w.now().UTC().Truncate(time.Second))})))
	if _, err := w.client.GatewayV1().Gateways(w.namespace).ApplyStatus(ctx, cfg,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply Programmed=%s on Gateway %s/%s: %w", p.Status, w.namespace, w.name, err)
	}
	w.log.Info("Programmed condition set", "status", string(p.Status), "reason", string(p.Reason), "observedGeneration", p.Generation)
	return nil
}
