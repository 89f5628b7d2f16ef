// Package drain empties varnishd before the pod goes away: once started
// (SIGTERM, or a request on the drain socket from the varnish container's
// preStop hook in sidecar mode) it has varnishd close every client
// connection after its current response, counts the live client sessions
// every second, logs progress at the first count and every 10 seconds
// (sessions left, time left before the timeout), and when none is left (or
// the timeout has passed) stops the cache child through the admin
// connection.
//
// The drain socket (Listen, Request) is a Unix socket of mode 0600 on the
// pod's shared state volume: only a process of the pod, as the chaperone's
// user, can start a drain. Nothing reachable over the network can.
package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
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
	// CloseConnections has varnishd close every client connection after
	// its current response (ghost's POST /.varnish-ghost/drain), so
	// keep-alive clients move to other pods at once. It is called when
	// the drain starts and again before every count until it succeeds,
	// and once more after CloseAgain. May be nil.
	CloseConnections func(ctx context.Context) error
	// OnClosing is called each time CloseConnections succeeds (for a
	// metric); may be nil.
	OnClosing func()
	// PollInterval is the time between counts (default 1 s).
	PollInterval time.Duration
	// ProgressInterval is the time between progress logs (default 10 s).
	ProgressInterval time.Duration
	// Timeout ends the wait for sessions to close (0: wait until ctx ends).
	Timeout time.Duration
	Logger  *slog.Logger

	once          sync.Once
	done          chan struct{}
	err           error
	mu            sync.Mutex
	closeAgain    atomic.Bool
	requested     chan struct{}
	requestedOnce sync.Once
}

// TimeoutError is the result of a drain that the timeout ended with client
// sessions still open; varnishd was stopped all the same.
type TimeoutError struct {
	Sessions uint64
	Timeout  time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("drain timeout: %d client sessions were still open after %s; varnishd was stopped with them (raise --drain-timeout, and terminationGracePeriodSeconds with it, for longer requests)", e.Sessions, e.Timeout)
}

// CloseAgain makes a running drain call CloseConnections again: after a
// cache child restart (or, in sidecar mode, a new varnishd) the new child
// does not know about the drain. Before a drain it changes nothing: a drain
// calls CloseConnections first thing anyway.
func (d *Drainer) CloseAgain() { d.closeAgain.Store(true) }

func (d *Drainer) init() {
	d.mu.Lock()
	if d.done == nil {
		d.done = make(chan struct{})
		d.requested = make(chan struct{})
	}
	d.mu.Unlock()
}

// Requested is closed when the first request reached Handler (a drain
// asked for through the drain socket). A server shut down gracefully
// after that still gives the request its answer.
func (d *Drainer) Requested() <-chan struct{} {
	d.init()
	return d.requested
}

// Done is closed when the drain has finished.
func (d *Drainer) Done() <-chan struct{} {
	d.init()
	return d.done
}

// Drain starts the drain if it is not running and waits until it ends or ctx
// ends. The drain itself runs with its own lifetime (a caller going away
// does not stop it). The result is nil when no session was left, a
// *TimeoutError when the timeout ended the wait, or the error of stopping
// varnishd.
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
	lastLog, first := time.Now(), true
	closing, lastCloseWarn := d.CloseConnections == nil, time.Time{}
	for {
		if d.closeAgain.Swap(false) && d.CloseConnections != nil {
			closing = false
		}
		if !closing {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := d.CloseConnections(cctx)
			cancel()
			switch {
			case err == nil:
				closing = true
				logger.Info("draining: client connections close after their current response")
				if d.OnClosing != nil {
					d.OnClosing()
				}
			case time.Since(lastCloseWarn) >= progress:
				// e.g. main.vcl (with ghost) not loaded yet: tried again
				// before every count
				logger.Warn("draining: cannot make client connections close after their response yet; keep-alive clients stay until they close", "error", err)
				lastCloseWarn = time.Now()
			}
		}
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
		case err == nil && (first || time.Since(lastLog) >= progress):
			// The first count, then every ProgressInterval: how many
			// sessions are left and how long the drain may still wait.
			attrs := []any{"sessions", n, "elapsed", time.Since(start).Round(time.Second).String()}
			if d.Timeout > 0 {
				attrs = append(attrs, "time_left", max(0, d.Timeout-time.Since(start)).Round(time.Second).String())
			}
			logger.Info(fmt.Sprintf("draining: %d client sessions still open", n), attrs...)
			lastLog = time.Now()
		}
		if err == nil {
			first = false
		}
		select {
		case <-ctx.Done():
			logger.Warn("draining: timeout, stopping with sessions open", "sessions", n, "timeout", d.Timeout.String())
			d.err = d.stop(logger)
			if d.err == nil {
				d.err = &TimeoutError{Sessions: n, Timeout: d.Timeout}
			}
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

// Handler serves a drain request: it starts the drain (if not running) and
// answers 200 "drained" only when it is done, 504 when the timeout ended it
// with sessions open, 500 if stopping varnishd failed. It is served on the
// drain socket only (Listen), never on a TCP port.
func (d *Drainer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.init()
		d.requestedOnce.Do(func() { close(d.requested) })
		err := d.Drain(r.Context())
		var te *TimeoutError
		switch {
		case err == nil:
			fmt.Fprintln(w, "drained")
		case errors.Is(err, context.Canceled):
		case errors.As(err, &te):
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}
