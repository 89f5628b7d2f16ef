package cluster

import (
	"fmt"
	"net"

	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// gatewayHCL is a class, a gateway and routes; %[1]s is the namespace,
// %[2]s the image, %[3]s the mode, %[4]d the replicas, %[5]s the class's
// varnishd_params (an HCL map) and %[6]s extra resources.
const gatewayHCL = tfcli.KubeconfigProvider + `
resource "varnishgw_gateway_class" "node" {
  name                 = "node-%[1]s"
  parameters_namespace = %[1]q
  image                = %[2]q
  varnishd_params      = %[5]s
}

resource "varnishgw_gateway" "node" {
  namespace             = %[1]q
  name                  = "node"
  gateway_class_name    = varnishgw_gateway_class.node.name
  mode                  = %[3]q
  replicas              = %[4]d
  drain_timeout_seconds = 20
  rollout_timeout       = "4m"

  listener {
    name     = "http"
    port     = 80
    protocol = "HTTP"
  }
}

resource "varnishgw_http_route" "www" {
  namespace = %[1]q
  name      = "www"
  hostnames = ["www.node.test"]
  parent_ref {
    name = varnishgw_gateway.node.name
  }
  rule {
    match {
      path {
        type  = "Exact"
        value = "/catalog"
      }
    }
    filter {
      type = "RequestRedirect"
      request_redirect {
        status_code = 301
        path {
          type              = "ReplaceFullPath"
          replace_full_path = "/products"
        }
      }
    }
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

resource "varnishgw_http_route" "api" {
  namespace = %[1]q
  name      = "api"
  hostnames = ["api.node.test"]
  parent_ref {
    name = varnishgw_gateway.node.name
  }
  rule {
    backend_ref {
      name   = "api"
      port   = 80
      weight = 90
    }
    backend_ref {
      name   = "api-canary"
      port   = 80
      weight = 10
    }
  }
}
%[6]s
`

func (c *cluster) gatewayHCL(image, mode string, replicas int, params, extra string) string {
	if params == "" {
		params = "{}"
	}
	return fmt.Sprintf(gatewayHCL, c.ns, image, mode, replicas, params, extra)
}

// expect sends r to addr and checks the status and, when backendPrefix is
// set, that a backend whose name starts with it answered.
func expect(t *testing.T, addr string, r demo.Request, status int, backendPrefix string) demo.Answer {
	t.Helper()
	a, err := r.Do(addr)
	if err != nil {
		t.Fatalf("%s: %v", r.Curl(addr), err)
	}
	if a.Status != status || !strings.HasPrefix(a.Backend, backendPrefix) {
		t.Fatalf("%s: got %s, want %d from %s*", r.Curl(addr), a, status, backendPrefix)
	}
	return a
}

// eventually sends r to addr until it is answered with status from a
// backend whose name starts with backendPrefix, within timeout, and
// returns how long that took.
func eventually(t *testing.T, timeout time.Duration, addr string, r demo.Request, status int, backendPrefix string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		a, err := r.Do(addr)
		if err == nil && a.Status == status && strings.HasPrefix(a.Backend, backendPrefix) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: after %s got %s %v, want %d from %s*", r.Curl(addr), timeout, a, err, status, backendPrefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGatewayPods: the provider's Deployment runs for real. Two gateway
// pods of the image make image built become Ready through their probes,
// serve port 80 as uid 65532 without capabilities, and route as declared,
// through each pod's IP and through the gateway's Service (kube-proxy), to
// echo pods whose EndpointSlices come from Kubernetes' controller.
func TestGatewayPods(t *testing.T) {
	c := newCluster(t)
	web := c.echo("web", 2)
	c.echo("api", 1)
	c.echo("api-canary", 1)

	tf := c.terraform()
	tf.write(c.gatewayHCL(c.images.Gateway.Name, "supervise", 2, "", ""))
	tf.mustRun("apply")
	gw := object.Ref{Namespace: c.ns, Name: "node"}
	pods := c.gatewayPods(gw)
	if len(pods) != 2 {
		t.Fatalf("%d gateway pods after apply, want 2", len(pods))
	}
	www := demo.Request{Host: "www.node.test", Path: "/"}
	// Apply means served: the apply returned once every gateway pod
	// reported serving the routes (its GatewayPodReport, owned by the pod),
	// so each pod routes them at once.
	reports, err := vgwapi.ReadReports(c.ctx, dynamic.NewForConfigOrDie(c.cp.Config), gw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		addr := net.JoinHostPort(p.Status.PodIP, "80")
		expect(t, addr, www, 200, "web-")
		expect(t, addr, demo.Request{Host: "api.node.test", Path: "/"}, 200, "api")
		expect(t, addr, demo.Request{Host: "nowhere.node.test", Path: "/"}, 404, "")
		r := reports[p.Name]
		if r == nil || r.Status.Routing == nil || r.Status.Routing.Fragments != 2 || len(r.Status.Routing.Rejected) != 0 ||
			len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != p.UID {
			t.Errorf("pod %s: GatewayPodReport %+v, want 2 fragments served, none rejected, owned by the pod", p.Name, r)
		}
	}
	svc := c.serviceAddr(gwruntime.Name(gw), 80)
	seen := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < len(web) {
		a := expect(t, svc, www, 200, "web-")
		seen[a.Backend]++
		if time.Now().After(deadline) {
			t.Fatalf("through the Service, only backends %v answered in 30 s, want all of %d", seen, len(web))
		}
	}
	a := expect(t, svc, demo.Request{Host: "www.node.test", Path: "/catalog"}, 301, "")
	if a.Location != "http://www.node.test/products" {
		t.Errorf("redirect Location %q, want http://www.node.test/products", a.Location)
	}
	counts, err := demo.Request{Host: "api.node.test", Path: "/"}.Spread(svc, 200)
	if err != nil {
		t.Fatal(err)
	}
	api, canary := 0, 0
	for b, n := range counts {
		switch {
		case strings.HasPrefix(b, "api-canary-"):
			canary += n
		case strings.HasPrefix(b, "api-"):
			api += n
		}
	}
	if api < 150 || canary < 5 || api+canary != 200 {
		t.Fatalf("90/10 split over 200 requests: %v", counts)
	}

	// A backend scales up and down under load: traffic follows the
	// EndpointSlices Kubernetes writes, and no request fails.
	l := startLoad(4, svc, www)
	c.echo("web", 4)
	web = c.echo("web", 4)
	waitBackends(t, l, 30*time.Second, podNames(web), false)
	c.echo("web", 1)
	web = c.echo("web", 1)
	waitBackends(t, l, 30*time.Second, podNames(web), true)
	l.end(t, "web scaled 2 → 4 → 1")
	if t.Failed() {
		return
	}

	// A change that rolls the gateway's pods (a varnishd parameter), with 4
	// keep-alive clients sending all along through the Service: the old
	// pods drain (their connections are closed after a response, and the
	// clients reconnect to the new pods) and no request fails.
	l = startLoad(4, svc, www)
	time.Sleep(time.Second)
	tf.write(c.gatewayHCL(c.images.Gateway.Name, "supervise", 2, `{ default_grace = "20" }`, ""))
	tf.mustRun("apply")
	old := map[string]bool{}
	for _, p := range pods {
		old[p.Name] = true
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		all, err := c.cp.Client.CoreV1().Pods(c.ns).List(c.ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(gwruntime.Labels(gw)).String()})
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, p := range all.Items {
			if old[p.Name] {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d old gateway pods still there 2 minutes after the rollout", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	l.end(t, "the gateway's pods rolled")
	if l.newConns.Load() < 8 {
		t.Errorf("the clients opened %d connections in all: the drain did not move them to the new pods", l.newConns.Load())
	}
	pods = c.gatewayPods(gw)
	if len(pods) != 2 || old[pods[0].Name] || old[pods[1].Name] {
		t.Fatalf("gateway pods after the roll: %v", podNames(pods))
	}
	if t.Failed() {
		return
	}

	// One gateway pod is killed: the other keeps serving, and the
	// replacement becomes Ready and routes.
	survivor := net.JoinHostPort(pods[1].Status.PodIP, "80")
	l = startLoad(4, survivor, www)
	zero := int64(0)
	if err := c.cp.Client.CoreV1().Pods(c.ns).Delete(c.ctx, pods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.node.WaitPodsReady(c.ctx, c.ns, labels.SelectorFromSet(gwruntime.Labels(gw)).String(), 2); err != nil {
		t.Fatal(err)
	}
	var replacement *corev1.Pod
	for _, p := range c.gatewayPods(gw) {
		if p.Name != pods[0].Name && p.Name != pods[1].Name {
			replacement = &p
		}
	}
	if replacement == nil {
		t.Fatalf("no replacement gateway pod: %v", podNames(c.gatewayPods(gw)))
	}
	eventually(t, 10*time.Second, net.JoinHostPort(replacement.Status.PodIP, "80"), www, 200, "web-")
	l.end(t, "the other pod while one was killed")
	if t.Failed() {
		return
	}

	// Destroy leaves nothing behind.
	tf.mustRun("destroy")
	c.expectNothingLeft(2*time.Minute, "app")
}

// waitBackends waits until l has seen every backend in want answer (after
// the call) and, when only is set, none other in the last second.
func waitBackends(t *testing.T, l *load, timeout time.Duration, want []string, only bool) {
	t.Helper()
	start := time.Now()
	base := l.seen()
	for {
		time.Sleep(time.Second)
		now := l.seen()
		got := map[string]int{}
		for b, n := range now {
			if d := n - base[b]; d > 0 {
				got[b] = d
			}
		}
		ok := true
		for _, b := range want {
			if got[b] == 0 {
				ok = false
			}
		}
		if ok && only && len(got) != len(want) {
			ok = false
		}
		if ok {
			t.Logf("traffic reached %v within %s", want, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("after %s the last second's traffic went to %v, want %v (only: %v)", timeout, got, want, only)
		}
		base = now
	}
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
