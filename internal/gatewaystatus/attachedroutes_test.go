package gatewaystatus

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// TestAttachedRoutesWriter: as the chaperone's ServiceAccount, the writer
// sets the counts of the listener entries that exist (none before the
// provider wrote them), leaves a generation the Gateway has left, and
// shares the field with a provider apply that repeats its value.
func TestAttachedRoutesWriter(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "gw"}))
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	gws := cp.Gateway.GatewayV1().Gateways(ns)
	gw, err := gws.Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "a", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}, {Name: "b", Port: 8081, Protocol: gatewayv1.HTTPProtocolType}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := NewAttachedRoutesWriter(gatewayclient.NewForConfigOrDie(cfg), ns, "gw", nil)
	counts := func() map[string]int32 {
		t.Helper()
		g, err := gws.Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int32{}
		for _, l := range g.Status.Listeners {
			out[string(l.Name)] = l.AttachedRoutes
		}
		return out
	}
	want := AttachedRoutes{Generation: gw.Generation, Counts: map[string]int32{"a": 2, "b": 1}}

	// No entry yet: nothing to write (the provider creates them).
	if err := w.Apply(ctx, want); err != nil {
		t.Fatalf("apply before the provider's entries: %v", err)
	}
	if got := counts(); len(got) != 0 {
		t.Errorf("listener entries before the provider's: %v", got)
	}

	provider := func(a, b int32) {
		t.Helper()
		st := gwapply.GatewayStatus()
		for name, n := range map[string]int32{"a": a, "b": b} {
			st.WithListeners(gwapply.ListenerStatus().WithName(gatewayv1.SectionName(name)).WithAttachedRoutes(n).
				WithSupportedKinds(gwapply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
				WithConditions(metav1apply.Condition().WithType("Accepted").WithStatus(metav1.ConditionTrue).WithReason("Accepted").
					WithMessage("by the provider").WithObservedGeneration(gw.Generation).WithLastTransitionTime(metav1.Now())))
		}
		if _, err := gws.ApplyStatus(ctx, gwapply.Gateway("gw", ns).WithStatus(st), metav1.ApplyOptions{FieldManager: "varnishgw", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	provider(0, 0)
	if err := w.Apply(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got := counts(); got["a"] != 2 || got["b"] != 1 {
		t.Errorf("counts = %v, want a=2 b=1", got)
	}
	// The provider's next apply repeats the value it finds: no conflict,
	// no change; the pods' next count still applies.
	provider(2, 1)
	want.Counts["b"] = 3
	if err := w.Apply(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got := counts(); got["a"] != 2 || got["b"] != 3 {
		t.Errorf("counts = %v, want a=2 b=3", got)
	}

	// A count computed for a generation the Gateway has left is not
	// written.
	gw, err = gws.Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Spec.Listeners[1].Port = 8082
	if _, err := gws.Update(ctx, gw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply(ctx, AttachedRoutes{Generation: want.Generation, Counts: map[string]int32{"a": 9, "b": 9}}); err != nil {
		t.Fatal(err)
	}
	if got := counts(); got["a"] != 2 || got["b"] != 3 {
		t.Errorf("counts after an apply for an old generation = %v, want a=2 b=3 kept", got)
	}
}
