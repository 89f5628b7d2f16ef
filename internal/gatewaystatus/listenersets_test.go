package gatewaystatus

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// TestListenerSetResolvedRefsOwnership: with the real API server and a
// ServiceAccount with exactly gwruntime.ListenerSetStatusRules, the
// ListenerSetWriter applies only
// status.listeners[name].conditions[ResolvedRefs] of the ListenerSet
// under ListenerFieldManager; the provider's fields (the entry's
// attachedRoutes, supportedKinds, other conditions, the ListenerSet's
// conditions) stay, and the provider's applies without ResolvedRefs leave
// the writer's condition. Before the provider wrote the entry the apply is
// refused and Run retries until it works; the lastTransitionTime is kept
// while the status stays.
func TestListenerSetResolvedRefsOwnership(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	gwNS, ns := cp.Namespace(t), cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-listenersets", gwNS, "chaperone", gwruntime.ListenerSetStatusRules([]string{"team"}))
	cfg, err := cp.ServiceAccountConfig(ctx, gwNS, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	sets := cp.Gateway.GatewayV1().ListenerSets(ns)
	ls, err := sets.Create(ctx, &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Spec: gatewayv1.ListenerSetSpec{
			ParentRef: gatewayv1.ParentGatewayReference{Name: "gw", Namespace: func() *gatewayv1.Namespace { n := gatewayv1.Namespace(gwNS); return &n }()},
			Listeners: []gatewayv1.ListenerEntry{
				{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
				{Name: "https", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
					CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := object.Ref{Namespace: ns, Name: "team"}
	w := NewListenerSetWriter(gatewayclient.NewForConfigOrDie(cfg), object.Ref{Namespace: gwNS, Name: "gw"}, nil)
	want := ListenerSetConditions{Generation: ls.Generation, Conditions: []ListenerCondition{
		{Listener: "https", Status: metav1.ConditionFalse, Reason: gatewayv1.ListenerReasonInvalidCertificateRef, Message: "Secret " + ns + "/cert: not found"}}}
	if err := w.Apply(ctx, set, want); err == nil || !strings.Contains(err.Error(), "attachedRoutes: Required value") {
		t.Errorf("apply before the provider's listener entry: %v, want attachedRoutes: Required value", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.Run(runCtx)
	w.Set(map[object.Ref]ListenerSetConditions{set: want})

	provider := func(msg string) {
		t.Helper()
		c := func(typ string) *metav1apply.ConditionApplyConfiguration {
			return metav1apply.Condition().WithType(typ).WithStatus(metav1.ConditionTrue).WithReason(typ).WithMessage(msg).
				WithObservedGeneration(ls.Generation).WithLastTransitionTime(metav1.Now())
		}
		st := gwapply.ListenerSetStatus().WithConditions(c("Accepted"))
		for _, name := range []string{"http", "https"} {
			st.WithListeners(gwapply.ListenerEntryStatus().WithName(gatewayv1.SectionName(name)).WithAttachedRoutes(0).
				WithSupportedKinds(gwapply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
				WithConditions(c("Accepted")))
		}
		if _, err := sets.ApplyStatus(ctx, gwapply.ListenerSet("team", ns).WithStatus(st), metav1.ApplyOptions{FieldManager: "varnishgw-provider", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	provider("by the provider")
	entry := func(l *gatewayv1.ListenerSet, name string) *gatewayv1.ListenerEntryStatus {
		for i := range l.Status.Listeners {
			if string(l.Status.Listeners[i].Name) == name {
				return &l.Status.Listeners[i]
			}
		}
		return nil
	}
	check := func(msg string, reason gatewayv1.ListenerConditionReason) *metav1.Condition {
		t.Helper()
		var got *gatewayv1.ListenerSet
		deadline := time.Now().Add(30 * time.Second)
		for {
			if got, err = sets.Get(ctx, "team", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if e := entry(got, "https"); e != nil {
				if r := meta.FindStatusCondition(e.Conditions, "ResolvedRefs"); r != nil && r.Reason == string(reason) && r.ObservedGeneration == ls.Generation {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("https ResolvedRefs never became %s: %+v", reason, got.Status.Listeners)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if r := meta.FindStatusCondition(entry(got, "http").Conditions, "ResolvedRefs"); r != nil {
			t.Errorf("the HTTP listener got a ResolvedRefs from the pods: %+v", r)
		}
		for _, name := range []string{"http", "https"} {
			e := entry(got, name)
			if a := meta.FindStatusCondition(e.Conditions, "Accepted"); a == nil || a.Message != msg || len(e.SupportedKinds) != 1 {
				t.Errorf("%s: the provider's fields %+v, want Accepted %q and its supportedKinds", name, e, msg)
			}
		}
		if a := meta.FindStatusCondition(got.Status.Conditions, "Accepted"); a == nil || a.Message != msg {
			t.Errorf("the ListenerSet's Accepted %+v, want the provider's %q", a, msg)
		}
		return meta.FindStatusCondition(entry(got, "https").Conditions, "ResolvedRefs")
	}
	first := check("by the provider", gatewayv1.ListenerReasonInvalidCertificateRef)
	// The provider applies again without ResolvedRefs: the pods' stays.
	provider("again")
	check("again", gatewayv1.ListenerReasonInvalidCertificateRef)
	// Another message, same status: the transition time stays.
	time.Sleep(1100 * time.Millisecond)
	want.Conditions[0].Message = "still not found"
	if err := w.Apply(ctx, set, want); err != nil {
		t.Fatal(err)
	}
	if r := check("again", gatewayv1.ListenerReasonInvalidCertificateRef); !r.LastTransitionTime.Equal(&first.LastTransitionTime) || r.Message != "still not found" {
		t.Errorf("ResolvedRefs %+v: want the message changed and the transition time %v kept", r, first.LastTransitionTime)
	}
	// The Secret arrives.
	w.Set(map[object.Ref]ListenerSetConditions{set: {Generation: ls.Generation, Conditions: []ListenerCondition{
		{Listener: "https", Status: metav1.ConditionTrue, Reason: gatewayv1.ListenerReasonResolvedRefs, Message: "resolved"}}}})
	check("again", gatewayv1.ListenerReasonResolvedRefs)
	// Another ListenerSet is not the pods' to write.
	if err := w.Apply(ctx, object.Ref{Namespace: ns, Name: "other"}, want); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("apply to another ListenerSet: %v, want forbidden", err)
	}
}
