package control

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// NewCluster connects to the cluster of cfg with the read cache on: for
// the life of this Cluster (the provider's process, one Terraform
// operation) the Gateways, GatewayClasses and backend Services that every
// route of a gateway reads are read once, and a gateway's pods at most
// every podsTTL. A write through these clients forgets the object
// written, so this process reads its own writes; a change by someone else
// during the operation is seen at the next one, as a change made just
// after the plan would be.
func NewCluster(cfg *rest.Config) (*Cluster, error) {
	reads := &readCache{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return forgetWrites{rt, reads} })
	c := &Cluster{Host: cfg.Host, reads: reads}
	var err error
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("create the Kubernetes client: %w", err)
	}
	if c.Gateway, err = gatewayclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("create the Gateway API client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("create the dynamic Kubernetes client: %w", err)
	}
	if c.Ext, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("create the CustomResourceDefinition client: %w", err)
	}
	return c, nil
}

// podsTTL bounds how old the pods a route's apply goes by may be: pods
// start and stop during an operation.
const podsTTL = 5 * time.Second

// readCache holds what NewCluster's Cluster read, by the object's API
// path. A nil *readCache caches nothing (a Cluster built by hand).
type readCache struct {
	mu      sync.Mutex
	entries map[string]*readEntry
}

// readEntry is one object, read once by the first caller while the others
// wait.
type readEntry struct {
	ready chan struct{}
	v     any
	err   error
	at    time.Time
}

// read returns the value cached under key, or reads it with get. Errors
// are not kept: the next caller reads again. ttl 0 keeps the value until
// a write forgets it.
func (r *readCache) read(key string, ttl time.Duration, get func() (any, error)) (any, error) {
	if r == nil {
		return get()
	}
	r.mu.Lock()
	if r.entries == nil {
		r.entries = map[string]*readEntry{}
	}
	e := r.entries[key]
	if e != nil {
		r.mu.Unlock()
		<-e.ready
		if e.err == nil && (ttl == 0 || time.Since(e.at) < ttl) {
			return e.v, nil
		}
		r.mu.Lock()
		if r.entries[key] == e {
			delete(r.entries, key)
		}
		return r.readLocked(key, get)
	}
	return r.readLocked(key, get)
}

// readLocked reads key with get, with r.mu held on entry (and released).
func (r *readCache) readLocked(key string, get func() (any, error)) (any, error) {
	if e := r.entries[key]; e != nil { // another caller got here first
		r.mu.Unlock()
		<-e.ready
		return e.v, e.err
	}
	e := &readEntry{ready: make(chan struct{})}
	r.entries[key] = e
	r.mu.Unlock()
	e.v, e.err = get()
	e.at = time.Now()
	close(e.ready)
	if e.err != nil {
		r.forget(key)
	}
	return e.v, e.err
}

// forget drops the entries of path: the object itself (a subresource
// path drops its object), for a collection every object in it, and for a
// Namespace every object in that namespace.
func (r *readCache) forget(path string) {
	if r == nil {
		return
	}
	inNamespace := ""
	if ns, ok := strings.CutPrefix(path, "/api/v1/namespaces/"); ok && ns != "" && !strings.Contains(ns, "/") {
		inNamespace = "/namespaces/" + ns + "/"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for key := range r.entries {
		if key == path || strings.HasPrefix(path, key+"/") || strings.HasPrefix(key, path+"/") ||
			inNamespace != "" && strings.Contains(key, inNamespace) {
			delete(r.entries, key)
		}
	}
}

// forgetWrites is the clients' transport: every request that may change
// an object makes the cache forget it.
type forgetWrites struct {
	next  http.RoundTripper
	cache *readCache
}

func (f forgetWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		f.cache.forget(req.URL.Path)
	}
	return f.next.RoundTrip(req)
}

// readObject is get through r under key, as a copy the caller may change.
func readObject[T interface{ DeepCopy() T }](r *readCache, key string, get func() (T, error)) (T, error) {
	v, err := r.read(key, 0, func() (any, error) { return get() })
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T).DeepCopy(), nil
}

// getGateway reads the Gateway ref, through the cache.
func (c *Cluster) getGateway(ctx context.Context, ref object.Ref) (*gatewayv1.Gateway, error) {
	return readObject(c.reads, "/apis/"+gatewayv1.GroupName+"/v1/namespaces/"+ref.Namespace+"/gateways/"+ref.Name,
		func() (*gatewayv1.Gateway, error) {
			return c.Gateway.GatewayV1().Gateways(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		})
}

// getGatewayClass reads the GatewayClass name, through the cache.
func (c *Cluster) getGatewayClass(ctx context.Context, name string) (*gatewayv1.GatewayClass, error) {
	return readObject(c.reads, "/apis/"+gatewayv1.GroupName+"/v1/gatewayclasses/"+name,
		func() (*gatewayv1.GatewayClass, error) {
			return c.Gateway.GatewayV1().GatewayClasses().Get(ctx, name, metav1.GetOptions{})
		})
}

// getService reads the Service ref, through the cache.
func (c *Cluster) getService(ctx context.Context, ref object.Ref) (*corev1.Service, error) {
	return readObject(c.reads, "/api/v1/namespaces/"+ref.Namespace+"/services/"+ref.Name,
		func() (*corev1.Service, error) {
			return c.Kube.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		})
}

// servedPodsRecently is ServedPods, through the cache for at most
// podsTTL: for decisions that may go by pods a moment old (who writes a
// route's ResolvedRefs), never for a wait.
func (c *Cluster) servedPodsRecently(ctx context.Context, gw object.Ref) ([]string, error) {
	key := "/api/v1/namespaces/" + gw.Namespace + "/pods?gateway=" + gw.Name
	v, err := c.reads.read(key, podsTTL, func() (any, error) { return c.ServedPods(ctx, gw) })
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}
