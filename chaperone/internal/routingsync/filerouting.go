package routingsync

import (
	"context"
	"crypto/sha256"
	"os"
	"sync/atomic"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/metrics"
)

// FileRouting is the Routing the chaperone uses when no routing source is
// wired: ghost.json is a file someone else writes (a mounted ConfigMap, a
// test). It reloads ghost when the file's content changes, and once more
// after a child restart, and marks routing loaded after the first
// successful reload. A failed reload is retried every Interval.
type FileRouting struct {
	// Interval between checks of the file (default 2 seconds).
	Interval time.Duration

	again atomic.Bool
}

// Run keeps ghost loaded with the file until ctx ends.
func (f *FileRouting) Run(ctx context.Context, env Env) error {
	interval := f.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	var last [sha256.Size]byte
	loaded := false
	// One attempt per check: the next check retries.
	reloader := ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: env.GhostAdminAddr, RetryMax: -1, Logger: env.Logger})
	for {
		b, err := os.ReadFile(env.GhostJSONPath)
		// ghost's router exists only once main.vcl is active.
		if err == nil && (loaded || env.VCLError() == nil) && (sha256.Sum256(b) != last || f.again.Swap(false)) {
			res, err := reloader.Reload(ctx)
			env.ObserveReload(metrics.KindGhost, err)
			if err != nil {
				env.Logger.Error("ghost reload failed", "path", env.GhostJSONPath, "error", err)
			} else {
				last = sha256.Sum256(b)
				env.Logger.Info("ghost reloaded", "generation", res.Generation, "vhosts", res.VHosts,
					"routes", res.Routes, "duration_ms", res.DurationMS)
				if !loaded {
					env.RoutingLoaded()
					loaded = true
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

// ChildStarted makes the next check reload once more.
func (f *FileRouting) ChildStarted(context.Context) { f.again.Store(true) }
