package mainvcl

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/hitchtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// TestHTTPSThroughHitch is the data path of an HTTPS listener, all real: a
// Gateway with two HTTPS listeners on one port (www.example.com and
// *.example.com) goes through routing.Merge and Resolve into ghost.json;
// hitch terminates TLS with one certificate per listener and hands the
// connections to varnishd's Unix socket with PROXY v2; rendered main.vcl
// and ghost route them. It checks the redirect scheme and port defaults,
// 421 for a Host of the other listener, 404 for an unknown Host,
// X-Forwarded-Proto and X-Forwarded-For at the backend, and HTTP/2 by ALPN.
func TestHTTPSThroughHitch(t *testing.T) {
	type seen struct{ proto, xff, host string }
	var mu sync.Mutex
	var last seen
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echo := websocket.Handler(func(c *websocket.Conn) { io.Copy(c, c) })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = seen{r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-For"), r.Host}
		mu.Unlock()
		if r.Header.Get("Upgrade") != "" {
			echo.ServeHTTP(w, r)
			return
		}
		fmt.Fprintln(w, "hello")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	backendPort := int32(l.Addr().(*net.TCPAddr).Port)

	frontend := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, frontend)
	httpAddr := varnishdtest.FreeAddr(t)
	httpPort := varnishdtest.Port(t, httpAddr)
	ghostJSON := httpsGhostJSON(t, int32(port), int32(httpPort), backendPort)
	if want := fmt.Sprintf(`"sockets": [`+"\n"+`    {"name":"port-%d","tls":true,"listeners":[{"name":"www","hostname":"www.example.com"},{"name":"wild","hostname":"*.example.com"}]}`, port); !strings.Contains(ghostJSON, want) {
		t.Fatalf("ghost.json lacks the TLS socket %s:\n%s", want, ghostJSON)
	}

	h, ca := startTLSGateway(t, tlsGateway{Frontend: frontend, HTTPAddr: httpAddr, GhostJSON: ghostJSON,
		Certificates: [][]string{{"www.example.com"}, {"*.example.com"}}})

	h1, h2c := hitchtest.Client(t, h.Addr, ca.Pool(), false), hitchtest.Client(t, h.Addr, ca.Pool(), true)
	do := func(c *http.Client, sni, host, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "https://"+net.JoinHostPort(sni, strconv.Itoa(port))+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		req.Header.Set("X-Forwarded-Proto", "http") // replaced from the connection
		req.Header.Set("X-Forwarded-For", "198.51.100.1")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s (Host %s): %v\nhitch:\n%s", req.URL, host, err, h.Output())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	hostPort := func(h string) string { return net.JoinHostPort(h, strconv.Itoa(port)) }

	for _, tc := range []struct {
		name      string
		c         *http.Client
		sni, host string // host "": the URL's
		path      string
		status    int
		location  string
		proto     int
		cert      string // the certificate hitch chose by SNI
	}{
		{name: "routed over HTTP/1.1", c: h1, sni: "www.example.com", path: "/", status: 200, proto: 1, cert: "www.example.com"},
		{name: "routed over HTTP/2", c: h2c, sni: "www.example.com", path: "/", status: 200, proto: 2, cert: "www.example.com"},
		{name: "wildcard listener", c: h2c, sni: "a.example.com", path: "/", status: 200, proto: 2, cert: "*.example.com"},
		{name: "other host of the same listener", c: h1, sni: "a.example.com", host: hostPort("b.example.com"), path: "/", status: 200, proto: 1},
		{name: "redirect keeps https and the listener port", c: h1, sni: "www.example.com", path: "/redirect?x=1", status: 302, proto: 1,
			location: fmt.Sprintf("https://www.example.com:%d/redirect?x=1", port)},
		{name: "redirect to http: its well-known port", c: h2c, sni: "www.example.com", path: "/to-http", status: 301, proto: 2,
			location: "http://www.example.com/to-http"},
		{name: "Host of the wildcard listener on www's connection", c: h1, sni: "www.example.com", host: hostPort("a.example.com"), path: "/", status: 421, proto: 1},
		{name: "Host of www on the wildcard's connection", c: h2c, sni: "a.example.com", host: "www.example.com", path: "/", status: 421, proto: 2},
		{name: "unknown Host", c: h1, sni: "www.example.com", host: "unknown.org", path: "/", status: 404, proto: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			last = seen{}
			mu.Unlock()
			resp, body := do(tc.c, tc.sni, tc.host, tc.path)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if resp.ProtoMajor != tc.proto {
				t.Errorf("HTTP/%d, want HTTP/%d", resp.ProtoMajor, tc.proto)
			}
			if got := resp.Header.Get("Location"); got != tc.location {
				t.Errorf("Location %q, want %q", got, tc.location)
			}
			if tc.cert != "" {
				if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != tc.cert {
					t.Errorf("hitch served the certificate for %v, want %s", got, tc.cert)
				}
			}
			mu.Lock()
			got := last
			mu.Unlock()
			if tc.status != 200 {
				if got != (seen{}) {
					t.Errorf("the backend saw a request ghost answered itself: %+v", got)
				}
				return
			}
			// X-Forwarded-For: what the client sent, then client.ip: the
			// PROXY source hitch sent (the client), not the Unix socket's
			want := seen{proto: "https", xff: "198.51.100.1, 127.0.0.1", host: tc.host}
			if want.host == "" {
				want.host = hostPort(tc.sni)
			}
			if got != want {
				t.Errorf("backend saw %+v, want %+v", got, want)
			}
		})
	}

	// A WebSocket over TLS from the client (wss://): hitch terminates TLS
	// (ALPN http/1.1: WebSocket over HTTP/2 is not offered), varnishd
	// pipes the upgrade to the backend in plain TCP.
	t.Run("WebSocket over an HTTPS listener", func(t *testing.T) {
		conn, err := tls.Dial("tcp", h.Addr, &tls.Config{ServerName: "www.example.com", RootCAs: ca.Pool(), NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		cfg, err := websocket.NewConfig("wss://"+hostPort("www.example.com")+"/ws", "https://www.example.com/")
		if err != nil {
			t.Fatal(err)
		}
		ws, err := websocket.NewClient(cfg, conn)
		if err != nil {
			conn.Close()
			t.Fatalf("WebSocket handshake: %v\nhitch:\n%s", err, h.Output())
		}
		defer ws.Close()
		for _, msg := range []string{"one", "two"} {
			if err := websocket.Message.Send(ws, msg); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := websocket.Message.Receive(ws, &got); err != nil || got != msg {
				t.Fatalf("echo %q (%v), want %q", got, err, msg)
			}
		}
		mu.Lock()
		got := last
		mu.Unlock()
		if got.proto != "https" {
			t.Errorf("backend saw X-Forwarded-Proto %q on the upgrade, want https", got.proto)
		}
	})

	// The HTTP listener redirects to the HTTPS listener, whose answer
	// comes through hitch; on the plain socket X-Forwarded-Proto is http.
	t.Run("HTTP listener redirects to HTTPS", func(t *testing.T) {
		plain := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest("GET", "http://"+httpAddr+"/a?b=c", nil)
		req.Host = "www.example.com"
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := fmt.Sprintf("https://www.example.com:%d/a?b=c", port)
		if loc := resp.Header.Get("Location"); resp.StatusCode != 301 || loc != want {
			t.Fatalf("plain request: %d Location %q, want 301 %q", resp.StatusCode, loc, want)
		}
		resp, body := do(h2c, "www.example.com", "", "/a?b=c")
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("following the redirect: HTTP/%d %d %s", resp.ProtoMajor, resp.StatusCode, body)
		}
	})
}

// httpsGhostJSON is ghost.json for a Gateway with HTTPS listeners www
// (www.example.com) and wild (*.example.com) on port, and one route on both
// that sends / to the Service web (127.0.0.1:backendPort) and redirects
// /redirect (no scheme, no port) and /to-http (scheme http, 301); and an
// HTTP listener on httpPort whose route redirects everything to https on
// port (301).
func httpsGhostJSON(t *testing.T, port, httpPort, backendPort int32) string {
	t.Helper()
	host := func(h string) *gatewayv1.Hostname { v := gatewayv1.Hostname(h); return &v }
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "www", Port: port, Protocol: gatewayv1.HTTPSProtocolType, Hostname: host("www.example.com"), TLS: certRef("www")},
			{Name: "wild", Port: port, Protocol: gatewayv1.HTTPSProtocolType, Hostname: host("*.example.com"), TLS: certRef("wild")},
			{Name: "http", Port: httpPort, Protocol: gatewayv1.HTTPProtocolType},
		}},
	}
	if errs := routing.ValidateGateway(gw); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	pathPrefix, svcPort := gatewayv1.PathMatchPathPrefix, gatewayv1.PortNumber(80)
	match := func(p string) []gatewayv1.HTTPRouteMatch {
		return []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &pathPrefix, Value: &p}}}
	}
	redirect := func(scheme string, code int) []gatewayv1.HTTPRouteFilter {
		rr := &gatewayv1.HTTPRequestRedirectFilter{StatusCode: &code}
		if scheme != "" {
			rr.Scheme = &scheme
		}
		return []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: rr}}
	}
	section := func(s string) *gatewayv1.SectionName { v := gatewayv1.SectionName(s); return &v }
	toHTTPS := redirect("https", 301)
	toPort := gatewayv1.PortNumber(port)
	toHTTPS[0].RequestRedirect.Port = &toPort
	upgrade := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "upgrade", CreationTimestamp: metav1.NewTime(time.Unix(0, 0))},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw", SectionName: section("http")}}},
			Rules:           []gatewayv1.HTTPRouteRule{{Matches: match("/"), Filters: toHTTPS}},
		},
	}
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web", CreationTimestamp: metav1.NewTime(time.Unix(0, 0))},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw", SectionName: section("www")}, {Name: "gw", SectionName: section("wild")}}},
			Rules: []gatewayv1.HTTPRouteRule{
				{Matches: match("/"), BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: &svcPort}}}}},
				{Matches: match("/redirect"), Filters: redirect("", 302)},
				{Matches: match("/to-http"), Filters: redirect("http", 301)},
			},
		},
	}
	portName, ready, ws := "", true, routing.WebSocketAppProtocol
	objs := &routing.Objects{
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, AppProtocol: &ws}}}}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "infra", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &backendPort}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}},
	}
	var frags []*routing.Fragment
	for _, r := range []*gatewayv1.HTTPRoute{route, upgrade} {
		f, err := routing.Attach(gw, r, objs)
		if err != nil {
			t.Fatal(err)
		}
		if !f.Accepted() {
			t.Fatalf("route %s not accepted: %+v", r.Name, f)
		}
		frags = append(frags, f)
	}
	tb, err := routing.Merge(gw, frags)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Conflicts) > 0 {
		t.Fatalf("conflicts: %v", tb.Conflicts)
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

// certRef is an HTTPS listener's tls naming the Secret name (hitch gets the
// certificates directly in this test).
func certRef(name string) *gatewayv1.ListenerTLSConfig {
	return &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: gatewayv1.ObjectName(name)}}}
}

// tlsGateway is the data path of a gateway's HTTPS listener for
// startTLSGateway.
type tlsGateway struct {
	Frontend     string     // hitch's address; its port is the listener's
	HTTPAddr     string     // a plain HTTP listener's address too, unless empty
	GhostJSON    string     // the routing
	Certificates [][]string // hitch's certificates, each for these names
	Options      Options    // main.vcl's; VMOD is set to the ghost under test
}

// startTLSGateway runs rendered main.vcl with ghost in a real varnishd
// (one small pool, HTTP/2 on) behind a real hitch on g.Frontend (ALPN h2
// and http/1.1, PROXY v2 to varnishd's Unix socket), with certificates
// from a test CA, which it returns with hitch.
func startTLSGateway(t *testing.T, g tlsGateway) (*hitchtest.Hitch, *hitchtest.CA) {
	t.Helper()
	port := varnishdtest.Port(t, g.Frontend)
	dir := varnishdtest.Dir(t)
	work := filepath.Join(dir, "work")
	tlsDir := filepath.Join(dir, "tls")
	for _, d := range []string{work, tlsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, GhostJSON), []byte(g.GhostJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	listener := varnishd.TLSListener(tlsDir, port)
	listeners := []varnishd.Listener{listener}
	if g.HTTPAddr != "" {
		listeners = append(listeners, varnishd.Listener{Name: ghostjson.SocketName(gatewayv1.PortNumber(varnishdtest.Port(t, g.HTTPAddr))), Addr: g.HTTPAddr})
	}
	p := varnishdtest.Start(t, varnishd.Config{
		WorkDir:        work,
		Listeners:      listeners,
		GhostAdminAddr: varnishdtest.FreeAddr(t),
		Params:         []string{"thread_pool_min=5", "thread_pools=1", "feature=+http2"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := g.Options
	opts.VMOD = varnishdtest.GhostVMOD(t)
	if err := p.Admin.VCLInline(ctx, "main", Render(opts)); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	ca := hitchtest.NewCA(t)
	pems := make([][]byte, len(g.Certificates))
	for i, names := range g.Certificates {
		pems[i] = ca.Issue(t, names...)
	}
	return hitchtest.Start(t, hitchtest.Config{Frontend: g.Frontend, Backend: listener.Addr, PEMs: pems, HTTP2: true}), ca
}
