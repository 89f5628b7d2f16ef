package hitchtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// leaf parses the certificate of a pem-file from Issue and checks that its
// key follows it.
func leaf(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, rest := pem.Decode(p)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("pem-file does not start with a certificate:\n%s", p)
	}
	if k, _ := pem.Decode(rest); k == nil || k.Type != "PRIVATE KEY" {
		t.Fatalf("no private key after the certificate:\n%s", p)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIssue(t *testing.T) {
	ca := NewCA(t)
	now := time.Now()
	for _, tc := range []struct {
		name    string
		pem     []byte
		host    string
		wantErr string
	}{
		{"exact", ca.Issue(t, "www.example.com"), "www.example.com", ""},
		{"wildcard", ca.Issue(t, "*.example.com", "example.com"), "a.example.com", ""},
		{"other name", ca.Issue(t, "www.example.com"), "a.example.com", "certificate is valid for www.example.com"},
		{"expired", ca.IssueValid(t, now.Add(-48*time.Hour), now.Add(-time.Hour), "www.example.com"), "www.example.com", "expired"},
		{"another CA", NewCA(t).Issue(t, "www.example.com"), "www.example.com", "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := leaf(t, tc.pem)
			_, err := c.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: ca.Pool()})
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Verify = %v, want an error with %q", err, tc.wantErr)
			}
			// hitch and crypto/tls read the same file
			if _, err := tls.X509KeyPair(tc.pem, tc.pem); err != nil {
				t.Errorf("not a key pair: %v", err)
			}
		})
	}
	if b, _ := pem.Decode(ca.PEM()); b == nil || b.Type != "CERTIFICATE" {
		t.Errorf("CA PEM: %q", ca.PEM())
	}
}

// TestStartReload runs a real hitch in front of a Unix socket that takes
// the PROXY header: certificates are chosen by SNI (the first is the
// default), the PROXY v2 header reaches the backend, and after a new
// configuration and Reload (SIGHUP) the new certificate is served.
func TestStartReload(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "port.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ul.Close() })
	proxied := make(chan []byte, 16)
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 16)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, _ := c.Read(buf)
				proxied <- buf[:n]
			}()
		}
	}()
	// hitch's worker user (as root: vcache) must reach the socket
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	ca := NewCA(t)
	h := Start(t, Config{Backend: sock, PEMs: [][]byte{ca.Issue(t, "www.example.com"), ca.Issue(t, "*.example.com")}, HTTP2: true})
	served := func(sni string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d := &tls.Dialer{Config: &tls.Config{ServerName: sni, RootCAs: ca.Pool(), NextProtos: []string{"h2", "http/1.1"}}}
		c, err := d.DialContext(ctx, "tcp", h.Addr)
		if err != nil {
			t.Fatalf("TLS to hitch with SNI %s: %v\n%s", sni, err, h.Output())
		}
		defer c.Close()
		st := c.(*tls.Conn).ConnectionState()
		return st.PeerCertificates[0].DNSNames[0], st.NegotiatedProtocol
	}
	if name, proto := served("a.example.com"); name != "*.example.com" || proto != "h2" {
		t.Errorf("SNI a.example.com: certificate %s, ALPN %q; want *.example.com, h2", name, proto)
	}
	if name, _ := served("www.example.com"); name != "www.example.com" {
		t.Errorf("SNI www.example.com: certificate %s", name)
	}
	select {
	case got := <-proxied:
		// the PROXY protocol v2 signature
		if !strings.HasPrefix(string(got), "\r\n\r\n\x00\r\nQUIT\n") {
			t.Errorf("backend got %q, want a PROXY v2 header", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hitch never connected to the backend socket")
	}

	// before the reload new.example.org gets the default certificate
	{
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d := &tls.Dialer{Config: &tls.Config{ServerName: "new.example.org", RootCAs: ca.Pool()}}
		c, err := d.DialContext(ctx, "tcp", h.Addr)
		cancel()
		if err == nil {
			c.Close()
			t.Fatal("new.example.org verified before the reload")
		}
	}
	h.WriteConfig(t, [][]byte{ca.Issue(t, "www.example.com", "new.example.org")})
	h.Reload(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d := &tls.Dialer{Config: &tls.Config{ServerName: "new.example.org", RootCAs: ca.Pool()}}
		c, err := d.DialContext(ctx, "tcp", h.Addr)
		cancel()
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Reload hitch still does not serve new.example.org: %v\n%s", err, h.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
