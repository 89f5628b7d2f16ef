package cluster

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// followLogs streams a container's log lines until ctx ends or the
// container stops, and returns them through the function it returns.
func (c *cluster) followLogs(ctx context.Context, pod, container string) func() []string {
	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc, err := c.cp.Client.CoreV1().Pods(c.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
		if err != nil {
			mu.Lock()
			lines = append(lines, "(log stream: "+err.Error()+")")
			mu.Unlock()
			return
		}
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	return func() []string {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}

// TestSidecarPods: in sidecar mode the varnish container runs varnishd and
// the chaperone steers it; deleting a pod under load runs the varnish
// container's real preStop hook (chaperone drain through the drain
// socket, as uid 65532), which holds varnishd up until the chaperone has
// drained it: no request fails, and no hook fails.
func TestSidecarPods(t *testing.T) {
	c := newCluster(t)
	c.echo("web", 1)
	c.echo("api", 1)
	c.echo("api-canary", 1)
	tf := c.terraform()
	tf.write(c.gatewayHCL(c.images.Gateway.Name, "sidecar", 2, "", ""))
	tf.mustRun("apply")
	gw := object.Ref{Namespace: c.ns, Name: "node"}
	pods := c.gatewayPods(gw)
	if len(pods) != 2 || len(pods[0].Spec.Containers) != 2 {
		t.Fatalf("gateway pods %v, want 2 with 2 containers each", podNames(pods))
	}
	www := demo.Request{Host: "www.node.test", Path: "/"}
	for _, p := range pods {
		eventually(t, 10*time.Second, net.JoinHostPort(p.Status.PodIP, "80"), www, 200, "web-")
	}
	svc := c.serviceAddr(gwruntime.Name(gw), 80)
	eventually(t, 10*time.Second, svc, www, 200, "web-")

	victim := pods[0].Name
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	chaperoneLog := c.followLogs(ctx, victim, "chaperone")
	l := startLoad(4, svc, www)
	time.Sleep(time.Second)
	if err := c.cp.Client.CoreV1().Pods(c.ns).Delete(c.ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		_, err := c.cp.Client.CoreV1().Pods(c.ns).Get(c.ctx, victim, metav1.GetOptions{})
		if err != nil {
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("pod %s still there 90 s after its deletion", victim)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("pod %s was gone %s after its deletion", victim, time.Since(start).Round(100*time.Millisecond))
	time.Sleep(time.Second)
	l.end(t, "a sidecar pod deleted")
	log := strings.Join(chaperoneLog(), "\n")
	for _, want := range []string{"draining: waiting for client sessions to close", "drained, exiting"} {
		if !strings.Contains(log, want) {
			t.Errorf("the deleted pod's chaperone did not log %q:\n%s", want, log)
		}
	}
	ev, err := c.cp.Client.CoreV1().Events(c.ns).List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + victim})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ev.Items {
		if strings.Contains(e.Reason, "PreStop") || strings.Contains(e.Reason, "Hook") {
			t.Errorf("event %s on the deleted pod: %s", e.Reason, e.Message)
		}
	}
	if _, err := c.node.WaitPodsReady(c.ctx, c.ns, labels.SelectorFromSet(gwruntime.Labels(gw)).String(), 2); err != nil {
		t.Fatal(err)
	}
	tf.mustRun("destroy")
	c.expectNothingLeft(2*time.Minute, "app")
}
