package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/metrics"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/routingsync"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// pushRouting is a routing half as the seam expects one: it feeds main.vcl
// through Env.LoadVCL (no --vcl file), writes ghost.json, reloads ghost and
// marks routing loaded.
type pushRouting struct {
	vcl, ghost string
	badVCLErr  atomic.Pointer[error]
	started    atomic.Int32
}

func (r *pushRouting) Run(ctx context.Context, env routingsync.Env) error {
	bad := env.LoadVCL(ctx, "vcl 4.1; broken")
	r.badVCLErr.Store(&bad)
	if err := env.LoadVCL(ctx, r.vcl); err != nil {
		return err
	}
	if err := os.WriteFile(env.GhostJSONPath, []byte(r.ghost), 0o644); err != nil {
		return err
	}
	_, err := ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: env.GhostAdminAddr}).Reload(ctx)
	env.ObserveReload(metrics.KindGhost, err)
	if err != nil {
		return err
	}
	env.RoutingLoaded()
	<-ctx.Done()
	return nil
}

func (r *pushRouting) ChildStarted(context.Context) { r.started.Add(1) }

// TestRunWithARoutingHalf runs Run in-process with a routing half that
// pushes VCL and ghost.json through the seam, then drains on a signal.
func TestRunWithARoutingHalf(t *testing.T) {
	be := chaperonetest.Backend(t, "P")
	dir := varnishdtest.Dir(t)
	ghostPath := filepath.Join(dir, "ghost.json")
	listen, health, ghostAdmin := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	cfg, err := ParseConfig([]string{
		"--workdir", filepath.Join(dir, "work"),
		"--listen", strconv.Itoa(varnishdtest.Port(t, listen)), "--listen-host", "127.0.0.1",
		"--admin-addr", "127.0.0.1:0", "--ghost-admin-addr", ghostAdmin, "--health-addr", health,
		"--ghost-json", ghostPath,
		"--varnishd", varnishdtest.Bin(t), "--varnishstat", varnishdtest.StatBin(t),
		"--storage", "malloc,32m", "--param", "thread_pool_min=5", "--param", "thread_pools=1",
		"--stats-interval", "500ms",
	}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// No VCL file: the routing half pushes it (the command line allows an
	// empty --vcl only with --routing=kubernetes, whose half does so).
	cfg.VCLPath = ""
	r := &pushRouting{vcl: mainVCL(ghostPath, "pushed"), ghost: chaperonetest.GhostJSON(be.URL)}
	sig := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, r, nil, varnishdtest.Logger(t), sig) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("Run after cancel: %v", err)
		}
	})
	c := &chaperone{&chaperonetest.Chaperone{T: t, ListenAddr: listen, HealthAddr: health, Exited: make(chan struct{})}}

	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	c.wantTraffic("P", "pushed")
	var ce *vcl.CompileError
	if bad := r.badVCLErr.Load(); bad == nil || !errors.As(*bad, &ce) {
		t.Errorf("LoadVCL of a broken source = %v, want a *vcl.CompileError", bad)
	}
	if v := c.metric(`varnishgw_chaperone_reloads_total{kind="vcl",result="error"}`); v != 1 {
		t.Errorf("vcl reload errors = %v, want 1", v)
	}

	sig <- os.Interrupt
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Run = %v after a signal and no clients, want nil", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("Run did not return within 120 s of the signal")
	}
	if _, err := http.Get("http://" + health + "/healthz"); err == nil {
		t.Error("the health server still answers after Run returned")
	}
}
