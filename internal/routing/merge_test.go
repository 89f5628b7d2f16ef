package routing

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// attachAll attaches routes to gw, failing the test on error.
func attachAll(t testing.TB, gw *gatewayv1.Gateway, objs *Objects, routes ...*gatewayv1.HTTPRoute) []*Fragment {
	t.Helper()
	var out []*Fragment
	for _, r := range routes {
		f, err := Attach(gw, r, objs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// layout renders a table as "hostname@sockets: route/rule/match ..." lines.
func layout(tb *Table) string {
	var b strings.Builder
	for _, v := range tb.VHosts {
		fmt.Fprintf(&b, "%s@%s:", v.Hostname, strings.Join(v.Sockets, ","))
		for i := range v.Routes {
			r := &v.Routes[i]
			fmt.Fprintf(&b, " %s/%d/%d", r.Route.Name, r.Rule.Index, r.MatchIndex)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestMergeListenerIsolation(t *testing.T) {
	objs := &Objects{Services: []*corev1.Service{service("infra", "web")}}
	tests := []struct {
		name   string
		gw     *gatewayv1.Gateway
		routes []*gatewayv1.HTTPRoute
		want   string
	}{
		{
			name: "catch-all and specific listener on one port",
			gw:   gateway(listener("any", 80, ""), listener("foo", 80, "foo.example.com"), listener("wild", 80, "*.example.com")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "catchall", section("any")),
				route("infra", "foo", section("foo")),
				route("infra", "wild", section("wild")),
			},
			want: "*@port-80: catchall/0/0\n" +
				"*.example.com@port-80: wild/0/0\n" +
				"foo.example.com@port-80: foo/0/0\n",
		},
		{
			name: "listener without routes still captures its host",
			gw:   gateway(listener("any", 80, ""), listener("empty", 80, "empty.example.com")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "catchall", section("any")),
			},
			want: "*@port-80: catchall/0/0\nempty.example.com@port-80:\n",
		},
		{
			name: "route hostname on the catch-all listener is owned by the wildcard listener",
			gw:   gateway(listener("any", 80, ""), listener("wild", 80, "*.example.com")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "a", section("any"), hostnames("a.example.com", "a.org")),
				route("infra", "w", section("wild")),
			},
			want: "*@port-80:\n*.example.com@port-80: w/0/0\na.example.com@port-80: w/0/0\na.org@port-80: a/0/0\n",
		},
		{
			name: "wildcard route hostname and exact route hostname on one listener",
			gw:   gateway(listener("any", 80, "")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "wild", hostnames("*.example.com")),
				route("infra", "exact", hostnames("a.example.com"), created(time.Hour)),
			},
			want: "*@port-80:\n*.example.com@port-80: wild/0/0\na.example.com@port-80: exact/0/0 wild/0/0\n",
		},
		{
			name: "same vhost on two ports shares one entry",
			gw:   gateway(listener("a", 80, ""), listener("b", 8080, ""), listener("c", 9090, "x.org")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "r"),
			},
			want: "*@port-80,port-8080: r/0/0\nx.org@port-9090: r/0/0\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := Merge(tt.gw, attachAll(t, tt.gw, objs, tt.routes...))
			if err != nil {
				t.Fatal(err)
			}
			if got := layout(tb); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestMergePrecedence(t *testing.T) {
	objs := &Objects{Services: []*corev1.Service{service("infra", "web"), service("b", "web")}}
	gw := gateway(fromNS(listener("any", 80, ""), gatewayv1.NamespacesFromAll, nil))
	withMethod := prefix("/a")
	withMethod.Method = ptr(gatewayv1.HTTPMethodPost)
	withHeader := prefix("/a")
	withHeader.Headers = []gatewayv1.HTTPHeaderMatch{{Name: "x", Value: "1"}}
	withQuery := prefix("/a")
	withQuery.QueryParams = []gatewayv1.HTTPQueryParamMatch{{Name: "q", Value: "1"}}
	regex := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchRegularExpression), Value: ptr("^/a.*")}}
	routes := []*gatewayv1.HTTPRoute{
		route("infra", "old", created(-time.Hour), rules(gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/"), regex, prefix("/a"), exact("/a")}})),
		route("infra", "new", rules(gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/a"), prefix("/abc"), withQuery, withHeader, withMethod}})),
		route("b", "new", rules(gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/a")}})),
	}
	for _, r := range routes {
		r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)}
	}
	tb, err := Merge(gw, attachAll(t, gw, objs, routes...))
	if err != nil {
		t.Fatal(err)
	}
	want := "*@port-80: old/0/3 new/0/1 new/0/4 new/0/3 new/0/2 old/0/2 new/0/0 new/0/0 old/0/0 old/0/1\n"
	if got := layout(tb); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	// /a in new (infra and b) is shadowed by old's identical /a.
	if len(tb.Conflicts) != 2 {
		t.Fatalf("conflicts = %v, want 2", tb.Conflicts)
	}
	for _, c := range tb.Conflicts {
		if c.Winner != "infra/old/0/2" || !strings.Contains(c.Message, "never used") {
			t.Errorf("unexpected conflict %s", c)
		}
	}
	if tb.VHosts[0].Routes[6].Route.Namespace != "b" {
		t.Errorf("tie on creation time must be broken by namespace: b/new before infra/new")
	}
}

func TestMergeReportsBadFragments(t *testing.T) {
	objs := &Objects{Services: []*corev1.Service{service("infra", "web")}}
	gw := gateway(listener("a", 80, ""), listener("gone", 8080, ""))
	frags := attachAll(t, gw, objs, route("infra", "r"), route("infra", "r"))
	frags[1].Route.UID = "second"
	other := *frags[0]
	other.Gateway.Name = "other"
	frags = append(frags, &other)
	gw.Spec.Listeners = append(gw.Spec.Listeners[:1], listener("bad", 80, "bad_name.example.com"), listener("twin", 80, ""))
	tb, err := Merge(gw, frags)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, c := range tb.Conflicts {
		msgs = append(msgs, c.String())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"not infra/gw: ignored", "duplicate fragment", `no HTTP listener "gone"`, "listener bad is not served", "listener twin has the same port (80) and hostname (*) as listener a"} {
		if !strings.Contains(all, want) {
			t.Errorf("conflicts %q lack %q", all, want)
		}
	}
	if got := layout(tb); got != "*@port-80: r/0/0\n" {
		t.Errorf("layout = %q", got)
	}
}

func TestComparePrecedence(t *testing.T) {
	m := func(typ, value, method string, headers, query int) *ghostjson.Match {
		out := &ghostjson.Match{Path: ghostjson.PathMatch{Type: typ, Value: value}, Method: method}
		for i := 0; i < headers; i++ {
			out.Headers = append(out.Headers, ghostjson.ValueMatch{Type: "Exact", Name: fmt.Sprint("h", i)})
		}
		for i := 0; i < query; i++ {
			out.QueryParams = append(out.QueryParams, ghostjson.ValueMatch{Type: "Exact", Name: fmt.Sprint("q", i)})
		}
		return out
	}
	// Each match takes precedence over the next one.
	ordered := []*ghostjson.Match{
		m("Exact", "/abcdef", "", 0, 0),
		m("Exact", "/a", "GET", 3, 3),
		m("PathPrefix", "/abc", "", 0, 0),
		m("PathPrefix", "/ab", "GET", 0, 0),
		m("PathPrefix", "/ab", "", 2, 0),
		m("PathPrefix", "/ab", "", 1, 5),
		m("PathPrefix", "/ab", "", 1, 1),
		m("PathPrefix", "/ab", "", 1, 0),
		m("PathPrefix", "/", "", 0, 0),
		m("RegularExpression", "^/.*$", "", 0, 0),
	}
	for i := range ordered {
		for j := range ordered {
			got := ComparePrecedence(ordered[i], ordered[j])
			if want := cmp.Compare(i, j); got != want {
				t.Errorf("ComparePrecedence(%d, %d) = %d, want %d", i, j, got, want)
			}
		}
	}
	if ComparePrecedence(m("RegularExpression", "^/a$", "", 0, 0), m("RegularExpression", "^/abcdef.*$", "", 0, 0)) != 0 {
		t.Error("regular expressions must tie (file order decides)")
	}
}

// TestMergeSockets checks the socket list of the table (HTTPS ports marked
// TLS, their served listeners in spec order, no-hostname as "") and that
// Resolve writes only the TLS sockets into ghost.json.
func TestMergeSockets(t *testing.T) {
	https := func(name string, port int32, host string) gatewayv1.Listener {
		l := listener(name, port, host)
		l.Protocol = gatewayv1.HTTPSProtocolType
		return l
	}
	tests := []struct {
		name      string
		gw        *gatewayv1.Gateway
		want      string // Table.Sockets as "name tls: listener=host ..." lines
		wantDoc   string // ghost.json sockets, the same way
		conflicts string
	}{
		{
			name:    "HTTP only: no sockets in ghost.json",
			gw:      gateway(listener("http", 80, ""), listener("foo", 80, "foo.example.com")),
			want:    "port-80 false: http= foo=foo.example.com\n",
			wantDoc: "",
		},
		{
			name: "HTTPS listeners on two ports beside HTTP",
			gw: gateway(listener("http", 80, ""), https("www", 443, "www.example.com"), https("wild", 443, "*.example.com"),
				https("any", 443, ""), https("alt", 8443, "alt.example.com")),
			want:    "port-80 false: http=\nport-443 true: www=www.example.com wild=*.example.com any=\nport-8443 true: alt=alt.example.com\n",
			wantDoc: "port-443 true: www=www.example.com wild=*.example.com any=\nport-8443 true: alt=alt.example.com\n",
		},
		{
			name:      "HTTP and HTTPS on one port: the later protocol is not served",
			gw:        gateway(https("a", 443, "a.example.com"), listener("b", 443, "b.example.com")),
			want:      "port-443 true: a=a.example.com\n",
			wantDoc:   "port-443 true: a=a.example.com\n",
			conflicts: ": listener b uses HTTP on port 443, where listener a uses HTTPS: it is not served (one port serves one protocol)\n",
		},
		{
			name:      "same hostname twice on a TLS port",
			gw:        gateway(https("a", 443, "a.example.com"), https("b", 443, "a.example.com")),
			want:      "port-443 true: a=a.example.com\n",
			wantDoc:   "port-443 true: a=a.example.com\n",
			conflicts: ": listener b has the same port (443) and hostname (a.example.com) as listener a: it is not served\n",
		},
	}
	sch := ghostSchema(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := Merge(tc.gw, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got, gotDoc, conflicts strings.Builder
			for _, s := range tb.Sockets {
				fmt.Fprintf(&got, "%s %v:", s.Name, s.TLS)
				for _, l := range s.Listeners {
					fmt.Fprintf(&got, " %s=%s", l.Name, l.Hostname)
				}
				got.WriteString("\n")
				if want := ghostjson.SocketName(gatewayv1.PortNumber(s.Port)); s.Name != want {
					t.Errorf("socket %s has port %d", s.Name, s.Port)
				}
			}
			for _, c := range tb.Conflicts {
				conflicts.WriteString(c.String() + "\n")
			}
			if got.String() != tc.want {
				t.Errorf("sockets:\n%s\nwant:\n%s", got.String(), tc.want)
			}
			if conflicts.String() != tc.conflicts {
				t.Errorf("conflicts:\n%s\nwant:\n%s", conflicts.String(), tc.conflicts)
			}
			doc, err := Resolve(tb, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range doc.Sockets {
				fmt.Fprintf(&gotDoc, "%s %v:", s.Name, s.TLS)
				for _, l := range s.Listeners {
					fmt.Fprintf(&gotDoc, " %s=%s", l.Name, l.Hostname)
				}
				gotDoc.WriteString("\n")
			}
			if gotDoc.String() != tc.wantDoc {
				t.Errorf("ghost.json sockets:\n%s\nwant:\n%s", gotDoc.String(), tc.wantDoc)
			}
			data, err := ghostjson.Marshal(doc)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			checkSchema(t, sch, data)
		})
	}
}
