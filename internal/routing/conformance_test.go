package routing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// conformanceModuleDir returns the directory of the
// sigs.k8s.io/gateway-api/conformance module in the module cache, at the
// version of the sigs.k8s.io/gateway-api module this module requires. The
// conformance module is separate and not a dependency; `go list -m` with a
// version query finds (and if needed downloads) it without changing go.mod.
func conformanceModuleDir() (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // the test runs where it was built: the toolchain that built it
	}
	out, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m sigs.k8s.io/gateway-api: %w", err)
	}
	mod := "sigs.k8s.io/gateway-api/conformance@" + strings.TrimSpace(string(out))
	out, err = exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s (offline?): %w", mod, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("%s is not in the module cache", mod)
	}
	return dir, nil
}

// conformanceDir is conformanceModuleDir for tests, which skip without it.
func conformanceDir(t testing.TB) string {
	t.Helper()
	dir, err := conformanceModuleDir()
	if err != nil {
		t.Skipf("conformance manifests not available: %v", err)
	}
	return dir
}

type manifests struct {
	namespaces []*corev1.Namespace
	services   []*corev1.Service
	gateways   []*gatewayv1.Gateway
	grants     []*gatewayv1.ReferenceGrant
	routes     []*gatewayv1.HTTPRoute
	sets       []*gatewayv1.ListenerSet
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func readManifests(t testing.TB, path string) manifests {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	for i, doc := range docSep.Split(string(data), -1) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		var head struct{ APIVersion, Kind string }
		if err := json.Unmarshal(js, &head); err != nil || head.Kind == "" {
			continue
		}
		into := func(v any) {
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%s document %d (%s): %v", path, i, head.Kind, err)
			}
		}
		switch {
		case head.Kind == "Namespace":
			v := &corev1.Namespace{}
			into(v)
			m.namespaces = append(m.namespaces, v)
		case head.Kind == "Service":
			v := &corev1.Service{}
			into(v)
			m.services = append(m.services, v)
		case head.Kind == "Gateway" && head.APIVersion == "gateway.networking.k8s.io/v1":
			v := &gatewayv1.Gateway{}
			into(v)
			m.gateways = append(m.gateways, v)
		case head.Kind == "ReferenceGrant":
			v := &gatewayv1.ReferenceGrant{}
			into(v)
			m.grants = append(m.grants, v)
		case head.Kind == "HTTPRoute":
			v := &gatewayv1.HTTPRoute{}
			into(v)
			m.routes = append(m.routes, v)
		case head.Kind == "ListenerSet" && head.APIVersion == "gateway.networking.k8s.io/v1":
			v := &gatewayv1.ListenerSet{}
			into(v)
			m.sets = append(m.sets, v)
		}
	}
	return m
}

// conformanceExpect lists the routes the conformance suite expects not to
// be Accepted with ResolvedRefs True on a Gateway (file: namespace/route@gateway),
// plus the extended features varnishgw rejects on purpose (UnsupportedValue,
// named in the report). Every other HTTPRoute of the suite must be accepted
// with all references resolved.
var conformanceExpect = map[string]string{
	// The suite's negative tests (the reasons its .go files assert).
	"httproute-disallowed-kind.yaml: gateway-conformance-infra/disallowed-kind@gateway-conformance-infra/tlsroutes-only":                                                                                                               "!NotAllowedByListeners ResolvedRefs",
	"httproute-invalid-backendref-unknown-kind.yaml: gateway-conformance-infra/invalid-backend-ref-unknown-kind@gateway-conformance-infra/same-namespace":                                                                              "Accepted !InvalidKind",
	"httproute-invalid-cross-namespace-backend-ref.yaml: gateway-conformance-infra/invalid-cross-namespace-backend-ref@gateway-conformance-infra/same-namespace":                                                                       "Accepted !RefNotPermitted",
	"httproute-invalid-cross-namespace-parent-ref.yaml: gateway-conformance-web-backend/invalid-cross-namespace-parent-ref@gateway-conformance-infra/same-namespace":                                                                   "!NotAllowedByListeners ResolvedRefs",
	"httproute-invalid-nonexistent-backendref.yaml: gateway-conformance-infra/invalid-nonexistent-backend-ref@gateway-conformance-infra/same-namespace":                                                                                "Accepted !BackendNotFound",
	"httproute-invalid-parentref-not-matching-listener-port.yaml: gateway-conformance-infra/httproute-listener-not-matching-route-port@gateway-conformance-infra/same-namespace":                                                       "!NoMatchingParent ResolvedRefs",
	"httproute-invalid-parentref-not-matching-section-name.yaml: gateway-conformance-infra/httproute-listener-not-matching-section-name@gateway-conformance-infra/same-namespace":                                                      "!NoMatchingParent ResolvedRefs",
	"httproute-invalid-parentref-section-name-not-matching-port.yaml: gateway-conformance-infra/httproute-listener-section-name-not-matching-port@gateway-conformance-infra/gateway-with-one-not-matching-port-and-section-name-route": "!NoMatchingParent ResolvedRefs",
	"httproute-invalid-reference-grant.yaml: gateway-conformance-infra/reference-grant@gateway-conformance-infra/same-namespace":                                                                                                       "Accepted !RefNotPermitted",
	"httproute-partially-invalid-via-invalid-reference-grant.yaml: gateway-conformance-infra/invalid-reference-grant@gateway-conformance-infra/same-namespace":                                                                         "Accepted !RefNotPermitted",
	"httproute-hostname-intersection.yaml: gateway-conformance-infra/no-intersecting-hosts@gateway-conformance-infra/httproute-hostname-intersection":                                                                                  "!NoMatchingListenerHostname ResolvedRefs",
	"gateway-with-attached-routes.yaml: gateway-conformance-infra/http-route-not-accepted@gateway-conformance-infra/gateway-with-two-attached-routes":                                                                                  "!NoMatchingListenerHostname ResolvedRefs",
	"gateway-with-attached-routes.yaml: gateway-conformance-infra/http-route-4@gateway-conformance-infra/unresolved-gateway-with-one-attached-unresolved-route":                                                                        "Accepted !BackendNotFound",
	// The sectionName names a ListenerSet listener, not a Gateway listener.
	"listenerset-dual-parentref-independence.yaml: gateway-conformance-infra/route-dual-parentref-one@gateway-conformance-infra/gateway-dual-parentref":  "!NoMatchingParent ResolvedRefs",
	"listenerset-gateway-parent-section-name-not-found.yaml: gateway-conformance-infra/route-via-gateway@gateway-conformance-infra/gateway-section-name": "!NoMatchingParent ResolvedRefs",
	// The ListenerSet's listener allows routes from its own namespace,
	// which is not the route's (the Gateway's).
	"listenerset-allowed-routes-namespaces.yaml: gateway-conformance-infra/route-in-gateway-namespace@gateway-conformance-infra/gateway-with-listener-sets-test-allowed-routes via ListenerSet gateway-api-ls-cross-ns/listenerset-test-allowed-routes-cross-ns": "!NotAllowedByListeners ResolvedRefs",

	// A backend port with appProtocol kubernetes.io/h2c: Varnish talks
	// HTTP/1.1 to backends, so the reference does not resolve
	// (HTTPRouteBackendProtocolH2C is not claimed).
	"httproute-backend-protocol-h2c.yaml: gateway-conformance-infra/backend-protocol-h2c@gateway-conformance-infra/same-namespace": "Accepted !UnsupportedProtocol",
}

// suiteRoutesWithoutGateway are suite routes whose parent Gateway is not in
// any manifest (the suite never checks their status).
var suiteRoutesWithoutGateway = map[string]bool{
	"gateway-with-invalid-clientcertificate-validation.yaml: gateway-conformance-infra/misconfigured-client-certificate-validation-https-test": true,
}

func TestConformanceManifests(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	files, err := filepath.Glob(filepath.Join(dir, "tests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance manifests in %s: %v", dir, err)
	}
	got := map[string]string{}
	routes := 0
	for _, file := range files {
		m := readManifests(t, file)
		if len(m.routes) == 0 {
			continue
		}
		objs := &Objects{
			Namespaces:      append(append([]*corev1.Namespace{}, base.namespaces...), m.namespaces...),
			Services:        append(append([]*corev1.Service{}, base.services...), m.services...),
			ReferenceGrants: append(append([]*gatewayv1.ReferenceGrant{}, base.grants...), m.grants...),
			ListenerSets:    m.sets,
		}
		gateways := append(append([]*gatewayv1.Gateway{}, base.gateways...), m.gateways...)
		name := filepath.Base(file)
		for _, r := range m.routes {
			routes++
			var frags []*Fragment
			for _, gw := range gateways {
				f, err := Attach(gw, r, objs)
				if err != nil {
					continue // not a parent
				}
				frags = append(frags, f)
				key := fmt.Sprintf("%s: %s/%s@%s/%s", name, r.Namespace, r.Name, gw.Namespace, gw.Name)
				for _, p := range parentConditions(f) {
					got[key+p.parent] = p.conditions
				}
				if f.Accepted() {
					if _, err := Merge(ComposeGateway(gw, m.sets, objs).Gateway, []*Fragment{f}); err != nil {
						t.Errorf("%s: merge: %v", key, err)
					}
					if data, err := MarshalFragment(f); err != nil {
						t.Errorf("%s: %v", key, err)
					} else if _, err := UnmarshalFragment(data); err != nil {
						t.Errorf("%s: %v", key, err)
					}
				}
			}
			if len(frags) == 0 && routeNamesGateway(r) && !suiteRoutesWithoutGateway[fmt.Sprintf("%s: %s/%s", name, r.Namespace, r.Name)] {
				t.Errorf("%s: %s/%s names a Gateway that is not in the manifests", name, r.Namespace, r.Name)
			}
		}
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, ok := conformanceExpect[k]
		if !ok {
			want = "Accepted ResolvedRefs"
		}
		if got[k] != want {
			t.Errorf("%s: got %s, want %s", k, got[k], want)
		}
	}
	for k := range conformanceExpect {
		if _, ok := got[k]; !ok {
			t.Errorf("expected outcome for %s, but the suite has no such route and parent", k)
		}
	}
	t.Logf("%d HTTPRoutes, %d (route, gateway) pairs checked", routes, len(got))
}

func routeNamesGateway(r *gatewayv1.HTTPRoute) bool {
	for _, p := range r.Spec.ParentRefs {
		if p.Kind == nil || *p.Kind == "Gateway" || *p.Kind == "ListenerSet" {
			return true
		}
	}
	return false
}

type parentOutcome struct{ parent, conditions string }

// parentConditions are the Accepted and ResolvedRefs outcomes of a
// fragment: the first parentRef that names the Gateway itself (key
// suffix ""), and each parentRef that names one of its ListenerSets
// (" via ListenerSet ns/name").
func parentConditions(f *Fragment) []parentOutcome {
	var out []parentOutcome
	gwDone := false
	for _, p := range f.Parents {
		var suffix string
		if p.ParentRef.Kind != nil && *p.ParentRef.Kind == "ListenerSet" {
			ns := f.Route.Namespace
			if p.ParentRef.Namespace != nil {
				ns = string(*p.ParentRef.Namespace)
			}
			suffix = fmt.Sprintf(" via ListenerSet %s/%s", ns, p.ParentRef.Name)
			if p.ParentRef.SectionName != nil {
				suffix += "/" + string(*p.ParentRef.SectionName)
			}
		} else if gwDone {
			continue
		} else {
			gwDone = true
		}
		one := &Fragment{Parents: []ParentStatus{p}}
		out = append(out, parentOutcome{suffix, condition(one, gatewayv1.RouteConditionAccepted) + " " + condition(one, gatewayv1.RouteConditionResolvedRefs)})
	}
	return out
}

// TestConformanceListenerIsolation replays the requests of the suite's
// GatewayHTTPListenerIsolation test (transcribed from
// tests/gateway-http-listener-isolation.go: each host reaches only the route
// on its most specific listener) against the ghost.json Resolve writes for
// both of its Gateways, using the reference model ghostRoute.
func TestConformanceListenerIsolation(t *testing.T) {
	dir := conformanceDir(t)
	base := readManifests(t, filepath.Join(dir, "base", "manifests.yaml"))
	// host -> the only path it reaches; every other (host, path) is 404.
	served := map[string]string{
		"bar.com":             "/empty-hostname",
		"bar.example.com":     "/wildcard-example-com",
		"bar.foo.example.com": "/wildcard-foo-example-com",
		"abc.foo.example.com": "/abc-foo-example-com",
	}
	for _, file := range []string{"gateway-http-listener-isolation.yaml", "gateway-http-listener-isolation-with-hostname-intersection.yaml"} {
		t.Run(file, func(t *testing.T) {
			m := readManifests(t, filepath.Join(dir, "tests", file))
			if len(m.gateways) != 1 || len(m.routes) != 4 {
				t.Fatalf("%s: %d gateways, %d routes: the suite changed", file, len(m.gateways), len(m.routes))
			}
			objs := &Objects{Namespaces: base.namespaces, Services: base.services}
			gw := m.gateways[0]
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
			for host, want := range served {
				for _, path := range served {
					r := ghostRoute(doc, ghostjson.SocketName(80), host, path)
					switch {
					case path == want && r == nil:
						t.Errorf("%s%s: 404, want the route for %s", host, path, want)
					case path != want && r != nil:
						t.Errorf("%s%s: served by %s, want 404", host, path, r.Name)
					}
				}
			}
		})
	}
}
