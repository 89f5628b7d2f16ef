package routingsync

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/agent"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/metrics"
)

// Agent is the chaperone's routing half (agent.Routing) built on a Syncer:
// it writes ghost.json from Source, reloads ghost, counts reloads in the
// chaperone's metrics, marks routing loaded for /readyz, sets the Gateway's
// Programmed condition when Status is set, and resyncs after a child restart.
type Agent struct {
	// Source is the routing state (KubeSource or DirSource).
	Source Source
	// Status, if set, receives the Programmed condition (Kubernetes only).
	Status *gatewaystatus.Writer

	syncer atomic.Pointer[Syncer]
}

var _ agent.Routing = (*Agent)(nil)

// Run implements agent.Routing.
func (a *Agent) Run(ctx context.Context, env agent.Env) error {
	m := NewMetrics()
	if env.Metrics != nil {
		if err := env.Metrics.Register(m); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return err
		}
	}
	if a.Status != nil {
		go a.Status.Run(ctx)
	}
	var loaded atomic.Bool
	var s *Syncer
	s, err := New(Config{
		Source:   a.Source,
		Path:     env.GhostJSONPath,
		Reloader: NewReloader(ReloaderConfig{Addr: env.GhostAdminAddr, Logger: env.Logger}),
		Logger:   env.Logger,
		OnResult: func(r Result) {
			m.Observe(r)
			switch r.Outcome {
			case OutcomeReloaded:
				env.ObserveReload(metrics.KindGhost, nil)
			case OutcomeRejected, OutcomeError:
				env.ObserveReload(metrics.KindGhost, r.Err)
			}
			if s.Loaded() && !loaded.Swap(true) {
				env.RoutingLoaded()
			}
			if a.Status != nil && r.Gateway != nil {
				a.Status.Set(gatewaystatus.ForError(r.Gateway.Generation, r.Err, r.Outcome == OutcomeError))
			}
		},
	})
	if err != nil {
		return err
	}
	a.syncer.Store(s)
	return s.Run(ctx)
}

// ChildStarted implements agent.Routing: the restarted child re-read
// ghost.json in vcl_init; resync so that it has the newest state.
func (a *Agent) ChildStarted(ctx context.Context) {
	if s := a.syncer.Load(); s != nil {
		if err := s.Resync(ctx); err != nil {
			s.log.Error("resync after a cache child restart", "error", err)
		}
	}
}
