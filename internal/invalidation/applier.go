package invalidation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// FieldManager is the server-side apply field manager of the pod's
// status.invalidations: apart from the routing report's
// (vgwapi.ReportFieldManager), so each writer owns its own field.
const FieldManager = status.ChaperoneInvalidationsManager

// skew is how much older than the cache child's start an invalidation
// must be to be skipped: creation timestamps have a resolution of one
// second and the API server's clock may differ a little from the pod's.
// Skipping too little only costs a ban that matches nothing.
const skew = 2 * time.Second

// Config is what an Applier needs.
type Config struct {
	// Dynamic reads CacheInvalidations and writes the report.
	Dynamic dynamic.Interface
	Gateway object.Ref
	Pod     vgwapi.Pod
	// Ban runs the varnishd `ban` CLI command with args (one per word).
	Ban func(ctx context.Context, args []string) error
	// ChildStart returns a time at or before the start of the running
	// varnishd cache child; the zero time when it is not known (nothing
	// is skipped then).
	ChildStart func() time.Time
	// Metrics, when set, gets the Applier's metrics.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Applier applies the CacheInvalidations of one Gateway in one pod.
type Applier struct {
	cfg     Config
	metrics *Metrics

	mu      sync.Mutex
	handled map[string]vgwapi.InvalidationReport // by UID
	written []vgwapi.InvalidationReport          // the last report written; nil before
	seen    map[string]time.Time                 // when the watch delivered each UID
}

// New returns the Applier of cfg.
func New(cfg Config) *Applier {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ChildStart == nil {
		cfg.ChildStart = func() time.Time { return time.Time{} }
	}
	return &Applier{cfg: cfg, metrics: NewMetrics(), handled: map[string]vgwapi.InvalidationReport{}, seen: map[string]time.Time{}}
}

// Run watches and applies the Gateway's invalidations until ctx ends.
func (a *Applier) Run(ctx context.Context) error {
	if a.cfg.Metrics != nil {
		if err := a.cfg.Metrics.Register(a.metrics); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return fmt.Errorf("register the invalidation metrics: %w", err)
		}
	}
	a.seedFromReport(ctx)
	sel := labels.SelectorFromSet(gwruntime.GatewayLabels(a.cfg.Gateway)).String()
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.cfg.Dynamic, 0, a.cfg.Gateway.Namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = sel })
	inf := f.ForResource(vgwapi.CacheInvalidations).Informer()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](250*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "cacheinvalidations"})
	enqueue := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		a.mu.Lock()
		if _, ok := a.seen[string(u.GetUID())]; !ok {
			a.seen[string(u.GetUID())] = time.Now()
		}
		a.mu.Unlock()
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		// A deleted invalidation's acknowledgement is pruned at the next
		// write; "" asks for that write.
		DeleteFunc: func(any) { queue.Add("") },
	}); err != nil {
		return fmt.Errorf("watch CacheInvalidations: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	go func() { <-ctx.Done(); queue.ShutDown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	a.cfg.Logger.Info("watching the Gateway's cache invalidations")
	queue.Add("") // prune what the seed holds of deleted invalidations
	for {
		key, quit := queue.Get()
		if quit {
			return ctx.Err()
		}
		retry := false
		if key != "" {
			retry = a.process(ctx, inf.GetIndexer(), key)
		}
		if retry {
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
		// Write once the queue is empty: a burst of invalidations (or
		// the initial list) costs one write.
		if queue.Len() == 0 {
			if err := a.writeReport(ctx, inf.GetIndexer()); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				a.cfg.Logger.Error("cannot acknowledge cache invalidations", "error", err)
				queue.AddRateLimited("")
			} else {
				queue.Forget("")
			}
		}
	}
}

// seedFromReport takes the acknowledgements of the pod's report as
// handled: a chaperone that restarts beside a running varnishd (sidecar
// mode) does not ban again what it banned before.
func (a *Applier) seedFromReport(ctx context.Context) {
	obj, err := a.cfg.Dynamic.Resource(vgwapi.GatewayPodReports).Namespace(a.cfg.Gateway.Namespace).Get(ctx, a.cfg.Pod.Name, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			a.cfg.Logger.Warn("cannot read the pod's earlier acknowledgements of cache invalidations", "error", err)
		}
		return
	}
	var r vgwapi.GatewayPodReport
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r); err != nil || r.Spec.Gateway != a.cfg.Gateway.Name {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, inv := range r.Status.Invalidations {
		a.handled[inv.UID] = inv
	}
}

// process applies the invalidation at key once; true asks for a retry
// (varnishd did not take a ban).
func (a *Applier) process(ctx context.Context, store cache.Store, key string) bool {
	item, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		return false
	}
	obj, ok := item.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	uid := string(obj.GetUID())
	a.mu.Lock()
	_, done := a.handled[uid]
	seen := a.seen[uid]
	a.mu.Unlock()
	if done {
		return false
	}
	log := a.cfg.Logger.With("invalidation", obj.GetName(), "uid", uid)
	ack := vgwapi.InvalidationReport{Name: obj.GetName(), UID: uid}
	spec, err := vgwapi.ReadInvalidation(a.cfg.Gateway, obj)
	switch {
	case err != nil:
		ack.Error = fmt.Sprintf("%v; delete it and create a corrected one", err)
		a.metrics.result.WithLabelValues(resultRefused).Inc()
		log.Warn("cache invalidation refused", "error", err)
	case obj.GetCreationTimestamp().Add(skew).Before(a.cfg.ChildStart()):
		ack.Skipped = true
		a.metrics.result.WithLabelValues(resultSkipped).Inc()
		log.Debug("cache invalidation older than the cache: nothing to ban")
	default:
		for _, args := range Bans(spec) {
			if err := a.cfg.Ban(ctx, args); err != nil {
				a.metrics.failures.Inc()
				log.Error("cannot issue a ban; retrying", "ban", args, "error", err)
				return ctx.Err() == nil
			}
			ack.Bans++
		}
		a.metrics.result.WithLabelValues(resultApplied).Inc()
		if !seen.IsZero() {
			a.metrics.duration.Observe(time.Since(seen).Seconds())
		}
		log.Info("cache invalidation applied", "bans", ack.Bans)
	}
	ack.Time = metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	a.mu.Lock()
	a.handled[uid] = ack
	a.mu.Unlock()
	return false
}

// writeReport writes the acknowledgements of the invalidations that still
// exist, when they changed, and forgets the others.
func (a *Applier) writeReport(ctx context.Context, store cache.Store) error {
	exists := map[string]bool{}
	for _, item := range store.List() {
		if o, ok := item.(*unstructured.Unstructured); ok {
			exists[string(o.GetUID())] = true
		}
	}
	a.mu.Lock()
	list := []vgwapi.InvalidationReport{}
	for uid, r := range a.handled {
		if !exists[uid] {
			delete(a.handled, uid)
			continue
		}
		list = append(list, r)
	}
	for uid := range a.seen {
		if !exists[uid] {
			delete(a.seen, uid) // deleted before it was handled
		}
	}
	vgwapi.SortInvalidations(list)
	same := a.written != nil && equalReports(a.written, list)
	a.mu.Unlock()
	if same {
		return nil
	}
	obj, err := vgwapi.NewReport(a.cfg.Gateway, a.cfg.Pod, vgwapi.ReportStatus{Invalidations: list})
	if err != nil {
		return err
	}
	if len(list) == 0 {
		// Written as [] to give up the last entries: the encoder leaves
		// an empty list out.
		if err := unstructured.SetNestedSlice(obj.Object, []any{}, "status", "invalidations"); err != nil {
			return fmt.Errorf("encode the acknowledgements: %w", err)
		}
	}
	if _, err := a.cfg.Dynamic.Resource(vgwapi.GatewayPodReports).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("write the GatewayPodReport %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	a.mu.Lock()
	a.written = list
	a.mu.Unlock()
	return nil
}

func equalReports(a, b []vgwapi.InvalidationReport) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
