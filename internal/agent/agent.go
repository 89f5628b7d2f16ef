// Package agent is the contract between the chaperone's two halves: the
// runtime half (package chaperone: varnishd, VCL reload, probes, drain,
// metrics) and the routing half (internal/routingsync: informers or a
// standalone directory, ghost.json writing, ghost reloads, Gateway status).
// The routing half implements [Routing]; the chaperone calls it with an
// [Env].
package agent

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Routing is the routing half as the chaperone drives it.
type Routing interface {
	// Run keeps routing current until ctx ends. It is called once, after
	// varnishd runs; env gives it what it needs from the runtime half.
	Run(ctx context.Context, env Env) error
	// ChildStarted is called when varnishd's manager has restarted a
	// crashed cache child (the VCLs are back and ghost re-read ghost.json
	// in vcl_init): push the routing state again if it may be newer than
	// the file.
	ChildStarted(ctx context.Context)
}

// Env is what the runtime half gives the routing half.
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
	// source that does not compile returns a *vclreload.CompileError (for
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
