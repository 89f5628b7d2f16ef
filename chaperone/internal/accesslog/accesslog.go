// Package accesslog writes the gateway's access log: one JSON line per
// client request, on the chaperone's stdout (the container log), from a
// varnishncsa the chaperone runs and supervises.
//
// varnishncsa -j reads varnishd's shared memory log (-n WORKDIR) with
// Format, which takes the route, the backend group and the endpoint from
// the VCL_Log records ghost writes in vcl_recv (ghost.route, ghost.backend,
// ghost.endpoint, and ghost.request_id, the X-Request-Id ghost kept or set:
// %{X-Request-Id}i would be the client's header on Varnish 7.7). Requests on ghost's admin socket (the chaperone's own
// reloads) are left out.
//
// -j escapes quotes, backslashes and control characters, but copies bytes
// that are not UTF-8 (a header may hold any byte but CR, LF and NUL):
// every line is made valid UTF-8 (U+FFFD for such bytes) and checked to be
// one JSON object before it is written; a line that still is not (an
// incomplete transaction without a number varnishncsa should print) is
// written as {"access_log_error": ..., "line": ...} and counted.
//
// Run restarts varnishncsa when it exits, with a backoff from 1 s to 30 s
// (reset after a minute of running), and stops it when its context ends;
// varnishncsa never outlives the chaperone (internal/varnish/childproc).
package accesslog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/childproc"
)

// Format is varnishncsa's -F format: a JSON object per client request.
// Numbers are unquoted; everything that comes from the client is quoted
// (and escaped by -j).
const Format = `{"time":"%{%Y-%m-%dT%H:%M:%S}t.%{msec_frac}t%{%z}t",` +
	`"request_id":"%{VCL_Log:ghost.request_id}x",` +
	`"client":"%h",` +
	`"method":"%m",` +
	`"host":"%{Host}i",` +
	`"url":"%U%q",` +
	`"protocol":"%H",` +
	`"status":%s,` +
	`"bytes":%b,` +
	`"duration_us":%D,` +
	`"ttfb_s":%{Varnish:time_firstbyte}x,` +
	`"handling":"%{Varnish:handling}x",` +
	`"route":"%{VCL_Log:ghost.route}x",` +
	`"backend":"%{VCL_Log:ghost.backend}x",` +
	`"endpoint":"%{VCL_Log:ghost.endpoint}x",` +
	`"user_agent":"%{User-Agent}i",` +
	`"referer":"%{Referer}i",` +
	`"vxid":%{Varnish:vxid}x}`

// Query leaves out the requests on ghost's admin socket (-a ghost-admin),
// the chaperone's reloads and drain calls.
const Query = `ReqStart[3] ne "ghost-admin"`

// Config says how to run varnishncsa.
type Config struct {
	// Bin is the varnishncsa executable; "varnishncsa" when empty.
	Bin string
	// WorkDir is varnishd's working directory (-n).
	WorkDir string
	// Out receives the access log lines (the chaperone's stdout).
	Out io.Writer
	// Logger gets varnishncsa's errors and restarts.
	Logger *slog.Logger
	// Backoff is the first wait before a restart (default 1 s); it
	// doubles up to MaxBackoff (default 30 s).
	Backoff, MaxBackoff time.Duration
}

// Args are varnishncsa's arguments.
func (c Config) Args() []string {
	return []string{"-n", c.WorkDir, "-j", "-t", "off", "-q", Query, "-F", Format}
}

// Log runs varnishncsa; see the package documentation.
type Log struct {
	cfg Config

	lines    prometheus.Counter
	invalid  prometheus.Counter
	restarts prometheus.Counter
	mu       sync.Mutex // serializes writes to Out
}

// New returns a Log for cfg; register it (a prometheus.Collector) and Run it.
func New(cfg Config) *Log {
	if cfg.Bin == "" {
		cfg.Bin = "varnishncsa"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("component", "accesslog")
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff < cfg.Backoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.Backoff)
	}
	return &Log{
		cfg: cfg,
		lines: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_access_log_lines_total",
			Help: "Access log lines written (one per client request).",
		}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_access_log_invalid_lines_total",
			Help: "varnishncsa lines that were not a JSON object even after UTF-8 repair, written as access_log_error records.",
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "varnishgw_chaperone_access_log_restarts_total",
			Help: "Times varnishncsa exited and was started again.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (l *Log) Describe(ch chan<- *prometheus.Desc) {
	l.lines.Describe(ch)
	l.invalid.Describe(ch)
	l.restarts.Describe(ch)
}

// Collect implements prometheus.Collector.
func (l *Log) Collect(ch chan<- prometheus.Metric) {
	l.lines.Collect(ch)
	l.invalid.Collect(ch)
	l.restarts.Collect(ch)
}

// Run runs varnishncsa until ctx ends, restarting it when it exits.
func (l *Log) Run(ctx context.Context) {
	backoff := l.cfg.Backoff
	for {
		start := time.Now()
		err := l.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = l.cfg.Backoff
		}
		l.cfg.Logger.Warn("varnishncsa exited; starting it again", "error", err, "retry_in", backoff.String())
		l.restarts.Inc()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, l.cfg.MaxBackoff)
	}
}

func (l *Log) runOnce(ctx context.Context) error {
	cmd := childproc.Command(ctx, l.cfg.Bin, l.cfg.Args()...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("varnishncsa stdout: %w", err)
	}
	var stderr tail
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", l.cfg.Bin, err)
	}
	l.cfg.Logger.Info("access log: varnishncsa started", "pid", cmd.Process.Pid)
	r := bufio.NewReaderSize(stdout, 64*1024)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			l.write(line)
		}
		if err != nil {
			break
		}
	}
	err = cmd.Wait()
	if err == nil {
		err = errors.New("exited with status 0")
	}
	if s := stderr.String(); s != "" {
		err = fmt.Errorf("%w: %s", err, s)
	}
	return err
}

// write writes one line of varnishncsa's output as a valid JSON line.
func (l *Log) write(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	line = bytes.ToValidUTF8(line, []byte("\uFFFD"))
	if !json.Valid(line) || !bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
		l.invalid.Inc()
		line, _ = json.Marshal(map[string]string{
			"access_log_error": "varnishncsa wrote a line that is not a JSON object",
			"line":             string(line),
		})
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.cfg.Out.Write(line); err == nil {
		l.lines.Inc()
	}
}

// tail keeps the last 2 KiB written to it (varnishncsa's stderr).
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2048 {
		t.buf = t.buf[len(t.buf)-2048:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
