package mainvcl

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/hitchtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// proxyV1 is a PROXY v1 header claiming the client src (IPv4).
func proxyV1(src string) []byte {
	return fmt.Appendf(nil, "PROXY TCP4 %s 127.0.0.1 40000 80\r\n", src)
}

// proxyV2 is a PROXY v2 header (PROXY command, TCP over IPv4) claiming the
// client src; with ssl it carries a PP2_TYPE_SSL TLV saying the client
// spoke TLS (PP2_CLIENT_SSL, verified), which proxy.is_ssl() reports.
func proxyV2(src string, ssl bool) []byte {
	body := append(netip.MustParseAddr(src).AsSlice(), 127, 0, 0, 1)
	body = binary.BigEndian.AppendUint16(body, 40000)
	body = binary.BigEndian.AppendUint16(body, 80)
	if ssl {
		version := []byte("TLSv1.3")
		sub := append([]byte{0x21}, binary.BigEndian.AppendUint16(nil, uint16(len(version)))...) // PP2_SUBTYPE_SSL_VERSION
		sub = append(sub, version...)
		tlv := append([]byte{0x01}, 0, 0, 0, 0) // client: PP2_CLIENT_SSL; verify: 0 (verified)
		tlv = append(tlv, sub...)
		body = append(body, 0x20) // PP2_TYPE_SSL
		body = binary.BigEndian.AppendUint16(body, uint16(len(tlv)))
		body = append(body, tlv...)
	}
	h := []byte("\r\n\r\n\x00\r\nQUIT\n")
	h = append(h, 0x21, 0x11) // v2 PROXY; AF_INET, STREAM
	h = binary.BigEndian.AppendUint16(h, uint16(len(body)))
	return append(h, body...)
}

// proxyBackend records what the backend of the PROXY tests saw.
type proxyBackend struct {
	mu          sync.Mutex
	n           int
	proto, xff  string
	backendPort int
}

func startProxyBackend(t *testing.T) *proxyBackend {
	t.Helper()
	b := &proxyBackend{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.n++
		b.proto, b.xff = r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-For")
		b.mu.Unlock()
		fmt.Fprintln(w, "hello")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	b.backendPort = l.Addr().(*net.TCPAddr).Port
	return b
}

// seen returns what the backend saw since the last call, and resets it.
func (b *proxyBackend) seen() (n int, proto, xff string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, proto, xff = b.n, b.proto, b.xff
	b.n, b.proto, b.xff = 0, "", ""
	return n, proto, xff
}

// startProxyVarnishd starts varnishd with one plain TCP listener that
// takes the PROXY protocol, as a gateway with proxy_protocol = true has
// for an HTTP listener, and loads main.vcl rendered from opts. It returns
// the listener's and ghost's admin socket's addresses.
func startProxyVarnishd(t *testing.T, b *proxyBackend, opts Options) (listen, admin string) {
	t.Helper()
	work := filepath.Join(varnishdtest.Dir(t), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{"version":2,"backends":[{"name":"r","endpoints":[{"address":"127.0.0.1","port":%d}]}],"vhosts":[{"hostname":"proxy.test","routes":[{"name":"r","match":{"path":{"type":"PathPrefix","value":"/"}},"backends":[{"backend":"r"}]}]}]}`, b.backendPort)
	if err := os.WriteFile(filepath.Join(work, GhostJSON), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	listen, admin = varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		WorkDir:        work,
		Listeners:      []varnishd.Listener{{Name: "port-" + strconv.Itoa(varnishdtest.Port(t, listen)), Addr: listen, Proxy: true}},
		GhostAdminAddr: admin,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.VMOD = varnishdtest.GhostVMOD(t)
	if err := p.Admin.VCLInline(ctx, "main", Render(opts)); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	return listen, admin
}

// proxyGet connects to addr from the local address from (a loopback
// address: Linux accepts all of 127.0.0.0/8), writes header then a GET of
// proxy.test whose client claims https in X-Forwarded-Proto, and returns
// the response and whether varnishd closed the connection after it.
func proxyGet(t *testing.T, addr, from string, header []byte) (resp *http.Response, closed bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req := append(append([]byte(nil), header...), "GET / HTTP/1.1\r\nHost: proxy.test\r\nX-Forwarded-Proto: https\r\n\r\n"...)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read the response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// A keep-alive connection stays open: the read times out.
	if err := c.SetReadDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err = br.ReadByte()
	return resp, err == io.EOF
}

// TestProxyProtocolScheme runs rendered main.vcl in a real varnishd with
// ghost on a plain listener that takes the PROXY protocol: the backend
// sees the client address the header claims in X-Forwarded-For, and
// X-Forwarded-Proto http whatever the client sent, even when a PROXY v2
// header carries an SSL TLV: anyone who reaches a plain listener could
// send one.
func TestProxyProtocolScheme(t *testing.T) {
	b := startProxyBackend(t)
	listen, _ := startProxyVarnishd(t, b, Options{})
	for _, tc := range []struct {
		name   string
		header []byte
		xff    string
	}{
		{name: "PROXY v1", header: proxyV1("203.0.113.7"), xff: "203.0.113.7"},
		{name: "PROXY v2", header: proxyV2("203.0.113.8", false), xff: "203.0.113.8"},
		{name: "PROXY v2 with an SSL TLV", header: proxyV2("203.0.113.9", true), xff: "203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := proxyGet(t, listen, "127.0.0.1", tc.header)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			n, proto, xff := b.seen()
			if n != 1 || proto != "http" || xff != tc.xff {
				t.Errorf("backend saw %d requests, X-Forwarded-Proto %q, X-Forwarded-For %q; want 1, http, %q", n, proto, xff, tc.xff)
			}
		})
	}
}

// TestProxyProtocolSources: with ProxySources, a TCP listener that takes
// PROXY honours the header only from a listed peer (remote.ip, the TCP
// peer): the backend sees the claimed client in X-Forwarded-For. Any other
// peer gets 403 and a closed connection, and the backend sees nothing.
// ghost's admin socket (loopback, no PROXY) is not checked: the
// chaperone's reload still works.
func TestProxyProtocolSources(t *testing.T) {
	b := startProxyBackend(t)
	listen, admin := startProxyVarnishd(t, b, Options{ProxySources: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("2001:db8::/32"),
	}})
	for _, tc := range []struct {
		name, from string
		header     []byte
		status     int
		xff        string
	}{
		{name: "PROXY v1 from an allowed source", from: "127.0.0.2", header: proxyV1("203.0.113.7"), status: 200, xff: "203.0.113.7"},
		{name: "PROXY v2 from an allowed source", from: "127.0.0.2", header: proxyV2("203.0.113.8", false), status: 200, xff: "203.0.113.8"},
		{name: "PROXY v2 with an SSL TLV from an allowed source", from: "127.0.0.2", header: proxyV2("203.0.113.9", true), status: 200, xff: "203.0.113.9"},
		{name: "PROXY v1 from another source", from: "127.0.0.1", header: proxyV1("127.0.0.2"), status: 403},
		{name: "PROXY v2 from another source", from: "127.0.0.1", header: proxyV2("127.0.0.2", true), status: 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, closed := proxyGet(t, listen, tc.from, tc.header)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			n, proto, xff := b.seen()
			if tc.status != 200 {
				if !closed {
					t.Error("the connection stays open after the refusal")
				}
				if n != 0 {
					t.Errorf("the backend saw %d refused requests", n)
				}
				return
			}
			if closed {
				t.Error("varnishd closed an allowed source's connection")
			}
			if n != 1 || proto != "http" || xff != tc.xff {
				t.Errorf("backend saw %d requests, X-Forwarded-Proto %q, X-Forwarded-For %q; want 1, http, %q", n, proto, xff, tc.xff)
			}
		})
	}
	t.Run("ghost's admin socket", func(t *testing.T) {
		resp, err := http.Post("http://"+admin+"/.varnish-ghost/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("reload on ghost's admin socket: %d %s", resp.StatusCode, body)
		}
	})
}

// TestRenderProxySources: the ACL main.vcl gets, masked, and read back by
// ProxySourcesOf (the provider's import); none renders nothing.
func TestRenderProxySources(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources []string
		acl     string // "" : none
		back    []string
	}{
		{name: "none"},
		{name: "IPv4 and IPv6", sources: []string{"10.0.0.0/8", "2001:db8::/32"},
			acl: "acl proxy_sources {\n\t\"10.0.0.0\"/8;\n\t\"2001:db8::\"/32;\n}", back: []string{"10.0.0.0/8", "2001:db8::/32"}},
		{name: "host bits masked", sources: []string{"192.0.2.77/24"},
			acl: "acl proxy_sources {\n\t\"192.0.2.0\"/24;\n}", back: []string{"192.0.2.0/24"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []netip.Prefix
			for _, s := range tc.sources {
				ps = append(ps, netip.MustParsePrefix(s))
			}
			vcl := Render(Options{ProxySources: ps})
			if tc.acl == "" {
				if strings.Contains(vcl, "acl ") || strings.Contains(vcl, "remote.ip") {
					t.Fatalf("main.vcl without sources checks them:\n%s", vcl)
				}
			} else if !strings.Contains(vcl, tc.acl) {
				t.Fatalf("main.vcl lacks\n%s\nin\n%s", tc.acl, vcl)
			}
			var back []string
			for _, p := range ProxySourcesOf(vcl) {
				back = append(back, p.String())
			}
			if !slices.Equal(back, tc.back) {
				t.Errorf("ProxySourcesOf: %v, want %v", back, tc.back)
			}
		})
	}
}

// TestProxyProtocolThroughHitch is an HTTPS listener with proxy_protocol:
// hitch (real, proxy-proxy) takes the load balancer's PROXY header and
// passes it on to varnishd's Unix socket. The ACL is not applied there
// (the peer is hitch; hitch itself cannot restrict who sends it PROXY, the
// NetworkPolicy does): a client from 127.0.0.1, outside ProxySources, is
// served, with X-Forwarded-Proto https (the socket is hitch's, whatever
// the header says) and the claimed client in X-Forwarded-For.
func TestProxyProtocolThroughHitch(t *testing.T) {
	b := startProxyBackend(t)
	dir := varnishdtest.Dir(t)
	work, tlsDir := filepath.Join(dir, "work"), filepath.Join(dir, "tls")
	for _, d := range []string{work, tlsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	doc := fmt.Sprintf(`{"version":2,"backends":[{"name":"r","endpoints":[{"address":"127.0.0.1","port":%d}]}],"vhosts":[{"hostname":"proxy.test","routes":[{"name":"r","match":{"path":{"type":"PathPrefix","value":"/"}},"backends":[{"backend":"r"}]}]}]}`, b.backendPort)
	if err := os.WriteFile(filepath.Join(work, GhostJSON), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	frontend := varnishdtest.FreeAddr(t)
	listener := varnishd.TLSListener(tlsDir, varnishdtest.Port(t, frontend))
	p := varnishdtest.Start(t, varnishd.Config{WorkDir: work, Listeners: []varnishd.Listener{listener}, GhostAdminAddr: varnishdtest.FreeAddr(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vcl := Render(Options{VMOD: varnishdtest.GhostVMOD(t), ProxySources: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	if err := p.Admin.VCLInline(ctx, "main", vcl); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	ca := hitchtest.NewCA(t)
	h := hitchtest.Start(t, hitchtest.Config{Frontend: frontend, Backend: listener.Addr, PEMs: [][]byte{ca.Issue(t, "proxy.test")}, ProxyProxy: true})

	for _, tc := range []struct {
		name   string
		header []byte
		xff    string
	}{
		{name: "PROXY v1", header: proxyV1("203.0.113.7"), xff: "203.0.113.7"},
		{name: "PROXY v2", header: proxyV2("203.0.113.8", false), xff: "203.0.113.8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", h.Addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(tc.header); err != nil {
				t.Fatal(err)
			}
			tc2 := tls.Client(c, &tls.Config{ServerName: "proxy.test", RootCAs: ca.Pool(), NextProtos: []string{"http/1.1"}})
			if _, err := io.WriteString(tc2, "GET / HTTP/1.1\r\nHost: proxy.test\r\nX-Forwarded-Proto: http\r\nConnection: close\r\n\r\n"); err != nil {
				t.Fatalf("TLS through hitch: %v\nhitch:\n%s", err, h.Output())
			}
			resp, err := http.ReadResponse(bufio.NewReader(tc2), nil)
			if err != nil {
				t.Fatalf("read the response: %v\nhitch:\n%s", err, h.Output())
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			n, proto, xff := b.seen()
			if n != 1 || proto != "https" || xff != tc.xff {
				t.Errorf("backend saw %d requests, X-Forwarded-Proto %q, X-Forwarded-For %q; want 1, https, %q", n, proto, xff, tc.xff)
			}
		})
	}
}
