package varnishadm

import (
	"bufio"
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
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"boot", "boot"},
		{"vcl.use", "vcl.use"},
		{"", `""`},
		{"two words", `"two words"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"line\nbreak\ttab", `"line\nbreak\ttab"`},
		{"<<EOF", `"<<EOF"`},
		{`{"x"}`, `"{\"x\"}"`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAuthResponse(t *testing.T) {
	// Known answer, computed independently with
	//   printf 'abcdefghijklmnopqrstuvwxyzabcdef\ns3cr3t\nabcdefghijklmnopqrstuvwxyzabcdef\n' | sha256sum
	got := AuthResponse("abcdefghijklmnopqrstuvwxyzabcdef", []byte("s3cr3t\n"))
	const want = "3cb26bbc71583dab94e3ce5af011354aca731edaf344c6755c0964a1d972b64e"
	if got != want {
		t.Errorf("AuthResponse = %s, want %s", got, want)
	}
}

func TestReadFraming(t *testing.T) {
	for _, tc := range []struct {
		name, wire string
		status     Status
		body       string
		wantErr    bool
	}{
		{"ok", "200 5       \nhello\n", StatusOK, "hello", false},
		{"empty body", "200 0       \n\n", StatusOK, "", false},
		{"body with newlines", "300 7       \na\nb\nc d\n", StatusCant, "a\nb\nc d", false},
		{"bad header", "2x0 5\nhello\n", 0, "", true},
		{"short body", "200 10      \nabc", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conn{r: bufio.NewReader(strings.NewReader(tc.wire))}
			status, body, err := c.read()
			if (err != nil) != tc.wantErr {
				t.Fatalf("read: err = %v, wantErr %v", err, tc.wantErr)
			}
			if status != tc.status || body != tc.body {
				t.Errorf("read = %d %q, want %d %q", status, body, tc.status, tc.body)
			}
		})
	}
}

// startVarnishd starts a real varnishd in the foreground whose manager
// connects back to l (-M) and authenticates with secret (-S).
func startVarnishd(t *testing.T, l net.Listener, secret []byte) {
	t.Helper()
	bin, err := exec.LookPath("varnishd")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/varnishd"); err != nil {
			t.Fatal("varnishd not found: run `make setup`")
		}
	}
	// varnishd drops privileges (to user vcache) for compiling VCL: the
	// directory must be readable by others.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
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
		go func() { cmd.Wait(); close(done) }()
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

func connect(t *testing.T) *Conn {
	t.Helper()
	secret := []byte("a secret for this test only\n")
	l := listen(t)
	startVarnishd(t, l, secret)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Accept(ctx, l, secret)
	if err != nil {
		t.Fatalf("accept varnishd: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestReverseModeCommands(t *testing.T) {
	c := connect(t)
	ctx := context.Background()

	if !strings.Contains(c.Banner(), "varnish-7") {
		t.Errorf("banner %q does not name varnish 7", c.Banner())
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
	var cliErr *Error
	if !errors.As(err, &cliErr) || cliErr.Status != StatusParam || !strings.Contains(cliErr.Body, "nosuchthing") {
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
	if err := c.ParamSet(ctx, "thread_pool_stack", "lots"); !errors.As(err, &cliErr) || cliErr.Status != StatusParam {
		t.Errorf("param.set bad value: got %v, want a status 106 error", err)
	}

	// Unknown commands are errors, not hangs.
	if _, err := c.Do(ctx, "no.such.command"); !errors.As(err, &cliErr) || cliErr.Status != StatusUnknown {
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
	_, err := Accept(ctx, l, []byte("a wrong secret\n"))
	if !errors.Is(err, ErrAuth) {
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

func activeVCL(vcls []VCL) string {
	for _, v := range vcls {
		if v.Active() {
			return v.Name
		}
	}
	return ""
}

func waitStatus(t *testing.T, c *Conn, want string) {
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
