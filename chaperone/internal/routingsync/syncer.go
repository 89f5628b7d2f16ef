package routingsync

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	corev1 "k8s.io/api/core/v1"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// State is everything a ghost.json is built from, as a Source sees it now.
type State struct {
	// Gateway is the Gateway the chaperone serves (Merge needs its
	// listeners; the status writer needs its generation).
	Gateway *gatewayv1.Gateway
	// Fragments are the routing fragments of the Gateway.
	Fragments []*routing.Fragment
	// Rejected are the fragments the source could not read; for each, the
	// last version it accepted, if any, is in Fragments.
	Rejected []vgwapi.Rejection
	// FragmentsResourceVersion is the RoutingFragment resource version the
	// source's view had reached when it listed Fragments (KubeSource; empty
	// for other sources).
	FragmentsResourceVersion string
	// Objects are the Services, EndpointSlices and ReferenceGrants of the
	// namespaces the fragments reference.
	Objects *routing.Objects
	// ObjectsIncomplete is set when Objects lack a referenced namespace
	// whose caches did not sync in time (KubeConfig.PendingTimeout): the
	// routing is built without it, but the routes' references are not
	// checked again against it.
	ObjectsIncomplete bool
	// Secrets are the Secrets of a routing directory (DirSource), for
	// the HTTPS listeners' certificates (tlssource.Dir); the routing
	// does not use them. KubeSource leaves it empty.
	Secrets []*corev1.Secret
	// Withheld are HTTPS listeners (by name) whose routes are not served:
	// hitch serves none of their certificates (tlsterm's
	// ListenerStatus.Unserved: withdrawn, or none usable). Build keeps
	// them on their socket without routes, so that their hostnames are
	// answered 404, or 421 on a connection for another listener, instead
	// of being routed through a certificate of another listener of the
	// port. The Syncer sets it (Config.Withheld); sources leave it empty.
	Withheld []string
}

// Source watches the routing state of one Gateway.
type Source interface {
	// Run watches until ctx ends and calls changed (which never blocks)
	// after anything that may change the routing state.
	Run(ctx context.Context, changed func()) error
	// State returns the current state. It returns ErrNotSynced while the
	// source has not seen a complete state yet, and another error (for
	// example an invalid fragment) when the state cannot be built; with
	// such an error it may still return a State whose Gateway is set, so
	// that the error can be reported on the Gateway's status.
	State() (*State, error)
}

// ErrNotSynced is returned by Source.State before the first complete state.
var ErrNotSynced = errors.New("routing state not synced yet")

// Outcome is the result of one sync.
type Outcome string

const (
	// OutcomeReloaded: a new ghost.json was written and ghost loaded it.
	OutcomeReloaded Outcome = "reloaded"
	// OutcomeUnchanged: the document is byte-identical to the loaded one.
	OutcomeUnchanged Outcome = "unchanged"
	// OutcomeInvalid: the state could not be turned into ghost.json (an
	// invalid fragment, a Merge or Resolve error); nothing was written.
	OutcomeInvalid Outcome = "invalid"
	// OutcomeRejected: ghost refused the new file; the last good file was
	// restored.
	OutcomeRejected Outcome = "rejected"
	// OutcomeError: ghost could not be reached or the file not written;
	// the Syncer retries.
	OutcomeError Outcome = "error"
)

// Result describes one sync, for metrics, logs and the Gateway status.
type Result struct {
	Outcome Outcome
	// Err is set for OutcomeInvalid, OutcomeRejected and OutcomeError.
	Err error
	// Gateway is the Gateway the sync was built for (nil if unknown).
	Gateway *gatewayv1.Gateway
	// Answer is ghost's answer to a successful reload.
	Answer *ghostadmin.ReloadAnswer
	// Endpoints counts the endpoints per backend group
	// (namespace/service:port) in the document; nil if none was built.
	Endpoints map[string]int
	// Conflicts are what Merge reported.
	Conflicts []routing.Conflict
	// Fragments counts the fragments the routing was built from (accepted
	// ones and the last accepted versions of rejected ones).
	Fragments int
	// Rejected and FragmentsResourceVersion are the State's.
	Rejected                 []vgwapi.Rejection
	FragmentsResourceVersion string
	// Duration is the time the sync took, build to reload answer.
	Duration time.Duration
	// State is the state the sync was built from (nil when the source
	// had none), for the status of the Gateway's listeners and routes.
	State *State
}

// Config configures a Syncer.
type Config struct {
	// Source provides the routing state (required).
	Source Source
	// Path is the ghost.json file ghost.router() reads (required). Its
	// directory must exist and be readable by varnishd's user.
	Path string
	// Reloader asks ghost to reload (required).
	Reloader *ghostadmin.Reloader
	// Debounce is the quiet time after a change before a sync (default
	// 100ms); MaxDelay bounds the delay under a stream of changes (default
	// 1s).
	Debounce, MaxDelay time.Duration
	// RetryInterval is the wait before another attempt after OutcomeError
	// (default 2s).
	RetryInterval time.Duration
	// OnResult, if set, is called after every sync (from the Syncer's
	// goroutine; it must not block for long).
	OnResult func(Result)
	// Withheld, if set, returns the listeners whose routes are not
	// served (State.Withheld); call Changed when it changes.
	Withheld func() []string
	Logger   *slog.Logger
}

// Syncer keeps ghost.json and ghost in step with a Source.
type Syncer struct {
	cfg     Config
	log     *slog.Logger
	kick    chan struct{}
	resyncs chan chan error

	mu      sync.Mutex
	lastSum [sha256.Size]byte // of the file ghost loaded last
	loaded  bool
	// rejected are the rejections logged last, so each is logged once.
	rejected map[vgwapi.Rejection]bool
}

// New returns a Syncer; call Run to start it.
func New(cfg Config) (*Syncer, error) {
	if cfg.Source == nil || cfg.Path == "" || cfg.Reloader == nil {
		return nil, errors.New("routingsync: Source, Path and Reloader are required")
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 100 * time.Millisecond
	}
	if cfg.MaxDelay < cfg.Debounce {
		cfg.MaxDelay = max(time.Second, cfg.Debounce)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Syncer{
		cfg:     cfg,
		log:     log.With("component", "routingsync", "file", cfg.Path),
		kick:    make(chan struct{}, 1),
		resyncs: make(chan chan error),
	}, nil
}

// Loaded reports whether ghost has loaded routing built by this Syncer at
// least once (for /readyz).
func (s *Syncer) Loaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// Changed schedules a debounced sync; Sources call it (it never blocks).
func (s *Syncer) Changed() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Resync builds, writes and reloads now, even when the document did not
// change: call it when the varnishd child restarted. It returns the sync's
// error (nil also when the state is not synced yet: the first sync will
// follow on its own).
func (s *Syncer) Resync(ctx context.Context) error {
	done := make(chan error, 1)
	select {
	case s.resyncs <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs the Source and syncs on its changes until ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srcErr := make(chan error, 1)
	go func() { srcErr <- s.cfg.Source.Run(ctx, s.Changed) }()

	var (
		debounce *time.Timer // fires Debounce after the last change
		deadline *time.Timer // fires MaxDelay after the first change
		retry    *time.Timer
		dc, mc   <-chan time.Time
		rc       <-chan time.Time
	)
	stop := func(t *time.Timer) {
		if t != nil {
			t.Stop()
		}
	}
	defer func() { stop(debounce); stop(deadline); stop(retry) }()
	doSync := func(force bool) error {
		stop(debounce)
		stop(deadline)
		stop(retry)
		dc, mc, rc = nil, nil, nil
		res := s.sync(ctx, force)
		// Retry what failed on the way to ghost; a source that is not
		// synced yet calls changed() itself when it is.
		if res.Outcome == OutcomeError && !errors.Is(res.Err, ErrNotSynced) && ctx.Err() == nil {
			retry = time.NewTimer(s.cfg.RetryInterval)
			rc = retry.C
		}
		return res.Err
	}
	for {
		select {
		case <-ctx.Done():
			<-srcErr //nolint:errcheck // stopped: the source's error after ctx ends is not news
			return nil
		case err := <-srcErr:
			if err != nil {
				return fmt.Errorf("routing source: %w", err)
			}
			return nil
		case <-s.kick:
			stop(debounce)
			debounce = time.NewTimer(s.cfg.Debounce)
			dc = debounce.C
			if mc == nil {
				deadline = time.NewTimer(s.cfg.MaxDelay)
				mc = deadline.C
			}
		case <-dc:
			_ = doSync(false) // s.sync reports it; a retry is set
		case <-mc:
			_ = doSync(false) // s.sync reports it; a retry is set
		case <-rc:
			_ = doSync(true) // s.sync reports it; a retry is set
		case done := <-s.resyncs:
			err := doSync(true)
			if errors.Is(err, ErrNotSynced) {
				err = nil
			}
			done <- err
		}
	}
}

// sync builds the document and, when it changed (or force), writes it and
// reloads ghost.
func (s *Syncer) sync(ctx context.Context, force bool) Result {
	start := time.Now()
	res := s.syncOnce(ctx, force)
	res.Duration = time.Since(start)
	switch res.Outcome {
	case OutcomeReloaded:
		s.log.Info("routing reloaded", "generation", res.Answer.Generation, "vhosts", res.Answer.VHosts,
			"routes", res.Answer.Routes, "endpoints", res.Answer.Endpoints, "duration", res.Duration)
	case OutcomeUnchanged:
		s.log.Debug("routing unchanged")
	default:
		if errors.Is(res.Err, ErrNotSynced) {
			s.log.Debug("routing state not synced yet")
			return res
		}
		s.log.Error("routing sync failed", "outcome", string(res.Outcome), "error", res.Err)
	}
	for _, c := range res.Conflicts {
		s.log.Warn("routing conflict", "conflict", c.String())
	}
	if s.cfg.OnResult != nil {
		s.cfg.OnResult(res)
	}
	return res
}

func (s *Syncer) syncOnce(ctx context.Context, force bool) Result {
	st, err := s.cfg.Source.State()
	if err != nil {
		if errors.Is(err, ErrNotSynced) {
			return Result{Outcome: OutcomeError, Err: err}
		}
		res := Result{Outcome: OutcomeInvalid, Err: err}
		if st != nil {
			res.Gateway = st.Gateway
		}
		return res
	}
	if s.cfg.Withheld != nil {
		if w := s.cfg.Withheld(); len(w) > 0 {
			withheld := *st
			withheld.Withheld = w
			st = &withheld
		}
	}
	res := Result{Gateway: st.Gateway, Fragments: len(st.Fragments), Rejected: st.Rejected,
		FragmentsResourceVersion: st.FragmentsResourceVersion, State: st}
	s.logRejections(st.Rejected)
	table, doc, err := Build(st)
	if table != nil {
		res.Conflicts = table.Conflicts
	}
	if err != nil {
		res.Outcome, res.Err = OutcomeInvalid, err
		return res
	}
	res.Endpoints = EndpointCounts(doc)
	return s.apply(ctx, func(w io.Writer) error { return ghostjson.Encode(w, doc) }, force, res)
}

// logRejections logs each fragment rejection once, when it first appears.
func (s *Syncer) logRejections(rs []vgwapi.Rejection) {
	now := make(map[vgwapi.Rejection]bool, len(rs))
	for _, r := range rs {
		now[r] = true
		if s.rejected[r] {
			continue
		}
		if r.Kept != "" {
			s.log.Warn("routing fragment rejected; its route keeps its last accepted version", "fragment", r.Name,
				"resource_version", r.ResourceVersion, "kept", r.Kept, "reason", r.Reason)
		} else {
			s.log.Warn("routing fragment rejected; its route is not served", "fragment", r.Name,
				"resource_version", r.ResourceVersion, "reason", r.Reason)
		}
	}
	s.rejected = now
}

// goodPath is the hard link to the last file ghost loaded, kept to
// restore it after a rejection. Its name starts with "." so that directory
// readers skip it.
func (s *Syncer) goodPath() string {
	return filepath.Join(filepath.Dir(s.cfg.Path), "."+filepath.Base(s.cfg.Path)+".good")
}

// apply streams the document (write) to a temporary file, and unless it
// is byte-identical to the loaded file (and not forced) moves it into place
// and reloads ghost; a rejected file is replaced by the last good one. Only
// a hash of the loaded file is kept in memory.
func (s *Syncer) apply(ctx context.Context, write func(io.Writer) error, force bool, res Result) Result {
	s.mu.Lock()
	lastSum, loaded := s.lastSum, s.loaded
	s.mu.Unlock()
	tmp, sum, err := writeTemp(s.cfg.Path, write)
	if err != nil {
		res.Outcome, res.Err = OutcomeError, err
		return res
	}
	if !force && loaded && sum == lastSum {
		os.Remove(tmp)
		res.Outcome = OutcomeUnchanged
		return res
	}
	if err := commitTemp(tmp, s.cfg.Path); err != nil {
		res.Outcome, res.Err = OutcomeError, err
		return res
	}
	ans, err := s.cfg.Reloader.Reload(ctx)
	if err == nil {
		if lerr := linkAtomic(s.cfg.Path, s.goodPath()); lerr != nil {
			s.log.Warn("cannot keep a copy of the loaded ghost.json; a later rejection cannot restore it", "error", lerr)
		}
		s.mu.Lock()
		s.lastSum, s.loaded = sum, true
		s.mu.Unlock()
		res.Outcome, res.Answer = OutcomeReloaded, ans
		return res
	}
	if !ghostadmin.IsRejected(err) {
		// ghost may or may not have read the file; it is valid as far as
		// we know, so keep it and retry.
		res.Outcome, res.Err = OutcomeError, err
		return res
	}
	res.Outcome, res.Err = OutcomeRejected, err
	if restoreErr := s.restore(loaded); restoreErr != nil {
		res.Err = errors.Join(err, restoreErr)
	}
	return res
}

// restore puts the last good file back (or removes the file when there was
// none: ghost then starts with empty routing), so that a restarted varnishd
// child never loads a rejected file.
func (s *Syncer) restore(loaded bool) error {
	if loaded {
		if err := linkAtomic(s.goodPath(), s.cfg.Path); err != nil {
			return fmt.Errorf("restore the last good %s: %w", s.cfg.Path, err)
		}
		return nil
	}
	if err := os.Remove(s.cfg.Path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove rejected %s: %w", s.cfg.Path, err)
	}
	return nil
}

// Build turns a state into a ghost.json document with the routing core
// (WithListenerSetListeners, Merge, then Resolve); write it with
// ghostjson.Encode or Marshal. The routes of the State's Withheld
// listeners are left out; the listeners stay. The
// table is returned for its conflicts (nil if Merge failed).
func Build(st *State) (*routing.Table, *ghostjson.Document, error) {
	if st == nil || st.Gateway == nil {
		return nil, nil, errors.New("build ghost.json: no Gateway")
	}
	// The listeners of the Gateway's ListenerSets, as the provider
	// recorded them on the Gateway.
	gw, err := routing.WithListenerSetListeners(st.Gateway)
	if err != nil {
		return nil, nil, fmt.Errorf("listeners of Gateway %s/%s: %w", st.Gateway.Namespace, st.Gateway.Name, err)
	}
	table, err := routing.Merge(gw, withoutListeners(st.Fragments, st.Withheld))
	if err != nil {
		return nil, nil, fmt.Errorf("merge routing fragments of Gateway %s/%s: %w", st.Gateway.Namespace, st.Gateway.Name, err)
	}
	objs := st.Objects
	if objs == nil {
		objs = &routing.Objects{}
	}
	doc, err := routing.Resolve(table, objs)
	if err != nil {
		return table, nil, fmt.Errorf("resolve backends of Gateway %s/%s: %w", st.Gateway.Namespace, st.Gateway.Name, err)
	}
	return table, doc, nil
}

// withoutListeners returns the fragments without their attachments to the
// named listeners (copies of the fragments that had one).
func withoutListeners(frags []*routing.Fragment, names []string) []*routing.Fragment {
	if len(names) == 0 {
		return frags
	}
	out := make([]*routing.Fragment, 0, len(frags))
	for _, f := range frags {
		if f == nil || !slices.ContainsFunc(f.Listeners, func(l routing.AttachedListener) bool { return slices.Contains(names, l.Name) }) {
			out = append(out, f)
			continue
		}
		g := *f
		g.Listeners = slices.DeleteFunc(slices.Clone(f.Listeners), func(l routing.AttachedListener) bool { return slices.Contains(names, l.Name) })
		out = append(out, &g)
	}
	return out
}

// EndpointCounts counts the endpoints of each backend the routes of doc send
// to, by name (namespace/service:port), for the endpoints-per-service
// metric: its entry's in the backends table, 0 for a reference that did not
// resolve.
func EndpointCounts(doc *ghostjson.Document) map[string]int {
	out := map[string]int{}
	if doc == nil {
		return out
	}
	table := doc.Table()
	for _, vh := range doc.VHosts {
		for _, r := range vh.Routes {
			for _, g := range r.Backends {
				if n, seen := out[g.Backend]; !seen || n == 0 {
					out[g.Backend] = len(ghostjson.Endpoints(table, g.Backend, g.Unresolved))
				}
			}
		}
	}
	return out
}

// referencedBackends returns, per namespace, the sorted names of the
// Services the fragments reference (backends and mirrors).
func referencedBackends(frags []*routing.Fragment) map[string][]string {
	set := map[string]map[string]bool{}
	add := func(b routing.BackendRef) {
		if b.Namespace == "" || b.Name == "" {
			return
		}
		if set[b.Namespace] == nil {
			set[b.Namespace] = map[string]bool{}
		}
		set[b.Namespace][b.Name] = true
	}
	for _, f := range frags {
		if f == nil {
			continue
		}
		for _, r := range f.Rules {
			for _, b := range r.Backends {
				add(b)
			}
			for _, fl := range r.Filters {
				if fl.RequestMirror != nil {
					add(fl.RequestMirror.Backend)
				}
			}
		}
	}
	out := map[string][]string{}
	for ns, names := range set {
		for n := range names {
			out[ns] = append(out[ns], n)
		}
		sort.Strings(out[ns])
	}
	return out
}
