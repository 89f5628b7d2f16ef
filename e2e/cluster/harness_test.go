package cluster

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

var (
	importOnce sync.Once
	images     *demo.Images
	importErr  error
)

// cluster is one test's view of the node: the control plane, the node,
// the images imported into it and a fresh namespace.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	cp     *testenv.ControlPlane
	node   *testenv.Node
	images *demo.Images
	ns     string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	cp := testenv.Get(t)
	node := testenv.GetNode(t)
	ctx := t.Context()
	importOnce.Do(func() {
		images, importErr = demo.LoadImages(filepath.Join("..", ".."), "")
		if importErr != nil {
			return
		}
		for _, a := range []string{images.Gateway.ArchivePath(), images.Echo.ArchivePath()} {
			if _, importErr = node.ImportImage(context.Background(), a); importErr != nil {
				return
			}
		}
	})
	if importErr != nil {
		t.Fatal(importErr)
	}
	c := &cluster{t: t, ctx: ctx, cp: cp, node: node, images: images, ns: cp.Namespace(t)}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpPods()
		}
	})
	return c
}

// echo deploys echo backends and waits for them.
func (c *cluster) echo(name string, replicas int32) []corev1.Pod {
	c.t.Helper()
	if err := demo.DeployEcho(c.ctx, c.cp.Client, c.ns, name, c.images.Echo.Name, replicas); err != nil {
		c.t.Fatal(err)
	}
	pods, err := c.node.WaitPodsReady(c.ctx, c.ns, "app="+name, int(replicas))
	if err != nil {
		c.t.Fatal(err)
	}
	return pods
}

// terraform is a workspace whose runs pass the admin kubeconfig.
type terraform struct {
	c  *cluster
	ws *tfcli.Workspace
	// noKubeconfigVar: the configuration names its kubeconfig itself.
	noKubeconfigVar bool
}

func (c *cluster) terraform() *terraform {
	c.t.Helper()
	ws, err := tfcli.New(c.ctx, tfcli.Options{Dir: c.t.TempDir()})
	if err != nil {
		c.t.Fatal(err)
	}
	return &terraform{c: c, ws: ws}
}

func (tf *terraform) write(hcl string) {
	tf.c.t.Helper()
	if err := tf.ws.WriteFile("main.tf", hcl); err != nil {
		tf.c.t.Fatal(err)
	}
}

func (tf *terraform) run(args ...string) (string, error) {
	args = append(args, "-no-color", "-input=false")
	if !tf.noKubeconfigVar {
		args = append(args, "-var", "kubeconfig="+tf.c.cp.Kubeconfig)
	}
	if args[0] != "plan" {
		args = append(args, "-auto-approve")
	}
	return tf.ws.Run(tf.c.ctx, args...)
}

func (tf *terraform) mustRun(args ...string) string {
	tf.c.t.Helper()
	start := time.Now()
	out, err := tf.run(args...)
	if err != nil {
		tf.c.t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
	}
	tf.c.t.Logf("terraform %s: %s", args[0], time.Since(start).Round(100*time.Millisecond))
	return out
}

// gatewayPods are the running pods of gw, sorted by name.
func (c *cluster) gatewayPods(gw object.Ref) []corev1.Pod {
	c.t.Helper()
	list, err := c.cp.Client.CoreV1().Pods(gw.Namespace).List(c.ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(gwruntime.Labels(gw)).String(),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// serviceAddr is the ClusterIP address of Service name on port.
func (c *cluster) serviceAddr(name string, port int) string {
	c.t.Helper()
	svc, err := c.cp.Client.CoreV1().Services(c.ns).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(port))
}

// dumpPods logs the namespace's pods, their events and the gateway
// containers' logs, for a failed test.
func (c *cluster) dumpPods() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods, err := c.cp.Client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Logf("list pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		var st []string
		for _, cs := range p.Status.ContainerStatuses {
			s := fmt.Sprintf("%s ready=%v restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				s += " waiting " + w.Reason + ": " + w.Message
			}
			if x := cs.LastTerminationState.Terminated; x != nil {
				s += fmt.Sprintf(" last exit %d %s", x.ExitCode, x.Reason)
			}
			st = append(st, s)
		}
		c.t.Logf("pod %s phase %s ip %s: %s", p.Name, p.Status.Phase, p.Status.PodIP, strings.Join(st, "; "))
		if _, isEcho := p.Labels["app"]; isEcho {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			logs, err := c.node.PodLogs(ctx, c.ns, p.Name, ctr.Name)
			if len(logs) > 6000 {
				logs = logs[len(logs)-6000:]
			}
			c.t.Logf("logs of %s/%s (%v):\n%s", p.Name, ctr.Name, err, logs)
		}
	}
	ev, err := c.cp.Client.CoreV1().Events(c.ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range ev.Items {
			if e.Type != corev1.EventTypeNormal {
				c.t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	if os.Getenv("VARNISHGW_E2E_KUBELET_LOG") != "" {
		b, _ := os.ReadFile(c.node.LogPath("kubelet"))
		if len(b) > 20000 {
			b = b[len(b)-20000:]
		}
		c.t.Logf("kubelet log (tail):\n%s", b)
	}
}

// load is clients sending requests continuously, each on its own keep-alive
// connection (reopened when the gateway closes it), and what they saw.
type load struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	sent     atomic.Int64
	failed   atomic.Int64
	newConns atomic.Int64
	mu       sync.Mutex
	failures []string
	backends map[string]int
}

// startLoad starts n clients sending r to addr until stop.
func startLoad(n int, addr string, r demo.Request) *load {
	l := &load{stop: make(chan struct{}), backends: map[string]int{}}
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
				if !info.Reused {
					l.newConns.Add(1)
				}
			}}
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "http://"+addr+r.Path, nil)
				req.Host = r.Host
				resp, err := client.Do(req)
				l.sent.Add(1)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				switch {
				case err != nil:
					l.fail(err.Error())
				case resp.StatusCode != http.StatusOK:
					// The body says which (ghost: no vhost, no route...).
					first, _, _ := strings.Cut(string(body), "\n")
					l.fail(resp.Status + ": " + first)
				default:
					l.mu.Lock()
					l.backends[resp.Header.Get("X-Backend")]++
					l.mu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return l
}

func (l *load) fail(what string) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.failures) < 10 {
		l.failures = append(l.failures, time.Now().Format("15:04:05.000")+" "+what)
	}
	l.mu.Unlock()
}

// seen returns a copy of the answers per backend so far.
func (l *load) seen() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.backends)
}

// end stops the clients and fails t if a request failed or too few were
// sent.
func (l *load) end(t *testing.T, what string) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	t.Logf("%s: %d requests, %d failed, %d connections opened, backends %v", what, l.sent.Load(), l.failed.Load(), l.newConns.Load(), l.backends)
	if l.failed.Load() > 0 {
		t.Errorf("%s: %d of %d requests failed; first failures:\n%s", what, l.failed.Load(), l.sent.Load(), strings.Join(l.failures, "\n"))
	}
	if l.sent.Load() < 20 {
		t.Errorf("%s: only %d requests sent", what, l.sent.Load())
	}
}

// expectNothingLeft waits until the namespace holds only what the test made
// itself (objects labelled keepLabel, their ReplicaSets, Pods and
// EndpointSlices, and what Kubernetes puts in every namespace) and no
// cluster-scoped object names the namespace, and fails the test with what
// is left after timeout.
func (c *cluster) expectNothingLeft(timeout time.Duration, keepLabel string) {
	c.t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.cp.Config)
	if err != nil {
		c.t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.cp.Config)
	if err != nil {
		c.t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		c.t.Fatal(err)
	}
	type res struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}
	var all []res
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || r.Name == "events" {
				continue
			}
			all = append(all, res{gv.WithResource(r.Name), r.Namespaced})
		}
	}
	kept := func(o unstructured.Unstructured) bool {
		if _, ok := o.GetLabels()[keepLabel]; ok {
			return true
		}
		switch o.GetKind() {
		case "ServiceAccount":
			return o.GetName() == "default"
		case "ConfigMap":
			return o.GetName() == "kube-root-ca.crt"
		case "EndpointSlice":
			_, ok := o.GetLabels()[discoveryv1.LabelServiceName]
			return ok && !strings.HasPrefix(o.GetLabels()[discoveryv1.LabelServiceName], "varnishgw-")
		}
		return false
	}
	start := time.Now()
	for {
		var left []string
		for _, r := range all {
			var list *unstructured.UnstructuredList
			if r.namespaced {
				list, err = dyn.Resource(r.gvr).Namespace(c.ns).List(c.ctx, metav1.ListOptions{})
			} else {
				list, err = dyn.Resource(r.gvr).List(c.ctx, metav1.ListOptions{})
			}
			if err != nil {
				continue // not listable as admin (e.g. review APIs)
			}
			for _, o := range list.Items {
				switch {
				case r.namespaced && !kept(o):
					left = append(left, o.GetKind()+" "+o.GetName())
				case !r.namespaced && o.GetKind() != "Namespace" && strings.Contains(o.GetName(), c.ns):
					left = append(left, o.GetKind()+" "+o.GetName()+" (cluster-scoped)")
				}
			}
		}
		if len(left) == 0 {
			c.t.Logf("nothing left in namespace %s %s after destroy", c.ns, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > timeout {
			c.t.Fatalf("%s after destroy, still there: %s", timeout, strings.Join(left, ", "))
		}
		time.Sleep(time.Second)
	}
}
