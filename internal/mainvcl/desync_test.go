package mainvcl

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// seenReq is one request as the backend parsed it.
type seenReq struct {
	Method, URL, Proto, Host string
	Header                   http.Header
	Body                     string
	BodyErr                  error
}

// recordingBackend is the backend of the desync tests: Go's HTTP/1.1
// server (strict framing), recording every request it parses.
type recordingBackend struct {
	mu   sync.Mutex
	reqs []seenReq
	port int32
}

func newRecordingBackend(t *testing.T) *recordingBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &recordingBackend{port: int32(l.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		b.mu.Lock()
		b.reqs = append(b.reqs, seenReq{r.Method, r.RequestURI, r.Proto, r.Host, r.Header.Clone(), string(body), err})
		b.mu.Unlock()
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return b
}

// take returns the requests seen since the last take.
func (b *recordingBackend) take() []seenReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.reqs
	b.reqs = nil
	return r
}

// desyncGateway runs the data path of an HTTPS listener (as
// TestHTTPSThroughHitch: hitch with ALPN h2 and http/1.1, PROXY v2 to
// varnishd's Unix socket, rendered main.vcl, ghost) in front of a
// recording backend. It returns the hitch frontend.
func desyncGateway(t *testing.T) (*recordingBackend, string) {
	t.Helper()
	be := newRecordingBackend(t)
	frontend := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, frontend)
	httpAddr := varnishdtest.FreeAddr(t)
	httpPort := varnishdtest.Port(t, httpAddr)
	ghostJSON := httpsGhostJSON(t, int32(port), int32(httpPort), be.port)
	h, _ := startTLSGateway(t, tlsGateway{Frontend: frontend, HTTPAddr: httpAddr, GhostJSON: ghostJSON,
		Certificates: [][]string{{"www.example.com"}}})
	return be, h.Addr
}

func dialTLS(t *testing.T, addr, alpn string) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "www.example.com", InsecureSkipVerify: true, NextProtos: []string{alpn}}) //nolint:gosec // the test's own CA
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ConnectionState().NegotiatedProtocol; got != alpn {
		t.Fatalf("ALPN %q, want %q", got, alpn)
	}
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// checkSafe fails the test for anything smuggled: a request for
// /smuggled, a header named X-Injected, a header value with CR, LF or
// NUL, more than one request for path, a complete body whose length is
// not its Content-Length.
func checkSafe(t *testing.T, reqs []seenReq, path string) {
	t.Helper()
	n := 0
	for _, r := range reqs {
		if strings.Contains(r.URL, "smuggled") || r.Header.Get("X-Injected") != "" {
			t.Errorf("smuggled through to the backend: %+v", r)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.ContainsAny(k+v, "\r\n\x00") {
					t.Errorf("header %q: %q reached the backend", k, v)
				}
			}
		}
		if cl := r.Header.Get("Content-Length"); r.BodyErr == nil && cl != "" && cl != fmt.Sprint(len(r.Body)) {
			t.Errorf("Content-Length %s, body %d bytes", cl, len(r.Body))
		}
		if strings.HasPrefix(r.URL, path) {
			n++
		}
	}
	if n > 1 {
		t.Errorf("%d requests for %s reached the backend, want at most 1: %+v", n, path, reqs)
	}
}

// h2Field is one raw HPACK header field.
type h2Field struct{ name, value string }

// h2Outcome is what the client got for one stream.
type h2Outcome struct {
	status int           // the response's :status, 0 for none
	reset  http2.ErrCode // RST_STREAM's code, when reset
	goaway bool          // the connection was refused with GOAWAY
}

func (o h2Outcome) refused() bool { return o.status == 0 || o.status >= 400 }

// h2Do opens an HTTP/2 connection through hitch, sends one request with
// exactly the fields given (no validation: what Go's client would
// refuse to send), DATA frames when body is not nil, and reads until the
// stream ends.
func h2Do(t *testing.T, addr string, fields []h2Field, body []string) h2Outcome {
	t.Helper()
	c := dialTLS(t, addr, "h2")
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.AllowIllegalWrites = true
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		if err := enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: body == nil}); err != nil {
		t.Fatal(err)
	}
	for i, d := range body {
		if err := fr.WriteData(1, i == len(body)-1, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	var out h2Outcome
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			_, _ = fmt.Sscan(f.Value, &out.status)
		}
	})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return out // closed
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return out // closed
				}
			}
		case *http2.HeadersFrame:
			if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
			if f.StreamEnded() {
				return out
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return out
			}
		case *http2.RSTStreamFrame:
			out.reset = f.ErrCode
			return out
		case *http2.GoAwayFrame:
			out.goaway = true
			return out
		}
	}
}

// TestDesyncHTTP2Downgrade: HTTP/2 requests through real hitch (ALPN
// h2) into varnishd's HTTP/2, which forwards them as HTTP/1.1. Each is
// malformed (RFC 9113 8.2, 8.3): the gateway must refuse it (stream
// reset, GOAWAY or 4xx; the backend gets nothing) or forward exactly one
// well-framed HTTP/1.1 request with nothing smuggled (checkSafe). The
// cases that say refuse are refused on 7.1 and 7.7.
func TestDesyncHTTP2Downgrade(t *testing.T) {
	be, addr := desyncGateway(t)
	req := func(path string, extra ...h2Field) []h2Field {
		return append([]h2Field{{":method", "POST"}, {":scheme", "https"}, {":authority", "www.example.com"}, {":path", path}}, extra...)
	}
	smuggled := "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: www.example.com\r\n\r\n"
	for _, tc := range []struct {
		name   string
		fields []h2Field
		body   []string
		// refuse: the stream is reset or answered 4xx and no request
		// completes at the backend; else exactly one request is
		// forwarded, which check looks at
		refuse bool
		// aborted: varnishd may have sent the headers before it finds
		// the body wrong (a race, on 7.1 and 7.7), then closes the
		// backend connection mid-body: the backend gets a request whose
		// body is shorter than its Content-Length, which never completes
		aborted bool
		check   func(t *testing.T, r seenReq)
	}{
		{name: "well-formed, for comparison", fields: req("/h2/ok", h2Field{"content-length", "3"}), body: []string{"abc"},
			check: func(t *testing.T, r seenReq) {
				if r.Body != "abc" || r.Proto != "HTTP/1.1" {
					t.Errorf("backend got %s body %q, want HTTP/1.1 abc", r.Proto, r.Body)
				}
			}},
		{name: "content-length larger than DATA", fields: req("/h2/cl-long", h2Field{"content-length", "60"}), body: []string{"abc"}, refuse: true, aborted: true},
		{name: "content-length smaller than DATA", fields: req("/h2/cl-short", h2Field{"content-length", "3"}),
			body: []string{"abc" + smuggled[5:]}, refuse: true, aborted: true},
		{name: "two content-lengths", fields: req("/h2/cl-two", h2Field{"content-length", "3"}, h2Field{"content-length", "50"}), body: []string{"abc"}, refuse: true},
		// connection-specific fields (RFC 9113 8.2.2), which varnishd's
		// HTTP/2 parser accepts: main.vcl answers 400 before routing
		{name: "transfer-encoding chunked", fields: req("/h2/te", h2Field{"transfer-encoding", "chunked"}), body: []string{smuggled}, refuse: true},
		{name: "connection keep-alive", fields: req("/h2/conn", h2Field{"connection", "keep-alive"}), refuse: true},
		{name: "te gzip", fields: req("/h2/te-gzip", h2Field{"te", "gzip"}), refuse: true},
		{name: "te trailers", fields: req("/h2/te-trailers", h2Field{"te", "trailers"}), body: []string{"x"}},
		{name: "upper-case header name", fields: req("/h2/upper", h2Field{"X-Upper", "1"}), refuse: true},
		{name: "CRLF in a header value", fields: req("/h2/crlf-value", h2Field{"x-a", "a\r\nX-Injected: 1"}), refuse: true},
		{name: "LF in a header value", fields: req("/h2/lf-value", h2Field{"x-a", "a\nX-Injected: 1"}), refuse: true},
		{name: "NUL in a header value", fields: req("/h2/nul-value", h2Field{"x-a", "a\x00b"}), refuse: true},
		{name: "CRLF in a header name", fields: req("/h2/crlf-name", h2Field{"x-injected: 1\r\nx-a", "a"}), refuse: true},
		{name: "CRLF in :path", fields: req("/h2/crlf-path HTTP/1.1\r\nHost: www.example.com\r\n\r\nGET /smuggled"), refuse: true},
		{name: "space in :path", fields: req("/h2/space-path HTTP/1.1\r\nX-Injected: 1"), refuse: true},
		{name: "CRLF in :authority", fields: []h2Field{{":method", "GET"}, {":scheme", "https"}, {":authority", "www.example.com\r\nX-Injected: 1"}, {":path", "/h2/crlf-authority"}}, refuse: true},
		{name: "CRLF in :method", fields: []h2Field{{":method", "GET /smuggled HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET"}, {":scheme", "https"}, {":authority", "www.example.com"}, {":path", "/h2/method"}}, refuse: true},
		// malformed (RFC 9113 8.3), but read as if in order: one request
		{name: "pseudo-header after a regular header", fields: []h2Field{{":method", "GET"}, {":scheme", "https"}, {"x-a", "1"}, {":authority", "www.example.com"}, {":path", "/h2/pseudo-late"}},
			check: func(t *testing.T, r seenReq) {
				if r.Method != "GET" || r.Host != "www.example.com" || r.Header.Get("X-A") != "1" {
					t.Errorf("backend got %+v, want GET with Host www.example.com and X-A: 1", r)
				}
			}},
		{name: "unknown pseudo-header", fields: req("/h2/pseudo-unknown", h2Field{":smuggle", "1"}), refuse: true},
		{name: "duplicate :path", fields: append(req("/h2/pseudo-dup"), h2Field{":path", "/smuggled"}), refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be.take()
			out := h2Do(t, addr, tc.fields, tc.body)
			time.Sleep(100 * time.Millisecond) // a forwarded request reaches the backend
			reqs := be.take()
			t.Logf("Varnish %q: status %d, reset %v, goaway %v; the backend got %d", os.Getenv(varnishdtest.EnvVarnish), out.status, out.reset, out.goaway, len(reqs))
			checkSafe(t, reqs, "/h2/")
			if tc.refuse {
				if !out.refused() {
					t.Errorf("not refused: status %d", out.status)
				}
				for _, r := range reqs {
					if !tc.aborted || r.BodyErr == nil {
						t.Errorf("refused, but the backend got %+v", r)
					}
				}
				return
			}
			if out.status != 200 || len(reqs) != 1 {
				t.Fatalf("status %d, backend got %d requests, want 200 and 1", out.status, len(reqs))
			}
			if reqs[0].BodyErr != nil {
				t.Errorf("the backend could not read the body: %v", reqs[0].BodyErr)
			}
			if tc.check != nil {
				tc.check(t, reqs[0])
			}
		})
	}
}

// TestDesyncHTTP1ThroughHitch: a few of a40_desync_framing.vtc's and
// a41_desync_targets.vtc's HTTP/1.1 cases over TLS, through hitch:
// hitch passes the bytes on unchanged, varnishd refuses or re-frames
// them as it does on a plain listener.
func TestDesyncHTTP1ThroughHitch(t *testing.T) {
	be, addr := desyncGateway(t)
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: www.example.com\r\n\r\n"
	for _, tc := range []struct {
		name   string
		raw    string
		status int
		check  func(t *testing.T, r seenReq)
	}{
		{name: "CL.TE", raw: "POST /h1/cl-te HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, status: 400},
		{name: "TE.CL", raw: "POST /h1/te-cl HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n" + smuggled, status: 400},
		{name: "duplicate Content-Length", raw: "POST /h1/cl-dup HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n" + smuggled, status: 400},
		{name: "bare CR", raw: "GET /h1/bare-cr HTTP/1.1\r\nHost: www.example.com\r\nX-A: a\rX-Injected: 1\r\n\r\n" + smuggled, status: 400},
		{name: "Connection naming X-Forwarded-For", raw: "GET /h1/conn-xff HTTP/1.1\r\nHost: www.example.com\r\nX-Forwarded-For: 192.0.2.1\r\nConnection: X-Forwarded-For\r\n\r\n", status: 400},
		{name: "chunked body holding a request", raw: fmt.Sprintf("POST /h1/chunked HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled), status: 200,
			check: func(t *testing.T, r seenReq) {
				if r.Body != smuggled {
					t.Errorf("body %q, want %q", r.Body, smuggled)
				}
			}},
		{name: "Connection naming X-Forwarded-Proto and X-Request-Id", raw: "GET /h1/conn-hop HTTP/1.1\r\nHost: www.example.com\r\nX-Forwarded-Proto: http\r\nX-Request-Id: client-id-2\r\nConnection: X-Forwarded-Proto, X-Request-Id\r\n\r\n", status: 200,
			check: func(t *testing.T, r seenReq) {
				if got := r.Header.Get("X-Forwarded-Proto"); got != "https" {
					t.Errorf("X-Forwarded-Proto %q, want https (hitch's socket)", got)
				}
				if got := r.Header.Get("X-Request-Id"); got != "client-id-2" {
					t.Errorf("X-Request-Id %q, want the client's client-id-2", got)
				}
			}},
		{name: "https absolute form", raw: "GET https://www.example.com/h1/abs HTTP/1.1\r\nHost: other.example.com\r\n\r\n", status: 200,
			check: func(t *testing.T, r seenReq) {
				if r.URL != "/h1/abs" || !strings.HasPrefix(r.Host, "www.example.com") {
					t.Errorf("backend got %s Host %s, want /h1/abs Host www.example.com", r.URL, r.Host)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be.take()
			c := dialTLS(t, addr, "http/1.1")
			if _, err := io.WriteString(c, tc.raw); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			resp.Body.Close()
			time.Sleep(100 * time.Millisecond)
			reqs := be.take()
			checkSafe(t, reqs, "/h1/")
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (backend got %+v)", resp.StatusCode, tc.status, reqs)
			}
			if tc.status >= 400 {
				if len(reqs) != 0 {
					t.Errorf("refused, but the backend got %+v", reqs)
				}
				return
			}
			if len(reqs) != 1 || reqs[0].BodyErr != nil {
				t.Fatalf("backend got %d requests, want 1, complete: %+v", len(reqs), reqs)
			}
			if tc.check != nil {
				tc.check(t, reqs[0])
			}
		})
	}
}
