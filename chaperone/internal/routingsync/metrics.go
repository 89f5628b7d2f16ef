package routingsync

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are Prometheus collectors for the Syncer's results. Register
// them and pass Observe as (or call it from) Config.OnResult.
type Metrics struct {
	syncs     *prometheus.CounterVec
	duration  prometheus.Histogram
	endpoints *prometheus.GaugeVec
	conflicts prometheus.Gauge
	loaded    prometheus.Gauge
}

// NewMetrics returns the collectors:
//
//	varnishgw_routing_syncs_total{outcome}       syncs by Outcome
//	varnishgw_routing_sync_duration_seconds      build to reload answer
//	varnishgw_routing_backend_endpoints{backend} ready endpoints per backend group
//	                                             (namespace/service:port) in the loaded ghost.json
//	varnishgw_routing_conflicts                  conflicts Merge reported in the last build
//	varnishgw_routing_loaded                     1 once ghost loaded routing
func NewMetrics() *Metrics {
	return &Metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "varnishgw_routing_syncs_total",
			Help: "Routing syncs by outcome (reloaded, unchanged, invalid, rejected, error).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "varnishgw_routing_sync_duration_seconds",
			Help:    "Time from building ghost.json to ghost's reload answer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		endpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "varnishgw_routing_backend_endpoints",
			Help: "Ready endpoints per backend group (namespace/service:port) in the loaded ghost.json.",
		}, []string{"backend"}),
		conflicts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "varnishgw_routing_conflicts",
			Help: "Conflicts the routing merge reported in the last build.",
		}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "varnishgw_routing_loaded",
			Help: "1 once ghost has loaded routing built by the chaperone.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.syncs.Describe(ch)
	m.duration.Describe(ch)
	m.endpoints.Describe(ch)
	m.conflicts.Describe(ch)
	m.loaded.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.syncs.Collect(ch)
	m.duration.Collect(ch)
	m.endpoints.Collect(ch)
	m.conflicts.Collect(ch)
	m.loaded.Collect(ch)
}

// Observe records a Result.
func (m *Metrics) Observe(r Result) {
	m.syncs.WithLabelValues(string(r.Outcome)).Inc()
	if r.Outcome == OutcomeReloaded || r.Outcome == OutcomeRejected {
		m.duration.Observe(r.Duration.Seconds())
	}
	if r.Outcome == OutcomeReloaded {
		m.loaded.Set(1)
		// the endpoints gauge describes the loaded document only
		m.endpoints.Reset()
		for b, n := range r.Endpoints {
			m.endpoints.WithLabelValues(b).Set(float64(n))
		}
	}
	if r.Outcome == OutcomeReloaded || r.Outcome == OutcomeUnchanged || r.Outcome == OutcomeRejected {
		m.conflicts.Set(float64(len(r.Conflicts)))
	}
}
