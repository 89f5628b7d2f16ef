package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/logcheck"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// chaperoneBin and ghostVMOD are built once by TestMain.
var chaperoneBin, ghostVMOD string

func TestMain(m *testing.M) {
	if err := buildOnce(); err != nil {
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

// buildOnce builds the ghost VMOD and the chaperone binary into a new
// world-readable directory (varnishd compiles VCL as user vcache).
func buildOnce() error {
	removeStaleBuildDirs()
	dir := filepath.Join(os.TempDir(), buildPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	var err error
	if ghostVMOD, err = varnishdtest.BuildGhost(dir); err != nil {
		return fmt.Errorf("build the ghost VMOD (run make setup for its build dependencies): %w", err)
	}
	chaperoneBin = filepath.Join(dir, "chaperone")
	build := []string{"build", "-o", chaperoneBin}
	if raceBuild {
		build = append(build, "-race")
	}
	if out, err := exec.Command("go", append(build, ".")...).CombinedOutput(); err != nil {
		return fmt.Errorf("build the chaperone: %w\n%s", err, out)
	}
	return nil
}

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
	return varnishdtest.MainVCL(ghostVMOD, ghostJSON, fmt.Sprintf("set resp.http.X-VCL = %q;", tag))
}

func ghostJSON(backendURL string) string {
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(backendURL, "http://"))
	return fmt.Sprintf(`{"version": 2, "backends": [
  {"name": "app", "endpoints": [{"address": %q, "port": %s}]}
], "vhosts": [
  {"hostname": "app.example.com", "routes": [
    {"name": "app", "match": {"path": {"type": "PathPrefix", "value": "/"}},
     "backends": [{"backend": "app"}]}]}
]}`, host, port)
}

func backend(t testing.TB, body string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// chaperone is a running chaperone binary.
type chaperone struct {
	t          testing.TB
	cmd        *exec.Cmd
	dir        string
	listenAddr string
	healthAddr string
	ghostAdmin string
	vclPath    string
	ghostPath  string
	out        *syncBuffer
	stdout     *syncBuffer // stdout alone (the access log), also in out
	exited     chan struct{}
	exitErr    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
	c.waitFor("ready", 90*time.Second, func() bool { code, _ := c.health("/readyz"); return code == 200 })
	return c
}

// launchChaperone is startChaperoneIn without waiting for readiness. An
// empty listenAddr gives no --listen (extra names the ports).
func launchChaperone(t testing.TB, dir string, be *httptest.Server, listenAddr string, extra ...string) *chaperone {
	t.Helper()
	c := &chaperone{
		t: t, dir: dir,
		listenAddr: listenAddr,
		healthAddr: varnishdtest.FreeAddr(t),
		ghostAdmin: varnishdtest.FreeAddr(t),
		vclPath:    filepath.Join(dir, "main.vcl"),
		ghostPath:  filepath.Join(dir, "ghost.json"),
		out:        &syncBuffer{},
		stdout:     &syncBuffer{},
		exited:     make(chan struct{}),
	}
	writeFile(t, c.ghostPath, ghostJSON(be.URL))
	writeFile(t, c.vclPath, mainVCL(c.ghostPath, "v1"))
	args := []string{
		"--workdir", filepath.Join(dir, "work"),
		"--listen-host", "127.0.0.1",
		"--admin-addr", "127.0.0.1:0",
		"--ghost-admin-addr", c.ghostAdmin,
		"--health-addr", c.healthAddr,
		"--vcl", c.vclPath,
		"--ghost-json", c.ghostPath,
		"--varnishd", varnishdtest.Bin(t),
		"--varnishstat", varnishdtest.StatBin(t),
		"--storage", "malloc,32m",
		"--param", "thread_pool_min=5", "--param", "thread_pools=1",
		"--stats-interval", "500ms",
		"--log-level", "debug",
	}
	if c.listenAddr != "" { // "": HTTPS listeners only (--tls-listen in extra)
		args = append(args, "--listen", strconv.Itoa(varnishdtest.Port(t, c.listenAddr)))
	}
	c.cmd = exec.Command(chaperoneBin, append(args, extra...)...)
	c.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	c.cmd.Stdout, c.cmd.Stderr = io.MultiWriter(c.stdout, c.out), c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exitErr = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		varnishdtest.KillTree(c.cmd.Process.Pid)
		<-c.exited
		logcheck.Records(t, c.out.String())
		if t.Failed() {
			t.Logf("chaperone output:\n%s", c.out.String())
		}
	})
	return c
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (c *chaperone) waitFor(what string, timeout time.Duration, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		select {
		case <-c.exited:
			c.t.Fatalf("chaperone exited (%v) while waiting for %s", c.exitErr, what)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *chaperone) health(path string) (int, string) {
	resp, err := http.Get("http://" + c.healthAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric returns the value of the first /metrics line that starts with
// prefix, -1 when none.
func (c *chaperone) metric(prefix string) float64 {
	_, body := c.health("/metrics")
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
	req, _ := http.NewRequest("GET", "http://"+c.listenAddr+"/", nil)
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
	c.t.Helper()
	c.waitFor(fmt.Sprintf("traffic answered by %s through VCL %s", body, vcl), 90*time.Second, func() bool {
		code, got, h := c.get()
		return code == 200 && got == body && h.Get("X-VCL") == vcl
	})
}

// keepAlive opens a connection, sends one request and leaves it idle.
func (c *chaperone) keepAlive() net.Conn {
	c.t.Helper()
	conn, err := net.Dial("tcp", c.listenAddr)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return conn
}

func TestServesDrainsOnSIGTERMAndExitsAfterClientsLeave(t *testing.T) {
	be := backend(t, "A")
	c := startChaperone(t, be, "--param", "timeout_idle=120")
	c.wantTraffic("A", "v1")
	// The counter follows ghost's answer, which can come after traffic flows.
	c.waitFor("a ghost reload counted", 30*time.Second, func() bool {
		return c.metric(`varnishgw_chaperone_reloads_total{kind="ghost",result="ok"}`) >= 1
	})
	c.waitFor("varnish counters in /metrics", 90*time.Second, func() bool {
		return c.metric("varnish_main_client_req_total") >= 1
	})

	ghostCounter := regexp.MustCompile(`varnish_ghost_requests_total\{router="router",vcl="main-[^"]+",vhost="app\.example\.com"\} [1-9]`)
	c.waitFor("ghost's per-vhost request counter in /metrics", 90*time.Second, func() bool {
		c.get()
		_, metrics := c.health("/metrics")
		return ghostCounter.MatchString(metrics)
	})

	conns := []net.Conn{c.keepAlive(), c.keepAlive(), c.keepAlive()}
	// thread_pools=1: one session pool, MEMPOOL.sess0.live counts them all.
	c.waitFor("3 live sessions", 90*time.Second, func() bool { return c.metric(`varnish_mempool_live{id="sess0"}`) == 3 })

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitFor("readiness 503", 90*time.Second, func() bool { code, _ := c.health("/readyz"); return code == 503 })
	if code, body := c.health("/healthz"); code != 200 {
		t.Errorf("/healthz while draining = %d %s, want 200", code, body)
	}
	c.waitFor("live sessions counted", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_live_sessions") == 3
	})
	// The clients are still connected: the chaperone must stay.
	select {
	case <-c.exited:
		t.Fatalf("chaperone exited with 3 client sessions open: %v", c.exitErr)
	case <-time.After(3 * time.Second):
	}
	for _, conn := range conns {
		conn.Close()
	}
	select {
	case <-c.exited:
	case <-time.After(120 * time.Second):
		t.Fatal("chaperone did not exit within 60 s after the clients left")
	}
	if c.exitErr != nil {
		t.Errorf("chaperone exit: %v, want status 0", c.exitErr)
	}
	if !strings.Contains(c.out.String(), "varnishd stopped") {
		t.Error("log does not say varnishd was stopped after draining")
	}
}

func TestSecondSIGTERMEndsAtOnce(t *testing.T) {
	c := startChaperone(t, backend(t, "A"), "--param", "timeout_idle=120")
	conn := c.keepAlive()
	defer conn.Close()
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.waitFor("readiness 503", 90*time.Second, func() bool { code, _ := c.health("/readyz"); return code == 503 })
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(90 * time.Second):
		t.Fatal("chaperone still runs 30 s after a second SIGTERM")
	}
	if c.exitErr == nil {
		t.Error("exit status 0 after a second SIGTERM, want non-zero")
	}
}

func TestBrokenVCLKeepsTrafficAndGhostJSONReloads(t *testing.T) {
	a, b := backend(t, "A"), backend(t, "B")
	c := startChaperone(t, a)
	c.wantTraffic("A", "v1")

	if code, _ := c.health("/drain"); code != 404 {
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
	writeFile(t, c.vclPath, "vcl 4.1;\nsub vcl_recv { this is not VCL }\n")
	c.waitFor("a VCL compile failure in /metrics", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_vcl_compile_failures_total") == 1
	})
	close(stopTraffic)
	if bad := <-trafficDone; len(bad) > 0 {
		t.Errorf("requests during the failed reload went wrong: %v", bad)
	}
	if code, body, h := c.get(); code != 200 || body != "A" || h.Get("X-VCL") != "v1" {
		t.Errorf("after a broken VCL: %d %q X-VCL %q, want 200 A v1", code, body, h.Get("X-VCL"))
	}
	if !regexp.MustCompile(`"compiler":"[^"]*this`).MatchString(c.out.String()) {
		t.Error("the log has no compiler message")
	}

	writeFile(t, c.vclPath, mainVCL(c.ghostPath, "v2"))
	c.wantTraffic("A", "v2")

	writeFile(t, c.ghostPath, ghostJSON(b.URL))
	c.wantTraffic("B", "v2")
	if code, _ := c.health("/readyz"); code != 200 {
		t.Errorf("/readyz = %d after reloads, want 200", code)
	}
}

func TestCacheChildRestartIsNoticedAndTrafficRecovers(t *testing.T) {
	c := startChaperone(t, backend(t, "A"))
	c.wantTraffic("A", "v1")
	c.waitFor("the first stats", 90*time.Second, func() bool { return c.metric("varnish_mgt_child_start_total") == 1 })

	manager := childrenOf(t, c.cmd.Process.Pid, "varnishd")
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
	c.waitFor("the chaperone to notice the restart", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_child_restarts_total") == 1
	})
	c.wantTraffic("A", "v1")
	c.waitFor("readiness after the restart", 90*time.Second, func() bool { code, _ := c.health("/readyz"); return code == 200 })
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
	c := startChaperone(t, backend(t, "A"))
	manager := childrenOf(t, c.cmd.Process.Pid, "varnishd")
	if len(manager) != 1 {
		t.Fatalf("chaperone children = %v, want varnishd's manager only", manager)
	}
	varnishdtest.KillTree(manager[0])
	select {
	case <-c.exited:
	case <-time.After(90 * time.Second):
		t.Fatal("chaperone still runs 90 s after varnishd died")
	}
	if c.exitErr == nil {
		t.Error("chaperone exited 0 after varnishd died, want non-zero")
	}
	if !strings.Contains(c.out.String(), "varnishd exited") {
		t.Error("the log does not say varnishd exited")
	}
}

// TestStandaloneDirRouting runs the chaperone with --routing=dir: the
// routing comes from a directory (a Gateway, a fragment the routing core
// made, inline endpoints) instead of a ghost.json someone else writes, and
// an edit saved by rename moves the traffic.
func TestStandaloneDirRouting(t *testing.T) {
	before, first, second := backend(t, "before"), backend(t, "first"), backend(t, "second")
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
	writeFile(t, filepath.Join(routingDir, "gateway.yaml"), string(gwYAML))
	writeFile(t, filepath.Join(routingDir, "app.fragment.json"), string(fragJSON))
	endpoints := func(be *httptest.Server) string {
		return "demo/app:80:\n  - " + strings.TrimPrefix(be.URL, "http://") + "\n"
	}
	writeFile(t, filepath.Join(routingDir, "endpoints.yaml"), endpoints(first))

	// ghost.json starts out routing to "before"; the directory takes over.
	c := startChaperoneAt(t, before, listen, "--routing", "dir", "--routing-dir", routingDir)
	c.waitFor("traffic from the routing directory", 60*time.Second, func() bool {
		_, body, _ := c.get()
		return body == "first"
	})

	// An editor-style save: write a temporary file, rename it over the old one.
	tmp := filepath.Join(routingDir, ".endpoints.yaml.tmp")
	writeFile(t, tmp, endpoints(second))
	if err := os.Rename(tmp, filepath.Join(routingDir, "endpoints.yaml")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("traffic to the new endpoint", 60*time.Second, func() bool {
		_, body, _ := c.get()
		return body == "second"
	})
	// The counter follows ghost's answer, which can come after the
	// traffic has moved.
	c.waitFor(`varnishgw_routing_syncs_total{outcome="reloaded"} >= 2`, 30*time.Second, func() bool {
		return c.metric(`varnishgw_routing_syncs_total{outcome="reloaded"}`) >= 2
	})
}

func ptr[T any](v T) *T { return &v }
