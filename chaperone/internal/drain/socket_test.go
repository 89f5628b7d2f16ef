package drain_test

import (
	"context"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/drain"
)

// serve serves d's Handler on a drain socket at path, as the chaperone does.
func serve(t *testing.T, d *drain.Drainer, path string) net.Listener {
	t.Helper()
	l, err := drain.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+drain.Path, d.Handler())
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l
}

func TestSocketIsPrivateAndDrains(t *testing.T) {
	dir := t.TempDir()
	// The directory does not protect it: the mode does.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "drain.sock")
	f := &fakeVarnish{}
	f.sessions.Store(1)
	d := &drain.Drainer{LiveSessions: f.live, Stop: f.stop, PollInterval: 10 * time.Millisecond}
	l := serve(t, d, path)

	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("drain socket mode %s, want a socket with mode 0600", fi.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the socket (the private directory is gone)", len(entries))
	}

	answer := make(chan string, 1)
	go func() {
		a, err := drain.Request(context.Background(), path)
		if err != nil {
			a = "error: " + err.Error()
		}
		answer <- a
	}()
	select {
	case a := <-answer:
		t.Fatalf("Request answered %q with a session open", a)
	case <-time.After(200 * time.Millisecond):
	}
	f.sessions.Store(0)
	select {
	case a := <-answer:
		if a != "drained" {
			t.Errorf("Request = %q, want drained", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after the last session closed")
	}
	if n := f.stops.Load(); n != 1 {
		t.Errorf("%d stops, want 1", n)
	}
	// Closing the listener removes the socket.
	l.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket still there after Close: %v", err)
	}
}

func TestListenReplacesOnlyAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "drain.sock")

	// A socket a dead chaperone left behind is replaced.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	l, err := drain.Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	// One that is served is not.
	if _, err := drain.Listen(path); err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Errorf("Listen over a served socket = %v, want an error", err)
	}
	l.Close()

	// Nor is a file that is not a socket.
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := drain.Listen(path); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("Listen over a regular file = %v, want an error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "x" {
		t.Error("Listen changed a regular file")
	}

	for _, bad := range []string{"drain.sock", "/" + strings.Repeat("x", 120)} {
		if _, err := drain.Listen(bad); err == nil {
			t.Errorf("Listen(%q) succeeded, want an error", bad)
		}
	}
}

func TestRequestErrorsSayWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	missing := filepath.Join(dir, "missing.sock")
	if _, err := drain.Request(ctx, missing); err == nil || !strings.Contains(err.Error(), "no drain socket at "+missing) {
		t.Errorf("no socket: %v", err)
	}

	stalePath := filepath.Join(dir, "stale.sock")
	stale, err := net.Listen("unix", stalePath)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := drain.Request(ctx, stalePath); err == nil || !strings.Contains(err.Error(), "nothing serves the drain socket") {
		t.Errorf("stale socket: %v", err)
	}

	// The chaperone goes away while the drain runs: the connection ends
	// without an answer.
	gonePath := filepath.Join(dir, "gone.sock")
	gone, err := drain.Listen(gonePath)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := gone.Accept()
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			c.Close()
		}
	}()
	if _, err := drain.Request(ctx, gonePath); err == nil || !strings.Contains(err.Error(), "without an answer") {
		t.Errorf("connection closed: %v", err)
	}
	gone.Close()

	// A drain that fails is an error with the chaperone's message.
	f := &fakeVarnish{}
	f.sessions.Store(1)
	d := &drain.Drainer{LiveSessions: f.live, Stop: f.stop, PollInterval: 10 * time.Millisecond, Timeout: 50 * time.Millisecond}
	failPath := filepath.Join(dir, "timeout.sock")
	serve(t, d, failPath)
	if _, err := drain.Request(ctx, failPath); err == nil || !strings.Contains(err.Error(), "the drain failed (504): drain timeout: 1 client sessions were still open") {
		t.Errorf("drain timeout: %v", err)
	}

	// Give up after the caller's deadline.
	f2 := &fakeVarnish{}
	f2.sessions.Store(1)
	slowPath := filepath.Join(dir, "slow.sock")
	serve(t, &drain.Drainer{LiveSessions: f2.live, Stop: f2.stop, PollInterval: 10 * time.Millisecond}, slowPath)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := drain.Request(tctx, slowPath); err == nil || !strings.Contains(err.Error(), "no end of the drain") {
		t.Errorf("deadline: %v", err)
	}
}
