package tlsterm

import "github.com/prometheus/client_golang/prometheus"

// metricSet is the TLS termination's metrics.
type metricSet struct {
	expiry   *prometheus.GaugeVec
	rejected prometheus.Counter
	restarts *prometheus.CounterVec
	reloads  *prometheus.CounterVec
}

func newMetrics() *metricSet {
	return &metricSet{
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "varnishgw_chaperone_tls_certificate_expiry_days",
			Help: "Days until the certificate served for an HTTPS listener's certificateRef expires (negative once expired), by listener and Secret.",
		}, []string{"listener", "secret_namespace", "secret_name"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_tls_certificates_rejected_total",
			Help: "Certificates not used because they failed the check (not PEM, key mismatch, expired, not yet valid), counted once per change of a Secret.",
		}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_hitch_restarts_total",
			Help: "Restarts of a hitch process that had exited, by HTTPS port.",
		}, []string{"port"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_hitch_reloads_total",
			Help: "hitch configuration reloads, by result: ok (SIGHUP sent), forced (also counted as ok: sent after waiting the longest for the previous generation of workers, whose connections hitch 1.7.2 may then reset), or error (hitch --test refused the new configuration and the running one stayed).",
		}, []string{"result"}),
	}
}

func (s *metricSet) Describe(ch chan<- *prometheus.Desc) {
	s.expiry.Describe(ch)
	s.rejected.Describe(ch)
	s.restarts.Describe(ch)
	s.reloads.Describe(ch)
}

func (s *metricSet) Collect(ch chan<- prometheus.Metric) {
	s.expiry.Collect(ch)
	s.rejected.Collect(ch)
	s.restarts.Collect(ch)
	s.reloads.Collect(ch)
}
