// Package metrics holds the chaperone's own Prometheus metrics and the
// registry /metrics serves: reloads by kind and result, the time of the
// last successful reload, VCL compile failures, cache child restarts,
// whether the pod is draining and whether client connections then close
// after their response. The varnishd counters come from
// varnishstat.Collector; the routing half registers its own collectors
// (endpoints per service, ...) on the same registry.
package metrics

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
)

// The reload kinds.
const (
	KindVCL   = vcl.Kind // main.vcl, vcl.load + vcl.use
	KindGhost = "ghost"  // ghost.json, POST /.varnish-ghost/reload
)

// Chaperone is the chaperone's own metrics.
type Chaperone struct {
	reloads            *prometheus.CounterVec
	lastSuccess        *prometheus.GaugeVec
	vclCompileFailures prometheus.Counter
	childRestarts      prometheus.Counter
	draining           prometheus.Gauge
	closing            prometheus.Gauge
	liveSessions       prometheus.Gauge
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves the metrics of reg.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// NewChaperone creates the chaperone's metrics and registers them on reg.
func NewChaperone(reg prometheus.Registerer) *Chaperone {
	m := &Chaperone{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_reloads_total",
			Help: "Reloads tried, by kind (vcl, ghost) and result (ok, error).",
		}, []string{"kind", "result"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "varnishgw_chaperone_reload_last_success_timestamp_seconds",
			Help: "Unix time of the last successful reload, by kind.",
		}, []string{"kind"}),
		vclCompileFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_vcl_compile_failures_total",
			Help: "VCL sources varnishd refused to compile.",
		}),
		childRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_child_restarts_total",
			Help: "Restarts of varnishd's cache child seen by the chaperone.",
		}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "varnishgw_chaperone_draining",
			Help: "1 while the chaperone drains client sessions before stopping.",
		}),
		closing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "varnishgw_chaperone_drain_closing_connections",
			Help: "1 once ghost, told about the drain, closes every client connection after its current response.",
		}),
		liveSessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "varnishgw_chaperone_live_sessions",
			Help: "Open client sessions at the last count (sum of MEMPOOL.sess*.live).",
		}),
	}
	for _, kind := range []string{KindVCL, KindGhost} {
		for _, result := range []string{"ok", "error"} {
			m.reloads.WithLabelValues(kind, result)
		}
	}
	reg.MustRegister(m.reloads, m.lastSuccess, m.vclCompileFailures, m.childRestarts, m.draining, m.closing, m.liveSessions)
	return m
}

// ObserveReload counts a reload of kind; err nil is a success. A
// *vcl.CompileError also counts as a VCL compile failure.
func (m *Chaperone) ObserveReload(kind string, err error) {
	if err != nil {
		m.reloads.WithLabelValues(kind, "error").Inc()
		var ce *vcl.CompileError
		if errors.As(err, &ce) {
			m.vclCompileFailures.Inc()
		}
		return
	}
	m.reloads.WithLabelValues(kind, "ok").Inc()
	m.lastSuccess.WithLabelValues(kind).Set(float64(time.Now().UnixNano()) / 1e9)
}

// ObserveChildRestart counts a restart of the cache child.
func (m *Chaperone) ObserveChildRestart() { m.childRestarts.Inc() }

// SetDraining sets the draining gauge.
func (m *Chaperone) SetDraining(on bool) {
	if on {
		m.draining.Set(1)
	} else {
		m.draining.Set(0)
	}
}

// SetClosingConnections sets the gauge that says client connections close
// after their current response.
func (m *Chaperone) SetClosingConnections(on bool) {
	if on {
		m.closing.Set(1)
	} else {
		m.closing.Set(0)
	}
}

// SetLiveSessions records the last count of open client sessions.
func (m *Chaperone) SetLiveSessions(n uint64) { m.liveSessions.Set(float64(n)) }
