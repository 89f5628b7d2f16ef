package varnishstat

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes the latest snapshot of a [Poller] as Prometheus metrics.
// A scrape reads the cache and never runs varnishstat.
//
// Naming: a counter TYPE.FIELD (MAIN.sess_conn) becomes varnish_type_field
// (varnish_main_sess_conn_total for counters). A counter with an identity,
// TYPE.ID.FIELD (VBE.boot.default.req, MEMPOOL.sess0.live), gets the label
// id="ID". ghost's per-vhost counters GHOST.VCL.ROUTER.VHOST.FIELD become
// varnish_ghost_FIELD_total{vcl, router, vhost}. The JSON flag gives the
// type: "c" counter, "g" gauge, "b" bitmap (exposed as a gauge).
type Collector struct {
	Poller *Poller
}

// Describe sends nothing: the set of counters changes with the loaded VCLs,
// so this is an unchecked collector.
func (c Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends one metric per counter of the latest snapshot.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	s, _ := c.Poller.Latest()
	names := make([]string, 0, len(s.Counters))
	for name := range s.Counters {
		names = append(names, name)
	}
	sort.Strings(names)
	descs := map[string]*prometheus.Desc{}
	for _, name := range names {
		cnt := s.Counters[name]
		m, ok := metricName(name, cnt.Flag)
		if !ok {
			continue
		}
		desc, ok := descs[m.name]
		if !ok {
			desc = prometheus.NewDesc(m.name, cnt.Description, m.labels, nil)
			descs[m.name] = desc
		}
		vt := prometheus.GaugeValue
		if cnt.Flag == "c" {
			vt = prometheus.CounterValue
		}
		metric, err := prometheus.NewConstMetric(desc, vt, float64(cnt.Value), m.values...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(desc, err)
			continue
		}
		ch <- metric
	}
}

type promName struct {
	name           string
	labels, values []string
}

// metricName maps a varnishstat counter name and flag to a Prometheus name
// and labels; ok is false for names it cannot map.
func metricName(counter, flag string) (promName, bool) {
	parts := strings.Split(counter, ".")
	if len(parts) < 2 {
		return promName{}, false
	}
	typ, field := sanitize(parts[0]), sanitize(parts[len(parts)-1])
	name := "varnish_" + typ + "_" + field
	if flag == "c" {
		name += "_total"
	}
	middle := parts[1 : len(parts)-1]
	switch {
	case parts[0] == "GHOST" && len(middle) >= 3:
		return promName{name, []string{"vcl", "router", "vhost"},
			[]string{middle[0], middle[1], strings.Join(middle[2:], ".")}}, true
	case parts[0] == "GHOSTROUTER" && len(middle) >= 2:
		return promName{name, []string{"vcl", "router"},
			[]string{middle[0], strings.Join(middle[1:], ".")}}, true
	case parts[0] == "MAIN" || parts[0] == "MGT":
		if len(middle) > 0 {
			return promName{name, []string{"id"}, []string{strings.Join(middle, ".")}}, true
		}
		return promName{name: name}, true
	default:
		return promName{name, []string{"id"}, []string{strings.Join(middle, ".")}}, true
	}
}

// sanitize makes s a valid part of a Prometheus metric name.
func sanitize(s string) string {
	var b strings.Builder
	for i, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r == '_', r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
