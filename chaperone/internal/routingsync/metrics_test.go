package routingsync

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

func TestMetrics(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	m.Observe(Result{Outcome: OutcomeReloaded, Duration: 3 * time.Millisecond,
		Endpoints: map[string]int{"ns/a:80": 2, "ns/b:80": 0}, Conflicts: []routing.Conflict{{Message: "x"}}})
	m.Observe(Result{Outcome: OutcomeReloaded, Duration: time.Millisecond, Endpoints: map[string]int{"ns/a:80": 3}})
	m.Observe(Result{Outcome: OutcomeInvalid, Err: errors.New("bad")})
	m.Observe(Result{Outcome: OutcomeUnchanged})
	want := `
# HELP varnishgw_routing_backend_endpoints Ready endpoints per backend group (namespace/service:port) in the loaded ghost.json.
# TYPE varnishgw_routing_backend_endpoints gauge
varnishgw_routing_backend_endpoints{backend="ns/a:80"} 3
# HELP varnishgw_routing_conflicts Conflicts the routing merge reported in the last build.
# TYPE varnishgw_routing_conflicts gauge
varnishgw_routing_conflicts 0
# HELP varnishgw_routing_loaded 1 once ghost has loaded routing built by the chaperone.
# TYPE varnishgw_routing_loaded gauge
varnishgw_routing_loaded 1
# HELP varnishgw_routing_syncs_total Routing syncs by outcome (reloaded, unchanged, invalid, rejected, error).
# TYPE varnishgw_routing_syncs_total counter
varnishgw_routing_syncs_total{outcome="invalid"} 1
varnishgw_routing_syncs_total{outcome="reloaded"} 2
varnishgw_routing_syncs_total{outcome="unchanged"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"varnishgw_routing_backend_endpoints", "varnishgw_routing_conflicts", "varnishgw_routing_loaded", "varnishgw_routing_syncs_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "varnishgw_routing_sync_duration_seconds"); n != 1 {
		t.Errorf("%d duration series", n)
	}
}
