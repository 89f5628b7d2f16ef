package ghostadmin_test

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
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishstat"
)

func TestReloadAgainstGhost(t *testing.T) {
	vmod := varnishdtest.GhostVMOD(t)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "A") }))
	defer be.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(be.URL, "http://"))
	dir := varnishdtest.Dir(t)
	ghostJSON := filepath.Join(dir, "ghost.json")
	good := fmt.Sprintf(`{"version": 2, "backends": [{"name": "a", "endpoints": [{"address": %q, "port": %s}]}],
	  "vhosts": [{"hostname": "a.example.com", "routes": [
	  {"name": "a", "match": {"path": {"type": "PathPrefix", "value": "/"}},
	   "backends": [{"backend": "a"}]}]}]}`, host, port)
	if err := os.WriteFile(ghostJSON, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	adminAddr := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners:      []varnishd.Listener{{Name: "port-test", Addr: varnishdtest.FreeAddr(t)}},
		GhostAdminAddr: adminAddr,
	})
	ctx := context.Background()
	vcl := fmt.Sprintf("vcl 4.1;\nimport ghost from %q;\nbackend default none;\n"+
		"sub vcl_init { new router = ghost.router(%q); }\n"+
		"sub vcl_recv { if (router.recv()) { return (pass); } return (synth(router.status())); }\n"+
		"sub vcl_synth { router.synth(); return (deliver); }\n", vmod, ghostJSON)
	if err := p.Admin.VCLInline(ctx, "main", vcl); err != nil {
		t.Fatal(err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}

	reloader := ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: adminAddr})
	res, err := reloader.Reload(ctx)
	if err != nil || res.Generation != 2 || res.VHosts != 1 || res.Routes != 1 {
		t.Fatalf("Reload = %+v, %v; want generation 2, 1 vhost, 1 route", res, err)
	}

	// A broken file is an error with ghost's message; the generation stays.
	if err := os.WriteFile(ghostJSON, []byte(`{"version": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := reloader.Reload(ctx); err == nil || !ghostadmin.IsRejected(err) || !strings.Contains(err.Error(), "version") {
		t.Fatalf("Reload of a broken file = %+v, %v; want an error about the version", res, err)
	}

	// Reload leaves no session open behind it (it would hold up a drain).
	r := varnishstat.Reader{Bin: varnishdtest.StatBin(t), WorkDir: p.WorkDir()}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := r.Read(ctx)
		if n, ok := s.LiveSessions(); err == nil && ok && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live sessions after Reload did not reach 0 (last read err %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Nothing listening: an error naming the reload.
	none := ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: varnishdtest.FreeAddr(t), RetryMax: -1})
	if _, err := none.Reload(ctx); err == nil || ghostadmin.IsRejected(err) || !strings.Contains(err.Error(), "reload ghost") {
		t.Errorf("Reload with nothing listening = %v, want a ghost reload error", err)
	}
}

func TestDrainAgainstGhost(t *testing.T) {
	vmod := varnishdtest.GhostVMOD(t)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "A") }))
	defer be.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(be.URL, "http://"))
	dir := varnishdtest.Dir(t)
	ghostJSON := filepath.Join(dir, "ghost.json")
	if err := os.WriteFile(ghostJSON, []byte(fmt.Sprintf(`{"version": 2, "backends": [{"name": "a", "endpoints": [{"address": %q, "port": %s}]}],
	  "vhosts": [{"hostname": "a.example.com", "routes": [
	  {"name": "a", "match": {"path": {"type": "PathPrefix", "value": "/"}},
	   "backends": [{"backend": "a"}]}]}]}`, host, port)), 0o644); err != nil {
		t.Fatal(err)
	}
	adminAddr, listenAddr := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners:      []varnishd.Listener{{Name: "port-test", Addr: listenAddr}},
		GhostAdminAddr: adminAddr,
	})
	ctx := context.Background()

	// The boot VCL has no ghost: an error naming the drain.
	if err := ghostadmin.Drain(ctx, adminAddr); err == nil || !strings.Contains(err.Error(), "ghost drain answered 503") {
		t.Errorf("Drain under the boot VCL = %v, want ghost drain answered 503", err)
	}
	if err := p.Admin.VCLInline(ctx, "main", varnishdtest.MainVCL(vmod, ghostJSON)); err != nil {
		t.Fatal(err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	get := func() (string, error) {
		req, _ := http.NewRequest("GET", "http://"+listenAddr+"/", nil)
		req.Host = "a.example.com"
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.Close {
			return "close", nil
		}
		return "keep-alive", nil
	}
	if got, err := get(); got != "keep-alive" {
		t.Fatalf("before the drain: %q %v, want keep-alive", got, err)
	}
	if err := ghostadmin.Drain(ctx, adminAddr); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if got, err := get(); got != "close" {
		t.Errorf("after the drain: %q %v, want close", got, err)
	}
	// Again: still ok (nothing to undo).
	if err := ghostadmin.Drain(ctx, adminAddr); err != nil {
		t.Errorf("second Drain: %v", err)
	}
	if err := ghostadmin.Drain(ctx, varnishdtest.FreeAddr(t)); err == nil || !strings.Contains(err.Error(), "ghost drain") {
		t.Errorf("Drain with nothing listening = %v, want a ghost drain error", err)
	}
}
