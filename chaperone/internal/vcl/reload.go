// Package vcl is the chaperone's main VCL: the Reloader hot-reloads
// varnishd's main VCL through the admin connection (each new source is
// compiled under a new unique name, made active with vcl.use, and older
// versions beyond the last few are discarded; a VCL that does not compile
// is reported — log, metric, a *CompileError for the Gateway condition —
// and the running one stays); its sources are a file (Reloader.WatchFile,
// --vcl=PATH) or the Gateway's VCL ConfigMap (KubeSource, --vcl= with
// --routing=kubernetes).
package vcl

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishadm"
)

// Admin is the part of *varnishadm.Conn the reloader uses.
type Admin interface {
	VCLInline(ctx context.Context, name, source string) error
	VCLUse(ctx context.Context, name string) error
	VCLDiscard(ctx context.Context, name string) error
	VCLList(ctx context.Context) ([]varnishadm.VCL, error)
}

// Observer is told the result of every reload that was tried; err is nil on
// success. metrics.Chaperone implements it.
type Observer interface {
	ObserveReload(kind string, err error)
}

// Kind is the reload kind reported to the Observer.
const Kind = "vcl"

// NamePrefix starts the name of every VCL the reloader loads.
const NamePrefix = "main-"

// CompileError is a VCL that varnishd refused to compile; Message is the
// compiler's output.
type CompileError struct {
	Name    string
	Message string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("VCL %s does not compile: %s", e.Name, e.Message)
}

// Reloader loads VCL sources one at a time. Safe for concurrent use.
type Reloader struct {
	Admin Admin
	// Keep is how many loaded main VCLs to keep, the active one included
	// (default 3), so a rollback by hand stays possible.
	Keep     int
	Logger   *slog.Logger
	Observer Observer

	mu       sync.Mutex
	active   [sha256.Size]byte
	loaded   bool
	seq      int
	lastName string
}

// Load makes source the active VCL. It does nothing when source is the
// source last made active. A source that does not compile returns a
// *CompileError and leaves the active VCL in place.
func (r *Reloader) Load(ctx context.Context, source string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := sha256.Sum256([]byte(source))
	if r.loaded && sum == r.active {
		return nil
	}
	err := r.load(ctx, source)
	if r.Observer != nil {
		r.Observer.ObserveReload(Kind, err)
	}
	if err != nil {
		return err
	}
	r.active, r.loaded = sum, true
	return nil
}

// LoadFile loads the VCL source in the file at path.
func (r *Reloader) LoadFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read VCL %s: %w", path, err)
	}
	return r.Load(ctx, string(b))
}

// Forget makes the next Load load its source even if it is the active one
// (after varnishd lost its VCLs, e.g. a new varnishd in sidecar mode).
func (r *Reloader) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loaded = false
}

// Active returns the name of the VCL the reloader last made active.
func (r *Reloader) Active() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastName
}

func (r *Reloader) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

func (r *Reloader) load(ctx context.Context, source string) error {
	r.seq++
	name := fmt.Sprintf("%s%s-%d", NamePrefix, time.Now().UTC().Format("20060102T150405"), r.seq)
	start := time.Now()
	if err := r.Admin.VCLInline(ctx, name, source); err != nil {
		var cliErr *varnishadm.Error
		if errors.As(err, &cliErr) && cliErr.Status == varnishadm.StatusParam {
			ce := &CompileError{Name: name, Message: strings.TrimSpace(cliErr.Body)}
			r.logger().Error("VCL does not compile; the active VCL stays", "vcl", name, "compiler", ce.Message)
			return ce
		}
		r.logger().Error("VCL load failed", "vcl", name, "error", err)
		return fmt.Errorf("load VCL %s: %w", name, err)
	}
	if err := r.Admin.VCLUse(ctx, name); err != nil {
		r.logger().Error("vcl.use failed", "vcl", name, "error", err)
		_ = r.Admin.VCLDiscard(ctx, name) // best effort: prune discards it later
		return fmt.Errorf("use VCL %s: %w", name, err)
	}
	r.lastName = name
	r.logger().Info("VCL active", "vcl", name, "duration_ms", time.Since(start).Milliseconds())
	if err := r.discardOld(ctx, name); err != nil {
		r.logger().Warn("discarding old VCLs failed", "error", err)
	}
	return nil
}

// discardOld discards the boot VCL and the main VCLs beyond Keep, oldest
// first. VCLs with other names (loaded by hand) are left alone.
func (r *Reloader) discardOld(ctx context.Context, active string) error {
	keep := r.Keep
	if keep <= 0 {
		keep = 3
	}
	vcls, err := r.Admin.VCLList(ctx)
	if err != nil {
		return fmt.Errorf("list VCLs: %w", err)
	}
	var mains []string
	var errs []error
	for _, v := range vcls {
		switch {
		case v.Name == active || v.Active():
		case v.Name == "boot":
			if err := r.Admin.VCLDiscard(ctx, v.Name); err != nil {
				errs = append(errs, err)
			}
		case strings.HasPrefix(v.Name, NamePrefix):
			mains = append(mains, v.Name)
		}
	}
	sort.Slice(mains, func(i, j int) bool { return olderName(mains[i], mains[j]) })
	for len(mains) > keep-1 {
		if err := r.Admin.VCLDiscard(ctx, mains[0]); err != nil {
			errs = append(errs, fmt.Errorf("discard VCL %s: %w", mains[0], err))
		} else {
			r.logger().Info("VCL discarded", "vcl", mains[0])
		}
		mains = mains[1:]
	}
	return errors.Join(errs...)
}

// olderName orders main-TIME-SEQ names by time, then by sequence number.
func olderName(a, b string) bool {
	ta, sa := splitName(a)
	tb, sb := splitName(b)
	if ta != tb {
		return ta < tb
	}
	return sa < sb
}

func splitName(name string) (string, int) {
	rest := strings.TrimPrefix(name, NamePrefix)
	i := strings.LastIndexByte(rest, '-')
	if i < 0 {
		return rest, 0
	}
	var seq int
	if _, err := fmt.Sscan(rest[i+1:], &seq); err != nil {
		return name, 0 // not one of ours: no sequence number
	}
	return rest[:i], seq
}

// WatchFile loads the VCL file at path now and again whenever its content
// changes, checking every interval (default 2 seconds), until ctx ends.
// Polling the content also follows the symlink swaps of a mounted
// ConfigMap. report, when not nil, gets the result of every load tried; a
// source that failed is not tried again until it changes.
func (r *Reloader) WatchFile(ctx context.Context, path string, interval time.Duration, report func(error)) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	var tried [sha256.Size]byte
	first := true
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		b, err := os.ReadFile(path)
		switch {
		case err != nil:
			if first {
				r.logger().Error("read VCL file", "path", path, "error", err)
				if report != nil {
					report(fmt.Errorf("read VCL %s: %w", path, err))
				}
			}
		case first || sha256.Sum256(b) != tried:
			tried = sha256.Sum256(b)
			err := r.Load(ctx, string(b))
			if report != nil && ctx.Err() == nil {
				report(err)
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
