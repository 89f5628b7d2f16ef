package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// dayHCL is the platform team's gateway, after classHCL("day", ...);
// %[1]s is the namespace, %[2]d the listener port and %[3]s the routes
// (edited during the day).
const dayHCL = `
resource "varnishgw_gateway" "day" {
  namespace          = %[1]q
  name               = "day"
  gateway_class_name = varnishgw_gateway_class.day.name
  wait_for_rollout   = false

  listener {
    name     = "http"
    port     = %[2]d
    protocol = "HTTP"
  }
}

%[3]s
`

const wwwRoute = `
resource "varnishgw_http_route" "www" {
  namespace = %q
  name      = "www"
  hostnames = ["www.day.test"]
  parent_ref {
    name = varnishgw_gateway.day.name
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
  %s
}

resource "varnishgw_http_route" "api" {
  namespace = %[1]q
  name      = "api"
  hostnames = ["api.day.test"]
  parent_ref {
    name = varnishgw_gateway.day.name
  }
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/v2"
      }
      header {
        name  = "x-beta"
        value = "1"
      }
    }
    backend_ref {
      name = "api-beta"
      port = 80
    }
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
`

// TestPlatformTeamDay follows a platform team's day with the real CLI, the
// real API server and a real gateway (chaperone, varnishd, ghost): apply and
// traffic is routed as declared; an HCL edit shows its routing diff in the
// plan, and after apply traffic follows within a second with no failed
// request; a backend scales and its new endpoint gets traffic; a bad regex
// fails the plan and traffic is unaffected; the routes are destroyed and
// their hosts answer 404; everything is destroyed and the objects are gone.
func TestPlatformTeamDay(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "day"}

	ip, err := varnishdtest.FindHostIP()
	if err != nil {
		t.Fatal(err)
	}
	backend := map[string]*demo.Backend{}
	for _, name := range []string{"web-1", "web-next-1", "api-1", "api-2", "api-canary-1", "api-beta-1"} {
		b, err := demo.StartBackend(name, ip)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		backend[name] = b
	}
	for svc, names := range map[string][]string{"web": {"web-1"}, "web-next": {"web-next-1"}, "api": {"api-1"}, "api-canary": {"api-canary-1"}, "api-beta": {"api-beta-1"}} {
		var bs []*demo.Backend
		for _, n := range names {
			bs = append(bs, backend[n])
		}
		if err := demo.RegisterService(ctx, cp.Client, ns, svc, 80, bs...); err != nil {
			t.Fatal(err)
		}
	}

	dir := varnishdtest.Dir(t)
	listen := varnishdtest.FreeAddr(t)
	port := varnishdtest.Port(t, listen)
	tf := newWorkspace(ctx, t, cp)
	class := "day-" + ns
	write := func(resources string) {
		t.Helper()
		if err := tf.WriteFile("main.tf", classHCL("day", ns, class)+fmt.Sprintf(dayHCL, ns, port, resources)); err != nil {
			t.Fatal(err)
		}
	}
	routes := func(wwwRule string) string { return fmt.Sprintf(wwwRoute, ns, wwwRule) }
	rule := func(backend string) string {
		return fmt.Sprintf("rule {\n    backend_ref {\n      name = %q\n      port = 80\n    }\n  }", backend)
	}
	webRule := rule("web")
	write(routes(webRule))
	run := func(args ...string) (string, error) { return tf.run(ctx, args...) }
	mustRun := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}

	// Morning: apply, start the gateway's pod, traffic routed as declared.
	mustRun("apply")
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, gwruntime.Name(gw))
	if err != nil {
		t.Fatal(err)
	}
	vmodDir := varnishdtest.Dir(t)
	if _, err := varnishdtest.BuildGhost(vmodDir); err != nil {
		t.Fatal(err)
	}
	health := varnishdtest.FreeAddr(t)
	ch := startChaperone(ctx, t, cp, demo.ChaperoneOptions{
		Gateway: gw, Kubeconfig: kubeconfig, Dir: dir, VMODDir: vmodDir, ListenHost: "127.0.0.1", HealthAddr: health,
	})
	if err := ch.Ready(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	expect := func(r demo.Request, status int, backend string) {
		t.Helper()
		a, err := r.Do(listen)
		if err != nil {
			t.Fatalf("%s: %v", r.Curl(listen), err)
		}
		if a.Status != status || backend != "" && a.Backend != backend {
			t.Fatalf("%s: got %s, want %d from %q", r.Curl(listen), a, status, backend)
		}
	}
	www := demo.Request{Host: "www.day.test", Path: "/"}
	expect(www, 200, "web-1")
	if a, _ := (demo.Request{Host: "www.day.test", Path: "/catalog"}).Do(listen); a.Status != 301 || !strings.HasSuffix(a.Location, "/products") {
		t.Fatalf("redirect: got %s", a)
	}
	expect(demo.Request{Host: "api.day.test", Path: "/v2/x", Headers: map[string]string{"x-beta": "1"}}, 200, "api-beta-1")
	counts, err := demo.Request{Host: "api.day.test", Path: "/"}.Spread(listen, 200)
	if err != nil {
		t.Fatal(err)
	}
	if counts["api-1"] < 150 || counts["api-canary-1"] < 5 || counts["api-1"]+counts["api-canary-1"] != 200 {
		t.Fatalf("90/10 split over 200 requests: %v", counts)
	}
	expect(demo.Request{Host: "nowhere.day.test", Path: "/"}, 404, "")

	// An HCL edit: the plan shows the routing change, apply, and traffic
	// follows within a second while requests keep succeeding.
	write(routes(rule("web-next")))
	plan := mustRun("plan")
	if !strings.Contains(plan, "routing") || !strings.Contains(plan, "web-next") {
		t.Fatalf("the plan does not show the routing change to web-next:\n%s", plan)
	}
	var failed, sent atomic.Int64
	var lastFail atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			a, err := www.Do(listen)
			sent.Add(1)
			if err != nil || a.Status != 200 {
				failed.Add(1)
				lastFail.Store(fmt.Sprintf("%v %v", a, err))
			}
		}
	}()
	mustRun("apply")
	applied := time.Now()
	for {
		a, err := www.Do(listen)
		if err == nil && a.Backend == "web-next-1" {
			break
		}
		if time.Since(applied) > time.Second {
			t.Fatalf("traffic did not follow the edit within 1s of apply: %v %v", a, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("traffic followed the edit %v after apply returned", time.Since(applied).Round(time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || sent.Load() < 10 {
		t.Fatalf("during the change %d of %d requests failed (last: %v)", failed.Load(), sent.Load(), lastFail.Load())
	}

	// The api backend scales: its new endpoint gets traffic.
	if err := demo.RegisterService(ctx, cp.Client, ns, "api", 80, backend["api-1"], backend["api-2"]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := demo.Request{Host: "api.day.test", Path: "/"}.Spread(listen, 40)
		if err == nil && c["api-2"] > 0 && c["api-1"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new endpoint api-2 got no traffic: %v %v", c, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A bad regex fails the plan with a clear error; traffic is unaffected.
	write(routes(`rule {
    match {
      path {
        type  = "RegularExpression"
        value = "/(unclosed"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }
  ` + rule("web-next")))
	out, err := run("plan")
	if err != nil {
		out += err.Error() // the diagnostics are on standard error
	}
	if err == nil || !strings.Contains(out, "/(unclosed") || !strings.Contains(out, "path.value") || !strings.Contains(out, "missing closing )") {
		t.Fatalf("plan with a bad regex: err=%v\n%s", err, out)
	}
	expect(www, 200, "web-next-1")

	// The routes go: their hosts answer 404, the gateway stays.
	write("")
	mustRun("apply")
	deadline = time.Now().Add(5 * time.Second)
	for {
		a, err := www.Do(listen)
		if err == nil && a.Status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("www.day.test after its route was destroyed: %v %v", a, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	expect(demo.Request{Host: "api.day.test", Path: "/"}, 404, "")

	// Evening: the pod stops (drains), everything is destroyed.
	if err := ch.Stop(30 * time.Second); err != nil {
		t.Fatalf("the chaperone did not drain and exit 0: %v", err)
	}
	mustRun("destroy")
	name := gwruntime.Name(gw)
	checks := map[string]func() error{
		"Gateway": func() error {
			_, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "day", metav1.GetOptions{})
			return err
		},
		"GatewayClass": func() error {
			_, err := cp.Gateway.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{})
			return err
		},
		"Deployment": func() error {
			_, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		"Service": func() error {
			_, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		"ServiceAccount": func() error {
			_, err := cp.Client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		"VCL ConfigMap": func() error {
			_, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
			return err
		},
	}
	for what, get := range checks {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("%s after destroy: %v", what, err)
		}
	}
	frags, err := cp.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: gwruntime.GatewayLabel + "=day"})
	if err != nil || len(frags.Items) != 0 {
		t.Errorf("fragments after destroy: %d %v", len(frags.Items), err)
	}
	// The backend Services are not the configuration's: they stay.
	if _, err := cp.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("Service web (not created by terraform) after destroy: %v", err)
	}
}
