package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// server is a TLS server with an ECDSA P-256 certificate for host that
// offers session tickets (so a client that kept sessions would resume) and
// counts full and resumed handshakes. status is its answer's status.
func server(t *testing.T, host string, status int) (srv *httptest.Server, caFile string, full, resumed *atomic.Int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	full, resumed = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != host {
			http.Error(w, "wrong host "+r.Host, http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("hello\n"))
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.DidResume {
				resumed.Add(1)
			} else {
				full.Add(1)
			}
			return nil
		},
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, caFile, full, resumed
}

func TestRunMakesFullHandshakes(t *testing.T) {
	const host = "bench.example.com"
	srv, ca, full, resumed := server(t, host, http.StatusOK)
	s, err := run(options{addr: srv.Listener.Addr().String(), host: host, path: "/", caFile: ca, curve: "X25519",
		conns: 2, dur: 300 * time.Millisecond, warm: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("run: %v (%v)", err, s)
	}
	if s.ok == 0 || s.errors != 0 || s.resumed != 0 {
		t.Errorf("summary %s (first error %q): want ok > 0, no errors, none resumed", s, s.firstErr)
	}
	if resumed.Load() != 0 {
		t.Errorf("the server saw %d resumed handshakes, want 0", resumed.Load())
	}
	if full.Load() < s.ok {
		t.Errorf("the server saw %d full handshakes, fewer than the %d counted requests", full.Load(), s.ok)
	}
	if line := s.String(); !strings.Contains(line, "version=TLS1.3") || !strings.Contains(line, "curve=X25519") {
		t.Errorf("summary line %q: want version=TLS1.3 and curve=X25519", line)
	}
}

func TestRunCountsErrors(t *testing.T) {
	const host = "bench.example.com"
	srv, ca, _, _ := server(t, host, http.StatusServiceUnavailable)
	s, err := run(options{addr: srv.Listener.Addr().String(), host: host, path: "/", caFile: ca, curve: "P256",
		conns: 1, dur: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no request succeeded") {
		t.Fatalf("run: error %v, want no request succeeded", err)
	}
	if s.errors == 0 || !strings.Contains(s.firstErr, "503") {
		t.Errorf("summary %s, first error %q: want errors with the 503", s, s.firstErr)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	noPEM := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := options{addr: "127.0.0.1:1", host: "h", caFile: noPEM, curve: "X25519", conns: 1, dur: time.Second}
	for _, tc := range []struct {
		name string
		edit func(*options)
		want string
	}{
		{"no address", func(o *options) { o.addr = "" }, "-addr, -host and -ca are required"},
		{"no connections", func(o *options) { o.conns = 0 }, "-c 0: want at least 1"},
		{"no duration", func(o *options) { o.dur = 0 }, "-d 0s: want a positive duration"},
		{"unknown curve", func(o *options) { o.curve = "P384" }, `-curve "P384": want X25519 or P256`},
		{"missing CA file", func(o *options) { o.caFile = filepath.Join(dir, "none.pem") }, "read -ca"},
		{"CA file without PEM", func(o *options) {}, "no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			_, err := run(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
