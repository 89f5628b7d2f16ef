package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/tfcli"
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
	args = append(args, "-no-color", "-input=false", "-var", "kubeconfig="+tf.c.cp.Kubeconfig)
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
func (c *cluster) gatewayPods(gw routing.ObjectRef) []corev1.Pod {
	c.t.Helper()
	list, err := c.cp.Client.CoreV1().Pods(gw.Namespace).List(c.ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(routing.RuntimeLabels(gw)).String(),
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
