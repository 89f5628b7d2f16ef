package conformance

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/conformance"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/retrysim"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// The outcome of one scenario of the replay.
const (
	outcomePass        = "passes"
	outcomeFail        = "fails"
	outcomeNotReplayed = "not replayed"
	outcomeStatusOnly  = "status only"
)

// scenarioResult is the outcome of one scenario.
type scenarioResult struct {
	s        *suiteScenario
	outcome  string
	reason   string // why it fails or is not replayed
	requests int    // requests sent
	cases    int    // ExpectedResponse cases that passed
}

// conformanceDocPath is the template of the guide docs/guides/conformance.md,
// which the replay writes with VARNISHGW_UPDATE_CONFORMANCE_DOC=1 (make
// conformance-docs) and otherwise compares with what it would write; make
// docs copies it into docs/guides/.
const conformanceDocPath = "../../templates/guides/conformance.md.tmpl"

// TestConformanceReplay replays every HTTPRoute scenario of the public
// Gateway API conformance suite (tests/httproute-*.go of
// sigs.k8s.io/gateway-api/conformance at the version of go.mod's
// sigs.k8s.io/gateway-api) through real chaperones: each Gateway a
// scenario sends requests to is created in the test API server and served
// by the chaperone binary (--routing=kubernetes, as the Gateway's
// ServiceAccount), which runs varnishd with ghost; the scenario's routes
// are written as the RoutingFragments the provider writes (routing.Attach);
// its Services are served by echo servers that answer like the suite's
// echo backend. Each http.ExpectedResponse of the scenario is sent and
// checked with the suite's semantics; weights and percentage mirrors are
// checked statistically.
//
// From the outcomes it derives the features varnishgw can claim (the
// suite's rule: every scenario whose features are all claimed passes, and
// each claimed feature has a passing scenario), fails when they differ
// from conformance.SupportedFeatures (what the provider writes into
// GatewayClass status), and fails when the guide's template
// (conformanceDocPath) differs from the report of this run
// (VARNISHGW_UPDATE_CONFORMANCE_DOC=1 rewrites it).
func TestConformanceReplay(t *testing.T) {
	start := time.Now()
	cp := testenv.Get(t)
	dir := suiteModuleDir(t)
	ctx := context.Background()
	if err := vgwapi.EnsureCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	base, err := readSuiteManifests(filepath.Join(dir, "base", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := &replay{
		t: t, cp: cp, dyn: dynamic.NewForConfigOrDie(cp.Config), dir: dir, base: base,
		echo: &echoServers{t: t, ip: hostIP(t), got: map[string][]string{}, servers: map[string]echoAddress{}},
		gws:  map[string]*replayGateway{},
	}
	for _, ns := range base.Namespaces {
		r.ensureNamespace(t, ns)
	}
	for _, svc := range base.Services {
		r.createService(t, svc, false, false)
	}

	scenarios := readSuiteScenarios(t, dir)
	var results []*scenarioResult
	for _, s := range scenarios {
		res := &scenarioResult{s: s}
		results = append(results, res)
		t.Run(s.ShortName, func(t *testing.T) {
			r.run(t, s, res)
			t.Logf("%s %s: %d requests, %d of %d cases passed %s", s.ShortName, res.outcome, res.requests, res.cases, len(s.Cases), res.reason)
		})
	}

	for _, res := range results {
		if res.outcome == "" {
			t.Logf("%s was not run (-run selects part of the replay): the claimed features and the conformance guide are not checked", res.s.ShortName)
			return
		}
	}
	claimed, removedBy := claimFeatures(results)
	requests, passed := 0, 0
	for _, res := range results {
		requests += res.requests
		if res.outcome == outcomePass {
			passed++
		}
	}
	t.Logf("replay: %d scenarios, %d passed, %d requests in %s; claimed %v", len(results), passed, requests, time.Since(start).Round(time.Second), claimed)

	var want []string
	for _, f := range conformance.SupportedFeatures() {
		want = append(want, string(f))
	}
	if !slices.Equal(claimed, want) {
		t.Errorf("the replay claims %v, conformance.SupportedFeatures lists %v: make them equal (internal/conformance/features.go), so that GatewayClass status says what passes", claimed, want)
	}

	doc := renderConformanceDoc(suiteVersion(t), results, claimed, removedBy)
	if os.Getenv("VARNISHGW_UPDATE_CONFORMANCE_DOC") == "1" {
		if err := os.WriteFile(conformanceDocPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", conformanceDocPath)
		return
	}
	got, err := os.ReadFile(conformanceDocPath)
	if err != nil || string(got) != doc {
		t.Errorf("%s differs from this run's report (%v): run make conformance-docs and make docs, and commit them", conformanceDocPath, err)
	}
}

// hostIP is the address the echo servers listen on: one varnishd can
// reach (the host's, as the chaperone tests' backends use).
func hostIP(t *testing.T) string {
	t.Helper()
	return varnishdtest.HostIP(t)
}

// run replays scenario s and records its outcome in res.
func (r *replay) run(t *testing.T, s *suiteScenario, res *scenarioResult) {
	notReplayed := func(format string, args ...any) {
		res.outcome, res.reason = outcomeNotReplayed, fmt.Sprintf(format, args...)
	}
	if reason, ok := suiteNotReplayed[s.ShortName]; ok {
		notReplayed("%s", reason)
		return
	}
	scn := &suiteManifests{}
	for _, name := range s.Manifests {
		m, err := readSuiteManifests(filepath.Join(r.dir, name))
		if err != nil {
			t.Fatalf("%s: %v", s.File, err)
		}
		scn.Namespaces = append(scn.Namespaces, m.Namespaces...)
		scn.Services = append(scn.Services, m.Services...)
		scn.Gateways = append(scn.Gateways, m.Gateways...)
		scn.Grants = append(scn.Grants, m.Grants...)
		scn.Routes = append(scn.Routes, m.Routes...)
		scn.Slices = append(scn.Slices, m.Slices...)
		scn.Unknown = append(scn.Unknown, m.Unknown...)
	}
	if len(scn.Unknown) > 0 {
		slices.Sort(scn.Unknown)
		notReplayed("its manifests hold objects the routing core does not load (%s)", strings.Join(slices.Compact(scn.Unknown), ", "))
		return
	}
	if build := suiteCaseBuilders[s.ShortName]; build != nil {
		cases, err := build(r.dir, scn)
		if err != nil {
			res.outcome, res.reason = outcomeFail, fmt.Sprintf("building its requests as %s does: %v", s.File, err)
			return
		}
		s.Cases, s.Unreadable = cases, ""
	}
	if s.Unreadable != "" {
		notReplayed("a request is built in code, not a literal (%s)", s.Unreadable)
		return
	}
	if len(s.Cases) == 0 && suiteStatistics[s.ShortName] == nil {
		res.outcome, res.reason = outcomeStatusOnly, "sends no request: it checks route and Gateway status, which the provider writes (internal/routing TestConformanceManifests checks the conditions)"
		if why, ok := suiteStatusOnly[s.ShortName]; ok {
			res.reason = why
		}
		return
	}
	gateways := map[string]*gatewayv1.Gateway{}
	for _, gw := range append(slices.Clone(r.base.Gateways), scn.Gateways...) {
		gateways[gw.Name] = gw
	}
	var needed []string
	if len(s.Cases) == 0 {
		// A test that only checks in code: the suite's Gateway.
		needed = []string{"same-namespace"}
	}
	for _, c := range s.Cases {
		gw, ok := gateways[c.Gateway]
		if !ok {
			notReplayed("%s sends to Gateway %q, which is not in the manifests", c.Pos, c.Gateway)
			return
		}
		for _, l := range gw.Spec.Listeners {
			if l.Protocol != gatewayv1.HTTPProtocolType && l.Protocol != gatewayv1.HTTPSProtocolType {
				notReplayed("Gateway %s has a %s listener (%s): the replay serves HTTP and HTTPS listeners", gw.Name, l.Protocol, l.Name)
				return
			}
		}
		if !slices.Contains(needed, c.Gateway) {
			needed = append(needed, c.Gateway)
		}
	}

	// The scenario's objects, removed when it ends.
	ctx := context.Background()
	for _, ns := range scn.Namespaces {
		r.ensureNamespace(t, ns)
	}
	for _, svc := range scn.Services {
		manual := slices.ContainsFunc(scn.Slices, func(es *discoveryv1.EndpointSlice) bool {
			return es.Namespace == svc.Namespace && es.Labels[discoveryv1.LabelServiceName] == svc.Name
		})
		r.createService(t, svc, true, manual)
	}
	if setup := suiteSetups[s.ShortName]; setup != nil {
		setup(r, t, scn)
	}
	for _, g := range scn.Grants {
		if _, err := r.cp.Gateway.GatewayV1().ReferenceGrants(g.Namespace).Create(ctx, g.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		cleanupDelete(t, "ReferenceGrant "+g.Name, func() error {
			return r.cp.Gateway.GatewayV1().ReferenceGrants(g.Namespace).Delete(ctx, g.Name, metav1.DeleteOptions{})
		})
	}
	var namespaces []string
	for _, ns := range append(slices.Clone(r.base.Namespaces), scn.Namespaces...) {
		namespaces = append(namespaces, ns.Name)
	}
	objs := &routing.Objects{
		Namespaces:      append(slices.Clone(r.base.Namespaces), scn.Namespaces...),
		Services:        append(slices.Clone(r.base.Services), scn.Services...),
		ReferenceGrants: append(slices.Clone(r.base.Grants), scn.Grants...),
	}
	served := map[string]*replayGateway{}
	for _, name := range needed {
		gw := gateways[name]
		g := r.gws[name]
		switch {
		case g != nil:
		case slices.Contains(r.base.Gateways, gw):
			g = r.startGateway(r.t, gw, namespaces)
			r.gws[name] = g
		default:
			g = r.startGateway(t, gw, namespaces)
		}
		if err := r.serveFragments(t, g, scn.Routes, objs); err != nil {
			res.outcome, res.reason = outcomeFail, err.Error()
			return
		}
		served[name] = g
	}

	for i, c := range s.Cases {
		if step := suiteSteps[s.ShortName]; step != nil {
			if err := step(r, t, i, scn); err != nil {
				t.Fatal(err)
			}
		}
		g := served[c.Gateway]
		var err error
		if slices.ContainsFunc(c.MirroredTo, func(m suiteMirror) bool { return m.Percent != nil }) {
			err = r.percentMirror(g, c, &res.requests)
		} else {
			err = r.eventually(g, c, &res.requests)
		}
		if err != nil {
			res.outcome, res.reason = outcomeFail, fmt.Sprintf("%s: %v", c.Pos, err)
			return
		}
		res.cases++
	}
	if stat := suiteStatistics[s.ShortName]; stat != nil {
		if err := stat(r, served[needed[0]], scn, &res.requests); err != nil {
			res.outcome, res.reason = outcomeFail, err.Error()
			return
		}
	}
	res.outcome = outcomePass
}

// eventually sends c until the response meets its expectations (and the
// mirrors got their copies), for at most 10 s: the suite's requests are
// eventually consistent too.
func (r *replay) eventually(g *replayGateway, c suiteCase, requests *int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := r.sendOnce(g, c, requests)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (r *replay) sendOnce(g *replayGateway, c suiteCase, requests *int) error {
	path, _, _ := strings.Cut(c.Request.Path, "?")
	before := map[string]int{}
	for _, m := range c.MirroredTo {
		key := m.BackendRef.Namespace + "/" + m.BackendRef.Name
		before[key] = r.echo.count(key, path)
	}
	if c.probe != nil {
		c.probe(&c)
	}
	*requests++
	got, err := g.send(c)
	if err != nil {
		return err
	}
	if err := check(c, got); err != nil {
		return err
	}
	for key, n := range before {
		deadline := time.Now().Add(3 * time.Second)
		for r.echo.count(key, path) <= n {
			if time.Now().After(deadline) {
				return fmt.Errorf("the mirror %s got no copy of %s", key, path)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// The suite's distribution checks: 500 requests, 10 at a time; a mirror's
// share within 3 binomial standard deviations of its percentage (up to 5
// tries), a backend's share within 5 points of its weight (up to 10
// tries).
const (
	distributionRequests    = 500
	distributionConcurrency = 10
	mirrorTries             = 5
	weightTries             = 10
)

// concurrently runs f for 0..n-1, distributionConcurrency at a time, and
// returns the first error.
func concurrently(n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, distributionConcurrency)
	)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// percentMirror sends c distributionRequests times and checks that each
// mirror with a percentage got its share of copies.
func (r *replay) percentMirror(g *replayGateway, c suiteCase, requests *int) error {
	plain := c
	plain.MirroredTo = nil
	if err := r.eventually(g, plain, requests); err != nil {
		return err
	}
	path, _, _ := strings.Cut(c.Request.Path, "?")
	var last error
	for range mirrorTries {
		before := map[string]int{}
		for _, m := range c.MirroredTo {
			key := m.BackendRef.Namespace + "/" + m.BackendRef.Name
			before[key] = r.echo.count(key, path)
		}
		*requests += distributionRequests
		err := concurrently(distributionRequests, func(int) error {
			resp, err := g.send(plain)
			if err != nil {
				return err
			}
			return check(plain, resp)
		})
		if err != nil {
			return err
		}
		time.Sleep(time.Second) // the last copies
		last = nil
		for _, m := range c.MirroredTo {
			key := m.BackendRef.Namespace + "/" + m.BackendRef.Name
			p := 1.0
			if m.Percent != nil {
				p = float64(*m.Percent) / 100
			}
			got := float64(r.echo.count(key, path) - before[key])
			want, margin := distributionRequests*p, 3*math.Sqrt(distributionRequests*p*(1-p))
			if math.Abs(got-want) > margin {
				last = fmt.Errorf("the mirror %s got %.0f copies of %d requests, want %.0f ± %.0f", key, got, distributionRequests, want, margin)
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(2 * time.Second)
	}
	return last
}

// suiteNotReplayed are scenarios the replay does not send, with the reason.
var suiteNotReplayed = map[string]string{
	"HTTPRouteBackendProtocolH2C": "its requests are HTTP/2 with prior knowledge, for an h2c backend: Varnish talks HTTP/1.1 to backends, so the route's backend does not resolve (UnsupportedProtocol)",
}

// suiteStatusOnly says, for the status-only scenarios that
// TestConformanceManifests does not cover, what they check.
var suiteStatusOnly = map[string]string{
	"HTTPRouteObservedGenerationBump": "sends no request: it checks that the route's status.parents[].conditions[].observedGeneration follows a change of the route, which the provider writes (not checked here)",
}

// suiteCaseBuilders make the requests of tests that build them in code,
// as the test does; dir is the suite's module directory.
var suiteCaseBuilders = map[string]func(dir string, m *suiteManifests) ([]suiteCase, error){
	// One request per Service type: the Exact path of each rule, answered
	// by infra-backend-v1's pods (the test fills the manual EndpointSlices
	// with them; the headless Service selects them).
	"HTTPRouteServiceTypes": func(_ string, m *suiteManifests) ([]suiteCase, error) {
		var cases []suiteCase
		for _, route := range m.Routes {
			for i, rule := range route.Spec.Rules {
				for _, match := range rule.Matches {
					cases = append(cases, suiteCase{
						Pos: fmt.Sprintf("%s rule %d", route.Name, i), Gateway: "same-namespace",
						Request: suiteRequest{Path: *match.Path.Value}, Response: suiteResponse{StatusCode: 200},
						Backend: "infra-backend-v1", Namespace: "gateway-conformance-infra",
					})
				}
			}
		}
		return cases, nil
	},
	// One request per case of the test's table (retrysim.Cases reads it
	// from the suite's source): the rule's path with the echo backend's
	// retry simulation parameters and a uuid that is new for every probe,
	// as the test makes one per probe, so that each probe's attempts are
	// counted apart. The status must be the case's; a 200 is answered by
	// infra-backend-v3 with the request as sent.
	"HTTPRouteRetry": func(dir string, _ *suiteManifests) ([]suiteCase, error) {
		rcs, err := retrysim.Cases(filepath.Join(dir, "tests", "httproute-retry.go"))
		if err != nil {
			return nil, err
		}
		if len(rcs) == 0 {
			return nil, fmt.Errorf("no case found in tests/httproute-retry.go: the reading of the suite broke")
		}
		var cases []suiteCase
		for _, rc := range rcs {
			cases = append(cases, suiteCase{
				Pos: rc.Pos, Gateway: "same-namespace",
				Response: suiteResponse{StatusCode: rc.Want},
				Backend:  "infra-backend-v3", Namespace: "gateway-conformance-infra",
				probe: func(c *suiteCase) {
					c.Request.Path = rc.Path + "?" + rc.Query(fmt.Sprintf("replay-%d", retryProbes.Add(1)))
				},
			})
		}
		return cases, nil
	},
}

// retryProbes numbers the probes of HTTPRouteRetry: each gets its own uuid.
var retryProbes atomic.Int64

// suiteSetups do what a test does in code before its requests.
var suiteSetups = map[string]func(r *replay, t *testing.T, m *suiteManifests){
	// The test fills the manual EndpointSlices with infra-backend-v1's
	// pods (the IPv6 ones stay empty: the pods have IPv4 addresses).
	"HTTPRouteServiceTypes": func(r *replay, t *testing.T, m *suiteManifests) {
		for _, svc := range r.base.Services {
			if svc.Name != "infra-backend-v1" {
				continue
			}
			pods := r.echo.serve(svc)
			for _, es := range m.Slices {
				es = es.DeepCopy()
				if es.AddressType == discoveryv1.AddressTypeIPv4 {
					es.Endpoints = pods.Endpoints
					for i := range es.Ports {
						es.Ports[i].Port = pods.Ports[0].Port
					}
				}
				r.createSlice(t, es, true)
			}
		}
	},
}

// suiteSteps change the cluster between cases, as the suite's test does.
var suiteSteps = map[string]func(r *replay, t *testing.T, i int, m *suiteManifests) error{
	// Before its second request the test deletes the ReferenceGrant.
	"HTTPRouteReferenceGrant": func(r *replay, _ *testing.T, i int, m *suiteManifests) error {
		if i != 1 {
			return nil
		}
		for _, g := range m.Grants {
			if err := r.cp.Gateway.GatewayV1().ReferenceGrants(g.Namespace).Delete(context.Background(), g.Name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("delete ReferenceGrant %s/%s: %w", g.Namespace, g.Name, err)
			}
		}
		return nil
	},
}

// suiteStatistics are the checks a scenario makes in code after its
// literal cases: the distribution over weighted backends, a WebSocket
// exchange.
var suiteStatistics = map[string]func(r *replay, g *replayGateway, m *suiteManifests, requests *int) error{
	// A WebSocket dialled at /ws echoes a text and a binary message.
	"HTTPRouteBackendProtocolWebSocket": func(_ *replay, g *replayGateway, _ *suiteManifests, requests *int) error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			*requests++
			err := websocketEcho(net.JoinHostPort(g.ip, strconv.Itoa(int(g.ports[0]))))
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
	},
	"HTTPRouteWeight": func(r *replay, g *replayGateway, m *suiteManifests, requests *int) error {
		return r.weights(g, m, requests, nil)
	},
	// Each backendRef's filter sets a Backend header naming it.
	"HTTPRouteRequestHeaderModifierBackendWeights": func(r *replay, g *replayGateway, m *suiteManifests, requests *int) error {
		return r.weights(g, m, requests, func(e echoBody) error {
			var b []string
			for k, v := range e.Headers {
				if strings.EqualFold(k, "Backend") {
					b = append(b, v...)
				}
			}
			if len(b) != 1 || !strings.HasPrefix(e.Pod, b[0]) {
				return fmt.Errorf("served by %s with Backend %q, want exactly one naming it", e.Pod, b)
			}
			return nil
		})
	},
}

// weights sends distributionRequests requests for / and compares the share
// of each backend with the weights of the scenario's rules (within 5
// points; a weight of 0 gets nothing), as the suite does.
func (r *replay) weights(g *replayGateway, m *suiteManifests, requests *int, each func(echoBody) error) error {
	want := map[string]float64{}
	total := 0.0
	for _, route := range m.Routes {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				w := 1.0
				if b.Weight != nil {
					w = float64(*b.Weight)
				}
				want[string(b.Name)] += w
				total += w
			}
		}
	}
	var last error
	for range weightTries {
		var mu sync.Mutex
		got := map[string]int{}
		*requests += distributionRequests
		err := concurrently(distributionRequests, func(i int) error {
			resp, err := g.send(suiteCase{Request: suiteRequest{Path: "/", Headers: map[string]string{"X-Jitter": strconv.Itoa(i)}}})
			if err != nil {
				return err
			}
			if resp.status != 200 || !resp.isEcho {
				return fmt.Errorf("status %d", resp.status)
			}
			if each != nil {
				if err := each(resp.echo); err != nil {
					return err
				}
			}
			mu.Lock()
			got[strings.TrimSuffix(resp.echo.Pod, "-replay")]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			return err
		}
		last = nil
		for svc, w := range want {
			share, wantShare := float64(got[svc])/distributionRequests, w/total
			if (wantShare == 0 && got[svc] > 0) || math.Abs(share-wantShare) > 0.05 {
				last = fmt.Errorf("%d requests: %v, want the shares of the weights %v", distributionRequests, got, want)
			}
		}
		if last == nil {
			return nil
		}
	}
	return last
}

// claimFeatures derives the claimed features from the outcomes with the
// suite's rule: the suite runs a scenario when every feature it declares
// is claimed, and all those it runs must pass. Starting from every
// feature a scenario declares, each scenario that would run and does not
// pass (status-only scenarios aside) removes its most specific features
// (those the fewest scenarios declare) until none is left; then a feature
// is claimed only when a scenario that would run declares it and passes.
//
// It returns the claimed features, sorted, and for each feature removed
// the scenarios that removed it.
func claimFeatures(results []*scenarioResult) ([]string, map[string][]string) {
	removedBy := map[string][]string{}
	declared := map[string]int{}
	for _, res := range results {
		for _, f := range res.s.Features {
			declared[f]++
		}
	}
	claimed := map[string]bool{}
	for f := range declared {
		claimed[f] = true
	}
	runs := func(res *scenarioResult) bool {
		for _, f := range res.s.Features {
			if !claimed[f] {
				return false
			}
		}
		return true
	}
	for changed := true; changed; {
		changed = false
		for _, res := range results {
			if res.outcome == outcomePass || res.outcome == outcomeStatusOnly || !runs(res) {
				continue
			}
			rarest := math.MaxInt
			for _, f := range res.s.Features {
				rarest = min(rarest, declared[f])
			}
			for _, f := range res.s.Features {
				if declared[f] == rarest {
					delete(claimed, f)
					removedBy[f] = append(removedBy[f], res.s.ShortName)
				}
			}
			changed = true
		}
	}
	var out []string
	for f := range claimed {
		for _, res := range results {
			if res.outcome == outcomePass && runs(res) && slices.Contains(res.s.Features, f) {
				out = append(out, f)
				break
			}
		}
	}
	slices.Sort(out)
	return out, removedBy
}

// websocketEcho dials a WebSocket at addr's /ws and checks that a text and
// a binary message come back unchanged.
func websocketEcho(addr string) error {
	ws, err := websocket.Dial("ws://"+addr+"/ws", "", "http://gateway/replay")
	if err != nil {
		return fmt.Errorf("dial ws://%s/ws: %w", addr, err)
	}
	defer ws.Close()
	if err := ws.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	var text string
	if err := websocket.Message.Send(ws, "Websocket Support!"); err != nil {
		return err
	}
	if err := websocket.Message.Receive(ws, &text); err != nil || text != "Websocket Support!" {
		return fmt.Errorf("text message: got %q (%v)", text, err)
	}
	var binary []byte
	if err := websocket.Message.Send(ws, []byte{1, 2, 3, 4, 5, 6, 7}); err != nil {
		return err
	}
	if err := websocket.Message.Receive(ws, &binary); err != nil || !bytes.Equal(binary, []byte{1, 2, 3, 4, 5, 6, 7}) {
		return fmt.Errorf("binary message: got %v (%v)", binary, err)
	}
	return nil
}
