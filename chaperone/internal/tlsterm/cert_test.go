package tlsterm

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	now := time.Now()
	good := validCert(t, "a.example.com", "www.a.example.com")
	other := validCert(t, "b.example.com")
	expired := newCert(t, now.Add(-48*time.Hour), now.Add(-time.Hour), "a.example.com")
	future := newCert(t, now.Add(time.Hour), now.Add(48*time.Hour), "a.example.com")
	tests := []struct {
		name      string
		cert, key []byte
		want      string // "" for valid; else a part of the error
	}{
		{"valid", good.Cert, good.Key, ""},
		{"empty certificate", nil, good.Key, "tls.crt is empty"},
		{"empty key", good.Cert, []byte(" \n"), "tls.key is empty"},
		{"certificate not PEM", []byte("hello"), good.Key, "tls.crt is not PEM"},
		{"key not PEM", good.Cert, []byte("hello"), "tls.key is not PEM"},
		{"key of another certificate", good.Cert, other.Key, "do not make a key pair"},
		{"expired", expired.Cert, expired.Key, "expired at"},
		{"not yet valid", future.Cert, future.Key, "is not valid before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Check(tt.cert, tt.key, now)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				// hitch's PEM is a usable key pair.
				if _, err := tls.X509KeyPair(c.PEM, c.PEM); err != nil {
					t.Fatalf("the PEM for hitch is no key pair: %v\n%s", err, c.PEM)
				}
				if !strings.HasPrefix(string(c.PEM), "-----BEGIN PRIVATE KEY-----") {
					t.Errorf("the PEM for hitch does not start with the key:\n%s", c.PEM)
				}
				if len(c.Names) != 2 || c.Names[0] != "a.example.com" {
					t.Errorf("Names = %v", c.Names)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check: error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestHitchConfigRender(t *testing.T) {
	tests := []struct {
		name string
		cfg  HitchConfig
		want []string
		not  []string
	}{
		{"http2, two certificates, as root", HitchConfig{ListenHost: "127.0.0.1", Port: 8443, Backend: "/run/tls/port-8443.sock", PEMFiles: []string{"/run/tls/cert-a.pem", "/run/tls/cert-b.pem"}, HTTP2: true, AsRoot: true, Workers: 2},
			[]string{"workers = 2\n", `frontend = "[127.0.0.1]:8443"`, `backend = "/run/tls/port-8443.sock"`, "write-proxy-v2 = on", "proxy-tlv = on", `alpn-protos = "h2, http/1.1"`, "tls-protos = TLSv1.2 TLSv1.3", "daemon = off", `user = "root"`,
				"pem-file = \"/run/tls/cert-b.pem\"\npem-file = \"/run/tls/cert-a.pem\"\n"},
			nil},
		{"http/1.1 only, every address, no user", HitchConfig{Port: 443, Backend: "/b.sock", PEMFiles: []string{"/c.pem"}},
			[]string{`frontend = "[*]:443"`, `alpn-protos = "http/1.1"`, "write-proxy-v2 = on", "workers = 1\n"},
			[]string{"h2", "user =", "group =", "proxy-proxy"}},
		{"a load balancer's PROXY header passed on", HitchConfig{Port: 443, Backend: "/b.sock", PEMFiles: []string{"/c.pem"}, ProxyProxy: true},
			[]string{"proxy-proxy = on"},
			[]string{"write-proxy-v2", "proxy-tlv"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cfg.Render()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("configuration lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("configuration has %q:\n%s", n, got)
				}
			}
		})
	}
}
