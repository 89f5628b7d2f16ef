package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/demo"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// cacheHCL is a gateway with a cache policy and one route, after
// classHCL("cache", ...); %[1]s is the namespace, %[2]d the listener port,
// %[3]s the route rule's extra blocks and %[4]s further resources.
const cacheHCL = `
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
    %[3]s
  }
}

%[4]s
`

// purgeHCL purges /page of www.cache.test on every pod of the gateway;
// %[1]s is the namespace, %[2]s the trigger.
const purgeHCL = `
resource "varnishgw_cache_invalidation" "page" {
  gateway_namespace = %[1]q
  gateway_name      = varnishgw_gateway.cache.name
  purge {
    host = "www.cache.test"
    path = "/page"
  }
  triggers = {
    release = %[2]q
  }
}

output "purged_on" {
  value = varnishgw_cache_invalidation.page.applied_pods
}
`

// TestCachingDay follows caching as code with the real CLI, the real API
// server and a real gateway of two pods (chaperone, varnishd, ghost each):
// the Gateway's cache block caches the route's answers (MISS, then HIT), a
// cookie the policy strips does not pass, other cookies and Authorization
// do; a varnishgw_cache_invalidation purges a URL on both pods and records
// both; the plan shows the rule's effective policy; a rule that turns
// caching off passes on both pods within a second of apply, without a VCL
// reload.
func TestCachingDay(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "cache"}

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
	tf := newWorkspace(ctx, t, cp)
	class := "cache-" + ns
	write := func(rule, more string) {
		t.Helper()
		if err := tf.WriteFile("main.tf", classHCL("cache", ns, class)+fmt.Sprintf(cacheHCL, ns, port, rule, more)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := tf.run(ctx, args...)
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
		}
		return out
	}
	write("", "")
	run("apply")

	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, gwruntime.Name(gw))
	if err != nil {
		t.Fatal(err)
	}
	vmodDir := varnishdtest.Dir(t)
	if _, err := varnishdtest.BuildGhost(vmodDir); err != nil {
		t.Fatal(err)
	}
	// Two gateway pods, as two replicas of the Deployment: a chaperone
	// each (on 127.0.0.1 and 127.0.0.2, the listener's port), and a Pod
	// object marked Ready as a kubelet would (there is no node here), so
	// the provider waits for both.
	pods := []string{"cache-0", "cache-1"}
	listens := []string{listen, net.JoinHostPort("127.0.0.2", fmt.Sprint(port))}
	var chs []*demo.Chaperone
	for i, name := range pods {
		readyPod(t, cp, gw, name)
		podDir := filepath.Join(dir, name)
		if err := os.Mkdir(podDir, 0o755); err != nil {
			t.Fatal(err)
		}
		host, _, _ := net.SplitHostPort(listens[i])
		ch := startChaperone(ctx, t, cp, demo.ChaperoneOptions{
			Gateway: gw, Kubeconfig: kubeconfig, PodName: name, Dir: podDir, VMODDir: vmodDir, ListenHost: host,
		})
		chs = append(chs, ch)
	}
	for _, ch := range chs {
		if err := ch.Ready(ctx, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	statusOn := func(addr string, r demo.Request) string {
		t.Helper()
		a, err := r.Do(addr)
		if err != nil {
			t.Fatalf("%s: %v", r.Curl(addr), err)
		}
		if a.Status != 200 || a.Backend != "web-1" {
			t.Fatalf("%s: got %s, want 200 from web-1", r.Curl(addr), a)
		}
		return a.Header.Get("X-Cache")
	}
	status := func(r demo.Request) string { t.Helper(); return statusOn(listen, r) }
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

	// Both pods cache /page; an invalidation through Terraform purges it
	// on both, and the resource records that both applied it.
	if got := statusOn(listens[1], page); got != "MISS" {
		t.Fatalf("first request to %s: X-Cache %q, want MISS", pods[1], got)
	}
	for _, addr := range listens {
		if got := statusOn(addr, page); got != "HIT" {
			t.Fatalf("%s before the purge: X-Cache %q, want HIT", addr, got)
		}
	}
	write("", fmt.Sprintf(purgeHCL, ns, "v1"))
	run("apply")
	out, err := tf.Run(ctx, "output", "-no-color", "-json", "purged_on")
	if err != nil || strings.Join(strings.Fields(out), "") != `["cache-0","cache-1"]` {
		t.Fatalf("applied_pods of the invalidation: %v %s, want both pods", err, out)
	}
	for _, addr := range listens {
		if got := statusOn(addr, page); got != "MISS" {
			t.Fatalf("%s after the purge: X-Cache %q, want MISS", addr, got)
		}
		if got := statusOn(addr, page); got != "HIT" {
			t.Fatalf("%s after the purge, again: X-Cache %q, want HIT", addr, got)
		}
	}

	// The plan shows the effective policy of the rule: turning caching
	// off for the rule is a visible change, and after apply the route
	// passes within a second.
	run("apply", "-refresh-only")
	write("cache {\n      enabled = false\n    }", fmt.Sprintf(purgeHCL, ns, "v1"))
	plan := run("plan")
	if !strings.Contains(plan, "effective_cache") || !strings.Contains(plan, "enabled") {
		t.Fatalf("the plan does not show the rule's effective cache policy changing:\n%s", plan)
	}
	run("apply")
	// Without a policy the route has no status header either; a hit's
	// X-Varnish names two transactions (the request's and the object's),
	// a pass's one.
	fromCache := func(addr string) bool {
		t.Helper()
		a, err := page.Do(addr)
		if err != nil || a.Status != 200 {
			t.Fatalf("%s: %v %v", page.Curl(addr), a, err)
		}
		return len(strings.Fields(a.Header.Get("X-Varnish"))) > 1 || a.Header.Get("X-Cache") != ""
	}
	deadline := time.Now().Add(time.Second)
	for _, addr := range listens {
		// two answers in a row not from the cache: the first could be
		// the miss that stored the object just before the reload
		for {
			first := fromCache(addr)
			if !first && !fromCache(addr) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("1 s after apply the rule with caching off is still answered from the cache (or with X-Cache) by %s", addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The pods go (their Pod objects with them, as the kubelet would
	// delete them), then everything is destroyed.
	for i, ch := range chs {
		if err := ch.Stop(30 * time.Second); err != nil {
			t.Fatalf("the chaperone did not drain and exit 0: %v", err)
		}
		if err := cp.Client.CoreV1().Pods(ns).Delete(ctx, pods[i], metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	run("destroy")
}

// readyPod creates the Pod object of gateway pod name, marked Ready as a
// kubelet would mark it, so that the provider's waits count it.
func readyPod(t *testing.T, cp *testenv.ControlPlane, gw object.Ref, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().ServiceAccounts(gw.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := cp.Client.CoreV1().Pods(gw.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: gwruntime.Labels(gw)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "chaperone", Image: "localhost/varnishgw/gateway:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := cp.Client.CoreV1().Pods(gw.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
