package tlsterm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// echoVCL answers every request itself with what varnishd learnt from
// hitch's PROXY header.
const echoVCL = `vcl 4.1;
import proxy;
backend default none;
sub vcl_recv { return (synth(200)); }
sub vcl_synth {
	set resp.http.X-SNI = proxy.authority();
	set resp.http.X-ALPN = proxy.alpn();
	set resp.http.X-SSL = proxy.is_ssl();
	set resp.http.X-Proto = req.proto;
	set resp.http.X-Socket = local.socket;
	set resp.http.X-Client = client.ip;
	return (deliver);
}
`

func hitchBin(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/hitch", "/usr/bin/hitch"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("hitch is not installed (make setup installs the Debian package hitch)")
	return ""
}

// env is a real varnishd with the TLS socket of one HTTPS port and a
// Manager for it.
type env struct {
	t    testing.TB
	dir  string
	port int
	addr string
	mgr  *Manager
	reg  *prometheus.Registry
	mu   sync.Mutex
	st   []ListenerStatus
}

func newEnv(t testing.TB, http2 bool) *env {
	t.Helper()
	// Unix socket paths are short (108 bytes): not under t.TempDir.
	dir, err := os.MkdirTemp("", "tlsterm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, addr)
	params := []string{"thread_pool_min=5", "thread_pools=1"}
	if http2 {
		params = append(params, "feature=+http2")
	}
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners: []varnishd.Listener{varnishd.TLSListener(dir, port)},
		Params:    params,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Admin.VCLInline(ctx, "echo", echoVCL); err != nil {
		t.Fatal(err)
	}
	if err := p.Admin.VCLUse(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, port: port, addr: addr, reg: prometheus.NewRegistry()}
	e.mgr, err = New(Config{
		Dir: dir, HitchBin: hitchBin(t), ListenHost: "127.0.0.1", HTTP2: http2, Ports: []int{port},
		Logger: varnishdtest.Logger(t), Registry: e.reg,
		OnStatus: func(st []ListenerStatus) { e.mu.Lock(); e.st = st; e.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.mgr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mgr.Stop(10 * time.Second) })
	return e
}

func (e *env) listener(certs ...Certificate) []Listener {
	return []Listener{{Name: "https", Port: e.port, Certificates: certs}}
}

func secret(name string, c testCert) Certificate {
	return Certificate{Ref: SecretRef{Namespace: "edge", Name: name}, Cert: c.Cert, Key: c.Key}
}

// waitFor polls ok for up to 30s.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// served returns the serial of the certificate served for sni, nil when
// the handshake fails.
func (e *env) served(sni string) *x509.Certificate {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return nil
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

func (e *env) waitServed(sni string, want testCert) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("the certificate %s for SNI %q", want.Serial, sni), func() bool {
		c := e.served(sni)
		return c != nil && c.SerialNumber.Cmp(want.Serial) == 0
	})
}

func (e *env) status() []ListenerStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st
}

func client(e *env, sni string, http2 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: sni, InsecureSkipVerify: true},
		ForceAttemptHTTP2: http2,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", e.addr)
		},
	}
	if !http2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func TestSNIAndHTTP2(t *testing.T) {
	e := newEnv(t, true)
	a, b := validCert(t, "a.example.com"), validCert(t, "b.example.com", "*.b.example.com")
	e.mgr.Update(e.listener(secret("a", a), secret("b", b)))
	e.waitServed("a.example.com", a)
	if why := e.mgr.Ready(); why != "" {
		t.Errorf("Ready = %q with a running hitch", why)
	}
	for sni, want := range map[string]testCert{"b.example.com": b, "x.b.example.com": b, "other.example.com": a} {
		if got := e.served(sni); got == nil || got.SerialNumber.Cmp(want.Serial) != 0 {
			t.Errorf("SNI %q: served %v, want the certificate %s", sni, got, want.Serial)
		}
	}
	for _, h2 := range []bool{true, false} {
		resp, err := client(e, "b.example.com", h2).Get("https://b.example.com/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		wantProto, wantALPN := "HTTP/1.1", "http/1.1"
		if h2 {
			wantProto, wantALPN = "HTTP/2.0", "h2"
		}
		h := resp.Header
		if resp.Proto != wantProto || h.Get("X-Proto") != wantProto || h.Get("X-ALPN") != wantALPN {
			t.Errorf("http2=%v: response %s, varnishd saw %s, ALPN %q; want %s", h2, resp.Proto, h.Get("X-Proto"), h.Get("X-ALPN"), wantProto)
		}
		if h.Get("X-SNI") != "b.example.com" || h.Get("X-SSL") != "true" || h.Get("X-Socket") != "port-"+strconv.Itoa(e.port) || h.Get("X-Client") != "127.0.0.1" {
			t.Errorf("varnishd saw SNI %q, ssl %q, socket %q, client %q", h.Get("X-SNI"), h.Get("X-SSL"), h.Get("X-Socket"), h.Get("X-Client"))
		}
	}
	st := e.status()
	if len(st) != 1 || st[0].Status != metav1.ConditionTrue || st[0].Reason != gatewayv1.ListenerReasonResolvedRefs {
		t.Errorf("status = %+v, want ResolvedRefs True", st)
	}
	for _, f := range []string{ConfFile(e.dir, e.port)} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
}

func TestHTTP2Off(t *testing.T) {
	e := newEnv(t, false)
	a := validCert(t, "a.example.com")
	e.mgr.Update(e.listener(secret("a", a)))
	e.waitServed("a.example.com", a)
	resp, err := client(e, "a.example.com", true).Get("https://a.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/1.1" {
		t.Errorf("with HTTP/2 off: %s, want HTTP/1.1", resp.Proto)
	}
}

// TestRotationUnderLoad rotates the certificate several times while clients
// send requests on kept-alive and on new connections: none fails.
//
// When hitch's previous generation of workers closes its listen socket
// (SO_REUSEPORT, one per worker), the connections still in that socket's
// accept queue are reset unless the kernel migrates them to another socket
// of the group: net.ipv4.tcp_migrate_req=1 (Linux 5.14). The test runs
// itself in a new network namespace with it set (root only); without it a
// few new connections per reload are reset (design/chaperone.md).
func TestRotationUnderLoad(t *testing.T) {
	if !inMigratingNetns(t, "TestRotationUnderLoad") {
		return
	}
	e := newEnv(t, true)
	cur := validCert(t, "a.example.com")
	e.mgr.Update(e.listener(secret("a", cur)))
	e.waitServed("a.example.com", cur)

	ctx, cancel := context.WithCancel(context.Background())
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	loop := func(kind string, c func() *http.Client) {
		defer wg.Done()
		for ctx.Err() == nil {
			cl := c()
			resp, err := cl.Get("https://a.example.com/")
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, kind+": "+err.Error())
				t.Logf("%s %s: %v", time.Now().Format("150405.000000"), kind, err)
				continue
			}
			ok.Add(1)
			if strings.HasPrefix(kind, "new") {
				cl.CloseIdleConnections()
			}
		}
	}
	// Keep-alive clients use a connection for 20 requests, as clients
	// and servers end connections in practice: a reload waits for the
	// previous generation of hitch workers to finish its connections.
	keepAlive := func(h2 bool) func() *http.Client {
		c, n := client(e, "a.example.com", h2), 0
		return func() *http.Client {
			if n++; n%20 == 0 {
				c.CloseIdleConnections()
			}
			return c
		}
	}
	wg.Add(4)
	go loop("keep-alive HTTP/1.1", keepAlive(false))
	go loop("keep-alive HTTP/2", keepAlive(true))
	go loop("new HTTP/1.1", func() *http.Client { return client(e, "a.example.com", false) })
	go loop("new HTTP/2", func() *http.Client { return client(e, "a.example.com", true) })
	for range 5 {
		time.Sleep(300 * time.Millisecond)
		cur = validCert(t, "a.example.com")
		e.mgr.Update(e.listener(secret("a", cur)))
		e.waitServed("a.example.com", cur)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	wg.Wait()
	t.Logf("%d requests, %d failed", ok.Load(), failed.Load())
	if failed.Load() > 0 || ok.Load() < 50 {
		t.Errorf("%d requests failed (first: %v), %d succeeded", failed.Load(), firstErr.Load(), ok.Load())
	}
	if n := testutil.ToFloat64(e.mgr.m.reloads.WithLabelValues("ok")); n != 5 {
		t.Errorf("hitch reloads = %v, want 5", n)
	}
	if n := testutil.ToFloat64(e.mgr.m.reloads.WithLabelValues("forced")); n != 0 {
		t.Errorf("forced hitch reloads = %v, want 0", n)
	}
	if pems, _ := os.ReadDir(e.dir); countPrefix(pems, "cert-") != 1 {
		t.Errorf("%d certificate files in the TLS directory, want 1 (the old ones removed)", countPrefix(pems, "cert-"))
	}
}

// netnsEnv marks the run of a test in its own network namespace.
const netnsEnv = "TLSTERM_TEST_NETNS"

// inMigratingNetns reports whether the test runs in a network namespace
// with net.ipv4.tcp_migrate_req=1; if not, it runs the test again in a new
// one (unshare -n) and reports its outcome.
func inMigratingNetns(t *testing.T, name string) bool {
	t.Helper()
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return true
	}
	if os.Getenv(netnsEnv) != "" {
		t.Fatal("net.ipv4.tcp_migrate_req is not 1 in the test's network namespace")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace with net.ipv4.tcp_migrate_req=1")
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c",
		`ip link set lo up && sysctl -q -w net.ipv4.tcp_migrate_req=1 && exec "$0" -test.run "^$1\$" -test.v`, os.Args[0], name)
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a new network namespace with net.ipv4.tcp_migrate_req=1:\n%s", out)
	if err != nil {
		t.Fatalf("%s in its network namespace: %v", name, err)
	}
	return false
}

func countPrefix(ents []os.DirEntry, prefix string) int {
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}

// TestInvalidCertificateKeepsServing: an expired certificate, a key of
// another certificate and a Secret that is not PEM each leave the old
// certificate serving, and are reported and counted; so does a Secret that
// cannot be read for now, while a deleted one withdraws the certificate
// before its condition is reported.
func TestInvalidCertificateKeepsServing(t *testing.T) {
	e := newEnv(t, true)
	good := validCert(t, "a.example.com")
	e.mgr.Update(e.listener(secret("a", good)))
	e.waitServed("a.example.com", good)
	pid := e.mgr.HitchPid(e.port)
	other := validCert(t, "a.example.com")
	expired := newCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "a.example.com")
	bad := []struct {
		want string
		c    testCert
	}{
		{"expired at", expired},
		{"do not make a key pair", testCert{Cert: other.Cert, Key: good.Key}},
		{"tls.crt is not PEM", testCert{Cert: []byte("not a certificate"), Key: good.Key}},
	}
	for i, b := range bad {
		want, c, n := b.want, b.c, i+1
		e.mgr.Update(e.listener(secret("a", c)))
		waitFor(t, "the condition for "+want, func() bool {
			st := e.status()
			return len(st) == 1 && st[0].Status == metav1.ConditionFalse && strings.Contains(st[0].Message, want)
		})
		st := e.status()[0]
		if st.Reason != gatewayv1.ListenerReasonInvalidCertificateRef || !strings.Contains(st.Message, "edge/a") {
			t.Errorf("%s: condition %+v, want InvalidCertificateRef naming the Secret", want, st)
		}
		if got := e.served("a.example.com"); got == nil || got.SerialNumber.Cmp(good.Serial) != 0 {
			t.Errorf("%s: the old certificate is not served", want)
		}
		if v := testutil.ToFloat64(e.mgr.m.rejected); v != float64(n) {
			t.Errorf("%s: rejected = %v, want %d", want, v, n)
		}
	}
	// The expired certificate again is a change, counted once; the same
	// again is not.
	e.mgr.Update(e.listener(secret("a", expired)))
	waitFor(t, "the expired certificate counted again", func() bool { return testutil.ToFloat64(e.mgr.m.rejected) == 4 })
	e.mgr.Update(e.listener(secret("a", expired)))
	time.Sleep(300 * time.Millisecond)
	if v := testutil.ToFloat64(e.mgr.m.rejected); v != 4 {
		t.Errorf("rejected = %v after the expired certificate twice more, want 4 (3 + its one change)", v)
	}
	if e.mgr.HitchPid(e.port) != pid {
		t.Error("hitch was restarted")
	}
	// A Secret the source cannot read for now (its API server down):
	// the last good certificate stays.
	e.mgr.Update(e.listener(Certificate{Ref: SecretRef{"edge", "a"}, Err: fmt.Errorf("cannot list the Secret edge/a"), Problem: ProblemTransient}))
	waitFor(t, "the unreadable Secret's condition", func() bool {
		st := e.status()
		return len(st) == 1 && strings.Contains(st[0].Message, "cannot list")
	})
	if got := e.served("a.example.com"); got == nil || got.SerialNumber.Cmp(good.Serial) != 0 {
		t.Error("the Secret not readable: its last good certificate is not served")
	}
	// A deleted Secret withdraws it: once the condition says so, no
	// handshake completes (the port has no certificate left: its hitch
	// is stopped).
	start := time.Now()
	e.mgr.Update(e.listener(Certificate{Ref: SecretRef{"edge", "a"}, Err: fmt.Errorf("Secret edge/a not found"), Problem: ProblemRevoked}))
	waitFor(t, "the missing Secret's condition", func() bool {
		st := e.status()
		return len(st) == 1 && strings.Contains(st[0].Message, "not found")
	})
	t.Logf("the deleted Secret reported after %s", time.Since(start).Round(time.Millisecond))
	if st := e.status()[0]; !st.Unserved || !strings.Contains(st.Message, "does not serve") {
		t.Errorf("the Secret gone: status %+v, want Unserved, saying the certificate is not served", st)
	}
	if got := e.served("a.example.com"); got != nil {
		t.Errorf("the Secret gone: a handshake presents certificate %v", got.SerialNumber)
	}
	next := validCert(t, "a.example.com")
	e.mgr.Update(e.listener(secret("a", next)))
	e.waitServed("a.example.com", next)
	waitFor(t, "ResolvedRefs True", func() bool { st := e.status(); return len(st) == 1 && st[0].Status == metav1.ConditionTrue })
}

func TestHitchRestartedAndStopped(t *testing.T) {
	e := newEnv(t, true)
	if why := e.mgr.Ready(); !strings.Contains(why, "waiting") {
		t.Errorf("Ready before the listeners were applied = %q", why)
	}
	a := validCert(t, "a.example.com")
	e.mgr.Update(e.listener(secret("a", a)))
	e.waitServed("a.example.com", a)
	pid := e.mgr.HitchPid(e.port)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new hitch", func() bool { p := e.mgr.HitchPid(e.port); return p != 0 && p != pid })
	e.waitServed("a.example.com", a)
	if v := testutil.ToFloat64(e.mgr.m.restarts.WithLabelValues(strconv.Itoa(e.port))); v != 1 {
		t.Errorf("restarts = %v, want 1", v)
	}
	// The listener goes: its hitch stops.
	e.mgr.Update(nil)
	waitFor(t, "hitch stopped", func() bool { return e.mgr.HitchPid(e.port) == 0 && e.served("a.example.com") == nil })
	// Nothing to serve on the port: nothing holds the pod back.
	if why := e.mgr.Ready(); why != "" {
		t.Errorf("Ready without an HTTPS listener = %q, want ready", why)
	}
	if _, err := os.Stat(ConfFile(e.dir, e.port)); !os.IsNotExist(err) {
		t.Errorf("the configuration of the stopped port is still there: %v", err)
	}
}
