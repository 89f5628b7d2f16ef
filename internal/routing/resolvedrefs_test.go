package routing

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// resolvedRefs is the ResolvedRefs condition of a fragment's first parent.
func resolvedRefs(t *testing.T, f *Fragment) Condition {
	t.Helper()
	for _, c := range f.Parents[0].Conditions {
		if c.Type == string(gatewayv1.RouteConditionResolvedRefs) {
			return c
		}
	}
	t.Fatalf("fragment of %s has no ResolvedRefs condition", f.Route)
	return Condition{}
}

// TestFragmentResolvedRefs: a fragment attached against some objects,
// checked again against the objects of later, gives exactly the condition
// Attach gives against those later objects (message included), so the
// chaperone's rewrite and the provider's next apply agree.
func TestFragmentResolvedRefs(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	web, api := service("infra", "web"), service("backends", "api")
	g := grant("backends", "infra", "api")
	twoRefs := rules(gatewayv1.HTTPRouteRule{
		BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil), backend("backends", "api", 80, nil)},
		Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestMirror,
			RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: gatewayv1.BackendObjectReference{Name: "mirror", Port: ptr(gatewayv1.PortNumber(80))}}}},
	})
	mirror := service("infra", "mirror")
	all := &Objects{Services: []*corev1.Service{web, api, mirror}, ReferenceGrants: []*gatewayv1.ReferenceGrant{g}}
	tests := []struct {
		name       string
		at, now    *Objects
		wantReason string
	}{
		{"unchanged", all, &Objects{Services: []*corev1.Service{web, api, mirror}, ReferenceGrants: []*gatewayv1.ReferenceGrant{g}}, "ResolvedRefs"},
		{"Service deleted", all, &Objects{Services: []*corev1.Service{api, mirror}, ReferenceGrants: []*gatewayv1.ReferenceGrant{g}}, "BackendNotFound"},
		{"mirror Service deleted", all, &Objects{Services: []*corev1.Service{web, api}, ReferenceGrants: []*gatewayv1.ReferenceGrant{g}}, "BackendNotFound"},
		{"ReferenceGrant deleted", all, &Objects{Services: []*corev1.Service{web, api, mirror}}, "RefNotPermitted"},
		{"Service created later", &Objects{Services: []*corev1.Service{api, mirror}, ReferenceGrants: []*gatewayv1.ReferenceGrant{g}}, all, "ResolvedRefs"},
		{"grant created later", &Objects{Services: []*corev1.Service{web, api, mirror}}, all, "ResolvedRefs"},
		{"everything gone", all, &Objects{}, "BackendNotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := route("infra", "r", twoRefs)
			f, err := Attach(gw, r, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := f.ResolvedRefs(tt.now)
			if !ok {
				t.Fatal("ResolvedRefs of an accepted fragment: ok = false")
			}
			later, err := Attach(gw, r, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			if want := resolvedRefs(t, later); got != want {
				t.Errorf("ResolvedRefs against the objects of now =\n%+v\nAttach against them gives\n%+v", got, want)
			}
			if got.Reason != tt.wantReason {
				t.Errorf("reason = %s, want %s", got.Reason, tt.wantReason)
			}
		})
	}

	// A route that is not accepted keeps its fragment's condition.
	f, err := Attach(gw, route("infra", "r", section("nope")), all)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.ResolvedRefs(&Objects{}); ok {
		t.Error("ResolvedRefs of a fragment without rules: ok = true, want false")
	}

	// An InvalidKind reference stays unresolved; when another reference
	// changes, the condition is rebuilt without the kind's name.
	kind := rules(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil), backend("", "bucket", 80, nil)}})
	r := route("infra", "k", kind)
	r.Spec.Rules[0].BackendRefs[1].Kind = ptr(gatewayv1.Kind("Bucket"))
	f, err = Attach(gw, r, all)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.ResolvedRefs(all); got != resolvedRefs(t, f) {
		t.Errorf("InvalidKind, nothing changed: %+v, want the fragment's %+v", got, resolvedRefs(t, f))
	}
	got, _ := f.ResolvedRefs(&Objects{})
	if got.Reason != "BackendNotFound" || got.Status != "False" {
		t.Errorf("InvalidKind and a deleted Service: %+v, want False/BackendNotFound first", got)
	}
}
