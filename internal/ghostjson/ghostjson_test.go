package ghostjson

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sample() *Document {
	pct := int32(10)
	filters := []Filter{
		{Type: FilterRequestHeaderModifier, RequestHeaderModifier: &HeaderModifier{Set: []HeaderValue{{Name: "X-A", Value: "a\"b\\c\n\u2028\x01é"}}, Add: []HeaderValue{{Name: "X-C", Value: "c"}}, Remove: []string{"X-B"}}},
		{Type: FilterResponseHeaderModifier, ResponseHeaderModifier: &HeaderModifier{Remove: []string{"Server"}}},
		{Type: FilterURLRewrite, URLRewrite: &Rewrite{Hostname: "in.example.com", Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/v2"}}},
		{Type: FilterRequestMirror, RequestMirror: &Mirror{Backend: "a/shadow:80", Percent: &pct}},
		{Type: FilterRequestMirror, RequestMirror: &Mirror{Backend: "b/shadow:80", Unresolved: UnresolvedRefNotPermitted}},
		{Type: FilterCORS, CORS: &CORS{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com:8443"}, AllowMethods: []string{"GET", "OPTIONS"},
			AllowHeaders: []string{"x-header-1"}, ExposeHeaders: []string{"x-header-3", "x-header-4"}, AllowCredentials: true, MaxAge: 3600}},
		{Type: FilterCORS, CORS: &CORS{}},
		{Type: FilterCORS, CORS: &CORS{AllowOrigins: []string{"*"}, MaxAge: 5}},
	}
	redirect := []Filter{{Type: FilterRequestRedirect, RequestRedirect: &Redirect{Scheme: "https", Port: 8443, Path: &PathModifier{Type: ReplaceFullPath, Value: "/"}, StatusCode: 301}}}
	return &Document{Version: Version,
		Sockets: []Socket{
			{Name: "port-443", TLS: true, Listeners: []Listener{{Name: "www", Hostname: "www.example.com"}, {Name: "wild", Hostname: "*.example.com"}, {Name: "any"}}},
			{Name: "port-8443", TLS: true},
		},
		Backends: []Backend{
			{Name: "a/gone:80", Endpoints: []Endpoint{}},
			{Name: "a/shadow:80", Endpoints: []Endpoint{{Address: "10.0.0.9", Port: 80}}},
			{Name: "a/web:80", Endpoints: []Endpoint{{Address: "10.0.0.1", Port: 8080}, {Address: "fd00::1", Port: 8080}}},
		},
		CachePolicies: []CachePolicy{
			{Name: "gateway", TTLMs: 120000},
			{Name: "a/c/0", TTLMs: 3600000, ForceTTL: true, GraceMs: 10000, KeepMs: 60000, QueryKey: QueryKeyExclude,
				QueryParams: []string{"utm_source", "gclid"}, KeyHeaders: []string{"accept-language"}, StripCookies: []string{"_ga", "*"},
				AllowAuthorization: true, TagHeader: "cache-tag", StatusHeader: "x-cache"},
		},
		VHosts: []VHost{
			{Hostname: "*", Listeners: []string{"port-80", "port-8080"}, Routes: []Route{
				{Name: "a/b/0/0", Match: Match{Path: PathMatch{Type: PathPrefix, Value: "/"}, Method: "GET",
					Headers:     []ValueMatch{{Type: "Exact", Name: "x", Value: "1"}},
					QueryParams: []ValueMatch{{Type: "RegularExpression", Name: "q", Value: `^\d+$`}}},
					Filters: filters, Timeouts: &Timeouts{RequestMs: 1000, BackendRequestMs: 500},
					Backends: []BackendGroup{{Backend: "a/web:80", Weight: 3, Filters: []Filter{{Type: FilterRequestHeaderModifier,
						RequestHeaderModifier: &HeaderModifier{Set: []HeaderValue{{Name: "Backend", Value: "web"}}, Remove: []string{"X-B"}}}}},
						{Backend: "a/gone:80", Weight: 1}, {Backend: "c/web:80", Weight: 1, Unresolved: UnresolvedInvalidKind}}},
				{PrecedenceGroup: 2, Match: Match{Path: PathMatch{Type: PathExact, Value: "/x"}}, Filters: filters, Timeouts: &Timeouts{BackendRequestMs: 5},
					Retry:    &Retry{Attempts: 3, BackoffMs: 100, Codes: []int{500, 503}},
					Backends: []BackendGroup{{Backend: "a/web:80", Weight: 0}},
					Session:  &SessionPersistence{Type: SessionTypeCookie, Name: "s~x", Path: "/x", Scope: "a/b/1", AbsoluteTimeoutMs: 60000, Permanent: true}},
				{Match: Match{Path: PathMatch{Type: PathExact, Value: "/r"}}, Filters: redirect},
				{Name: "a/c/0/0", Match: Match{Path: PathMatch{Type: PathPrefix, Value: "/static"}}, Cache: "a/c/0",
					Backends: []BackendGroup{{Backend: "a/web:80", Weight: 1}}},
				{Name: "a/d/0/0", Match: Match{Path: PathMatch{Type: PathPrefix, Value: "/d"}}, Backends: []BackendGroup{{Backend: "a/web:80", Weight: 1}},
					Session: &SessionPersistence{Type: SessionTypeHeader, Name: "vgw-session-0123456789abcdef", Scope: "a/d/0", AbsoluteTimeoutMs: 1000}},
			}},
			{Hostname: "a.example.com", Routes: []Route{}},
		}}
}

// TestMarshalRoundTrip checks that Marshal's output decodes to the same
// document, in ghost.json's layout.
func TestMarshalRoundTrip(t *testing.T) {
	d := sample()
	out, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, d) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(d)
		t.Fatalf("round trip differs:\n%s\n%s", a, b)
	}
	if !strings.Contains(string(out), `"backends":[{"backend":"a/web:80","weight":3,"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":"Backend","value":"web"}],"remove":["X-B"]}}]},{"backend":"a/gone:80","weight":1},`) {
		t.Errorf("backend group filters not written after the group's fields:\n%s", out)
	}
	if !strings.Contains(string(out), "\n        {\"name\":\"a/b/0/0\",") {
		t.Errorf("route not on its own line:\n%s", out)
	}
	if !strings.Contains(string(out), "\n        {\"precedenceGroup\":2,\"match\":") ||
		strings.Count(string(out), "precedenceGroup") != 1 {
		t.Errorf("precedenceGroup must be written only when not 0:\n%s", out)
	}
	if !strings.Contains(string(out), "\n  \"sockets\": [\n    {\"name\":\"port-443\",\"tls\":true,\"listeners\":[{\"name\":\"www\",\"hostname\":\"www.example.com\"},{\"name\":\"wild\",\"hostname\":\"*.example.com\"},{\"name\":\"any\"}]},\n    {\"name\":\"port-8443\",\"tls\":true}\n  ],\n") {
		t.Errorf("sockets not one per line:\n%s", out)
	}
	if !strings.Contains(string(out), "\n  \"cachePolicies\": [\n    {\"name\":\"gateway\",\"ttlMs\":120000},\n") {
		t.Errorf("cache policies not one per line:\n%s", out)
	}
	again, _ := Marshal(d)
	if string(again) != string(out) {
		t.Error("output not deterministic")
	}
	var buf bytes.Buffer
	if err := Encode(&buf, d); err != nil || buf.String() != string(out) {
		t.Errorf("Encode differs from Marshal: %v", err)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.json with Marshal's output")

// edges is a document of the values encoders get wrong: characters JSON
// escapes, invalid UTF-8, HTML characters (not escaped), a backend without
// an endpoint list, timeouts that are all zero, an empty CORS filter.
func edges() *Document {
	return &Document{Version: Version,
		Sockets:        []Socket{{Name: "port-80"}},
		Backends:       []Backend{{Name: "a/b<c>&d:80"}, {Name: "a/ws:80", Endpoints: []Endpoint{{Address: "fd00::1", Port: 1}}, WebSocket: true}},
		EscapedSlashes: "keep",
		VHosts: []VHost{
			{Hostname: "*.example.com", Routes: []Route{
				{Match: Match{Path: PathMatch{Type: PathRegularExpression, Value: "^/a\\.b\"q\"$"}}, Timeouts: &Timeouts{},
					Filters: []Filter{
						{Type: FilterRequestHeaderModifier, RequestHeaderModifier: &HeaderModifier{Add: []HeaderValue{{Name: "X", Value: "\x00\x1f\x7f\t\r\n é\u2028\u2029\xff<&>"}}}},
						{Type: FilterCORS, CORS: &CORS{}},
						{Type: FilterURLRewrite, URLRewrite: &Rewrite{}},
					},
					Backends: []BackendGroup{{Backend: "a/b<c>&d:80", Weight: 1}, {Backend: "a/ws:80"}}},
			}},
			{Hostname: "www.example.com", Listeners: []string{"port-80"}, Routes: []Route{}},
		}}
}

// TestMarshalGolden keeps ghost.json's bytes: testdata holds what Marshal
// wrote for these documents; -update rewrites it.
func TestMarshalGolden(t *testing.T) {
	for name, d := range map[string]*Document{"sample": sample(), "edges": edges(), "empty": {Version: Version}} {
		t.Run(name, func(t *testing.T) {
			out, err := Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, out, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if !bytes.Equal(out, want) {
				t.Errorf("Marshal differs from %s (go test -update rewrites it):\n%s", path, cmp.Diff(string(want), string(out)))
			}
		})
	}
}

// TestEncodeChunks checks that Encode, which writes a large document in
// chunks, writes what Marshal returns.
func TestEncodeChunks(t *testing.T) {
	d := benchDocument()
	out, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 3*chunkSize {
		t.Fatalf("the document is %d bytes, not several chunks", len(out))
	}
	var buf bytes.Buffer
	if err := Encode(&buf, d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), out) {
		t.Error("Encode differs from Marshal")
	}
}

func TestMarshalEmpty(t *testing.T) {
	out, err := Marshal(&Document{Version: Version})
	if err != nil || string(out) != "{\n  \"version\": 2,\n  \"backends\": [],\n  \"vhosts\": []\n}\n" {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := Marshal(&Document{Version: 1}); err == nil {
		t.Error("version 1 accepted")
	}
}

// TestEndpointsWrittenOnce is the point of version 2: 1,000 routes over
// two vhosts that send to one backend of 50 endpoints write each endpoint
// once, so the file grows with routes plus endpoints.
func TestEndpointsWrittenOnce(t *testing.T) {
	eps := make([]Endpoint, 50)
	for i := range eps {
		eps[i] = Endpoint{Address: fmt.Sprintf("10.0.%d.%d", i/200, i%200+1), Port: 8080}
	}
	d := &Document{Version: Version, Backends: []Backend{{Name: "ns/web:80", Endpoints: eps}}}
	for v := 0; v < 2; v++ {
		vh := VHost{Hostname: fmt.Sprintf("v%d.example.com", v)}
		for r := 0; r < 500; r++ {
			vh.Routes = append(vh.Routes, Route{Match: Match{Path: PathMatch{Type: PathExact, Value: fmt.Sprintf("/r%d", r)}},
				Backends: []BackendGroup{{Backend: "ns/web:80", Weight: 1}}})
		}
		d.VHosts = append(d.VHosts, vh)
	}
	out, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if n := strings.Count(string(out), `"address":"`+ep.Address+`"`); n != 1 {
			t.Fatalf("endpoint %s written %d times", ep.Address, n)
		}
	}
	if n := strings.Count(string(out), `{"backend":"ns/web:80","weight":1}`); n != 1000 {
		t.Errorf("%d references, want 1000", n)
	}
	if !strings.Contains(string(out), "\n    {\"name\":\"ns/web:80\",\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":8080},") {
		t.Errorf("backend not on its own line:\n%.300s", out)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(d *Document)
		want string
	}{
		{"version 1", func(d *Document) { d.Version = 1 }, "version is 1, this package writes and reads version 2"},
		{"session type query", func(d *Document) {
			d.VHosts[0].Routes[1].Session = &SessionPersistence{Type: "Query", Name: "s", Path: "/", Scope: "a/b/0"}
		}, `vhosts[0].routes[1].sessionPersistence.type: "Query" is not supported: use "Cookie" or "Header"`},
		{"session header with a path", func(d *Document) {
			d.VHosts[0].Routes[1].Session = &SessionPersistence{Type: "Header", Name: "s", Path: "/", Scope: "a/b/0"}
		}, `vhosts[0].routes[1].sessionPersistence.path, permanent: set with type "Header"`},
		{"session cookie name", func(d *Document) {
			d.VHosts[0].Routes[1].Session = &SessionPersistence{Type: "Cookie", Name: "a=b", Path: "/", Scope: "a/b/0"}
		}, `vhosts[0].routes[1].sessionPersistence.name: "a=b" is not a cookie or header name`},
		{"session cookie path", func(d *Document) {
			d.VHosts[0].Routes[1].Session = &SessionPersistence{Type: "Cookie", Name: "s", Path: "/a;b", Scope: "a/b/0"}
		}, `vhosts[0].routes[1].sessionPersistence.path: "/a;b" is not an absolute path`},
		{"session without scope", func(d *Document) {
			d.VHosts[0].Routes[1].Session = &SessionPersistence{Type: "Cookie", Name: "s", Path: "/"}
		}, `vhosts[0].routes[1].sessionPersistence.scope: "" must have 1 to 512 characters`},
		{"session timeout in milliseconds", func(d *Document) {
			d.VHosts[0].Routes[1].Session = &SessionPersistence{Type: "Cookie", Name: "s", Path: "/", Scope: "a/b/0", AbsoluteTimeoutMs: 1500}
		}, `vhosts[0].routes[1].sessionPersistence.absoluteTimeoutMs: 1500 is not 0 or a whole number of seconds`},
		{"permanent session without timeout", func(d *Document) {
			d.VHosts[0].Routes[1].Session = &SessionPersistence{Type: "Cookie", Name: "s", Path: "/", Scope: "a/b/0", Permanent: true}
		}, `vhosts[0].routes[1].sessionPersistence.absoluteTimeoutMs: 0 with permanent`},
		{"duplicate name", func(d *Document) { d.Backends = append(d.Backends, Backend{Name: "a/web:80"}) },
			`backends[3].name: duplicate backend name "a/web:80", already defined by backends[2]`},
		{"unknown backend", func(d *Document) { d.VHosts[0].Routes[1].Backends[0].Backend = "a/api:80" },
			`vhosts[0].routes[1].backends[0].backend: unknown backend "a/api:80"`},
		{"duplicate socket", func(d *Document) { d.Sockets[1].Name = "port-443" },
			`sockets[1].name: duplicate socket "port-443", already described by sockets[0]`},
		{"duplicate listener name", func(d *Document) { d.Sockets[0].Listeners[2].Name = "www" },
			`sockets[0].listeners[2].name: duplicate listener "www", already at sockets[0].listeners[0]`},
		{"duplicate listener hostname", func(d *Document) { d.Sockets[0].Listeners[2].Hostname = "*.example.com" },
			`sockets[0].listeners[2].hostname: hostname "*.example.com" is already the hostname of sockets[0].listeners[1]`},
		{"two listeners for every host", func(d *Document) { d.Sockets[0].Listeners[1].Hostname = "*" },
			`sockets[0].listeners[2].hostname: hostname "" is already the hostname of sockets[0].listeners[1]`},
		{"duplicate cache policy", func(d *Document) { d.CachePolicies[1].Name = "gateway" },
			`cachePolicies[1].name: duplicate cache policy "gateway", already defined by cachePolicies[0]`},
		{"unknown cache policy", func(d *Document) { d.VHosts[0].Routes[3].Cache = "b/c/0" },
			`vhosts[0].routes[3].cache: unknown cache policy "b/c/0": the cachePolicies table has no entry of that name`},
		{"retry attempts 0", func(d *Document) { d.VHosts[0].Routes[1].Retry.Attempts = 0 },
			`vhosts[0].routes[1].retry.attempts: 0 is not from 1 to 100 retries`},
		{"retry negative backoff", func(d *Document) { d.VHosts[0].Routes[1].Retry.BackoffMs = -1 },
			`vhosts[0].routes[1].retry.backoffMs: -1 is not from 0 to 2000 milliseconds`},
		{"retry code 200", func(d *Document) { d.VHosts[0].Routes[1].Retry.Codes[1] = 200 },
			`vhosts[0].routes[1].retry.codes[1]: status 200 is not from 400 to 599`},
		{"retry code twice", func(d *Document) { d.VHosts[0].Routes[1].Retry.Codes[1] = 500 },
			`vhosts[0].routes[1].retry.codes[1]: status 500 is listed twice`},
		{"retry with backend filters", func(d *Document) { d.VHosts[0].Routes[0].Retry = &Retry{Attempts: 1} },
			`vhosts[0].routes[0].retry: backends[0] has filters of its own`},
		{"negative ttl", func(d *Document) { d.CachePolicies[0].TTLMs = -1 },
			`cachePolicies[0].ttlMs: -1 is negative`},
		{"unknown query key", func(d *Document) { d.CachePolicies[0].QueryKey = "some" },
			`cachePolicies[0].queryKey: "some" is not one of`},
		{"query params without include or exclude", func(d *Document) { d.CachePolicies[0].QueryParams = []string{"a"} },
			`cachePolicies[0].queryParams: set with queryKey ""`},
		{"cors wildcard origin with others", func(d *Document) {
			d.VHosts[0].Routes[0].Filters[5].CORS.AllowOrigins = []string{"*", "https://a.example"}
		},
			`vhosts[0].routes[0].filters[5].cors.allowOrigins[0]: "*" alongside other origins`},
		{"cors origin without scheme", func(d *Document) { d.VHosts[0].Routes[0].Filters[5].CORS.AllowOrigins[1] = "www.example.com" },
			`vhosts[0].routes[0].filters[5].cors.allowOrigins[1]: "www.example.com" is not scheme://host[:port]`},
		{"cors origin upper case", func(d *Document) { d.VHosts[0].Routes[0].Filters[5].CORS.AllowOrigins[1] = "https://WWW.example.com" },
			`cors.allowOrigins[1]: "https://WWW.example.com" is not scheme://host[:port]`},
		{"cors origin port", func(d *Document) { d.VHosts[0].Routes[0].Filters[5].CORS.AllowOrigins[1] = "https://a.example:70000" },
			`cors.allowOrigins[1]: port "70000" is not from 1 to 65535`},
		{"cors method", func(d *Document) { d.VHosts[0].Routes[0].Filters[5].CORS.AllowMethods = []string{"get"} },
			`cors.allowMethods[0]: "get" is not a method of GET, HEAD`},
		{"cors header", func(d *Document) { d.VHosts[0].Routes[0].Filters[5].CORS.ExposeHeaders = []string{"x y"} },
			`cors.exposeHeaders[0]: "x y" is not a header name`},
		{"cors max age", func(d *Document) { d.VHosts[0].Routes[0].Filters[5].CORS.MaxAge = -1 },
			`cors.maxAge: -1 is negative`},
		{"backend filter of another type", func(d *Document) {
			d.VHosts[0].Routes[0].Backends[0].Filters[0] = Filter{Type: FilterURLRewrite, URLRewrite: &Rewrite{Hostname: "x"}}
		},
			`vhosts[0].routes[0].backends[0].filters[0].type: filter type "URLRewrite" is not supported on a backend: use RequestHeaderModifier, or move the filter to the route`},
		{"two backend filters", func(d *Document) {
			g := &d.VHosts[0].Routes[0].Backends[0]
			g.Filters = append(g.Filters, g.Filters[0])
		},
			`vhosts[0].routes[0].backends[0].filters[1]: a second filter on the same backend`},
		{"backend filter without its modifier", func(d *Document) { d.VHosts[0].Routes[0].Backends[0].Filters[0].RequestHeaderModifier = nil },
			`vhosts[0].routes[0].backends[0].filters[0].requestHeaderModifier: missing for a RequestHeaderModifier filter`},
		{"backend filter with a second modifier", func(d *Document) {
			d.VHosts[0].Routes[0].Backends[0].Filters[0].ResponseHeaderModifier = &HeaderModifier{}
		},
			`vhosts[0].routes[0].backends[0].filters[0]: only requestHeaderModifier may be set`},
		{"unknown mirror backend", func(d *Document) { d.VHosts[0].Routes[0].Filters[3].RequestMirror = &Mirror{Backend: "a/x:80"} },
			`vhosts[0].routes[0].filters[3].requestMirror.backend: unknown backend "a/x:80"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sample()
			tc.edit(d)
			err := d.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check() = %v, want %q", err, tc.want)
			}
			if _, err := Marshal(d); err == nil {
				t.Error("Marshal wrote a document Check rejects")
			}
		})
	}
	// unresolved references need no entry; Endpoints follows references
	d := sample()
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
	table := d.Table()
	if got := Endpoints(table, "a/web:80", ""); len(got) != 2 {
		t.Errorf("Endpoints(a/web:80) = %v", got)
	}
	if got := Endpoints(table, "a/web:80", UnresolvedRefNotPermitted); got != nil {
		t.Errorf("an unresolved reference has endpoints: %v", got)
	}
	if got := Endpoints(table, "c/web:80", ""); got != nil {
		t.Errorf("an unknown name has endpoints: %v", got)
	}
}

// benchDocument is 10,000 routes over 100 vhosts, each route with a header
// match, a request header filter and two weighted groups, sending to 1,000
// backends of 10 endpoints: the size of a large Gateway's ghost.json.
func benchDocument() *Document {
	d := &Document{Version: Version, CachePolicies: []CachePolicy{{Name: "gateway", TTLMs: 120000, KeyHeaders: []string{"accept-language"}}}}
	for i := range 1000 {
		b := Backend{Name: fmt.Sprintf("ns/svc-%04d:80", i)}
		for j := range 10 {
			b.Endpoints = append(b.Endpoints, Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j+1), Port: 8080})
		}
		d.Backends = append(d.Backends, b)
	}
	for v := range 100 {
		vh := VHost{Hostname: fmt.Sprintf("h%03d.example.com", v), Listeners: []string{"port-80"}}
		for r := range 100 {
			n := v*100 + r
			vh.Routes = append(vh.Routes, Route{Name: fmt.Sprintf("ns/r-%05d/0/0", n),
				Match: Match{Path: PathMatch{Type: PathPrefix, Value: fmt.Sprintf("/api/%d", r)},
					Headers: []ValueMatch{{Type: "Exact", Name: "x-tenant", Value: "t1"}}},
				Filters:  []Filter{{Type: FilterRequestHeaderModifier, RequestHeaderModifier: &HeaderModifier{Set: []HeaderValue{{Name: "X-Route", Value: "r"}}}}},
				Backends: []BackendGroup{{Backend: d.Backends[n%1000].Name, Weight: 90}, {Backend: d.Backends[(n+1)%1000].Name, Weight: 10}},
				Cache:    "gateway"})
		}
		d.VHosts = append(d.VHosts, vh)
	}
	return d
}

func BenchmarkMarshal(b *testing.B) {
	d := benchDocument()
	b.ReportAllocs()
	var size int
	for b.Loop() {
		out, err := Marshal(d)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "bytes/doc")
}

func BenchmarkEncode(b *testing.B) {
	d := benchDocument()
	b.ReportAllocs()
	for b.Loop() {
		if err := Encode(io.Discard, d); err != nil {
			b.Fatal(err)
		}
	}
}
