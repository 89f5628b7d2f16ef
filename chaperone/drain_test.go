package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// keepAliveClient sends requests one after the other over one HTTP/1.1
// connection, as long as the server keeps it; when a response says
// "Connection: close" it checks that the server closes the connection and
// sends the next request on a new one.
type keepAliveClient struct {
	addr string

	mu        sync.Mutex
	responses []kaResponse
	errs      []string
	stop      chan struct{}
	done      chan struct{}
}

type kaResponse struct {
	conn         int    // 1 for the first connection
	close        bool   // Connection: close
	serverClosed bool   // the server closed the connection after it
	vcl          string // X-VCL
}

func startKeepAliveClient(t *testing.T, addr string) *keepAliveClient {
	k := &keepAliveClient{addr: addr, stop: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	t.Cleanup(k.Stop)
	return k
}

func (k *keepAliveClient) run() {
	defer close(k.done)
	var conn net.Conn
	var br *bufio.Reader
	conns := 0
	fail := func(format string, a ...any) {
		k.mu.Lock()
		k.errs = append(k.errs, fmt.Sprintf(format, a...))
		k.mu.Unlock()
		if conn != nil {
			conn.Close()
			conn = nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		select {
		case <-k.stop:
			if conn != nil {
				conn.Close()
			}
			return
		default:
		}
		if conn == nil {
			c, err := net.Dial("tcp", k.addr)
			if err != nil {
				fail("dial: %v", err)
				continue
			}
			conn, br = c, bufio.NewReader(c)
			conns++
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n"); err != nil {
			fail("request on connection %d: %v", conns, err)
			continue
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			fail("response on connection %d: %v", conns, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			fail("status %d on connection %d", resp.StatusCode, conns)
			continue
		}
		r := kaResponse{conn: conns, close: resp.Close, vcl: resp.Header.Get("X-VCL")}
		if r.close {
			// varnishd closes its end: the next read sees EOF.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := br.ReadByte()
			r.serverClosed = err == io.EOF
			conn.Close()
			conn = nil
		}
		k.mu.Lock()
		k.responses = append(k.responses, r)
		k.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the client and closes its connection.
func (k *keepAliveClient) Stop() {
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	<-k.done
}

func (k *keepAliveClient) snapshot() ([]kaResponse, []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.responses), slices.Clone(k.errs)
}

// TestDrainClosesKeepAliveConnections: once SIGTERM starts the drain, a
// keep-alive client that sends continuously gets "Connection: close",
// varnishd closes the connection after that response and the next request
// goes on a new connection; a request in flight completes; it holds across
// a VCL reload and a routing reload. No request fails.
func TestDrainClosesKeepAliveConnections(t *testing.T) {
	release := make(chan struct{})
	slowArrived := make(chan struct{}, 1)
	be := backendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			slowArrived <- struct{}{}
			<-release
			fmt.Fprint(w, "slow")
			return
		}
		fmt.Fprint(w, "A")
	})
	c := startChaperone(t, be, "--param", "timeout_idle=120")
	c.wantTraffic("A", "v1")

	k := startKeepAliveClient(t, c.ListenAddr)
	c.WaitFor("keep-alive traffic", 90*time.Second, func() bool { rs, _ := k.snapshot(); return len(rs) >= 20 })
	if rs, errs := k.snapshot(); len(errs) > 0 || slices.ContainsFunc(rs, func(r kaResponse) bool { return r.conn != 1 || r.close }) {
		t.Fatalf("before the drain: %d responses not all on one kept connection, errors %v", len(rs), errs)
	}

	// An idle keep-alive connection holds the drain open while the test
	// runs (the continuous client alone reconnects, and a count between
	// two of its connections may find no session and end the drain).
	idle := c.keepAlive()
	defer idle.Close()

	// A request in flight when the drain starts.
	inflight, err := net.Dial("tcp", c.ListenAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer inflight.Close()
	fmt.Fprintf(inflight, "GET /slow HTTP/1.1\r\nHost: app.example.com\r\n\r\n")
	select {
	case <-slowArrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the slow request did not reach the backend")
	}

	c.Cmd.Process.Signal(syscall.SIGTERM)
	c.WaitFor("readiness 503", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 503 })
	c.WaitFor("ghost told about the drain", 90*time.Second, func() bool {
		return c.metric("varnishgw_chaperone_drain_closing_connections") == 1
	})

	close(release)
	inflight.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(inflight)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "slow" || !resp.Close {
		t.Errorf("the request in flight: %d %q Connection: close %v, want 200 slow true", resp.StatusCode, body, resp.Close)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer to the request in flight: read %v, want EOF (varnishd closes)", err)
	}

	// The continuous client: from some response on, every response closes
	// its connection, varnishd closes it, and the next request is on a
	// new connection.
	nAtDrain := 0
	c.WaitFor("5 answers with Connection: close", 90*time.Second, func() bool {
		rs, _ := k.snapshot()
		closes := 0
		for i, r := range rs {
			if r.close {
				if closes == 0 {
					nAtDrain = i
				}
				closes++
			}
		}
		return closes >= 5
	})
	checkClosing := func(what string, from int) []kaResponse {
		t.Helper()
		rs, errs := k.snapshot()
		if len(errs) > 0 {
			t.Errorf("%s: failed requests: %v", what, errs)
		}
		for i := from; i < len(rs); i++ {
			r := rs[i]
			if !r.close || !r.serverClosed {
				t.Errorf("%s: response %d: Connection: close %v, closed by varnishd %v; want both", what, i, r.close, r.serverClosed)
			}
			if i > from && r.conn != rs[i-1].conn+1 {
				t.Errorf("%s: response %d on connection %d after one on connection %d, want a new connection", what, i, r.conn, rs[i-1].conn)
			}
		}
		return rs
	}
	checkClosing("after the drain started", nAtDrain)

	// A VCL reload during the drain.
	chaperonetest.WriteFile(t, c.VCLPath, mainVCL(c.GhostPath, "v2"))
	c.WaitFor("answers from the new VCL", 90*time.Second, func() bool {
		rs, _ := k.snapshot()
		n := 0
		for _, r := range rs {
			if r.vcl == "v2" {
				n++
			}
		}
		return n >= 3
	})
	checkClosing("after a VCL reload", nAtDrain)
	// ghost's flag is the VMOD's, which both VCLs share; the chaperone
	// tells the new VCL's ghost all the same (it would matter for a VCL
	// that imports another copy of ghost, and does after a cache child
	// restart).
	c.WaitFor("the drain told again after the VCL reload", 30*time.Second, func() bool {
		return strings.Count(c.Out.String(), "draining: client connections close after their current response") >= 2
	})

	// A routing reload during the drain.
	reloads := c.metric(`varnishgw_chaperone_reloads_total{kind="ghost",result="ok"}`)
	chaperonetest.WriteFile(t, c.GhostPath, strings.Replace(chaperonetest.GhostJSON(be.URL), `"vhosts": [`, `"vhosts": [{"hostname": "other.example.com", "routes": []},`, 1))
	c.WaitFor("a ghost reload", 90*time.Second, func() bool {
		return c.metric(`varnishgw_chaperone_reloads_total{kind="ghost",result="ok"}`) > reloads
	})
	rs, _ := k.snapshot()
	c.WaitFor("3 more answers", 90*time.Second, func() bool { more, _ := k.snapshot(); return len(more) >= len(rs)+3 })
	checkClosing("after a routing reload", nAtDrain)
	k.Stop()
	c.WaitFor("ghost's drain_closes counter in /metrics", 90*time.Second, func() bool {
		_, m := c.Health("/metrics")
		return strings.Contains(m, "varnish_ghostrouter_drain_closes_total{")
	})

	// No client left: the drain ends.
	idle.Close()
	select {
	case <-c.Exited:
	case <-time.After(120 * time.Second):
		t.Fatal("chaperone did not exit after the clients left")
	}
	if c.ExitErr != nil {
		t.Errorf("chaperone exit: %v, want status 0", c.ExitErr)
	}
}

func backendFunc(t testing.TB, h http.HandlerFunc) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// TestOnlyListenersAndProbesFaceTheNetwork: with the Gateway listener and
// the health port on every address, every other TCP socket the chaperone
// and varnishd listen on (the admin connection's -M listener, ghost's admin
// socket) is bound to loopback, varnishd has no CLI port (-T none), and
// the health port has nothing that changes state: no /drain, whatever the
// method.
func TestOnlyListenersAndProbesFaceTheNetwork(t *testing.T) {
	listenPort := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	healthPort := varnishdtest.Port(t, varnishdtest.FreeAddr(t))
	c := launchChaperone(t, varnishdtest.Dir(t), chaperonetest.Backend(t, "A"), "127.0.0.1:"+strconv.Itoa(listenPort),
		"--listen-host=", "--health-addr", ":"+strconv.Itoa(healthPort))
	c.HealthAddr = "127.0.0.1:" + strconv.Itoa(healthPort)
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	c.wantTraffic("A", "v1")

	pids := append([]int{c.Cmd.Process.Pid}, varnishdtest.Descendants(c.Cmd.Process.Pid)...)
	socks := varnishdtest.ListeningTCP(t, pids)
	t.Logf("listening sockets: %v", socks)
	var public []int
	loopbackPorts := map[int]bool{} // port: seen on loopback
	for _, s := range socks {
		if s.Addr().IsLoopback() {
			loopbackPorts[int(s.Port())] = true
			continue
		}
		public = append(public, int(s.Port()))
	}
	slices.Sort(public)
	public = slices.Compact(public)
	want := []int{listenPort, healthPort}
	slices.Sort(want)
	if !slices.Equal(public, want) {
		t.Errorf("ports on non-loopback addresses %v (all sockets %v), want only the listener and the health port %v", public, socks, want)
	}
	// On loopback: ghost's admin socket and the -M listener the chaperone
	// closes once varnishd has connected.
	if ghostPort := varnishdtest.Port(t, c.GhostAdmin); !loopbackPorts[ghostPort] {
		t.Errorf("ghost's admin port %d is not among the loopback sockets %v", ghostPort, socks)
	}
	// varnishd's manager has no CLI port (-T none): it listens on the
	// listener and ghost's admin socket only.
	manager := childrenOf(t, c.Cmd.Process.Pid, "varnishd")
	if len(manager) != 1 {
		t.Fatalf("chaperone children = %v, want varnishd's manager only", manager)
	}
	for _, s := range varnishdtest.ListeningTCP(t, manager) {
		if p := int(s.Port()); p != listenPort && p != varnishdtest.Port(t, c.GhostAdmin) {
			t.Errorf("varnishd's manager listens on %s, neither the listener nor ghost's admin socket: a CLI port (-T)?", s)
		}
	}

	// The health port changes nothing.
	for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
		for _, path := range []string{"/drain", "/stop", "/quit", "/.varnish-ghost/drain", "/.varnish-ghost/reload"} {
			req, _ := http.NewRequest(method, "http://"+c.HealthAddr+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 404 && resp.StatusCode != 405 {
				t.Errorf("%s %s on the health port = %d, want 404 or 405", method, path, resp.StatusCode)
			}
		}
	}
	if code, body := c.Health("/readyz"); code != 200 {
		t.Errorf("/readyz after the requests = %d %s, want 200 (not draining)", code, body)
	}
	if code, _, h := c.get(); code != 200 || h.Get("Connection") == "close" {
		t.Errorf("traffic after the requests: %d Connection %q, want 200 keep-alive", code, h.Get("Connection"))
	}
}

// TestDrainLogsProgress: a drain waiting for a slow request logs the
// sessions left and the time left at its first count and again 10 seconds
// later, then completes the request and exits 0.
func TestDrainLogsProgress(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(60 * time.Second):
		}
		io.WriteString(w, "slow")
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c := startChaperone(t, slow, "--drain-timeout=90s")
	got := make(chan string, 1)
	go func() {
		_, body, _ := c.get()
		got <- body
	}()
	c.WaitFor("the slow request in flight", 30*time.Second, func() bool {
		return c.metric(`varnish_mempool_live{id="sess0"}`) == 1
	})
	must(t, c.Cmd.Process.Signal(syscall.SIGTERM))
	progress := func() []string {
		var lines []string
		for _, l := range strings.Split(c.Out.String(), "\n") {
			if strings.Contains(l, `"msg":"draining: 1 client sessions still open","sessions":1`) && strings.Contains(l, `"time_left":"`) {
				lines = append(lines, l)
			}
		}
		return lines
	}
	c.WaitFor("the first progress line", 30*time.Second, func() bool { return len(progress()) >= 1 })
	start := time.Now()
	c.WaitFor("a second progress line 10 s later", 30*time.Second, func() bool { return len(progress()) >= 2 })
	if d := time.Since(start); d < 7*time.Second {
		t.Errorf("second progress line %s after the first, want about 10 s", d)
	}
	lines := progress()
	if !strings.Contains(lines[1], `"time_left":"1m`) {
		t.Errorf("second progress line %s, want about 80 s left of the 90 s drain timeout", lines[1])
	}
	close(release)
	if body := <-got; body != "slow" {
		t.Errorf("the request in flight got %q, want slow", body)
	}
	select {
	case <-c.Exited:
	case <-time.After(60 * time.Second):
		t.Fatal("chaperone did not exit after the last session")
	}
	if c.ExitErr != nil {
		t.Errorf("exit: %v, want status 0", c.ExitErr)
	}
}
