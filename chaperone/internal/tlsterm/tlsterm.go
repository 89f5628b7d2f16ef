// Package tlsterm terminates TLS for the chaperone's HTTPS listeners with
// hitch: one hitch process per HTTPS port, which hands the decrypted
// connections to varnishd's Unix socket port-N (varnishd.TLSListener) with
// a PROXY v2 header carrying the SNI and ALPN.
//
// A Manager gets the desired listeners (Update: port, listener name and the
// certificates of its certificateRefs) from a certificate source, checks
// every certificate (Check), writes hitch's configuration and the PEM
// files (mode 0600, temp file + rename) into its directory, runs and
// supervises the hitch processes and reloads them with SIGHUP when a
// certificate or the listener set changes. hitch 1.7.2 loads the new
// configuration in its main process, starts new workers with it and lets
// the old workers finish their connections, so a reload drops none; a
// configuration hitch would not load (hitch --test fails) is not
// installed. A certificate that fails Check never replaces the one being
// served: it is logged (once per change), counted and reported on the
// listener's status (ListenerStatus, the ResolvedRefs condition). A
// reference the listener may no longer use (Problem ProblemRevoked: the
// Secret deleted, no ReferenceGrant, reading it forbidden) withdraws the
// Secret's certificate instead: it leaves hitch's configuration, and the
// listener's status is reported only once hitch has loaded the
// configuration without it.
package tlsterm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// SecretRef names a Secret.
type SecretRef struct{ Namespace, Name string }

func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// Certificate is one certificateRef of a listener as its source resolved
// it.
type Certificate struct {
	Ref SecretRef
	// Cert and Key are the Secret's tls.crt and tls.key.
	Cert, Key []byte
	// Err is set when the reference did not resolve to a kubernetes.io/tls
	// Secret (missing, another type or kind, not permitted, not readable);
	// Reason is then the ResolvedRefs reason (InvalidCertificateRef when
	// empty) and Problem whether the Secret's last good certificate stays
	// served.
	Err     error
	Reason  gatewayv1.ListenerConditionReason
	Problem Problem
}

// Problem is the kind of a certificateRef's failure; it decides whether
// the last certificate of the Secret that passed Check stays served.
type Problem int

const (
	// ProblemRevoked: the listener may not use the Secret (any more): it
	// does not exist, no ReferenceGrant permits the reference, the API
	// server refuses to let the chaperone read it (403, 401), or the
	// reference names no Secret. The Secret's certificate is withdrawn.
	// It is the zero value: a failure a source does not classify
	// withdraws.
	ProblemRevoked Problem = iota
	// ProblemContent: the Secret is there and may be used, but its data is
	// no usable certificate (not PEM, key mismatch, expired, not yet
	// valid, not of type kubernetes.io/tls). The last good certificate
	// stays served.
	ProblemContent
	// ProblemTransient: the Secret could not be read for a reason that
	// may pass (API server unreachable, a 5xx answer, a timeout, a watch
	// not synced yet). The last good certificate stays served.
	ProblemTransient
)

// KeepsLastGood reports whether a reference failing with p leaves the last
// good certificate of its Secret served.
func (p Problem) KeepsLastGood() bool { return p == ProblemContent || p == ProblemTransient }

func (p Problem) String() string {
	switch p {
	case ProblemRevoked:
		return "revoked"
	case ProblemContent:
		return "content"
	case ProblemTransient:
		return "transient"
	}
	return "Problem(" + strconv.Itoa(int(p)) + ")"
}

// Listener is one HTTPS listener of the Gateway.
type Listener struct {
	Name         string
	Port         int
	Certificates []Certificate
}

// ListenerStatus is the ResolvedRefs condition of one HTTPS listener.
type ListenerStatus struct {
	Name    string
	Status  metav1.ConditionStatus
	Reason  gatewayv1.ListenerConditionReason
	Message string
	// Unserved: hitch serves none of the listener's certificates (none
	// resolved, each was withdrawn, or its port is not among
	// Config.Ports). Its routes must then not be served either: a client
	// that got another listener's certificate on the port, or reuses a
	// connection, must not reach them (Config.OnUnserved).
	Unserved bool
}

// Config configures a Manager.
type Config struct {
	// Dir holds hitch's configuration files and the PEM files; varnishd's
	// sockets port-N.sock are there too (varnishd.TLSListener).
	Dir string
	// HitchBin is the hitch executable.
	HitchBin string
	// ListenHost is the address hitch listens on ("" for all).
	ListenHost string
	// HTTP2 offers h2 in ALPN.
	HTTP2 bool
	// ProxyProtocol: a load balancer in front sends the PROXY protocol;
	// hitch passes its header on to varnishd instead of writing its own
	// (HitchConfig.ProxyProxy).
	ProxyProtocol bool
	// Ports are the HTTPS ports varnishd has a socket for (--tls-listen);
	// a listener on another port is not served (the pod must be rolled
	// with the new ports) and is logged.
	Ports []int
	// Logger receives the manager's and hitch's logs.
	Logger *slog.Logger
	// Registry, if set, gets the metrics.
	Registry prometheus.Registerer
	// OnStatus, if set, is called with the listeners' conditions after
	// every apply (never concurrently), changed or not: the Gateway
	// generation they describe may have changed (observedGeneration); the
	// status writer skips what it already wrote.
	OnStatus func([]ListenerStatus)
	// OnUnserved, if set, is called at every apply, before hitch's
	// configurations are installed, with the names of the listeners none
	// of whose certificates is served (ListenerStatus.Unserved), so that
	// their routes stop while hitch reloads, not after.
	OnUnserved func(listeners []string)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Workers is the number of hitch workers per port; 0: one per CPU the
	// chaperone may use (runtime.GOMAXPROCS, which follows the
	// container's CPU limit), as hitch's manual recommends (make bench-tls
	// measured 2 workers on 2 cores serving 11 % more than 1).
	Workers int
	// ReloadWait bounds how long a reload waits for hitch's previous
	// generation of workers to finish its connections (default 2 minutes;
	// see hitch.reloadLoop).
	ReloadWait time.Duration
	// Recheck is how often the certificates' validity is checked again
	// without a change (default a minute).
	Recheck time.Duration
}

// Manager runs hitch for the HTTPS listeners.
type Manager struct {
	cfg Config
	log *slog.Logger
	m   *metricSet

	mu      sync.Mutex
	want    []Listener
	hitches map[int]*hitch
	served  map[int]int // port → number of certificates its hitch serves
	// files are the PEM files of each port's installed configuration.
	files map[int][]string
	// needed are the ports with at least one valid certificate at the last
	// apply: their hitch must run for the pod to be ready. nil until the
	// first listeners were applied.
	needed   map[int]bool
	stopped  bool
	kick     chan struct{}
	runDone  chan struct{}
	cancel   context.CancelFunc
	good     map[SecretRef]*Checked // last certificate that passed Check
	warned   map[SecretRef]string   // the last problem logged
	unserved map[int]bool           // ports logged as not in Ports
	confs    map[int]string         // the configuration written
	status   []ListenerStatus
}

// New returns a Manager; Start runs it.
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("tlsterm: the TLS directory %q is not absolute: give --tls-dir an absolute path, e.g. /run/varnishgw/tls", cfg.Dir)
	}
	if cfg.HitchBin == "" {
		return nil, errors.New("tlsterm: the hitch executable is empty: give --hitch, e.g. --hitch=/usr/sbin/hitch")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.ReloadWait <= 0 {
		cfg.ReloadWait = 2 * time.Minute
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Minute
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger.With("component", "tls"),
		m:       newMetrics(),
		hitches: map[int]*hitch{}, served: map[int]int{}, files: map[int][]string{},
		kick: make(chan struct{}, 1), good: map[SecretRef]*Checked{}, warned: map[SecretRef]string{},
		unserved: map[int]bool{}, confs: map[int]string{},
	}
	if cfg.Registry != nil {
		if err := cfg.Registry.Register(m.m); err != nil {
			return nil, fmt.Errorf("tlsterm: register metrics: %w", err)
		}
	}
	return m, nil
}

// Update sets the desired listeners; it never blocks. The running manager
// applies them at once.
func (m *Manager) Update(ls []Listener) {
	m.mu.Lock()
	m.want = slices.Clone(ls)
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Start prepares the directory and applies the listeners from now on, until
// Stop. Call it once varnishd's sockets exist: hitch will not load a
// configuration whose backend socket is missing.
func (m *Manager) Start() error {
	if err := os.MkdirAll(m.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("--tls-dir=%s: %w", m.cfg.Dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.cancel = cancel
	m.runDone = make(chan struct{})
	m.mu.Unlock()
	go m.run(ctx)
	return nil
}

func (m *Manager) run(ctx context.Context) {
	defer close(m.runDone)
	t := time.NewTicker(m.cfg.Recheck)
	defer t.Stop()
	m.apply(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-t.C:
		}
		m.apply(ctx)
	}
}

// Stop stops applying and ends every hitch (SIGTERM, SIGKILL after
// timeout): the chaperone calls it after varnishd's drain, when no client
// session is left.
func (m *Manager) Stop(timeout time.Duration) {
	m.mu.Lock()
	m.stopped = true
	cancel, done := m.cancel, m.runDone
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	var wg sync.WaitGroup
	for _, h := range m.hitches {
		wg.Add(1)
		go func() { defer wg.Done(); h.stop(timeout) }()
	}
	wg.Wait()
}

// Ready returns "" when the hitch of every port in Config.Ports that has a
// valid certificate runs with it, else why not. Before the first listeners
// are applied it is not ready. A port none of whose certificates is usable
// (a Secret that cert-manager has not issued yet, say) does not hold the pod
// back: no pod could serve it, and the HTTP listeners (an ACME HTTP-01
// challenge among them) and a rollout must go on; the listener's
// ResolvedRefs condition says why it is not served.
func (m *Manager) Ready() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.needed == nil {
		return "waiting for the HTTPS listeners' certificates"
	}
	var why []string
	for _, p := range m.cfg.Ports {
		if !m.needed[p] {
			continue
		}
		h := m.hitches[p]
		switch {
		case m.served[p] == 0:
			why = append(why, fmt.Sprintf("hitch of HTTPS port %d has no configuration installed", p))
		case h == nil || !h.Running():
			why = append(why, fmt.Sprintf("hitch of HTTPS port %d is not running", p))
		}
	}
	return strings.Join(why, "; ")
}

// Statuses returns the listeners' conditions of the last apply.
func (m *Manager) Statuses() []ListenerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.status)
}

// HitchPid is the process ID of port's hitch, 0 when none runs (tests).
func (m *Manager) HitchPid(port int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.hitches[port]; h != nil {
		return h.pid()
	}
	return 0
}

// certFile is the path of a checked certificate's PEM file: named by its
// content, so that a new certificate never overwrites the file of the one
// a running hitch may read again.
func (m *Manager) certFile(c *Checked) string {
	return filepath.Join(m.cfg.Dir, "cert-"+c.Hash()+".pem")
}

// ConfFile is the path of port's hitch configuration.
func ConfFile(dir string, port int) string {
	return filepath.Join(dir, "hitch-"+strconv.Itoa(port)+".conf")
}

// BackendSocket is varnishd's socket for port (varnishd.TLSListener's
// path).
func BackendSocket(dir string, port int) string {
	return filepath.Join(dir, "port-"+strconv.Itoa(port)+".sock")
}

// planned is what an apply serves.
type planned struct {
	statuses []ListenerStatus
	// certs are the certificates of each port in Config.Ports, without
	// duplicates, the default (its first listener's first) first.
	certs map[int][]*Checked
	// withdrawn are the certificates a withdrawn reference took away from
	// a listener.
	withdrawn []*Checked
}

// plan checks every listener's certificates at now and decides which
// serve: a certificate that passes Check replaces its Secret's last good
// one; a reference that fails keeps the last good one only when its
// Problem KeepsLastGood (content and transient problems); a withdrawn
// reference serves nothing for its listener, and the Secret's last good
// certificate is forgotten unless another listener may still use it.
func (m *Manager) plan(want []Listener, now time.Time) planned {
	allowed := map[int]bool{}
	for _, p := range m.cfg.Ports {
		allowed[p] = true
	}
	out := planned{certs: map[int][]*Checked{}}
	servedBy := map[int]map[string]bool{}
	usable, withdrawn := map[SecretRef]bool{}, map[SecretRef]bool{}
	m.m.expiry.Reset()
	for _, l := range want {
		st := ListenerStatus{Name: l.Name, Status: metav1.ConditionTrue, Reason: gatewayv1.ListenerReasonResolvedRefs, Message: "every certificateRef resolves to a valid certificate"}
		var problems []string
		if len(l.Certificates) == 0 {
			st.Status, st.Reason = metav1.ConditionFalse, gatewayv1.ListenerReasonInvalidCertificateRef
			problems = append(problems, "the listener has no certificateRefs: an HTTPS listener needs tls.certificateRefs naming a kubernetes.io/tls Secret")
		}
		served := false
		for _, c := range l.Certificates {
			problem, reason, keep := m.check(c, now)
			if problem != "" {
				if st.Status == metav1.ConditionTrue || reason == gatewayv1.ListenerReasonRefNotPermitted {
					st.Reason = reason
				}
				st.Status = metav1.ConditionFalse
				problems = append(problems, fmt.Sprintf("Secret %s: %s", c.Ref, problem))
			}
			if !keep {
				withdrawn[c.Ref] = true
				if good := m.good[c.Ref]; good != nil {
					out.withdrawn = append(out.withdrawn, good)
				}
				continue
			}
			usable[c.Ref] = true
			good := m.good[c.Ref]
			if good == nil {
				continue
			}
			m.m.expiry.WithLabelValues(l.Name, c.Ref.Namespace, c.Ref.Name).Set(good.NotAfter.Sub(now).Hours() / 24)
			if !allowed[l.Port] {
				continue
			}
			served = true
			if servedBy[l.Port] == nil {
				servedBy[l.Port] = map[string]bool{}
			}
			if h := good.Hash(); !servedBy[l.Port][h] {
				servedBy[l.Port][h] = true
				out.certs[l.Port] = append(out.certs[l.Port], good)
			}
		}
		st.Unserved = !served
		if len(problems) > 0 {
			st.Message = strings.Join(problems, "; ")
		}
		if !allowed[l.Port] && !m.unserved[l.Port] {
			m.unserved[l.Port] = true
			m.log.Warn("HTTPS listener port is not among the chaperone's --tls-listen ports: not served until the gateway's pods are rolled with it", "listener", l.Name, "port", l.Port, "tls_listen", m.cfg.Ports)
		}
		out.statuses = append(out.statuses, st)
	}
	for ref := range withdrawn {
		if !usable[ref] && m.good[ref] != nil {
			delete(m.good, ref)
			m.log.Warn("certificate withdrawn: the listeners may no longer use the Secret", "secret", ref.String())
		}
	}
	return out
}

func (m *Manager) apply(ctx context.Context) {
	m.mu.Lock()
	want := m.want
	stopped := m.stopped
	m.mu.Unlock()
	if stopped {
		return
	}
	p := m.plan(want, m.cfg.Now())
	if m.cfg.OnUnserved != nil {
		var unserved []string
		for _, st := range p.statuses {
			if st.Unserved {
				unserved = append(unserved, st.Name)
			}
		}
		m.cfg.OnUnserved(unserved)
	}
	pems := map[int][]string{}
	for port, certs := range p.certs {
		for _, c := range certs {
			f := m.certFile(c)
			pems[port] = append(pems[port], f)
			if err := m.writeCert(c, f); err != nil {
				m.log.Error("write certificate for hitch", "path", f, "error", err)
			}
		}
	}

	// One hitch per port with certificates.
	needed := map[int]bool{}
	for port := range pems {
		needed[port] = true
	}
	m.mu.Lock()
	m.needed = needed
	m.mu.Unlock()
	// The reloads that take a withdrawn certificate out of a running
	// hitch: the statuses wait for them, so that a listener reported
	// without its certificate no longer completes a handshake with it.
	start := time.Now()
	withdrawals := map[int]<-chan struct{}{}
	for port, files := range pems {
		conf := HitchConfig{ListenHost: m.cfg.ListenHost, Port: port, Backend: BackendSocket(m.cfg.Dir, port), PEMFiles: files, HTTP2: m.cfg.HTTP2, ProxyProxy: m.cfg.ProxyProtocol, Workers: m.cfg.Workers, AsRoot: os.Geteuid() == 0}.Render()
		m.mu.Lock()
		dropped := slices.ContainsFunc(m.files[port], func(f string) bool {
			return !slices.Contains(files, f) && slices.ContainsFunc(p.withdrawn, func(c *Checked) bool { return m.certFile(c) == f })
		})
		m.mu.Unlock()
		reloaded, err := m.install(port, conf)
		if err != nil {
			m.m.reloads.WithLabelValues("error").Inc()
			m.log.Error("hitch configuration not installed; the running one stays", "port", port, "error", err)
			continue
		}
		if dropped && reloaded != nil {
			withdrawals[port] = reloaded
		}
		m.mu.Lock()
		m.served[port] = len(files)
		m.files[port] = files
		m.mu.Unlock()
	}
	for port, h := range m.hitchesCopy() {
		if _, ok := pems[port]; ok {
			continue
		}
		m.log.Info("no HTTPS listener with a certificate on the port any more: stopping its hitch", "port", port)
		h.stop(10 * time.Second)
		m.mu.Lock()
		delete(m.hitches, port)
		delete(m.served, port)
		delete(m.files, port)
		delete(m.confs, port)
		m.mu.Unlock()
		_ = os.Remove(ConfFile(m.cfg.Dir, port))
	}
	for port, reloaded := range withdrawals {
		select {
		case <-reloaded:
			m.log.Info("hitch reloaded without a withdrawn certificate", "port", port, "after", time.Since(start).Round(time.Millisecond).String())
		case <-ctx.Done():
		case <-time.After(m.cfg.ReloadWait + 15*time.Second):
			m.log.Warn("hitch has not reloaded without a withdrawn certificate yet; reporting the listeners' status all the same", "port", port, "waited", time.Since(start).Round(time.Millisecond).String())
		}
	}
	m.removeStaleCerts()

	m.mu.Lock()
	m.status = p.statuses
	m.mu.Unlock()
	if m.cfg.OnStatus != nil {
		m.cfg.OnStatus(slices.Clone(p.statuses))
	}
}

func (m *Manager) hitchesCopy() map[int]*hitch {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]*hitch, len(m.hitches))
	for p, h := range m.hitches {
		out[p] = h
	}
	return out
}

// check checks c and records a good certificate; it returns the problem
// ("" for none), its reason and whether the Secret's last good certificate
// may serve the listener (keep). A problem is logged and counted once per
// change.
func (m *Manager) check(c Certificate, now time.Time) (problem string, reason gatewayv1.ListenerConditionReason, keep bool) {
	reason = gatewayv1.ListenerReasonInvalidCertificateRef
	var counted bool
	keep = true
	if c.Err != nil {
		problem = c.Err.Error()
		if c.Reason != "" {
			reason = c.Reason
		}
		keep = c.Problem.KeepsLastGood()
	} else {
		checked, err := Check(c.Cert, c.Key, now)
		if err == nil {
			if old := m.good[c.Ref]; old == nil || old.Hash() != checked.Hash() {
				m.log.Info("certificate accepted", "secret", c.Ref.String(), "names", checked.Names, "not_after", checked.NotAfter.UTC().Format(time.RFC3339))
			}
			m.good[c.Ref] = checked
			delete(m.warned, c.Ref)
			return "", "", true
		}
		problem, counted = err.Error(), true
	}
	switch {
	case !keep:
		problem += " (the listener does not serve the Secret's certificate)"
	case m.good[c.Ref] != nil:
		problem += " (the previous certificate of the Secret is served meanwhile)"
	}
	if m.warned[c.Ref] != problem {
		m.warned[c.Ref] = problem
		m.log.Warn("certificate not used", "secret", c.Ref.String(), "reason", string(reason), "problem", problem)
		if counted {
			m.m.rejected.Inc()
		}
	}
	return problem, reason, keep
}

func (m *Manager) writeCert(c *Checked, path string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == string(c.PEM) {
		return nil
	}
	return writeAtomic(path, c.PEM)
}

// install writes port's configuration when it changed, after hitch --test
// accepted it, and starts or reloads the port's hitch. reloaded is closed
// once a reload has taken effect; it is nil when the configuration did not
// change or hitch was started.
func (m *Manager) install(port int, conf string) (reloaded <-chan struct{}, err error) {
	m.mu.Lock()
	same := m.confs[port] == conf
	h := m.hitches[port]
	m.mu.Unlock()
	if same && h != nil {
		return nil, nil
	}
	path := ConfFile(m.cfg.Dir, port)
	tmp := path + ".new"
	if err := writeAtomic(tmp, []byte(conf)); err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := TestConfig(ctx, m.cfg.HitchBin, tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.confs[port] = conf
	m.mu.Unlock()
	if h == nil {
		h = startHitch(m.cfg.HitchBin, path, m.cfg.ListenHost, port, m.cfg.Workers, m.log.With("port", port), m.cfg.ReloadWait,
			func() { m.m.restarts.WithLabelValues(strconv.Itoa(port)).Inc() },
			func(waited time.Duration, timedOut bool) {
				m.m.reloads.WithLabelValues("ok").Inc()
				if timedOut {
					m.m.reloads.WithLabelValues("forced").Inc()
				}
			})
		m.mu.Lock()
		m.hitches[port] = h
		m.mu.Unlock()
		return nil, nil
	}
	m.log.Info("reloading hitch (SIGHUP)", "port", port)
	return h.reload(), nil
}

// removeStaleCerts removes the PEM files no configuration names any more.
func (m *Manager) removeStaleCerts() {
	m.mu.Lock()
	used := map[string]bool{}
	for _, conf := range m.confs {
		for _, line := range strings.Split(conf, "\n") {
			if v, ok := strings.CutPrefix(line, "pem-file = "); ok {
				if p, err := strconv.Unquote(v); err == nil {
					used[p] = true
				}
			}
		}
	}
	m.mu.Unlock()
	files, _ := filepath.Glob(filepath.Join(m.cfg.Dir, "cert-*.pem"))
	for _, f := range files {
		if !used[f] {
			_ = os.Remove(f)
		}
	}
}
