package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// build holds the chaperone binary and the ghost VMOD, built once by
// TestMain.
var build *chaperonetest.Build

func TestMain(m *testing.M) {
	removeStaleBuildDirs()
	var err error
	build, err = chaperonetest.BuildIn(filepath.Join(os.TempDir(), buildPrefix+strconv.Itoa(os.Getpid())), raceBuild)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// testenv.Main exits: the build directory of this run is removed by
	// the next run (removeStaleBuildDirs).
	testenv.Main(m)
}

// buildPrefix starts the name of each test run's build directory; the
// process ID follows.
const buildPrefix = "chaperone-test-"

// removeStaleBuildDirs removes the build directories of earlier test runs
// whose process is gone.
func removeStaleBuildDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), buildPrefix))
		if err != nil {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			os.RemoveAll(d)
		}
	}
}

// mainVCL is the main.vcl of the tests: ghost routes everything, and
// X-VCL names the VCL that answered.
func mainVCL(ghostJSON, tag string) string {
	return chaperonetest.MainVCL(build.GhostVMOD, ghostJSON, tag)
}

// chaperone is a running chaperone binary, with the helpers of this
// package's tests.
type chaperone struct{ *chaperonetest.Chaperone }

// startChaperone runs the chaperone binary in supervise mode with main.vcl
// and ghost.json routing app.example.com to be.
func startChaperone(t testing.TB, be *httptest.Server, extra ...string) *chaperone {
	t.Helper()
	return startChaperoneAt(t, be, varnishdtest.FreeAddr(t), extra...)
}

// startChaperoneAt is startChaperone with the listener on listenAddr.
func startChaperoneAt(t testing.TB, be *httptest.Server, listenAddr string, extra ...string) *chaperone {
	t.Helper()
	return startChaperoneIn(t, varnishdtest.Dir(t), be, listenAddr, extra...)
}

// startChaperoneIn is startChaperoneAt with main.vcl and ghost.json in dir
// (world-readable).
func startChaperoneIn(t testing.TB, dir string, be *httptest.Server, listenAddr string, extra ...string) *chaperone {
	t.Helper()
	c := launchChaperone(t, dir, be, listenAddr, extra...)
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	return c
}

// launchChaperone is startChaperoneIn without waiting for readiness. An
// empty listenAddr gives no --listen (extra names the ports).
func launchChaperone(t testing.TB, dir string, be *httptest.Server, listenAddr string, extra ...string) *chaperone {
	t.Helper()
	return &chaperone{chaperonetest.Launch(t, build, dir, be, listenAddr, extra...)}
}

// metric returns the value of the first /metrics line that starts with
// prefix, -1 when none.
func (c *chaperone) metric(prefix string) float64 {
	_, body := c.Health("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, prefix)), 64)
			return v
		}
	}
	return -1
}

// noKeepAlive closes each connection after its request: an idle pooled
// connection would be a live session that keeps a drain waiting.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// get sends a request for app.example.com through varnishd.
func (c *chaperone) get() (status int, body string, header http.Header) {
	req, _ := http.NewRequest("GET", "http://"+c.ListenAddr+"/", nil)
	req.Host = "app.example.com"
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (c *chaperone) wantTraffic(body, vcl string) {
	c.T.Helper()
	c.WaitFor(fmt.Sprintf("traffic answered by %s through VCL %s", body, vcl), 90*time.Second, func() bool {
		code, got, h := c.get()
		return code == 200 && got == body && h.Get("X-VCL") == vcl
	})
}

// keepAlive opens a connection, sends one request and leaves it idle.
func (c *chaperone) keepAlive() net.Conn {
	c.T.Helper()
	conn, err := net.Dial("tcp", c.ListenAddr)
	if err != nil {
		c.T.Fatal(err)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.T.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return conn
}

func TestServesDrainsOnSIGTERMAndExitsAfterClientsLeave(t *testing.T) {
	be := chaperonetest.Backend(t, "A")
	c := startChaperone(t, be, "--param", "timeout_idle=120")
	c.wantTraffic("A", "v1")
	// The counter follows ghost's answer, which can come after traffic flows.
	c.WaitFor("a ghost reload counted", 30*time.Second, func() bool {
		return c.metric(`varnishgw_chaperone_reloads_total{kind="ghost",result="ok"}`) >= 1
	})
	c.WaitFor("varnish counters in /metrics", 90*time.Second, func() bool {
		return c.metric("varnish_main_client_req_total") >= 1
	})

	ghostCounter := regexp.MustCompile(`varnish_ghost_requests_total\{router="router",vcl="main-[^"]+",vhost="app\.example\.com"\} [1-9]`)
	c.WaitFor("ghost's per-vhost request counter in /metrics", 90*time.Second, func() bool {
		c.get()
		_, metrics := c.Health("/metrics")
		return ghostCounter.MatchString(metrics)
	})

	conns := []net.Conn{c.keepAlive(), c.keepAlive(), c.keepAlive()}
	// thread_pools=1: one session pool, MEMPOOL.sess0.live counts them all.
	c.WaitFor("3 live sessions", 90*time.Second, func() bool { return c.metric(`varnish_mempool_live{id="sess0"}`) == 3 })

	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("readiness 503", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 503 })
	if code, body := c.Health("/healthz"); code != 200 {
		t.Errorf("/healthz while draining = %d %s, want 200", code, body)
	}
	c.WaitFor("live sessions counted", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_live_sessions") == 3
	})
	// The clients are still connected: the chaperone must stay.
	select {
	case <-c.Exited:
		t.Fatalf("chaperone exited with 3 client sessions open: %v", c.ExitErr)
	case <-time.After(3 * time.Second):
	}
	for _, conn := range conns {
		conn.Close()
	}
	select {
	case <-c.Exited:
	case <-time.After(120 * time.Second):
		t.Fatal("chaperone did not exit within 60 s after the clients left")
	}
	if c.ExitErr != nil {
		t.Errorf("chaperone exit: %v, want status 0", c.ExitErr)
	}
	if !strings.Contains(c.Out.String(), "varnishd stopped") {
		t.Error("log does not say varnishd was stopped after draining")
	}
}

func TestSecondSIGTERMEndsAtOnce(t *testing.T) {
	c := startChaperone(t, chaperonetest.Backend(t, "A"), "--param", "timeout_idle=120")
	conn := c.keepAlive()
	defer conn.Close()
	c.Cmd.Process.Signal(syscall.SIGTERM)
	c.WaitFor("readiness 503", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 503 })
	c.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.Exited:
	case <-time.After(90 * time.Second):
		t.Fatal("chaperone still runs 30 s after a second SIGTERM")
	}
	if c.ExitErr == nil {
		t.Error("exit status 0 after a second SIGTERM, want non-zero")
	}
}

func TestBrokenVCLKeepsTrafficAndGhostJSONReloads(t *testing.T) {
	a, b := chaperonetest.Backend(t, "A"), chaperonetest.Backend(t, "B")
	c := startChaperone(t, a)
	c.wantTraffic("A", "v1")

	if code, _ := c.Health("/drain"); code != 404 {
		t.Errorf("GET /drain = %d, want 404 (no drain over TCP)", code)
	}

	// Requests run all through the failed reload; none may fail.
	stopTraffic := make(chan struct{})
	trafficDone := make(chan []string)
	go func() {
		var bad []string
		n := 0
		for {
			select {
			case <-stopTraffic:
				if n == 0 {
					bad = append(bad, "no request was sent")
				}
				trafficDone <- bad
				return
			default:
			}
			code, body, h := c.get()
			n++
			if code != 200 || body != "A" || h.Get("X-VCL") != "v1" {
				bad = append(bad, fmt.Sprintf("%d %q X-VCL %q", code, body, h.Get("X-VCL")))
			}
		}
	}()
	chaperonetest.WriteFile(t, c.VCLPath, "vcl 4.1;\nsub vcl_recv { this is not VCL }\n")
	c.WaitFor("a VCL compile failure in /metrics", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_vcl_compile_failures_total") == 1
	})
	close(stopTraffic)
	if bad := <-trafficDone; len(bad) > 0 {
		t.Errorf("requests during the failed reload went wrong: %v", bad)
	}
	if code, body, h := c.get(); code != 200 || body != "A" || h.Get("X-VCL") != "v1" {
		t.Errorf("after a broken VCL: %d %q X-VCL %q, want 200 A v1", code, body, h.Get("X-VCL"))
	}
	if !regexp.MustCompile(`"compiler":"[^"]*this`).MatchString(c.Out.String()) {
		t.Error("the log has no compiler message")
	}

	chaperonetest.WriteFile(t, c.VCLPath, mainVCL(c.GhostPath, "v2"))
	c.wantTraffic("A", "v2")

	chaperonetest.WriteFile(t, c.GhostPath, chaperonetest.GhostJSON(b.URL))
	c.wantTraffic("B", "v2")
	if code, _ := c.Health("/readyz"); code != 200 {
		t.Errorf("/readyz = %d after reloads, want 200", code)
	}
}

func TestCacheChildRestartIsNoticedAndTrafficRecovers(t *testing.T) {
	c := startChaperone(t, chaperonetest.Backend(t, "A"))
	c.wantTraffic("A", "v1")
	c.WaitFor("the first stats", 90*time.Second, func() bool { return c.metric("varnish_mgt_child_start_total") == 1 })

	manager := childrenOf(t, c.Cmd.Process.Pid, "varnishd")
	if len(manager) != 1 {
		t.Fatalf("chaperone children = %v, want varnishd's manager only", manager)
	}
	child := childrenOf(t, manager[0], "cache-main")
	if len(child) != 1 {
		t.Fatalf("manager children = %v, want the cache child", child)
	}
	if err := syscall.Kill(child[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("the chaperone to notice the restart", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_child_restarts_total") == 1
	})
	c.wantTraffic("A", "v1")
	c.WaitFor("readiness after the restart", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
}

// childrenOf returns the child processes of pid whose command name is comm
// (others come and go: the chaperone's varnishstat runs, the manager's VCL
// compiler).
func childrenOf(t *testing.T, pid int, comm string) []int {
	t.Helper()
	// Each thread has its own list: Go forks from any thread.
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		t.Fatalf("no /proc children files for pid %d: %v", pid, err)
	}
	var pids []int
	for _, file := range files {
		data, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(data)) {
			n, _ := strconv.Atoi(f)
			if name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n)); strings.TrimSpace(string(name)) == comm {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// TestVarnishdExitEndsTheChaperone: when varnishd's manager dies the
// chaperone exits non-zero so Kubernetes restarts the pod.
func TestVarnishdExitEndsTheChaperone(t *testing.T) {
	c := startChaperone(t, chaperonetest.Backend(t, "A"))
	manager := childrenOf(t, c.Cmd.Process.Pid, "varnishd")
	if len(manager) != 1 {
		t.Fatalf("chaperone children = %v, want varnishd's manager only", manager)
	}
	varnishdtest.KillTree(manager[0])
	select {
	case <-c.Exited:
	case <-time.After(90 * time.Second):
		t.Fatal("chaperone still runs 90 s after varnishd died")
	}
	if c.ExitErr == nil {
		t.Error("chaperone exited 0 after varnishd died, want non-zero")
	}
	if !strings.Contains(c.Out.String(), "varnishd exited") {
		t.Error("the log does not say varnishd exited")
	}
}

// TestStandaloneDirRouting runs the chaperone with --routing=dir: the
// routing comes from a directory (a Gateway, a fragment the routing core
// made, inline endpoints) instead of a ghost.json someone else writes, and
// an edit saved by rename moves the traffic.
func TestStandaloneDirRouting(t *testing.T) {
	before, first, second := chaperonetest.Backend(t, "before"), chaperonetest.Backend(t, "first"), chaperonetest.Backend(t, "second")
	dir := varnishdtest.Dir(t)
	routingDir := filepath.Join(dir, "routing")
	if err := os.Mkdir(routingDir, 0o755); err != nil {
		t.Fatal(err)
	}
	listen := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, listen)

	gw := &gatewayv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "edge", Generation: 1},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "varnish",
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
			Hostnames:       []gatewayv1.Hostname{"app.example.com"},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "port-80", Port: 80}}},
	}
	frag, err := routing.Attach(gw, route, &routing.Objects{Services: []*corev1.Service{svc}})
	if err != nil {
		t.Fatal(err)
	}
	fragJSON, err := routing.MarshalFragment(frag)
	if err != nil {
		t.Fatal(err)
	}
	gwYAML, err := yaml.Marshal(gw)
	if err != nil {
		t.Fatal(err)
	}
	chaperonetest.WriteFile(t, filepath.Join(routingDir, "gateway.yaml"), string(gwYAML))
	chaperonetest.WriteFile(t, filepath.Join(routingDir, "app.fragment.json"), string(fragJSON))
	endpoints := func(be *httptest.Server) string {
		return "demo/app:80:\n  - " + strings.TrimPrefix(be.URL, "http://") + "\n"
	}
	chaperonetest.WriteFile(t, filepath.Join(routingDir, "endpoints.yaml"), endpoints(first))

	// ghost.json starts out routing to "before"; the directory takes over.
	c := startChaperoneAt(t, before, listen, "--routing", "dir", "--routing-dir", routingDir)
	c.WaitFor("traffic from the routing directory", 60*time.Second, func() bool {
		_, body, _ := c.get()
		return body == "first"
	})

	// An editor-style save: write a temporary file, rename it over the old one.
	tmp := filepath.Join(routingDir, ".endpoints.yaml.tmp")
	chaperonetest.WriteFile(t, tmp, endpoints(second))
	if err := os.Rename(tmp, filepath.Join(routingDir, "endpoints.yaml")); err != nil {
		t.Fatal(err)
	}
	c.WaitFor("traffic to the new endpoint", 60*time.Second, func() bool {
		_, body, _ := c.get()
		return body == "second"
	})
	// The counter follows ghost's answer, which can come after the
	// traffic has moved.
	c.WaitFor(`varnishgw_routing_syncs_total{outcome="reloaded"} >= 2`, 30*time.Second, func() bool {
		return c.metric(`varnishgw_routing_syncs_total{outcome="reloaded"}`) >= 2
	})
}

func ptr[T any](v T) *T { return &v }
