package varnishadm_test

// Tests against a real varnishd: the one varnishdtest selects (this machine's,
// or Debian 13's 7.7 when VARNISHGW_TEST_VARNISH=7.7; make test runs both).

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishadm"
)

// startVarnishd starts a real varnishd in the foreground whose manager
// connects back to l (-M) and authenticates with secret (-S).
func startVarnishd(t *testing.T, l net.Listener, secret []byte) {
	t.Helper()
	bin := varnishdtest.Bin(t)
	// varnishd drops privileges (to user vcache) for compiling VCL: the
	// directory must be readable by others.
	dir := varnishdtest.Dir(t)
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	vcl := filepath.Join(dir, "boot.vcl")
	if err := os.WriteFile(vcl, []byte("vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"9\"; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-F", "-n", filepath.Join(dir, "work"),
		"-a", "127.0.0.1:0", "-M", l.Addr().String(), "-S", secretFile, "-f", vcl,
		"-p", "thread_pool_min=5", "-p", "thread_pools=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start varnishd: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }() // stopped: its exit status is not the result
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("varnishd output:\n%s", out.String())
		}
	})
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func connect(t *testing.T) *varnishadm.Conn {
	t.Helper()
	secret := []byte("a secret for this test only\n")
	l := listen(t)
	startVarnishd(t, l, secret)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := varnishadm.Accept(ctx, l, secret)
	if err != nil {
		t.Fatalf("accept varnishd: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestReverseModeCommands(t *testing.T) {
	c := connect(t)
	ctx := context.Background()

	if want := varnishdtest.VersionString(t); !strings.Contains(c.Banner(), want) {
		t.Errorf("banner %q does not contain %q", c.Banner(), want)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	waitStatus(t, c, "running")

	// A good VCL loads and becomes active; the answer lists it.
	good := "vcl 4.1;\nbackend be { .host = \"127.0.0.1\"; .port = \"8080\"; }\n" +
		"sub vcl_recv { return (synth(200, {\"quoted \"text\" \\ with backslash\"})); }\n"
	if err := c.VCLInline(ctx, "v1", good); err != nil {
		t.Fatalf("vcl.inline good VCL: %v", err)
	}
	if err := c.VCLUse(ctx, "v1"); err != nil {
		t.Fatalf("vcl.use v1: %v", err)
	}
	vcls, err := c.VCLList(ctx)
	if err != nil {
		t.Fatalf("vcl.list: %v", err)
	}
	if active := activeVCL(vcls); active != "v1" {
		t.Errorf("active VCL = %q, want v1 (list %+v)", active, vcls)
	}

	// A VCL that does not compile is an *Error with the compiler's message,
	// and the active VCL stays.
	err = c.VCLInline(ctx, "v2", "vcl 4.1;\nsub vcl_recv { nosuchthing; }\n")
	var cliErr *varnishadm.Error
	if !errors.As(err, &cliErr) || cliErr.Status != varnishadm.StatusParam || !strings.Contains(cliErr.Body, "nosuchthing") {
		t.Fatalf("vcl.inline bad VCL: got %v, want a status 106 error naming the symbol", err)
	}
	if vcls, _ := c.VCLList(ctx); activeVCL(vcls) != "v1" {
		t.Errorf("after a failed load the active VCL is %q, want v1", activeVCL(vcls))
	}

	// Backends of the loaded VCLs are listed with their VCL prefix.
	backends, err := c.BackendList(ctx)
	if err != nil {
		t.Fatalf("backend.list: %v", err)
	}
	var names []string
	for _, b := range backends {
		names = append(names, b.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "v1.be") {
		t.Errorf("backend.list = %v, want v1.be among them", names)
	}

	// Discarding the boot VCL works once v1 is active.
	if err := c.VCLDiscard(ctx, "boot"); err != nil {
		t.Errorf("vcl.discard boot: %v", err)
	}

	// Parameters round trip; a bad value is an error naming the parameter.
	if err := c.ParamSet(ctx, "thread_pool_stack", "96k"); err != nil {
		t.Fatalf("param.set: %v", err)
	}
	p, err := c.ParamShow(ctx, "thread_pool_stack")
	if err != nil {
		t.Fatalf("param.show: %v", err)
	}
	if p.String() != "98304" || p.Units != "bytes" {
		t.Errorf("thread_pool_stack = %s %s, want 98304 bytes", p.String(), p.Units)
	}
	if err := c.ParamSet(ctx, "thread_pool_stack", "lots"); !errors.As(err, &cliErr) || cliErr.Status != varnishadm.StatusParam {
		t.Errorf("param.set bad value: got %v, want a status 106 error", err)
	}

	// Unknown commands are errors, not hangs.
	if _, err := c.Do(ctx, "no.such.command"); !errors.As(err, &cliErr) || cliErr.Status != varnishadm.StatusUnknown {
		t.Errorf("unknown command: got %v, want status 101", err)
	}

	// stop and start the cache child.
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	waitStatus(t, c, "stopped")
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	waitStatus(t, c, "running")
}

func TestWrongSecretFailsClearly(t *testing.T) {
	l := listen(t)
	startVarnishd(t, l, []byte("the real secret\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := varnishadm.Accept(ctx, l, []byte("a wrong secret\n"))
	if !errors.Is(err, varnishadm.ErrAuth) {
		t.Fatalf("accept with a wrong secret: got %v, want ErrAuth", err)
	}
	if !strings.Contains(err.Error(), "-S file") {
		t.Errorf("error %q does not say what to check", err)
	}
}

func TestCommandHonoursContext(t *testing.T) {
	c := connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ping with a cancelled context: got %v, want context.Canceled", err)
	}
}

func activeVCL(vcls []varnishadm.VCL) string {
	for _, v := range vcls {
		if v.Active() {
			return v.Name
		}
	}
	return ""
}

func waitStatus(t *testing.T, c *varnishadm.Conn, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got string
	var err error
	for time.Now().Before(deadline) {
		if got, err = c.Status(context.Background()); err == nil && got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("status = %q (%v), want %q", got, err, want)
}
