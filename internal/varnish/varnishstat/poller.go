package varnishstat

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Poller reads the counters every Interval and keeps the latest snapshot for
// every reader (the metrics collector, the child restart watch).
type Poller struct {
	Reader   Reader
	Interval time.Duration
	Logger   *slog.Logger

	pollMu   sync.Mutex // one Poll at a time: observers see snapshots in order
	mu       sync.Mutex
	version  string // first line of varnishstat -V
	latest   Snapshot
	err      error
	observes []func(Snapshot)
}

// OnSnapshot registers f to be called, in the poller's goroutine, with every
// snapshot read successfully. Register before Run.
func (p *Poller) OnSnapshot(f func(Snapshot)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observes = append(p.observes, f)
}

// Latest returns the most recent snapshot and the error of the most recent
// read (nil when it succeeded). The snapshot is the zero Snapshot before the
// first successful read.
func (p *Poller) Latest() (Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest, p.err
}

// SetSnapshot stores s as the latest snapshot, for callers that read the
// counters themselves.
func (p *Poller) SetSnapshot(s Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest, p.err = s, nil
}

// Poll reads the counters once, stores the snapshot and calls the
// OnSnapshot functions. Concurrent calls run one after the other.
func (p *Poller) Poll(ctx context.Context) (Snapshot, error) {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()
	s, err := p.Reader.Read(ctx)
	p.mu.Lock()
	p.err = err
	if err == nil {
		p.latest = s
	}
	observes := append([]func(Snapshot){}, p.observes...)
	p.mu.Unlock()
	if err != nil {
		return s, err
	}
	for _, f := range observes {
		f(s)
	}
	return s, nil
}

// Version is the first line of `varnishstat -V` (read once by Run), "" before.
func (p *Poller) Version() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// Run reads the version once, then polls every Interval (default 2
// seconds) until ctx ends. Read errors are logged at most once per minute
// and do not stop the loop.
func (p *Poller) Run(ctx context.Context) {
	logger := p.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if v, err := p.Reader.Version(ctx); err == nil {
		p.mu.Lock()
		p.version = v
		p.mu.Unlock()
	} else if ctx.Err() == nil {
		logger.Warn("varnishstat -V failed: no varnish_version metric", "error", err)
	}
	interval := p.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	var lastLogged time.Time
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := p.Poll(ctx); err != nil && ctx.Err() == nil && time.Since(lastLogged) > time.Minute {
			logger.Warn("varnishstat read failed", "error", err)
			lastLogged = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
