package routingsync

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestRouteStatus: every listener of the Gateway gets a count (0 when no
// route is attached), and each accepted route its ResolvedRefs checked
// against the state's objects; a route no listener accepts gets none.
func TestRouteStatus(t *testing.T) {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw", Generation: 4},
		Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
			{Name: "a", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: ptrTo(gatewayv1.Hostname("a.example.com"))},
			{Name: "b", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: ptrTo(gatewayv1.Hostname("b.example.com"))},
			{Name: "idle", Port: 81, Protocol: gatewayv1.HTTPProtocolType, Hostname: ptrTo(gatewayv1.Hostname("idle.example.com"))},
		}}}
	port := ptrTo(gatewayv1.PortNumber(80))
	route := func(name string, hosts ...gatewayv1.Hostname) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: name, Generation: 2},
			Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
				Hostnames: hosts,
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: port}}}}}}}}
	}
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	var frags []*routing.Fragment
	for _, r := range []*gatewayv1.HTTPRoute{route("both", "a.example.com", "b.example.com"), route("one", "a.example.com"), route("none", "c.example.com")} {
		f, err := routing.Attach(gw, r, &routing.Objects{Services: []*corev1.Service{web}})
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f)
	}
	attached, routes := RouteStatus(&State{Gateway: gw, Fragments: frags, Objects: &routing.Objects{}})
	if want := map[string]int32{"a": 2, "b": 1, "idle": 0}; attached.Generation != 4 || !maps.Equal(attached.Counts, want) {
		t.Errorf("attached = %+v, want generation 4 and %v", attached, want)
	}
	if len(routes) != 2 {
		t.Fatalf("routes = %+v, want the two accepted ones", routes)
	}
	for _, r := range routes {
		if r.Route.Generation != 2 || r.Condition.Reason != "BackendNotFound" {
			t.Errorf("%s: generation %d, %s; want generation 2 and BackendNotFound (the Service is gone)", r.Route, r.Route.Generation, r.Condition.Reason)
		}
		if len(r.Parents) != 1 || r.Parents[0].Name != "gw" {
			t.Errorf("%s: parents %+v, want the route's parentRef to gw", r.Route, r.Parents)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
