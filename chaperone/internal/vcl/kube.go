package vcl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// Status is the state of the main VCL a KubeSource feeds to varnishd.
type Status struct {
	// Active is true once a VCL from the ConfigMap has been made active
	// (it stays true when a later version fails: that one keeps serving).
	Active bool
	// Err is nil when the ConfigMap's current main.vcl is the active VCL;
	// otherwise it says why not (ConfigMap missing, key missing, compile
	// error with the compiler's first lines).
	Err error
	// Pending is true when Err means "waiting" (the ConfigMap does not
	// exist, or varnishd could not be reached) rather than "invalid".
	Pending bool
}

// compilerLines is how many lines of the VCL compiler's output a Status
// error (and so the Programmed message) keeps.
const compilerLines = 8

// vclRetryInterval is the wait before loading a VCL again after varnishd
// could not be reached.
const vclRetryInterval = 2 * time.Second

// KubeSource watches the Gateway's VCL ConfigMap (gwruntime.VCLConfigMapName,
// key gwruntime.VCLDataKey) and the Gateway through informers and loads
// every new main.vcl into varnishd whose digest is the one the provider
// recorded on the Gateway (gwruntime.VCLDigestAnnotation): anyone else who
// may update the ConfigMap cannot put code into varnishd. Another main.vcl
// is refused, logged and reported, and the running VCL stays. It needs
// get, list and watch on the ConfigMap and the Gateway (the Role of
// design/routing-sync.md).
type KubeSource struct {
	// Client and Gateway act as the chaperone's ServiceAccount.
	Client  kubernetes.Interface
	Gateway gatewayclient.Interface
	// Namespace and Name name the Gateway.
	Namespace, Name string
	Logger          *slog.Logger

	mu     sync.Mutex
	good   string // last source made active
	status Status
}

// ConfigMapName returns the namespace/name of the watched ConfigMap.
func (v *KubeSource) ConfigMapName() string {
	return v.Namespace + "/" + gwruntime.VCLConfigMapName(object.Ref{Namespace: v.Namespace, Name: v.Name})
}

// Run watches the ConfigMap until ctx ends. load makes a source the active
// VCL (Env.LoadVCL); report receives the status after every change
// (from one goroutine, in order).
func (v *KubeSource) Run(ctx context.Context, load func(context.Context, string) error, report func(Status)) error {
	if v.Client == nil || v.Gateway == nil || v.Namespace == "" || v.Name == "" {
		return errors.New("vcl: KubeSource needs Client, Gateway, Namespace and Name")
	}
	log := v.Logger
	if log == nil {
		log = slog.Default()
	}
	cmName := gwruntime.VCLConfigMapName(object.Ref{Namespace: v.Namespace, Name: v.Name})
	log = log.With("component", "vcl", "configmap", v.Namespace+"/"+cmName)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := informers.NewSharedInformerFactoryWithOptions(v.Client, 0,
		informers.WithNamespace(v.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cmName).String()
		}))
	inf := f.Core().V1().ConfigMaps().Informer()
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return fmt.Errorf("watch VCL ConfigMap %s/%s: %w", v.Namespace, cmName, err)
	}
	gf := gwinformers.NewSharedInformerFactoryWithOptions(v.Gateway, 0,
		gwinformers.WithNamespace(v.Namespace),
		gwinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", v.Name).String()
		}))
	ginf := gf.Gateway().V1().Gateways().Informer()
	if _, err := ginf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return fmt.Errorf("watch Gateway %s/%s for the main VCL's digest: %w", v.Namespace, v.Name, err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	gf.Start(ctx.Done())
	defer gf.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced, ginf.HasSynced) {
		return nil // ctx ended
	}
	poke()
	var tried [sha256.Size]byte
	var triedDigest string
	triedAny := false
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-retry:
		}
		retry = nil
		obj, exists, err := inf.GetStore().GetByKey(v.Namespace + "/" + cmName)
		var st Status
		v.mu.Lock()
		st.Active = v.status.Active
		v.mu.Unlock()
		switch {
		case err != nil:
			st.Err, st.Pending = fmt.Errorf("read VCL ConfigMap %s/%s from cache: %w", v.Namespace, cmName, err), true
		case !exists:
			msg := fmt.Sprintf("waiting for ConfigMap %s/%s with key %q (the Gateway's main VCL)", v.Namespace, cmName, gwruntime.VCLDataKey)
			if st.Active {
				msg = fmt.Sprintf("ConfigMap %s/%s (the Gateway's main VCL) was deleted; the last loaded VCL keeps serving until it is back", v.Namespace, cmName)
			}
			st.Err, st.Pending = errors.New(msg), true
			triedAny = false
			log.Warn(msg)
		default:
			cm := obj.(*corev1.ConfigMap)
			src, ok := cm.Data[gwruntime.VCLDataKey]
			if !ok || strings.TrimSpace(src) == "" {
				st.Err = fmt.Errorf("ConfigMap %s/%s has no %q key (or it is empty): put the Gateway's main VCL there", v.Namespace, cmName, gwruntime.VCLDataKey)
				triedAny = false
				log.Error("VCL ConfigMap without main.vcl", "key", gwruntime.VCLDataKey)
				break
			}
			sum := sha256.Sum256([]byte(src))
			digest := v.recordedDigest(ginf.GetStore())
			if triedAny && sum == tried && digest == triedDigest {
				continue // metadata change only, or already tried
			}
			tried, triedDigest, triedAny = sum, digest, true
			if got := hex.EncodeToString(sum[:]); got != digest {
				// The provider writes the digest, then the ConfigMap: a
				// mismatch lasts a moment during an apply, or until the
				// next apply when someone else changed the ConfigMap.
				st.Err, st.Pending = v.refused(cmName, got, digest), true
				log.Error("main.vcl not loaded: its digest is not the one the provider recorded on the Gateway",
					"sha256", got, "recorded", digest, "annotation", gwruntime.VCLDigestAnnotation)
				break
			}
			st = v.load(ctx, load, src, cmName, st)
			if st.Err != nil && st.Pending {
				// varnishd was not reachable: try the same source again
				triedAny = false
				retry = time.After(vclRetryInterval)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		v.mu.Lock()
		v.status = st
		v.mu.Unlock()
		if report != nil {
			report(st)
		}
	}
}

// recordedDigest is the Gateway's gwruntime.VCLDigestAnnotation, "" when
// the Gateway or the annotation is missing.
func (v *KubeSource) recordedDigest(store cache.Store) string {
	obj, exists, err := store.GetByKey(v.Namespace + "/" + v.Name)
	if err != nil || !exists {
		return ""
	}
	gw, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return ""
	}
	return gw.Annotations[gwruntime.VCLDigestAnnotation]
}

// refused says why a main.vcl with digest got was not loaded.
func (v *KubeSource) refused(cmName, got, recorded string) error {
	if recorded == "" {
		return fmt.Errorf("key %q of ConfigMap %s/%s was not loaded: Gateway %s/%s has no annotation %s, the digest of the main VCL the provider rendered; the previous VCL keeps serving. Apply the gateway with the provider",
			gwruntime.VCLDataKey, v.Namespace, cmName, v.Namespace, v.Name, gwruntime.VCLDigestAnnotation)
	}
	return fmt.Errorf("key %q of ConfigMap %s/%s (sha256 %s) was not loaded: it is not the main VCL the provider rendered (sha256 %s, Gateway annotation %s); the previous VCL keeps serving. If no apply of the gateway is under way, someone else changed the ConfigMap: apply the gateway again to restore it",
		gwruntime.VCLDataKey, v.Namespace, cmName, got, recorded, gwruntime.VCLDigestAnnotation)
}

// load loads src and turns the result into a status.
func (v *KubeSource) load(ctx context.Context, load func(context.Context, string) error, src, cmName string, st Status) Status {
	err := load(ctx, src)
	if err == nil {
		v.mu.Lock()
		v.good = src
		v.mu.Unlock()
		st.Active, st.Err, st.Pending = true, nil, false
		return st
	}
	var ce *CompileError
	if errors.As(err, &ce) {
		st.Err = fmt.Errorf("key %q of ConfigMap %s/%s does not compile; the previous VCL keeps serving. Compiler: %s",
			gwruntime.VCLDataKey, v.Namespace, cmName, firstLines(ce.Message, compilerLines))
		return st
	}
	st.Err, st.Pending = fmt.Errorf("load key %q of ConfigMap %s/%s into varnishd: %w", gwruntime.VCLDataKey, v.Namespace, cmName, err), true
	return st
}

// Reload loads the last source that was made active again (a no-op for
// varnishd when it is still the active one): after varnishd lost its VCLs,
// e.g. a sidecar varnishd that restarted.
func (v *KubeSource) Reload(ctx context.Context, load func(context.Context, string) error) error {
	v.mu.Lock()
	src := v.good
	v.mu.Unlock()
	if src == "" {
		return nil
	}
	return load(ctx, src)
}

// firstLines returns the first n non-empty lines of s, joined by newlines,
// and "..." as a last line when there were more.
func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " \t\r"); l == "" {
			continue
		}
		if len(out) == n {
			out = append(out, "...")
			break
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
