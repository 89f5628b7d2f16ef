// Package health serves the chaperone's Kubernetes probes: /healthz (the
// chaperone is alive) and /readyz (varnishd answers, the first routing is
// loaded, every HTTPS port's hitch runs with a certificate, and the pod is
// not draining).
package health

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// Checker decides liveness and readiness.
type Checker struct {
	// VarnishReady reports whether varnishd's cache child runs and answers.
	VarnishReady func() bool
	// RoutingLoaded reports whether the first routing (ghost.json) is loaded;
	// nil counts as loaded.
	RoutingLoaded func() bool
	// TLSReady returns "" when every HTTPS port's hitch runs with a
	// certificate, else why not; nil when there are no HTTPS ports.
	TLSReady func() string

	draining atomic.Bool
}

// StartDraining makes readiness fail from now on.
func (c *Checker) StartDraining() { c.draining.Store(true) }

// Draining reports whether StartDraining was called.
func (c *Checker) Draining() bool { return c.draining.Load() }

// Ready returns "" when ready, else why not.
func (c *Checker) Ready() string {
	switch {
	case c.draining.Load():
		return "draining"
	case c.VarnishReady == nil || !c.VarnishReady():
		return "varnishd is not running"
	case c.RoutingLoaded != nil && !c.RoutingLoaded():
		return "routing not loaded yet"
	}
	if c.TLSReady != nil {
		return c.TLSReady()
	}
	return ""
}

// Register adds /healthz and /readyz to mux.
func (c *Checker) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := c.Ready(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}
