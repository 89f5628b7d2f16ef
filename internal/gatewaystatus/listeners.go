package gatewaystatus

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// ListenerCondition is the ResolvedRefs condition of one HTTPS listener,
// which the chaperone owns (design/chaperone.md, "TLS termination").
type ListenerCondition struct {
	Listener string
	Status   metav1.ConditionStatus
	Reason   gatewayv1.ListenerConditionReason
	Message  string
}

// ListenerFieldManager is the field manager of the HTTPS listeners'
// ResolvedRefs conditions. It is not FieldManager: a server-side apply
// removes the fields its manager owned and left out, so the Writer's apply
// of Programmed alone would delete these conditions, and this writer's
// apply Programmed, were they one manager.
const ListenerFieldManager = status.ChaperoneTLSManager

// ListenerWriter applies the ResolvedRefs condition of a Gateway's HTTPS
// listeners: status.listeners[name].conditions[ResolvedRefs], with
// server-side apply under ListenerFieldManager. The listener entries' other fields
// (supportedKinds, the other conditions) belong to the provider, and
// attachedRoutes to AttachedRoutesWriter once the provider created the
// entry: the API server refuses the apply while an entry lacks them
// ("attachedRoutes: Required value": the provider has not written the
// listener's status yet), and Run retries. Set never blocks; Run applies the latest desired conditions.
type ListenerWriter struct {
	client          gatewayclient.Interface
	namespace, name string
	log             *slog.Logger
	now             func() time.Time
	loop            *writer[struct{}, listenerState]
}

type listenerState struct {
	generation int64
	conds      []ListenerCondition
}

func (s listenerState) equal(o listenerState) bool {
	return s.generation == o.generation && slices.Equal(s.conds, o.conds)
}

// NewListenerWriter returns a ListenerWriter for the Gateway
// namespace/name.
func NewListenerWriter(client gatewayclient.Interface, namespace, name string, log *slog.Logger) *ListenerWriter {
	if log == nil {
		log = slog.Default()
	}
	w := &ListenerWriter{
		client: client, namespace: namespace, name: name,
		log: log.With("component", "gatewaystatus", "gateway", namespace+"/"+name),
		now: time.Now,
	}
	w.loop = newWriter(w.log, "the HTTPS listeners' ResolvedRefs condition", listenerState.equal,
		func(ctx context.Context, _ struct{}, s listenerState) error {
			return w.Apply(ctx, s.generation, s.conds)
		})
	return w
}

// Set records the desired conditions of the Gateway generation's HTTPS
// listeners.
func (w *ListenerWriter) Set(generation int64, conds []ListenerCondition) {
	w.loop.set(struct{}{}, listenerState{generation, slices.Clone(conds)})
}

// Run applies the desired conditions until ctx ends, retrying failures
// with backoff.
func (w *ListenerWriter) Run(ctx context.Context) { w.loop.run(ctx) }

// Apply sets the conditions now; a condition's lastTransitionTime is kept
// when its status does not change.
func (w *ListenerWriter) Apply(ctx context.Context, generation int64, conds []ListenerCondition) error {
	gw, err := w.client.GatewayV1().Gateways(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("set ResolvedRefs on Gateway %s/%s: %w", w.namespace, w.name, err)
		}
		return fmt.Errorf("read Gateway %s/%s: %w", w.namespace, w.name, err)
	}
	typ := string(gatewayv1.ListenerConditionResolvedRefs)
	st := gwapply.GatewayStatus()
	for _, lc := range conds {
		var existing []metav1.Condition
		for _, ls := range gw.Status.Listeners {
			if string(ls.Name) == lc.Listener {
				existing = ls.Conditions
			}
		}
		st.WithListeners(gwapply.ListenerStatus().WithName(gatewayv1.SectionName(lc.Listener)).WithConditions(
			status.Condition(existing, metav1.Condition{Type: typ, Status: lc.Status, Reason: string(lc.Reason), Message: status.TruncateMessage(lc.Message),
				ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(w.now().UTC().Truncate(time.Second))})))
	}
	cfg := gwapply.Gateway(w.name, w.namespace).WithStatus(st)
	if _, err := w.client.GatewayV1().Gateways(w.namespace).ApplyStatus(ctx, cfg,
		metav1.ApplyOptions{FieldManager: ListenerFieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply the HTTPS listeners' ResolvedRefs on Gateway %s/%s: %w", w.namespace, w.name, err)
	}
	for _, lc := range conds {
		w.log.Info("listener ResolvedRefs condition set", "listener", lc.Listener, "st", string(lc.Status), "reason", string(lc.Reason), "observedGeneration", generation)
	}
	return nil
}
