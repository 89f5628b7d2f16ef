package varnishd_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishstat"
)

// TestSelectedVarnish: the programs the tests run are the selected Varnish's
// (varnishdtest.EnvVarnish; make test runs this package with this machine's
// and with Debian 13's 7.7).
func TestSelectedVarnish(t *testing.T) {
	want := varnishdtest.VersionString(t)
	for _, bin := range []string{varnishdtest.Bin(t), varnishdtest.StatBin(t)} {
		out, err := exec.Command(bin, "-V").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -V: %v\n%s", bin, err, out)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		if !strings.Contains(first, "("+want) {
			t.Errorf("%s -V = %q, want %q", bin, first, want)
		}
		t.Logf("%s: %s", bin, first)
	}
}

func TestArgs(t *testing.T) {
	cfg := varnishd.Config{
		WorkDir:         "/w",
		Listeners:       []varnishd.Listener{{Name: "port-80", Addr: ":80"}, {Name: "port-8080", Addr: ":8080"}},
		GhostAdminAddr:  "127.0.0.1:6083",
		Storage:         []string{"malloc,1g"},
		Params:          []string{"timeout_idle=10"},
		ThreadPoolStack: "160k",
	}
	got := strings.Join(varnishd.Args(cfg, "127.0.0.1:5000", "/w/s", "/w/boot.vcl"), " ")
	want := "-F -n /w -a port-80=:80 -a port-8080=:8080 -a ghost-admin=127.0.0.1:6083 " +
		"-M 127.0.0.1:5000 -T none -S /w/s -f /w/boot.vcl -s malloc,1g -p thread_pool_stack=160k -p timeout_idle=10"
	if got != want {
		t.Errorf("Args =\n%s\nwant\n%s", got, want)
	}
}

func TestWithDefaults(t *testing.T) {
	defaults := varnishd.DefaultParams()
	mask := defaults[1]
	for _, tc := range []struct {
		name   string
		params []string
		want   []string
	}{
		{name: "none", params: nil, want: defaults},
		{name: "other parameters follow the defaults", params: []string{"timeout_idle=10", "http_max_hdr=128"},
			want: append(slices.Clone(defaults), "timeout_idle=10", "http_max_hdr=128")},
		{name: "the user's thread_pools replaces the default", params: []string{"thread_pools=2"},
			want: []string{mask, "thread_pools=2"}},
		{name: "vsl_mask=default restores varnishd's mask", params: []string{"a=1", "vsl_mask=default"},
			want: []string{"thread_pools=1", "a=1", "vsl_mask=default"}},
		{name: "both replaced", params: []string{"vsl_mask=+Debug", "thread_pools=4"},
			want: []string{"vsl_mask=+Debug", "thread_pools=4"}},
		{name: "a name that only starts like a default", params: []string{"thread_pools_extra=1"},
			want: append(slices.Clone(defaults), "thread_pools_extra=1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := varnishd.WithDefaults(tc.params); !slices.Equal(got, tc.want) {
				t.Errorf("WithDefaults(%q) =\n%q\nwant\n%q", tc.params, got, tc.want)
			}
		})
	}
	if !strings.HasPrefix(defaults[0], "thread_pools=") || !strings.HasPrefix(mask, "vsl_mask=-") {
		t.Fatalf("DefaultParams = %q: the cases above assume thread_pools, then vsl_mask", defaults)
	}
}

// TestDefaultParamsTakeEffect starts the selected varnishd (7.1 and 7.7)
// with the gateway's defaults: it accepts them (every VSL tag name
// exists), and they are in force on top of varnishd's own mask.
func TestDefaultParamsTakeEffect(t *testing.T) {
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners: []varnishd.Listener{{Name: "port-test", Addr: varnishdtest.FreeAddr(t)}},
		Params:    varnishd.WithDefaults(nil),
	})
	ctx := context.Background()
	pools, err := p.Admin.ParamShow(ctx, "thread_pools")
	if err != nil {
		t.Fatal(err)
	}
	if pools.String() != "1" {
		t.Errorf("thread_pools = %s, want 1", pools)
	}
	mask, err := p.Admin.ParamShow(ctx, "vsl_mask")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(mask.String(), ",")
	for _, tag := range []string{"-Debug", "-ObjHeader", "-BereqHeader", "-BerespHeader", "-RespHeader", "-BackendOpen"} {
		if !slices.Contains(got, tag) {
			t.Errorf("vsl_mask = %s: %s missing", mask, tag)
		}
	}
	// What the access log reads stays logged.
	for _, tag := range []string{"ReqHeader", "ReqURL", "RespStatus", "Timestamp", "ReqAcct", "ReqStart", "VCL_call", "VCL_return", "VCL_Log", "Begin", "End", "Link"} {
		if slices.Contains(got, "-"+tag) {
			t.Errorf("vsl_mask = %s masks %s, which the access log reads", mask, tag)
		}
	}
}

func TestChildWatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		starts []uint64
		want   []bool
	}{
		{"first observation is no restart", []uint64{1}, []bool{false}},
		{"steady", []uint64{1, 1, 1}, []bool{false, false, false}},
		{"restart", []uint64{1, 2, 2}, []bool{false, true, false}},
		{"two restarts between polls", []uint64{1, 3}, []bool{false, true}},
		{"counter reset (manager restarted) is no child restart", []uint64{3, 1}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w varnishd.ChildWatch
			var got []bool
			for _, s := range tc.starts {
				got = append(got, w.Observe(s))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Observe(%v) = %v, want %v", tc.starts, got, tc.want)
			}
		})
	}
}

func TestPrepareWorkDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	secretFile, bootFile, secret, err := varnishd.PrepareWorkDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(secretFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode = %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if len(secret) != 65 {
		t.Errorf("secret has %d bytes, want 64 hex digits and a newline", len(secret))
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o755 {
		t.Errorf("work dir mode = %v, want 0755", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(bootFile); string(b) != varnishd.BootVCL {
		t.Errorf("boot VCL = %q", b)
	}
	_, _, secret2, _ := varnishd.PrepareWorkDir(dir)
	if string(secret2) == string(secret) {
		t.Error("a second PrepareWorkDir kept the secret, want a new one")
	}
}

// TestStartServesBootVCLAndRestartsChild starts a real varnishd: the boot VCL
// answers 503 on the named socket, the admin connection works, and a killed
// cache child is restarted by the manager, which MGT.child_start shows.
func TestStartServesBootVCLAndRestartsChild(t *testing.T) {
	addr := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners: []varnishd.Listener{{Name: "port-test", Addr: addr}},
	})
	ctx := context.Background()
	waitFor(t, "child running", func() bool { s, _ := p.Admin.Status(ctx); return s == "running" })

	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "varnishgw: starting") {
		t.Errorf("boot VCL answered %d %q, want 503 varnishgw: starting", resp.StatusCode, body)
	}

	stats := varnishstat.Reader{Bin: varnishdtest.StatBin(t), WorkDir: p.WorkDir()}
	var watch varnishd.ChildWatch
	snap, err := stats.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if watch.Observe(snap.ChildStarts()) || snap.ChildStarts() != 1 {
		t.Fatalf("MGT.child_start = %d at start, want 1", snap.ChildStarts())
	}
	pids, err := p.ChildPids()
	if err != nil || len(pids) != 1 {
		t.Fatalf("cache child pids = %v, %v; want one", pids, err)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the manager to restart the child", func() bool {
		snap, err := stats.Read(ctx)
		return err == nil && watch.Observe(snap.ChildStarts())
	})
	waitFor(t, "child running again", func() bool { s, _ := p.Admin.Status(ctx); return s == "running" })
	if p.Err() != nil {
		t.Fatalf("the manager exited: %v", p.Err())
	}

	// Stop ends the manager and the child.
	p.Stop(15 * time.Second)
	if p.Err() == nil {
		t.Error("after Stop, Err is nil, want why varnishd exited")
	}
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Error("varnishd still answers after Stop")
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPanicIsOneRecordAndStopIsInfo makes the cache child panic for real
// (debug.panic.worker, a CLI command of Varnish 7.1 and 7.7 alike): the
// manager's dump of about 70 lines becomes one ERROR record with the whole
// dump, and the manager's "got SIGTERM" when Stop stops it is INFO.
func TestPanicIsOneRecordAndStopIsInfo(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(io.MultiWriter(&buf, testLog{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners: []varnishd.Listener{{Name: "port-test", Addr: varnishdtest.FreeAddr(t)}},
		Logger:    logger,
	})
	ctx := context.Background()
	waitFor(t, "child running", func() bool { s, _ := p.Admin.Status(ctx); return s == "running" })
	stats := varnishstat.Reader{Bin: varnishdtest.StatBin(t), WorkDir: p.WorkDir()}

	// The CLI command panics the child; its answer is an error.
	if _, err := p.Admin.Do(ctx, "debug.panic.worker"); err == nil {
		t.Log("debug.panic.worker answered without an error")
	}
	waitFor(t, "the child restarted after its panic", func() bool {
		snap, err := stats.Read(ctx)
		return err == nil && snap.Value("MGT.child_panic") == 1 && snap.ChildStarts() == 2
	})
	waitFor(t, "the panic record", func() bool { return strings.Contains(buf.String(), "cache child panic") })
	// The stop waits until the new child is up: a manager that is still
	// starting it handles SIGTERM only after the start, which on a loaded
	// machine took longer than the stop's grace (and varnishd was killed
	// without the record this test looks for).
	waitFor(t, "the restarted child running", func() bool { s, _ := p.Admin.Status(ctx); return s == "running" })

	p.Stop(15 * time.Second)
	<-p.Done()
	time.Sleep(200 * time.Millisecond) // the last lines reach the logger

	var panics []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		msg, _ := rec["msg"].(string)
		dump, _ := rec["panic"].(string)
		switch {
		case dump != "":
			panics = append(panics, rec)
		case strings.Contains(msg, "Backtrace") || strings.Contains(msg, "Assert error") || strings.Contains(msg, "pthread") || strings.HasPrefix(strings.TrimSpace(msg), "0x"):
			t.Errorf("a line of the panic dump logged on its own: %s", line)
		case strings.Contains(msg, "Manager got SIGTERM") && rec["level"] != "INFO":
			t.Errorf("the manager's SIGTERM on a stop the chaperone asked for logged at %v, want INFO: %s", rec["level"], line)
		}
	}
	if len(panics) != 1 {
		t.Fatalf("%d panic records, want 1:\n%s", len(panics), buf.String())
	}
	rec := panics[0]
	dump := rec["panic"].(string)
	if rec["level"] != "ERROR" || !strings.Contains(rec["msg"].(string), "Panic at") || !strings.Contains(rec["msg"].(string), "Assert error in") {
		t.Errorf("panic record = %v %q, want ERROR naming the panic and its assertion", rec["level"], rec["msg"])
	}
	for _, want := range []string{"Panic at:", "Assert error in", "You asked for it", "version = varnish-", "Backtrace:"} {
		if !strings.Contains(dump, want) {
			t.Errorf("the panic dump lacks %q:\n%s", want, dump)
		}
	}
	if n := strings.Count(dump, "\n") + 1; n < 20 {
		t.Errorf("the panic dump has %d lines, want the whole dump (about 70):\n%s", n, dump)
	}
	if !strings.Contains(buf.String(), "Manager got SIGTERM") {
		t.Errorf("no record of the manager's SIGTERM:\n%s", buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// testLog writes to the test log, which -v and failures show.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestManagerConnectsAgain: when the admin connection is closed (the
// chaperone closes it after a command failed mid-answer), the manager
// connects again and AcceptAdmin takes the new connection. Once varnishd has
// exited, AcceptAdmin fails at once.
func TestManagerConnectsAgain(t *testing.T) {
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners: []varnishd.Listener{{Name: "port-test", Addr: varnishdtest.FreeAddr(t)}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p.Admin.Close()
	start := time.Now()
	conn, err := p.AcceptAdmin(ctx)
	if err != nil {
		t.Fatalf("accept the manager's new admin connection: %v", err)
	}
	t.Logf("the manager connected again after %v", time.Since(start).Round(time.Millisecond))
	if s, err := conn.Status(ctx); err != nil || s != "running" {
		t.Fatalf("status on the new connection = %q, %v; want running", s, err)
	}
	p.Stop(15 * time.Second)
	if _, err := p.AcceptAdmin(ctx); !errors.Is(err, net.ErrClosed) {
		t.Errorf("AcceptAdmin after varnishd exited: got %v, want net.ErrClosed", err)
	}
}

// TestNoCLIPort: varnishd runs with -T none. Its manager's only CLI is the
// reverse admin connection to the chaperone (-M): without -T, varnishd
// would listen on a random loopback port, where any process of the pod
// that can read the -S secret gets varnishd's whole CLI. The listening
// sockets of the manager and the cache child are exactly the -a ones, and
// varnishadm -n (which finds -T in the shared memory) finds none.
func TestNoCLIPort(t *testing.T) {
	listen, ghostAdmin := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners:      []varnishd.Listener{{Name: "port-test", Addr: listen}},
		GhostAdminAddr: ghostAdmin,
	})
	want := []int{varnishdtest.Port(t, listen), varnishdtest.Port(t, ghostAdmin)}
	socks := varnishdtest.ListeningTCP(t, append([]int{p.Pid()}, varnishdtest.Descendants(p.Pid())...))
	var ports []int
	for _, s := range socks {
		ports = append(ports, int(s.Port()))
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	slices.Sort(want)
	if !slices.Equal(ports, want) {
		t.Errorf("varnishd listens on %v (ports %v), want only its -a sockets %v: a CLI port (-T)?", socks, ports, want)
	}

	out, err := exec.Command(varnishdtest.AdmBin(t), "-n", p.WorkDir(), "ping").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-T") {
		t.Errorf("varnishadm -n %s ping = %v, %q; want a failure for lack of -T", p.WorkDir(), err, out)
	}
}
