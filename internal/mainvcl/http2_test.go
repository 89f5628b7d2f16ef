package mainvcl

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/hitchtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// h2Gateway is an HTTPS listener of startH2Gateway.
type h2Gateway struct {
	addr, port string
	hitch      *hitchtest.Hitch
	ca         *hitchtest.CA
	backend    *rawBackend
}

// startH2Gateway starts a Go backend, varnishd (HTTP/2 on) with rendered
// main.vcl and ghost routing every request of an HTTPS listener without a
// hostname to it, and hitch (ALPN h2, http/1.1) in front.
func startH2Gateway(t *testing.T) *h2Gateway {
	t.Helper()
	be := startRawBackend(t)
	frontend := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, frontend)
	h, ca := startTLSGateway(t, tlsGateway{Frontend: frontend, GhostJSON: h2GhostJSON(t, int32(port), be.port),
		Certificates: [][]string{{"www.example.com", "127.0.0.1"}}})
	_, portStr, _ := net.SplitHostPort(h.Addr)
	return &h2Gateway{addr: h.Addr, port: portStr, hitch: h, ca: ca, backend: be}
}

// h2GhostJSON is ghost.json for a Gateway with one HTTPS listener without
// a hostname on port and a route that sends everything to the Service web
// (127.0.0.1:backendPort).
func h2GhostJSON(t *testing.T, port, backendPort int32) string {
	t.Helper()
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "https", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPSProtocolType, TLS: certRef("https")},
		}},
	}
	if errs := routing.ValidateGateway(gw); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	svcPort := gatewayv1.PortNumber(80)
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web", CreationTimestamp: metav1.NewTime(time.Unix(0, 0))},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: &svcPort}}}}}},
		},
	}
	portName, ready := "", true
	objs := &routing.Objects{
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "infra", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &backendPort}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}},
	}
	f, err := routing.Attach(gw, route, objs)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Accepted() {
		t.Fatalf("route not accepted: %+v", f)
	}
	tb, err := routing.Merge(gw, []*routing.Fragment{f})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := routing.Resolve(tb, objs)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ghostjson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// rawBackend is a Go HTTP/1.1 server that keeps the bytes of every
// connection varnishd opened to it, as they arrived: what reached the
// backend, before net/http parsed (and normalized) it.
type rawBackend struct {
	port int32
	mu   sync.Mutex
	conn []*bytes.Buffer
}

func startRawBackend(t *testing.T) *rawBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{port: int32(l.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			fmt.Fprintln(w, "hello")
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(&recordingListener{Listener: l, b: b})
	t.Cleanup(func() { srv.Close() })
	return b
}

// Received is everything the backend received so far, connection after
// connection.
func (b *rawBackend) Received() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	for _, c := range b.conn {
		s.Write(c.Bytes())
	}
	return s.String()
}

// Reset forgets what was received.
func (b *rawBackend) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conn {
		c.Reset()
	}
}

type recordingListener struct {
	net.Listener
	b *rawBackend
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	l.b.mu.Lock()
	l.b.conn = append(l.b.conn, buf)
	l.b.mu.Unlock()
	return &recordingConn{Conn: c, b: l.b, buf: buf}, nil
}

type recordingConn struct {
	net.Conn
	b   *rawBackend
	buf *bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.b.mu.Lock()
	c.buf.Write(p[:n])
	c.b.mu.Unlock()
	return n, err
}

// h2Answer is what the gateway answered an h2Request: the :status of a
// response, or the code of a RST_STREAM or GOAWAY.
type h2Answer struct {
	status string
	reset  string // "RST_STREAM PROTOCOL_ERROR", "GOAWAY ...", "closed"
}

// h2Request sends one request on a new HTTP/2 connection to the gateway,
// its header block encoded as given (any order, any field: what a client
// that does not follow the rules sends), then body in one DATA frame when
// not nil, and reads until the answer on stream 1.
func h2Request(t *testing.T, gw *h2Gateway, fields [][2]string, body []byte) h2Answer {
	t.Helper()
	conn, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "www.example.com", RootCAs: gw.ca.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: body == nil}); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		if err := fr.WriteData(1, true, body); err != nil {
			t.Fatal(err)
		}
	}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return h2Answer{reset: "closed"}
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.HeadersFrame:
			hf, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hf {
				if h.Name == ":status" {
					return h2Answer{status: h.Value}
				}
			}
		case *http2.RSTStreamFrame:
			return h2Answer{reset: "RST_STREAM " + f.ErrCode.String()}
		case *http2.GoAwayFrame:
			return h2Answer{reset: "GOAWAY " + f.ErrCode.String()}
		}
	}
}

// TestHTTP2ConnectionSpecificHeaders: an HTTP/2 request with a
// connection-specific header field (RFC 9113 8.2.2), which varnishd's
// HTTP/2 parser accepts, gets 400 from main.vcl and never reaches the
// backend over HTTP/1.1; TE: trailers, the one allowed, and the same
// fields over HTTP/1.1 go through. Malformed fields varnishd refuses
// itself (CR LF in a value, a colon in a name) are checked to stay
// refused, and a pseudo-header after a regular field, which varnishd
// accepts, to reach the backend as one plain request.
func TestHTTP2ConnectionSpecificHeaders(t *testing.T) {
	gw := startH2Gateway(t)
	req := func(path string, extra ...[2]string) [][2]string {
		return append([][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", path}, {":authority", "www.example.com"}}, extra...)
	}
	smuggled := []byte("0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
	for _, tc := range []struct {
		name   string
		fields [][2]string
		body   []byte
		want   h2Answer
	}{
		{"Connection", req("/refused", [2]string{"connection", "keep-alive"}), nil, h2Answer{status: "400"}},
		{"Connection naming another field", req("/refused", [2]string{"connection", "x-drop"}, [2]string{"x-drop", "1"}), nil, h2Answer{status: "400"}},
		{"Keep-Alive", req("/refused", [2]string{"keep-alive", "timeout=5"}), nil, h2Answer{status: "400"}},
		{"Proxy-Connection", req("/refused", [2]string{"proxy-connection", "keep-alive"}), nil, h2Answer{status: "400"}},
		{"Upgrade", req("/refused", [2]string{"upgrade", "h2c"}), nil, h2Answer{status: "400"}},
		{"Transfer-Encoding with a smuggled request", req("/refused", [2]string{"transfer-encoding", "chunked"}), smuggled, h2Answer{status: "400"}},
		{"Transfer-Encoding and Content-Length", req("/refused", [2]string{"transfer-encoding", "chunked"}, [2]string{"content-length", "3"}), []byte("abc"), h2Answer{status: "400"}},
		{"TE other than trailers", req("/refused", [2]string{"te", "trailers, deflate"}), nil, h2Answer{status: "400"}},
		{"TE gzip", req("/refused", [2]string{"te", "gzip"}), nil, h2Answer{status: "400"}},
		{"CR LF in a value", req("/refused", [2]string{"x-a", "1\r\nTransfer-Encoding: chunked"}), nil, h2Answer{reset: "RST_STREAM PROTOCOL_ERROR"}},
		{"colon in a name", req("/refused", [2]string{"x-a:b", "1"}), nil, h2Answer{reset: "RST_STREAM PROTOCOL_ERROR"}},
		{"TE trailers", req("/ok", [2]string{"te", "trailers"}), nil, h2Answer{status: "200"}},
		{"pseudo-header after a regular field", [][2]string{{":method", "GET"}, {":scheme", "https"}, {"x-a", "1"}, {":path", "/ok"}, {":authority", "www.example.com"}}, nil, h2Answer{status: "200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw.backend.Reset()
			if got := h2Request(t, gw, tc.fields, tc.body); got != tc.want {
				t.Errorf("answer %+v, want %+v", got, tc.want)
			}
			got := gw.backend.Received()
			if tc.want.status != "200" {
				if got != "" {
					t.Errorf("the backend received:\n%s", got)
				}
				return
			}
			if n := strings.Count(got, " HTTP/1.1\r\n"); n != 1 || !strings.HasPrefix(got, tc.fields[0][1]+" /ok HTTP/1.1\r\n") {
				t.Errorf("the backend received %d requests, want one to /ok:\n%s", n, got)
			}
			for _, f := range []string{"\r\nte:", "\r\nconnection:", "\r\nx-a: 1\r\n:"} {
				if strings.Contains(strings.ToLower(got), f) {
					t.Errorf("the backend received %q:\n%s", f, got)
				}
			}
		})
	}
	// Over HTTP/1.1 the same fields are hop-by-hop, not malformed:
	// keep-alive and a plain chunked body go through.
	t.Run("HTTP/1.1", func(t *testing.T) {
		gw.backend.Reset()
		c := hitchtest.Client(t, gw.addr, gw.ca.Pool(), false)
		r, err := http.NewRequest("POST", "https://www.example.com/ok", strings.NewReader("abc"))
		if err != nil {
			t.Fatal(err)
		}
		r.ContentLength = -1 // chunked
		r.Header.Set("Connection", "keep-alive")
		r.Header.Set("Keep-Alive", "timeout=5")
		r.Header.Set("TE", "gzip")
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 1 {
			t.Fatalf("HTTP/%d %d, want HTTP/1 200", resp.ProtoMajor, resp.StatusCode)
		}
		if got := gw.backend.Received(); !strings.HasPrefix(got, "POST /ok HTTP/1.1\r\n") || !strings.Contains(got, "abc") {
			t.Errorf("the backend received:\n%s", got)
		}
	})
}
