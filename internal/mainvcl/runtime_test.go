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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// TestRenderServes runs rendered main.vcl in a real varnishd with ghost:
// ghost reads the relative GhostJSON from varnishd's work dir, routes the
// request, and the route's cache policy or user VCL decides caching:
// without either every request is passed; a vcl_recv returning hash
// caches; a route with a cache policy is cached by the defaults (with its
// status header, without ghost's X-Ghost-* object headers) unless user
// VCL passes it; ghost's own answers (404) and a user vcl_synth both reach
// the client. On a plain connection the backend sees X-Forwarded-Proto
// http whatever the client sent.
func TestRenderServes(t *testing.T) {
	var hits atomic.Int64
	var proto atomic.Value // the last X-Forwarded-Proto the backend saw
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		proto.Store(r.Header.Get("X-Forwarded-Proto"))
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintln(w, "hello")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	ghostJSON := fmt.Sprintf(`{"version":2,"backends":[{"name":"r","endpoints":[{"address":"127.0.0.1","port":%d}]}],"vhosts":[{"hostname":"cache.test","routes":[{"name":"r","match":{"path":{"type":"PathPrefix","value":"/"}},"backends":[{"backend":"r"}]}]}]}`, port)
	policyJSON := fmt.Sprintf(`{"version":2,"backends":[{"name":"r","endpoints":[{"address":"127.0.0.1","port":%d}]}],"cachePolicies":[{"name":"gateway","ttlMs":120000,"statusHeader":"x-cache"}],"vhosts":[{"hostname":"cache.test","routes":[{"name":"r","match":{"path":{"type":"PathPrefix","value":"/"}},"backends":[{"backend":"r"}],"cache":"gateway"}]}]}`, port)

	vmod := varnishdtest.GhostVMOD(t)
	for _, tc := range []struct {
		name      string
		opts      Options
		policy    bool   // the route names a cache policy
		wantHits  int64  // backend requests for 3 client requests
		wantCache string // its status header on the last response
		wantUser  string // x-user on the last response (set by user VCL)
		synthMark string
	}{
		{name: "default passes", opts: Options{}, wantHits: 3},
		{name: "user VCL caches", wantHits: 1, opts: Options{
			ClassVCL:   "sub vcl_recv { if (req.method == \"GET\") { return (hash); } }",
			GatewayVCL: "sub vcl_synth { set resp.http.x-synth = \"user\"; }",
		}, synthMark: "user"},
		{name: "cache policy caches", opts: Options{}, policy: true, wantHits: 1, wantCache: "HIT"},
		{name: "user VCL passes a cache policy's route", policy: true, wantHits: 3, wantCache: "PASS", opts: Options{
			GatewayVCL: "sub vcl_recv { return (pass); }",
		}},
		// the pattern ghost/README.md gives for adjusting a policy's response
		{name: "user VCL adjusts a cache policy's response", policy: true, wantHits: 1, wantCache: "HIT", wantUser: "seen", opts: Options{
			GatewayVCL: "sub vcl_backend_response { if (router.backend_response()) { set beresp.http.x-user = \"seen\"; return (deliver); } }",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			work := filepath.Join(varnishdtest.Dir(t), "work")
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			doc := ghostJSON
			if tc.policy {
				doc = policyJSON
			}
			if err := os.WriteFile(filepath.Join(work, GhostJSON), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			listen := varnishdtest.FreeAddr(t)
			p := varnishdtest.Start(t, varnishd.Config{
				WorkDir:        work,
				Listeners:      []varnishd.Listener{{Name: "port-" + strconv.Itoa(varnishdtest.Port(t, listen)), Addr: listen}},
				GhostAdminAddr: varnishdtest.FreeAddr(t),
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tc.opts.VMOD = vmod
			if err := p.Admin.VCLInline(ctx, "main", Render(tc.opts)); err != nil {
				t.Fatalf("vcl.inline: %v", err)
			}
			if err := p.Admin.VCLUse(ctx, "main"); err != nil {
				t.Fatal(err)
			}
			get := func(host string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest("GET", "http://"+listen+"/x", nil)
				req.Host = host
				req.Header.Set("X-Forwarded-Proto", "https") // replaced: the connection is plain
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp
			}
			var last *http.Response
			for range 3 {
				if last = get("cache.test"); last.StatusCode != 200 {
					t.Fatalf("routed request: %d", last.StatusCode)
				}
			}
			if got := last.Header.Get("x-cache"); got != tc.wantCache {
				t.Errorf("x-cache %q, want %q", got, tc.wantCache)
			}
			if got := last.Header.Get("x-user"); got != tc.wantUser {
				t.Errorf("x-user %q, want %q", got, tc.wantUser)
			}
			for name := range last.Header {
				if strings.HasPrefix(strings.ToLower(name), "x-ghost-") {
					t.Errorf("the client got ghost's object header %s", name)
				}
			}
			if got, _ := proto.Load().(string); got != "http" {
				t.Errorf("backend saw X-Forwarded-Proto %q, want http (set from the connection, not the client)", got)
			}
			if got := hits.Load(); got != tc.wantHits {
				t.Errorf("backend saw %d requests for 3, want %d", got, tc.wantHits)
			}
			r := get("unknown.test")
			if r.StatusCode != 404 || r.Header.Get("x-synth") != tc.synthMark {
				t.Errorf("unknown host: %d x-synth=%q, want 404 x-synth=%q", r.StatusCode, r.Header.Get("x-synth"), tc.synthMark)
			}
		})
	}
}
