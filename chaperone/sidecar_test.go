package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnishd/varnishdtest"
)

// TestSidecarSteersAnotherVarnishdAndDrainsOnPreStop runs the chaperone in
// sidecar mode beside a varnishd the test starts (as the varnish container
// would): shared work dir and secret, -M to the chaperone. /drain, as the
// varnish container's preStop hook calls it, answers only when the last
// client has gone.
func TestSidecarSteersAnotherVarnishdAndDrainsOnPreStop(t *testing.T) {
	be := backend(t, "S")
	dir := varnishdtest.Dir(t)
	shared := filepath.Join(dir, "shared")
	secretFile, bootFile, _, err := varnishd.PrepareWorkDir(shared)
	if err != nil {
		t.Fatal(err)
	}
	workDir := filepath.Join(dir, "work")
	c := &chaperone{
		t: t, dir: dir,
		listenAddr: varnishdtest.FreeAddr(t),
		healthAddr: varnishdtest.FreeAddr(t),
		ghostAdmin: varnishdtest.FreeAddr(t),
		vclPath:    filepath.Join(dir, "main.vcl"),
		ghostPath:  filepath.Join(dir, "ghost.json"),
		out:        &syncBuffer{},
		exited:     make(chan struct{}),
	}
	adminAddr := varnishdtest.FreeAddr(t)
	writeFile(t, c.ghostPath, ghostJSON(be.URL))
	writeFile(t, c.vclPath, mainVCL(c.ghostPath, "side"))

	c.cmd = exec.Command(chaperoneBin,
		"--mode=sidecar", "--secret-file", secretFile, "--workdir", workDir,
		"--admin-addr", adminAddr, "--ghost-admin-addr", c.ghostAdmin,
		"--health-addr", c.healthAddr, "--vcl", c.vclPath, "--ghost-json", c.ghostPath,
		"--varnishstat", varnishdtest.StatBin(t), "--stats-interval", "500ms")
	c.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exitErr = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		varnishdtest.KillTree(c.cmd.Process.Pid)
		<-c.exited
		if t.Failed() {
			t.Logf("chaperone output:\n%s", c.out.String())
		}
	})

	// The "varnish container".
	varnishContainer := func() *exec.Cmd {
		vd := exec.Command(varnishdtest.Bin(t), "-F", "-n", workDir,
			"-a", "port-"+strconv.Itoa(varnishdtest.Port(t, c.listenAddr))+"="+c.listenAddr,
			"-a", varnishd.GhostAdminSocket+"="+c.ghostAdmin,
			"-M", adminAddr, "-S", secretFile, "-f", bootFile,
			"-s", "malloc,32m", "-p", "thread_pool_min=5", "-p", "thread_pools=1", "-p", "timeout_idle=120")
		vdOut := &syncBuffer{}
		vd.Stdout, vd.Stderr = vdOut, vdOut
		vd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := vd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-vd.Process.Pid, syscall.SIGKILL)
			vd.Wait()
			if t.Failed() {
				t.Logf("varnishd output:\n%s", vdOut.String())
			}
		})
		return vd
	}
	vd := varnishContainer()

	c.waitFor("ready", 90*time.Second, func() bool { code, _ := c.health("/readyz"); return code == 200 })
	c.wantTraffic("S", "side")
	c.waitFor("varnish counters through the shared work dir", 90*time.Second, func() bool {
		return c.metric("varnish_main_client_req_total") >= 1
	})

	// The varnish container restarts: the chaperone takes the new admin
	// connection and loads main.vcl and routing into the new varnishd.
	syscall.Kill(-vd.Process.Pid, syscall.SIGKILL)
	vd.Wait()
	varnishContainer()
	c.waitFor("the chaperone to accept the new varnishd", 90*time.Second, func() bool {
		return strings.Contains(c.out.String(), "varnishd connected again")
	})
	c.wantTraffic("S", "side")

	conn := c.keepAlive()
	drained := make(chan string, 1)
	go func() {
		resp, err := http.Post("http://"+c.healthAddr+"/drain", "", nil)
		if err != nil {
			drained <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		drained <- fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}()
	c.waitFor("readiness 503", 90*time.Second, func() bool { code, _ := c.health("/readyz"); return code == 503 })
	select {
	case got := <-drained:
		t.Fatalf("/drain answered %q with a client connected", got)
	case <-time.After(3 * time.Second):
	}
	conn.Close()
	select {
	case got := <-drained:
		if got != "200 drained" {
			t.Errorf("/drain = %q, want 200 drained", got)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("/drain did not answer within 60 s after the client left")
	}
	select {
	case <-c.exited:
	case <-time.After(90 * time.Second):
		t.Fatal("sidecar chaperone still runs 30 s after the drain")
	}
	if c.exitErr != nil {
		t.Errorf("sidecar exit: %v, want status 0", c.exitErr)
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
	cmd := exec.Command(chaperoneBin, "--mode=sidecar", "--secret-file", secretFile,
		"--workdir", filepath.Join(dir, "work"), "--admin-addr", varnishdtest.FreeAddr(t),
		"--health-addr", healthAddr, "--vcl", filepath.Join(dir, "main.vcl"))
	out := &syncBuffer{}
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
