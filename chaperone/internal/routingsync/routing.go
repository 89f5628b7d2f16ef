package routingsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/apiwatch"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/metrics"
	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/vcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// Routing is the chaperone's routing half built on a Syncer:
// it writes ghost.json from Source, reloads ghost, counts reloads in the
// chaperone's metrics, marks routing loaded for /readyz, sets the Gateway's
// Programmed condition when Status is set, and resyncs after a child restart.
// With VCL set it also feeds varnishd the main VCL from the Gateway's VCL
// ConfigMap, and Programmed is True only when that VCL is active and the
// routing loaded.
type Routing struct {
	// Source is the routing state (KubeSource or DirSource).
	Source Source
	// Status, if set, receives the Programmed condition (Kubernetes only).
	Status *gatewaystatus.Writer
	// AttachedRoutes and Routes, if set, receive after every sync the
	// listeners' attachedRoutes and the routes' ResolvedRefs condition of
	// the state it was built from (Kubernetes only; RouteStatus).
	AttachedRoutes *gatewaystatus.AttachedRoutesWriter
	Routes         *gatewaystatus.RouteWriter
	// Reporter, if set, receives the routing the pod serves after every
	// sync that loaded it (Kubernetes only): the pod's GatewayPodReport.
	Reporter *vgwapi.Reporter
	// VCL, if set, is where main.vcl comes from (the chaperone runs with
	// --vcl=""); nil when the chaperone loads a --vcl file itself.
	VCL *vcl.KubeSource
	// API, if set, follows the connection to the API server (the
	// transport of the Kubernetes clients is wrapped by it): its metrics
	// are registered with the chaperone's, and it is in sync once Source
	// (when it has a Synced method, as KubeSource) has synced.
	API *apiwatch.Monitor
	// Collectors are registered with the chaperone's metrics in Run (for
	// example the dnswatch.Watcher of KubeConfig.ExternalNames).
	Collectors []prometheus.Collector

	syncer atomic.Pointer[Syncer]
	// withheld are the listeners whose routes are not served
	// (WithholdListeners), sorted.
	withheld atomic.Pointer[[]string]

	mu         sync.Mutex
	env        Env
	routingRes *routingState // nil until a sync knew the Gateway
	vclStatus  *vcl.Status   // nil until the VCL ConfigMap was read
}

// routingState is what the Programmed condition needs of the last sync.
type routingState struct {
	generation int64
	err        error
	pending    bool
	rejected   []vgwapi.Rejection
}

// Run keeps the routing current until ctx ends; the chaperone calls it
// once, after varnishd runs.
func (a *Routing) Run(ctx context.Context, env Env) error {
	a.mu.Lock()
	a.env = env
	a.mu.Unlock()
	m := NewMetrics()
	if env.Metrics != nil {
		if err := env.Metrics.Register(m); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return err
		}
	}
	for _, c := range a.Collectors {
		if env.Metrics == nil {
			break
		}
		if err := env.Metrics.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return err
		}
	}
	if a.API != nil {
		if src, ok := a.Source.(interface{ Synced() bool }); ok {
			a.API.SetSynced(src.Synced)
		}
		if env.Metrics != nil {
			if err := env.Metrics.Register(a.API); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				return err
			}
		}
	}
	if a.Status != nil {
		go a.Status.Run(ctx)
	}
	if a.AttachedRoutes != nil {
		go a.AttachedRoutes.Run(ctx)
	}
	if a.Routes != nil {
		go a.Routes.Run(ctx)
	}
	if a.Reporter != nil {
		go a.Reporter.Run(ctx)
	}
	var loaded atomic.Bool
	var s *Syncer
	s, err := New(Config{
		Source:   a.Source,
		Path:     env.GhostJSONPath,
		Reloader: ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: env.GhostAdminAddr, Logger: env.Logger}),
		Logger:   env.Logger,
		Withheld: func() []string {
			if w := a.withheld.Load(); w != nil {
				return *w
			}
			return nil
		},
		OnResult: func(r Result) {
			m.Observe(r)
			switch r.Outcome {
			case OutcomeReloaded:
				env.ObserveReload(metrics.KindGhost, nil)
			case OutcomeRejected, OutcomeError:
				env.ObserveReload(metrics.KindGhost, r.Err)
			}
			if s.Loaded() && !loaded.Swap(true) {
				env.RoutingLoaded()
			}
			if r.Gateway != nil {
				a.mu.Lock()
				a.routingRes = &routingState{r.Gateway.Generation, r.Err, r.Outcome == OutcomeError, r.Rejected}
				a.mu.Unlock()
				a.setStatus()
			}
			if r.State != nil && r.State.Gateway != nil {
				attached, routes := RouteStatus(r.State)
				if a.AttachedRoutes != nil {
					a.AttachedRoutes.Set(attached, r.State.Gateway)
				}
				if a.Routes != nil && !r.State.ObjectsIncomplete {
					a.Routes.Set(routes)
				}
			}
			served := r.Outcome == OutcomeReloaded || r.Outcome == OutcomeUnchanged
			if a.Reporter != nil && served && r.Gateway != nil && r.FragmentsResourceVersion != "" {
				a.Reporter.SetRouting(vgwapi.RoutingReport{
					FragmentsResourceVersion: r.FragmentsResourceVersion, GatewayGeneration: r.Gateway.Generation,
					Fragments: r.Fragments, Rejected: r.Rejected, Time: metav1.Now(),
				})
			}
		},
	})
	if err != nil {
		return err
	}
	a.syncer.Store(s)
	if a.VCL == nil {
		return s.Run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	vclDone := make(chan error, 1)
	go func() {
		err := a.VCL.Run(ctx, env.LoadVCL, func(st vcl.Status) {
			a.mu.Lock()
			a.vclStatus = &st
			a.mu.Unlock()
			if st.Err == nil {
				// The new VCL's router read ghost.json in vcl_init; sync
				// now rather than at the next retry if ghost had not
				// loaded routing yet.
				s.Changed()
			}
			a.setStatus()
		})
		if err != nil {
			cancel() // stop the routing too: Run reports the error
		}
		vclDone <- err
	}()
	err = s.Run(ctx)
	cancel()
	if verr := <-vclDone; verr != nil && err == nil {
		err = fmt.Errorf("main VCL: %w", verr)
	}
	return err
}

// WithholdListeners sets the HTTPS listeners whose routes are not served
// (State.Withheld): the chaperone calls it with those none of whose
// certificates hitch serves, at every TLS apply (tlsterm's
// Config.OnUnserved). A change syncs.
func (a *Routing) WithholdListeners(names []string) {
	names = slices.Sorted(slices.Values(names))
	if old := a.withheld.Load(); old != nil && slices.Equal(*old, names) || old == nil && len(names) == 0 {
		return
	}
	a.withheld.Store(&names)
	if s := a.syncer.Load(); s != nil {
		s.Changed()
	}
}

// RouteStatus is what the state says about the Gateway's routes: the
// number of accepted routes per listener of the Gateway (every listener
// has a count), and each accepted route's ResolvedRefs condition with its
// backend references checked against the state's objects
// (routing.Fragment.ResolvedRefs), for the fragment's parentRefs. A route
// that is not accepted has no references in its fragment: the Gateway
// does not serve it, and the provider writes its condition.
func RouteStatus(st *State) (gatewaystatus.AttachedRoutes, []gatewaystatus.RouteResolvedRefs) {
	counts := routing.ListenerAttachedRoutes(st.Fragments)
	attached := gatewaystatus.AttachedRoutes{Generation: st.Gateway.Generation, Counts: make(map[string]int32, len(st.Gateway.Spec.Listeners))}
	for _, l := range st.Gateway.Spec.Listeners {
		attached.Counts[string(l.Name)] = counts[string(l.Name)]
	}
	var routes []gatewaystatus.RouteResolvedRefs
	for _, f := range st.Fragments {
		c, ok := f.ResolvedRefs(st.Objects)
		if !ok {
			continue
		}
		r := gatewaystatus.RouteResolvedRefs{Route: f.Route, Condition: c}
		for _, p := range f.Parents {
			r.Parents = append(r.Parents, p.ParentRef)
			for _, pc := range p.Conditions {
				if pc.Type == c.Type {
					r.Applied = pc
				}
			}
		}
		routes = append(routes, r)
	}
	return attached, routes
}

// setStatus applies the Programmed condition of the current routing and
// VCL states (when both are known, or the routing alone without VCL).
func (a *Routing) setStatus() {
	if a.Status == nil {
		return
	}
	a.mu.Lock()
	r, v := a.routingRes, a.vclStatus
	a.mu.Unlock()
	if r == nil || (a.VCL != nil && v == nil) {
		return
	}
	a.Status.Set(programmed(*r, v))
}

// programmed combines the routing state of a sync and the VCL state (nil
// without a VCL source) into the Gateway's Programmed condition: True only
// when both are fine; a VCL that never became active hides the routing's
// error (ghost cannot be reached without it); otherwise both messages.
func programmed(r routingState, v *vcl.Status) gatewaystatus.Programmed {
	p := gatewaystatus.ForError(r.generation, r.err, r.pending)
	if p.Status == metav1.ConditionTrue && len(r.rejected) > 0 {
		p.Message += fmt.Sprintf("; %d routing fragment(s) rejected, their routes keep their last accepted routing or are not served: %s",
			len(r.rejected), rejectedNames(r.rejected))
	}
	if v == nil {
		return p
	}
	if v.Err == nil {
		if p.Status == metav1.ConditionTrue {
			p.Message = "the main VCL is active and " + p.Message
		}
		return p
	}
	reason := gatewayv1.GatewayReasonInvalid
	if v.Pending {
		reason = gatewayv1.GatewayReasonPending
	}
	msg := v.Err.Error()
	if v.Active && p.Status != metav1.ConditionTrue {
		msg += "; routing: " + p.Message
		if p.Reason == gatewayv1.GatewayReasonInvalid {
			reason = gatewayv1.GatewayReasonInvalid
		}
	}
	return gatewaystatus.Programmed{Generation: r.generation, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

// rejectedNames lists rejected fragments for a condition message: the
// GatewayPodReports have their reasons.
func rejectedNames(rs []vgwapi.Rejection) string {
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return strings.Join(names, ", ") + " (reasons in the GatewayPodReports: kubectl get gatewaypodreports -o yaml)"
}

// ChildStarted is called after varnishd restarted its cache child: the restarted child re-read
// ghost.json in vcl_init; resync so that it has the newest state. With a
// VCL source, the active VCL is loaded again first if varnishd lost it.
func (a *Routing) ChildStarted(ctx context.Context) {
	a.mu.Lock()
	env := a.env
	a.mu.Unlock()
	if a.VCL != nil && env.LoadVCL != nil {
		if err := a.VCL.Reload(ctx, env.LoadVCL); err != nil && env.Logger != nil {
			env.Logger.Error("load the main VCL again after a varnishd restart", "error", err)
		}
	}
	if s := a.syncer.Load(); s != nil {
		if err := s.Resync(ctx); err != nil {
			s.log.Error("resync after a cache child restart", "error", err)
		}
	}
}
