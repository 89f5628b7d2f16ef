package routing

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

func TestSessionCookiePath(t *testing.T) {
	for _, tc := range []struct {
		typ, value, want string
	}{
		{ghostjson.PathPrefix, "/", "/"},
		{ghostjson.PathPrefix, "/cart", "/cart"},
		{ghostjson.PathPrefix, "/cart/", "/cart"},
		{ghostjson.PathExact, "/cart/checkout", "/cart/checkout"},
		{ghostjson.PathExact, "/a;b/c", "/"},
		{ghostjson.PathExact, "/x/a;b", "/x"},
		// GEP-1619's example: the longest non-regex prefix.
		{ghostjson.PathRegularExpression, "/p1/p2/.*/p3", "/p1/p2"},
		{ghostjson.PathRegularExpression, "^/api/v[0-9]+/items", "/api"},
		{ghostjson.PathRegularExpression, "/foo.*", "/"},
		{ghostjson.PathRegularExpression, ".*", "/"},
		{ghostjson.PathRegularExpression, "/static/img", "/static/img"},
	} {
		if got := SessionCookiePath(ghostjson.PathMatch{Type: tc.typ, Value: tc.value}); got != tc.want {
			t.Errorf("SessionCookiePath(%s %q) = %q, want %q", tc.typ, tc.value, got, tc.want)
		}
	}
}

func TestNormalizeSessionPersistence(t *testing.T) {
	scope := SessionScope("shop", "web", 2, "")
	if scope != "shop/web/2" {
		t.Fatalf("SessionScope = %q", scope)
	}
	if named := SessionScope("shop", "web", 2, "cart"); named != "shop/web/cart" {
		t.Fatalf("SessionScope with a rule name = %q", named)
	}
	def := normalizeSessionPersistence("shop", "web", 2, "", &gatewayv1.SessionPersistence{})
	if def.Type != SessionTypeCookie || def.SessionName != DefaultSessionCookieName(scope) || def.AbsoluteTimeoutMs != 0 || def.Permanent {
		t.Errorf("defaults: %+v", def)
	}
	if n := def.SessionName; !strings.HasPrefix(n, DefaultSessionCookiePrefix) || len(n) != len(DefaultSessionCookiePrefix)+16 {
		t.Errorf("default cookie name %q", n)
	}
	if DefaultSessionCookieName("shop/web/1") == def.SessionName {
		t.Error("two rules share a default cookie name")
	}
	full := normalizeSessionPersistence("shop", "web", 0, "", &gatewayv1.SessionPersistence{SessionName: ptr("cart"), AbsoluteTimeout: ptr(gatewayv1.Duration("1h30m")),
		CookieConfig: &gatewayv1.CookieConfig{LifetimeType: ptr(gatewayv1.PermanentCookieLifetimeType)}})
	if *full != (SessionPersistence{Type: SessionTypeCookie, SessionName: "cart", AbsoluteTimeoutMs: 5400000, Permanent: true}) {
		t.Errorf("full: %+v", full)
	}
	hdr := normalizeSessionPersistence("shop", "web", 0, "", &gatewayv1.SessionPersistence{Type: ptr(gatewayv1.HeaderBasedSessionPersistence), AbsoluteTimeout: ptr(gatewayv1.Duration("30s"))})
	if *hdr != (SessionPersistence{Type: SessionTypeHeader, SessionName: DefaultSessionCookieName("shop/web/0"), AbsoluteTimeoutMs: 30000}) {
		t.Errorf("header: %+v", hdr)
	}
}

// TestSessionPersistenceThroughAttachAndResolve: a rule's session
// persistence reaches the fragment and ghost.json, one entry
// per match with the match's cookie path and the rule's scope, valid
// against ghost.schema.json.
func TestSessionPersistenceThroughAttachAndResolve(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	r := route("infra", "shop", rules(
		gatewayv1.HTTPRouteRule{
			Matches:     []gatewayv1.HTTPRouteMatch{prefix("/cart"), exact("/checkout")},
			BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, ptr(int32(50))), backend("", "web2", 80, ptr(int32(50)))},
			SessionPersistence: &gatewayv1.SessionPersistence{SessionName: ptr("cart"), AbsoluteTimeout: ptr(gatewayv1.Duration("10m")),
				CookieConfig: &gatewayv1.CookieConfig{LifetimeType: ptr(gatewayv1.PermanentCookieLifetimeType)}},
		},
		gatewayv1.HTTPRouteRule{
			Matches:     []gatewayv1.HTTPRouteMatch{prefix("/")},
			BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)},
		},
		gatewayv1.HTTPRouteRule{
			Name:               ptr(gatewayv1.SectionName("api")),
			Matches:            []gatewayv1.HTTPRouteMatch{prefix("/api")},
			BackendRefs:        []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)},
			SessionPersistence: &gatewayv1.SessionPersistence{Type: ptr(gatewayv1.HeaderBasedSessionPersistence), SessionName: ptr("X-Session")},
		},
	))
	if errs := ValidateHTTPRoute(r); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	objs := &Objects{Services: []*corev1.Service{service("infra", "web"), service("infra", "web2")}}
	f, err := Attach(gw, r, objs)
	if err != nil || !f.Accepted() {
		t.Fatalf("attach: %v %+v", err, f)
	}
	want := &SessionPersistence{Type: SessionTypeCookie, SessionName: "cart", AbsoluteTimeoutMs: 600000, Permanent: true}
	if got := f.Rules[0].SessionPersistence; got == nil || *got != *want || f.Rules[1].SessionPersistence != nil {
		t.Fatalf("fragment rules: %+v, %+v", f.Rules[0].SessionPersistence, f.Rules[1].SessionPersistence)
	}
	data, err := MarshalFragment(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalFragment(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Rules[0].SessionPersistence; got == nil || *got != *want {
		t.Fatalf("round trip: %+v", got)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown type", `"type": "Cookie"`, `"type": "Query"`, `rules[0].sessionPersistence.type: Unsupported value: "Query"`},
		{"permanent header", `"type": "Cookie"`, `"type": "Header"`, `rules[0].sessionPersistence.permanent: Forbidden: a header session has no cookie`},
		{"bad cookie name", `"sessionName": "cart"`, `"sessionName": "a;b"`, `rules[0].sessionPersistence.sessionName: Invalid value: "a;b"`},
		{"millisecond timeout", `"absoluteTimeoutMs": 600000`, `"absoluteTimeoutMs": 600001`, "rules[0].sessionPersistence.absoluteTimeoutMs: Invalid value: 600001"},
		{"permanent without timeout", `"absoluteTimeoutMs": 600000,`, ``, "rules[0].sessionPersistence.absoluteTimeoutMs: Required value"},
		{"unknown field", `"sessionName": "cart"`, `"sessionName": "cart", "idleTimeoutMs": 1000`, `unknown field "idleTimeoutMs"`},
	} {
		bad := strings.Replace(string(data), tc.from, tc.to, 1)
		if bad == string(data) {
			t.Fatalf("%s: %q not in the fragment:\n%s", tc.name, tc.from, data)
		}
		if _, err := UnmarshalFragment([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}

	tb, err := Merge(gw, []*Fragment{back})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, objs)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ghostjson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, ghostSchema(t), out)
	got := map[string]*ghostjson.SessionPersistence{}
	for _, vh := range doc.VHosts {
		for _, rt := range vh.Routes {
			got[rt.Match.Path.Value] = rt.Session
		}
	}
	for path, wantPath := range map[string]string{"/cart": "/cart", "/checkout": "/checkout"} {
		sp := got[path]
		if sp == nil || *sp != (ghostjson.SessionPersistence{Type: "Cookie", Name: "cart", Path: wantPath, Scope: "infra/shop/0", AbsoluteTimeoutMs: 600000, Permanent: true}) {
			t.Errorf("route %s: %+v", path, sp)
		}
	}
	if got["/"] != nil {
		t.Errorf("the rule without session persistence has %+v", got["/"])
	}
	if sp := got["/api"]; sp == nil || *sp != (ghostjson.SessionPersistence{Type: "Header", Name: "X-Session", Scope: "infra/shop/api"}) {
		t.Errorf("header rule: %+v", sp)
	}
	if !strings.Contains(string(out), `"sessionPersistence":{"type":"Header","name":"X-Session","scope":"infra/shop/api"}`) {
		t.Errorf("ghost.json:\n%s", out)
	}
	if !strings.Contains(string(out), `"sessionPersistence":{"type":"Cookie","name":"cart","path":"/cart","scope":"infra/shop/0","absoluteTimeoutMs":600000,"permanent":true}`) {
		t.Errorf("ghost.json:\n%s", out)
	}
	back2, err := ghostjson.Unmarshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if sp := back2.VHosts[0].Routes[0].Session; sp == nil {
		t.Error("ghostjson.Unmarshal lost the session persistence")
	}
}
