package gatewaystatus

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
)

// ListenerSetConditions are the desired ResolvedRefs conditions of the
// HTTPS listeners of one ListenerSet that the Gateway serves, each named
// by the ListenerSet's listener name (not its key among the Gateway's
// listeners).
type ListenerSetConditions struct {
	// Generation is the ListenerSet generation the listeners were
	// composed from (routing.ListenerSetGenerationsAnnotation): the
	// conditions' observedGeneration.
	Generation int64
	Conditions []ListenerCondition
}

func (c ListenerSetConditions) equal(o ListenerSetConditions) bool {
	return c.Generation == o.Generation && slices.Equal(c.Conditions, o.Conditions)
}

// ListenerSetWriter applies the ResolvedRefs condition of the HTTPS
// listeners of the ListenerSets a Gateway serves:
// status.listeners[name].conditions[ResolvedRefs] of each ListenerSet,
// with server-side apply under ListenerFieldManager (the ListenerSet's
// listener entries and conditions are maps keyed by name and type, so
// the provider's fields are left alone). As for the Gateway's listeners
// (ListenerWriter), the API server refuses the apply while the provider
// has not written the entry ("attachedRoutes: Required value"), and Run
// retries. A ListenerSet that is no longer served is forgotten without
// an apply: the provider writes the conditions of listeners that are not
// served, and removes the entries of listeners that are gone. Set never
// blocks; Run applies the latest desired conditions.
type ListenerSetWriter struct {
	client gatewayclient.Interface
	log    *slog.Logger
	now    func() time.Time
	loop   *writer[object.Ref, ListenerSetConditions]
}

// NewListenerSetWriter returns a ListenerSetWriter for the ListenerSets
// of the Gateway gw.
func NewListenerSetWriter(client gatewayclient.Interface, gw object.Ref, log *slog.Logger) *ListenerSetWriter {
	if log == nil {
		log = slog.Default()
	}
	w := &ListenerSetWriter{
		client: client,
		log:    log.With("component", "gatewaystatus", "gateway", gw.String()),
		now:    time.Now,
	}
	w.loop = newWriter(w.log, "the ResolvedRefs condition of the ListenerSets' HTTPS listeners", ListenerSetConditions.equal, w.Apply)
	w.loop.order = func(a, b object.Ref) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	}
	return w
}

// Set records the desired conditions of every ListenerSet with an HTTPS
// listener the Gateway serves.
func (w *ListenerSetWriter) Set(want map[object.Ref]ListenerSetConditions) {
	w.loop.setAll(want)
}

// Run applies the desired conditions until ctx ends, retrying failures
// with backoff: for each ListenerSet those that differ from the ones
// applied last; the ListenerSets no longer desired are forgotten.
func (w *ListenerSetWriter) Run(ctx context.Context) { w.loop.run(ctx) }

// Apply sets the conditions of the ListenerSet set now; a condition's
// lastTransitionTime is kept when its status does not change. It applies
// even when the conditions are as desired already: they may be the
// provider's (written before the pods owned them), which the provider's
// next status apply would delete.
func (w *ListenerSetWriter) Apply(ctx context.Context, set object.Ref, c ListenerSetConditions) error {
	ls, err := w.client.GatewayV1().ListenerSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read ListenerSet %s: %w", set, err)
	}
	typ := string(gatewayv1.ListenerEntryConditionResolvedRefs)
	st := gwapply.ListenerSetStatus()
	for _, lc := range c.Conditions {
		var existing []metav1.Condition
		for _, e := range ls.Status.Listeners {
			if string(e.Name) == lc.Listener {
				existing = e.Conditions
			}
		}
		msg := status.TruncateMessage(lc.Message)
		st.WithListeners(gwapply.ListenerEntryStatus().WithName(gatewayv1.SectionName(lc.Listener)).WithConditions(
			status.Condition(existing, metav1.Condition{Type: typ, Status: lc.Status, Reason: string(lc.Reason), Message: msg,
				ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(w.now().UTC().Truncate(time.Second))})))
	}
	cfg := gwapply.ListenerSet(set.Name, set.Namespace).WithStatus(st)
	if _, err := w.client.GatewayV1().ListenerSets(set.Namespace).ApplyStatus(ctx, cfg,
		metav1.ApplyOptions{FieldManager: ListenerFieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply the HTTPS listeners' ResolvedRefs on ListenerSet %s: %w", set, err)
	}
	for _, lc := range c.Conditions {
		w.log.Info("ListenerSet listener ResolvedRefs condition set", "listenerset", set.String(), "listener", lc.Listener,
			"st", string(lc.Status), "reason", string(lc.Reason), "observedGeneration", c.Generation)
	}
	return nil
}
