package drain_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/drain"
)

// fakeVarnish is pure logic: a session count the test lowers and a stop
// recorder.
type fakeVarnish struct {
	sessions atomic.Int64
	stops    atomic.Int32
	stopErr  error
}

func (f *fakeVarnish) live(context.Context) (uint64, error) { return uint64(f.sessions.Load()), nil }
func (f *fakeVarnish) stop(context.Context) error {
	f.stops.Add(1)
	return f.stopErr
}

func TestDrainWaitsForSessionsThenStops(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sessions int64
		timeout  time.Duration
		lower    bool
		stopErr  error
		wantErr  string // "" for nil
	}{
		{"no session", 0, 0, false, nil, ""},
		{"sessions close", 3, 0, true, nil, ""},
		{"timeout with sessions open", 3, 300 * time.Millisecond, false, nil, "drain timeout: 3 client sessions were still open after 300ms; varnishd was stopped with them"},
		{"stop fails", 0, 0, false, errors.New("no"), "stop varnishd after draining: no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeVarnish{stopErr: tc.stopErr}
			f.sessions.Store(tc.sessions)
			var started atomic.Bool
			d := &drain.Drainer{LiveSessions: f.live, Stop: f.stop, OnStart: func() { started.Store(true) },
				PollInterval: 10 * time.Millisecond, Timeout: tc.timeout}
			if tc.lower {
				go func() {
					for f.sessions.Load() > 0 {
						time.Sleep(50 * time.Millisecond)
						if f.stops.Load() != 0 {
							panic("stopped with sessions open")
						}
						f.sessions.Add(-1)
					}
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := d.Drain(ctx)
			if got := fmt.Sprint(err); (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(got, tc.wantErr) {
				t.Fatalf("Drain = %v, want %q", err, tc.wantErr)
			}
			var te *drain.TimeoutError
			if tc.timeout > 0 && (!errors.As(err, &te) || te.Sessions != 3) {
				t.Errorf("Drain = %#v, want a *TimeoutError with 3 sessions", err)
			}
			if !started.Load() || f.stops.Load() != 1 {
				t.Errorf("started %v, %d stops; want true, 1", started.Load(), f.stops.Load())
			}
		})
	}
}

func TestDrainIsOnceAndHandlerWaits(t *testing.T) {
	f := &fakeVarnish{}
	f.sessions.Store(1)
	d := &drain.Drainer{LiveSessions: f.live, Stop: f.stop, PollInterval: 10 * time.Millisecond}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	select {
	case <-d.Requested():
		t.Fatal("Requested is closed before any request")
	default:
	}

	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL+"/drain", "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	// The handlers wait while a session is open.
	time.Sleep(200 * time.Millisecond)
	select {
	case <-d.Done():
		t.Fatal("drain finished with a session open")
	default:
	}
	select {
	case <-d.Requested():
	default:
		t.Error("Requested is still open while requests wait")
	}
	f.sessions.Store(0)
	wg.Wait()
	for _, c := range codes {
		if c != 200 {
			t.Errorf("/drain answered %d, want 200", c)
		}
	}
	if n := f.stops.Load(); n != 1 {
		t.Errorf("%d stops, want 1", n)
	}
}

func TestDrainLogsProgress(t *testing.T) {
	f := &fakeVarnish{}
	f.sessions.Store(2)
	var logs syncBuf
	var counts []uint64
	var mu sync.Mutex
	d := &drain.Drainer{
		LiveSessions: f.live, Stop: f.stop,
		OnCount:      func(n uint64) { mu.Lock(); counts = append(counts, n); mu.Unlock() },
		PollInterval: 10 * time.Millisecond, ProgressInterval: 50 * time.Millisecond,
		Timeout: time.Minute,
		Logger:  slog.New(slog.NewJSONHandler(&logs, nil)),
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		f.sessions.Store(0)
	}()
	if err := d.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	progress := regexp.MustCompile(`"msg":"draining: 2 client sessions still open","sessions":2,"elapsed":"[0-9hms.]+","time_left":"[0-9hms.]+"`)
	if n := len(progress.FindAllString(out, -1)); n < 2 {
		t.Errorf("%d progress records with the session count and the time left, want the first count and at least one more:\n%s", n, out)
	}
	if !strings.Contains(out, `"msg":"draining: varnishd stopped"`) {
		t.Errorf("no stop record in:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(counts) < 2 || counts[0] != 2 || counts[len(counts)-1] != 0 {
		t.Errorf("counts = %v, want 2 ... 0", counts)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CloseConnections is called when the drain starts, retried before every
// count until it succeeds, and called again after CloseAgain.
func TestDrainClosesConnectionsAndRetries(t *testing.T) {
	f := &fakeVarnish{}
	f.sessions.Store(1)
	var calls, fails, closings atomic.Int32
	fails.Store(3)
	d := &drain.Drainer{
		LiveSessions: f.live, Stop: f.stop, PollInterval: 10 * time.Millisecond,
		CloseConnections: func(context.Context) error {
			calls.Add(1)
			if fails.Add(-1) >= 0 {
				return errors.New("main.vcl not loaded yet")
			}
			return nil
		},
		OnClosing: func() { closings.Add(1) },
	}
	go func() { _ = d.Drain(context.Background()) }() // the test watches its calls, not its result
	waitUntil(t, "CloseConnections to succeed", func() bool { return closings.Load() == 1 })
	if n := calls.Load(); n != 4 {
		t.Errorf("CloseConnections called %d times, want 4 (3 failures, then success)", n)
	}
	time.Sleep(50 * time.Millisecond)
	if n := calls.Load(); n != 4 {
		t.Errorf("CloseConnections called %d times after its success, want still 4", n)
	}
	d.CloseAgain() // a cache child restart
	waitUntil(t, "CloseConnections again", func() bool { return closings.Load() == 2 })
	f.sessions.Store(0)
	if err := d.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 5 {
		t.Errorf("CloseConnections called %d times, want 5", n)
	}
}

func TestHandlerAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sessions int64
		stopErr  error
		want     string
	}{
		{"drained", 0, nil, "200 drained"},
		{"timeout", 2, nil, "504 drain timeout: 2 client sessions were still open after 50ms"},
		{"stop fails", 0, errors.New("admin connection gone"), "500 stop varnishd after draining: admin connection gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeVarnish{stopErr: tc.stopErr}
			f.sessions.Store(tc.sessions)
			d := &drain.Drainer{LiveSessions: f.live, Stop: f.stop, PollInterval: 10 * time.Millisecond, Timeout: 50 * time.Millisecond}
			rec := httptest.NewRecorder()
			d.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/drain", nil))
			if got := fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String())); !strings.HasPrefix(got, tc.want) {
				t.Errorf("answer %q, want %q...", got, tc.want)
			}
		})
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
