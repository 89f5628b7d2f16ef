package routingsync

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// staticSource is a Source whose state the test sets.
type staticSource struct {
	mu      sync.Mutex
	st      *State
	changed func()
	ready   chan struct{}
}

func newStaticSource() *staticSource { return &staticSource{ready: make(chan struct{})} }

func (s *staticSource) Run(ctx context.Context, changed func()) error {
	s.mu.Lock()
	s.changed = changed
	s.mu.Unlock()
	close(s.ready)
	changed()
	<-ctx.Done()
	return nil
}

func (s *staticSource) State() (*State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		return nil, ErrNotSynced
	}
	return s.st, nil
}

func (s *staticSource) set(st *State) {
	<-s.ready
	s.mu.Lock()
	s.st = st
	f := s.changed
	s.mu.Unlock()
	f()
}

// oneRouteState routes host to the endpoint b of Service ns/app.
func oneRouteState(t *testing.T, host string, b backend) *State {
	gw := testGateway("ns")
	svc := service("ns", "app")
	f, err := routing.Attach(gw, testRoute("ns", "r", host, "ns", "app"), &routing.Objects{Services: []*corev1.Service{svc}})
	if err != nil {
		t.Fatal(err)
	}
	return &State{Gateway: gw, Fragments: []*routing.Fragment{f}, Objects: &routing.Objects{
		Services:       []*corev1.Service{svc},
		EndpointSlices: []*discoveryv1.EndpointSlice{endpointSlice("ns", "app-1", "app", b, true)},
	}}
}

// TestRejectedReloadKeepsLastGood feeds ghost a file it refuses and checks
// that the last good file is back on disk, traffic keeps flowing and the
// rejection is reported with ghost's message; a byte-identical state is
// skipped; Resync reloads anyway.
func TestRejectedReloadKeepsLastGood(t *testing.T) {
	g := startGhost(t)
	be := backends(t, "127.0.0.1", "be1")
	src := newStaticSource()
	var res results
	s, err := New(Config{Source: src, Path: g.GhostJSON, Logger: testLogger(t), OnResult: res.add,
		Reloader: ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: g.AdminAddr}), Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	if s.Loaded() {
		t.Fatal("Loaded() before the first state")
	}
	src.set(oneRouteState(t, "a.example.com", be["be1"]))
	servedBy(t, g.HTTPAddr, "a.example.com", "be1")
	if !s.Loaded() {
		t.Fatal("Loaded() false after the first load")
	}
	good, err := os.ReadFile(g.GhostJSON)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(g.GhostJSON); fi.Mode().Perm()&0o004 == 0 {
		t.Errorf("ghost.json mode %v is not world-readable", fi.Mode())
	}

	r := s.apply(context.Background(), func(w io.Writer) error {
		_, err := io.WriteString(w, `{"version": 3, "backends": [], "vhosts": []}`)
		return err
	}, false, Result{})
	if r.Outcome != OutcomeRejected || !ghostadmin.IsRejected(r.Err) || !strings.Contains(r.Err.Error(), "version") {
		t.Fatalf("apply of a bad file: %+v", r)
	}
	if now, _ := os.ReadFile(g.GhostJSON); string(now) != string(good) {
		t.Fatalf("the rejected file was not replaced by the last good one:\n%s", now)
	}
	servedBy(t, g.HTTPAddr, "a.example.com", "be1")
	// what a restarted child would load: the restored file
	if ans, err := s.cfg.Reloader.Reload(context.Background()); err != nil || ans.Routes != 1 {
		t.Fatalf("reload of the restored file: %+v, %v", ans, err)
	}

	// Same state again: byte-identical, skipped.
	res.mu.Lock()
	n := len(res.all)
	res.mu.Unlock()
	src.set(oneRouteState(t, "a.example.com", be["be1"]))
	res.waitFor(t, "unchanged", func(r Result) bool { return r.Outcome == OutcomeUnchanged })
	res.mu.Lock()
	for _, r := range res.all[n:] {
		if r.Outcome == OutcomeReloaded {
			t.Errorf("identical state reloaded: %+v", r)
		}
	}
	res.mu.Unlock()

	// Resync reloads even when unchanged.
	if err := s.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	res.mu.Lock()
	last := res.all[len(res.all)-1]
	res.mu.Unlock()
	if last.Outcome != OutcomeReloaded {
		t.Errorf("Resync: %+v", last)
	}

	// After another good reload, a rejection restores that one, not the
	// first.
	src.set(oneRouteState(t, "b.example.com", be["be1"]))
	servedBy(t, g.HTTPAddr, "b.example.com", "be1")
	good2, err := os.ReadFile(g.GhostJSON)
	if err != nil {
		t.Fatal(err)
	}
	if string(good2) == string(good) {
		t.Fatal("second state wrote the same file")
	}
	r = s.apply(context.Background(), func(w io.Writer) error {
		_, err := io.WriteString(w, "{")
		return err
	}, false, Result{})
	if r.Outcome != OutcomeRejected {
		t.Fatalf("apply of a bad file: %+v", r)
	}
	if now, _ := os.ReadFile(g.GhostJSON); string(now) != string(good2) {
		t.Fatalf("restored file is not the last good one:\n%s", now)
	}
	servedBy(t, g.HTTPAddr, "b.example.com", "be1")
	ents, _ := os.ReadDir(g.Dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") || strings.HasSuffix(e.Name(), ".link-tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

// TestReloadRetriedWhileGhostDown checks that a sync that cannot reach ghost
// (nothing listens on port 1) is reported as an error, not a rejection, and
// retried.
func TestReloadRetriedWhileGhostDown(t *testing.T) {
	be := backends(t, "127.0.0.1", "be1")
	dir := t.TempDir()
	src := newStaticSource()
	var res results
	s, err := New(Config{Source: src, Path: dir + "/ghost.json", Logger: testLogger(t), OnResult: res.add,
		Reloader:      ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: "127.0.0.1:1", RetryMax: 1, RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond}),
		RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	src.set(oneRouteState(t, "a.example.com", be["be1"]))
	r := res.waitFor(t, "error", func(r Result) bool { return r.Outcome == OutcomeError })
	if ghostadmin.IsRejected(r.Err) {
		t.Errorf("a transport error is reported as a rejection: %v", r.Err)
	}
	// it keeps retrying
	eventually(t, 30*time.Second, "retries", func() error {
		res.mu.Lock()
		defer res.mu.Unlock()
		if len(res.all) < 3 {
			return errNotYet
		}
		return nil
	})
	if s.Loaded() {
		t.Error("Loaded() without a successful reload")
	}
}
