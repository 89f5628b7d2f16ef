package routing

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

func TestValidateCORS(t *testing.T) {
	origins := func(o ...string) []gatewayv1.CORSOrigin {
		out := make([]gatewayv1.CORSOrigin, len(o))
		for i, s := range o {
			out[i] = gatewayv1.CORSOrigin(s)
		}
		return out
	}
	headers := func(h ...string) []gatewayv1.HTTPHeaderName {
		out := make([]gatewayv1.HTTPHeaderName, len(h))
		for i, s := range h {
			out[i] = gatewayv1.HTTPHeaderName(s)
		}
		return out
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = "https://a" + strings.Repeat("b", i) + ".example"
	}
	for _, tc := range []struct {
		name string
		c    gatewayv1.HTTPCORSFilter
		want string // "" valid
	}{
		{"empty", gatewayv1.HTTPCORSFilter{}, ""},
		{"conformance", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://www.foo.com", "https://*.bar.com"),
			AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"GET", "OPTIONS"}, AllowHeaders: headers("x-header-1", "x-header-2"),
			ExposeHeaders: headers("x-header-3"), AllowCredentials: ptr(true), MaxAge: 3600}, ""},
		{"wildcards", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("*"), AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*"},
			AllowHeaders: headers("*"), ExposeHeaders: headers("*")}, ""},
		{"wildcard host with port", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("http://*:8080", "https://API.Example.com:8443")}, ""},
		{"origin without scheme", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("www.foo.com")},
			`cors.allowOrigins[0]: Invalid value: "www.foo.com": must be scheme://host[:port] with scheme http or https`},
		{"origin with path", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://www.foo.com/")},
			`cors.allowOrigins[0]: Invalid value: "https://www.foo.com/": must be scheme://host[:port]`},
		{"origin ftp", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("ftp://www.foo.com")}, `cors.allowOrigins[0]: Invalid value: "ftp://www.foo.com"`},
		{"wildcard inside", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://www.*.com")}, `cors.allowOrigins[0]: Invalid value: "https://www.*.com"`},
		{"origin port", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a.example:99999")},
			`cors.allowOrigins[0]: Invalid value: "https://a.example:99999": port 99999 is not from 1 to 65535`},
		{"star with others", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a.example", "*")},
			`cors.allowOrigins[1]: Invalid value: "*": "*" allows every origin: keep it alone`},
		{"same origin twice", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://a.example", "https://A.example:443")},
			`cors.allowOrigins[1]: Invalid value: "https://A.example:443": is the origin of allowOrigins[0] (https://a.example): remove one`},
		{"origin too long", gatewayv1.HTTPCORSFilter{AllowOrigins: origins("https://" + strings.Repeat("a.", 123) + "example")},
			`cors.allowOrigins[0]: Too long: may not be more than 253 bytes`},
		{"too many origins", gatewayv1.HTTPCORSFilter{AllowOrigins: origins(many...)}, "cors.allowOrigins: Too many: 65: must have at most 64 items"},
		{"lower-case method", gatewayv1.HTTPCORSFilter{AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"get"}},
			`cors.allowMethods[0]: Invalid value: "get": must be one of GET, HEAD, POST`},
		{"method twice", gatewayv1.HTTPCORSFilter{AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"GET", "GET"}},
			`cors.allowMethods[1]: Invalid value: "GET": repeats allowMethods[0] (GET): remove one`},
		{"star method with others", gatewayv1.HTTPCORSFilter{AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*", "GET"}},
			`cors.allowMethods[0]: Invalid value: "*": "*" allows every value: keep it alone`},
		{"bad header", gatewayv1.HTTPCORSFilter{AllowHeaders: headers("x header")},
			`cors.allowHeaders[0]: Invalid value: "x header": must be a header name`},
		{"header twice in other case", gatewayv1.HTTPCORSFilter{ExposeHeaders: headers("X-A", "x-a")},
			`cors.exposeHeaders[1]: Invalid value: "x-a": repeats exposeHeaders[0] (X-A): remove one`},
		{"expose star with credentials", gatewayv1.HTTPCORSFilter{ExposeHeaders: headers("*"), AllowCredentials: ptr(true)},
			`cors.exposeHeaders: Invalid value: "*": with credentials allowed, browsers read "*" as a header named "*"`},
		{"negative max age", gatewayv1.HTTPCORSFilter{MaxAge: -1}, `cors.maxAge: Invalid value: -1: must be 1 or more seconds`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := route("infra", "r")
			r.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &tc.c}}
			err := ValidateHTTPRoute(r).ToAggregate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "spec.rules[0].filters[0]."+tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if err != nil {
				return
			}
			// what routing accepts, ghost accepts
			if err := normalizeCORS(&tc.c).Check(); err != nil {
				t.Errorf("ghostjson rejects the normalised filter: %v", err)
			}
		})
	}
}

func TestNormalizeCORS(t *testing.T) {
	got := normalizeCORS(&gatewayv1.HTTPCORSFilter{
		AllowOrigins:  []gatewayv1.CORSOrigin{"https://WWW.Foo.com:443", "http://*.bar.com:80", "http://a.example:8080", "https://b.example:80"},
		AllowMethods:  []gatewayv1.HTTPMethodWithWildcard{"PUT"},
		AllowHeaders:  []gatewayv1.HTTPHeaderName{"X-Header-1"},
		ExposeHeaders: []gatewayv1.HTTPHeaderName{"X-Header-3"},
	})
	want := &ghostjson.CORS{
		AllowOrigins:  []string{"https://www.foo.com", "http://*.bar.com", "http://a.example:8080", "https://b.example:80"},
		AllowMethods:  []string{"PUT"},
		AllowHeaders:  []string{"x-header-1"},
		ExposeHeaders: []string{"x-header-3"},
		MaxAge:        5,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if c := normalizeCORS(&gatewayv1.HTTPCORSFilter{MaxAge: 600, AllowCredentials: ptr(true)}); c.MaxAge != 600 || !c.AllowCredentials {
		t.Errorf("got %+v", c)
	}
}

// TestConformanceCORSDocument takes the suite's HTTPRouteCORS manifests
// through Attach, Merge and Resolve: every route is accepted, the
// ghost.json written is valid against ghost.schema.json, and each rule
// carries its CORS filter in ghost's form (maxAge 5 when unset).
func TestConformanceCORSDocument(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	m := readManifests(t, filepath.Join(dir, "tests", "httproute-cors.yaml"))
	objs := &Objects{Namespaces: base.namespaces, Services: base.services}
	var gw *gatewayv1.Gateway
	for _, g := range base.gateways {
		if g.Name == "same-namespace" {
			gw = g
		}
	}
	var frags []*Fragment
	for _, r := range m.routes {
		f, err := Attach(gw, r, objs)
		if err != nil || !f.Accepted() {
			t.Fatalf("%s: %v %+v", r.Name, err, f)
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
	got := map[string]*ghostjson.CORS{}
	for _, vh := range doc.VHosts {
		for _, r := range vh.Routes {
			for _, f := range r.Filters {
				if f.Type == ghostjson.FilterCORS {
					got[r.Match.Path.Value] = f.CORS
				}
			}
		}
	}
	want := map[string]*ghostjson.CORS{
		"/cors-1": {AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com"}, AllowMethods: []string{"GET", "OPTIONS"},
			AllowHeaders: []string{"x-header-1", "x-header-2"}, ExposeHeaders: []string{"x-header-3", "x-header-4"}, AllowCredentials: true, MaxAge: 3600},
		"/cors-2":                               {AllowOrigins: []string{"https://www.foo.com"}, AllowMethods: []string{"*"}, MaxAge: 5},
		"/cors-wildcard-origin":                 {AllowOrigins: []string{"*"}, AllowMethods: []string{"PUT"}, MaxAge: 5},
		"/cors-wildcard-methods-headers":        {AllowOrigins: []string{"*"}, AllowMethods: []string{"*"}, AllowHeaders: []string{"*"}, AllowCredentials: true, MaxAge: 5},
		"/cors-wildcard-methods-headers-unauth": {AllowOrigins: []string{"*"}, AllowMethods: []string{"*"}, AllowHeaders: []string{"*"}, MaxAge: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CORS filters by path:\n got %s\nwant %s", spew(got), spew(want))
	}
}

func spew(m map[string]*ghostjson.CORS) string {
	var b strings.Builder
	for k, v := range m {
		fmt.Fprintf(&b, "%s=%+v ", k, *v)
	}
	return b.String()
}
