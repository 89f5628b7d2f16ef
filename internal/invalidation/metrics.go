package invalidation

import "github.com/prometheus/client_golang/prometheus"

// The results of handling an invalidation.
const (
	resultApplied = "applied" // bans issued
	resultSkipped = "skipped" // older than the cache child: nothing to ban
	resultRefused = "refused" // invalid: acknowledged with its error
)

// Metrics are the Applier's Prometheus metrics.
type Metrics struct {
	result   *prometheus.CounterVec
	failures prometheus.Counter
	duration prometheus.Histogram
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		result: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_invalidations_total",
			Help: "Cache invalidations handled, by result: applied (bans issued), skipped (older than the cache child, nothing to ban), refused (invalid).",
		}, []string{"result"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_invalidation_ban_failures_total",
			Help: "Bans varnishd did not take (the invalidation is retried).",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "varnishgw_chaperone_invalidation_apply_seconds",
			Help:    "Time from the watch delivering a cache invalidation to its bans being issued.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	for _, r := range []string{resultApplied, resultSkipped, resultRefused} {
		m.result.WithLabelValues(r)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.result.Describe(ch)
	m.failures.Describe(ch)
	m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.result.Collect(ch)
	m.failures.Collect(ch)
	m.duration.Collect(ch)
}
