package gwruntime

import (
	"slices"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestRuntimeNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	tests := []struct {
		gw       object.Ref
		runtime  string
		backends string
	}{
		{object.Ref{Namespace: "gateways", Name: "public"}, "varnishgw-public", "varnishgw-backends-gateways.public"},
		{object.Ref{Namespace: "ns", Name: "with.dots"}, "vgw-with-dots-", "varnishgw-backends-ns.with.dots"},
		{object.Ref{Namespace: "ns", Name: long}, "vgw-" + long[:48] + "-", "varnishgw-backends-ns." + long},
		{object.Ref{Namespace: "ns", Name: "9lives"}, "varnishgw-9lives", "varnishgw-backends-ns.9lives"},
	}
	for _, tt := range tests {
		t.Run(tt.gw.String(), func(t *testing.T) {
			rt := Name(tt.gw)
			if !strings.HasPrefix(rt, tt.runtime) {
				t.Errorf("RuntimeName = %q, want prefix %q", rt, tt.runtime)
			}
			if errs := validation.IsDNS1035Label(rt); len(errs) > 0 {
				t.Errorf("RuntimeName %q is not a Service name: %v", rt, errs)
			}
			if errs := validation.IsDNS1123Subdomain(VCLConfigMapName(tt.gw)); len(errs) > 0 {
				t.Errorf("VCLConfigMapName %q: %v", VCLConfigMapName(tt.gw), errs)
			}
			br := BackendClusterRoleName(tt.gw)
			if !strings.HasPrefix(br, tt.backends) || len(br) > 253 {
				t.Errorf("BackendClusterRoleName = %q, want prefix %q", br, tt.backends)
			}
			for k, v := range Labels(tt.gw) {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Errorf("label %s=%q: %v", k, v, errs)
				}
			}
		})
	}
	// Names differing only in characters the readable part drops stay apart.
	a, b := Name(object.Ref{Namespace: "ns", Name: "a.b"}), Name(object.Ref{Namespace: "ns", Name: "a-b.x"})
	if a == b || Name(object.Ref{Namespace: "ns", Name: "x.y"}) == Name(object.Ref{Namespace: "ns", Name: "x_y"}) {
		t.Errorf("names collide: %q %q", a, b)
	}
}

func TestCertificateRules(t *testing.T) {
	if r := CertificateRules(nil, true); r != nil {
		t.Fatalf("no Secrets: rules %v, want none (a rule without resourceNames would grant every Secret)", r)
	}
	names := []string{"a", "b"}
	rules := CertificateRules(names, false)
	names[0] = "changed"
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"secrets"}) || !slices.Equal(rules[0].ResourceNames, []string{"a", "b"}) ||
		!slices.Equal(rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("rules = %+v, want get, list and watch of secrets a and b only", rules)
	}
	cross := CertificateRules([]string{"a"}, true)
	if len(cross) != 2 || cross[1].Resources[0] != "referencegrants" || len(cross[1].ResourceNames) != 0 {
		t.Errorf("cross-namespace rules = %+v, want the Secret and reading ReferenceGrants", cross)
	}
	for _, r := range append(rules, cross...) {
		if slices.Contains(r.Resources, "secrets") && len(r.ResourceNames) == 0 {
			t.Errorf("a rule grants every Secret: %+v", r)
		}
	}
}

// TestPerGatewayNames: each name of a per-gateway RBAC object starts with
// its prefix, the namespace and the Gateway's name; is a valid object name
// however long the Gateway's name; and differs for gateways whose
// namespace/name boundary falls elsewhere (a-b/c and a/b-c).
func TestPerGatewayNames(t *testing.T) {
	long := strings.Repeat("a.", 120) + "b"
	for _, fn := range []struct {
		name   string
		of     func(object.Ref) string
		prefix string
	}{
		{"CertificateRoleName", CertificateRoleName, "varnishgw-certs-"},
		{"BackendClusterRoleName", BackendClusterRoleName, "varnishgw-backends-"},
		{"InvalidateAuthBindingName", InvalidateAuthBindingName, "varnishgw-invalidate-"},
		{"RouteStatusRoleName", RouteStatusRoleName, "varnishgw-routes-"},
		{"ListenerSetStatusRoleName", ListenerSetStatusRoleName, "varnishgw-listenersets-"},
	} {
		tests := []struct {
			gw   object.Ref
			want string // after the prefix
		}{
			{object.Ref{Namespace: "edge", Name: "public"}, "edge.public"},
			{object.Ref{Namespace: "a-b", Name: "c"}, "a-b.c"},
			{object.Ref{Namespace: "a", Name: "b-c"}, "a.b-c"},
			{object.Ref{Namespace: "edge", Name: "with.dots"}, "edge.with.dots"},
			{object.Ref{Namespace: "edge", Name: long}, "edge-a-a-a-"},
		}
		seen := map[string]object.Ref{}
		for _, tt := range tests {
			t.Run(fn.name+"/"+tt.gw.String(), func(t *testing.T) {
				n := fn.of(tt.gw)
				if !strings.HasPrefix(n, fn.prefix+tt.want) {
					t.Errorf("%s = %q, want prefix %q", fn.name, n, fn.prefix+tt.want)
				}
				if other, ok := seen[n]; ok {
					t.Errorf("gateways %s and %s share the %s %s", other, tt.gw, fn.name, n)
				}
				seen[n] = tt.gw
				if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
					t.Errorf("%s: %v", n, errs)
				}
			})
		}
	}
}

func TestRouteStatusRules(t *testing.T) {
	if r := RouteStatusRules(nil); r != nil {
		t.Fatalf("no routes: rules %v, want none (a rule without resourceNames would grant every route)", r)
	}
	names := []string{"web", "api"}
	rules := RouteStatusRules(names)
	names[0] = "changed"
	if len(rules) != 2 ||
		!slices.Equal(rules[0].Resources, []string{"httproutes"}) || !slices.Equal(rules[0].Verbs, []string{"get"}) ||
		!slices.Equal(rules[1].Resources, []string{"httproutes/status"}) || !slices.Equal(rules[1].Verbs, []string{"patch"}) {
		t.Errorf("rules = %+v, want get of the routes and patch of their status", rules)
	}
	for _, r := range rules {
		if !slices.Equal(r.ResourceNames, []string{"web", "api"}) {
			t.Errorf("rule %+v: want resourceNames web and api only", r)
		}
	}
}

func TestListenerSetStatusRules(t *testing.T) {
	if r := ListenerSetStatusRules(nil); r != nil {
		t.Fatalf("no ListenerSets: rules %v, want none (a rule without resourceNames would grant every ListenerSet)", r)
	}
	names := []string{"a", "b"}
	rules := ListenerSetStatusRules(names)
	names[0] = "changed"
	if len(rules) != 2 ||
		!slices.Equal(rules[0].Resources, []string{"listenersets"}) || !slices.Equal(rules[0].Verbs, []string{"get"}) ||
		!slices.Equal(rules[1].Resources, []string{"listenersets/status"}) || !slices.Equal(rules[1].Verbs, []string{"patch"}) {
		t.Errorf("rules = %+v, want get of the ListenerSets and patch of their status", rules)
	}
	for _, r := range rules {
		if !slices.Equal(r.ResourceNames, []string{"a", "b"}) {
			t.Errorf("rule %+v: want resourceNames a and b only", r)
		}
	}
	if n := ListenerSetStatusRoleName(object.Ref{Namespace: "edge", Name: "public"}); n != "varnishgw-listenersets-edge.public" {
		t.Errorf("ListenerSetStatusRoleName = %q", n)
	}
	if n := ListenerSetStatusRoleName(object.Ref{Namespace: "edge", Name: strings.Repeat("a.", 100) + "b"}); len(validation.IsDNS1123Subdomain(n)) > 0 || n == CertificateRoleName(object.Ref{Namespace: "edge", Name: strings.Repeat("a.", 100) + "b"}) {
		t.Errorf("ListenerSetStatusRoleName of a long name: %q", n)
	}
}

// TestPerRouteNames: the names of what a route writes per (gateway, route)
// outside the Gateway's namespace differ for Gateways of one name in two
// namespaces, and for namespace/name splits of one string; the fragment
// names are pinned: a change renames objects in every cluster.
func TestPerRouteNames(t *testing.T) {
	web := object.Ref{Namespace: "apps", Name: "web"}
	tests := []struct {
		gw, route object.Ref
		backends  string // prefix
		fragment  string // exact
	}{
		{object.Ref{Namespace: "a", Name: "gw"}, web, "vgw-backends-a-gw-apps-web-", "vgw-gw-apps-web-f5a0824c75"},
		{object.Ref{Namespace: "b", Name: "gw"}, web, "vgw-backends-b-gw-apps-web-", "vgw-gw-apps-web-f5a0824c75"},
		{object.Ref{Namespace: "a-b", Name: "c"}, web, "vgw-backends-a-b-c-apps-web-", ""},
		{object.Ref{Namespace: "a", Name: "b-c"}, web, "vgw-backends-a-b-c-apps-web-", ""},
		{object.Ref{Namespace: "ns", Name: "With.Dots"}, object.Ref{Namespace: "r-ns", Name: "Route_1"},
			"vgw-backends-ns-with-dots-r-ns-route-1-", "vgw-with-dots-r-ns-route-1-625f928853"},
		{object.Ref{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("G", 253)}, object.Ref{Namespace: strings.Repeat("m", 63), Name: strings.Repeat("r", 253)},
			"vgw-backends-" + strings.Repeat("n", 63) + "-" + strings.Repeat("g", 136) + "-", ""},
	}
	seen := map[string]object.Ref{}
	for _, tt := range tests {
		t.Run(tt.gw.String()+"/"+tt.route.String(), func(t *testing.T) {
			b := BackendRoleBindingName(tt.gw, tt.route)
			if !strings.HasPrefix(b, tt.backends) || len(b) != len(tt.backends)+10 {
				t.Errorf("BackendRoleBindingName = %q, want %q and 10 hex digits", b, tt.backends)
			}
			if other, ok := seen[b]; ok {
				t.Errorf("Gateways %s and %s share the backend RoleBinding %s", other, tt.gw, b)
			}
			seen[b] = tt.gw
			if b != BackendRoleBindingName(tt.gw, tt.route) {
				t.Error("BackendRoleBindingName is not deterministic")
			}
			if b == FragmentName(tt.gw, tt.route) {
				t.Errorf("the backend binding %s has the fragment's name", b)
			}
			if got := FragmentName(tt.gw, tt.route); tt.fragment != "" && got != tt.fragment {
				t.Errorf("FragmentName = %q, want %q", got, tt.fragment)
			}
			for _, n := range []string{b, FragmentName(tt.gw, tt.route)} {
				if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
					t.Errorf("%s: %v", n, errs)
				}
			}
		})
	}
}
