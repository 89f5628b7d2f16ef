package routingsync

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestBuildCachePolicies: the chaperone's build takes the Gateway's
// default cache policy from its annotation and a rule's own from its
// fragment (routing.Merge and Resolve); a bad annotation makes the build
// fail, naming the field, so the sync is invalid and ghost keeps its file.
func TestBuildCachePolicies(t *testing.T) {
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw",
			Annotations: map[string]string{routing.CachePolicyAnnotation: `{"ttl":"5m"}`}},
		Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}},
	}
	ttl := "1h"
	frag := &routing.Fragment{
		Version:   routing.FragmentVersion,
		Gateway:   object.Ref{Namespace: "infra", Name: "gw"},
		Route:     routing.RouteRef{Namespace: "infra", Name: "web"},
		Listeners: []routing.AttachedListener{{Name: "http", Port: 80, Hostnames: []string{"*"}}},
		Rules: []routing.Rule{
			{Index: 0, Matches: []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}}},
			{Index: 1, Matches: []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/static"}}}, Cache: &routing.CachePolicy{TTL: &ttl}},
		},
	}
	_, doc, err := Build(&State{Gateway: gw, Fragments: []*routing.Fragment{frag}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range doc.CachePolicies {
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, " "), "gateway infra/web/1"; got != want {
		t.Errorf("cachePolicies %s, want %s", got, want)
	}
	routes := map[string]string{}
	for _, r := range doc.VHosts[0].Routes {
		routes[r.Name] = r.Cache
	}
	if routes["infra/web/0/0"] != "gateway" || routes["infra/web/1/0"] != "infra/web/1" {
		t.Errorf("route policies %v", routes)
	}

	gw.Annotations[routing.CachePolicyAnnotation] = `{"ttl":"5m","grace":"soon"}`
	if _, _, err := Build(&State{Gateway: gw, Fragments: []*routing.Fragment{frag}}); err == nil ||
		!strings.Contains(err.Error(), `metadata.annotations[varnishgw.dev/cache-policy].grace: Invalid value: "soon"`) {
		t.Errorf("Build with a bad annotation: %v, want an error naming the grace field", err)
	}
}
