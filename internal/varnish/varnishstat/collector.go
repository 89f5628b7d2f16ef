package varnishstat

import (
	"maps"
	"slices"
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
//
// Every counter is exported a second time under the name that Debian's
// prometheus-varnish-exporter gives it (see exporterName), with
// varnish_up, varnish_version and varnish_backend_up, so that dashboards
// made for that exporter work. Where both names are the same (the gauges
// without an identity, MEMPOOL's gauges) the series is exported once; where
// the names are the same and the labels differ (SMA and SMF gauges: "id"
// here, "type" there), the exporter's labels win.
type Collector struct {
	Poller *Poller
}

// Describe sends nothing: the set of counters changes with the loaded VCLs,
// so this is an unchecked collector.
func (c Collector) Describe(chan<- *prometheus.Desc) {}

// family is one metric family being collected.
type family struct {
	help   string
	vt     prometheus.ValueType
	labels []string
	series []series
}

type series struct {
	values []string
	value  float64
}

// Collect sends one metric per counter of the latest snapshot, under both
// names.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.Poller.Latest()
	own, exp := c.families(s)
	for name, f := range exp {
		if o, ok := own[name]; ok && !slices.Equal(o.labels, f.labels) {
			delete(own, name) // the exporter's labels win
		} else if ok {
			delete(exp, name) // the same series
		}
	}
	up := 0.0
	if err == nil && len(s.Counters) > 0 {
		up = 1
	}
	exp["varnish_up"] = &family{help: "Was the last scrape of varnish successful.", vt: prometheus.GaugeValue,
		series: []series{{value: up}}}
	if keys, values, ok := versionLabels(c.Poller.Version()); ok {
		exp["varnish_version"] = &family{help: "Varnish version information", vt: prometheus.GaugeValue,
			labels: keys, series: []series{{values: values, value: 1}}}
	}
	for _, fams := range []map[string]*family{own, exp} {
		for _, name := range slices.Sorted(maps.Keys(fams)) {
			f := fams[name]
			desc := prometheus.NewDesc(name, f.help, f.labels, nil)
			for _, sr := range f.series {
				m, err := prometheus.NewConstMetric(desc, f.vt, sr.value, sr.values...)
				if err != nil {
					ch <- prometheus.NewInvalidMetric(desc, err)
					continue
				}
				ch <- m
			}
		}
	}
}

// families groups the counters of s into the project's families and the
// exporter's.
func (c Collector) families(s Snapshot) (own, exp map[string]*family) {
	own, exp = map[string]*family{}, map[string]*family{}
	reload := newestReloadPrefix(s.Counters)
	add := func(fams map[string]*family, m promName, help string, vt prometheus.ValueType, v float64) {
		f := fams[m.name]
		if f == nil {
			f = &family{help: help, vt: vt, labels: m.labels}
			fams[m.name] = f
		}
		if !slices.Equal(f.labels, m.labels) || f.vt != vt {
			return // inconsistent with the family's first counter
		}
		f.series = append(f.series, series{values: m.values, value: v})
	}
	for _, name := range slices.Sorted(maps.Keys(s.Counters)) {
		cnt := s.Counters[name]
		vt := prometheus.GaugeValue
		if cnt.Flag == "c" {
			vt = prometheus.CounterValue
		}
		if m, ok := metricName(name, cnt.Flag); ok {
			add(own, m, cnt.Description, vt, float64(cnt.Value))
		}
		if reload != "" && strings.HasPrefix(name, "VBE.") && !strings.HasPrefix(name, reload) {
			continue
		}
		m, help, ok := exporterName(name, cnt.Description)
		if !ok {
			continue
		}
		evt := prometheus.GaugeValue
		if cnt.Flag == "c" || cnt.Flag == "a" {
			evt = prometheus.CounterValue
		}
		add(exp, m, help, evt, float64(cnt.Value))
		if m.name == "varnish_backend_happy" {
			up := 0.0
			if cnt.Value&1 == 1 {
				up = 1
			}
			add(exp, promName{"varnish_backend_up", m.labels, m.values}, "Backend up as per the latest health probe", prometheus.GaugeValue, up)
		}
	}
	return own, exp
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
