package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// TestAccessLog runs the chaperone with --access-log: a real varnishd with
// ghost, and the varnishncsa the chaperone starts. Every client request
// gives one JSON line on the chaperone's stdout with the route, the
// backend group and endpoint, the status, the timing and the request ID
// (the client's, or the one ghost made, which the backend received), with
// the gateway's main.vcl (internal/mainvcl) and varnishd defaults: a route
// with a cache policy logs a miss, then a hit; lines
// stay valid JSON (and UTF-8) with hostile header values; ghost's admin
// requests (the chaperone's reloads) are not logged; varnishncsa is
// restarted when it dies, and dies with the chaperone.
func TestAccessLog(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}    // X-Request-Id values the backend received
	trace := map[string]string{} // traceparent, tracestate of /kept
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Request-Id")] = true
		if r.URL.Path == "/kept" {
			trace["traceparent"], trace["tracestate"] = r.Header.Get("traceparent"), r.Header.Get("tracestate")
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, "A")
	}))
	t.Cleanup(be.Close)
	c := startChaperone(t, be, "--access-log", "--varnishncsa", varnishdtest.NcsaBin(t))
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(be.URL, "http://"))
	// The gateway's own main.vcl, and a route with a cache policy: the
	// access log tells a miss from a hit with the gateway's varnishd
	// defaults (vsl_mask) in force.
	chaperonetest.WriteFile(t, c.VCLPath, mainvcl.Render(mainvcl.Options{VMOD: build.GhostVMOD, GhostJSON: c.GhostPath}))
	chaperonetest.WriteFile(t, c.GhostPath, fmt.Sprintf(`{"version": 2, "backends": [
  {"name": "shop/web:80", "endpoints": [{"address": %q, "port": %s}]},
  {"name": "shop/gone:80", "endpoints": []}
], "cachePolicies": [{"name": "gateway", "ttlMs": 60000}],
"vhosts": [
  {"hostname": "app.example.com", "routes": [
    {"name": "shop/web/0/0", "match": {"path": {"type": "PathPrefix", "value": "/"}},
     "backends": [{"backend": "shop/web:80", "weight": 1}]},
    {"name": "shop/web/1/0", "match": {"path": {"type": "PathPrefix", "value": "/none"}},
     "backends": [{"backend": "shop/gone:80", "weight": 1}]},
    {"name": "shop/web/2/0", "match": {"path": {"type": "PathPrefix", "value": "/cached"}},
     "backends": [{"backend": "shop/web:80", "weight": 1}], "cache": "gateway"}]}
]}`, host, port))
	c.WaitFor("the named routes and the gateway's main.vcl", 30*time.Second, func() bool {
		req, _ := http.NewRequest("GET", "http://"+c.ListenAddr+"/none", nil)
		req.Host = "app.example.com"
		resp, err := noKeepAlive.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 500 && resp.Header.Get("X-VCL") == ""
	})
	// The lines so far (earlier requests) are not the test's.
	time.Sleep(2 * time.Second)
	before := len(accessLines(t, c))

	send := func(path, hostHdr string, hdrs ...string) int {
		req, _ := http.NewRequest("GET", "http://"+c.ListenAddr+path, nil)
		req.Host = hostHdr
		for i := 0; i+1 < len(hdrs); i += 2 {
			req.Header.Set(hdrs[i], hdrs[i+1])
		}
		resp, err := noKeepAlive.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send("/kept?q=1", "app.example.com", "X-Request-Id", "req-abc-1",
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"); code != 200 {
		t.Fatalf("GET /kept: %d", code)
	}
	if code := send("/made", "app.example.com"); code != 200 {
		t.Fatalf("GET /made: %d", code)
	}
	if code := send("/none", "app.example.com"); code != 500 {
		t.Fatalf("GET /none: %d", code)
	}
	if code := send("/", "unknown.example.com"); code != 404 {
		t.Fatalf("GET unknown host: %d", code)
	}
	for range 2 {
		if code := send("/cached", "app.example.com"); code != 200 {
			t.Fatalf("GET /cached: %d", code)
		}
	}
	// Hostile header values, sent raw: quotes, backslashes, JSON
	// delimiters, a tab, bytes that are not UTF-8 (varnishd refuses control characters and DEL with 400).
	hostile := "GET /hostile HTTP/1.1\r\nHost: app.example.com\r\n" +
		"User-Agent: a\"b\\c\td},{\"x\":\"\xff\xfe\xc3\x28 \u00e9\r\n" +
		"Referer: \"\r\nX-Request-Id: \"},\"status\":1\r\nConnection: close\r\n\r\n"
	conn, err := net.Dial("tcp", c.ListenAddr)
	must(t, err)
	io.WriteString(conn, hostile)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	must(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	conn.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("hostile request: %d", resp.StatusCode)
	}

	var lines []map[string]any
	c.WaitFor("7 access log lines", 30*time.Second, func() bool {
		lines = accessLines(t, c)[before:]
		return len(lines) >= 7
	})
	time.Sleep(2 * time.Second)
	lines = accessLines(t, c)[before:]
	if len(lines) != 7 {
		t.Fatalf("%d access log lines for 7 requests:\n%v", len(lines), lines)
	}
	byURL := map[string]map[string]any{}
	// The handling of the two GET /cached. varnishncsa writes a request's
	// line when its whole group ends, and a miss's group includes the
	// backend fetch, which may end after the hit that followed: the lines
	// come in either order, so the pair is compared sorted.
	var cached []string
	for _, l := range lines {
		byURL[fmt.Sprint(l["url"])] = l
		if l["url"] == "/cached" {
			cached = append(cached, fmt.Sprint(l["handling"]))
		}
		for _, k := range []string{"time", "request_id", "client", "method", "host", "url", "status", "bytes", "duration_us", "ttfb_s", "route", "backend", "endpoint", "vxid"} {
			if _, ok := l[k]; !ok {
				t.Errorf("access log line without %q: %v", k, l)
			}
		}
		if d, _ := l["duration_us"].(float64); d <= 0 {
			t.Errorf("duration_us = %v, want a positive number: %v", l["duration_us"], l)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000-0700", fmt.Sprint(l["time"])); err != nil {
			t.Errorf("time %v: %v", l["time"], err)
		}
	}
	check := func(url string, status float64, route, backend string) map[string]any {
		t.Helper()
		l := byURL[url]
		if l == nil {
			t.Fatalf("no access log line for %s in %v", url, lines)
		}
		if l["status"] != status || l["route"] != route || l["backend"] != backend || l["method"] != "GET" {
			t.Errorf("%s: status %v route %q backend %q method %v, want %v %q %q GET", url, l["status"], l["route"], l["backend"], l["method"], status, route, backend)
		}
		return l
	}
	kept := check("/kept?q=1", 200, "shop/web/0/0", "shop/web:80")
	if kept["request_id"] != "req-abc-1" || kept["endpoint"] != net.JoinHostPort(host, port) || kept["host"] != "app.example.com" {
		t.Errorf("/kept: request_id %v endpoint %v host %v, want req-abc-1, %s:%s, app.example.com", kept["request_id"], kept["endpoint"], kept["host"], host, port)
	}
	if d, _ := kept["duration_us"].(float64); d < 20000 {
		t.Errorf("/kept: duration_us %v, want at least the backend's 20 ms", d)
	}
	// The fields whose records the gateway's vsl_mask keeps
	// (varnishd.DefaultParams): the body size, protocol, handling and time
	// to first byte are real values, not varnishncsa's "-" or empty.
	if kept["bytes"] != 1.0 || kept["protocol"] != "HTTP/1.1" || kept["handling"] != "pass" || kept["client"] != "127.0.0.1" {
		t.Errorf("/kept: bytes %v protocol %v handling %v client %v, want 1 HTTP/1.1 pass 127.0.0.1", kept["bytes"], kept["protocol"], kept["handling"], kept["client"])
	}
	if f, _ := kept["ttfb_s"].(float64); f < 0.02 {
		t.Errorf("/kept: ttfb_s %v, want at least the backend's 20 ms", kept["ttfb_s"])
	}
	made := check("/made", 200, "shop/web/0/0", "shop/web:80")
	id := fmt.Sprint(made["request_id"])
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("/made: request_id %q, want 32 hex digits made by ghost", id)
	}
	mu.Lock()
	if !seen[id] || !seen["req-abc-1"] {
		t.Errorf("the backend received request IDs %v, want %q and req-abc-1", seen, id)
	}
	if trace["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || trace["tracestate"] != "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" {
		t.Errorf("the backend received trace context %v, want the client's unchanged", trace)
	}
	mu.Unlock()
	check("/none", 500, "shop/web/1/0", "shop/gone:80")
	check("/", 404, "", "")
	h := check("/hostile", 200, "shop/web/0/0", "shop/web:80")
	if ua := fmt.Sprint(h["user_agent"]); !strings.Contains(ua, `a"b\c`) || !strings.Contains(ua, "\uFFFD") {
		t.Errorf("hostile user_agent logged as %q, want the quotes and backslash kept and the bad bytes as U+FFFD", ua)
	}
	if rid := fmt.Sprint(h["request_id"]); len(rid) != 32 {
		t.Errorf("hostile X-Request-Id logged as %q, want it replaced by a made one", rid)
	}
	check("/cached", 200, "shop/web/2/0", "shop/web:80")
	slices.Sort(cached)
	if !slices.Equal(cached, []string{"hit", "miss"}) {
		t.Errorf("handling of the two GET /cached = %v, want one hit and one miss", cached)
	}

	// varnishncsa killed: started again; killed chaperone: gone.
	pids := func() []int {
		var out []int
		for _, pid := range varnishdtest.Descendants(c.Cmd.Process.Pid) {
			if comm(pid) == "varnishncsa" {
				out = append(out, pid)
			}
		}
		return out
	}
	first := pids()
	if len(first) != 1 {
		t.Fatalf("varnishncsa processes under the chaperone: %v, want 1", first)
	}
	must(t, syscall.Kill(first[0], syscall.SIGKILL))
	c.WaitFor("varnishncsa started again", 30*time.Second, func() bool {
		p := pids()
		return len(p) == 1 && p[0] != first[0]
	})
	// It logs the requests from its start on (it tails the log).
	n := len(accessLines(t, c))
	c.WaitFor("a line from the new varnishncsa", 30*time.Second, func() bool {
		send("/again", "app.example.com")
		time.Sleep(500 * time.Millisecond)
		return len(accessLines(t, c)) > n
	})
	if v := c.metric("varnishgw_chaperone_access_log_restarts_total"); v != 1 {
		t.Errorf("varnishgw_chaperone_access_log_restarts_total = %v, want 1", v)
	}
	second := pids()
	varnishPids := varnishdtest.Descendants(c.Cmd.Process.Pid)
	t.Cleanup(func() {
		for _, pid := range varnishPids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	must(t, syscall.Kill(c.Cmd.Process.Pid, syscall.SIGKILL))
	<-c.Exited
	deadline := time.Now().Add(10 * time.Second)
	for comm(second[0]) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("varnishncsa %d still runs 10 s after the chaperone was killed", second[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// accessLines parses the chaperone's stdout: every line must be valid
// UTF-8 and one JSON object.
func accessLines(t *testing.T, c *chaperone) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(c.Stdout.String(), "\n") {
		if line == "" {
			continue
		}
		if !utf8.ValidString(line) {
			t.Fatalf("access log line is not UTF-8: %q", line)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("access log line is not a JSON object: %v: %q", err, line)
		}
		if _, bad := rec["access_log_error"]; bad {
			t.Fatalf("varnishncsa wrote a line that is not JSON: %q", line)
		}
		out = append(out, rec)
	}
	return out
}
