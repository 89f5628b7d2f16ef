package tlssource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// Kube watches, through informers, the Gateway (by name) and each Secret
// its HTTPS listeners reference, one informer per Secret with the field
// selector metadata.name=NAME: the chaperone's Role grants get, list and
// watch on secrets only with resourceNames, which the API server allows
// for a list or watch of exactly that name. A Secret created later is
// seen by its informer. References to another namespace also watch the
// ReferenceGrants there. The set of informers follows the Gateway.
type Kube struct {
	// Client and Gateway act as the chaperone's ServiceAccount.
	Client  kubernetes.Interface
	Gateway gatewayclient.Interface
	// Namespace and Name name the Gateway.
	Namespace, Name string
	Logger          *slog.Logger

	mu      sync.Mutex
	ctx     context.Context
	changed func()
	gws     cache.SharedIndexInformer
	secrets map[tlsterm.SecretRef]*watch
	grants  map[string]*watch // namespace → its ReferenceGrants
	// gensErr is the last error of the ListenerSet generations
	// annotation, logged once.
	gensErr string
}

// syncGrace is how long Snapshot waits for a new informer's first list
// before it reports the Secret (or the namespace's ReferenceGrants) as not
// readable instead of holding back every listener: an informer whose list
// is forbidden never syncs.
const syncGrace = 10 * time.Second

// watch is one informer and the means to stop it.
type watch struct {
	inf     cache.SharedIndexInformer
	cancel  context.CancelFunc
	started time.Time

	mu sync.Mutex
	// err is the informer's last list or watch error, errRV the resource
	// version it had synced to then: a list or watch that succeeds later
	// moves the version on or delivers an event, and clears it.
	err   error
	errRV string
}

// pending reports whether w has not synced yet but may still.
func (w *watch) pending() bool { return !w.inf.HasSynced() && time.Since(w.started) < syncGrace }

// failed records a list or watch error of the informer.
func (w *watch) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if benign(err) {
		return
	}
	w.err, w.errRV = err, w.inf.LastSyncResourceVersion()
}

// succeeded forgets the error: the informer delivered an event.
func (w *watch) succeeded() {
	w.mu.Lock()
	w.err = nil
	w.mu.Unlock()
}

// listErr is the informer's list or watch error since its last success,
// nil when none: while it lasts, its store is what it held before (stale).
func (w *watch) listErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil && w.inf.LastSyncResourceVersion() != w.errRV {
		w.err = nil
	}
	return w.err
}

// Run implements Source.
func (k *Kube) Run(ctx context.Context, changed func()) error {
	if k.Client == nil || k.Gateway == nil || k.Namespace == "" || k.Name == "" {
		return errors.New("tlssource: Kube needs Client, Gateway, Namespace and Name")
	}
	if k.Logger == nil {
		k.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gf := gwinformers.NewSharedInformerFactoryWithOptions(k.Gateway, 0,
		gwinformers.WithNamespace(k.Namespace),
		gwinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.Name).String()
		}))
	inf := gf.Gateway().V1().Gateways().Informer()
	if _, err := inf.AddEventHandler(handler(func() { k.reconcile(); changed() })); err != nil {
		return fmt.Errorf("watch Gateway %s/%s: %w", k.Namespace, k.Name, err)
	}
	k.mu.Lock()
	k.ctx, k.changed, k.gws = ctx, changed, inf
	k.secrets, k.grants = map[tlsterm.SecretRef]*watch{}, map[string]*watch{}
	k.mu.Unlock()
	gf.Start(ctx.Done())
	<-ctx.Done()
	gf.Shutdown()
	k.mu.Lock()
	for _, w := range k.secrets {
		w.cancel()
	}
	for _, w := range k.grants {
		w.cancel()
	}
	k.mu.Unlock()
	return nil
}

func handler(f func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f() },
		UpdateFunc: func(any, any) { f() },
		DeleteFunc: func(any) { f() },
	}
}

// gateway returns the watched Gateway, nil when none, with the listeners
// of its ListenerSets the provider recorded in its annotation
// (routing.WithListenerSetListeners): their HTTPS listeners are served
// like the Gateway's own. An annotation that does not decode leaves the
// Gateway's own listeners (the routing syncer reports the annotation).
func (k *Kube) gateway() *gatewayv1.Gateway {
	if k.gws == nil {
		return nil
	}
	for _, o := range k.gws.GetStore().List() {
		if gw, ok := o.(*gatewayv1.Gateway); ok && gw.Name == k.Name {
			if served, err := routing.WithListenerSetListeners(gw); err == nil {
				return served
			}
			return gw
		}
	}
	return nil
}

// reconcile starts the informers of newly referenced Secrets and
// namespaces and stops those no longer referenced.
func (k *Kube) reconcile() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx == nil || k.ctx.Err() != nil {
		return
	}
	var refs []tlsterm.SecretRef
	var namespaces []string
	if gw := k.gateway(); gw != nil {
		refs, namespaces = Refs(gw), GrantNamespaces(gw)
	}
	for _, r := range refs {
		if k.secrets[r] != nil {
			continue
		}
		k.secrets[r] = k.start(func() (cache.SharedIndexInformer, func(<-chan struct{})) {
			f := informers.NewSharedInformerFactoryWithOptions(k.Client, 0, informers.WithNamespace(r.Namespace),
				informers.WithTweakListOptions(func(o *metav1.ListOptions) {
					o.FieldSelector = fields.OneTermEqualSelector("metadata.name", r.Name).String()
				}))
			return f.Core().V1().Secrets().Informer(), f.Start
		})
		k.Logger.Info("watching the Secret of an HTTPS listener", "component", "tls", "secret", r.String())
	}
	for r, w := range k.secrets {
		if !slices.Contains(refs, r) {
			w.cancel()
			delete(k.secrets, r)
			k.Logger.Info("Secret no longer referenced: watch stopped", "component", "tls", "secret", r.String())
		}
	}
	for _, ns := range namespaces {
		if k.grants[ns] != nil {
			continue
		}
		k.grants[ns] = k.start(func() (cache.SharedIndexInformer, func(<-chan struct{})) {
			f := gwinformers.NewSharedInformerFactoryWithOptions(k.Gateway, 0, gwinformers.WithNamespace(ns))
			return f.Gateway().V1().ReferenceGrants().Informer(), f.Start
		})
	}
	for ns, w := range k.grants {
		if !slices.Contains(namespaces, ns) {
			w.cancel()
			delete(k.grants, ns)
		}
	}
}

// start runs the informer mk makes (with the function that starts its
// factory) until it is cancelled or Run ends; its events and its list and
// watch errors call changed. Called with k.mu held.
func (k *Kube) start(mk func() (cache.SharedIndexInformer, func(stop <-chan struct{}))) *watch {
	ctx, cancel := context.WithCancel(k.ctx)
	inf, run := mk()
	w := &watch{inf: inf, cancel: cancel, started: time.Now()}
	changed := k.changed
	_, _ = inf.AddEventHandler(handler(func() { w.succeeded(); changed() }))
	// Before the informer starts, as client-go requires.
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		w.failed(err)
		changed()
	})
	run(ctx.Done())
	// The first sync (possibly of an empty list: a Secret that does not
	// exist yet) changes the snapshot too, and so does the end of the
	// grace without one.
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			changed()
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(syncGrace):
			if !inf.HasSynced() {
				changed()
			}
		}
	}()
	return w
}

// Snapshot implements Source: ok once the Gateway and every informer have
// synced, or an informer has not synced within syncGrace: its Secret
// (or, for a namespace's ReferenceGrants, every Secret there) is then
// reported as not readable, naming the rights the chaperone needs.
func (k *Kube) Snapshot() (Snapshot, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gws == nil || !k.gws.HasSynced() {
		return Snapshot{}, false
	}
	gw := k.gateway()
	if gw == nil {
		return Snapshot{}, true
	}
	for _, w := range k.secrets {
		if w.pending() {
			return Snapshot{}, false
		}
	}
	var grants []*gatewayv1.ReferenceGrant
	for _, w := range k.grants {
		if w.pending() {
			return Snapshot{}, false
		}
		for _, o := range w.inf.GetStore().List() {
			if g, ok := o.(*gatewayv1.ReferenceGrant); ok {
				grants = append(grants, g)
			}
		}
	}
	lookup := func(ref tlsterm.SecretRef) *corev1.Secret {
		w := k.secrets[ref]
		if w == nil {
			return nil
		}
		for _, o := range w.inf.GetStore().List() {
			if s, ok := o.(*corev1.Secret); ok && s.Name == ref.Name {
				return s
			}
		}
		return nil
	}
	ls := Resolve(gw, lookup, grants)
	for i := range ls {
		for j := range ls[i].Certificates {
			k.readErrors(&ls[i].Certificates[j])
		}
	}
	gens, err := routing.ListenerSetGenerations(gw)
	if msg := fmt.Sprint(err); err != nil && msg != k.gensErr {
		k.Logger.Warn("the ListenerSets' listeners get no ResolvedRefs condition from the pods", "component", "tls", "error", err)
	}
	k.gensErr = ""
	if err != nil {
		k.gensErr = err.Error()
	}
	return Snapshot{Generation: gw.Generation, Listeners: ls, ListenerSetGenerations: gens}, true
}

// readErrors replaces c's resolution with what the informers could not
// read: a Secret or the ReferenceGrants of its namespace whose informer
// has not synced within syncGrace, or whose list or watch fails now (its
// store then holds what it had before). A refusal (403, 401, see
// ProblemOf) withdraws the certificate, whether the informer had synced
// or not; another error keeps the last good one (the informer retries),
// and the store of a synced informer is used as it is. Called with k.mu
// held.
func (k *Kube) readErrors(c *tlsterm.Certificate) {
	rights := func(err error) string {
		if err == nil {
			return "no answer from the API server"
		}
		return err.Error()
	}
	if w := k.grants[c.Ref.Namespace]; w != nil {
		err := w.listErr()
		switch {
		case !w.inf.HasSynced() && c.Reason == gatewayv1.ListenerReasonRefNotPermitted:
			c.Err = fmt.Errorf("cannot list the ReferenceGrants of namespace %s within %s (%s): the chaperone needs get, list and watch on referencegrants there", c.Ref.Namespace, syncGrace, rights(err))
			c.Problem = tlsterm.ProblemTransient
			if err != nil {
				c.Problem = ProblemOf(err)
			}
			return
		case err != nil && ProblemOf(err) == tlsterm.ProblemRevoked && c.Reason != gatewayv1.ListenerReasonRefNotPermitted:
			*c = tlsterm.Certificate{Ref: c.Ref, Reason: gatewayv1.ListenerReasonRefNotPermitted, Problem: tlsterm.ProblemRevoked,
				Err: fmt.Errorf("the API server refuses to list the ReferenceGrants of namespace %s (%v): the chaperone needs get, list and watch on referencegrants there", c.Ref.Namespace, err)}
			return
		}
	}
	w := k.secrets[c.Ref]
	if w == nil || c.Reason == gatewayv1.ListenerReasonRefNotPermitted {
		return
	}
	err := w.listErr()
	switch {
	case !w.inf.HasSynced() && errors.Is(c.Err, errNotFound):
		c.Err = fmt.Errorf("cannot list the Secret %s within %s (%s): the chaperone needs get, list and watch on secrets with resourceNames [%s] in namespace %s", c.Ref, syncGrace, rights(err), c.Ref.Name, c.Ref.Namespace)
		c.Problem = tlsterm.ProblemTransient
		if err != nil {
			c.Problem = ProblemOf(err)
		}
	case err != nil && ProblemOf(err) == tlsterm.ProblemRevoked:
		*c = tlsterm.Certificate{Ref: c.Ref, Reason: gatewayv1.ListenerReasonInvalidCertificateRef, Problem: tlsterm.ProblemRevoked,
			Err: fmt.Errorf("the API server refuses to let the chaperone read the Secret (%v): it needs get, list and watch on secrets with resourceNames [%s] in namespace %s", err, c.Ref.Name, c.Ref.Namespace)}
	}
}
