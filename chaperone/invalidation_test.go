package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/invalidation"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// cachingVCL is the gateway's main.vcl (mainvcl.Render): with the
// Gateway's cache policy (startCacheGateway sets it) ghost caches every
// routed GET and stamps the X-Ghost-* object headers the invalidation bans
// test.
func cachingVCL(ghostJSON string) string {
	return mainvcl.Render(mainvcl.Options{GhostJSON: ghostJSON, VMOD: build.GhostVMOD})
}

// countingOrigin answers each URL with the URL and how often it was
// fetched ("/a#3"), and the tags of /tagged/ paths in Cache-Tag.
func countingOrigin(t testing.TB, ip string) (string, int32) {
	t.Helper()
	var mu sync.Mutex
	fetches := map[string]int{}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetches[r.URL.RequestURI()]++
		n := fetches[r.URL.RequestURI()]
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/tagged/") {
			w.Header().Set("Cache-Tag", "news, "+strings.TrimPrefix(r.URL.Path, "/tagged/"))
		}
		fmt.Fprintf(w, "%s#%d", r.URL.RequestURI(), n)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return ip, int32(l.Addr().(*net.TCPAddr).Port)
}

// cachePod is one gateway pod of the invalidation tests: a chaperone and
// its varnishd.
type cachePod struct {
	*chaperone
	name           string
	invalidateAddr string
}

// fetch gets path through the pod's varnishd and returns the body.
func (p *cachePod) fetch(path string) string {
	p.T.Helper()
	req, _ := http.NewRequest("GET", "http://"+p.ListenAddr+path, nil)
	req.Host = "app.example.com"
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		p.T.Fatalf("%s: GET %s: %v", p.name, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		p.T.Fatalf("%s: GET %s = %d %s", p.name, path, resp.StatusCode, b)
	}
	return string(b)
}

// cacheGateway is a Gateway with two pods (chaperone + varnishd each, on
// 127.0.0.1 and 127.0.0.2, the same port), running as the Gateway's
// ServiceAccount with the Role the provider writes plus, with endpoint,
// the invalidation endpoint's rights.
type cacheGateway struct {
	cp   *testenv.ControlPlane
	ns   string
	gw   object.Ref
	dyn  dynamic.Interface
	pods []*cachePod
}

// Invalidations of pre are created before the pods start, long enough
// before for them to be older than the pods' cache children.
func startCacheGateway(t testing.TB, endpoint bool, pre ...vgwapi.InvalidationSpec) (*cacheGateway, []*unstructured.Unstructured) {
	t.Helper()
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gwRef := object.Ref{Namespace: ns, Name: "edge"}
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(gwRef))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	if endpoint {
		cp.GrantRole(t, ns, "chaperone-invalidate", ns, "chaperone", gwruntime.InvalidateEndpointRules())
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "auth-delegator-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: gwruntime.AuthDelegatorClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "chaperone"}},
		}
		_, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		})
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)

	listen := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, listen)
	gw, frag := kubeGateway(t, ns, port)
	// cache everything for an hour, tags in Cache-Tag (the default)
	gw.Annotations = map[string]string{routing.CachePolicyAnnotation: `{"ttl":"1h"}`}
	_, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)
	_, err = fragmentClient(t, cp, ns).Create(ctx, frag, metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().Services(ns).Create(ctx, appService(ns, "app"), metav1.CreateOptions{})
	must(t, err)
	ip, oport := countingOrigin(t, varnishdtest.HostIP(t))
	_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(oport), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}, metav1.CreateOptions{})
	must(t, err)

	g := &cacheGateway{cp: cp, ns: ns, gw: gwRef, dyn: dynamic.NewForConfigOrDie(cp.Config)}
	var early []*unstructured.Unstructured
	for _, spec := range pre {
		early = append(early, g.create(t, spec))
	}
	if len(pre) > 0 {
		// creation timestamps have whole seconds; the pods skip what is
		// older than their cache child by 2 s (invalidation.skew)
		time.Sleep(4 * time.Second)
	}
	for i, host := range []string{"127.0.0.1", "127.0.0.2"} {
		dir := varnishdtest.Dir(t)
		vclPath := filepath.Join(dir, "cache.vcl")
		chaperonetest.WriteFile(t, vclPath, cachingVCL(filepath.Join(dir, "ghost.json")))
		p := &cachePod{name: fmt.Sprintf("edge-%c", 'a'+i)}
		// The ban lurker works on bans older than a second, every 0.1 s:
		// the test sees it complete the invalidations' bans.
		args := []string{"--listen-host=" + host, "--routing=kubernetes", "--gateway=" + ns + "/edge", "--vcl=" + vclPath,
			"--kubeconfig=" + kubeconfig, "--pod-name=" + p.name, "--param=ban_lurker_age=1", "--param=ban_lurker_sleep=0.1"}
		if endpoint {
			p.invalidateAddr = varnishdtest.FreeAddr(t)
			args = append(args, "--invalidate-addr="+p.invalidateAddr, "--invalidate-timeout=20s")
		}
		p.chaperone = launchChaperone(t, dir, chaperonetest.Backend(t, "file"), net.JoinHostPort(host, fmt.Sprint(port)), args...)
		g.pods = append(g.pods, p)
	}
	for _, p := range g.pods {
		p.WaitFor("ready", 90*time.Second, func() bool { code, _ := p.Health("/readyz"); return code == 200 })
		p.WaitFor("the Gateway's routing", 90*time.Second, func() bool {
			code, body, _ := p.get()
			return code == 200 && strings.HasPrefix(body, "/#")
		})
	}
	return g, early
}

// create creates a CacheInvalidation of the Gateway.
func (g *cacheGateway) create(t testing.TB, spec vgwapi.InvalidationSpec) *unstructured.Unstructured {
	t.Helper()
	obj, err := vgwapi.NewInvalidation(g.gw, "", spec)
	must(t, err)
	obj, err = g.dyn.Resource(vgwapi.CacheInvalidations).Namespace(g.ns).Create(context.Background(), obj, metav1.CreateOptions{})
	must(t, err)
	return obj
}

// acks waits until both pods acknowledged uid and returns their
// acknowledgements.
func (g *cacheGateway) acks(t *testing.T, uid string) map[string]vgwapi.InvalidationReport {
	t.Helper()
	out := map[string]vgwapi.InvalidationReport{}
	g.pods[0].WaitFor("both pods acknowledge "+uid, 30*time.Second, func() bool {
		reports, err := vgwapi.ReadReports(context.Background(), g.dyn, g.gw)
		if err != nil {
			return false
		}
		for _, p := range g.pods {
			ack := reports[p.name].Invalidation(uid)
			if ack == nil {
				return false
			}
			out[p.name] = *ack
		}
		return true
	})
	return out
}

func ptrTo(s string) *string { return &s }

// TestCacheInvalidationOnEveryReplica: two gateway pods cache the same
// URLs; each kind of CacheInvalidation (purge with and without query, ban
// by prefix and by regex, tag) is applied by both, each acknowledges it
// in its GatewayPodReport, the objects it names are fetched again from
// the origin on both and the others are still served from cache. An
// invalid one is acknowledged with its error, a deleted one's
// acknowledgement is pruned, and one older than the cache child is
// acknowledged without a ban.
func TestCacheInvalidationOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	// Created before the pods start: older than their cache children.
	g, early := startCacheGateway(t, false, vgwapi.InvalidationSpec{Tags: []string{"news"}})
	for pod, ack := range g.acks(t, string(early[0].GetUID())) {
		if !ack.Skipped || ack.Bans != 0 || ack.Error != "" {
			t.Errorf("%s acknowledged the invalidation older than its cache as %+v, want skipped without a ban", pod, ack)
		}
	}

	paths := []string{"/a", "/a?v=1", "/b?x=1", "/b?x=2", "/img/1.png", "/img/2.png", "/imgs", "/v/123", "/v/12a",
		"/tagged/product-42", "/tagged/product-4", "/tagged/product-7", "/sp%20ace/1", "/keep"}
	cached := map[string]map[string]string{} // pod → path → body
	for _, p := range g.pods {
		cached[p.name] = map[string]string{}
		for _, path := range paths {
			first := p.fetch(path)
			if again := p.fetch(path); again != first {
				t.Fatalf("%s: %s not cached: %q then %q", p.name, path, first, again)
			}
			cached[p.name][path] = first
		}
	}
	// expect checks which paths each pod fetches again (gone) and which
	// it still serves from cache.
	expect := func(step string, gone ...string) {
		t.Helper()
		for _, p := range g.pods {
			for _, path := range paths {
				body := p.fetch(path)
				wasGone := body != cached[p.name][path]
				wantGone := false
				for _, g := range gone {
					wantGone = wantGone || g == path
				}
				if wasGone != wantGone {
					t.Errorf("%s, %s: %s answered %q (cached %q): invalidated = %v, want %v", step, p.name, path, body, cached[p.name][path], wasGone, wantGone)
				}
				cached[p.name][path] = body
			}
		}
	}

	steps := []struct {
		name string
		spec vgwapi.InvalidationSpec
		bans int
		gone []string
	}{
		{"purge a path, any query", vgwapi.InvalidationSpec{Purges: []vgwapi.Purge{{Host: "app.example.com", Path: "/a"}}}, 1, []string{"/a", "/a?v=1"}},
		{"purge one URL with query", vgwapi.InvalidationSpec{Purges: []vgwapi.Purge{{Host: "app.example.com", Path: "/b", Query: ptrTo("x=1")}}}, 1, []string{"/b?x=1"}},
		{"ban a prefix", vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: "app.example.com", PathPrefix: "/img/"}}}, 1, []string{"/img/1.png", "/img/2.png"}},
		{"ban a regex", vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: "app.example.com", PathRegex: `^/v/[0-9]+$`}}}, 1, []string{"/v/123"}},
		{"tag", vgwapi.InvalidationSpec{Tags: []string{"product-42"}}, 1, []string{"/tagged/product-42"}},
		// a tag that begins another tag invalidates only its own objects
		{"tag that begins another", vgwapi.InvalidationSpec{Tags: []string{"product-4"}}, 1, []string{"/tagged/product-4"}},
		{"regex with a space", vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: "app.example.com", PathRegex: `^/sp(%20| )ace/`}}}, 1, []string{"/sp%20ace/1"}},
		{"another host", vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: "other.example.com", PathPrefix: "/"}}}, 1, nil},
		{"several at once", vgwapi.InvalidationSpec{
			Purges: []vgwapi.Purge{{Host: "app.example.com", Path: "/imgs"}},
			Tags:   []string{"news"},
		}, 2, []string{"/imgs", "/tagged/product-42", "/tagged/product-4", "/tagged/product-7"}},
	}
	for _, s := range steps {
		obj := g.create(t, s.spec)
		for pod, ack := range g.acks(t, string(obj.GetUID())) {
			if ack.Bans != s.bans || ack.Skipped || ack.Error != "" || ack.Name != obj.GetName() {
				t.Errorf("%s: %s acknowledged %+v, want %d bans", s.name, pod, ack, s.bans)
			}
		}
		expect(s.name, s.gone...)
	}

	// Refused: a regular expression PCRE2 and Go read differently.
	bad := g.create(t, vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: "app.example.com", PathRegex: `^/v/\1`}}})
	for pod, ack := range g.acks(t, string(bad.GetUID())) {
		if ack.Error == "" || !strings.Contains(ack.Error, "bans[0].pathRegex") || ack.Bans != 0 {
			t.Errorf("%s acknowledged the invalid invalidation as %+v, want its error naming bans[0].pathRegex", pod, ack)
		}
	}
	expect("refused")

	// Deleted invalidations leave the reports.
	for _, p := range g.pods {
		if v := p.metric(`varnishgw_chaperone_invalidations_total{result="applied"}`); v != float64(len(steps)) {
			t.Errorf("%s: applied invalidations metric = %v, want %d", p.name, v, len(steps))
		}
		if v := p.metric(`varnishgw_chaperone_invalidations_total{result="refused"}`); v != 1 {
			t.Errorf("%s: refused invalidations metric = %v, want 1", p.name, v)
		}
	}
	list, err := g.dyn.Resource(vgwapi.CacheInvalidations).Namespace(g.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(list.Items) != len(steps)+2 {
		t.Fatalf("%d CacheInvalidations, want %d", len(list.Items), len(steps)+2)
	}
	for _, o := range list.Items[1:] {
		must(t, g.dyn.Resource(vgwapi.CacheInvalidations).Namespace(g.ns).Delete(ctx, o.GetName(), metav1.DeleteOptions{}))
	}
	g.pods[0].WaitFor("acknowledgements of deleted invalidations pruned", 30*time.Second, func() bool {
		reports, err := vgwapi.ReadReports(ctx, g.dyn, g.gw)
		if err != nil {
			return false
		}
		for _, p := range g.pods {
			if r := reports[p.name]; r == nil || len(r.Status.Invalidations) != 1 || r.Status.Invalidations[0].UID != string(list.Items[0].GetUID()) {
				return false
			}
		}
		return true
	})
	// Every ban tests obj.* only, so the ban lurker completes them in the
	// background and they leave the ban list (varnishd keeps the newest).
	for _, p := range g.pods {
		if v := p.metric("varnish_main_bans_req"); v != 0 {
			t.Errorf("%s: %v bans test req.*, want 0 (the lurker cannot evaluate those)", p.name, v)
		}
		// (the counters are read every 500 ms)
		p.WaitFor(fmt.Sprintf("%d bans added", len(steps)+1), 10*time.Second, func() bool {
			return p.metric("varnish_main_bans_added_total") >= float64(len(steps)+1)
		})
		p.WaitFor("the ban lurker to complete the bans", 30*time.Second, func() bool {
			v := p.metric("varnish_main_bans")
			return v >= 0 && v <= 1
		})
	}
	// The routing report (another field manager) is untouched.
	reports, err := vgwapi.ReadReports(ctx, g.dyn, g.gw)
	must(t, err)
	for _, p := range g.pods {
		if reports[p.name].Status.Routing == nil || reports[p.name].Status.Routing.Fragments != 1 {
			t.Errorf("%s: routing report %+v, want 1 fragment", p.name, reports[p.name].Status.Routing)
		}
	}
}

// readyPod creates the Pod object of a gateway pod and marks it Ready, as
// the kubelet would (there is no node here).
func readyPod(t *testing.T, cp *testenv.ControlPlane, gw object.Ref, name string) {
	t.Helper()
	ctx := context.Background()
	pod, err := cp.Client.CoreV1().Pods(gw.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: gwruntime.Labels(gw)},
		Spec:       corev1.PodSpec{ServiceAccountName: "chaperone", Containers: []corev1.Container{{Name: "chaperone", Image: "gateway"}}},
	}, metav1.CreateOptions{})
	must(t, err)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	_, err = cp.Client.CoreV1().Pods(gw.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	must(t, err)
}

// saToken is a real token of ServiceAccount ns/name for audience.
func saToken(t *testing.T, cp *testenv.ControlPlane, ns, name string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

// invalidate posts body to the pod's endpoint with token (none when
// empty) and returns the status and the decoded answer.
func (p *cachePod) invalidate(token, body string) (int, invalidation.Response) {
	p.T.Helper()
	req, _ := http.NewRequest("POST", "http://"+p.invalidateAddr+invalidation.Path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		p.T.Fatalf("POST %s: %v", invalidation.Path, err)
	}
	defer resp.Body.Close()
	var out invalidation.Response
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		p.T.Fatalf("POST %s: %d, body not JSON: %v", invalidation.Path, resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

// TestInvalidateEndpoint: POST /invalidate with real tokens. No token, or
// one for another audience (the API server's included): 401; headers
// above the limit: 431 (also on the health server); a ServiceAccount without the right to
// create cacheinvalidations: 403; an invalid body: 400; with the right:
// 200 once both Ready pods acknowledged, the URL is gone from both caches
// and the CacheInvalidation is deleted.
func TestInvalidateEndpoint(t *testing.T) {
	ctx := context.Background()
	g, _ := startCacheGateway(t, true)
	for _, p := range g.pods {
		readyPod(t, g.cp, g.gw, p.name)
	}
	cached := map[string]string{}
	for _, p := range g.pods {
		cached[p.name] = p.fetch("/news/1")
		if again := p.fetch("/news/1"); again != cached[p.name] {
			t.Fatalf("%s: not cached: %q then %q", p.name, cached[p.name], again)
		}
	}
	purger := saToken(t, g.cp, g.ns, "purger", invalidation.Audience)
	g.cp.GrantRole(t, g.ns, "purger", g.ns, "purger", []rbacv1.PolicyRule{{APIGroups: []string{vgwapi.Group}, Resources: []string{vgwapi.CacheInvalidationResource}, Verbs: []string{"create"}}})
	reader := saToken(t, g.cp, g.ns, "reader", invalidation.Audience)
	apiToken := saToken(t, g.cp, g.ns, "purger") // the API server's audience
	body := `{"bans": [{"host": "app.example.com", "pathPrefix": "/news/"}]}`
	p := g.pods[1]

	if code, out := p.invalidate("", body); code != 401 || !strings.Contains(out.Error, "--audience="+invalidation.Audience) {
		t.Errorf("without a token: %d %+v, want 401 saying how to get one", code, out)
	}
	if code, out := p.invalidate(apiToken, body); code != 401 {
		t.Errorf("with a token for the API server: %d %+v, want 401", code, out)
	}
	if code, out := p.invalidate(saToken(t, g.cp, g.ns, "purger", "vault"), body); code != 401 {
		t.Errorf("with a token for another audience: %d %+v, want 401", code, out)
	}
	// Headers above the servers' MaxHeaderBytes: 431, on the endpoint and
	// on the health and metrics server.
	for _, url := range []string{"http://" + p.invalidateAddr + invalidation.Path, "http://" + p.HealthAddr + "/readyz"} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+purger)
		req.Header.Set("X-Pad", strings.Repeat("x", 200<<10))
		resp, err := noKeepAlive.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s with 200 KiB of headers: %d, want 431", url, resp.StatusCode)
		}
	}
	if code, out := p.invalidate(reader, body); code != 403 || !strings.Contains(out.Error, "system:serviceaccount:"+g.ns+":reader may not create cacheinvalidations") {
		t.Errorf("without the right: %d %+v, want 403 naming the user and the right", code, out)
	}
	if code, out := p.invalidate(purger, `{"bans": [{"host": "app.example.com", "pathRegex": "^/(a)\\1"}]}`); code != 400 || !strings.Contains(out.Error, "bans[0].pathRegex") {
		t.Errorf("an invalid regex: %d %+v, want 400 naming bans[0].pathRegex", code, out)
	}
	if code, out := p.invalidate(purger, `{"gateway": "other", "tags": ["a"]}`); code != 400 || !strings.Contains(out.Error, `gateway = "other"`) {
		t.Errorf("another Gateway: %d %+v, want 400", code, out)
	}
	if code, out := p.invalidate(purger, `{"tag": ["a"]}`); code != 400 || !strings.Contains(out.Error, `unknown field "tag"`) {
		t.Errorf("an unknown field: %d %+v, want 400", code, out)
	}
	list, err := g.dyn.Resource(vgwapi.CacheInvalidations).Namespace(g.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(list.Items) != 0 {
		t.Fatalf("refused requests created %d CacheInvalidations", len(list.Items))
	}

	start := time.Now()
	code, out := p.invalidate(purger, body)
	if code != 200 || strings.Join(out.Applied, ",") != "edge-a,edge-b" || out.UID == "" {
		t.Fatalf("with the right: %d %+v, want 200 applied by edge-a and edge-b", code, out)
	}
	t.Logf("POST /invalidate answered after %s: %+v", time.Since(start).Round(time.Millisecond), out)
	for _, p := range g.pods {
		if got := p.fetch("/news/1"); got == cached[p.name] {
			t.Errorf("%s still serves /news/1 from cache (%q) after the invalidation", p.name, got)
		}
	}
	g.pods[0].WaitFor("the applied CacheInvalidation deleted", 10*time.Second, func() bool {
		list, err := g.dyn.Resource(vgwapi.CacheInvalidations).Namespace(g.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}

// TestBanRegexCannotCrashTheCache: a path regex whose matching time
// explodes (nested repetition) is refused by the pods, so it never reaches
// varnishd's ban list. Issued as a ban, ^/(a|a)*b$ against a cached
// /aaa…a-b makes PCRE2 hit its match limit inside ban_evaluate(), whose
// assertion then panics the cache child (seen on 7.1 and 7.7): the cache is
// emptied.
func TestBanRegexCannotCrashTheCache(t *testing.T) {
	g, _ := startCacheGateway(t, false)
	path := "/" + strings.Repeat("a", 40) + "-b"
	cached := map[string]string{}
	added := map[string]float64{}
	for _, p := range g.pods {
		cached[p.name] = p.fetch(path)
		if again := p.fetch(path); again != cached[p.name] {
			t.Fatalf("%s: %s not cached: %q then %q", p.name, path, cached[p.name], again)
		}
		p.WaitFor("the first stats", 30*time.Second, func() bool { return p.metric("varnish_main_bans_added_total") >= 0 })
		added[p.name] = p.metric("varnish_main_bans_added_total")
	}
	bad := g.create(t, vgwapi.InvalidationSpec{Bans: []vgwapi.Ban{{Host: "app.example.com", PathRegex: `^/(a|a)*b$`}}})
	for pod, ack := range g.acks(t, string(bad.GetUID())) {
		if ack.Bans != 0 || !strings.Contains(ack.Error, "bans[0].pathRegex") || !strings.Contains(ack.Error, "pathPrefix") {
			t.Errorf("%s acknowledged %+v, want it refused naming bans[0].pathRegex and suggesting pathPrefix", pod, ack)
		}
	}
	// The ban lurker evaluates obj.* bans older than a second
	// (ban_lurker_age=1), every 0.1 s; stats are read every 500 ms.
	time.Sleep(3 * time.Second)
	for _, p := range g.pods {
		if v := p.metric("varnish_mgt_child_start_total"); v != 1 {
			t.Errorf("%s: the cache child started %v times, want 1 (it panicked)", p.name, v)
		}
		if v := p.metric("varnish_main_bans_added_total"); v != added[p.name] {
			t.Errorf("%s: %v bans added, %v before: the regex reached varnishd's ban list", p.name, v, added[p.name])
		}
		if got := p.fetch(path); got != cached[p.name] {
			t.Errorf("%s: %s answered %q, not the cached %q: the cache was emptied", p.name, path, got, cached[p.name])
		}
	}
}
