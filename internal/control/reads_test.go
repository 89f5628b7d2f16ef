package control

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadCache: one read per key however many callers ask at once;
// errors are not kept; a write to the object, its subresource, its
// collection or its namespace forgets it, a write elsewhere does not; a
// ttl expires; a nil cache reads every time.
func TestReadCache(t *testing.T) {
	const key = "/apis/gateway.networking.k8s.io/v1/namespaces/ns/gateways/gw"
	var reads atomic.Int64
	get := func() (any, error) { reads.Add(1); time.Sleep(10 * time.Millisecond); return "v", nil }
	r := &readCache{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if v, err := r.read(key, 0, get); v != "v" || err != nil {
				t.Errorf("read = %v, %v", v, err)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("20 concurrent callers made %d reads, want 1", n)
	}

	for _, tc := range []struct {
		write  string
		forget bool
	}{
		{key, true},
		{key + "/status", true},
		{"/apis/gateway.networking.k8s.io/v1/namespaces/ns/gateways", true}, // create
		{"/api/v1/namespaces/ns", true},                                     // the namespace deleted
		{"/apis/gateway.networking.k8s.io/v1/namespaces/ns/gateways/gw2", false},
		{"/apis/gateway.networking.k8s.io/v1/namespaces/ns/httproutes/gw", false},
		{"/apis/gateway.networking.k8s.io/v1/namespaces/other/gateways/gw", false},
	} {
		_, _ = r.read(key, 0, get)
		before := reads.Load()
		r.forget(tc.write)
		_, _ = r.read(key, 0, get)
		if forgot := reads.Load() > before; forgot != tc.forget {
			t.Errorf("a write to %s: read again %v, want %v", tc.write, forgot, tc.forget)
		}
	}

	fail := errors.New("boom")
	if _, err := r.read("/k", 0, func() (any, error) { return nil, fail }); !errors.Is(err, fail) {
		t.Errorf("err = %v, want %v", err, fail)
	}
	if v, err := r.read("/k", 0, get); v != "v" || err != nil {
		t.Errorf("after an error: %v, %v; want a new read", v, err)
	}

	before := reads.Load()
	_, _ = r.read("/ttl", time.Millisecond, get)
	time.Sleep(5 * time.Millisecond)
	_, _ = r.read("/ttl", time.Millisecond, get)
	if n := reads.Load() - before; n != 2 {
		t.Errorf("an expired entry: %d reads, want 2", n)
	}

	var none *readCache
	before = reads.Load()
	_, _ = none.read(key, 0, get)
	_, _ = none.read(key, 0, get)
	if n := reads.Load() - before; n != 2 {
		t.Errorf("nil cache: %d reads, want 2", n)
	}
	none.forget(key) // must not panic
}
