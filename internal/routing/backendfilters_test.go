package routing

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// TestConformanceBackendFiltersDocument takes the suite's two
// HTTPRouteBackendRequestHeaderModification manifests through Attach,
// Merge and Resolve: each route is accepted, its fragment is version 2,
// and each backend group of ghost.json carries its backendRef's
// RequestHeaderModifier, valid against ghost.schema.json.
func TestConformanceBackendFiltersDocument(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	objs := &Objects{Namespaces: base.namespaces, Services: base.services}
	var gw *gatewayv1.Gateway
	for _, g := range base.gateways {
		if g.Name == "same-namespace" {
			gw = g
		}
	}
	for _, file := range []string{"httproute-request-header-modifier-backend-weights.yaml", "httproute-request-header-modifier-backend.yaml"} {
		m := readManifests(t, filepath.Join(dir, "tests", file))
		var frags []*Fragment
		for _, r := range m.routes {
			f, err := Attach(gw, r, objs)
			if err != nil || !f.Accepted() {
				t.Fatalf("%s: %s: %v %+v", file, r.Name, err, f)
			}
			data, err := MarshalFragment(f)
			if err != nil {
				t.Fatal(err)
			}
			back, err := UnmarshalFragment(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Rules, f.Rules) {
				t.Errorf("%s: rules differ after a round trip", file)
			}
			frags = append(frags, f)
		}
		tb, err := Merge(gw, frags)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Resolve(tb, objs)
		if err != nil {
			t.Fatal(err)
		}
		data, err := ghostjson.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		checkSchema(t, ghostSchema(t), data)
		groups := 0
		for _, vh := range doc.VHosts {
			for _, r := range vh.Routes {
				for _, g := range r.Backends {
					if len(g.Filters) == 0 {
						continue
					}
					groups++
					if len(g.Filters) != 1 || g.Filters[0].Type != ghostjson.FilterRequestHeaderModifier || g.Filters[0].RequestHeaderModifier == nil {
						t.Errorf("%s: route %s group %s: filters %+v", file, r.Name, g.Backend, g.Filters)
					}
				}
			}
		}
		if groups == 0 {
			t.Errorf("%s: no backend group carries filters", file)
		}
	}
}

// TestBackendFiltersOnlyOnPickedGroup: the weights scenario gives each
// backend its own Backend header, on its own group only.
func TestBackendFiltersOnlyOnPickedGroup(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	set := func(v string) []gatewayv1.HTTPRouteFilter {
		return []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "Backend", Value: v}}}}}
	}
	r := route("infra", "r", rules(gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/")}}))
	v1, v2 := backend("", "v1", 8080, ptr(int32(10))), backend("", "v2", 8080, ptr(int32(10)))
	v1.Filters, v2.Filters = set("v1"), set("v2")
	r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{v1, v2, backend("", "v3", 8080, nil)}
	f, err := Attach(gw, r, nil)
	if err != nil || !f.Accepted() {
		t.Fatalf("%v %+v", err, f)
	}
	tb, err := Merge(gw, []*Fragment{f})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, g := range doc.VHosts[0].Routes[0].Backends {
		v := "-"
		if len(g.Filters) == 1 {
			v = g.Filters[0].RequestHeaderModifier.Set[0].Value
		}
		got[g.Backend] = v
	}
	want := map[string]string{"infra/v1:8080": "v1", "infra/v2:8080": "v2", "infra/v3:8080": "-"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("group filters %v, want %v", got, want)
	}
	if len(doc.VHosts[0].Routes[0].Filters) != 0 {
		t.Errorf("backendRef filters leaked into the route's: %+v", doc.VHosts[0].Routes[0].Filters)
	}
}

// TestFragmentVersionBackendFilters: backendRef filters need version 2, so
// a chaperone older than them rejects the fragment with "upgrade the
// chaperone"; a version 1 fragment that has them is invalid, and a
// fragment naming another filter type on a backend is rejected.
func TestFragmentVersionBackendFilters(t *testing.T) {
	hm := &ghostjson.HeaderModifier{Set: []ghostjson.HeaderValue{{Name: "Backend", Value: "v1"}}}
	f := &Fragment{Version: FragmentVersion, Gateway: object.Ref{Namespace: "infra", Name: "gw"},
		Route: RouteRef{Namespace: "infra", Name: "r"},
		Rules: []Rule{{Matches: []ghostjson.Match{{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}},
			Backends: []BackendRef{{Namespace: "infra", Name: "v1", Port: 8080, Weight: 1,
				Filters: []Filter{{Type: ghostjson.FilterRequestHeaderModifier, RequestHeaderModifier: hm}}}}}}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	f.Rules[0].Backends[0].Filters[0] = Filter{Type: ghostjson.FilterURLRewrite, URLRewrite: &ghostjson.Rewrite{Hostname: "x.example"}}
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), `rules[0].backends[0].filters[0].type: Unsupported value: "URLRewrite": supported values: "RequestHeaderModifier"`) {
		t.Errorf("URLRewrite on a backend: %v", err)
	}
}
