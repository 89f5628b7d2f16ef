package routing

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// TestAppProtocol checks a route to Service ports by appProtocol: none,
// kubernetes.io/ws and implementation-specific names resolve, and only the
// ws port's backend is marked websocket (ghost pipes upgrades to it alone,
// following the Service of now); kubernetes.io/wss and kubernetes.io/h2c, which
// Varnish cannot speak to a backend, give ResolvedRefs False with reason
// UnsupportedProtocol naming the port and the value, and an unresolved group
// in ghost.json (ghost answers its share with 500). Resolve checks the
// Service of now: a port changed to ws after the route was attached
// resolves without a re-attach, and one changed to wss stops resolving.
func TestAppProtocol(t *testing.T) {
	for _, tc := range []struct {
		name        string
		appProtocol *string // of port 80 at attach time
		now         *string // of port 80 at resolve time (the chaperone's view)
		wantReason  string  // the ResolvedRefs reason
		wantMsg     string  // part of its message
		wantGroup   string  // the group's endpoints + unresolved reason
		wantWS      bool    // the backend entry's websocket
	}{
		{name: "none", wantReason: "ResolvedRefs", wantGroup: `[{"address":"10.0.0.1","port":8080}]`},
		{name: "ws", appProtocol: ptr("kubernetes.io/ws"), wantReason: "ResolvedRefs", wantGroup: `[{"address":"10.0.0.1","port":8080}]`, wantWS: true},
		{name: "ws, changed to none since", appProtocol: ptr("kubernetes.io/ws"), now: ptr(""), wantReason: "ResolvedRefs", wantGroup: `[{"address":"10.0.0.1","port":8080}]`},
		{name: "none, changed to ws since", now: ptr("kubernetes.io/ws"), wantReason: "ResolvedRefs", wantGroup: `[{"address":"10.0.0.1","port":8080}]`, wantWS: true},
		{name: "implementation-specific http", appProtocol: ptr("http"), wantReason: "ResolvedRefs", wantGroup: `[{"address":"10.0.0.1","port":8080}]`},
		{name: "wss", appProtocol: ptr("kubernetes.io/wss"), wantReason: "UnsupportedProtocol",
			wantMsg: `spec.rules[0].backendRefs[0]: Service infra/web port 80 has appProtocol "kubernetes.io/wss" (WebSocket over TLS`, wantGroup: `nullUnsupportedProtocol`},
		{name: "h2c", appProtocol: ptr("kubernetes.io/h2c"), wantReason: "UnsupportedProtocol",
			wantMsg: `appProtocol "kubernetes.io/h2c" (HTTP/2 without TLS`, wantGroup: `nullUnsupportedProtocol`},
		{name: "wss, changed to ws since", appProtocol: ptr("kubernetes.io/wss"), now: ptr("kubernetes.io/ws"), wantReason: "UnsupportedProtocol",
			wantMsg: "kubernetes.io/wss", wantGroup: `[{"address":"10.0.0.1","port":8080}]`, wantWS: true},
		{name: "none, changed to wss since", now: ptr("kubernetes.io/wss"), wantReason: "ResolvedRefs", wantGroup: `nullUnsupportedProtocol`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := func(ap *string) *Objects {
				return &Objects{
					Namespaces: []*corev1.Namespace{namespace("infra", nil)},
					Services: []*corev1.Service{service("infra", "web",
						corev1.ServicePort{Name: "http", Port: 80, AppProtocol: ap},
						corev1.ServicePort{Name: "other", Port: 81, AppProtocol: ptr("kubernetes.io/wss")})},
					EndpointSlices: []*discoveryv1.EndpointSlice{
						slice("infra", "web", "web", discoveryv1.AddressTypeIPv4, "http", 8080, ep(ptr(true), "10.0.0.1")),
					},
				}
			}
			gw := gateway(listener("http", 80, ""))
			rt := route("infra", "ws", rules(gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{prefix("/")},
				BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)},
			}))
			f, err := Attach(gw, rt, objs(tc.appProtocol))
			if err != nil {
				t.Fatal(err)
			}
			var cond *Condition
			for _, p := range f.Parents {
				for i := range p.Conditions {
					if p.Conditions[i].Type == string(gatewayv1.RouteConditionResolvedRefs) {
						cond = &p.Conditions[i]
					}
				}
			}
			if cond == nil {
				t.Fatal("no ResolvedRefs condition")
			}
			wantStatus := "True"
			if tc.wantReason != "ResolvedRefs" {
				wantStatus = "False"
			}
			if cond.Reason != tc.wantReason || cond.Status != wantStatus || !strings.Contains(cond.Message, tc.wantMsg) {
				t.Errorf("ResolvedRefs = %s/%s %q, want %s/%s containing %q", cond.Status, cond.Reason, cond.Message, wantStatus, tc.wantReason, tc.wantMsg)
			}
			now := tc.appProtocol
			if tc.now != nil {
				now = tc.now
			}
			data, err := MarshalFragment(f)
			if err != nil {
				t.Fatal(err)
			}
			if f, err = UnmarshalFragment(data); err != nil {
				t.Fatal(err)
			}
			tb, err := Merge(gw, []*Fragment{f})
			if err != nil {
				t.Fatal(err)
			}
			doc, err := Resolve(tb, objs(now))
			if err != nil {
				t.Fatal(err)
			}
			out, err := ghostjson.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, ghostSchema(t), out)
			g := doc.VHosts[0].Routes[0].Backends[0]
			eps, _ := json.Marshal(ghostjson.Endpoints(doc.Table(), g.Backend, g.Unresolved))
			if got := string(eps) + g.Unresolved; got != tc.wantGroup {
				t.Errorf("group %s = %s, want %s", g.Backend, got, tc.wantGroup)
			}
			ws := false
			for _, b := range doc.Backends {
				if b.Name == g.Backend {
					ws = b.WebSocket
				}
			}
			if ws != tc.wantWS {
				t.Errorf("backend %s websocket = %v, want %v", g.Backend, ws, tc.wantWS)
			}
			if want := `"websocket":true`; strings.Contains(string(out), want) != tc.wantWS {
				t.Errorf("ghost.json has %s: %v, want %v:\n%s", want, !tc.wantWS, tc.wantWS, out)
			}
		})
	}
}
