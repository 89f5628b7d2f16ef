// Package hitchtest runs a real hitch, the TLS terminator of HTTPS
// listeners, in front of a test's varnishd, with certificates the test makes
// with crypto/x509. hitch is configured as the chaperone runs it
// (design/routing.md, "HTTPS listeners"): one frontend port, the backend the
// Unix socket varnishd.TLSListener names, PROXY protocol v2 with TLVs (the
// server name reaches VCL as proxy.authority()), ALPN h2 and http/1.1 when
// HTTP/2 is on, one pem-file per certificate, the first the default.
package hitchtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CA is a certificate authority of one test: clients trust Pool, hitch
// serves certificates from Issue.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

// NewCA makes a CA valid from an hour ago for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "hitchtest CA " + t.Name()},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, key: key, pool: pool}
}

// Pool is the CA as the only root a client trusts.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// PEM is the CA certificate in PEM (curl --cacert).
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Issue returns a hitch pem-file (the leaf certificate for the DNS names,
// then its private key) valid from an hour ago for a day.
func (ca *CA) Issue(t testing.TB, names ...string) []byte {
	t.Helper()
	return ca.IssueValid(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), names...)
}

// IssueValid is Issue with the validity period given (an expired
// certificate for the chaperone's tests, say).
func (ca *CA) IssueValid(t testing.TB, notBefore, notAfter time.Time, names ...string) []byte {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("hitchtest: Issue needs at least one DNS name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})...)
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Config says how to run hitch.
type Config struct {
	// Bin is the hitch executable; "hitch" from PATH, else /usr/sbin/hitch,
	// when empty.
	Bin string
	// Frontend is the host:port hitch listens on; a free loopback port
	// when empty.
	Frontend string
	// Backend is the Unix socket of varnishd's listener
	// (varnishd.TLSListener(dir, port).Addr), which takes PROXY.
	Backend string
	// PEMs are the certificates (CA.Issue), chosen by SNI; the first is
	// the default.
	PEMs [][]byte
	// HTTP2 offers ALPN h2 before http/1.1 (varnishd then needs -p
	// feature=+http2).
	HTTP2 bool
	// ProxyProxy: every connection starts with a PROXY header (a load
	// balancer's, proxy_protocol = true), which hitch passes on to the
	// backend instead of writing its own (proxy-proxy).
	ProxyProxy bool
	// Dir holds the configuration and PEM files; a test directory when
	// empty.
	Dir string
	// User runs hitch's workers when the test runs as root (hitch refuses
	// root workers): "vcache", varnishd's worker user, when empty. The
	// Backend socket is then given to that user, as in a pod, where hitch
	// and varnishd run as one user. Ignored when not root.
	User string
}

// Hitch is a running hitch.
type Hitch struct {
	// Addr is the frontend address, host:port.
	Addr string
	// ConfigPath is the configuration file; rewrite it (WriteConfig) and
	// Reload to change certificates.
	ConfigPath string

	cfg  Config
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// Bin returns the hitch executable, skipping the test when hitch is not
// installed (make setup installs it).
func Bin(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("hitch"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/hitch"); err == nil {
		return "/usr/sbin/hitch"
	}
	t.Skip("hitch is not installed (make setup installs the Debian package hitch)")
	return ""
}

// Start writes the configuration and PEM files, starts hitch in the
// foreground, waits until its frontend accepts TLS connections and stops it
// (its whole process group) when the test ends.
func Start(t testing.TB, cfg Config) *Hitch {
	t.Helper()
	if cfg.Bin == "" {
		cfg.Bin = Bin(t)
	}
	if cfg.Frontend == "" {
		cfg.Frontend = freeAddr(t)
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Backend == "" || len(cfg.PEMs) == 0 {
		t.Fatal("hitchtest: Config needs Backend and at least one PEM")
	}
	if os.Geteuid() == 0 {
		if cfg.User == "" {
			cfg.User = "vcache"
		}
		u, err := user.Lookup(cfg.User)
		if err != nil {
			t.Fatalf("hitchtest: hitch's worker user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(cfg.Backend, uid, gid); err != nil {
			t.Fatalf("hitchtest: give varnishd's socket to %s: %v", cfg.User, err)
		}
	} else {
		cfg.User = ""
	}
	h := &Hitch{Addr: cfg.Frontend, ConfigPath: filepath.Join(cfg.Dir, "hitch.conf"), cfg: cfg, out: &syncBuffer{}, done: make(chan struct{})}
	h.WriteConfig(t, cfg.PEMs)
	h.cmd = exec.Command(cfg.Bin, "--config="+h.ConfigPath)
	h.cmd.Stdout = h.out
	h.cmd.Stderr = h.out
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start hitch: %v", err)
	}
	go func() {
		_ = h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("hitch output:\n%s", h.out.String())
		}
	})
	h.waitReady(t)
	return h
}

// WriteConfig writes hitch.conf and the PEM files pems (a Reload makes
// hitch use them).
func (h *Hitch) WriteConfig(t testing.TB, pems [][]byte) {
	t.Helper()
	host, port, err := net.SplitHostPort(h.cfg.Frontend)
	if err != nil {
		t.Fatalf("hitchtest: frontend %q: %v", h.cfg.Frontend, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "frontend = \"[%s]:%s\"\n", host, port)
	fmt.Fprintf(&b, "backend = %q\n", h.cfg.Backend)
	if h.cfg.ProxyProxy {
		b.WriteString("proxy-proxy = on\n")
	} else {
		b.WriteString("write-proxy-v2 = on\nproxy-tlv = on\n")
	}
	b.WriteString("daemon = off\nworkers = 1\n")
	b.WriteString("tls-protos = TLSv1.2 TLSv1.3\n")
	fmt.Fprintf(&b, "ocsp-dir = %q\n", h.cfg.Dir)
	if h.cfg.User != "" {
		fmt.Fprintf(&b, "user = %q\n", h.cfg.User)
	}
	if h.cfg.HTTP2 {
		b.WriteString("alpn-protos = \"h2, http/1.1\"\n")
	} else {
		b.WriteString("alpn-protos = \"http/1.1\"\n")
	}
	for i, p := range pems {
		// a new name per write: hitch re-reads the files on SIGHUP
		f := filepath.Join(h.cfg.Dir, fmt.Sprintf("cert-%d-%d.pem", time.Now().UnixNano(), i))
		if err := os.WriteFile(f, p, 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "pem-file = %q\n", f)
	}
	if err := os.WriteFile(h.ConfigPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Reload sends SIGHUP: hitch re-reads its configuration and certificates;
// established connections continue.
func (h *Hitch) Reload(t testing.TB) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP hitch: %v", err)
	}
}

// Output is what hitch wrote so far.
func (h *Hitch) Output() string { return h.out.String() }

func (h *Hitch) stop() {
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		<-h.done
	}
}

// waitReady waits until a TLS handshake on the frontend succeeds (the
// certificate is not checked: only that hitch answers).
func (h *Hitch) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-h.done:
			t.Fatalf("hitch exited at start: %v\n%s", h.cmd.ProcessState, h.out.String())
		default:
		}
		if err := h.probe(); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("hitch does not answer TLS on %s: %v\n%s", h.Addr, err, h.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// probe makes one TLS handshake on the frontend, after a PROXY v1 header
// with ProxyProxy.
func (h *Hitch) probe() error {
	c, err := net.DialTimeout("tcp", h.Addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if h.cfg.ProxyProxy {
		if _, err := c.Write([]byte("PROXY TCP4 127.0.0.1 127.0.0.1 1 2\r\n")); err != nil {
			return err
		}
	}
	return tls.Client(c, &tls.Config{InsecureSkipVerify: true}).Handshake() //nolint:gosec // readiness probe only
}

// Client is an HTTPS client that connects to addr (a hitch frontend, this
// package's or the chaperone's) whatever the URL's host, so that the URL's
// host is the TLS server name (SNI) and the name the certificate is
// checked against, with roots as the only trusted CAs. With http2 it
// offers ALPN h2 and http/1.1, else http/1.1 only. It follows no
// redirects: the test sees them.
func Client(t testing.TB, addr string, roots *x509.CertPool, http2 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	if http2 {
		tr.TLSClientConfig.NextProtos = nil
		tr.ForceAttemptHTTP2 = true
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// freeAddr is a free loopback address below the ephemeral port range (see
// varnishdtest.FreeAddr).
func freeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		n, err := rand.Int(rand.Reader, big.NewInt(12000))
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+n.Int64())
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port between 20000 and 32000")
	return ""
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
