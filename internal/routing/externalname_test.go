package routing

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

func externalService(ns, name, host string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: host},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p})
	}
	return svc
}

// TestExternalName checks, for one backendRef to an ExternalName Service,
// the ResolvedRefs condition Attach gives (the provider's plan), the
// endpoints Resolve gives (the chaperone's ghost.json) and whether the
// chaperone resolves the name (ExternalNameHosts): the class's allowance
// decides, and the port and ReferenceGrant rules of other Services hold.
func TestExternalName(t *testing.T) {
	addrs := map[string][]netip.Addr{
		"api.example.org": {netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::1"),
			netip.MustParseAddr("::ffff:192.0.2.7"), netip.MustParseAddr("192.0.2.3")},
	}
	tests := []struct {
		name     string
		ref      gatewayv1.HTTPBackendRef
		svc      *corev1.Service
		grants   []*gatewayv1.ReferenceGrant
		allow    bool
		resolved map[string][]netip.Addr
		// wantCond is the ResolvedRefs reason ("!" when False), wantMsg
		// a part of its message.
		wantCond, wantMsg string
		// wantEps is the group's endpoints as JSON, followed by its
		// unresolved reason.
		wantEps   string
		wantHosts string
	}{{
		name: "not allowed", ref: backend("", "ext", 443, nil), svc: externalService("infra", "ext", "api.example.org", 443),
		resolved: addrs,
		wantCond: "!BackendNotFound", wantMsg: "Service infra/ext is of type ExternalName (api.example.org), which this Gateway's class does not route to: set external_name_services = true on its varnishgw_gateway_class",
		wantEps: "nullBackendNotFound", wantHosts: "[]",
	}, {
		name: "allowed", ref: backend("", "ext", 443, nil), svc: externalService("infra", "ext", "api.example.org", 443),
		allow: true, resolved: addrs,
		wantCond:  "ResolvedRefs",
		wantEps:   `[{"address":"192.0.2.3","port":443},{"address":"192.0.2.7","port":443},{"address":"2001:db8::1","port":443}]`,
		wantHosts: "[api.example.org]",
	}, {
		name: "name in upper case with a trailing dot", ref: backend("", "ext", 443, nil), svc: externalService("infra", "ext", "API.Example.org.", 443),
		allow: true, resolved: addrs,
		wantCond:  "ResolvedRefs",
		wantEps:   `[{"address":"192.0.2.3","port":443},{"address":"192.0.2.7","port":443},{"address":"2001:db8::1","port":443}]`,
		wantHosts: "[api.example.org]",
	}, {
		name: "allowed, not resolved yet", ref: backend("", "ext", 443, nil), svc: externalService("infra", "ext", "api.example.org", 443),
		allow:    true,
		wantCond: "ResolvedRefs", wantEps: "[]", wantHosts: "[api.example.org]",
	}, {
		name: "no ports listed: the backendRef's port", ref: backend("", "ext", 8443, nil), svc: externalService("infra", "ext", "api.example.org"),
		allow: true, resolved: addrs,
		wantCond:  "ResolvedRefs",
		wantEps:   `[{"address":"192.0.2.3","port":8443},{"address":"192.0.2.7","port":8443},{"address":"2001:db8::1","port":8443}]`,
		wantHosts: "[api.example.org]",
	}, {
		name: "port not among those listed", ref: backend("", "ext", 8443, nil), svc: externalService("infra", "ext", "api.example.org", 443),
		allow: true, resolved: addrs,
		wantCond: "!BackendNotFound", wantMsg: "Service infra/ext has no port 8443",
		wantEps: "[]", wantHosts: "[api.example.org]",
	}, {
		name: "other namespace without a ReferenceGrant", ref: backend("other", "ext", 443, nil), svc: externalService("other", "ext", "api.example.org", 443),
		allow: true, resolved: addrs,
		wantCond: "!RefNotPermitted", wantEps: "nullRefNotPermitted", wantHosts: "[]",
	}, {
		name: "other namespace with a ReferenceGrant", ref: backend("other", "ext", 443, nil), svc: externalService("other", "ext", "api.example.org", 443),
		grants: []*gatewayv1.ReferenceGrant{grant("other", "infra", "ext")}, allow: true, resolved: addrs,
		wantCond:  "ResolvedRefs",
		wantEps:   `[{"address":"192.0.2.3","port":443},{"address":"192.0.2.7","port":443},{"address":"2001:db8::1","port":443}]`,
		wantHosts: "[api.example.org]",
	}, {
		name: "a Service with endpoints is not affected", ref: backend("", "web", 80, nil), svc: service("infra", "web"),
		allow: true, resolved: addrs,
		wantCond: "ResolvedRefs", wantEps: "[]", wantHosts: "[]",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gw := gateway(listener("http", 80, ""))
			r := route("infra", "r", rules(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{tc.ref}}))
			objs := func() *Objects {
				return &Objects{Services: []*corev1.Service{tc.svc}, ReferenceGrants: tc.grants,
					ExternalNameServices: tc.allow, ExternalNames: tc.resolved}
			}
			f, err := Attach(gw, r, objs())
			if err != nil {
				t.Fatal(err)
			}
			if got := condition(f, gatewayv1.RouteConditionResolvedRefs); got != tc.wantCond {
				t.Errorf("ResolvedRefs = %s, want %s (%+v)", got, tc.wantCond, f.Parents[0].Conditions)
			}
			if tc.wantMsg != "" && !strings.Contains(fmt.Sprint(f.Parents[0].Conditions), tc.wantMsg) {
				t.Errorf("conditions %+v do not say %q", f.Parents[0].Conditions, tc.wantMsg)
			}
			if got := fmt.Sprint(ExternalNameHosts([]*Fragment{f}, objs())); got != tc.wantHosts {
				t.Errorf("ExternalNameHosts = %s, want %s", got, tc.wantHosts)
			}
			tb, err := Merge(gw, []*Fragment{f})
			if err != nil {
				t.Fatal(err)
			}
			doc, err := Resolve(tb, objs())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ghostjson.Marshal(doc); err != nil {
				t.Fatal(err)
			}
			g := doc.VHosts[0].Routes[0].Backends[0]
			eps, _ := json.Marshal(ghostjson.Endpoints(doc.Table(), g.Backend, g.Unresolved))
			if got := string(eps) + g.Unresolved; got != tc.wantEps {
				t.Errorf("endpoints = %s, want %s", got, tc.wantEps)
			}
		})
	}
}

// TestExternalNameFollowsClass: a fragment attached while the class did
// not allow ExternalName Services resolves once the chaperone allows them
// (Resolve checks again, as for a Service created after the apply), and a
// fragment attached while it allowed them gets no endpoints from a
// chaperone that does not.
func TestExternalNameFollowsClass(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	r := route("infra", "r", rules(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "ext", 80, nil)}}))
	svcs := []*corev1.Service{externalService("infra", "ext", "api.example.org", 80)}
	names := map[string][]netip.Addr{"api.example.org": {netip.MustParseAddr("192.0.2.1")}}
	for _, attachAllow := range []bool{false, true} {
		f, err := Attach(gw, r, &Objects{Services: svcs, ExternalNameServices: attachAllow})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := Merge(gw, []*Fragment{f})
		if err != nil {
			t.Fatal(err)
		}
		for _, resolveAllow := range []bool{false, true} {
			doc, err := Resolve(tb, &Objects{Services: svcs, ExternalNameServices: resolveAllow, ExternalNames: names})
			if err != nil {
				t.Fatal(err)
			}
			g := doc.VHosts[0].Routes[0].Backends[0]
			n := len(ghostjson.Endpoints(doc.Table(), g.Backend, g.Unresolved))
			if want := map[bool]int{false: 0, true: 1}[resolveAllow]; n != want {
				t.Errorf("attached with allow=%v, resolved with allow=%v: %d endpoints, want %d", attachAllow, resolveAllow, n, want)
			}
		}
	}
}

// TestWithExternalNameServices: the copy for a parent of another class
// shares the objects and changes only the allowance.
func TestWithExternalNameServices(t *testing.T) {
	o := &Objects{Services: []*corev1.Service{externalService("a", "ext", "x.example")}}
	if o.WithExternalNameServices(false) != o {
		t.Error("WithExternalNameServices(false) of a disallowing Objects is not the Objects itself")
	}
	on := o.WithExternalNameServices(true)
	if on == o || !on.ExternalNameServices || o.ExternalNameServices || len(on.Services) != 1 || on.Services[0] != o.Services[0] {
		t.Errorf("WithExternalNameServices(true) = %+v from %+v", on, o)
	}
	if on.service("a", "ext") == nil {
		t.Error("the copy's Service index does not find a/ext")
	}
	if n := (*Objects)(nil).WithExternalNameServices(true); n == nil || !n.ExternalNameServices {
		t.Errorf("nil.WithExternalNameServices(true) = %+v", n)
	}
}

// TestWithExternalNameServicesCopiesEveryField: the copy has every
// exported field of the original but ExternalNameServices, so a field added
// to Objects cannot be dropped for parents of a class that allows
// ExternalName Services (a route on a ListenerSet was once never served
// there).
func TestWithExternalNameServicesCopiesEveryField(t *testing.T) {
	o := &Objects{}
	v := reflect.ValueOf(o).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || v.Type().Field(i).Name == "ExternalNameServices" {
			continue
		}
		switch f.Kind() {
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem())
		default:
			t.Fatalf("Objects.%s is a %s: teach this test to fill it", v.Type().Field(i).Name, f.Kind())
		}
	}
	c := reflect.ValueOf(o.WithExternalNameServices(true)).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if !v.Type().Field(i).IsExported() || name == "ExternalNameServices" {
			continue
		}
		if !reflect.DeepEqual(c.Field(i).Interface(), v.Field(i).Interface()) {
			t.Errorf("WithExternalNameServices(true) drops Objects.%s", name)
		}
	}
}
