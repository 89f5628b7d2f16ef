package routing

import (
	"errors"
	"slices"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestAttach(t *testing.T) {
	objs := &Objects{
		Namespaces: []*corev1.Namespace{namespace("infra", nil), namespace("apps", map[string]string{"team": "a"}), namespace("other", nil)},
		Services:   []*corev1.Service{service("infra", "web"), service("apps", "web"), service("backends", "api"), service("backends", "db")},
	}
	withGrant := &Objects{Namespaces: objs.Namespaces, Services: objs.Services, ReferenceGrants: []*gatewayv1.ReferenceGrant{grant("backends", "infra", "api")}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	onlyTCP := listener("tcp", 80, "")
	onlyTCP.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "TCPRoute"}}}
	crossBackend := func(ns, name string) routeOpt {
		return func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0] = backend(ns, name, 80, nil) }
	}

	tests := []struct {
		name      string
		gw        *gatewayv1.Gateway
		route     *gatewayv1.HTTPRoute
		objs      *Objects
		accepted  string // reason, "!" prefix for status False
		resolved  string
		listeners map[string][]string
	}{
		{"accepted, no hostnames", gateway(listener("http", 80, "")), route("infra", "r"), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"http": {"*"}}},
		{"hostname intersection", gateway(listener("a", 80, "*.example.com"), listener("b", 80, "other.org")),
			route("infra", "r", hostnames("foo.example.com", "bar.org")), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"a": {"foo.example.com"}}},
		{"no matching listener hostname", gateway(listener("a", 80, "*.example.com")),
			route("infra", "r", hostnames("example.com")), objs,
			"!NoMatchingListenerHostname", "ResolvedRefs", nil},
		{"sectionName", gateway(listener("a", 80, ""), listener("b", 8080, "")),
			route("infra", "r", section("b")), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"b": {"*"}}},
		{"sectionName not found", gateway(listener("a", 80, "")),
			route("infra", "r", section("nope")), objs,
			"!NoMatchingParent", "ResolvedRefs", nil},
		{"port", gateway(listener("a", 80, ""), listener("b", 8080, "")),
			route("infra", "r", func(r *gatewayv1.HTTPRoute) { r.Spec.ParentRefs[0].Port = ptr(int32(8080)) }), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"b": {"*"}}},
		{"port not found", gateway(listener("a", 80, "")),
			route("infra", "r", func(r *gatewayv1.HTTPRoute) { r.Spec.ParentRefs[0].Port = ptr(int32(81)) }), objs,
			"!NoMatchingParent", "ResolvedRefs", nil},
		{"sectionName and port disagree", gateway(listener("a", 80, ""), listener("b", 8080, "")),
			route("infra", "r", section("a"), func(r *gatewayv1.HTTPRoute) { r.Spec.ParentRefs[0].Port = ptr(int32(8080)) }), objs,
			"!NoMatchingParent", "ResolvedRefs", nil},
		{"from Same rejects other namespace", gateway(listener("a", 80, "")),
			route("apps", "r"), objs,
			"!NotAllowedByListeners", "ResolvedRefs", nil},
		{"from All", gateway(fromNS(listener("a", 80, ""), gatewayv1.NamespacesFromAll, nil)),
			route("apps", "r"), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"a": {"*"}}},
		{"from Selector match", gateway(fromNS(listener("a", 80, ""), gatewayv1.NamespacesFromSelector, sel)),
			route("apps", "r"), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"a": {"*"}}},
		{"from Selector no match", gateway(fromNS(listener("a", 80, ""), gatewayv1.NamespacesFromSelector, sel)),
			route("other", "r", crossBackend("infra", "web")), objs,
			"!NotAllowedByListeners", "!RefNotPermitted", nil},
		{"from None", gateway(fromNS(listener("a", 80, ""), gatewayv1.NamespacesFromNone, nil)),
			route("infra", "r"), objs,
			"!NotAllowedByListeners", "ResolvedRefs", nil},
		{"kind not allowed", gateway(onlyTCP), route("infra", "r"), objs,
			"!NotAllowedByListeners", "ResolvedRefs", nil},
		{"one allowed listener of two", gateway(onlyTCP, listener("b", 80, "")), route("infra", "r"), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"b": {"*"}}},
		{"cross-namespace backend without grant", gateway(listener("a", 80, "")),
			route("infra", "r", crossBackend("backends", "api")), objs,
			"Accepted", "!RefNotPermitted", map[string][]string{"a": {"*"}}},
		{"cross-namespace backend with grant", gateway(listener("a", 80, "")),
			route("infra", "r", crossBackend("backends", "api")), withGrant,
			"Accepted", "ResolvedRefs", map[string][]string{"a": {"*"}}},
		{"grant for another service", gateway(listener("a", 80, "")),
			route("infra", "r", crossBackend("backends", "db")), withGrant,
			"Accepted", "!RefNotPermitted", map[string][]string{"a": {"*"}}},
		{"backend not found", gateway(listener("a", 80, "")),
			route("infra", "r", crossBackend("", "missing")), objs,
			"Accepted", "!BackendNotFound", map[string][]string{"a": {"*"}}},
		{"backend port not found", gateway(listener("a", 80, "")),
			route("infra", "r", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Port = ptr(int32(81)) }), objs,
			"Accepted", "!BackendNotFound", map[string][]string{"a": {"*"}}},
		{"invalid kind", gateway(listener("a", 80, "")),
			route("infra", "r", func(r *gatewayv1.HTTPRoute) {
				r.Spec.Rules[0].BackendRefs[0].Group = ptr(gatewayv1.Group("example.com"))
				r.Spec.Rules[0].BackendRefs[0].Kind = ptr(gatewayv1.Kind("Bucket"))
			}), objs,
			"Accepted", "!InvalidKind", map[string][]string{"a": {"*"}}},
		{"invalid spec", gateway(listener("a", 80, "")),
			route("infra", "r", func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{prefix("nope")} }), objs,
			"!UnsupportedValue", "ResolvedRefs", nil},
		{"hostnames merged across listeners", gateway(listener("a", 80, "*.example.com"), listener("b", 8080, "")),
			route("infra", "r", hostnames("a.example.com", "b.org")), objs,
			"Accepted", "ResolvedRefs", map[string][]string{"a": {"a.example.com"}, "b": {"a.example.com", "b.org"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Attach(tt.gw, tt.route, tt.objs)
			if err != nil {
				t.Fatal(err)
			}
			if got := condition(f, gatewayv1.RouteConditionAccepted); got != tt.accepted {
				t.Errorf("Accepted = %s, want %s (%+v)", got, tt.accepted, f.Parents[0].Conditions)
			}
			if got := condition(f, gatewayv1.RouteConditionResolvedRefs); got != tt.resolved {
				t.Errorf("ResolvedRefs = %s, want %s (%+v)", got, tt.resolved, f.Parents[0].Conditions)
			}
			got := map[string][]string{}
			for _, l := range f.Listeners {
				got[l.Name] = l.Hostnames
			}
			if len(got) != len(tt.listeners) {
				t.Fatalf("listeners = %v, want %v", got, tt.listeners)
			}
			for k, v := range tt.listeners {
				if !slices.Equal(got[k], v) {
					t.Errorf("listener %s hostnames = %v, want %v", k, got[k], v)
				}
			}
			if f.Accepted() != (len(f.Rules) > 0) {
				t.Errorf("accepted fragment must carry rules, rejected one none: %d rules", len(f.Rules))
			}
			if err := f.Validate(); err != nil {
				t.Errorf("fragment does not validate: %v", err)
			}
		})
	}
}

func TestAttachNoRules(t *testing.T) {
	f, err := Attach(gateway(listener("a", 80, "")), route("infra", "r", rules()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rules) != 1 || f.Rules[0].Matches[0].Path.Value != "/" || len(f.Rules[0].Backends) != 0 {
		t.Errorf("rules = %+v, want the CRD default", f.Rules)
	}
}

func TestAttachNotParent(t *testing.T) {
	r := route("infra", "r")
	r.Spec.ParentRefs[0].Name = "other"
	if _, err := Attach(gateway(listener("a", 80, "")), r, nil); !errors.Is(err, ErrNotParent) {
		t.Fatalf("err = %v, want ErrNotParent", err)
	}
}

func TestAttachNormalizes(t *testing.T) {
	r := route("infra", "r", rules(gatewayv1.HTTPRouteRule{
		Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Env", Value: "prod"}}}},
		Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{
			BackendRef: gatewayv1.BackendObjectReference{Name: "web", Port: ptr(int32(80))}, Fraction: &gatewayv1.Fraction{Numerator: 1, Denominator: ptr(int32(4))}}}},
		BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, nil), backend("", "web", 80, ptr(int32(0)))},
		Timeouts:    &gatewayv1.HTTPRouteTimeouts{Request: ptr(gatewayv1.Duration("1m30s"))},
	}, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{backend("", "web", 80, ptr(int32(3)))}}))
	f, err := Attach(gateway(listener("a", 80, "")), r, &Objects{Services: []*corev1.Service{service("infra", "web")}})
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := f.Rules[0], f.Rules[1]
	if m := r0.Matches[0]; m.Path.Type != "PathPrefix" || m.Path.Value != "/" || m.Headers[0].Name != "x-env" || m.Headers[0].Type != "Exact" {
		t.Errorf("match defaults not filled in: %+v", m)
	}
	if r0.Backends[0].Weight != 1 || r0.Backends[1].Weight != 0 || r1.Backends[0].Weight != 3 {
		t.Errorf("weights: %+v %+v", r0.Backends, r1.Backends)
	}
	if p := r0.Filters[0].RequestMirror.Percent; p == nil || *p != 25 {
		t.Errorf("mirror percent = %v, want 25", p)
	}
	if r0.Timeouts == nil || r0.Timeouts.RequestMs != 90000 {
		t.Errorf("timeouts = %+v", r0.Timeouts)
	}
	if len(r1.Matches) != 1 || r1.Matches[0].Path.Value != "/" {
		t.Errorf("rule without matches: %+v", r1.Matches)
	}
}

func TestRouteParentStatus(t *testing.T) {
	f, err := Attach(gateway(listener("a", 80, "")), route("infra", "r"), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	st := f.Parents[0].RouteParentStatus("varnishgw.dev/gateway", 7, now)
	if st.ControllerName != "varnishgw.dev/gateway" || len(st.Conditions) != 2 || st.Conditions[1].ObservedGeneration != 7 ||
		st.Conditions[1].Reason != "BackendNotFound" || !st.Conditions[0].LastTransitionTime.Equal(&now) {
		t.Errorf("status = %+v", st)
	}
}

func TestSameParentRef(t *testing.T) {
	ptr := func(s string) *string { return &s }
	group := func(s string) *gatewayv1.Group { return (*gatewayv1.Group)(ptr(s)) }
	kind := func(s string) *gatewayv1.Kind { return (*gatewayv1.Kind)(ptr(s)) }
	ns := func(s string) *gatewayv1.Namespace { return (*gatewayv1.Namespace)(ptr(s)) }
	section := func(s string) *gatewayv1.SectionName { return (*gatewayv1.SectionName)(ptr(s)) }
	port := func(n int32) *gatewayv1.PortNumber { p := gatewayv1.PortNumber(n); return &p }
	edge := gatewayv1.ParentReference{Name: "edge"}
	for _, tc := range []struct {
		name string
		a, b gatewayv1.ParentReference
		want bool
	}{
		{"same", edge, edge, true},
		{"defaults spelled out", edge, gatewayv1.ParentReference{Group: group(gatewayv1.GroupName), Kind: kind("Gateway"), Namespace: ns("apps"), Name: "edge"}, true},
		{"other namespace", edge, gatewayv1.ParentReference{Namespace: ns("infra"), Name: "edge"}, false},
		{"a ListenerSet of the same name", edge, gatewayv1.ParentReference{Group: group(gatewayv1.GroupName), Kind: kind("ListenerSet"), Name: "edge"}, false},
		{"another group", edge, gatewayv1.ParentReference{Group: group("example.com"), Name: "edge"}, false},
		{"a section", edge, gatewayv1.ParentReference{Name: "edge", SectionName: section("http")}, false},
		{"a port", edge, gatewayv1.ParentReference{Name: "edge", Port: port(80)}, false},
		{"same section and port", gatewayv1.ParentReference{Name: "edge", SectionName: section("http"), Port: port(80)},
			gatewayv1.ParentReference{Name: "edge", SectionName: section("http"), Port: port(80)}, true},
	} {
		if got := SameParentRef(tc.a, tc.b, "apps"); got != tc.want {
			t.Errorf("%s: SameParentRef = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestResolvedRefsConditionMessage: the message's last clause says what
// unresolved references cost: a 500 for a rule's backendRef, only the
// copies for a mirror's.
func TestResolvedRefsConditionMessage(t *testing.T) {
	backend := refProblem{"spec.rules[0].backendRefs[0]", gatewayv1.RouteReasonBackendNotFound, "Service shop/a not found", false}
	mirror := refProblem{"spec.rules[0].filters[0].requestMirror.backendRef", gatewayv1.RouteReasonRefNotPermitted, "no ReferenceGrant", true}
	for _, tc := range []struct {
		name     string
		problems []refProblem
		want     string
	}{
		{"none", nil, "all backend references resolved"},
		{"backend", []refProblem{backend}, "spec.rules[0].backendRefs[0]: Service shop/a not found; requests for these backends get 500 while they do not resolve"},
		{"mirror", []refProblem{mirror}, "spec.rules[0].filters[0].requestMirror.backendRef: no ReferenceGrant; no copies of requests go to these mirrors while they do not resolve; the requests are served"},
		{"both", []refProblem{backend, mirror}, "spec.rules[0].backendRefs[0]: Service shop/a not found; spec.rules[0].filters[0].requestMirror.backendRef: no ReferenceGrant; requests for these backendRefs get 500, and no copies go to these mirrors, while they do not resolve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolvedRefsCondition(tc.problems).Message; got != tc.want {
				t.Errorf("message = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNamesListenerSet: a parentRef names a ListenerSet by kind, with the
// group gateway.networking.k8s.io or left out (the CRD's default, as for a
// Gateway), and the route's namespace unless it sets one.
func TestNamesListenerSet(t *testing.T) {
	group := func(g string) *gatewayv1.Group { v := gatewayv1.Group(g); return &v }
	kind := func(k string) *gatewayv1.Kind { v := gatewayv1.Kind(k); return &v }
	ns := gatewayv1.Namespace("other")
	for _, tc := range []struct {
		name string
		pr   gatewayv1.ParentReference
		want object.Ref
		ok   bool
	}{
		{"group set", gatewayv1.ParentReference{Group: group(gatewayv1.GroupName), Kind: kind("ListenerSet"), Name: "ls"}, object.Ref{Namespace: "shop", Name: "ls"}, true},
		{"group left out", gatewayv1.ParentReference{Kind: kind("ListenerSet"), Name: "ls"}, object.Ref{Namespace: "shop", Name: "ls"}, true},
		{"namespace", gatewayv1.ParentReference{Kind: kind("ListenerSet"), Namespace: &ns, Name: "ls"}, object.Ref{Namespace: "other", Name: "ls"}, true},
		{"another group", gatewayv1.ParentReference{Group: group("example.com"), Kind: kind("ListenerSet"), Name: "ls"}, object.Ref{}, false},
		{"a Gateway", gatewayv1.ParentReference{Name: "gw"}, object.Ref{}, false},
		{"another kind", gatewayv1.ParentReference{Kind: kind("Service"), Name: "ls"}, object.Ref{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := namesListenerSet(tc.pr, "shop")
			if got != tc.want || ok != tc.ok {
				t.Errorf("namesListenerSet = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
