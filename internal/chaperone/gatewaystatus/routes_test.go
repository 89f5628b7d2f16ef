package gatewaystatus

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// TestRouteWriterRights: as a ServiceAccount with the route status Role of
// route "granted" only, the writer sets that route's ResolvedRefs; for
// route "denied" (applied by a provider that did not grant the right) it
// warns once, naming the fix, and does not retry while the condition it
// wants stays the same.
func TestRouteWriterRights(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := routing.ObjectRef{Namespace: ns, Name: "edge"}
	cp.GrantRole(t, ns, "granted", ns, "chaperone", gwruntime.RouteStatusRules("granted"))
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	routes := cp.Gateway.GatewayV1().HTTPRoutes(ns)
	var want []RouteResolvedRefs
	for _, name := range []string{"granted", "denied"} {
		r, err := routes.Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "edge"}, ControllerName: gwruntime.ControllerName,
			Conditions: []metav1.Condition{{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", Message: "all backend references resolved",
				ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now().Rfc3339Copy()}}}}
		if r, err = routes.UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, RouteResolvedRefs{
			Route:     routing.RouteRef{Namespace: ns, Name: name, UID: string(r.UID), Generation: r.Generation},
			Condition: routing.Condition{Type: "ResolvedRefs", Status: "False", Reason: "BackendNotFound", Message: "Service gone"},
			Applied:   routing.Condition{Type: "ResolvedRefs", Status: "True", Reason: "ResolvedRefs", Message: "all backend references resolved"},
		})
	}
	var logs syncBuf
	w := NewRouteWriter(gatewayclient.NewForConfigOrDie(cfg), gw, gwruntime.ControllerName, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.Run(ctx)
	w.Set(want)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := routes.Get(ctx, "granted", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(r.Status.Parents[0].Conditions, "ResolvedRefs"); c.Reason == "BackendNotFound" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the granted route's ResolvedRefs was not written; logs:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(RecheckInterval + 2*time.Second) // a recheck and a retry would have come
	w.Set(want)
	time.Sleep(time.Second)
	r, err := routes.Get(ctx, "denied", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(r.Status.Parents[0].Conditions, "ResolvedRefs"); c.Reason != "ResolvedRefs" {
		t.Errorf("the denied route's condition changed: %+v", c)
	}
	if n := strings.Count(logs.String(), "may not write the route's ResolvedRefs condition"); n != 1 {
		t.Errorf("%d warnings about the denied route, want 1; logs:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "apply the route again") {
		t.Errorf("the warning does not say what to do:\n%s", logs.String())
	}
}
