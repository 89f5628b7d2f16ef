package control

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestPollPending: what a wait for pending items reports when it ends.
func TestPollPending(t *testing.T) {
	refused := errors.New("connection refused")
	fatal := errors.New("rejected")
	for _, tc := range []struct {
		name     string
		checks   []error // the checks' errors in turn; nil: "pod-a" pending; then checks block until cut short
		wantLeft string
		wantErr  error // nil: wait.Interrupted
	}{
		{"pending, then cut short", []error{nil}, "pod-a", nil},
		{"pending, failed, then cut short", []error{nil, refused}, "pod-a (the last check failed: connection refused)", nil},
		{"failed, then pending", []error{refused, nil}, "pod-a", nil},
		{"fatal", []error{nil, fatal}, "pod-a", fatal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			check := func(ctx context.Context) ([]string, error) {
				calls++
				if calls <= len(tc.checks) {
					if err := tc.checks[calls-1]; err != nil {
						return nil, err
					}
					return []string{"pod-a"}, nil
				}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			left, err := pollPending(context.Background(), 10*time.Millisecond, 300*time.Millisecond, check,
				func(err error) bool { return errors.Is(err, fatal) })
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) || tc.wantErr == nil && !wait.Interrupted(err) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if got := left.String(); got != tc.wantLeft {
				t.Errorf("left = %q, want %q", got, tc.wantLeft)
			}
		})
	}
}
