package routingsync_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/routingsync"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

func server(t *testing.T, body string) (host, port string) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	t.Cleanup(s.Close)
	host, port, _ = net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	return host, port
}

func ghostJSON(host, port string) string {
	return fmt.Sprintf(`{"version": 2, "backends": [{"name": "a", "endpoints": [{"address": %q, "port": %s}]}],
	  "vhosts": [{"hostname": "a.example.com", "routes": [
	  {"name": "a", "match": {"path": {"type": "PathPrefix", "value": "/"}},
	   "backends": [{"backend": "a"}]}]}]}`, host, port)
}

// TestFileRoutingAgainstGhost runs FileRouting against a real varnishd with
// ghost: it waits for main.vcl, reloads on change, marks routing loaded once,
// and counts every reload.
func TestFileRoutingAgainstGhost(t *testing.T) {
	vmod := varnishdtest.GhostVMOD(t)
	dir := varnishdtest.Dir(t)
	path := filepath.Join(dir, "ghost.json")
	if err := os.WriteFile(path, []byte(ghostJSON(server(t, "A"))), 0o644); err != nil {
		t.Fatal(err)
	}
	listen, ghostAdmin := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners:      []varnishd.Listener{{Name: "port-test", Addr: listen}},
		GhostAdminAddr: ghostAdmin,
	})

	var vclErr atomic.Pointer[error]
	noVCL := fmt.Errorf("not yet")
	vclErr.Store(&noVCL)
	var loadedCalls atomic.Int32
	var mu sync.Mutex
	results := map[string]int{}
	env := routingsync.Env{
		GhostAdminAddr: ghostAdmin,
		GhostJSONPath:  path,
		RoutingLoaded:  func() { loadedCalls.Add(1) },
		VCLError:       func() error { return *vclErr.Load() },
		ObserveReload: func(kind string, err error) {
			mu.Lock()
			defer mu.Unlock()
			results[fmt.Sprintf("%s/%v", kind, err == nil)]++
		},
		Metrics: prometheus.NewRegistry(),
		Logger:  varnishdtest.Logger(t),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &routingsync.FileRouting{Interval: 100 * time.Millisecond}
	go func() { _ = f.Run(ctx, env) }() // ends with the test's cancel

	// No reload is tried before main.vcl is active.
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	if len(results) != 0 {
		t.Errorf("reloads before main.vcl was active: %v", results)
	}
	mu.Unlock()

	vcl := fmt.Sprintf("vcl 4.1;\nimport ghost from %q;\nbackend default none;\n"+
		"sub vcl_init { new router = ghost.router(%q); }\n"+
		"sub vcl_recv { if (router.recv()) { return (pass); } return (synth(router.status())); }\n"+
		"sub vcl_synth { router.synth(); return (deliver); }\n", vmod, path)
	if err := p.Admin.VCLInline(ctx, "main", vcl); err != nil {
		t.Fatal(err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	vclErr.Store(new(error))

	waitFor(t, "routing loaded", func() bool { return loadedCalls.Load() == 1 })
	wantBody(t, listen, "A")

	if err := os.WriteFile(path, []byte(ghostJSON(server(t, "B"))), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new ghost.json to serve", func() bool { return get(listen) == "B" })
	f.ChildStarted(ctx)
	waitFor(t, "a reload after ChildStarted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return results["ghost/true"] == 3
	})
	if n := loadedCalls.Load(); n != 1 {
		t.Errorf("RoutingLoaded called %d times, want once", n)
	}
}

func get(addr string) string {
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = "a.example.com"
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func wantBody(t *testing.T, addr, want string) {
	t.Helper()
	if got := get(addr); got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
