package health_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/health"
)

func TestProbes(t *testing.T) {
	yes := func() bool { return true }
	no := func() bool { return false }
	for _, tc := range []struct {
		name            string
		varnish, routed func() bool
		draining        bool
		wantReady       int
		wantBody        string
	}{
		{"ready", yes, yes, false, 200, "ready"},
		{"no routing check counts as loaded", yes, nil, false, 200, "ready"},
		{"varnishd down", no, yes, false, 503, "varnishd is not running"},
		{"routing not loaded", yes, no, false, 503, "routing not loaded"},
		{"draining", yes, yes, true, 503, "draining"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &health.Checker{VarnishReady: tc.varnish, RoutingLoaded: tc.routed}
			if tc.draining {
				c.StartDraining()
			}
			mux := http.NewServeMux()
			c.Register(mux)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			if rec.Code != tc.wantReady || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("/readyz = %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantReady, tc.wantBody)
			}
			rec = httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
			if rec.Code != 200 {
				t.Errorf("/healthz = %d, want 200 always", rec.Code)
			}
		})
	}
}
