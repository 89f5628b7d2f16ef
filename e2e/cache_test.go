package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd/varnishdtest"
)

// cacheHCL is a gateway with a cache policy and one route; %[1]s is the
// namespace, %[2]d the listener port, %[3]s the class name and %[4]s the
// route rule's extra blocks.
const cacheHCL = `
terraform {
  required_providers {
    varnishgw = { source = "varnishgw/varnishgw" }
  }
}

variable "kubeconfig" { type = string }

provider "varnishgw" {
  config_path = var.kubeconfig
}

resource "varnishgw_gateway_class" "cache" {
  name                 = %[3]q
  parameters_namespace = %[1]q
  image                = "localhost/varnishgw/gateway:test"
}

resource "varnishgw_gateway" "cache" {
  namespace          = %[1]q
  name               = "cache"
  gateway_class_name = varnishgw_gateway_class.cache.name
  wait_for_rollout   = false

  listener {
    name     = "http"
    port     = %[2]d
    protocol = "HTTP"
  }

  cache {
    ttl           = "10m"
    status_header = "X-Cache"
    strip_cookies = ["_ga"]
  }
}

resource "varnishgw_http_route" "www" {
  namespace = %[1]q
  name      = "www"
  hostnames = ["www.cache.test"]
  parent_ref {
    name = varnishgw_gateway.cache.name
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
    %[4]s
  }
}
`

// TestCachingDay follows caching as code with the real CLI, the real API
// server and a real gateway (chaperone, varnishd, ghost): the Gateway's
// cache block caches the route's answers (MISS, then HIT), a cookie the
// policy strips does not pass, other cookies and Authorization do; the
// plan shows the rule's effective policy; a rule that turns caching off
// passes within a second of apply, without a VCL reload.
func TestCachingDay(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := routing.ObjectRef{Namespace: ns, Name: "cache"}

	ip, err := varnishdtest.FindHostIP()
	if err != nil {
		t.Fatal(err)
	}
	web, err := demo.StartBackend("web-1", ip)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	if err := demo.RegisterService(ctx, cp.Client, ns, "web", 80, web); err != nil {
		t.Fatal(err)
	}

	dir := varnishdtest.Dir(t)
	listen := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, listen)
	tf, err := tfcli.New(ctx, tfcli.Options{Dir: t.TempDir(), ProviderDir: providerDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	class := "cache-" + ns
	write := func(rule string) {
		t.Helper()
		if err := tf.WriteFile("main.tf", fmt.Sprintf(cacheHCL, ns, port, class, rule)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		args = append(args, "-no-color", "-input=false", "-var", "kubeconfig="+cp.Kubeconfig)
		if args[0] != "plan" {
			args = append(args, "-auto-approve")
		}
		out, err := tf.Run(ctx, args...)
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
		}
		return out
	}
	write("")
	run("apply")

	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, gwruntime.Name(gw))
	if err != nil {
		t.Fatal(err)
	}
	vmodDir := varnishdtest.Dir(t)
	if _, err := varnishdtest.BuildGhost(vmodDir); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "chaperone.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	ch, err := demo.StartChaperone(ctx, cp.Client, demo.ChaperoneOptions{
		Binary: filepath.Join(providerDir(t), "chaperone"), Gateway: gw, Kubeconfig: kubeconfig,
		Dir: dir, VMODDir: vmodDir, ListenHost: "127.0.0.1", Stderr: logFile,
		HealthAddr: varnishdtest.FreeAddr(t), AdminAddr: varnishdtest.FreeAddr(t), GhostAdminAddr: varnishdtest.FreeAddr(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ch.Kill)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("chaperone log (tail):\n%s", b)
		}
	})
	if err := ch.Ready(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	status := func(r demo.Request) string {
		t.Helper()
		a, err := r.Do(listen)
		if err != nil {
			t.Fatalf("%s: %v", r.Curl(listen), err)
		}
		if a.Status != 200 || a.Backend != "web-1" {
			t.Fatalf("%s: got %s, want 200 from web-1", r.Curl(listen), a)
		}
		return a.Header.Get("X-Cache")
	}
	page := demo.Request{Host: "www.cache.test", Path: "/page"}
	if got := status(page); got != "MISS" {
		t.Fatalf("first request: X-Cache %q, want MISS", got)
	}
	if got := status(page); got != "HIT" {
		t.Fatalf("second request: X-Cache %q, want HIT", got)
	}
	withGA := page
	withGA.Headers = map[string]string{"Cookie": "_ga=GA1.2.3"}
	if got := status(withGA); got != "HIT" {
		t.Fatalf("a request with only the stripped cookie _ga: X-Cache %q, want HIT", got)
	}
	withSession := page
	withSession.Headers = map[string]string{"Cookie": "_ga=GA1.2.3; session=s3cret"}
	if got := status(withSession); got != "PASS" {
		t.Fatalf("a request with a session cookie: X-Cache %q, want PASS", got)
	}
	withAuth := page
	withAuth.Headers = map[string]string{"Authorization": "Bearer x"}
	if got := status(withAuth); got != "PASS" {
		t.Fatalf("a request with Authorization: X-Cache %q, want PASS", got)
	}

	// The plan shows the effective policy of the rule: turning caching
	// off for the rule is a visible change, and after apply the route
	// passes within a second.
	run("apply", "-refresh-only")
	write("cache {\n      enabled = false\n    }")
	plan := run("plan")
	if !strings.Contains(plan, "effective_cache") || !strings.Contains(plan, "enabled") {
		t.Fatalf("the plan does not show the rule's effective cache policy changing:\n%s", plan)
	}
	run("apply")
	// Without a policy the route has no status header either; a hit's
	// X-Varnish names two transactions (the request's and the object's),
	// a pass's one.
	fromCache := func() bool {
		t.Helper()
		a, err := page.Do(listen)
		if err != nil || a.Status != 200 {
			t.Fatalf("%s: %v %v", page.Curl(listen), a, err)
		}
		return len(strings.Fields(a.Header.Get("X-Varnish"))) > 1 || a.Header.Get("X-Cache") != ""
	}
	deadline := time.Now().Add(time.Second)
	for fromCache() || fromCache() {
		if time.Now().After(deadline) {
			t.Fatal("1 s after apply the rule with caching off is still answered from the cache (or with X-Cache)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := ch.Stop(30 * time.Second); err != nil {
		t.Fatalf("the chaperone did not drain and exit 0: %v", err)
	}
	run("destroy")
}
