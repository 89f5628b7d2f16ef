package gatewaystatus

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// writer is the one status writer of the package, which each writer type
// (Writer, ListenerWriter, ListenerSetWriter, AttachedRoutesWriter,
// RouteWriter) runs with what it writes: desired values of type V by key
// K (one key for a writer of one field, one per object otherwise). Its
// set and setAll never block; run applies, until ctx ends, each key's
// value that differs from the one applied last, retrying failures with
// backoff (500 ms doubling up to 30 s). The first failure of a run of
// failures is logged at WARN, the retries at DEBUG, the recovery at INFO.
type writer[K comparable, V any] struct {
	// what names what is written, in logs.
	what string
	log  *slog.Logger
	// same reports whether two values make the same write.
	same func(a, b V) bool
	// apply writes the value of a key. errSoon: not written yet, tried
	// again after soon, without counting as a failure.
	apply func(ctx context.Context, k K, v V) error
	// order is the order in which keys are applied; nil: any.
	order func(a, b K) int
	// forget: a value once applied is dropped rather than recorded, so
	// that the next set of an equal value is applied again (the writer's
	// value depends on more than it sees).
	forget bool
	soon   time.Duration
	now    func() time.Time

	mu      sync.Mutex
	want    map[K]V
	applied map[K]V
	kick    chan struct{}
}

// errSoon is an apply that could not write yet and is tried again soon.
var errSoon = errors.New("not yet")

func newWriter[K comparable, V any](log *slog.Logger, what string, same func(a, b V) bool, apply func(context.Context, K, V) error) *writer[K, V] {
	return &writer[K, V]{
		what: what, log: log, same: same, apply: apply, now: time.Now,
		want: map[K]V{}, applied: map[K]V{}, kick: make(chan struct{}, 1),
	}
}

// set records the desired value of k and wakes run.
func (w *writer[K, V]) set(k K, v V) {
	w.mu.Lock()
	w.want[k] = v
	w.mu.Unlock()
	w.wake()
}

// setAll replaces the desired values of every key (a key left out is no
// longer written) and wakes run when one differs from what it applied.
func (w *writer[K, V]) setAll(want map[K]V) {
	want = maps.Clone(want)
	if want == nil {
		want = map[K]V{}
	}
	w.mu.Lock()
	w.want = want
	pending := false
	for k, v := range want {
		if a, ok := w.applied[k]; !ok || !w.same(a, v) {
			pending = true
		}
	}
	w.mu.Unlock()
	if pending {
		w.wake()
	}
}

// unset drops the desired value of k.
func (w *writer[K, V]) unset(k K) {
	w.mu.Lock()
	delete(w.want, k)
	w.mu.Unlock()
}

// wanted is the desired value of k, if any.
func (w *writer[K, V]) wanted(k K) (V, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.want[k]
	return v, ok
}

// wake wakes run without blocking: one pending wake-up is enough.
func (w *writer[K, V]) wake() { kick(w.kick) }

func kick(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run applies the desired values until ctx ends.
func (w *writer[K, V]) run(ctx context.Context) {
	retryLoop(ctx, w.kick, w.log, w.now, w.what, w.applyPending)
}

// applyPending applies the desired value of each key that differs from
// the one applied last, and forgets the keys no longer desired; the errors
// of all keys that failed, joined.
func (w *writer[K, V]) applyPending(ctx context.Context) error {
	w.mu.Lock()
	want := maps.Clone(w.want)
	for k := range w.applied {
		if _, ok := want[k]; !ok {
			delete(w.applied, k)
		}
	}
	applied := maps.Clone(w.applied)
	w.mu.Unlock()
	keys := slices.Collect(maps.Keys(want))
	if w.order != nil {
		slices.SortFunc(keys, w.order)
	}
	var errs []error
	again := false
	for _, k := range keys {
		v := want[k]
		if a, ok := applied[k]; ok && w.same(a, v) {
			continue
		}
		if err := w.apply(ctx, k, v); errors.Is(err, errSoon) {
			again = true
			continue
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		w.mu.Lock()
		if cur, ok := w.want[k]; ok && w.same(cur, v) {
			if w.forget {
				delete(w.want, k)
			} else {
				w.applied[k] = v
			}
		}
		w.mu.Unlock()
	}
	if again {
		time.AfterFunc(w.soon, w.wake)
	}
	return errors.Join(errs...)
}

// retryLoop calls apply after every kick until it succeeds, retrying
// failures with backoff (500 ms doubling up to 30 s), until ctx ends. The
// first failure of a run of failures is logged at WARN, the retries at
// DEBUG, the recovery at INFO with how long the failures lasted; what
// names what is written.
func retryLoop(ctx context.Context, kick <-chan struct{}, log *slog.Logger, now func() time.Time, what string, apply func(context.Context) error) {
	backoff := 500 * time.Millisecond
	var retry <-chan time.Time
	var failingSince time.Time // zero while applies succeed
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
			if failingSince.IsZero() {
				failingSince = now()
				log.Warn("cannot set "+what+"; retrying until it works", "error", err, "retry_in", backoff)
			} else {
				log.Debug("cannot set "+what, "error", err, "retry_in", backoff)
			}
			retry = time.After(backoff)
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		if !failingSince.IsZero() {
			log.Info(what+" set again", "after", now().Sub(failingSince).Round(time.Millisecond).String())
			failingSince = time.Time{}
		}
		backoff = 500 * time.Millisecond
	}
}
