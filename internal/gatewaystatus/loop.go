package gatewaystatus

import (
	"context"
	"log/slog"
	"time"
)

// kick wakes the loop that reads ch (retryLoop) without blocking: one
// pending wake-up is enough.
func kick(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// retryLoop calls apply after every kick until it succeeds, retrying
// failures with backoff (500 ms doubling up to 30 s), until ctx ends. The
// first failure of a run of failures is logged at WARN, the retries at
// DEBUG, the recovery at INFO; what names what is written.
func retryLoop(ctx context.Context, kick <-chan struct{}, log *slog.Logger, what string, apply func(context.Context) error) {
	backoff := 500 * time.Millisecond
	var retry <-chan time.Time
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-retry:
		}
		retry = nil
		if err := apply(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				log.Warn("cannot set "+what+"; retrying until it works", "error", err, "retry_in", backoff)
			} else {
				log.Debug("cannot set "+what, "error", err, "retry_in", backoff)
			}
			failing = true
			retry = time.After(backoff)
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		if failing {
			log.Info(what + " set again")
		}
		failing = false
		backoff = 500 * time.Millisecond
	}
}
