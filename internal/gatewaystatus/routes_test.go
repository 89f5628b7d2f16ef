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
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
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
	gw := object.Ref{Namespace: ns, Name: "edge"}
	cp.GrantRole(t, ns, "granted", ns, "chaperone", gwruntime.RouteStatusRules([]string{"granted"}))
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

// TestRouteWriterWaitsForEntry: the writer is given a route before the
// provider has written the route's status entry (a new route: the
// provider writes it once the pods serve the fragment). It keeps reading
// the route and sets ResolvedRefs as soon as the entry appears, in the
// entry of the fragment's parentRef (here a ListenerSet of the Gateway)
// and in no other.
func TestRouteWriterWaitsForEntry(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	routes := cp.Gateway.GatewayV1().HTTPRoutes(ns)
	lsKind, lsGroup := gatewayv1.Kind("ListenerSet"), gatewayv1.Group(gatewayv1.GroupName)
	viaSet := gatewayv1.ParentReference{Group: &lsGroup, Kind: &lsKind, Name: "extra"}
	direct := gatewayv1.ParentReference{Name: "edge"}
	r, err := routes.Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{viaSet, direct}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	w := NewRouteWriter(cp.Gateway, gw, gwruntime.ControllerName, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.Run(ctx)
	w.Set([]RouteResolvedRefs{{
		Route:     routing.RouteRef{Namespace: ns, Name: "new", UID: string(r.UID), Generation: r.Generation},
		Condition: routing.Condition{Type: "ResolvedRefs", Status: "False", Reason: "BackendNotFound", Message: "Service web not found"},
		Applied:   routing.Condition{Type: "ResolvedRefs", Status: "False", Reason: "BackendNotFound", Message: "Service web not found"},
		Parents:   []gatewayv1.ParentReference{viaSet},
	}})
	time.Sleep(time.Second) // the writer finds no entry and keeps looking
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "accepted",
		ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now().Rfc3339Copy()}
	r.Status.Parents = []gatewayv1.RouteParentStatus{
		{ParentRef: viaSet, ControllerName: gwruntime.ControllerName, Conditions: []metav1.Condition{accepted}},
		{ParentRef: direct, ControllerName: gwruntime.ControllerName, Conditions: []metav1.Condition{accepted}},
	}
	if _, err := routes.UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	for {
		got, err := routes.Get(ctx, "new", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Parents[0].Conditions, "ResolvedRefs"); c != nil {
			if c.Reason != "BackendNotFound" || c.ObservedGeneration != r.Generation {
				t.Errorf("ListenerSet entry's ResolvedRefs = %+v, want BackendNotFound for generation %d", c, r.Generation)
			}
			if c := meta.FindStatusCondition(got.Status.Parents[1].Conditions, "ResolvedRefs"); c != nil {
				t.Errorf("the entry of a parentRef the fragment does not cover got ResolvedRefs %+v", c)
			}
			t.Logf("written %v after the entry appeared", time.Since(written).Round(time.Millisecond))
			break
		}
		if time.Since(written) > 10*time.Second {
			t.Fatalf("ResolvedRefs not written 10 s after the entry appeared; logs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(logs.String(), `"level":"WARN"`) {
		t.Errorf("waiting for the entry logged a warning:\n%s", logs.String())
	}
}
