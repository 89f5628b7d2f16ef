package routing

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// TestPrecedenceGroup checks the precedenceGroup Resolve assigns per
// (vhost, route) for the Gateway API hostname precedence, that the output
// validates against ghost.schema.json, and that the reference model of
// ghost (which sorts by precedenceGroup, then match precedence) routes
// requests to the route with the most specific matching hostname even when
// a less specific one has the more specific match.
func TestPrecedenceGroup(t *testing.T) {
	objs := &Objects{Services: []*corev1.Service{service("infra", "web")}}
	paths := func(ps ...string) routeOpt {
		var ms []gatewayv1.HTTPRouteMatch
		for _, p := range ps {
			ms = append(ms, prefix(p))
		}
		return rules(gatewayv1.HTTPRouteRule{Matches: ms, BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil)}})
	}
	type req struct{ host, path, want string }
	tests := []struct {
		name   string
		gw     *gatewayv1.Gateway
		routes []*gatewayv1.HTTPRoute
		// want lists "hostname: name:group ..." per vhost.
		want      string
		reqs      []req
		conflicts []string // "loser < winner"
	}{
		{
			name: "exact hostname beats a wildcard with a longer prefix",
			gw:   gateway(listener("any", 80, "")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "wild", hostnames("*.example.com"), paths("/longer/path"), created(-time.Hour)),
				route("infra", "exact", hostnames("foo.example.com"), paths("/")),
			},
			want: "*:\n" +
				"*.example.com: infra/wild/0/0:0\n" +
				"foo.example.com: infra/exact/0/0:0 infra/wild/0/0:1\n",
			reqs: []req{
				{"foo.example.com", "/longer/path/x", "infra/exact/0/0"},
				{"foo.example.com", "/", "infra/exact/0/0"},
				{"bar.example.com", "/longer/path/x", "infra/wild/0/0"},
				{"bar.example.com", "/", ""},
			},
		},
		{
			name: "exact, two wildcard lengths and no hostname: one group each, most specific first",
			gw:   gateway(listener("any", 80, "")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "any", paths("/a/b/c/d"), created(-3*time.Hour)),
				route("infra", "short", hostnames("*.example.com"), paths("/a/b/c"), created(-2*time.Hour)),
				route("infra", "long", hostnames("*.b.example.com"), paths("/a/b"), created(-time.Hour)),
				route("infra", "exact", hostnames("a.b.example.com", "*.example.com"), paths("/a", "/z")),
			},
			want: "*: infra/any/0/0:0\n" +
				"*.b.example.com: infra/long/0/0:0 infra/short/0/0:1 infra/exact/0/0:1 infra/exact/0/1:1 infra/any/0/0:2\n" +
				"*.example.com: infra/short/0/0:0 infra/exact/0/0:0 infra/exact/0/1:0 infra/any/0/0:1\n" +
				"a.b.example.com: infra/exact/0/0:0 infra/exact/0/1:0 infra/long/0/0:1 infra/short/0/0:2 infra/any/0/0:3\n",
			reqs: []req{
				{"a.b.example.com", "/a/b/c/d", "infra/exact/0/0"},
				{"a.b.example.com", "/q", ""},
				{"x.b.example.com", "/a/b/c/d", "infra/long/0/0"},
				{"x.b.example.com", "/a/x", "infra/exact/0/0"},
				{"x.example.com", "/a/b/c/d", "infra/short/0/0"},
				{"example.org", "/a/b/c/d", "infra/any/0/0"},
			},
		},
		{
			name: "one hostname: group 0 everywhere, match precedence decides",
			gw:   gateway(listener("any", 80, "")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "old", hostnames("*.example.com"), paths("/"), created(-time.Hour)),
				route("infra", "new", hostnames("*.example.com"), paths("/longer")),
			},
			want: "*:\n*.example.com: infra/new/0/0:0 infra/old/0/0:0\n",
			reqs: []req{
				{"foo.example.com", "/longer/x", "infra/new/0/0"},
				{"foo.example.com", "/x", "infra/old/0/0"},
			},
		},
		{
			name: "identical match in a less specific group is shadowed",
			gw:   gateway(listener("any", 80, "")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "wild", hostnames("*.example.com"), paths("/", "/w"), created(-time.Hour)),
				route("infra", "exact", hostnames("foo.example.com"), paths("/")),
			},
			want: "*:\n" +
				"*.example.com: infra/wild/0/1:0 infra/wild/0/0:0\n" +
				"foo.example.com: infra/exact/0/0:0 infra/wild/0/1:1 infra/wild/0/0:1\n",
			reqs: []req{
				{"foo.example.com", "/w", "infra/exact/0/0"},
				{"bar.example.com", "/w", "infra/wild/0/1"},
				{"foo.example.com", "/x", "infra/exact/0/0"},
			},
			conflicts: []string{"infra/wild/0/0 < infra/exact/0/0"},
		},
		{
			name: "listener hostname: routes without hostnames inherit it",
			gw:   gateway(listener("foo", 80, "foo.example.com"), listener("wild", 80, "*.example.com")),
			routes: []*gatewayv1.HTTPRoute{
				route("infra", "w", section("wild"), paths("/longer/path")),
				route("infra", "f", section("foo"), paths("/")),
			},
			want: "*.example.com: infra/w/0/0:0\nfoo.example.com: infra/f/0/0:0\n",
			reqs: []req{
				{"foo.example.com", "/longer/path", "infra/f/0/0"},
				{"bar.example.com", "/longer/path", "infra/w/0/0"},
			},
		},
	}
	sch := ghostSchema(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frags := attachAll(t, tt.gw, objs, tt.routes...)
			tb, err := Merge(tt.gw, frags)
			if err != nil {
				t.Fatal(err)
			}
			var conflicts []string
			for _, c := range tb.Conflicts {
				conflicts = append(conflicts, c.Route+" < "+c.Winner)
			}
			if got, want := strings.Join(conflicts, ","), strings.Join(tt.conflicts, ","); got != want {
				t.Errorf("conflicts = %q, want %q (%v)", got, want, tb.Conflicts)
			}
			doc, err := Resolve(tb, objs)
			if err != nil {
				t.Fatal(err)
			}
			data, err := ghostjson.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, sch, data)
			doc, err = ghostjson.Unmarshal(data)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			nonzero := 0
			for _, v := range doc.VHosts {
				b.WriteString(v.Hostname + ":")
				for _, r := range v.Routes {
					fmt.Fprintf(&b, " %s:%d", r.Name, r.PrecedenceGroup)
					if r.PrecedenceGroup != 0 {
						nonzero++
					}
				}
				b.WriteString("\n")
			}
			if got := b.String(); got != tt.want {
				t.Errorf("groups:\n%swant\n%s", got, tt.want)
			}
			if n := strings.Count(string(data), `"precedenceGroup":`); n != nonzero {
				t.Errorf("precedenceGroup written %d times, want %d (only when not 0):\n%s", n, nonzero, data)
			}
			for _, r := range tt.reqs {
				got := ""
				if rt := ghostRoute(doc, ghostjson.SocketName(80), r.host, r.path); rt != nil {
					got = rt.Name
				}
				if got != r.want {
					t.Errorf("%s%s routed to %q, want %q", r.host, r.path, got, r.want)
				}
			}
		})
	}
}
