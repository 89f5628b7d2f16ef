package invalidation

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recorder is a Ban that records its calls and fails the first failures
// ones.
type recorder struct {
	mu       sync.Mutex
	bans     [][]string
	failures int
}

func (r *recorder) ban(_ context.Context, args []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures > 0 {
		r.failures--
		return errors.New("varnishadm: ban: 300 Cache child not running")
	}
	r.bans = append(r.bans, args)
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bans)
}

type fixture struct {
	t   *testing.T
	dyn dynamic.Interface
	gw  object.Ref
}

func newFixture(t *testing.T) *fixture {
	cp := testenv.Get(t)
	if err := vgwapi.EnsureCRDs(t.Context(), apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dyn: dynamic.NewForConfigOrDie(cp.Config), gw: object.Ref{Namespace: cp.Namespace(t), Name: "edge"}}
}

// run starts an Applier of pod until the returned stop is called.
func (f *fixture) run(pod string, ban func(context.Context, []string) error, childStart time.Time, reg prometheus.Registerer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	a := New(Config{Dynamic: f.dyn, Gateway: f.gw, Pod: vgwapi.Pod{Name: pod}, Ban: ban,
		ChildStart: func() time.Time { return childStart }, Metrics: reg})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil && ctx.Err() == nil {
			f.t.Errorf("Run: %v", err)
		}
	}()
	stop = func() { cancel(); <-done }
	f.t.Cleanup(stop)
	return stop
}

func (f *fixture) create(spec vgwapi.InvalidationSpec) string {
	f.t.Helper()
	obj, err := vgwapi.NewInvalidation(f.gw, "", spec)
	if err != nil {
		f.t.Fatal(err)
	}
	obj, err = f.dyn.Resource(vgwapi.CacheInvalidations).Namespace(f.gw.Namespace).Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return string(obj.GetUID())
}

func (f *fixture) ack(pod, uid string) vgwapi.InvalidationReport {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		reports, err := vgwapi.ReadReports(context.Background(), f.dyn, f.gw)
		if err == nil {
			if a := reports[pod].Invalidation(uid); a != nil {
				return *a
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("%s did not acknowledge %s", pod, uid)
	return vgwapi.InvalidationReport{}
}

var tagged = vgwapi.InvalidationSpec{Tags: []string{"a", "b"}}

// TestApplierRetriesAndRestarts: a ban varnishd refuses is retried and
// the invalidation acknowledged only once every ban went through (the
// failures counted); a chaperone that restarts does not ban again what
// its report acknowledges.
func TestApplierRetriesAndRestarts(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{failures: 2}
	reg := prometheus.NewRegistry()
	stop := f.run("pod-1", rec.ban, time.Time{}, reg)
	uid := f.create(tagged)
	if a := f.ack("pod-1", uid); a.Bans != 2 || a.Error != "" || a.Skipped {
		t.Errorf("acknowledgement %+v, want 2 bans", a)
	}
	if n := rec.count(); n != 2 {
		t.Errorf("%d bans went through, want 2", n)
	}
	want := `
# HELP varnishgw_chaperone_invalidation_ban_failures_total Bans varnishd did not take (the invalidation is retried).
# TYPE varnishgw_chaperone_invalidation_ban_failures_total counter
varnishgw_chaperone_invalidation_ban_failures_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "varnishgw_chaperone_invalidation_ban_failures_total"); err != nil {
		t.Error(err)
	}
	stop()

	// Restarted: the report says it is done.
	f.run("pod-1", rec.ban, time.Time{}, nil)
	uid2 := f.create(vgwapi.InvalidationSpec{Tags: []string{"c"}})
	f.ack("pod-1", uid2)
	if n := rec.count(); n != 3 {
		t.Errorf("%d bans after the restart, want 3: the first invalidation was banned again", n)
	}
}

// TestApplierSkipsWhatIsOlderThanTheCache: an invalidation created more
// than skew before the cache child started is acknowledged without a ban;
// a newer one is applied.
func TestApplierSkipsWhatIsOlderThanTheCache(t *testing.T) {
	f := newFixture(t)
	old := f.create(tagged)
	rec := &recorder{}
	// The child "started" 10 s from now: everything so far is older.
	f.run("pod-1", rec.ban, time.Now().Add(10*time.Second), nil)
	if a := f.ack("pod-1", old); !a.Skipped || a.Bans != 0 {
		t.Errorf("acknowledgement %+v, want skipped", a)
	}
	if n := rec.count(); n != 0 {
		t.Errorf("%d bans for an invalidation older than the cache", n)
	}

	g := newFixture(t)
	rec2 := &recorder{}
	g.run("pod-2", rec2.ban, time.Now().Add(-time.Minute), nil)
	fresh := g.create(tagged)
	if a := g.ack("pod-2", fresh); a.Skipped || a.Bans != 2 {
		t.Errorf("acknowledgement %+v, want 2 bans", a)
	}
}
