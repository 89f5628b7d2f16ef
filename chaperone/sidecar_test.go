package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/logcheck"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// sidecar is a sidecar-mode chaperone and the means to start its "varnish
// container".
type sidecar struct {
	*chaperone
	drainSocket string
	listenPort  int
	healthPort  int
	// varnishContainer starts varnishd with the command line the provider
	// gives the varnish container.
	varnishContainer func() *exec.Cmd
}

// startSidecar starts the chaperone in sidecar mode, routing to the
// backend at beURL, as the provider configures it; varnishd is not started.
func startSidecar(t *testing.T, beURL string) *sidecar {
	dir := varnishdtest.Dir(t)
	shared := filepath.Join(dir, "shared")
	secretFile, bootFile, _, err := varnishd.PrepareWorkDir(shared)
	if err != nil {
		t.Fatal(err)
	}
	workDir := filepath.Join(dir, "work")
	listenPort := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	healthPort := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	drainSocket := filepath.Join(dir, "drain.sock")
	c := &chaperone{&chaperonetest.Chaperone{
		T: t, Dir: dir,
		ListenAddr: "127.0.0.1:" + strconv.Itoa(listenPort),
		HealthAddr: "127.0.0.1:" + strconv.Itoa(healthPort),
		GhostAdmin: varnishdtest.FreeAddr(t),
		VCLPath:    filepath.Join(dir, "main.vcl"),
		GhostPath:  filepath.Join(dir, "ghost.json"),
		Out:        &chaperonetest.SyncBuffer{},
		Stdout:     &chaperonetest.SyncBuffer{},
		Exited:     make(chan struct{}),
	}}
	adminAddr := varnishdtest.FreeAddr(t)
	chaperonetest.WriteFile(t, c.GhostPath, chaperonetest.GhostJSON(beURL))
	chaperonetest.WriteFile(t, c.VCLPath, mainVCL(c.GhostPath, "side"))

	c.Cmd = exec.Command(build.Chaperone,
		"--mode=sidecar", "--secret-file", secretFile, "--workdir", workDir,
		"--admin-addr", adminAddr, "--ghost-admin-addr", c.GhostAdmin,
		"--health-addr", ":"+strconv.Itoa(healthPort), "--drain-socket", drainSocket,
		"--vcl", c.VCLPath, "--ghost-json", c.GhostPath,
		"--varnishstat", varnishdtest.StatBin(t), "--stats-interval", "500ms",
		"--access-log", "--varnishncsa", varnishdtest.NcsaBin(t))
	c.Cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	c.Cmd.Stdout, c.Cmd.Stderr = io.MultiWriter(c.Stdout, c.Out), c.Out
	c.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.ExitErr = c.Cmd.Wait(); close(c.Exited) }()
	t.Cleanup(func() {
		varnishdtest.KillTree(c.Cmd.Process.Pid)
		<-c.Exited
		logcheck.Records(t, c.Out.String())
		if t.Failed() {
			t.Logf("chaperone output:\n%s", c.Out.String())
		}
	})

	// The "varnish container", with the provider's command line.
	varnishContainer := func() *exec.Cmd {
		cfg := varnishd.Config{
			WorkDir:        workDir,
			Listeners:      []varnishd.Listener{{Name: "port-" + strconv.Itoa(listenPort), Addr: ":" + strconv.Itoa(listenPort)}},
			GhostAdminAddr: c.GhostAdmin,
			Storage:        []string{"malloc,32m"},
			Params:         []string{"thread_pool_min=5", "thread_pools=1", "timeout_idle=120"},
		}
		vd := exec.Command(varnishdtest.Bin(t), varnishd.Args(cfg, adminAddr, secretFile, bootFile)...)
		vdOut := &chaperonetest.SyncBuffer{}
		vd.Stdout, vd.Stderr = vdOut, vdOut
		vd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := vd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			varnishdtest.KillTree(vd.Process.Pid)
			_ = vd.Wait() // killed: its exit status is an error
			if t.Failed() {
				t.Logf("varnishd output:\n%s", vdOut.String())
			}
		})
		return vd
	}
	return &sidecar{chaperone: c, drainSocket: drainSocket, listenPort: listenPort, healthPort: healthPort, varnishContainer: varnishContainer}
}

// TestSidecarSteersAnotherVarnishdAndDrainsOnPreStop runs the chaperone in
// sidecar mode beside a varnishd the test starts with the command line the
// provider gives the varnish container (varnishd.Args): shared work dir and
// secret, -M to the chaperone, listener and health port on every address.
// The drain cannot be started over TCP nor by another user; the preStop
// hook, `chaperone drain`, starts it through the drain socket, keep-alive
// connections then close after their next response, and the hook exits 0
// only once the last client has gone.
func TestSidecarSteersAnotherVarnishdAndDrainsOnPreStop(t *testing.T) {
	be := chaperonetest.Backend(t, "S")
	sc := startSidecar(t, be.URL)
	c, drainSocket, listenPort, healthPort, varnishContainer := sc.chaperone, sc.drainSocket, sc.listenPort, sc.healthPort, sc.varnishContainer
	dir := c.Dir
	vd := varnishContainer()

	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	c.wantTraffic("S", "side")
	c.WaitFor("varnish counters through the shared work dir", 90*time.Second, func() bool {
		return c.metric("varnish_main_client_req_total") >= 1
	})
	// The access log too: varnishncsa reads the shared work dir.
	accessLogged := func(what string) {
		t.Helper()
		n := strings.Count(c.Stdout.String(), `"route":"app"`)
		c.WaitFor(what, 90*time.Second, func() bool {
			c.get()
			time.Sleep(200 * time.Millisecond)
			return strings.Count(c.Stdout.String(), `"route":"app"`) > n
		})
	}
	accessLogged("an access log line in sidecar mode")

	// The varnish container restarts: the chaperone takes the new admin
	// connection and loads main.vcl and routing into the new varnishd.
	varnishdtest.KillTree(vd.Process.Pid)
	_ = vd.Wait() // killed: its exit status is an error
	c.WaitFor("the old cache child to release the listener", 90*time.Second, func() bool {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(listenPort))
		if err == nil {
			l.Close()
		}
		return err == nil
	})
	vd = varnishContainer()
	c.WaitFor("the chaperone to accept the new varnishd", 90*time.Second, func() bool {
		return strings.Contains(c.Out.String(), "varnishd connected again")
	})
	c.wantTraffic("S", "side")
	accessLogged("access log lines of the restarted varnishd")

	// What faces the network: the listener and the health port only; the
	// admin connection and ghost's admin socket are on loopback (varnishd
	// has no -T).
	for who, root := range map[string]int{"chaperone": c.Cmd.Process.Pid, "varnish container": vd.Process.Pid} {
		socks := varnishdtest.ListeningTCP(t, append([]int{root}, varnishdtest.Descendants(root)...))
		for _, s := range socks {
			if !s.Addr().IsLoopback() && int(s.Port()) != listenPort && int(s.Port()) != healthPort {
				t.Errorf("the %s listens on %s, not loopback (all: %v)", who, s, socks)
			}
		}
	}

	// No drain over TCP: the health port has no /drain.
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, "http://"+c.HealthAddr+"/drain", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s /drain on the health port = %d, want 404", method, resp.StatusCode)
		}
	}
	// The hook fails clearly when it cannot reach the chaperone.
	if code, _, stderr := runDrain(t, nil, "--socket", filepath.Join(dir, "elsewhere.sock")); code != 1 || !strings.Contains(stderr, "no drain socket at "+filepath.Join(dir, "elsewhere.sock")) {
		t.Errorf("chaperone drain with a wrong socket: exit %d, %q; want 1 and no drain socket at ...", code, stderr)
	}
	// Another user cannot start a drain (mode 0600).
	if os.Geteuid() == 0 {
		code, _, stderr := runDrain(t, &syscall.Credential{Uid: 65534, Gid: 65534}, "--socket", drainSocket)
		if code != 1 || !strings.Contains(stderr, "not allowed to connect to the drain socket") {
			t.Errorf("chaperone drain as uid 65534: exit %d, %q; want 1 and not allowed to connect", code, stderr)
		}
	} else {
		t.Log("not root: the check that another user cannot connect is skipped")
	}
	time.Sleep(time.Second) // a drain would turn readiness 503 within the chaperone's first count
	if code, body := c.Health("/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %s after the refused drain attempts, want 200", code, body)
	}
	if code, _, h := c.get(); code != 200 || h.Get("Connection") == "close" {
		t.Fatalf("traffic after the refused drain attempts: %d Connection %q, want 200, keep-alive", code, h.Get("Connection"))
	}

	// The preStop hook.
	conn := c.keepAlive()
	defer conn.Close()
	hook := exec.Command(build.Chaperone, "drain", "--socket", drainSocket)
	hookOut, hookErr := &chaperonetest.SyncBuffer{}, &chaperonetest.SyncBuffer{}
	hook.Stdout, hook.Stderr = hookOut, hookErr
	if err := hook.Start(); err != nil {
		t.Fatal(err)
	}
	hookDone := make(chan error, 1)
	go func() { hookDone <- hook.Wait() }()
	t.Cleanup(func() { hook.Process.Kill() })
	c.WaitFor("readiness 503", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 503 })
	c.WaitFor("ghost told about the drain", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_drain_closing_connections") == 1
	})
	select {
	case err := <-hookDone:
		t.Fatalf("chaperone drain ended (%v) with a client connected: %s %s", err, hookOut, hookErr)
	case <-time.After(3 * time.Second):
	}
	// The keep-alive client's next request gets its answer, and then
	// varnishd closes the connection.
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n")
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("request on the kept connection during the drain: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("during the drain: %d, Connection: close %v; want 200, true", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: read %v, want EOF (varnishd closes the connection)", err)
	}
	select {
	case err := <-hookDone:
		if err != nil || !strings.Contains(hookOut.String(), "chaperone drain: drained in ") {
			t.Errorf("chaperone drain: %v, stdout %q, stderr %q; want exit 0 and drained", err, hookOut, hookErr)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("chaperone drain did not end within 120 s after the client left")
	}
	select {
	case <-c.Exited:
	case <-time.After(90 * time.Second):
		t.Fatal("sidecar chaperone still runs 90 s after the drain")
	}
	if c.ExitErr != nil {
		t.Errorf("sidecar exit: %v, want status 0", c.ExitErr)
	}
	// The chaperone removed its socket: the hook now says so.
	if code, _, stderr := runDrain(t, nil, "--socket", drainSocket); code != 1 || !strings.Contains(stderr, "no drain socket at") {
		t.Errorf("chaperone drain after the chaperone exited: exit %d, %q; want 1 and no drain socket", code, stderr)
	}
}

// TestSidecarSIGTERMThenPreStopHook: in a pod the chaperone container gets
// SIGTERM after its preStop pause while the varnish container's hook asks
// for the drain after the same pause, so either may come first. Here
// SIGTERM wins and the drain (no client) ends at once: the chaperone keeps
// its drain socket until the hook, arriving later, has its answer, then
// exits 0.
func TestSidecarSIGTERMThenPreStopHook(t *testing.T) {
	be := chaperonetest.Backend(t, "S")
	sc := startSidecar(t, be.URL)
	sc.varnishContainer()
	sc.WaitFor("ready", 90*time.Second, func() bool { code, _ := sc.Health("/readyz"); return code == 200 })
	sc.wantTraffic("S", "side")

	sc.Cmd.Process.Signal(syscall.SIGTERM)
	sc.WaitFor("the drain to end", 90*time.Second, func() bool {
		return strings.Contains(sc.Out.String(), "waiting for the varnish container's preStop hook")
	})
	time.Sleep(2 * time.Second) // the hook's exec comes late
	select {
	case <-sc.Exited:
		t.Fatalf("the chaperone exited (%v) before the preStop hook asked for the drain", sc.ExitErr)
	default:
	}
	if code, stdout, stderr := runDrain(t, nil, "--socket", sc.drainSocket); code != 0 || !strings.Contains(stdout, "chaperone drain: drained in ") {
		t.Errorf("the preStop hook after a SIGTERM drain: exit %d, %q %q; want 0, drained", code, stdout, stderr)
	}
	select {
	case <-sc.Exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the chaperone still runs 30 s after the hook had its answer")
	}
	if sc.ExitErr != nil {
		t.Errorf("exit: %v, want status 0", sc.ExitErr)
	}
}

// TestSidecarSIGTERMWithoutPreStopHook: a drained chaperone whose hook never
// comes exits all the same, after drainHookLinger.
func TestSidecarSIGTERMWithoutPreStopHook(t *testing.T) {
	be := chaperonetest.Backend(t, "S")
	sc := startSidecar(t, be.URL)
	sc.varnishContainer()
	sc.WaitFor("ready", 90*time.Second, func() bool { code, _ := sc.Health("/readyz"); return code == 200 })
	sc.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sc.Exited:
	case <-time.After(drainHookLinger + 60*time.Second):
		t.Fatalf("the chaperone still runs %s after SIGTERM without a hook", drainHookLinger+60*time.Second)
	}
	if sc.ExitErr != nil {
		t.Errorf("exit: %v, want status 0", sc.ExitErr)
	}
	if !strings.Contains(sc.Out.String(), "no drain request from the varnish container's preStop hook") {
		t.Errorf("no warning that the hook never came:\n%s", sc.Out.String())
	}
}

// runDrain runs `chaperone drain args...`, as cred's user when not nil.
func runDrain(t *testing.T, cred *syscall.Credential, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(build.Chaperone, append([]string{"drain"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done: //nolint:errcheck // the exit code below is the result
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done //nolint:errcheck // killed: the test fails below
		t.Fatalf("chaperone drain %v still runs after 60 s", args)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// TestSidecarDrainBeforeVarnishdConnects: the hook before varnishd has
// connected finds nothing to drain: it exits 0 at once, and so does the
// chaperone.
func TestSidecarDrainBeforeVarnishdConnects(t *testing.T) {
	dir := varnishdtest.Dir(t)
	secretFile, _, _, err := varnishd.PrepareWorkDir(filepath.Join(dir, "shared"))
	if err != nil {
		t.Fatal(err)
	}
	drainSocket := filepath.Join(dir, "drain.sock")
	cmd := exec.Command(build.Chaperone, "--mode=sidecar", "--secret-file", secretFile,
		"--workdir", filepath.Join(dir, "work"), "--admin-addr", varnishdtest.FreeAddr(t),
		"--health-addr", varnishdtest.FreeAddr(t), "--drain-socket", drainSocket, "--vcl", filepath.Join(dir, "main.vcl"))
	out := &chaperonetest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { varnishdtest.KillTree(cmd.Process.Pid) })
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), "drain socket ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no drain socket:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, stdout, stderr := runDrain(t, nil, "--socket", drainSocket); code != 0 || !strings.Contains(stdout, "drained") {
		t.Errorf("chaperone drain before varnishd connected: exit %d, %q %q; want 0, drained", code, stdout, stderr)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v, want status 0\n%s", err, out.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("still running 90 s after the drain\n%s", out.String())
	}
}

// TestSidecarSIGTERMBeforeVarnishdConnects: nothing to drain, exit 0 at once.
func TestSidecarSIGTERMBeforeVarnishdConnects(t *testing.T) {
	dir := varnishdtest.Dir(t)
	secretFile, _, _, err := varnishd.PrepareWorkDir(filepath.Join(dir, "shared"))
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := varnishdtest.FreeAddr(t)
	cmd := exec.Command(build.Chaperone, "--mode=sidecar", "--secret-file", secretFile,
		"--workdir", filepath.Join(dir, "work"), "--admin-addr", varnishdtest.FreeAddr(t),
		"--health-addr", healthAddr, "--drain-socket", filepath.Join(dir, "drain.sock"), "--vcl", filepath.Join(dir, "main.vcl"))
	out := &chaperonetest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { varnishdtest.KillTree(cmd.Process.Pid) })
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Fatalf("/readyz = %d before varnishd connected, want 503", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health server not up: %v\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v, want status 0\n%s", err, out.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM\n%s", out.String())
	}
}
