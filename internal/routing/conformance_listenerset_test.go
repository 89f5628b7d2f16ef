package routing

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// conformanceListenerSetExpect is what the suite's listenerset-*.go tests
// assert of each ListenerSet (file: namespace/name) and of each of its
// listeners that is not plainly accepted (file: namespace/name/listener).
// Every other listener must be accepted, programmed, not conflicted and
// with resolved references.
var conformanceListenerSetExpect = map[string]string{
	"listenerset-allowed-namespace-none.yaml: gateway-conformance-infra/listenerset-not-allowed":                                                                               "!NotAllowed",
	"listenerset-allowed-namespace-same.yaml: gateway-conformance-infra/listenerset-in-same-namespace":                                                                         "Accepted",
	"listenerset-allowed-namespace-same.yaml: gateway-api-listenerset-not-allowed-ns/listenerset-in-different-namespace":                                                       "!NotAllowed",
	"listenerset-allowed-namespace-selector.yaml: gateway-api-listenerset-selector-allowed-ns/listenerset-in-selected-namespace":                                               "Accepted",
	"listenerset-allowed-namespace-selector.yaml: gateway-api-listenerset-selector-not-allowed-ns/listenerset-not-in-selected-namespace":                                       "!NotAllowed",
	"listenerset-allowed-routes-namespaces.yaml: gateway-conformance-infra/listenerset-test-allowed-routes-namespaces":                                                         "Accepted",
	"listenerset-allowed-routes-namespaces.yaml: gateway-api-ls-cross-ns/listenerset-test-allowed-routes-cross-ns":                                                             "Accepted",
	"listenerset-allowed-routes-supported-kinds.yaml: gateway-conformance-infra/listenerset-test-allowed-routes-supported-kinds":                                               "!ListenersNotValid",
	"listenerset-allowed-routes-supported-kinds.yaml: gateway-conformance-infra/listenerset-test-allowed-routes-supported-kinds/listener-set-listener-allowed-routes-tls-only": "!UnsupportedProtocol refs !InvalidRouteKinds",
	"listenerset-default-not-allowed.yaml: gateway-conformance-infra/listenerset-default-not-allowed":                                                                          "!NotAllowed",
	"listenerset-dual-parentref-independence.yaml: gateway-conformance-infra/ls-dual-parentref":                                                                                "Accepted",
	"listenerset-gateway-parent-section-name-not-found.yaml: gateway-conformance-infra/listenerset-section-name":                                                               "Accepted",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-gateway-1":                                                          "Accepted",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-gateway-1/hostname-conflict-with-gateway-listener":                  "!HostnameConflict",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-gateway-2":                                                          "!ListenersNotValid",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-gateway-2/hostname-conflict-with-gateway-listener":                  "!HostnameConflict",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-listener-set-1":                                                     "Accepted",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-listener-set-1/hostname-conflict-with-listener-set-listener":        "!HostnameConflict",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-listener-set-2":                                                     "!ListenersNotValid",
	"listenerset-hostname-conflict.yaml: gateway-conformance-infra/listenerset-with-hostname-conflict-with-listener-set-2/hostname-conflict-with-listener-set-listener":        "!HostnameConflict",
	"listenerset-http-routing.yaml: gateway-conformance-infra/listener-set-http-routing-1":                                                                                     "Accepted",
	"listenerset-http-routing.yaml: gateway-conformance-infra/listener-set-http-routing-2":                                                                                     "Accepted",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-gateway-1":                                                          "Accepted",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-gateway-1/protocol-conflict-with-gateway-listener":                  "!ProtocolConflict",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-gateway-2":                                                          "!ListenersNotValid",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-gateway-2/protocol-conflict-with-gateway-listener":                  "!ProtocolConflict",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-listener-set-1":                                                     "Accepted",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-listener-set-1/protocol-conflict-with-listener-set-listener":        "!ProtocolConflict",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-listener-set-2":                                                     "!ListenersNotValid",
	"listenerset-protocol-conflict.yaml: gateway-conformance-infra/listenerset-with-protocol-conflict-with-listener-set-2/protocol-conflict-with-listener-set-listener":        "!ProtocolConflict",
	"listenerset-route-status-scoped-to-parentref.yaml: gateway-conformance-infra/listenerset-parentref":                                                                       "Accepted",
	"listenerset-reference-grant.yaml: gateway-conformance-infra/listenerset-with-reference-grant":                                                                             "Accepted",
	"listenerset-reference-grant.yaml: gateway-api-listener-sets-test-reference-grant-ns/listenerset-without-reference-grant":                                                  "!ListenersNotValid",
	"listenerset-reference-grant.yaml: gateway-api-listener-sets-test-reference-grant-ns/listenerset-without-reference-grant/listenerset-without-reference-grant-listener":     "refs !RefNotPermitted",
}

// conformanceListenerSetGaps are ListenerSets of the suite varnishgw does
// not serve as the suite expects, and why (none now).
var conformanceListenerSetGaps = map[string]string{}

// conformanceAttachedRoutes are the attachedRoutes the suite expects of
// ListenerSet listeners (file: namespace/set/listener).
var conformanceAttachedRoutes = map[string]int{
	"listenerset-allowed-routes-namespaces.yaml: gateway-conformance-infra/listenerset-test-allowed-routes-namespaces/listener-set-listener-allowed-routes-all":       3,
	"listenerset-allowed-routes-namespaces.yaml: gateway-conformance-infra/listenerset-test-allowed-routes-namespaces/listener-set-listener-allowed-routes-same":      1,
	"listenerset-allowed-routes-namespaces.yaml: gateway-conformance-infra/listenerset-test-allowed-routes-namespaces/listener-set-listener-allowed-routes-selector":  1,
	"listenerset-allowed-routes-namespaces.yaml: gateway-api-ls-cross-ns/listenerset-test-allowed-routes-cross-ns/listener-set-listener-allowed-routes-cross-ns-same": 1,
	"listenerset-dual-parentref-independence.yaml: gateway-conformance-infra/ls-dual-parentref/ls-dual-parentref-listener":                                            2,
	"listenerset-http-routing.yaml: gateway-conformance-infra/listener-set-http-routing-1/listener-set-http-routing-1-listener-1":                                     3,
	"listenerset-http-routing.yaml: gateway-conformance-infra/listener-set-http-routing-1/listener-set-http-routing-1-listener-2":                                     2,
	"listenerset-http-routing.yaml: gateway-conformance-infra/listener-set-http-routing-2/listener-set-http-routing-2-listener-1":                                     2,
	"listenerset-http-routing.yaml: gateway-conformance-infra/listener-set-http-routing-2/listener-set-http-routing-2-listener-2":                                     2,
	"listenerset-route-status-scoped-to-parentref.yaml: gateway-conformance-infra/listenerset-parentref/listenerset-parentref-listener":                               1,
}

// TestConformanceListenerSets composes every Gateway of the suite's
// listenerset-*.yaml manifests with their ListenerSets and checks the
// ListenerSets' and listeners' conditions and the listeners'
// attachedRoutes against what the suite's tests assert.
func TestConformanceListenerSets(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	files, err := filepath.Glob(filepath.Join(dir, "tests", "listenerset-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ListenerSet manifests in %s: %v", dir, err)
	}
	got := map[string]string{}
	attached := map[string]int{}
	sets := 0
	for _, file := range files {
		name := filepath.Base(file)
		if conformanceListenerSetGaps[name] != "" {
			continue
		}
		m := readManifests(t, file)
		objs := &Objects{
			Namespaces:      append(append([]*corev1.Namespace{}, base.namespaces...), m.namespaces...),
			Services:        append(append([]*corev1.Service{}, base.services...), m.services...),
			ReferenceGrants: append(append([]*gatewayv1.ReferenceGrant{}, base.grants...), m.grants...),
			ListenerSets:    m.sets,
		}
		for _, gw := range m.gateways {
			c := ComposeGateway(gw, m.sets, objs)
			for _, r := range c.ListenerSets {
				sets++
				key := fmt.Sprintf("%s: %s", name, r.Set)
				got[key] = condStr(r.Conditions, string(gatewayv1.ListenerSetConditionAccepted))
				for _, l := range r.Listeners {
					lk := key + "/" + l.Name
					acc := condStr(l.Conditions, string(gatewayv1.ListenerEntryConditionAccepted))
					refs := condStr(l.Conditions, string(gatewayv1.ListenerEntryConditionResolvedRefs))
					switch {
					case acc != string(gatewayv1.ListenerEntryReasonAccepted) && refs != string(gatewayv1.ListenerEntryReasonResolvedRefs):
						got[lk] = acc + " refs " + refs
					case acc != string(gatewayv1.ListenerEntryReasonAccepted):
						got[lk] = acc
					case refs != string(gatewayv1.ListenerEntryReasonResolvedRefs):
						got[lk] = "refs " + refs
					}
				}
			}
			// attachedRoutes: the accepted fragments listing each key.
			for _, r := range m.routes {
				f, err := Attach(gw, r, objs)
				if err != nil {
					continue
				}
				for _, al := range f.Listeners {
					if set, l, ok := parseListenerKey(al.Name); ok {
						attached[fmt.Sprintf("%s: %s/%s", name, set, l)]++
					}
				}
			}
			if _, err := Merge(c.Gateway, nil); err != nil {
				t.Errorf("%s: merge %s/%s: %v", name, gw.Namespace, gw.Name, err)
			}
		}
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if want := conformanceListenerSetExpect[k]; got[k] != want {
			t.Errorf("%s: got %s, want %s", k, got[k], want)
		}
	}
	for k, want := range conformanceListenerSetExpect {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: want %s, but no such ListenerSet or listener outcome", k, want)
		}
	}
	for k, want := range conformanceAttachedRoutes {
		if attached[k] != want {
			t.Errorf("%s: attachedRoutes %d, want %d", k, attached[k], want)
		}
	}
	t.Logf("%d ListenerSets checked", sets)
}

// condStr is the reason of condition typ in cs, prefixed with "!" when it
// is False; "missing" when absent.
func condStr(cs []Condition, typ string) string {
	for _, c := range cs {
		if c.Type == typ {
			if c.Status == string(metav1.ConditionFalse) {
				return "!" + c.Reason
			}
			return c.Reason
		}
	}
	return "missing"
}

// TestConformanceListenerSetHTTPRouting replays the requests of the
// suite's ListenerSetHTTPRouting test (transcribed from
// tests/listenerset-http-routing.go: routes attached to the Gateway serve
// only its own listeners, routes attached to a ListenerSet only that
// ListenerSet's, sectionName narrows to one listener) against the
// ghost.json Resolve writes, using the reference model ghostRoute.
func TestConformanceListenerSetHTTPRouting(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	m := readManifests(t, filepath.Join(dir, "tests", "listenerset-http-routing.yaml"))
	if len(m.gateways) != 1 || len(m.sets) != 2 || len(m.routes) != 6 {
		t.Fatalf("%d gateways, %d ListenerSets, %d routes: the suite changed", len(m.gateways), len(m.sets), len(m.routes))
	}
	objs := &Objects{Namespaces: base.namespaces, Services: base.services, ListenerSets: m.sets}
	c := ComposeGateway(m.gateways[0], m.sets, objs)
	var frags []*Fragment
	for _, r := range m.routes {
		f, err := Attach(c.Gateway, r, objs)
		if err != nil || !f.Accepted() {
			t.Fatalf("%s: %v %+v", r.Name, err, f)
		}
		frags = append(frags, f)
	}
	tb, err := Merge(c.Gateway, frags)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Resolve(tb, objs)
	if err != nil {
		t.Fatal(err)
	}
	// host -> the paths it serves; every other (host, path) is 404.
	all := "/route"
	ls1 := []string{all, "/listener-set-http-routing-1-route"}
	ls2 := []string{all, "/listener-set-http-routing-2-route"}
	served := map[string][]string{
		"gateway-listener-1.com":                     {all, "/gateway-route", "/gateway-section-route"},
		"gateway-listener-2.com":                     {all, "/gateway-route"},
		"listener-set-http-routing-1-listener-1.com": append(ls1, "/listener-set-http-routing-1-section-route"),
		"listener-set-http-routing-1-listener-2.com": ls1,
		"listener-set-http-routing-2-listener-1.com": ls2,
		"listener-set-http-routing-2-listener-2.com": ls2,
	}
	paths := []string{all, "/gateway-route", "/gateway-section-route", "/listener-set-http-routing-1-route", "/listener-set-http-routing-1-section-route", "/listener-set-http-routing-2-route"}
	checked := 0
	for host, want := range served {
		for _, path := range paths {
			r := ghostRoute(doc, ghostjson.SocketName(80), host, path)
			ok := slices.Contains(want, path)
			switch {
			case ok && r == nil:
				t.Errorf("%s%s: 404, want served", host, path)
			case !ok && r != nil:
				t.Errorf("%s%s: served by %s, want 404", host, path, r.Name)
			}
			checked++
		}
	}
	t.Logf("%d requests checked", checked)
}
