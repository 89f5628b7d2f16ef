package mainvcl

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// TestRenderTimeouts replays the requests of the Gateway API conformance
// scenarios HTTPRouteTimeoutRequest and HTTPRouteTimeoutBackendRequest
// (v1.6.3: timeouts of 500ms, "0s" disables, the echo backend's ?delay=)
// through the rendered main.vcl, a real varnishd and ghost: a timeout that
// runs out answers 504, other fetch failures (a backend that closes
// without answering, a refused connection) stay 503.
func TestRenderTimeouts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/closes" {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintln(w, "echo")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedPort := refused.Addr().(*net.TCPAddr).Port
	refused.Close()

	route := func(name, prefix, backend, timeouts string) string {
		return fmt.Sprintf(`{"name":%q,"match":{"path":{"type":"PathPrefix","value":%q}},"timeouts":%s,"backends":[{"backend":%q}]}`, name, prefix, timeouts, backend)
	}
	doc := fmt.Sprintf(`{"version":2,"backends":[{"name":"echo","endpoints":[{"address":"127.0.0.1","port":%d}]},{"name":"refused","endpoints":[{"address":"127.0.0.1","port":%d}]}],"vhosts":[{"hostname":"timeout.test","routes":[%s,%s,%s,%s,%s,%s]}]}`,
		port, refusedPort,
		route("backend-timeout", "/backend-timeout", "echo", `{"backendRequestMs":500}`),
		route("disable-backend-timeout", "/disable-backend-timeout", "echo", `{"backendRequestMs":0}`),
		route("request-timeout", "/request-timeout", "echo", `{"requestMs":500}`),
		route("disable-request-timeout", "/disable-request-timeout", "echo", `{"requestMs":0}`),
		route("closes", "/closes", "echo", `{"backendRequestMs":500}`),
		route("refused", "/refused", "refused", `{"backendRequestMs":500}`))

	work := filepath.Join(varnishdtest.Dir(t), "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, GhostJSON), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	vmod := varnishdtest.GhostVMOD(t)
	listen := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		WorkDir:        work,
		Listeners:      []varnishd.Listener{{Name: "port-" + strconv.Itoa(varnishdtest.Port(t, listen)), Addr: listen}},
		GhostAdminAddr: varnishdtest.FreeAddr(t),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Admin.VCLInline(ctx, "main", Render(Options{VMOD: vmod})); err != nil {
		t.Fatalf("vcl.inline: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path string
		want int
	}{
		{"/backend-timeout", 200},
		{"/backend-timeout?delay=1s", 504},
		{"/disable-backend-timeout?delay=1s", 200},
		{"/request-timeout", 200},
		{"/request-timeout?delay=1s", 504},
		{"/disable-request-timeout?delay=1s", 200},
		{"/closes", 503},
		{"/refused", 503},
	} {
		t.Run(tc.path, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+listen+tc.path, nil)
			req.Host = "timeout.test"
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s: %d after %v, want %d", tc.path, resp.StatusCode, time.Since(start), tc.want)
			}
		})
	}
}
