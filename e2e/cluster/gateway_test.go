package cluster

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// gatewayHCL is a class, a gateway and routes; %[1]s is the namespace,
// %[2]s the image, %[3]s the mode, %[4]d the replicas, %[5]s the class's
// varnishd_params (an HCL map) and %[6]s extra resources.
const gatewayHCL = `
terraform {
  required_providers {
    varnishgw = { source = "varnishgw/varnishgw" }
  }
}

variable "kubeconfig" { type = string }

provider "varnishgw" {
  config_path = var.kubeconfig
}

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
  listeners             = [{ name = "http", port = 80, protocol = "HTTP" }]
  mode                  = %[3]q
  replicas              = %[4]d
  drain_timeout_seconds = 20
  rollout_timeout       = "4m"
}

resource "varnishgw_http_route" "www" {
  namespace   = %[1]q
  name        = "www"
  parent_refs = [{ name = varnishgw_gateway.node.name }]
  hostnames   = ["www.node.test"]
  rules = [
    {
      matches = [{ path = { type = "Exact", value = "/catalog" } }]
      filters = [{
        type             = "RequestRedirect"
        request_redirect = { path = { type = "ReplaceFullPath", replace_full_path = "/products" }, status_code = 301 }
      }]
    },
    { backend_refs = [{ name = "web", port = 80 }] },
  ]
}

resource "varnishgw_http_route" "api" {
  namespace   = %[1]q
  name        = "api"
  parent_refs = [{ name = varnishgw_gateway.node.name }]
  hostnames   = ["api.node.test"]
  rules = [
    { backend_refs = [{ name = "api", port = 80, weight = 90 }, { name = "api-canary", port = 80, weight = 10 }] },
  ]
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
	gw := routing.ObjectRef{Namespace: c.ns, Name: "node"}
	pods := c.gatewayPods(gw)
	if len(pods) != 2 {
		t.Fatalf("%d gateway pods after apply, want 2", len(pods))
	}
	www := demo.Request{Host: "www.node.test", Path: "/"}
	for _, p := range pods {
		addr := net.JoinHostPort(p.Status.PodIP, "80")
		t.Logf("pod %s routes www.node.test %s after apply", p.Name,
			eventually(t, 10*time.Second, addr, www, 200, "web-").Round(time.Millisecond))
		expect(t, addr, demo.Request{Host: "nowhere.node.test", Path: "/"}, 404, "")
	}
	svc := c.serviceAddr(routing.RuntimeName(gw), 80)
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
}
