package routingsync

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ghost.json")
	for _, content := range []string{"one", "two, longer"} {
		if err := WriteFileAtomic(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", fi.Mode().Perm())
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("no error for a missing directory")
	}
}

func TestReferencedBackends(t *testing.T) {
	pct := int32(10)
	tests := []struct {
		name  string
		frags []*routing.Fragment
		want  map[string][]string
	}{
		{"none", nil, map[string][]string{}},
		{"backends, mirror, duplicates, nil fragment", []*routing.Fragment{
			nil,
			{Rules: []routing.Rule{{
				Backends: []routing.BackendRef{{Namespace: "b", Name: "y"}, {Namespace: "a", Name: "x"}, {Namespace: "b", Name: "x"}},
				Filters:  []routing.Filter{{Type: "RequestMirror", RequestMirror: &routing.MirrorRef{Backend: routing.BackendRef{Namespace: "c", Name: "m"}, Percent: &pct}}},
			}}},
			{Rules: []routing.Rule{{Backends: []routing.BackendRef{{Namespace: "b", Name: "y"}, {Namespace: "", Name: "ignored"}}}}},
		}, map[string][]string{"a": {"x"}, "b": {"x", "y"}, "c": {"m"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := referencedBackends(tc.frags); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEndpointCounts(t *testing.T) {
	doc := &ghostjson.Document{Version: ghostjson.Version,
		Backends: []ghostjson.Backend{{Name: "ns/a:80", Endpoints: make([]ghostjson.Endpoint, 2)}, {Name: "ns/b:80"}, {Name: "ns/mirror:80", Endpoints: make([]ghostjson.Endpoint, 1)}},
		VHosts: []ghostjson.VHost{{Hostname: "a", Routes: []ghostjson.Route{
			{Backends: []ghostjson.BackendGroup{{Backend: "ns/a:80"}, {Backend: "ns/b:80"}, {Backend: "other/c:80", Unresolved: ghostjson.UnresolvedRefNotPermitted}}},
			{Backends: []ghostjson.BackendGroup{{Backend: "ns/a:80", Unresolved: ghostjson.UnresolvedRefNotPermitted}, {Backend: "ns/a:80"}}},
		}}}}
	want := map[string]int{"ns/a:80": 2, "ns/b:80": 0, "other/c:80": 0}
	if got := EndpointCounts(doc); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestReloaderRetries checks which answers are retried: transport errors
// and plain 5xx yes, ghost's JSON rejections and 4xx never.
func TestReloaderRetries(t *testing.T) {
	tests := []struct {
		name         string
		answers      []func(w http.ResponseWriter)
		wantCalls    int32
		wantRejected bool
		wantErr      bool
	}{
		{"ok", []func(http.ResponseWriter){ok}, 1, false, false},
		{"503 then ok", []func(http.ResponseWriter){plain(503), ok}, 2, false, false},
		{"ghost rejection 400", []func(http.ResponseWriter){rejected(400)}, 1, true, true},
		{"json error 500 is a rejection", []func(http.ResponseWriter){rejected(500)}, 1, true, true},
		{"403 not retried", []func(http.ResponseWriter){plain(403)}, 1, true, true},
		{"503 until the retries end", []func(http.ResponseWriter){plain(503), plain(503), plain(503)}, 3, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				if r.Method != http.MethodPost || r.URL.Path != ghostadmin.ReloadPath {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				tc.answers[min(int(n), len(tc.answers))-1](w)
			}))
			defer srv.Close()
			r := ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: strings.TrimPrefix(srv.URL, "http://"), RetryMax: 2,
				RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond})
			ans, err := r.Reload(context.Background())
			if (err != nil) != tc.wantErr || ghostadmin.IsRejected(err) != tc.wantRejected {
				t.Fatalf("err = %v, want error %v rejected %v", err, tc.wantErr, tc.wantRejected)
			}
			if err == nil && ans.Generation != 7 {
				t.Errorf("answer %+v", ans)
			}
			if tc.wantRejected {
				var re *ghostadmin.RejectedError
				errors.As(err, &re)
				if !strings.Contains(re.Message, "vhosts[0]") && re.StatusCode != 403 {
					t.Errorf("message %q does not carry ghost's error", re.Message)
				}
			}
			if calls.Load() != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls.Load(), tc.wantCalls)
			}
		})
	}
	// transport error: nothing listens
	r := ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: "127.0.0.1:1", RetryMax: 1, RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond})
	if _, err := r.Reload(context.Background()); err == nil || ghostadmin.IsRejected(err) {
		t.Errorf("transport error: err = %v", err)
	}
}

func ok(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok","generation":7,"vhosts":1,"routes":1,"endpoints":1,"backends":1,"duration_ms":0.1}`))
}

func plain(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

func rejected(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write([]byte(`{"status":"error","generation":3,"error":"vhosts[0].hostname: bad"}`))
	}
}
