// Package varnishstat reads varnishd's counters with `varnishstat -j` and
// serves them: as snapshots for the chaperone's logic (live client sessions,
// child restarts) and as Prometheus metrics.
//
// One varnishstat process runs per poll interval (see [Poller]); every reader
// shares the cached snapshot, so a Prometheus scrape never spawns a process.
package varnishstat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/childproc"
)

// Counter is one entry of `varnishstat -j`.
type Counter struct {
	Description string `json:"description"`
	// Flag is the counter's semantics: "c" counter, "g" gauge, "b" bitmap.
	Flag string `json:"flag"`
	// Format is the display format: "i" integer, "B" bytes, "d" duration, "b" bitmap.
	Format string `json:"format"`
	Value  uint64 `json:"value"`
}

// Snapshot is the set of counters read at one moment.
type Snapshot struct {
	Time     time.Time
	Counters map[string]Counter
}

// Value returns the value of the named counter, 0 when it does not exist.
func (s Snapshot) Value(name string) uint64 { return s.Counters[name].Value }

// Has reports whether the named counter exists.
func (s Snapshot) Has(name string) bool {
	_, ok := s.Counters[name]
	return ok
}

// LiveSessions returns the number of client sessions (TCP connections to any
// -a socket) that varnishd holds open right now, idle keep-alive connections
// included: the sum of the gauges MEMPOOL.sess<N>.live, one session memory
// pool per thread pool. ok is false when the snapshot has no such gauge (the
// cache child is not running).
//
// MAIN.sess_conn minus MAIN.sess_closed and MAIN.sess_closed_err is NOT the
// live count in Varnish 7.1: connections closed by the waiter (idle timeout,
// client closing an idle keep-alive connection) are only counted in the
// MAIN.sc_* close reasons. See design/chaperone.md, "Which counters give the live session count".
func (s Snapshot) LiveSessions() (n uint64, ok bool) {
	for name, c := range s.Counters {
		if strings.HasPrefix(name, "MEMPOOL.sess") && strings.HasSuffix(name, ".live") {
			n += c.Value
			ok = true
		}
	}
	return n, ok
}

// ChildStarts returns MGT.child_start, the number of times the manager has
// started the cache child: it grows when a crashed child was restarted.
func (s Snapshot) ChildStarts() uint64 { return s.Value("MGT.child_start") }

// Parse decodes the output of `varnishstat -j` (Varnish 6.5 and later:
// {"version": 1, "timestamp": ..., "counters": {...}}).
func Parse(data []byte) (Snapshot, error) {
	var doc struct {
		Version  int                `json:"version"`
		Counters map[string]Counter `json:"counters"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return Snapshot{}, fmt.Errorf("decode varnishstat -j output: %w", err)
	}
	if doc.Version != 1 {
		return Snapshot{}, fmt.Errorf("varnishstat -j output version %d, want 1", doc.Version)
	}
	return Snapshot{Time: time.Now(), Counters: doc.Counters}, nil
}

// Reader runs varnishstat against one varnishd instance.
type Reader struct {
	// Bin is the varnishstat executable; "varnishstat" when empty.
	Bin string
	// WorkDir is varnishd's working directory (varnishd -n).
	WorkDir string
	// Exclude are varnishstat field globs left out of every read
	// (varnishstat -X), e.g. "VBE.*": per-backend counters grow with the
	// number of endpoints.
	Exclude []string
}

// args are varnishstat's arguments for one read.
func (r Reader) args() []string {
	args := []string{"-n", r.WorkDir, "-j", "-t", "5"}
	for _, g := range r.Exclude {
		args = append(args, "-X", g)
	}
	return args
}

// Read runs `varnishstat -n WorkDir -j` once and parses its output.
func (r Reader) Read(ctx context.Context) (Snapshot, error) {
	bin := r.Bin
	if bin == "" {
		bin = "varnishstat"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A varnishstat waits up to -t 5 s for varnishd's shared memory: it
	// must not outlive the chaperone if the chaperone dies meanwhile.
	cmd := childproc.Command(ctx, bin, r.args()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Snapshot{}, fmt.Errorf("run %s -n %s -j: %w: %s", bin, r.WorkDir, err, strings.TrimSpace(stderr.String()))
	}
	return Parse(out)
}

// Version runs `varnishstat -V` and returns its first line, e.g.
// "varnishstat (varnish-7.1.1 revision 7cee1c5...)".
func (r Reader) Version(ctx context.Context) (string, error) {
	bin := r.Bin
	if bin == "" {
		bin = "varnishstat"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := childproc.Command(ctx, bin, "-V").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("run %s -V: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first), nil
}
