package routingsync

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Env is what the chaperone's runtime half (package chaperone: varnishd, VCL
// reload, probes, drain, metrics) gives its routing half (a Routing, or a
// FileRouting).
type Env struct {
	// GhostAdminAddr is ghost's loopback admin socket; reload ghost.json
	// with ghostadmin.Reload(ctx, GhostAdminAddr).
	GhostAdminAddr string
	// GhostJSONPath is where ghost.json is written; main.vcl passes the
	// same path to ghost.router().
	GhostJSONPath string
	// RoutingLoaded marks the first routing as loaded: /readyz is 503 until
	// it is called.
	RoutingLoaded func()
	// LoadVCL makes source the active main VCL (a no-op when unchanged). A
	// source that does not compile returns a *vcl.CompileError (for
	// the Gateway condition) and the running VCL stays.
	LoadVCL func(ctx context.Context, source string) error
	// VCLError is the result of the last VCL load: nil once a main VCL is
	// active and the last one tried; ghost's router exists only then.
	VCLError func() error
	// ObserveReload counts a reload in the chaperone's metrics; kind is
	// metrics.KindGhost for ghost reloads, err nil for a success.
	ObserveReload func(kind string, err error)
	// Metrics registers extra collectors (endpoints per service, ...) on
	// the registry /metrics serves.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}
