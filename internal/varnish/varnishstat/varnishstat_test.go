package varnishstat_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishstat"
)

const sample = `{
  "version": 1,
  "timestamp": "2026-11-22T19:12:50",
  "counters": {
    "MGT.child_start": {"description": "Child process started", "flag": "c", "format": "i", "value": 2},
    "MAIN.sess_conn": {"description": "Sessions accepted", "flag": "c", "format": "i", "value": 9},
    "MAIN.sc_rem_close": {"description": "Session OK  REM_CLOSE", "flag": "c", "format": "i", "value": 3},
    "MAIN.sc_rx_close_idle": {"description": "Session Err RX_CLOSE_IDLE", "flag": "c", "format": "i", "value": 4},
    "MAIN.n_object": {"description": "object structs made", "flag": "g", "format": "i", "value": 7},
    "MEMPOOL.sess0.live": {"description": "In use", "flag": "g", "format": "i", "value": 1},
    "MEMPOOL.sess1.live": {"description": "In use", "flag": "g", "format": "i", "value": 1},
    "VBE.main-1.default.happy": {"description": "Happy health probes", "flag": "b", "format": "b", "value": 0},
    "GHOST.main-1.router.www.example.com.requests": {"description": "Requests that reached this vhost", "flag": "c", "format": "i", "value": 5},
    "GHOSTROUTER.main-1.router.reloads": {"description": "Reloads", "flag": "c", "format": "i", "value": 3}
  }
}`

func TestParseAndDerivedValues(t *testing.T) {
	s, err := varnishstat.Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := s.LiveSessions(); !ok || n != 2 {
		t.Errorf("LiveSessions = %d, %v; want 2, true", n, ok)
	}
	if s.ChildStarts() != 2 {
		t.Errorf("ChildStarts = %d, want 2", s.ChildStarts())
	}
	if _, ok := (varnishstat.Snapshot{}).LiveSessions(); ok {
		t.Error("LiveSessions of an empty snapshot is ok, want not ok")
	}
	for _, bad := range []string{"", "{", `{"version": 2, "counters": {}}`} {
		if _, err := varnishstat.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", bad)
		}
	}
}

func TestCollector(t *testing.T) {
	s, err := varnishstat.Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	p := &varnishstat.Poller{}
	p.SetSnapshot(s)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(varnishstat.Collector{Poller: p})
	want := `
# HELP varnish_ghost_requests_total Requests that reached this vhost
# TYPE varnish_ghost_requests_total counter
varnish_ghost_requests_total{router="router",vcl="main-1",vhost="www.example.com"} 5
# HELP varnish_ghostrouter_reloads_total Reloads
# TYPE varnish_ghostrouter_reloads_total counter
varnish_ghostrouter_reloads_total{router="router",vcl="main-1"} 3
# HELP varnish_main_n_object object structs made
# TYPE varnish_main_n_object gauge
varnish_main_n_object 7
# HELP varnish_main_sess_conn_total Sessions accepted
# TYPE varnish_main_sess_conn_total counter
varnish_main_sess_conn_total 9
# HELP varnish_mempool_live In use
# TYPE varnish_mempool_live gauge
varnish_mempool_live{id="sess0"} 1
varnish_mempool_live{id="sess1"} 1
# HELP varnish_mgt_child_start_total Child process started
# TYPE varnish_mgt_child_start_total counter
varnish_mgt_child_start_total 2
# HELP varnish_vbe_happy Happy health probes
# TYPE varnish_vbe_happy gauge
varnish_vbe_happy{id="main-1.default"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"varnish_ghost_requests_total", "varnish_ghostrouter_reloads_total", "varnish_main_n_object",
		"varnish_main_sess_conn_total", "varnish_mempool_live", "varnish_mgt_child_start_total", "varnish_vbe_happy"); err != nil {
		t.Error(err)
	}
}

// TestLiveSessionsAgainstRealConnections is the experiment behind
// LiveSessions, kept as a test: keep-alive connections idle after a request,
// a connection that never sent anything, connections closed by the client,
// and connections closed by varnishd's idle timeout.
func TestLiveSessionsAgainstRealConnections(t *testing.T) {
	addr := varnishdtest.FreeAddr(t)
	p := varnishdtest.Start(t, varnishd.Config{
		Listeners: []varnishd.Listener{{Name: "port-test", Addr: addr}},
		Params:    []string{"thread_pool_min=5", "thread_pools=2", "timeout_idle=3"},
	})
	r := varnishstat.Reader{Bin: varnishdtest.StatBin(t), WorkDir: p.WorkDir()}
	ctx := context.Background()

	waitLive := func(want uint64, what string) {
		t.Helper()
		var last varnishstat.Snapshot
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			s, err := r.Read(ctx)
			if err == nil {
				last = s
				if n, ok := s.LiveSessions(); ok && n == want {
					return
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		n, _ := last.LiveSessions()
		t.Fatalf("%s: LiveSessions = %d, want %d", what, n, want)
	}
	waitLive(0, "idle varnishd")

	// Exclude leaves fields out (varnishstat -X).
	all, err := r.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	noMain, err := varnishstat.Reader{Bin: r.Bin, WorkDir: r.WorkDir, Exclude: []string{"MAIN.*"}}.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !all.Has("MAIN.sess_conn") || noMain.Has("MAIN.sess_conn") || !noMain.Has("MGT.child_start") {
		t.Errorf("Exclude MAIN.*: MAIN.sess_conn read without %v, with %v; MGT.child_start with: %v",
			all.Has("MAIN.sess_conn"), noMain.Has("MAIN.sess_conn"), noMain.Has("MGT.child_start"))
	}

	// 3 keep-alive connections, each idle after one request, and one that
	// never sends anything.
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conns = append(conns, c)
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	waitLive(4, "3 idle keep-alive connections and a silent one")

	// The client closes two of them.
	conns[0].Close()
	conns[1].Close()
	waitLive(2, "after the client closed two")

	// varnishd closes the rest after timeout_idle (3 s).
	waitLive(0, "after timeout_idle")
	conns[2].Close()
	silent.Close()
}
