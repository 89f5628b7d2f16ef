package routing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// ghostSchema compiles ghost/ghost.schema.json, the contract with the VMOD.
func ghostSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "ghost", "ghost.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(path)
	if err != nil {
		t.Fatalf("compile %s: %v", path, err)
	}
	return sch
}

// checkSchema validates ghost.json bytes against the schema.
func checkSchema(t testing.TB, sch *jsonschema.Schema, data []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("ghost.json does not validate against ghost.schema.json: %v\n%s", err, data)
	}
}

// resolveFixture is a Gateway with every feature ghost.json carries.
func resolveFixture() (*gatewayv1.Gateway, []*gatewayv1.HTTPRoute, *Objects) {
	gw := gateway(fromNS(listener("any", 80, ""), gatewayv1.NamespacesFromAll, nil), listener("foo", 80, "foo.example.com"), listener("alt", 8080, ""))
	headerMatch := prefix("/h")
	headerMatch.Headers = []gatewayv1.HTTPHeaderMatch{{Name: "X-Env", Value: "prod"}, {Type: ptr(gatewayv1.HeaderMatchRegularExpression), Name: "X-Id", Value: "^[0-9]+$"}}
	headerMatch.QueryParams = []gatewayv1.HTTPQueryParamMatch{{Name: "q", Value: "1"}}
	headerMatch.Method = ptr(gatewayv1.HTTPMethodGet)
	routes := []*gatewayv1.HTTPRoute{
		route("infra", "main", rules(
			gatewayv1.HTTPRouteRule{
				Matches: []gatewayv1.HTTPRouteMatch{prefix("/"), headerMatch},
				Filters: []gatewayv1.HTTPRouteFilter{
					{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
						Set: []gatewayv1.HTTPHeader{{Name: "X-A", Value: "1"}}, Add: []gatewayv1.HTTPHeader{{Name: "X-B", Value: "2"}}, Remove: []string{"X-C"}}},
					{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-R", Value: "r"}}}},
					{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr(gatewayv1.PreciseHostname("internal.example.com")),
						Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/v2")}}},
					{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{
						BackendRef: gatewayv1.BackendObjectReference{Name: "mirror", Port: ptr(int32(80))}, Percent: ptr(int32(10))}},
				},
				BackendRefs: []gatewayv1.HTTPBackendRef{
					backend("", "web", 80, ptr(int32(3))),
					backend("", "web", 8443, nil),
					backend("", "empty", 80, nil),
					backend("", "missing", 80, nil),
					backend("other", "web", 80, nil),
					backend("", "ext", 80, nil),
				},
				Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: ptr(gatewayv1.Duration("10s")), BackendRequest: ptr(gatewayv1.Duration("2s"))},
			},
			gatewayv1.HTTPRouteRule{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchRegularExpression), Value: ptr(`^/old/.*`)}}},
				Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{
					Scheme: ptr("https"), Hostname: ptr(gatewayv1.PreciseHostname("new.example.com")), Port: ptr(int32(443)),
					Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr("/new")}, StatusCode: ptr(301)}}},
			},
		)),
		route("apps", "foo", section("foo"), hostnames("foo.example.com"), created(1), rules(gatewayv1.HTTPRouteRule{
			Matches:     []gatewayv1.HTTPRouteMatch{exact("/exact")},
			BackendRefs: []gatewayv1.HTTPBackendRef{backend("infra", "web", 80, nil)},
		})),
		route("apps", "denied", section("foo")), // From Same: not accepted
	}
	routes[1].Spec.ParentRefs[0].SectionName = nil
	objs := &Objects{
		Namespaces: []*corev1.Namespace{namespace("infra", nil), namespace("apps", nil)},
		Services: []*corev1.Service{
			service("infra", "web", corev1.ServicePort{Name: "http", Port: 80}, corev1.ServicePort{Name: "https", Port: 8443}),
			service("infra", "empty"), service("infra", "mirror"), service("other", "web"),
			{ObjectMeta: service("infra", "ext").ObjectMeta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org", Ports: []corev1.ServicePort{{Port: 80}}}},
		},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice("infra", "web", "web-v4", discoveryv1.AddressTypeIPv4, "http", 8080,
				ep(nil, "10.0.0.2"), ep(ptr(true), "10.0.0.1"), ep(ptr(false), "10.0.0.9"), ep(ptr(true), "10.0.0.1")),
			slice("infra", "web", "web-v6", discoveryv1.AddressTypeIPv6, "http", 8080, ep(ptr(true), "fd00::1")),
			slice("infra", "web", "web-https", discoveryv1.AddressTypeIPv4, "https", 443, ep(ptr(true), "10.0.0.1")),
			slice("infra", "web", "web-fqdn", discoveryv1.AddressTypeFQDN, "http", 8080, ep(ptr(true), "web.example.org")),
			slice("infra", "empty", "empty", discoveryv1.AddressTypeIPv4, "", 80, ep(ptr(false), "10.0.1.1")),
			slice("infra", "mirror", "mirror", discoveryv1.AddressTypeIPv4, "", 9000, ep(nil, "10.0.2.1")),
			slice("other", "web", "other", discoveryv1.AddressTypeIPv4, "", 80, ep(nil, "10.0.3.1")),
			slice("infra", "ext", "ext", discoveryv1.AddressTypeIPv4, "", 80, ep(nil, "10.0.4.1")),
		},
	}
	return gw, routes, objs
}

func buildGhost(t testing.TB, gw *gatewayv1.Gateway, routes []*gatewayv1.HTTPRoute, objs *Objects) []byte {
	t.Helper()
	var frags []*Fragment
	for _, r := range routes {
		f, err := Attach(gw, r, objs)
		if err != nil {
			t.Fatal(err)
		}
		// Through the wire format, as the chaperone sees it.
		data, err := MarshalFragment(f)
		if err != nil {
			t.Fatal(err)
		}
		if f, err = UnmarshalFragment(data); err != nil {
			t.Fatal(err)
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
	return data
}

func TestResolve(t *testing.T) {
	gw, routes, objs := resolveFixture()
	data := buildGhost(t, gw, routes, objs)
	checkSchema(t, ghostSchema(t), data)
	doc, err := ghostjson.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	// the endpoints each group and mirror resolves to through the table
	table := doc.Table()
	groups := map[string]string{}
	var vhosts []string
	for _, v := range doc.VHosts {
		vhosts = append(vhosts, v.Hostname+"@"+strings.Join(v.Listeners, ","))
		for _, r := range v.Routes {
			for _, g := range r.Backends {
				eps, _ := json.Marshal(ghostjson.Endpoints(table, g.Backend, g.Unresolved))
				groups[g.Backend] = string(eps) + g.Unresolved
			}
			for _, f := range r.Filters {
				if m := f.RequestMirror; m != nil {
					eps, _ := json.Marshal(ghostjson.Endpoints(table, m.Backend, m.Unresolved))
					groups["mirror "+m.Backend] = string(eps) + m.Unresolved
				}
			}
		}
	}
	if got, want := strings.Join(vhosts, " "), "*@port-80,port-8080 foo.example.com@port-80"; got != want {
		t.Errorf("vhosts = %s, want %s", got, want)
	}
	want := map[string]string{
		"infra/web:80":           `[{"address":"10.0.0.1","port":8080},{"address":"10.0.0.2","port":8080},{"address":"fd00::1","port":8080}]`,
		"infra/web:8443":         `[{"address":"10.0.0.1","port":443}]`,
		"infra/empty:80":         `[]`,
		"infra/missing:80":       `nullBackendNotFound`,
		"other/web:80":           `nullRefNotPermitted`, // no ReferenceGrant
		"infra/ext:80":           `[]`,                  // ExternalName
		"mirror infra/mirror:80": `[{"address":"10.0.2.1","port":9000}]`,
	}
	for k, v := range want {
		if groups[k] != v {
			t.Errorf("group %s endpoints = %s, want %s", k, groups[k], v)
		}
	}
	// the table: each Service port sent to, once, sorted by name; nothing
	// for unresolved references
	var names []string
	for _, b := range doc.Backends {
		names = append(names, b.Name)
	}
	if got, want := strings.Join(names, " "), "infra/empty:80 infra/ext:80 infra/mirror:80 infra/web:80 infra/web:8443"; got != want {
		t.Errorf("backends table = %s, want %s", got, want)
	}
	if n := strings.Count(string(data), `"address":"fd00::1"`); n != 1 {
		t.Errorf("endpoint fd00::1 written %d times, want once (in the table)", n)
	}
	// apps/foo is attached to the catch-all listener with hostname
	// foo.example.com, but that hostname belongs to the foo listener (which
	// allows infra routes only): isolation means apps/foo is served nowhere.
	for _, v := range doc.VHosts {
		var names []string
		for _, r := range v.Routes {
			names = append(names, r.Name)
		}
		if got := strings.Join(names, " "); got != "infra/main/0/1 infra/main/0/0 infra/main/1/0" {
			t.Errorf("%s routes = %s", v.Hostname, got)
		}
	}
}

// TestResolveDeterministic checks that input order does not change a byte.
func TestResolveDeterministic(t *testing.T) {
	gw, routes, objs := resolveFixture()
	want := buildGhost(t, gw, routes, objs)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		r.Shuffle(len(routes), func(i, j int) { routes[i], routes[j] = routes[j], routes[i] })
		r.Shuffle(len(objs.Services), func(i, j int) { objs.Services[i], objs.Services[j] = objs.Services[j], objs.Services[i] })
		r.Shuffle(len(objs.EndpointSlices), func(i, j int) {
			objs.EndpointSlices[i], objs.EndpointSlices[j] = objs.EndpointSlices[j], objs.EndpointSlices[i]
		})
		for _, es := range objs.EndpointSlices {
			r.Shuffle(len(es.Endpoints), func(i, j int) { es.Endpoints[i], es.Endpoints[j] = es.Endpoints[j], es.Endpoints[i] })
		}
		if got := buildGhost(t, gw, routes, objs); !bytes.Equal(got, want) {
			t.Fatalf("output changed with input order:\n%s\nwant\n%s", got, want)
		}
	}
	if os.Getenv("GHOST_GOLDEN") != "" {
		t.Logf("%s", want)
	}
}

func TestFragmentRoundTrip(t *testing.T) {
	gw, routes, objs := resolveFixture()
	f, err := Attach(gw, routes[0], objs)
	if err != nil {
		t.Fatal(err)
	}
	data, err := MarshalFragment(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := UnmarshalFragment(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := MarshalFragment(g)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Fatalf("round trip changed the fragment:\n%s\n%s", data, again)
	}
	bad := []struct{ name, data, want string }{
		{"version", strings.Replace(string(data), `"version": 1`, `"version": 4`, 1), "version is 4"},
		{"unknown field", strings.Replace(string(data), `"version": 1,`, `"version": 1, "extra": true,`, 1), "unknown field"},
		{"bad regex", strings.Replace(string(data), `^/old/.*`, `(?=x)`, 1), "rules[1].matches[0].path.value"},
		{"bad weight", strings.Replace(string(data), `"weight": 3`, `"weight": -3`, 1), "rules[0].backends[0].weight"},
		{"bad header", strings.Replace(string(data), `"x-env"`, `"x env"`, 1), "rules[0].matches[1].headers[0].name"},
		{"not json", "{", "unmarshal fragment"},
	}
	for _, b := range bad {
		if _, err := UnmarshalFragment([]byte(b.data)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err = %v, want %q", b.name, err, b.want)
		}
	}
}

// TestResolveFollowsCluster checks that Resolve re-checks Services and
// ReferenceGrants that were missing at attach time, but never resolves a
// reference of the wrong kind.
func TestResolveFollowsCluster(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	r := route("infra", "r", rules(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{
		backend("", "later", 80, nil),
		backend("other", "granted-later", 80, nil),
		{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Group: ptr(gatewayv1.Group("")), Kind: ptr(gatewayv1.Kind("ConfigMap")), Name: "later", Port: ptr(int32(80))}}},
	}}))
	f, err := Attach(gw, r, &Objects{})
	if err != nil {
		t.Fatal(err)
	}
	if got := condition(f, gatewayv1.RouteConditionResolvedRefs); got != "!BackendNotFound" {
		t.Fatalf("ResolvedRefs = %s", got)
	}
	tb, err := Merge(gw, []*Fragment{f})
	if err != nil {
		t.Fatal(err)
	}
	now := &Objects{
		Services:        []*corev1.Service{service("infra", "later"), service("other", "granted-later")},
		ReferenceGrants: []*gatewayv1.ReferenceGrant{grant("other", "infra", "")},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice("infra", "later", "a", discoveryv1.AddressTypeIPv4, "", 8080, ep(nil, "10.0.0.1")),
			slice("other", "granted-later", "b", discoveryv1.AddressTypeIPv4, "", 8080, ep(nil, "10.0.0.2")),
		},
	}
	doc, err := Resolve(tb, now)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	table := doc.Table()
	for _, g := range doc.VHosts[0].Routes[0].Backends {
		got = append(got, len(ghostjson.Endpoints(table, g.Backend, g.Unresolved)))
	}
	if fmt.Sprint(got) != "[1 1 0]" {
		t.Errorf("endpoints per group = %v, want [1 1 0]", got)
	}
	if g := doc.VHosts[0].Routes[0].Backends[2]; g.Unresolved != ghostjson.UnresolvedInvalidKind {
		t.Errorf("the ConfigMap reference = %+v, want unresolved InvalidKind", g)
	}
}

// TestResolveNoObjects: with nil objects nothing is looked up (the data
// source without resolve_endpoints): references name entries of the table,
// which have no endpoints, and only an InvalidKind reference is marked.
func TestResolveNoObjects(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	r := route("infra", "r", rules(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{
		backend("", "web", 80, nil),
		backend("other", "web", 80, nil),
		{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Group: ptr(gatewayv1.Group("")), Kind: ptr(gatewayv1.Kind("ConfigMap")), Name: "cm", Port: ptr(int32(80))}}},
	}}))
	f, err := Attach(gw, r, &Objects{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Merge(gw, []*Fragment{f})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ghostjson.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range doc.VHosts[0].Routes[0].Backends {
		got = append(got, g.Backend+"="+g.Unresolved)
	}
	if want := "[infra/web:80= other/web:80= infra/cm:80=InvalidKind]"; fmt.Sprint(got) != want {
		t.Errorf("groups = %v, want %s", got, want)
	}
	var table []string
	for _, b := range doc.Backends {
		table = append(table, fmt.Sprintf("%s:%d", b.Name, len(b.Endpoints)))
	}
	if want := "[infra/web:80:0 other/web:80:0]"; fmt.Sprint(table) != want {
		t.Errorf("table = %v, want %s", table, want)
	}
}
