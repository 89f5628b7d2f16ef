package gatewaystatus

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// TestWriterApplyPending checks the generic writer's bookkeeping without
// an API server: what is applied, in which order, and what is recorded.
func TestWriterApplyPending(t *testing.T) {
	type call struct {
		key string
		val int
	}
	for _, tc := range []struct {
		name      string
		forget    bool
		applied   map[string]int
		want      map[string]int
		fail      map[string]error
		calls     []call
		err       string
		after     map[string]int // applied after the call
		wantAfter map[string]int // want after the call
	}{
		{name: "new values applied in order, recorded",
			want: map[string]int{"b": 2, "a": 1}, calls: []call{{"a", 1}, {"b", 2}},
			after: map[string]int{"a": 1, "b": 2}, wantAfter: map[string]int{"a": 1, "b": 2}},
		{name: "values applied already skipped",
			applied: map[string]int{"a": 1, "b": 1}, want: map[string]int{"a": 1, "b": 2}, calls: []call{{"b", 2}},
			after: map[string]int{"a": 1, "b": 2}, wantAfter: map[string]int{"a": 1, "b": 2}},
		{name: "keys no longer wanted forgotten",
			applied: map[string]int{"gone": 1}, want: map[string]int{"a": 1}, calls: []call{{"a", 1}},
			after: map[string]int{"a": 1}, wantAfter: map[string]int{"a": 1}},
		{name: "failures joined, not recorded; later keys still applied",
			want: map[string]int{"a": 1, "b": 2}, fail: map[string]error{"a": errors.New("boom")}, calls: []call{{"a", 1}, {"b", 2}},
			err: "boom", after: map[string]int{"b": 2}, wantAfter: map[string]int{"a": 1, "b": 2}},
		{name: "not yet: neither recorded nor a failure",
			want: map[string]int{"a": 1}, fail: map[string]error{"a": errSoon}, calls: []call{{"a", 1}},
			after: map[string]int{}, wantAfter: map[string]int{"a": 1}},
		{name: "forget: an applied value leaves want, and is not recorded",
			forget: true, want: map[string]int{"a": 1}, calls: []call{{"a", 1}},
			after: map[string]int{}, wantAfter: map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []call
			w := newWriter(slog.Default(), "test values", func(a, b int) bool { return a == b },
				func(_ context.Context, k string, v int) error {
					calls = append(calls, call{k, v})
					return tc.fail[k]
				})
			w.order = strings.Compare
			w.forget = tc.forget
			for k, v := range tc.applied {
				w.applied[k] = v
			}
			w.setAll(tc.want)
			err := w.applyPending(context.Background())
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			if !slices.Equal(calls, tc.calls) {
				t.Errorf("applied %v, want %v", calls, tc.calls)
			}
			if !mapsEqual(w.applied, tc.after) {
				t.Errorf("recorded %v, want %v", w.applied, tc.after)
			}
			if !mapsEqual(w.want, tc.wantAfter) {
				t.Errorf("want %v, want %v", w.want, tc.wantAfter)
			}
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestWriterSetAllWakes checks that setAll wakes the loop only when a
// value differs from what it applied.
func TestWriterSetAllWakes(t *testing.T) {
	w := newWriter(slog.Default(), "test values", func(a, b int) bool { return a == b },
		func(context.Context, string, int) error { return nil })
	w.applied["a"] = 1
	w.setAll(map[string]int{"a": 1})
	if len(w.kick) != 0 {
		t.Error("woken for a value applied already")
	}
	w.setAll(map[string]int{"a": 2})
	if len(w.kick) != 1 {
		t.Error("not woken for a changed value")
	}
}
