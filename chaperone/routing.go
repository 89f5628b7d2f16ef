package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/metrics"
)

// Routing is the seam where the routing half of the chaperone plugs in
// (internal/routingsync: Kubernetes informers or a standalone directory,
// ghost.json writing, ghost reloads, Gateway status). main wires one
// implementation; without it the chaperone uses [FileRouting], which
// reloads ghost whenever the ghost.json file changes.
type Routing interface {
	// Run keeps routing current until ctx ends. It is called once, after
	// varnishd runs; env gives it what it needs from the runtime half.
	Run(ctx context.Context, env RoutingEnv) error
	// ChildStarted is called when varnishd's manager has restarted a
	// crashed cache child (the VCLs are back, ghost re-read ghost.json in
	// vcl_init): push the routing state again if it may be newer than the
	// file.
	ChildStarted(ctx context.Context)
}

// RoutingEnv is what the runtime half gives the routing half.
type RoutingEnv struct {
	// GhostAdminAddr is ghost's loopback admin socket: POST
	// http://GhostAdminAddr/.varnish-ghost/reload reloads ghost.json
	// (see ReloadGhost).
	GhostAdminAddr string
	// GhostJSONPath is where ghost.json is written; main.vcl passes the same
	// path to ghost.router().
	GhostJSONPath string
	// RoutingLoaded marks the first routing as loaded: /readyz is 503 until
	// it is called.
	RoutingLoaded func()
	// LoadVCL makes source the active main VCL (no-op when unchanged). A
	// source that does not compile returns a *vclreload.CompileError (for
	// the Gateway condition) and the running VCL stays.
	LoadVCL func(ctx context.Context, source string) error
	// VCLError is the result of the last VCL load (nil: the active VCL is
	// the last one tried).
	VCLError func() error
	// ObserveReload counts a reload in the chaperone's metrics; kind is
	// metrics.KindGhost for ghost reloads.
	ObserveReload func(kind string, err error)
	// Metrics registers extra collectors (endpoints per service, ...).
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// GhostReloadResult is ghost's answer to /.varnish-ghost/reload.
type GhostReloadResult struct {
	Status     string  `json:"status"`
	Generation int64   `json:"generation"`
	Vhosts     int     `json:"vhosts"`
	Routes     int     `json:"routes"`
	Endpoints  int     `json:"endpoints"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error"`
}

// ReloadGhost asks ghost to reload ghost.json through its admin socket. It
// closes its connection after the answer (see the comment inside).
func ReloadGhost(ctx context.Context, ghostAdminAddr string) (GhostReloadResult, error) {
	var res GhostReloadResult
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ghostAdminAddr+"/.varnish-ghost/reload", nil)
	if err != nil {
		return res, err
	}
	// No keep-alive: an idle connection to ghost's admin socket is a live
	// varnishd session and would hold up the drain.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return res, fmt.Errorf("ghost reload: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK || res.Status != "ok" {
		return res, fmt.Errorf("ghost reload answered %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return res, nil
}

// FileRouting is the Routing used when no routing source is wired: ghost.json
// is a file someone else writes (a mounted ConfigMap, a test). It reloads
// ghost when the file's content changes and marks routing loaded after the
// first successful reload.
type FileRouting struct {
	// Interval between checks of the file (default 2 seconds).
	Interval time.Duration

	env     RoutingEnv
	pending atomic.Bool
}

// Run implements Routing.
func (f *FileRouting) Run(ctx context.Context, env RoutingEnv) error {
	f.env = env
	interval := f.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	var last [sha256.Size]byte
	loaded := false
	for {
		b, err := os.ReadFile(env.GhostJSONPath)
		if err == nil && (sha256.Sum256(b) != last || f.pending.Swap(false)) {
			// ghost's router exists only once main.vcl is active.
			if loaded || env.VCLError() == nil {
				res, err := ReloadGhost(ctx, env.GhostAdminAddr)
				env.ObserveReload(metrics.KindGhost, err)
				if err != nil {
					env.Logger.Error("ghost reload failed", "path", env.GhostJSONPath, "error", err)
				} else {
					last = sha256.Sum256(b)
					env.Logger.Info("ghost reloaded", "generation", res.Generation, "vhosts", res.Vhosts, "routes", res.Routes, "duration_ms", res.DurationMS)
					if !loaded {
						env.RoutingLoaded()
						loaded = true
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// ChildStarted implements Routing: reload once more at the next check.
func (f *FileRouting) ChildStarted(context.Context) { f.pending.Store(true) }
