package routing

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

func names(n ...string) *[]string {
	if n == nil {
		n = []string{}
	}
	return &n
}

func TestValidateCachePolicy(t *testing.T) {
	long := strings.Repeat("a", 257)
	many := func(n int) *[]string {
		l := make([]string, n)
		for i := range l {
			l[i] = "h" + strings.Repeat("x", i)
		}
		return &l
	}
	for _, tc := range []struct {
		name string
		c    *CachePolicy
		want string // "" = valid; else every part must be in the error
	}{
		{"nil", nil, ""},
		{"empty", &CachePolicy{}, ""},
		{"everything", &CachePolicy{Enabled: ptr(true), TTL: ptr("1h30m"), ForceTTL: ptr(true), Grace: ptr("500ms"), Keep: ptr("0s"),
			QueryParametersExclude: names("utm_source", "gclid"), KeyHeaders: names("Accept-Language"), StripCookies: names("_ga", "*"),
			AllowAuthorization: ptr(true), TagHeader: ptr("Surrogate-Key"), StatusHeader: ptr("X-Cache")}, ""},
		{"include empty", &CachePolicy{QueryParametersInclude: names()}, ""},
		{"no headers", &CachePolicy{TagHeader: ptr(""), StatusHeader: ptr("")}, ""},
		{"go duration", &CachePolicy{TTL: ptr("1.5h")}, `cache.ttl: Invalid value: "1.5h": must be a Gateway API duration such as "10s"`},
		{"negative", &CachePolicy{Grace: ptr("-1s")}, `cache.grace: Invalid value: "-1s"`},
		{"days", &CachePolicy{Keep: ptr("1d")}, `cache.keep: Invalid value: "1d"`},
		{"include and exclude", &CachePolicy{QueryParametersInclude: names("a"), QueryParametersExclude: names("b")},
			`cache.queryParametersExclude: Invalid value: ["b"]: conflicts with queryParametersInclude: set one of them`},
		{"empty parameter", &CachePolicy{QueryParametersInclude: names("")}, `cache.queryParametersInclude[0]: Invalid value: "": must not be empty`},
		{"parameter with =", &CachePolicy{QueryParametersExclude: names("a=b")}, `cache.queryParametersExclude[0]: Invalid value: "a=b": must be a query parameter name`},
		{"duplicate parameter", &CachePolicy{QueryParametersExclude: names("a", "a")}, `cache.queryParametersExclude[1]: Duplicate value: "a"`},
		{"too many parameters", &CachePolicy{QueryParametersInclude: many(65)}, `cache.queryParametersInclude: Too many: 65: must have at most 64 items`},
		{"bad key header", &CachePolicy{KeyHeaders: names("Accept Language")}, `cache.keyHeaders[0]: Invalid value: "Accept Language": must be an HTTP header name`},
		{"duplicate key header", &CachePolicy{KeyHeaders: names("Accept", "accept")}, `cache.keyHeaders[1]: Duplicate value: "accept"`},
		{"too many key headers", &CachePolicy{KeyHeaders: many(17)}, `cache.keyHeaders: Too many: 17: must have at most 16 items`},
		{"long key header", &CachePolicy{KeyHeaders: names(long)}, `is longer than 256 characters`},
		{"bad cookie", &CachePolicy{StripCookies: names("a;b")}, `cache.stripCookies[0]: Invalid value: "a;b": must be a cookie name`},
		{"bad tag header", &CachePolicy{TagHeader: ptr("Cache Tag")}, `cache.tagHeader: Invalid value: "Cache Tag": must be an HTTP header name`},
		{"bad status header", &CachePolicy{StatusHeader: ptr("X:Cache")}, `cache.statusHeader: Invalid value: "X:Cache"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCachePolicy(field.NewPath("cache"), tc.c).ToAggregate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want %s", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestParseCachePolicy(t *testing.T) {
	p := field.NewPath("a")
	c, err := ParseCachePolicy(p, `{"ttl":"5m","queryParametersInclude":[],"keyHeaders":["X-Device"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if *c.TTL != "5m" || c.QueryParametersInclude == nil || len(*c.QueryParametersInclude) != 0 || c.QueryParametersExclude != nil {
		t.Errorf("parsed %+v", c)
	}
	// The annotation the provider writes reads back the same, an empty
	// include list (no query in the key) included.
	s, err := MarshalCachePolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ttl":"5m","queryParametersInclude":[],"keyHeaders":["X-Device"]}`; s != want {
		t.Errorf("marshal = %s, want %s", s, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"ttl":"5m","ttlSeconds":3}`, `unknown field "ttlSeconds"`},
		{`{"ttl":5}`, `cannot unmarshal number`},
		{`{"ttl":"5 min"}`, `a.ttl: Invalid value: "5 min"`},
		{`{} {}`, `trailing data`},
		{`not json`, `must be the JSON of a cache policy`},
	} {
		if _, err := ParseCachePolicy(p, tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCachePolicy(%s) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestEffectiveCache(t *testing.T) {
	def := func(mod func(*ghostjson.CachePolicy)) *ghostjson.CachePolicy {
		p := &ghostjson.CachePolicy{TTLMs: 120000, GraceMs: 10000, QueryKey: ghostjson.QueryKeyAll, TagHeader: "cache-tag"}
		if mod != nil {
			mod(p)
		}
		return p
	}
	gw := &CachePolicy{TTL: ptr("10m"), QueryParametersExclude: names("utm_source"), KeyHeaders: names("Accept-Language"), StatusHeader: ptr("X-Cache")}
	for _, tc := range []struct {
		name        string
		gateway     *CachePolicy
		rule        *CachePolicy
		want        *ghostjson.CachePolicy
		description string
	}{
		{"nothing", nil, nil, nil, "no policy anywhere: passed"},
		{"gateway block, defaults", &CachePolicy{}, nil, def(nil), "a present block is enabled with the defaults"},
		{"rule block, defaults", nil, &CachePolicy{}, def(nil), "a rule's block alone caches"},
		{"gateway disabled", &CachePolicy{Enabled: ptr(false)}, nil, nil, ""},
		{"gateway disabled, rule inherits", &CachePolicy{Enabled: ptr(false), TTL: ptr("1h")}, &CachePolicy{StatusHeader: ptr("X-C")}, nil,
			"a rule without enabled inherits the gateway's false"},
		{"gateway disabled, rule enables", &CachePolicy{Enabled: ptr(false), TTL: ptr("1h")}, &CachePolicy{Enabled: ptr(true)},
			def(func(p *ghostjson.CachePolicy) { p.TTLMs = 3600000 }), "the gateway's other fields are still the defaults"},
		{"rule disabled", gw, &CachePolicy{Enabled: ptr(false), TTL: ptr("1h")}, nil, "false on a rule passes whatever the gateway says"},
		{"inherits field by field", gw, &CachePolicy{Grace: ptr("1m"), StatusHeader: ptr("")},
			def(func(p *ghostjson.CachePolicy) {
				p.TTLMs, p.GraceMs, p.QueryKey, p.QueryParams, p.KeyHeaders = 600000, 60000, ghostjson.QueryKeyExclude, []string{"utm_source"}, []string{"accept-language"}
			}), "header names lower case; an empty status header overrides the gateway's"},
		{"rule include replaces gateway exclude", gw, &CachePolicy{QueryParametersInclude: names("page")},
			def(func(p *ghostjson.CachePolicy) {
				p.TTLMs, p.QueryKey, p.QueryParams, p.KeyHeaders, p.StatusHeader = 600000, ghostjson.QueryKeyInclude, []string{"page"}, []string{"accept-language"}, "x-cache"
			}), ""},
		{"include empty: no query", nil, &CachePolicy{QueryParametersInclude: names()}, def(func(p *ghostjson.CachePolicy) { p.QueryKey = ghostjson.QueryKeyNone }), ""},
		{"exclude empty: all", nil, &CachePolicy{QueryParametersExclude: names()}, def(nil), ""},
		{"key headers emptied by the rule", gw, &CachePolicy{KeyHeaders: names()},
			def(func(p *ghostjson.CachePolicy) {
				p.TTLMs, p.QueryKey, p.QueryParams, p.StatusHeader = 600000, ghostjson.QueryKeyExclude, []string{"utm_source"}, "x-cache"
			}), ""},
		{"everything", &CachePolicy{ForceTTL: ptr(true), AllowAuthorization: ptr(true)},
			&CachePolicy{TTL: ptr("1h"), Keep: ptr("1m"), StripCookies: names("_ga", "*"), TagHeader: ptr("Surrogate-Key")},
			def(func(p *ghostjson.CachePolicy) {
				p.TTLMs, p.ForceTTL, p.KeepMs, p.StripCookies, p.AllowAuthorization, p.TagHeader = 3600000, true, 60000, []string{"_ga", "*"}, true, "surrogate-key"
			}), ""},
		{"no tag header", nil, &CachePolicy{TagHeader: ptr("")}, def(func(p *ghostjson.CachePolicy) { p.TagHeader = "" }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EffectiveCache(tc.gateway, tc.rule)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.description, diff)
			}
			if got != nil {
				got.Name = "x"
				d := &ghostjson.Document{Version: ghostjson.Version, Backends: []ghostjson.Backend{}, CachePolicies: []ghostjson.CachePolicy{*got}, VHosts: []ghostjson.VHost{}}
				if err := d.Check(); err != nil {
					t.Errorf("ghostjson.Check: %v", err)
				}
			}
		})
	}
}

func TestFragmentVersions(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	f, err := Attach(gw, route("infra", "r", rules(gatewayv1.HTTPRouteRule{}, gatewayv1.HTTPRouteRule{})), nil)
	if err != nil {
		t.Fatal(err)
	}
	version := func(data []byte) int {
		var v struct{ Version int }
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		return v.Version
	}
	// Without cache policies: no cache field.
	data, err := MarshalFragment(f)
	if err != nil {
		t.Fatal(err)
	}
	if v := version(data); v != FragmentVersion || strings.Contains(string(data), `"cache"`) {
		t.Errorf("version %d, want %d, no cache:\n%s", v, FragmentVersion, data)
	}
	f.Rules[1].Cache = &CachePolicy{TTL: ptr("1h")}
	if data, err = MarshalFragment(f); err != nil {
		t.Fatal(err)
	}
	if v := version(data); v != FragmentVersion {
		t.Errorf("version %d, want %d", v, FragmentVersion)
	}
	back, err := UnmarshalFragment(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Rules[0].Cache != nil || back.Rules[1].Cache == nil || *back.Rules[1].Cache.TTL != "1h" {
		t.Errorf("round trip lost the policy: %+v", back.Rules)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"version 2", `"version": 1`, `"version": 2`, `version is 2, this build reads version 1: run the chaperone and the provider of one release`},
		{"bad policy", `"ttl": "1h"`, `"ttl": "1 hour"`, `rules[1].cache.ttl: Invalid value: "1 hour"`},
		{"unknown policy field", `"ttl": "1h"`, `"ttl": "1h", "staleIfError": "1h"`, `unknown field "staleIfError"`},
	} {
		bad := strings.Replace(string(data), tc.from, tc.to, 1)
		if bad == string(data) {
			t.Fatalf("%s: %q not in the fragment:\n%s", tc.name, tc.from, data)
		}
		if _, err := UnmarshalFragment([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestMergeRejectsBadCacheAnnotation(t *testing.T) {
	gw := gateway(listener("http", 80, ""))
	gw.Annotations = map[string]string{CachePolicyAnnotation: `{"ttl":"2 minutes"}`}
	_, err := Merge(gw, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`the default cache policy of Gateway infra/gw`, `metadata.annotations[varnishgw.dev/cache-policy].ttl: Invalid value: "2 minutes"`, `fix the Gateway's cache block`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestResolveCachePolicies checks the cachePolicies table: the Gateway's
// default once, named "gateway", shared by the rules that inherit it
// unchanged; a rule's own policy named after the first rule with it;
// passed rules naming none; and the document valid for ghost.
func TestResolveCachePolicies(t *testing.T) {
	gw := gateway(listener("http", 80, ""), listener("shop", 80, "shop.example.com"))
	gw.Annotations = map[string]string{CachePolicyAnnotation: `{"ttl":"5m","statusHeader":"X-Cache"}`}
	rs := []*gatewayv1.HTTPRoute{
		route("infra", "a", rules(
			gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/inherit")}},
			gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/static"), prefix("/img")}},
			gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/api")}},
			gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/same")}},
		)),
		route("infra", "b", hostnames("shop.example.com"), created(1), rules(
			gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/assets")}},
		)),
	}
	own := map[string]map[int]*CachePolicy{
		"a": {1: {TTL: ptr("1h"), QueryParametersInclude: names()}, 2: {Enabled: ptr(false)}, 3: {TTL: ptr("5m")}},
		"b": {0: {TTL: ptr("1h"), QueryParametersInclude: names()}},
	}
	var frags []*Fragment
	for _, r := range rs {
		f, err := Attach(gw, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range own[r.Name] {
			f.Rules[i].Cache = c
		}
		data, err := MarshalFragment(f)
		if err != nil {
			t.Fatal(err)
		}
		if f, err = UnmarshalFragment(data); err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f)
	}
	table, err := Merge(gw, frags)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(table, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ghostjson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, ghostSchema(t), data)
	wantPolicies := []ghostjson.CachePolicy{
		{Name: "gateway", TTLMs: 300000, GraceMs: 10000, QueryKey: "all", TagHeader: "cache-tag", StatusHeader: "x-cache"},
		{Name: "infra/a/1", TTLMs: 3600000, GraceMs: 10000, QueryKey: "none", TagHeader: "cache-tag", StatusHeader: "x-cache"},
	}
	if diff := cmp.Diff(wantPolicies, doc.CachePolicies); diff != "" {
		t.Errorf("cachePolicies (-want +got):\n%s", diff)
	}
	got := map[string]string{}
	for _, v := range doc.VHosts {
		for _, r := range v.Routes {
			got[v.Hostname+" "+r.Name] = r.Cache
		}
	}
	want := map[string]string{
		"* infra/a/0/0": "gateway", "* infra/a/1/0": "infra/a/1", "* infra/a/1/1": "infra/a/1", "* infra/a/2/0": "", "* infra/a/3/0": "gateway",
		"shop.example.com infra/a/0/0": "gateway", "shop.example.com infra/a/1/0": "infra/a/1", "shop.example.com infra/a/1/1": "infra/a/1",
		"shop.example.com infra/a/2/0": "", "shop.example.com infra/a/3/0": "gateway", "shop.example.com infra/b/0/0": "infra/a/1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("route policies (-want +got):\n%s", diff)
	}

	// Without the annotation the inheriting rules are passed and the
	// table holds only the rules' own policies.
	gw.Annotations = nil
	if table, err = Merge(gw, frags); err != nil {
		t.Fatal(err)
	}
	if doc, err = Resolve(table, nil); err != nil {
		t.Fatal(err)
	}
	var gotNames []string
	for _, c := range doc.CachePolicies {
		gotNames = append(gotNames, c.Name)
	}
	if got, want := strings.Join(gotNames, " "), "infra/a/1 infra/a/3"; got != want {
		t.Errorf("policies without a gateway default: %s, want %s", got, want)
	}
	if data, err = ghostjson.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, ghostSchema(t), data)
}

// FuzzCachePolicy: every policy ParseCachePolicy accepts, as a Gateway's
// default or a rule's own, gives an effective policy ghost accepts
// (ghostjson's Check) and that validates against ghost.schema.json.
func FuzzCachePolicy(f *testing.F) {
	f.Add(`{}`, `{"enabled":false}`)
	f.Add(`{"ttl":"5m","queryParametersExclude":["utm_source"],"statusHeader":"X-Cache"}`, `{"queryParametersInclude":[],"keyHeaders":["Accept-Language"]}`)
	f.Add(`{"enabled":false,"grace":"1h30m"}`, `{"enabled":true,"stripCookies":["*","_ga"],"tagHeader":""}`)
	sch := ghostSchema(f)
	f.Fuzz(func(t *testing.T, gw, rule string) {
		g, err := ParseCachePolicy(field.NewPath("gateway"), gw)
		if err != nil {
			return
		}
		r, err := ParseCachePolicy(field.NewPath("rule"), rule)
		if err != nil {
			return
		}
		for _, p := range []*ghostjson.CachePolicy{EffectiveCache(g, nil), EffectiveCache(g, r), EffectiveCache(nil, r)} {
			if p == nil {
				continue
			}
			p.Name = "p"
			d := &ghostjson.Document{Version: ghostjson.Version, Backends: []ghostjson.Backend{}, CachePolicies: []ghostjson.CachePolicy{*p}, VHosts: []ghostjson.VHost{}}
			if err := d.Check(); err != nil {
				t.Fatalf("ghostjson.Check of the effective policy of %s and %s: %v", gw, rule, err)
			}
			data, err := ghostjson.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, sch, data)
		}
	})
}
