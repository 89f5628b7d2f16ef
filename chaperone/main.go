// Command chaperone is varnishgw's in-pod agent: it runs and steers varnishd
// (supervise mode, the default: it is the container's entrypoint) or steers
// a varnishd another container runs (sidecar mode). It hot-reloads main.vcl,
// serves /healthz, /readyz, /metrics and /drain, notices cache child
// restarts, and on SIGTERM drains client sessions before stopping varnishd.
//
// The routing half (ghost.json from Gateway API objects, ghost reloads,
// Gateway status) plugs in through the agent.Routing interface
// (internal/agent), set in newRouting; see docs/chaperone.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/agent"
)

// newRouting is the seam where the routing half plugs in: it returns the
// agent.Routing the chaperone drives. nil: agent.FileRouting, ghost.json is
// a file written by someone else.
var newRouting func(cfg *Config) agent.Routing

func main() {
	cfg, err := ParseConfig(os.Args[1:], os.Environ(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaperone:", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(logger)
	var routing agent.Routing
	if newRouting != nil {
		routing = newRouting(cfg)
	}
	if err := Run(context.Background(), cfg, routing, logger, notifySignals()); err != nil {
		logger.Error("chaperone failed", "error", err)
		os.Exit(1)
	}
}
