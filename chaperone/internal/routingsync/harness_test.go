package routingsync

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// ghostVarnish is a real varnishd running the real ghost VMOD with a
// minimal main.vcl.
type ghostVarnish struct {
	Dir       string // world-readable; holds ghost.json
	GhostJSON string
	HTTPAddr  string // socket "port-8080"
	AdminAddr string // socket "ghost-admin"
}

// startGhost starts varnishd (varnishdtest.Start: boot VCL, admin
// connection, killed when the test ends) with listener sockets port-8080
// and ghost-admin on free loopback ports, and makes a main.vcl with the
// ghost VMOD active that reads ghost.json in a world-readable directory.
func startGhost(t testing.TB) *ghostVarnish {
	t.Helper()
	so := varnishdtest.GhostVMOD(t)
	dir := filepath.Dir(so)
	g := &ghostVarnish{Dir: dir, GhostJSON: filepath.Join(dir, "ghost.json"),
		HTTPAddr: varnishdtest.FreeAddr(t), AdminAddr: varnishdtest.FreeAddr(t)}
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners:      []varnishd.Listener{{Name: "port-8080", Addr: g.HTTPAddr}},
		GhostAdminAddr: g.AdminAddr,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.Admin.VCLInline(ctx, "main", varnishdtest.MainVCL(so, g.GhostJSON)); err != nil {
		t.Fatalf("load main.vcl: %v", err)
	}
	if err := p.Admin.VCLUse(ctx, "main"); err != nil {
		t.Fatalf("use main.vcl: %v", err)
	}
	eventually(t, 60*time.Second, "varnishd answers through main.vcl", func() error {
		code, body, err := get(g.HTTPAddr, "nothing.example")
		if err == nil && code == 503 && strings.Contains(body, "starting") {
			return fmt.Errorf("boot VCL still answers: %d %s", code, body)
		}
		return err
	})
	return g
}

var plainClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// get requests / on addr with the Host header host and returns the status
// and body.
func get(addr, host string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := plainClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// eventually polls f until it returns nil or the (generous) deadline
// passes.
func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// servedBy polls until requests for host are answered 200 by exactly the
// backends named in want (each seen, no other seen in 30 requests).
func servedBy(t testing.TB, addr, host string, want ...string) {
	t.Helper()
	eventually(t, 60*time.Second, host+" served by "+strings.Join(want, ","), func() error {
		seen := map[string]bool{}
		for range 30 {
			code, body, err := get(addr, host)
			if err != nil {
				return err
			}
			if code != 200 {
				return fmt.Errorf("status %d: %s", code, body)
			}
			seen[body] = true
		}
		for _, w := range want {
			if !seen[w] {
				return fmt.Errorf("%s not seen; seen %v", w, seen)
			}
		}
		if len(seen) != len(want) {
			return fmt.Errorf("seen %v", seen)
		}
		return nil
	})
}

// answers polls until host is answered with status code.
func answers(t testing.TB, addr, host string, code int) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%s answers %d", host, code), func() error {
		got, body, err := get(addr, host)
		if err != nil {
			return err
		}
		if got != code {
			return fmt.Errorf("status %d: %s", got, body)
		}
		return nil
	})
}

// backend is a test HTTP server that answers its name.
type backend struct {
	IP   string
	Port int32
}

// backends starts one HTTP server per name on ip; each answers its name.
func backends(t testing.TB, ip string, names ...string) map[string]backend {
	t.Helper()
	out := map[string]backend{}
	for _, name := range names {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name)
		})}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		out[name] = backend{IP: ip, Port: int32(l.Addr().(*net.TCPAddr).Port)}
	}
	return out
}

// results collects the Syncer's results.
type results struct {
	mu  sync.Mutex
	all []Result
}

func (r *results) add(res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, res)
}

// waitFor polls until a result satisfies f and returns it.
func (r *results) waitFor(t testing.TB, what string, f func(Result) bool) Result {
	t.Helper()
	var found Result
	eventually(t, 60*time.Second, what, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, res := range r.all {
			if f(res) {
				found = res
				return nil
			}
		}
		return fmt.Errorf("%d results, none matches", len(r.all))
	})
	return found
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// runSyncer starts s.Run and stops it when the test ends.
func runSyncer(t testing.TB, s *Syncer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
