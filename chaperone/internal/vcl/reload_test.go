package vcl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

// recorder is an Observer that keeps the results.
type recorder struct {
	mu      sync.Mutex
	results []error
}

func (r *recorder) ObserveReload(kind string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if kind != vcl.Kind {
		panic("unexpected kind " + kind)
	}
	r.results = append(r.results, err)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.results)
}

func backend(t *testing.T, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, name)
	}))
	t.Cleanup(s.Close)
	return s
}

func vclFor(s *httptest.Server, tag string) string {
	host, port, _ := strings.Cut(strings.TrimPrefix(s.URL, "http://"), ":")
	return fmt.Sprintf("vcl 4.1;\nbackend be { .host = %q; .port = %q; }\n"+
		"sub vcl_recv { return (pass); }\nsub vcl_deliver { set resp.http.X-Tag = %q; }\n", host, port, tag)
}

func get(t *testing.T, addr string) (string, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Header.Get("X-Tag"), string(b)
}

func TestReloader(t *testing.T) {
	addr := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{Listeners: []varnishd.Listener{{Name: "port-test", Addr: addr}}})
	obs := &recorder{}
	r := &vcl.Reloader{Admin: p.Admin, Keep: 2, Logger: varnishdtest.Logger(t), Observer: obs}
	ctx := context.Background()
	a, b := backend(t, "A"), backend(t, "B")

	if err := r.Load(ctx, vclFor(a, "one")); err != nil {
		t.Fatalf("load good VCL: %v", err)
	}
	if tag, body := get(t, addr); tag != "one" || body != "A" {
		t.Fatalf("after the first load: tag %q body %q, want one A", tag, body)
	}

	// The same source again is skipped.
	if err := r.Load(ctx, vclFor(a, "one")); err != nil || obs.count() != 1 {
		t.Fatalf("identical source: err %v, %d reloads observed, want nil and 1", err, obs.count())
	}

	// A VCL with a syntax error is a *CompileError with the compiler's
	// message; traffic keeps the running VCL.
	err := r.Load(ctx, "vcl 4.1;\nbackend be none;\nsub vcl_recv { nosuchthing; }\n")
	var ce *vcl.CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "nosuchthing") {
		t.Fatalf("bad VCL: err = %v, want a CompileError naming nosuchthing", err)
	}
	if tag, body := get(t, addr); tag != "one" || body != "A" {
		t.Fatalf("after a failed load: tag %q body %q, want one A", tag, body)
	}

	// More loads: only Keep main VCLs stay, the boot VCL is gone.
	for i, tag := range []string{"two", "three", "four"} {
		if err := r.Load(ctx, vclFor(b, tag)); err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		if got, body := get(t, addr); got != tag || body != "B" {
			t.Fatalf("after loading %s: tag %q body %q", tag, got, body)
		}
	}
	vcls, err := p.Admin.VCLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vcls {
		if v.Status != "discarded" {
			names = append(names, v.Name)
		}
	}
	if len(names) != 2 || names[len(names)-1] != r.Active() {
		t.Errorf("loaded VCLs = %v, want 2 main VCLs ending with the active %s", names, r.Active())
	}
	if n := obs.count(); n != 5 {
		t.Errorf("%d reloads observed, want 5 (4 good, 1 failed)", n)
	}
}

func TestWatchFile(t *testing.T) {
	addr := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{Listeners: []varnishd.Listener{{Name: "port-test", Addr: addr}}})
	r := &vcl.Reloader{Admin: p.Admin, Logger: varnishdtest.Logger(t)}
	a := backend(t, "A")
	path := filepath.Join(t.TempDir(), "main.vcl")
	if err := os.WriteFile(path, []byte(vclFor(a, "v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan error, 10)
	go r.WatchFile(ctx, path, 100*time.Millisecond, func(err error) { results <- err })

	next := func() error {
		t.Helper()
		select {
		case err := <-results:
			return err
		case <-time.After(60 * time.Second):
			t.Fatal("no reload result within 60 s")
			return nil
		}
	}
	if err := next(); err != nil {
		t.Fatalf("first load: %v", err)
	}
	if tag, _ := get(t, addr); tag != "v1" {
		t.Fatalf("tag %q, want v1", tag)
	}
	if err := os.WriteFile(path, []byte("vcl 4.1; this is not VCL"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *vcl.CompileError
	if err := next(); !errors.As(err, &ce) {
		t.Fatalf("broken file: %v, want a CompileError", err)
	}
	if err := os.WriteFile(path, []byte(vclFor(a, "v2")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := next(); err != nil {
		t.Fatalf("fixed file: %v", err)
	}
	if tag, _ := get(t, addr); tag != "v2" {
		t.Fatalf("tag %q, want v2", tag)
	}
}
