package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/accesslog"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/drain"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/health"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/invalidateapi"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/metrics"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/routingsync"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlssource"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/invalidation"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishadm"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishstat"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/version"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// drainHookLinger bounds how long a sidecar chaperone drained by SIGTERM
// waits, before exiting, for the drain request of the varnish container's
// preStop hook. Both start after the same pause (the chaperone container's
// preStop sleep, the hook's --delay), so the request normally comes within
// a second; were the chaperone gone by then, the hook would find no socket
// and the kubelet would report FailedPreStopHook.
const drainHookLinger = 10 * time.Second

// errNoVCL is VCLError before the first main VCL is active.
var errNoVCL = errors.New("main VCL not loaded yet")

// admin holds the current admin connection; in sidecar mode a new varnishd
// connects again and replaces it.
type admin struct {
	mu   sync.Mutex
	conn *varnishadm.Conn
}

func (a *admin) get() *varnishadm.Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}

func (a *admin) set(c *varnishadm.Conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		a.conn.Close()
	}
	a.conn = c
}

func (a *admin) VCLInline(ctx context.Context, name, source string) error {
	return a.get().VCLInline(ctx, name, source)
}
func (a *admin) VCLUse(ctx context.Context, name string) error { return a.get().VCLUse(ctx, name) }
func (a *admin) VCLDiscard(ctx context.Context, name string) error {
	return a.get().VCLDiscard(ctx, name)
}
func (a *admin) VCLList(ctx context.Context) ([]varnishadm.VCL, error) {
	return a.get().VCLList(ctx)
}

// Chaperone is the runtime half of the in-pod agent.
type Chaperone struct {
	cfg     *Config
	logger  *slog.Logger
	routing routingHalf

	admin    admin
	proc     *varnishd.Process // supervise mode only
	reloader *vcl.Reloader
	metrics  *metrics.Chaperone
	stats    *varnishstat.Poller
	checker  *health.Checker
	drainer  *drain.Drainer
	tls      *tlsterm.Manager // nil without HTTPS ports

	varnishUp     atomic.Bool
	connected     atomic.Bool // varnishd's admin connection was taken once
	routingLoaded atomic.Bool
	vclErr        atomic.Pointer[error]
}

// routingHalf is the chaperone's routing half (routingsync.Routing, or
// routingsync.FileRouting when ghost.json is written by someone else).
type routingHalf interface {
	// Run keeps routing current until ctx ends. It is called once, after
	// varnishd runs; env gives it what it needs from the runtime half.
	Run(ctx context.Context, env routingsync.Env) error
	// ChildStarted is called when varnishd's manager has restarted a
	// crashed cache child (the VCLs are back and ghost re-read ghost.json
	// in vcl_init): push the routing state again if it may be newer than
	// the file.
	ChildStarted(ctx context.Context)
}

// TLSHalf is where the certificates of the Gateway's HTTPS listeners come
// from and where their ResolvedRefs condition goes (--tls-listen).
type TLSHalf struct {
	Source tlssource.Source
	// Status is nil without Kubernetes.
	Status *gatewaystatus.ListenerWriter
	// ListenerSets gets the ResolvedRefs conditions of the HTTPS
	// listeners of the Gateway's ListenerSets; nil without Kubernetes.
	ListenerSets *gatewaystatus.ListenerSetWriter
}

// CacheHalf is where the Gateway's cache invalidations come from and
// where their acknowledgements go (--routing=kubernetes), and what the
// invalidation endpoint (--invalidate-addr) checks callers with.
type CacheHalf struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Gateway object.Ref
	Pod     vgwapi.Pod
}

// Halves are the parts Run starts beside the routing half, nil when the
// configuration has none: TLS is needed with HTTPS ports (--tls-listen)
// and ignored without; Cache comes with --routing=kubernetes.
type Halves struct {
	TLS   *TLSHalf
	Cache *CacheHalf
}

// Run runs the chaperone until SIGTERM/SIGINT has drained varnishd (nil, exit
// 0) or something fails (exit 1). sig delivers the termination signals;
// ending ctx stops at once, without draining.
func Run(ctx context.Context, cfg *Config, routing routingHalf, halves *Halves, logger *slog.Logger, sig <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if halves == nil {
		halves = &Halves{}
	}
	tls := halves.TLS
	if routing == nil {
		routing = &routingsync.FileRouting{}
	}
	c := &Chaperone{cfg: cfg, logger: logger, routing: routing}
	c.setVCLErr(errNoVCL)
	reg := metrics.NewRegistry()
	c.metrics = metrics.NewChaperone(reg)
	c.stats = &varnishstat.Poller{
		Reader:   varnishstat.Reader{Bin: cfg.VarnishstatBin, WorkDir: cfg.WorkDir, Exclude: cfg.StatsExclude},
		Interval: cfg.StatsInterval,
		Logger:   logger,
	}
	reg.MustRegister(varnishstat.Collector{Poller: c.stats})
	c.reloader = &vcl.Reloader{Admin: &c.admin, Keep: cfg.VCLKeep, Logger: logger, Observer: reloadObserver{c}}
	c.checker = &health.Checker{VarnishReady: c.varnishUp.Load, RoutingLoaded: c.routingLoaded.Load}
	// The generations the TLS listeners' statuses describe (the
	// Gateway's, its ListenerSets').
	var tlsSnapshot atomic.Pointer[tlssource.Snapshot]
	if len(cfg.TLSPorts) > 0 {
		if tls == nil || tls.Source == nil {
			return fmt.Errorf("--tls-listen=%v: no source of certificates (--routing=%s)", cfg.TLSPorts, cfg.RoutingSource)
		}
		// varnishd creates its TLS sockets here; only the chaperone's
		// user (varnishd's and hitch's) may enter.
		if err := os.MkdirAll(cfg.TLSDir, 0o700); err != nil {
			return fmt.Errorf("--tls-dir=%s: %w", cfg.TLSDir, err)
		}
		// The routing half leaves out the routes of the HTTPS listeners
		// hitch serves no certificate of (a withdrawn Secret or
		// ReferenceGrant): no other listener's certificate on the port
		// reaches them.
		var onUnserved func([]string)
		if w, ok := routing.(interface{ WithholdListeners([]string) }); ok {
			onUnserved = w.WithholdListeners
		}
		var onStatus func([]tlsterm.ListenerStatus)
		if tls.Status != nil || tls.ListenerSets != nil {
			onStatus = func(st []tlsterm.ListenerStatus) {
				snap := tlsSnapshot.Load()
				if snap == nil {
					return // no snapshot applied yet: no generation
				}
				if tls.Status != nil {
					tls.Status.Set(snap.Generation, gatewayListenerConditions(st))
				}
				if tls.ListenerSets != nil {
					tls.ListenerSets.Set(listenerSetConditions(st, snap.ListenerSetGenerations))
				}
			}
		}
		var err error
		c.tls, err = tlsterm.New(tlsterm.Config{
			Dir: cfg.TLSDir, HitchBin: cfg.HitchBin, ListenHost: cfg.ListenHost, HTTP2: cfg.HTTP2, ProxyProtocol: cfg.ProxyProtocol, Ports: cfg.TLSPorts,
			Logger: logger, Registry: reg, OnStatus: onStatus, OnUnserved: onUnserved,
		})
		if err != nil {
			return err
		}
		c.checker.TLSReady = c.tls.Ready
	}
	c.drainer = &drain.Drainer{
		LiveSessions: c.liveSessions,
		Stop: func(ctx context.Context) error {
			// No client session is left: hitch stops accepting before
			// varnishd stops.
			if c.tls != nil {
				c.tls.Stop(10 * time.Second)
			}
			conn := c.admin.get()
			if conn == nil {
				return nil // sidecar: varnishd never connected, nothing to stop
			}
			return conn.Stop(ctx)
		},
		OnStart: func() {
			c.checker.StartDraining()
			c.metrics.SetDraining(true)
		},
		OnCount: c.metrics.SetLiveSessions,
		// ghost sets Connection: close on every response from now on.
		CloseConnections: func(ctx context.Context) error {
			if !c.connected.Load() {
				return nil // no varnishd yet: no connection to close
			}
			return ghostadmin.Drain(ctx, cfg.GhostAdminAddr)
		},
		OnClosing: func() { c.metrics.SetClosingConnections(true) },
		Timeout:   cfg.DrainTimeout,
		Logger:    logger,
	}

	// Probes and metrics first: Kubernetes sees the pod alive while
	// varnishd starts. The health server is read only: nothing on it
	// changes state, it may be reachable from the network.
	mux := http.NewServeMux()
	c.checker.Register(mux)
	mux.Handle("GET /metrics", metrics.Handler(reg))
	// A drain is started by SIGTERM or through the drain socket, a Unix
	// socket of mode 0600 that only a process of the pod can reach (the
	// varnish container's preStop hook, chaperone drain).
	if cfg.DrainSocket != "" {
		dl, err := drain.Listen(cfg.DrainSocket)
		if err != nil {
			return fmt.Errorf("--drain-socket=%s: %w", cfg.DrainSocket, err)
		}
		dmux := http.NewServeMux()
		dmux.Handle("POST "+drain.Path, c.drainer.Handler())
		dctx, dcancel := context.WithCancel(context.Background())
		dsrv := newServer(dmux)
		dsrv.BaseContext = func(net.Listener) context.Context { return dctx }
		go func() {
			if err := dsrv.Serve(dl); !errors.Is(err, http.ErrServerClosed) {
				logger.Error("drain socket stopped serving", "path", cfg.DrainSocket, "error", err)
			}
		}()
		defer func() {
			// Drained: the waiting requests get their answer before the
			// chaperone exits. Not drained (exiting on an error): they
			// end without one, which chaperone drain reports.
			select {
			case <-c.drainer.Done():
			default:
				dcancel()
			}
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := dsrv.Shutdown(sctx); err != nil {
				logger.Warn("drain socket: shutdown", "error", err)
			}
			dcancel()
		}()
		logger.Info("drain socket ready", "path", cfg.DrainSocket)
	}
	hl, err := net.Listen("tcp", cfg.HealthAddr)
	if err != nil {
		return fmt.Errorf("--health-addr=%s: %w", cfg.HealthAddr, err)
	}
	srv := newServer(mux)
	go func() {
		if err := srv.Serve(hl); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("health and metrics server stopped serving", "addr", hl.Addr().String(), "error", err)
		}
	}()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			logger.Warn("health and metrics server: shutdown", "error", err)
		}
	}()
	logger.Info("chaperone started", "version", version.String(), "mode", cfg.Mode, "health_addr", hl.Addr().String())

	// A signal while varnishd starts (or, in sidecar mode, before it has
	// connected) ends the start: there is nothing to drain yet. So does a
	// drain request: it finds no session (liveSessions) and ends at once.
	startCtx, startCancel := context.WithCancel(ctx)
	started := make(chan struct{})
	var startSignal atomic.Bool
	go func() {
		select {
		case s := <-sig:
			logger.Info("signal before varnishd was up: exiting", "signal", s.String())
			startSignal.Store(true)
			startCancel()
		case <-c.drainer.Done():
			logger.Info("drained before varnishd was up: exiting")
			startSignal.Store(true)
			startCancel()
		case <-started:
		}
	}()
	varnishDone, err := c.startVarnish(startCtx, ctx)
	close(started)
	startCancel()
	if startSignal.Load() {
		if c.proc != nil {
			c.proc.Stop(30 * time.Second)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if c.proc != nil {
		defer c.proc.Stop(30 * time.Second)
	}
	c.connected.Store(true)
	c.varnishUp.Store(true)
	if c.tls != nil {
		// varnishd's TLS sockets exist now: hitch refuses a
		// configuration whose backend socket is missing.
		if err := c.tls.Start(); err != nil {
			return err
		}
		defer c.tls.Stop(10 * time.Second) // before varnishd's Stop
		go func() {
			if err := tlssource.Run(ctx, tls.Source, c.tls, func(s tlssource.Snapshot) { tlsSnapshot.Store(&s) }); err != nil && ctx.Err() == nil {
				logger.Error("certificates of the HTTPS listeners: watch stopped", "error", err)
			}
		}()
		if tls.Status != nil {
			go tls.Status.Run(ctx)
		}
		if tls.ListenerSets != nil {
			go tls.ListenerSets.Run(ctx)
		}
	}

	var restarted varnishd.ChildWatch
	c.stats.OnSnapshot(func(s varnishstat.Snapshot) {
		if restarted.Observe(s.ChildStarts()) {
			c.childRestarted(ctx)
		}
	})
	go c.stats.Run(ctx)
	go c.watchVarnish(ctx)
	if cfg.AccessLog {
		// One JSON line per client request on stdout (the container
		// log), from varnishncsa, in both modes: varnishd's shared
		// memory is in the work dir (shared with the varnish container
		// in sidecar mode). It is stopped before Run returns.
		al := accesslog.New(accesslog.Config{Bin: cfg.VarnishncsaBin, WorkDir: cfg.WorkDir, Out: os.Stdout, Logger: logger})
		reg.MustRegister(al)
		alCtx, alCancel := context.WithCancel(ctx)
		alDone := make(chan struct{})
		go func() { defer close(alDone); al.Run(alCtx) }()
		defer func() { alCancel(); <-alDone }()
	}
	if cfg.VCLPath != "" {
		go c.reloader.WatchFile(ctx, cfg.VCLPath, 2*time.Second, c.setVCLErr)
	}
	env := routingsync.Env{
		GhostAdminAddr: cfg.GhostAdminAddr,
		GhostJSONPath:  cfg.GhostJSONPath,
		RoutingLoaded: func() {
			if !c.routingLoaded.Swap(true) {
				logger.Info("first routing loaded")
			}
		},
		LoadVCL: func(ctx context.Context, source string) error {
			err := c.reloader.Load(ctx, source)
			c.setVCLErr(err)
			return err
		},
		VCLError:      func() error { return *c.vclErr.Load() },
		ObserveReload: c.metrics.ObserveReload,
		Metrics:       reg,
		Logger:        logger.With("component", "routing"),
	}
	routingDone := make(chan error, 1)
	go func() { routingDone <- routing.Run(ctx, env) }()
	if halves.Cache != nil {
		stop, err := c.startInvalidation(ctx, halves.Cache, reg)
		if err != nil {
			return err
		}
		defer stop()
	}

	// Wait for the end: a signal starts the drain, a second one ends at once.
	drainDone := c.drainer.Done()
	signals := 0
	for {
		select {
		case s := <-sig:
			signals++
			if signals > 1 {
				logger.Warn("second signal: stopping at once", "signal", s.String())
				if c.proc != nil {
					c.proc.Kill()
				}
				return errors.New("stopped by a second signal before draining finished")
			}
			logger.Info("signal: draining", "signal", s.String())
			// Its outcome is read below, when drainDone fires.
			go func() { _ = c.drainer.Drain(context.Background()) }()
		case <-drainDone:
			var timeout *drain.TimeoutError
			if err := c.drainer.Drain(ctx); err != nil && !errors.As(err, &timeout) {
				return err
			}
			// After a timeout varnishd was stopped all the same: exit 0
			// (the drain socket's caller is told about the timeout).
			c.awaitDrainHook(sig)
			logger.Info("drained, exiting")
			return nil
		case <-varnishDone:
			if c.checker.Draining() {
				// the drain stopped it; wait for the drain to finish
				varnishDone = nil
				continue
			}
			return fmt.Errorf("varnishd exited: %w", c.proc.Err())
		case err := <-routingDone:
			if ctx.Err() == nil {
				return fmt.Errorf("routing stopped: %w", err)
			}
		case <-ctx.Done():
			// the caller ended Run: stop without draining
			return ctx.Err()
		}
	}
}

// awaitDrainHook keeps a drained sidecar chaperone, and so its drain
// socket, up until the varnish container's preStop hook has asked for the
// drain (it then gets its answer before the socket closes), for at most
// drainHookLinger, or until a second signal.
func (c *Chaperone) awaitDrainHook(sig <-chan os.Signal) {
	if c.cfg.Mode != ModeSidecar || c.cfg.DrainSocket == "" {
		return
	}
	select {
	case <-c.drainer.Requested():
		return
	default:
	}
	c.logger.Info("drained: waiting for the varnish container's preStop hook before exiting", "at_most", drainHookLinger.String())
	t := time.NewTimer(drainHookLinger)
	defer t.Stop()
	select {
	case <-c.drainer.Requested():
	case <-t.C:
		c.logger.Warn("drained: no drain request from the varnish container's preStop hook; exiting", "waited", drainHookLinger.String())
	case <-sig:
	}
}

// startVarnish runs varnishd (supervise) or waits for the varnishd of the
// other container to connect (sidecar). The channel is closed when a
// supervised varnishd exits; nil in sidecar mode.
// ctx bounds the start, runCtx the chaperone's life (the sidecar's accept
// loop).
func (c *Chaperone) startVarnish(ctx, runCtx context.Context) (<-chan struct{}, error) {
	if c.cfg.Mode == ModeSidecar {
		secret, err := c.cfg.readSecret()
		if err != nil {
			return nil, err
		}
		l, err := net.Listen("tcp", c.cfg.AdminAddr)
		if err != nil {
			return nil, fmt.Errorf("--admin-addr=%s: %w", c.cfg.AdminAddr, err)
		}
		c.logger.Info("waiting for varnishd's admin connection", "admin_addr", c.cfg.AdminAddr)
		conn, err := varnishadm.Accept(ctx, l, secret)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("accept varnishd's admin connection: %w", err)
		}
		c.admin.set(conn)
		go func() {
			defer l.Close()
			c.reacceptLoop(runCtx, func(ctx context.Context) (*varnishadm.Conn, error) {
				return varnishadm.Accept(ctx, l, secret)
			})
		}()
		return nil, nil
	}
	proc, err := varnishd.Start(ctx, varnishd.Config{
		Bin:             c.cfg.VarnishdBin,
		WorkDir:         c.cfg.WorkDir,
		Listeners:       c.cfg.Listeners(),
		GhostAdminAddr:  c.cfg.GhostAdminAddr,
		AdminAddr:       c.cfg.AdminAddr,
		Storage:         c.cfg.Storage,
		Params:          c.cfg.VarnishParams(),
		ThreadPoolStack: c.cfg.ThreadPoolStack,
		Logger:          c.logger,
	})
	if err != nil {
		return nil, err
	}
	c.proc = proc
	c.admin.set(proc.Admin)
	go c.reacceptLoop(runCtx, proc.AcceptAdmin)
	return proc.Done(), nil
}

// reacceptLoop takes the admin connection of a varnishd that connects again:
// its container restarted (sidecar), or the chaperone closed the connection
// after a command failed mid-answer (varnishadm.ErrBroken). The VCL and
// routing are pushed to it as after a child restart. It ends with ctx or
// when accept can take no more connections (varnishd exited).
func (c *Chaperone) reacceptLoop(ctx context.Context, accept func(context.Context) (*varnishadm.Conn, error)) {
	for ctx.Err() == nil {
		conn, err := accept(ctx)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			c.logger.Warn("varnishd's admin connection", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		c.logger.Info("varnishd connected again")
		c.admin.set(conn)
		c.reloader.Forget()
		c.childRestarted(ctx)
	}
}

// watchVarnish keeps varnishUp current: the child runs and the admin
// connection answers.
func (c *Chaperone) watchVarnish(ctx context.Context) {
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, err := c.admin.get().Status(sctx)
		cancel()
		c.varnishUp.Store(err == nil && status == "running")
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// childRestarted pushes VCL and routing again after a cache child restart.
// The manager gives the new child every loaded VCL, so the VCL is only loaded
// again when the active one is not the reloader's.
func (c *Chaperone) childRestarted(ctx context.Context) {
	c.logger.Warn("varnishd's cache child was restarted; pushing VCL and routing again")
	c.metrics.ObserveChildRestart()
	// The new child's ghost does not know about a running drain.
	c.drainer.CloseAgain()
	if c.cfg.VCLPath != "" {
		vcls, err := c.admin.get().VCLList(ctx)
		active := ""
		for _, v := range vcls {
			if v.Active() {
				active = v.Name
			}
		}
		if err != nil || active != c.reloader.Active() {
			c.reloader.Forget()
			c.setVCLErr(c.reloader.LoadFile(ctx, c.cfg.VCLPath))
		}
	}
	c.routing.ChildStarted(ctx)
}

func (c *Chaperone) setVCLErr(err error) { c.vclErr.Store(&err) }

// startInvalidation applies the Gateway's cache invalidations and, with
// --invalidate-addr, serves the invalidation endpoint. stop shuts the
// endpoint down.
func (c *Chaperone) startInvalidation(ctx context.Context, h *CacheHalf, reg *prometheus.Registry) (stop func(), err error) {
	applier := invalidation.New(invalidation.Config{
		Dynamic: h.Dynamic, Gateway: h.Gateway, Pod: h.Pod,
		Ban: func(ctx context.Context, args []string) error {
			_, err := c.admin.get().Do(ctx, append([]string{"ban"}, args...)...)
			return err
		},
		ChildStart: c.childStart,
		Metrics:    reg,
		Logger:     c.logger.With("component", "invalidation"),
	})
	go func() {
		if err := applier.Run(ctx); err != nil && ctx.Err() == nil {
			c.logger.Error("cache invalidations: watch stopped", "error", err)
		}
	}()
	if c.cfg.InvalidateAddr == "" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", c.cfg.InvalidateAddr)
	if err != nil {
		return nil, fmt.Errorf("--invalidate-addr=%s: %w", c.cfg.InvalidateAddr, err)
	}
	ep := &invalidateapi.Endpoint{Kube: h.Kube, Dynamic: h.Dynamic, Gateway: h.Gateway, Timeout: c.cfg.InvalidateTimeout, Logger: c.logger.With("component", "invalidation")}
	srv := newServer(ep.Handler())
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			c.logger.Error("invalidation endpoint stopped serving", "addr", l.Addr().String(), "error", err)
		}
	}()
	c.logger.Info("invalidation endpoint ready", "addr", l.Addr().String())
	return func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			c.logger.Warn("invalidation endpoint: shutdown", "error", err)
		}
	}, nil
}

// childStart is a time at or before the start of the running cache
// child: the latest counters' time minus the child's uptime (MAIN.uptime,
// whole seconds) and one second more. Before the first counters it reads
// them; the zero time when that fails (nothing is skipped then).
func (c *Chaperone) childStart() time.Time {
	s, _ := c.stats.Latest()
	if !s.Has("MAIN.uptime") {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, _ = c.stats.Poll(ctx)
		if !s.Has("MAIN.uptime") {
			return time.Time{}
		}
	}
	return s.Time.Add(-time.Duration(s.Value("MAIN.uptime"))*time.Second - time.Second)
}

// reloadObserver counts VCL reloads and, while draining, tells the new
// VCL's ghost about the drain too. ghost's drain flag belongs to the VMOD
// file every VCL shares, so this only matters for a VCL that imports
// another copy of ghost; it costs one loopback request.
type reloadObserver struct{ c *Chaperone }

func (o reloadObserver) ObserveReload(kind string, err error) {
	o.c.metrics.ObserveReload(kind, err)
	if err == nil {
		o.c.drainer.CloseAgain()
	}
}

// liveSessions reads the counters now (not the cached snapshot) and returns
// the number of open client sessions.
func (c *Chaperone) liveSessions(ctx context.Context) (uint64, error) {
	if !c.connected.Load() {
		// sidecar: a drain before varnishd connected; nothing to wait for
		return 0, nil
	}
	s, err := c.stats.Poll(ctx)
	if err != nil {
		return 0, err
	}
	n, ok := s.LiveSessions()
	if !ok {
		// no MEMPOOL.sess gauges: the cache child is not running, so no
		// session is open
		return 0, nil
	}
	return n, nil
}

// notifySignals returns the channel Run reads termination signals from.
func notifySignals() <-chan os.Signal {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	return ch
}

// gatewayListenerConditions are the ResolvedRefs conditions of the
// Gateway's own HTTPS listeners among st: the listeners of its
// ListenerSets that hitch serves too are no listeners of the Gateway,
// and their status is the ListenerSet's.
func gatewayListenerConditions(st []tlsterm.ListenerStatus) []gatewaystatus.ListenerCondition {
	conds := make([]gatewaystatus.ListenerCondition, 0, len(st))
	for _, s := range st {
		if _, ok := routing.ListenerSetOf(s.Name); ok {
			continue
		}
		conds = append(conds, gatewaystatus.ListenerCondition{Listener: s.Name, Status: s.Status, Reason: s.Reason, Message: s.Message})
	}
	return conds
}

// listenerSetConditions are the ResolvedRefs conditions of the HTTPS
// listeners of the Gateway's ListenerSets among st, by ListenerSet, each
// named by its name in the ListenerSet, with the ListenerSet's generation
// from gens; a ListenerSet without one there is left out (its
// observedGeneration would be a guess).
func listenerSetConditions(st []tlsterm.ListenerStatus, gens map[object.Ref]int64) map[object.Ref]gatewaystatus.ListenerSetConditions {
	out := map[object.Ref]gatewaystatus.ListenerSetConditions{}
	for _, s := range st {
		set, listener, ok := routing.ParseListenerSetListenerKey(s.Name)
		if !ok {
			continue
		}
		gen, ok := gens[set]
		if !ok {
			continue
		}
		c := out[set]
		c.Generation = gen
		c.Conditions = append(c.Conditions, gatewaystatus.ListenerCondition{Listener: listener, Status: s.Status, Reason: s.Reason, Message: s.Message})
		out[set] = c
	}
	return out
}

// maxHeaderBytes bounds the request headers of the chaperone's HTTP
// servers: their requests carry a bearer token at most; more answers 431.
const maxHeaderBytes = 64 << 10

// newServer is an HTTP server of the chaperone (health and metrics, drain
// socket, invalidation endpoint) for h: a client that sends its headers
// slowly, leaves a connection idle or sends large headers does not hold
// the chaperone's memory or connections for long.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}
