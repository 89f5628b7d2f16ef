package routingsync

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestBuildWithheld: the routes of a withheld HTTPS listener leave
// ghost.json, the listener stays on its socket (its hostname keeps
// selecting it, so ghost answers it 404, or 421 on another listener's
// connection), and the other listener of the port and the route's other
// attachments are served as before. The fragments given are not changed.
func TestBuildWithheld(t *testing.T) {
	host := func(h string) *gatewayv1.Hostname { v := gatewayv1.Hostname(h); return &v }
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
			{Name: "a", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: host("a.example.com")},
			{Name: "b", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: host("b.example.com")},
		}},
	}
	frag := &routing.Fragment{
		Gateway: object.Ref{Namespace: "infra", Name: "gw"},
		Route:   routing.RouteRef{Namespace: "infra", Name: "web"},
		Listeners: []routing.AttachedListener{
			{Name: "a", Port: 443, Hostnames: []string{"a.example.com"}},
			{Name: "b", Port: 443, Hostnames: []string{"b.example.com"}},
		},
		Rules: []routing.Rule{{Index: 0, Matches: []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}}}},
	}
	routes := func(doc *ghostjson.Document) map[string]int {
		out := map[string]int{}
		for _, v := range doc.VHosts {
			out[v.Hostname] = len(v.Routes)
		}
		return out
	}
	for _, tc := range []struct {
		withheld []string
		want     map[string]int
	}{
		{nil, map[string]int{"a.example.com": 1, "b.example.com": 1}},
		{[]string{"a"}, map[string]int{"a.example.com": 0, "b.example.com": 1}},
		{[]string{"a", "b"}, map[string]int{"a.example.com": 0, "b.example.com": 0}},
		{[]string{"another"}, map[string]int{"a.example.com": 1, "b.example.com": 1}},
	} {
		t.Run(fmt.Sprint(tc.withheld), func(t *testing.T) {
			_, doc, err := Build(&State{Gateway: gw, Fragments: []*routing.Fragment{frag}, Withheld: tc.withheld})
			if err != nil {
				t.Fatal(err)
			}
			if got := routes(doc); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("routes per vhost %v, want %v", got, tc.want)
			}
			if len(doc.Sockets) != 1 || len(doc.Sockets[0].Listeners) != 2 {
				t.Errorf("sockets %+v, want port-443 with both listeners", doc.Sockets)
			}
			if len(frag.Listeners) != 2 {
				t.Fatalf("Build changed the fragment: %+v", frag.Listeners)
			}
		})
	}
}
