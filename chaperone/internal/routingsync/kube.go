package routingsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/dnswatch"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// KubeConfig configures a KubeSource.
type KubeConfig struct {
	// Client, Gateway and Dynamic (for RoutingFragments) are clients
	// acting as the chaperone's ServiceAccount (see design/routing-sync.md
	// for the RBAC it needs).
	Client  kubernetes.Interface
	Gateway gatewayclient.Interface
	Dynamic dynamic.Interface
	// Namespace and Name name the Gateway this chaperone serves.
	Namespace, Name string
	// PendingTimeout is how long a sync waits for the caches of a newly
	// referenced namespace before it builds without them (default 10s;
	// their backends answer 500 until the cache syncs).
	PendingTimeout time.Duration
	// ExternalNames, when set, lets routes send traffic to ExternalName
	// Services (routing.Objects.ExternalNameServices): the source has it
	// follow the names of the referenced ones and gives their addresses to
	// the routing core. Nil: such references get 500.
	ExternalNames *dnswatch.Watcher
	Logger        *slog.Logger
}

// KubeSource watches, through informers, the RoutingFragments of one
// Gateway (by label, in the Gateway's namespace), the Gateway itself (by
// name), and in each namespace the fragments reference: the
// EndpointSlices of exactly the referenced Services (label
// kubernetes.io/service-name), the Services and the ReferenceGrants. The
// set of watched namespaces and Services follows the fragments.
//
// A fragment it cannot read (vgwapi.ReadFragment) is rejected alone: its
// route keeps the last version of the fragment this source accepted, or is
// left out when there is none, and the other routes are unaffected.
type KubeSource struct {
	cfg KubeConfig
	log *slog.Logger

	mu         sync.Mutex
	ctx        context.Context
	changed    func()
	baseSynced bool
	frags      cache.SharedIndexInformer
	gws        cache.Store
	// lastGood is the last accepted version of each fragment, by object
	// name, with its resource version.
	lastGood map[string]acceptedFragment
	active   map[string]*nsWatch // namespace → synced watch
	pending  map[string]*nsWatch // namespace → watch waiting for its caches
}

type acceptedFragment struct {
	fragment        *routing.Fragment
	resourceVersion string
}

// nsWatch holds the informers of one referenced namespace.
type nsWatch struct {
	ns       string
	services []string // sorted; the EndpointSlice selector
	started  time.Time
	ctx      context.Context // ends when the watch is stopped
	cancel   context.CancelFunc
	kf       informers.SharedInformerFactory
	esf      informers.SharedInformerFactory
	gf       gwinformers.SharedInformerFactory
	svc      cache.SharedIndexInformer
	es       cache.SharedIndexInformer
	grants   cache.SharedIndexInformer
}

// NewKubeSource returns a Source for the Gateway cfg.Namespace/cfg.Name.
func NewKubeSource(cfg KubeConfig) (*KubeSource, error) {
	if cfg.Client == nil || cfg.Gateway == nil || cfg.Dynamic == nil || cfg.Namespace == "" || cfg.Name == "" {
		return nil, errors.New("routingsync: KubeConfig needs Client, Gateway, Dynamic, Namespace and Name")
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &KubeSource{
		cfg:      cfg,
		log:      log.With("component", "routingsync", "gateway", cfg.Namespace+"/"+cfg.Name),
		active:   map[string]*nsWatch{},
		pending:  map[string]*nsWatch{},
		lastGood: map[string]acceptedFragment{},
	}, nil
}

func handler(f func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f() },
		UpdateFunc: func(any, any) { f() },
		DeleteFunc: func(any) { f() },
	}
}

// Run implements Source.
func (k *KubeSource) Run(ctx context.Context, changed func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gwRef := object.Ref{Namespace: k.cfg.Namespace, Name: k.cfg.Name}
	sel := labels.SelectorFromSet(gwruntime.GatewayLabels(gwRef)).String()
	ff := dynamicinformer.NewFilteredDynamicSharedInformerFactory(k.cfg.Dynamic, 0, k.cfg.Namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = sel })
	gf := gwinformers.NewSharedInformerFactoryWithOptions(k.cfg.Gateway, 0,
		gwinformers.WithNamespace(k.cfg.Namespace),
		gwinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.cfg.Name).String()
		}),
		gwinformers.WithTransform(cache.TransformFunc(stripManagedFields)))
	fragInf := ff.ForResource(vgwapi.RoutingFragments).Informer()
	if err := fragInf.SetTransform(cache.TransformFunc(stripManagedFields)); err != nil {
		return fmt.Errorf("watch RoutingFragments: %w", err)
	}
	gwInf := gf.Gateway().V1().Gateways().Informer()
	onFragments := func() {
		k.reconcile()
		changed()
	}
	if _, err := fragInf.AddEventHandler(handler(onFragments)); err != nil {
		return fmt.Errorf("watch RoutingFragments: %w", err)
	}
	if _, err := gwInf.AddEventHandler(handler(changed)); err != nil {
		return fmt.Errorf("watch Gateway: %w", err)
	}
	k.mu.Lock()
	k.ctx, k.changed = ctx, changed
	k.frags, k.gws = fragInf, gwInf.GetStore()
	k.mu.Unlock()
	ff.Start(ctx.Done())
	gf.Start(ctx.Done())
	dnsDone := make(chan struct{})
	if w := k.cfg.ExternalNames; w != nil {
		go func() { w.Run(ctx, changed); close(dnsDone) }()
	} else {
		close(dnsDone)
	}
	defer func() {
		cancel()
		<-dnsDone
		ff.Shutdown()
		gf.Shutdown()
		k.mu.Lock()
		for _, w := range k.active {
			w.stop()
		}
		for _, w := range k.pending {
			w.stop()
		}
		k.active, k.pending = map[string]*nsWatch{}, map[string]*nsWatch{}
		k.mu.Unlock()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), fragInf.HasSynced, gwInf.HasSynced) {
		return nil // ctx ended
	}
	k.mu.Lock()
	k.baseSynced = true
	k.mu.Unlock()
	onFragments()
	<-ctx.Done()
	return nil
}

// Synced reports whether the fragments and the Gateway have been listed
// once (apiwatch.Monitor.SetSynced: the chaperone was in sync once).
func (k *KubeSource) Synced() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.baseSynced
}

// reconcile makes the namespace watches follow the referenced Services.
func (k *KubeSource) reconcile() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.frags == nil || k.ctx == nil || k.ctx.Err() != nil {
		return
	}
	frags, _, _ := k.fragmentsLocked()
	want := referencedBackends(frags)
	for ns, w := range k.active {
		if _, ok := want[ns]; !ok {
			w.stop()
			delete(k.active, ns)
		}
	}
	for ns, w := range k.pending {
		if svcs, ok := want[ns]; !ok || !slices.Equal(svcs, w.services) {
			w.stop()
			delete(k.pending, ns)
		}
	}
	for ns, svcs := range want {
		if w := k.active[ns]; w != nil && slices.Equal(w.services, svcs) {
			continue
		}
		if k.pending[ns] != nil {
			continue
		}
		w, err := k.startWatch(ns, svcs)
		if err != nil {
			k.log.Error("cannot watch referenced namespace", "namespace", ns, "error", err)
			continue
		}
		k.pending[ns] = w
		go k.awaitSync(w)
	}
}

func (k *KubeSource) startWatch(ns string, svcs []string) (*nsWatch, error) {
	req, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In, svcs)
	if err != nil {
		return nil, fmt.Errorf("EndpointSlice selector for %v: %w", svcs, err)
	}
	esSel := labels.NewSelector().Add(*req).String()
	ctx, cancel := context.WithCancel(k.ctx)
	strip := cache.TransformFunc(stripManagedFields)
	w := &nsWatch{ns: ns, services: svcs, started: time.Now(), ctx: ctx, cancel: cancel}
	w.kf = informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0,
		informers.WithNamespace(ns), informers.WithTransform(strip))
	w.esf = informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0,
		informers.WithNamespace(ns), informers.WithTransform(strip),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = esSel }))
	w.gf = gwinformers.NewSharedInformerFactoryWithOptions(k.cfg.Gateway, 0,
		gwinformers.WithNamespace(ns), gwinformers.WithTransform(strip))
	w.svc = w.kf.Core().V1().Services().Informer()
	w.es = w.esf.Discovery().V1().EndpointSlices().Informer()
	w.grants = w.gf.Gateway().V1().ReferenceGrants().Informer()
	changed := k.changed
	for _, inf := range []cache.SharedIndexInformer{w.svc, w.es, w.grants} {
		if _, err := inf.AddEventHandler(handler(changed)); err != nil {
			cancel()
			return nil, fmt.Errorf("watch namespace %s: %w", ns, err)
		}
	}
	w.kf.Start(ctx.Done())
	w.esf.Start(ctx.Done())
	w.gf.Start(ctx.Done())
	return w, nil
}

func (w *nsWatch) synced() bool {
	return w.svc.HasSynced() && w.es.HasSynced() && w.grants.HasSynced()
}

func (w *nsWatch) stop() {
	w.cancel()
	go func() {
		w.kf.Shutdown()
		w.esf.Shutdown()
		w.gf.Shutdown()
	}()
}

// awaitSync moves w from pending to active once its caches synced, and
// kicks a sync after PendingTimeout if they do not.
func (k *KubeSource) awaitSync(w *nsWatch) {
	ctx, cancel := context.WithTimeout(w.ctx, k.cfg.PendingTimeout)
	ok := cache.WaitForCacheSync(ctx.Done(), w.synced)
	cancel()
	if !ok {
		if w.ctx.Err() != nil {
			return // stopped: superseded, no longer referenced, or Run ended
		}
		k.log.Warn("caches of a referenced namespace not synced; building without them (check RBAC)",
			"namespace", w.ns, "timeout", k.cfg.PendingTimeout)
		k.changed()
		// keep waiting until it syncs or is stopped
		if !cache.WaitForCacheSync(w.ctx.Done(), w.synced) {
			return
		}
	}
	k.mu.Lock()
	if k.pending[w.ns] == w {
		delete(k.pending, w.ns)
		if old := k.active[w.ns]; old != nil {
			old.stop()
		}
		k.active[w.ns] = w
	}
	k.mu.Unlock()
	k.changed()
}

// fragmentsLocked reads the RoutingFragments, sorted by name, with the
// resource version their cache had reached before it listed them: every
// fragment write (or deletion) up to it is in the list. The cache's own
// resource version (client-go's AtomicFIFO, on by default) moves with the
// cache's contents, list, watch events and bookmarks alike; the reflector's
// LastSyncResourceVersion would not do, as it runs ahead of the cache. A
// fragment that cannot be read is rejected; its last accepted version, if
// any, takes its place.
func (k *KubeSource) fragmentsLocked() ([]*routing.Fragment, []vgwapi.Rejection, string) {
	rv := k.frags.GetStore().LastStoreSyncResourceVersion()
	var objs []*unstructured.Unstructured
	for _, o := range k.frags.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			objs = append(objs, u)
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	gw := object.Ref{Namespace: k.cfg.Namespace, Name: k.cfg.Name}
	var frags []*routing.Fragment
	var rejected []vgwapi.Rejection
	present := map[string]bool{}
	for _, o := range objs {
		present[o.GetName()] = true
		f, err := routingfragment.Read(gw, o)
		if err == nil {
			k.lastGood[o.GetName()] = acceptedFragment{f, o.GetResourceVersion()}
			frags = append(frags, f)
			continue
		}
		rej := vgwapi.Rejection{Name: o.GetName(), ResourceVersion: o.GetResourceVersion(), Reason: vgwapi.RejectionReason(err)}
		if good, ok := k.lastGood[o.GetName()]; ok {
			rej.Kept = good.resourceVersion
			frags = append(frags, good.fragment)
		}
		rejected = append(rejected, rej)
	}
	for name := range k.lastGood {
		if !present[name] {
			delete(k.lastGood, name)
		}
	}
	return frags, rejected, rv
}

// State implements Source.
func (k *KubeSource) State() (*State, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.baseSynced {
		return nil, ErrNotSynced
	}
	obj, exists, err := k.gws.GetByKey(k.cfg.Namespace + "/" + k.cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("read Gateway %s/%s from cache: %w", k.cfg.Namespace, k.cfg.Name, err)
	}
	if !exists {
		return nil, fmt.Errorf("the Gateway %s/%s: %w", k.cfg.Namespace, k.cfg.Name,
			apierrors.NewNotFound(gatewayv1.Resource("gateways"), k.cfg.Name))
	}
	gw := obj.(*gatewayv1.Gateway)
	frags, rejected, rv := k.fragmentsLocked()
	// Wait (bounded) for the caches of newly referenced namespaces and
	// Services rather than answer 500 for them.
	for _, w := range k.pending {
		if time.Since(w.started) < k.cfg.PendingTimeout {
			return nil, ErrNotSynced
		}
	}
	objs := &routing.Objects{}
	nss := make([]string, 0, len(k.active))
	for ns := range k.active {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		w := k.active[ns]
		for _, o := range w.svc.GetStore().List() {
			objs.Services = append(objs.Services, o.(*corev1.Service))
		}
		for _, o := range w.es.GetStore().List() {
			objs.EndpointSlices = append(objs.EndpointSlices, o.(*discoveryv1.EndpointSlice))
		}
		for _, o := range w.grants.GetStore().List() {
			objs.ReferenceGrants = append(objs.ReferenceGrants, o.(*gatewayv1.ReferenceGrant))
		}
	}
	if w := k.cfg.ExternalNames; w != nil {
		// The names of the ExternalName Services routes reach: follow
		// them, and wait for the first lookup of a new one (bounded by
		// the DNS timeouts; it calls changed when done) rather than
		// answer 500 for it.
		objs.ExternalNameServices = true
		w.Want(routing.ExternalNameHosts(frags, objs))
		if w.Pending() {
			return nil, ErrNotSynced
		}
		objs.ExternalNames = w.Addrs()
	}
	// The namespaces still pending here waited longer than PendingTimeout.
	return &State{Gateway: gw, Fragments: frags, Rejected: rejected, FragmentsResourceVersion: rv, Objects: objs,
		ObjectsIncomplete: len(k.pending) > 0}, nil
}

// cachedEndpointSlices counts the EndpointSlices in the informer caches
// (for the memory test).
func (k *KubeSource) cachedEndpointSlices() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, w := range k.active {
		n += len(w.es.GetStore().List())
	}
	for _, w := range k.pending {
		n += len(w.es.GetStore().List())
	}
	return n
}

// stripManagedFields drops metadata.managedFields from cached objects: the
// chaperone never reads them, and they are often the largest part.
func stripManagedFields(obj any) (any, error) {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		a.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}
