package mainvcl

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd/varnishdtest"
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
