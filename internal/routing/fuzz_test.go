package routing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// FuzzUnmarshalFragment checks that fragment parsing never panics and that
// an accepted fragment survives a marshal/unmarshal round trip unchanged.
func FuzzUnmarshalFragment(f *testing.F) {
	gw, routes, objs := resolveFixture()
	for _, r := range routes {
		fr, err := Attach(gw, r, objs)
		if err != nil {
			f.Fatal(err)
		}
		data, err := MarshalFragment(fr)
		if err != nil {
			f.Fatal(err)
		}
		// Compact seeds: the fuzzer minimises every new interesting input,
		// which takes long for large ones.
		var buf bytes.Buffer
		if err := json.Compact(&buf, data); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":2,"gateway":{"namespace":"a","name":"g"},"route":{"namespace":"a","name":"r","creationTimestamp":"2026-01-01T00:00:00Z"},` +
		`"parents":[],"listeners":[{"name":"l","port":80,"hostnames":["*"]}],"rules":[{"index":0,"matches":[{"path":{"type":"PathPrefix","value":"/"}}],` +
		`"cache":{"ttl":"1h","queryParametersInclude":[],"keyHeaders":["Accept"],"stripCookies":["*"]}}]}`))
	f.Add([]byte(`{"version":3,"gateway":{"namespace":"a","name":"g"},"route":{"namespace":"a","name":"r","creationTimestamp":"2026-01-01T00:00:00Z"},` +
		`"parents":[],"listeners":[{"name":"l","port":80,"hostnames":["*"]}],"rules":[{"index":0,"matches":[{"path":{"type":"PathPrefix","value":"/"}}],` +
		`"retry":{"attempts":2,"backoffMs":100,"codes":[502,503]},"backends":[{"namespace":"a","name":"web","port":80,"weight":1}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := UnmarshalFragment(data)
		if err != nil {
			return
		}
		out, err := MarshalFragment(fr)
		if err != nil {
			t.Fatalf("a fragment that unmarshals must marshal: %v", err)
		}
		fr2, err := UnmarshalFragment(out)
		if err != nil {
			t.Fatalf("marshalled fragment does not unmarshal: %v\n%s", err, out)
		}
		out2, err := MarshalFragment(fr2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip not stable: %v\n%s\n%s", err, out, out2)
		}
	})
}

// FuzzIntersectHostnames checks the hostname intersection against hostMatches.
func FuzzIntersectHostnames(f *testing.F) {
	f.Add("*.example.com", "a.example.com", "*.b.example.com")
	f.Add("", "*.org", "x.org")
	f.Fuzz(func(t *testing.T, listener, r1, r2 string) {
		for _, h := range []string{listener, r1, r2} {
			if h != "" && len(validateHostname(nil, h, true)) > 0 {
				return
			}
		}
		var routeHosts []string
		for _, h := range []string{r1, r2} {
			if h != "" {
				routeHosts = append(routeHosts, h)
			}
		}
		lh := listener
		if lh == "" {
			lh = anyHost
		}
		for _, h := range intersectHostnames(listener, routeHosts) {
			if !hostMatches(lh, h) && lh != h {
				t.Errorf("listener %q does not match intersected %q", lh, h)
			}
			if len(routeHosts) > 0 && !slices.ContainsFunc(routeHosts, func(r string) bool { return r == h || hostMatches(r, h) }) {
				t.Errorf("no route hostname of %q matches intersected %q", routeHosts, h)
			}
		}
	})
}

// FuzzMerge builds a Gateway and routes from the fuzz input (listeners,
// hostnames, paths and creation times from small alphabets, so that
// overlaps are common), then checks the merged table and ghost.json:
// schema-valid, independent of fragment order, each (hostname, socket)
// pair once, routes in precedence order, listener isolation (every
// route of a vhost comes from a fragment attached to the most specific
// listener for that hostname on that socket), and the TLS socket of the
// HTTPS listeners (port 81) with its listeners.
func FuzzMerge(f *testing.F) {
	sch := ghostSchema(f)
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("listener isolation with wildcard hostnames"))
	f.Fuzz(func(t *testing.T, data []byte) {
		gw, routes := fuzzGateway(data)
		objs := &Objects{Services: []*corev1.Service{service("infra", "web")}}
		var frags []*Fragment
		for _, r := range routes {
			fr, err := Attach(gw, r, objs)
			if err != nil {
				t.Fatal(err)
			}
			frags = append(frags, fr)
		}
		tb, err := Merge(gw, frags)
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
		checkSchema(t, sch, out)

		slices.Reverse(frags)
		tb2, err := Merge(gw, frags)
		if err != nil {
			t.Fatal(err)
		}
		doc2, _ := Resolve(tb2, objs)
		out2, _ := ghostjson.Marshal(doc2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("output depends on fragment order:\n%s\n%s", out, out2)
		}

		// The TLS socket: port 81's listeners (HTTPS), the first of each
		// hostname, in spec order; no socket entry for port 80 (HTTP).
		var want []ghostjson.Listener
		seenHost := map[string]bool{}
		for i := range gw.Spec.Listeners {
			l := &gw.Spec.Listeners[i]
			if h := listenerHost(l); l.Port == 81 && !seenHost[h] {
				seenHost[h] = true
				gl := ghostjson.Listener{Name: string(l.Name)}
				if h != anyHost {
					gl.Hostname = h
				}
				want = append(want, gl)
			}
		}
		switch {
		case len(want) == 0 && len(doc.Sockets) != 0:
			t.Fatalf("sockets %+v without an HTTPS listener", doc.Sockets)
		case len(want) > 0 && (len(doc.Sockets) != 1 || doc.Sockets[0].Name != "port-81" || !doc.Sockets[0].TLS || !slices.Equal(doc.Sockets[0].Listeners, want)):
			t.Fatalf("sockets %+v, want port-81 TLS with %+v", doc.Sockets, want)
		}

		listeners := map[string]*gatewayv1.Listener{}
		bySocket := map[string][]*gatewayv1.Listener{}
		for i := range gw.Spec.Listeners {
			l := &gw.Spec.Listeners[i]
			listeners[string(l.Name)] = l
			bySocket[ghostjson.SocketName(l.Port)] = append(bySocket[ghostjson.SocketName(l.Port)], l)
		}
		attachedTo := map[*RouteRef]map[string]bool{}
		for _, fr := range frags {
			m := map[string]bool{}
			for _, al := range fr.Listeners {
				m[al.Name] = true
			}
			attachedTo[&fr.Route] = m
		}
		// Isolation seen from requests: whatever route the reference model
		// picks for a host must be attached to the most specific listener
		// for that host on the socket.
		for _, host := range []string{"a.example.com", "b.a.example.com", "c.b.a.example.com", "x.example.com", "example.org", "y.example.org", "other.net"} {
			for _, port := range []int32{80, 81} {
				s := ghostjson.SocketName(port)
				r := ghostRoute(doc, s, host, "/a/b")
				if r == nil {
					continue
				}
				owner := mostSpecificListener(bySocket[s], host)
				if owner == nil {
					t.Fatalf("%s on %s: served by %s, but no listener accepts the host", host, s, r.Name)
				}
				ns, rest, _ := strings.Cut(r.Name, "/")
				name, _, _ := strings.Cut(rest, "/")
				ok := false
				for _, fr := range frags {
					if fr.Route.Namespace == ns && fr.Route.Name == name && attachedTo[&fr.Route][string(owner.Name)] {
						ok = true
					}
				}
				if !ok {
					t.Fatalf("%s on %s: served by %s, which is not attached to the owning listener %s", host, s, r.Name, owner.Name)
				}
			}
		}
		pairs := map[string]bool{}
		for _, v := range tb.VHosts {
			for _, s := range v.Sockets {
				k := v.Hostname + "@" + s
				if pairs[k] {
					t.Fatalf("(hostname, socket) %s twice", k)
				}
				pairs[k] = true
				owner := mostSpecificListener(bySocket[s], v.Hostname)
				for i := range v.Routes {
					r := &v.Routes[i]
					if owner == nil || !attachedTo[r.Route][string(owner.Name)] {
						t.Fatalf("vhost %s: route %s is not attached to the owning listener %v", k, r.Name(), owner)
					}
				}
			}
			// Completeness: every route attached to the owning listener
			// with a hostname that covers the vhost is in it.
			for _, s := range v.Sockets {
				owner := mostSpecificListener(bySocket[s], v.Hostname)
				in := map[*RouteRef]bool{}
				for i := range v.Routes {
					in[v.Routes[i].Route] = true
				}
				for _, fr := range frags {
					for _, al := range fr.Listeners {
						if owner == nil || al.Name != string(owner.Name) {
							continue
						}
						for _, h := range al.Hostnames {
							if (h == v.Hostname || hostMatches(h, v.Hostname)) && !in[&fr.Route] {
								t.Fatalf("vhost %s@%s lacks route %s attached to %s with hostname %s", v.Hostname, s, fr.Route, al.Name, h)
							}
						}
					}
				}
			}
			for i := 1; i < len(v.Routes); i++ {
				if compareTableRoutes(&v.Routes[i-1], &v.Routes[i]) > 0 {
					t.Fatalf("vhost %s: %s sorted before %s", v.Hostname, v.Routes[i-1].Name(), v.Routes[i].Name())
				}
			}
		}
	})
}

// fuzzGateway decodes fuzz bytes into a Gateway and HTTPRoutes.
func fuzzGateway(data []byte) (*gatewayv1.Gateway, []*gatewayv1.HTTPRoute) {
	hosts := []string{"", "a.example.com", "*.example.com", "b.a.example.com", "*.a.example.com", "example.org", "*.org"}
	paths := []string{"/", "/a", "/a/b", "/b"}
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := int(data[0])
		data = data[1:]
		return b
	}
	gw := gateway()
	nl := 1 + next()%4
	for i := 0; i < nl; i++ {
		l := listener(fmt.Sprintf("l%d", i), int32(80+next()%2), hosts[next()%len(hosts)])
		if l.Port == 81 {
			l.Protocol = gatewayv1.HTTPSProtocolType
		}
		gw.Spec.Listeners = append(gw.Spec.Listeners, l)
	}
	var routes []*gatewayv1.HTTPRoute
	nr := next() % 6
	for i := 0; i < nr; i++ {
		r := route("infra", fmt.Sprintf("r%d", i), created(time.Duration(next()%3)*time.Second))
		if s := next() % (nl + 1); s < nl {
			r.Spec.ParentRefs[0].SectionName = ptr(gatewayv1.SectionName(fmt.Sprintf("l%d", s)))
		}
		for h := next() % 3; h > 0; h-- {
			if v := hosts[next()%len(hosts)]; v != "" {
				r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(v))
			}
		}
		var ms []gatewayv1.HTTPRouteMatch
		for m := next() % 3; m > 0; m-- {
			if next()%2 == 0 {
				ms = append(ms, prefix(paths[next()%len(paths)]))
			} else {
				ms = append(ms, exact(paths[next()%len(paths)]))
			}
		}
		r.Spec.Rules[0].Matches = ms
		routes = append(routes, r)
	}
	// Deduplicate route hostnames (the API server would reject duplicates).
	for _, r := range routes {
		seen := map[gatewayv1.Hostname]bool{}
		r.Spec.Hostnames = slices.DeleteFunc(r.Spec.Hostnames, func(h gatewayv1.Hostname) bool {
			d := seen[h]
			seen[h] = true
			return d || strings.TrimSpace(string(h)) == ""
		})
	}
	return gw, routes
}

// FuzzAttach parses an HTTPRoute from JSON, attaches it and checks that
// validation and attachment agree with the fragment format: an accepted
// route's fragment must marshal, unmarshal (which re-validates every value
// that reaches ghost.json) and merge into schema-valid ghost.json.
func FuzzAttach(f *testing.F) {
	sch := ghostSchema(f)
	gw, routes, objs := resolveFixture()
	// The conformance suite's routes make good seeds, renamed to attach to
	// the fixture Gateway.
	if dir, err := conformanceModuleDir(); err == nil {
		files, _ := filepath.Glob(filepath.Join(dir, "tests", "httproute-*.yaml"))
		for _, file := range files {
			for _, r := range readManifests(f, file).routes {
				r.Namespace = "infra"
				r.Spec.ParentRefs = []gatewayv1.ParentReference{{Name: "gw"}}
				routes = append(routes, r)
			}
		}
	}
	for _, r := range routes {
		data, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r gatewayv1.HTTPRoute
		if err := json.Unmarshal(data, &r); err != nil {
			return
		}
		fr, err := Attach(gw, &r, objs)
		if err != nil {
			return
		}
		out, err := MarshalFragment(fr)
		if err != nil {
			t.Fatalf("Attach produced a fragment that does not validate: %v", err)
		}
		back, err := UnmarshalFragment(out)
		if err != nil {
			t.Fatalf("fragment does not unmarshal: %v\n%s", err, out)
		}
		if !back.Accepted() {
			return
		}
		tb, err := Merge(gw, []*Fragment{back})
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Resolve(tb, objs)
		if err != nil {
			t.Fatal(err)
		}
		js, err := ghostjson.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		checkSchema(t, sch, js)
	})
}

// FuzzHostnameProblem: hostnameProblem accepts exactly the DNS names
// apimachinery accepts (IP addresses aside) and always says why it rejects.
func FuzzHostnameProblem(f *testing.F) {
	for _, h := range []string{"www.example.com", "*.example.com", "Bücher.example", "a..b", "a:80", "*", "10.0.0.1"} {
		f.Add(h, true)
	}
	f.Fuzz(func(t *testing.T, h string, wildcard bool) {
		want := validation.IsDNS1123Subdomain(h)
		if wildcard && strings.HasPrefix(h, "*") {
			want = validation.IsWildcardDNS1123Subdomain(h)
		}
		_, ipErr := netip.ParseAddr(h)
		got := hostnameProblem(h, wildcard)
		if (got == "") != (len(want) == 0 && ipErr != nil) {
			t.Fatalf("hostnameProblem(%q, %v) = %q, apimachinery: %v", h, wildcard, got, want)
		}
		if got != "" && hostnameFix(h, wildcard) == "" && ipErr != nil {
			t.Fatalf("hostnameProblem(%q, %v): no fix message, only apimachinery's %q", h, wildcard, got)
		}
	})
}
