package apiwatch

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResourceOf(t *testing.T) {
	for _, tc := range []struct{ url, key string }{
		{"/api/v1/namespaces/gw/configmaps?labelSelector=a%3Db&watch=true", "configmaps ns=gw labelSelector=a=b"},
		{"/api/v1/namespaces/gw/configmaps?fieldSelector=metadata.name%3Dx", "configmaps ns=gw fieldSelector=metadata.name=x"},
		{"/apis/gateway.networking.k8s.io/v1/namespaces/gw/gateways/edge/status", "gateways.gateway.networking.k8s.io ns=gw name=edge"},
		{"/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices", "endpointslices.discovery.k8s.io ns=shop"},
		{"/api/v1/namespaces/shop", "namespaces name=shop"},
		{"/apis/gateway.networking.k8s.io/v1/gatewayclasses", "gatewayclasses.gateway.networking.k8s.io"},
		{"/readyz", "/readyz"},
	} {
		req := httptest.NewRequest("GET", tc.url, nil)
		if key, _ := resourceOf(req); key != tc.key {
			t.Errorf("resourceOf(%s) = %q, want %q", tc.url, key, tc.key)
		}
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type records struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *records) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *records) list(t *testing.T) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		out = append(out, rec)
	}
	return out
}

// TestOutageLoggedOnceAndAged drives a Monitor through an API server that
// answers, fails with 503, refuses connections and answers again, with
// several retries in each state: one WARN when it breaks, one INFO when it
// is back, and the sync age grows during the outage only.
func TestOutageLoggedOnceAndAged(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	clk := &clock{t: time.Unix(1000, 0)}
	var logs records
	m := newMonitor(slog.New(slog.NewJSONHandler(&logs, nil)), clk.now)
	client := &http.Client{Transport: m.WrapTransport(http.DefaultTransport)}
	url := srv.URL + "/api/v1/namespaces/gw/configmaps?labelSelector=x"
	get := func() {
		resp, err := client.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	age := func() float64 { return testutil.ToFloat64(prometheus.Collector(ageOnly{m})) }

	get()
	if a, _ := m.Status(); a != 0 {
		t.Errorf("age before the first sync = %v, want the time since the start (0 on this clock)", a)
	}
	clk.add(5 * time.Second)
	if a, _ := m.Status(); a != 5*time.Second {
		t.Errorf("age before the first sync = %v, want 5s since the start", a)
	}
	var synced atomic.Bool
	m.SetSynced(synced.Load)
	synced.Store(true)
	if a := age(); a != 0 {
		t.Errorf("age in sync = %v, want 0", a)
	}

	status.Store(503)
	for range 3 {
		clk.add(time.Second)
		get()
	}
	if a, broken := m.Status(); a != 2*time.Second || broken != 1 {
		t.Errorf("during a 503 outage: age %v, %d broken; want 2s (since the first failure), 1", a, broken)
	}
	// A refused connection is the same outage.
	srv.Listener.Close()
	for range 3 {
		clk.add(time.Second)
		get()
	}
	if a, _ := m.Status(); a != 5*time.Second {
		t.Errorf("age = %v, want 5s", a)
	}
	if n := testutil.CollectAndCount(m, "varnishgw_chaperone_kube_api_broken_watches"); n != 1 {
		t.Errorf("%d broken-watches series, want 1", n)
	}

	// Back: a new server on the same address is not possible with
	// httptest; the transport meets the one that answers.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv2.Close()
	url = srv2.URL + "/api/v1/namespaces/gw/configmaps?labelSelector=x"
	clk.add(time.Second)
	get()
	get()
	if a, broken := m.Status(); a != 0 || broken != 0 {
		t.Errorf("after recovery: age %v, %d broken; want 0, 0", a, broken)
	}

	recs := logs.list(t)
	if len(recs) != 2 {
		t.Fatalf("%d records, want one WARN and one INFO:\n%s", len(recs), logs.buf.String())
	}
	if recs[0]["level"] != "WARN" || recs[0]["resource"] != "configmaps" || recs[0]["namespace"] != "gw" ||
		recs[0]["labelSelector"] != "x" || !strings.Contains(recs[0]["error"].(string), "503") {
		t.Errorf("break record = %v, want WARN naming configmaps in gw, the selector and the 503", recs[0])
	}
	if recs[1]["level"] != "INFO" || recs[1]["after"] != "6s" || !strings.Contains(recs[1]["msg"].(string), "recovered") {
		t.Errorf("recovery record = %v, want INFO recovered after 6s", recs[1])
	}
	if v := testutil.ToFloat64(breaksOnly{m}); v != 1 {
		t.Errorf("breaks = %v, want 1", v)
	}
}

// TestUnusedBrokenResourceIsForgotten: a resource whose informer stopped
// during an outage does not keep the chaperone out of sync for ever.
func TestUnusedBrokenResourceIsForgotten(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	var logs records
	m := newMonitor(slog.New(slog.NewJSONHandler(&logs, nil)), clk.now)
	m.SetSynced(func() bool { return true })
	req := httptest.NewRequest("GET", "/api/v1/namespaces/old/services", nil)
	key, attrs := resourceOf(req)
	m.failed(key, attrs, io.ErrUnexpectedEOF)
	clk.add(ForgetAfter - time.Second)
	if _, broken := m.Status(); broken != 1 {
		t.Fatalf("%d broken before ForgetAfter, want 1", broken)
	}
	clk.add(2 * time.Second)
	if age, broken := m.Status(); broken != 0 || age != 0 {
		t.Errorf("after ForgetAfter: age %v, %d broken; want 0, 0", age, broken)
	}
	if !strings.Contains(logs.buf.String(), "no longer used") {
		t.Errorf("no record of the forgotten resource:\n%s", logs.buf.String())
	}
}

// ageOnly and breaksOnly collect one metric of the Monitor, for testutil.
type ageOnly struct{ m *Monitor }

func (a ageOnly) Describe(ch chan<- *prometheus.Desc) { ch <- a.m.age }
func (a ageOnly) Collect(ch chan<- prometheus.Metric) {
	age, _ := a.m.Status()
	ch <- prometheus.MustNewConstMetric(a.m.age, prometheus.GaugeValue, age.Seconds())
}

type breaksOnly struct{ m *Monitor }

func (b breaksOnly) Describe(ch chan<- *prometheus.Desc) { ch <- b.m.breaksDesc }
func (b breaksOnly) Collect(ch chan<- prometheus.Metric) {
	b.m.mu.Lock()
	n := b.m.breaks
	b.m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(b.m.breaksDesc, prometheus.CounterValue, float64(n))
}
