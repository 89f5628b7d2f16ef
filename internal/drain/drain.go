// Package drain empties varnishd before the pod goes away: once started
// (SIGTERM, or /drain from the varnish container's preStop hook in sidecar
// mode) it counts the live client sessions every second, logs progress every
// 10 seconds, and when none is left (or the timeout has passed) stops the
// cache child through the admin connection.
package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Drainer runs one drain; Drain may be called many times and from many
// goroutines, the first call starts it and every call waits for its end.
type Drainer struct {
	// LiveSessions counts the open client sessions.
	LiveSessions func(ctx context.Context) (uint64, error)
	// Stop stops varnishd's cache child (varnishadm stop).
	Stop func(ctx context.Context) error
	// OnStart is called once when the drain starts, before the first count
	// (readiness turns 503 there).
	OnStart func()
	// OnCount gets every count (for a metric); may be nil.
	OnCount func(n uint64)
	// PollInterval is the time between counts (default 1 s).
	PollInterval time.Duration
	// ProgressInterval is the time between progress logs (default 10 s).
	ProgressInterval time.Duration
	// Timeout ends the wait for sessions to close (0: wait until ctx ends).
	Timeout time.Duration
	Logger  *slog.Logger

	once sync.Once
	done chan struct{}
	err  error
	mu   sync.Mutex
}

func (d *Drainer) init() {
	d.mu.Lock()
	if d.done == nil {
		d.done = make(chan struct{})
	}
	d.mu.Unlock()
}

// Done is closed when the drain has finished.
func (d *Drainer) Done() <-chan struct{} {
	d.init()
	return d.done
}

// Drain starts the drain if it is not running and waits until it ends or ctx
// ends. The drain itself runs with its own lifetime (a caller going away
// does not stop it).
func (d *Drainer) Drain(ctx context.Context) error {
	d.init()
	d.once.Do(func() { go d.run() })
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Drainer) run() {
	defer close(d.done)
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	poll, progress := d.PollInterval, d.ProgressInterval
	if poll <= 0 {
		poll = time.Second
	}
	if progress <= 0 {
		progress = 10 * time.Second
	}
	if d.OnStart != nil {
		d.OnStart()
	}
	start := time.Now()
	ctx := context.Background()
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	logger.Info("draining: waiting for client sessions to close", "timeout", d.Timeout.String())
	lastLog := time.Now()
	for {
		n, err := d.LiveSessions(ctx)
		if err == nil && d.OnCount != nil {
			d.OnCount(n)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("draining: counting sessions failed", "error", err)
		case err == nil && n == 0:
			logger.Info("draining: no client session left", "elapsed", time.Since(start).Round(time.Millisecond).String())
			d.err = d.stop(logger)
			return
		case err == nil && time.Since(lastLog) >= progress:
			logger.Info("draining: client sessions still open", "sessions", n, "elapsed", time.Since(start).Round(time.Second).String())
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			logger.Warn("draining: timeout, stopping with sessions open", "sessions", n, "timeout", d.Timeout.String())
			d.err = d.stop(logger)
			return
		case <-time.After(poll):
		}
	}
}

func (d *Drainer) stop(logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := d.Stop(ctx); err != nil {
		logger.Error("draining: stopping varnishd failed", "error", err)
		return fmt.Errorf("stop varnishd after draining: %w", err)
	}
	logger.Info("draining: varnishd stopped")
	return nil
}

// Handler serves /drain: it starts the drain (if not running) and answers
// 200 only when it is done, 500 if stopping varnishd failed. The varnish
// container's preStop hook calls it in sidecar mode.
func (d *Drainer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := d.Drain(r.Context()); err != nil {
			if errors.Is(err, context.Canceled) {
				return
			}
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "drained")
	})
}
