package metrics_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/metrics"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
)

func TestChaperoneMetrics(t *testing.T) {
	reg := metrics.NewRegistry()
	m := metrics.NewChaperone(reg)
	m.ObserveReload(metrics.KindVCL, nil)
	m.ObserveReload(metrics.KindVCL, &vcl.CompileError{Name: "main-x", Message: "boom"})
	m.ObserveReload(metrics.KindGhost, errors.New("ghost said no"))
	m.ObserveReload(metrics.KindGhost, nil)
	m.ObserveReload(metrics.KindGhost, nil)
	m.ObserveChildRestart()
	m.SetDraining(true)
	m.SetClosingConnections(true)
	m.SetLiveSessions(4)

	want := `
# HELP varnishgw_chaperone_reloads_total Reloads tried, by kind (vcl, ghost) and result (ok, error).
# TYPE varnishgw_chaperone_reloads_total counter
varnishgw_chaperone_reloads_total{kind="ghost",result="error"} 1
varnishgw_chaperone_reloads_total{kind="ghost",result="ok"} 2
varnishgw_chaperone_reloads_total{kind="vcl",result="error"} 1
varnishgw_chaperone_reloads_total{kind="vcl",result="ok"} 1
# HELP varnishgw_chaperone_vcl_compile_failures_total VCL sources varnishd refused to compile.
# TYPE varnishgw_chaperone_vcl_compile_failures_total counter
varnishgw_chaperone_vcl_compile_failures_total 1
# HELP varnishgw_chaperone_child_restarts_total Restarts of varnishd's cache child seen by the chaperone.
# TYPE varnishgw_chaperone_child_restarts_total counter
varnishgw_chaperone_child_restarts_total 1
# HELP varnishgw_chaperone_draining 1 while the chaperone drains client sessions before stopping.
# TYPE varnishgw_chaperone_draining gauge
varnishgw_chaperone_draining 1
# HELP varnishgw_chaperone_drain_closing_connections 1 once ghost, told about the drain, closes every client connection after its current response.
# TYPE varnishgw_chaperone_drain_closing_connections gauge
varnishgw_chaperone_drain_closing_connections 1
# HELP varnishgw_chaperone_live_sessions Open client sessions at the last count (sum of MEMPOOL.sess*.live).
# TYPE varnishgw_chaperone_live_sessions gauge
varnishgw_chaperone_live_sessions 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"varnishgw_chaperone_reloads_total", "varnishgw_chaperone_vcl_compile_failures_total",
		"varnishgw_chaperone_child_restarts_total", "varnishgw_chaperone_draining", "varnishgw_chaperone_drain_closing_connections",
		"varnishgw_chaperone_live_sessions"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "varnishgw_chaperone_reload_last_success_timestamp_seconds"); n != 2 {
		t.Errorf("%d last-success series, want 2 (vcl, ghost)", n)
	}

	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || !strings.Contains(string(body), "go_goroutines") {
		t.Errorf("handler: %d, body without go_goroutines", rec.Code)
	}
}
