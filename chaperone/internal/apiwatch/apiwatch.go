// Package apiwatch follows the chaperone's connection to the Kubernetes API
// server, so that an outage is seen: traffic keeps flowing on the last
// known routing while the API server is away (the informers keep their
// caches), but the chaperone must say so.
//
// A Monitor wraps the HTTP transport of the chaperone's Kubernetes clients
// (rest.Config.Wrap), so it sees every request of every informer (routing
// fragments, the Gateway, Services, EndpointSlices, ReferenceGrants, the VCL
// ConfigMap) and of the Gateway status writer, whatever client-go does with
// the failure: client-go's informers retry a refused watch on their own,
// without calling their watch error handler, so that handler alone would
// miss the common outage (an API server that is stopped or restarts).
//
// Each API resource the chaperone uses (resource, namespace, name or
// selectors) is connected or broken. A request that fails to connect, a
// watch stream that breaks, or an answer 401, 403 or 5xx breaks it: the
// first such failure is logged once at WARN (which resource, the error);
// the retries are not logged. The next answer from the API server for it
// mends it, logged once at INFO with the length of the outage. A resource
// no request has touched for ForgetAfter (its informer stopped, e.g. a
// namespace no route references any more) is forgotten.
//
// The Monitor is a prometheus.Collector computed at scrape time:
//
//   - varnishgw_chaperone_kube_api_sync_age_seconds: seconds since the
//     chaperone last was in sync with the API server, that is since the last
//     moment when the routing source had completed its first sync and no
//     resource was broken; 0 while that holds; before the first sync, the
//     time since the chaperone started.
//   - varnishgw_chaperone_kube_api_broken_watches: resources broken now.
//   - varnishgw_chaperone_kube_api_watch_breaks_total: times a resource broke.
package apiwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
)

// ForgetAfter is how long a broken resource that no request touches stays
// broken. Informers retry a failed list or watch at least every minute
// (client-go's backoff is capped at 30 s, with as much jitter), so a
// resource in use is never forgotten.
const ForgetAfter = 3 * time.Minute

// Monitor follows the connection to the API server; see the package
// documentation. Its zero value is not usable: use New.
type Monitor struct {
	log   *slog.Logger
	now   func() time.Time
	start time.Time

	mu       sync.Mutex
	synced   func() bool
	res      map[string]*resource
	broken   int
	lastGood time.Time // while broken > 0: when the first one broke
	breaks   uint64

	age, brokenDesc, breaksDesc *prometheus.Desc
}

// resource is one API resource the chaperone uses.
type resource struct {
	attrs    []any // resource, namespace, name / selector: for the logs
	broken   bool
	since    time.Time // when it broke
	lastSeen time.Time // last request
}

// New returns a Monitor that logs to logger.
func New(logger *slog.Logger) *Monitor {
	if logger == nil {
		logger = slog.Default()
	}
	return newMonitor(logger.With("component", "kube-api"), time.Now)
}

func newMonitor(logger *slog.Logger, now func() time.Time) *Monitor {
	return &Monitor{
		log:   logger,
		now:   now,
		start: now(),
		res:   map[string]*resource{},
		age: prometheus.NewDesc("varnishgw_chaperone_kube_api_sync_age_seconds",
			"Seconds since the chaperone was last in sync with the Kubernetes API server: its routing source had "+
				"synced once and no watch was broken. 0 while in sync; before the first sync, the time since the start.", nil, nil),
		brokenDesc: prometheus.NewDesc("varnishgw_chaperone_kube_api_broken_watches",
			"Kubernetes API resources (resource, namespace, selector) whose watch or requests fail now.", nil, nil),
		breaksDesc: prometheus.NewDesc("varnishgw_chaperone_kube_api_watch_breaks_total",
			"Times a watch or the requests of a Kubernetes API resource started to fail.", nil, nil),
	}
}

// SetSynced gives the Monitor the routing source's "synced once": until it
// returns true the chaperone has never been in sync.
func (m *Monitor) SetSynced(f func() bool) {
	m.mu.Lock()
	m.synced = f
	m.mu.Unlock()
}

// WrapTransport wraps the transport of a rest.Config (rest.Config.Wrap).
func (m *Monitor) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &transport{m: m, next: rt}
}

type transport struct {
	m    *Monitor
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, attrs := resourceOf(req)
	resp, err := t.next.RoundTrip(req)
	switch {
	case err != nil:
		if req.Context().Err() == nil {
			t.m.failed(key, attrs, err)
		}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500:
		t.m.failed(key, attrs, fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status))
	default:
		t.m.ok(key, attrs)
		if req.URL.Query().Get("watch") == "true" && resp.StatusCode == http.StatusOK {
			resp.Body = &watchBody{ReadCloser: resp.Body, m: t.m, key: key, attrs: attrs, ctx: req.Context()}
		}
	}
	return resp, err
}

// watchBody notices a watch stream that breaks: an error other than the
// end of the stream. The API server ends watches on time-outs and, on an
// orderly shutdown, with an HTTP/2 GOAWAY without error; the informer then
// watches again, and that request says whether the server is there. A
// stream the informer closed itself (it stops the watch) is no break
// either.
type watchBody struct {
	io.ReadCloser
	m      *Monitor
	key    string
	attrs  []any
	ctx    context.Context
	closed atomic.Bool
	once   sync.Once
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !endOfStream(err) && b.ctx.Err() == nil && !b.closed.Load() {
		b.once.Do(func() { b.m.failed(b.key, b.attrs, fmt.Errorf("watch stream: %w", err)) })
	}
	return n, err
}

func (b *watchBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// endOfStream reports whether err ends a watch stream in order.
func endOfStream(err error) bool {
	var goaway http2.GoAwayError //nolint:staticcheck // deprecated, but golang.org/x/net's transport (client-go's) still returns it
	if errors.Is(err, io.EOF) || (errors.As(err, &goaway) && goaway.ErrCode == http2.ErrCodeNo) {
		return true
	}
	// net/http's own HTTP/2 (not golang.org/x/net's) has an unexported
	// error type with the same message.
	msg := err.Error()
	return strings.Contains(msg, "server sent GOAWAY") && strings.Contains(msg, "ErrCode=NO_ERROR")
}

// resourceOf names the API resource of a request: a key and log
// attributes (resource, namespace, name, selectors).
func resourceOf(req *http.Request) (string, []any) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/GROUP/VERSION/...
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		path := "/" + strings.Join(parts, "/")
		return path, []any{"path", path}
	}
	var ns string
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		ns, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 {
		return req.URL.Path, []any{"path", req.URL.Path}
	}
	res := parts[0]
	if group != "" {
		res += "." + group
	}
	attrs := []any{"resource", res}
	key := res
	if ns != "" {
		attrs = append(attrs, "namespace", ns)
		key += " ns=" + ns
	}
	if len(parts) > 1 {
		attrs = append(attrs, "name", parts[1])
		key += " name=" + parts[1]
	}
	q := req.URL.Query()
	for _, s := range []string{"labelSelector", "fieldSelector"} {
		if v := q.Get(s); v != "" {
			attrs = append(attrs, s, v)
			key += " " + s + "=" + v
		}
	}
	return key, attrs
}

func (m *Monitor) failed(key string, attrs []any, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.get(key, attrs, now)
	if r.broken {
		return
	}
	r.broken, r.since = true, now
	if m.broken == 0 {
		m.lastGood = now
	}
	m.broken++
	m.breaks++
	m.log.Warn("Kubernetes API: watch broken; serving the last known routing until it is back",
		append(append([]any{}, r.attrs...), "error", err.Error())...)
}

func (m *Monitor) ok(key string, attrs []any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.get(key, attrs, now)
	if !r.broken {
		return
	}
	r.broken = false
	m.broken--
	m.log.Info("Kubernetes API: watch recovered",
		append(append([]any{}, r.attrs...), "after", now.Sub(r.since).Round(time.Millisecond).String())...)
}

// get returns the resource of key, created when new. m.mu is held.
func (m *Monitor) get(key string, attrs []any, now time.Time) *resource {
	r := m.res[key]
	if r == nil {
		r = &resource{attrs: attrs}
		m.res[key] = r
	}
	r.lastSeen = now
	return r
}

// forget drops broken resources that no request touched for ForgetAfter.
// m.mu is held.
func (m *Monitor) forget(now time.Time) {
	keys := make([]string, 0, len(m.res))
	for k := range m.res {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := m.res[k]
		if now.Sub(r.lastSeen) < ForgetAfter {
			continue
		}
		if r.broken {
			m.broken--
			m.log.Info("Kubernetes API: broken watch no longer used; forgotten",
				append(append([]any{}, r.attrs...), "broken_for", now.Sub(r.since).Round(time.Second).String())...)
		}
		delete(m.res, k)
	}
}

// Status returns the sync age and the number of broken resources now.
func (m *Monitor) Status() (age time.Duration, broken int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.forget(now)
	switch {
	case m.synced == nil || !m.synced():
		return now.Sub(m.start), m.broken
	case m.broken > 0:
		return now.Sub(m.lastGood), m.broken
	default:
		return 0, 0
	}
}

// Describe implements prometheus.Collector.
func (m *Monitor) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.age
	ch <- m.brokenDesc
	ch <- m.breaksDesc
}

// Collect implements prometheus.Collector.
func (m *Monitor) Collect(ch chan<- prometheus.Metric) {
	age, broken := m.Status()
	m.mu.Lock()
	breaks := m.breaks
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(m.age, prometheus.GaugeValue, age.Seconds())
	ch <- prometheus.MustNewConstMetric(m.brokenDesc, prometheus.GaugeValue, float64(broken))
	ch <- prometheus.MustNewConstMetric(m.breaksDesc, prometheus.CounterValue, float64(breaks))
}
