package provider

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/tfcli"
)

// requestCounts are the API server's apiserver_request_total counters by
// "VERB group/resource[/subresource]", dry runs under "dry-run VERB ...".
type requestCounts map[string]float64

// apiserverCPU is the key of requestCounts that holds the API server's own
// CPU time in seconds (process_cpu_seconds_total), not a request count.
const apiserverCPU = "cpu-seconds kube-apiserver"

// apiRequests reads the API server's own request counters from /metrics,
// and its CPU time under apiserverCPU.
func apiRequests(ctx context.Context, cp *testenv.ControlPlane) (requestCounts, error) {
	raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	out := requestCounts{}
	fam := families["apiserver_request_total"]
	if fam == nil {
		return nil, fmt.Errorf("/metrics has no apiserver_request_total")
	}
	for _, m := range fam.Metric {
		l := map[string]string{}
		for _, p := range m.Label {
			l[p.GetName()] = p.GetValue()
		}
		key := l["verb"] + " " + l["group"] + "/" + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		if l["dry_run"] != "" {
			key = "dry-run " + key
		}
		out[key] += m.GetCounter().GetValue()
	}
	if cpu := families["process_cpu_seconds_total"]; cpu != nil && len(cpu.Metric) == 1 {
		out[apiserverCPU] = cpu.Metric[0].GetCounter().GetValue()
	}
	return out, nil
}

func (c requestCounts) String() string {
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// diff returns after - before for the counters that changed.
func (after requestCounts) diff(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

var writeVerbs = []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}

// writes sums the requests that change stored objects. The API server's
// own lease heartbeats (coordination.k8s.io) are not counted: they are not
// the provider's.
func (c requestCounts) writes() (n float64, what []string) {
	for k, v := range c {
		verb, rest, _ := strings.Cut(k, " ")
		if slices.Contains(writeVerbs, verb) && !strings.HasPrefix(rest, "coordination.k8s.io/") {
			n += v
			what = append(what, fmt.Sprintf("%s: %.0f", k, v))
		}
	}
	slices.Sort(what)
	return n, what
}

// total sums all requests except lease heartbeats.
func (c requestCounts) total() (n float64) {
	for k, v := range c {
		if !strings.Contains(k, "coordination.k8s.io/") && k != apiserverCPU {
			n += v
		}
	}
	return n
}

// perRoute is c divided by the number of routes, for the log.
func (c requestCounts) perRoute(n int) string {
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if strings.Contains(k, "coordination.k8s.io/") || k == apiserverCPU {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%.2f", k, c[k]/float64(n)))
	}
	return strings.Join(parts, ", ")
}

// loadAverage is the machine's 1-, 5- and 15-minute load averages, for the
// log beside the figures ("?" where /proc/loadavg cannot be read).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// childrenCPU is the user and system CPU time, in seconds, of the child
// processes that have ended: the CLI runs, with the provider processes
// they started.
func childrenCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkProviderRoutes plans and applies 200 varnishgw_http_route
// resources on one Gateway through the real CLI (tfcli) against the test
// control plane, then times a no-change plan and the destroy, and counts,
// with the API server's own metrics, the requests of each operation, per
// route, and the writes of the no-change plan (must be 0). It runs twice:
// with the routes' data-plane wait (wait_for_served) off and on; the
// Gateway has no pods here (the control plane has no node), so the wait
// only lists them. Run it with -benchtime=1x (make bench-provider).
// BENCH_PROVIDER_ROUTES overrides 200.
func BenchmarkProviderRoutes(b *testing.B) {
	n := 200
	if v := os.Getenv("BENCH_PROVIDER_ROUTES"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			b.Fatalf("BENCH_PROVIDER_ROUTES=%q: %v", v, err)
		}
	}
	for _, wait := range []bool{false, true} {
		b.Run(fmt.Sprintf("wait_for_served=%v", wait), func(b *testing.B) { benchmarkRoutes(b, n, wait) })
	}
}

func benchmarkRoutes(b *testing.B, n int, waitForServed bool) {
	cp := testenv.Get(b)
	ctx := context.Background()
	ws, err := tfcli.New(ctx, tfcli.Options{Dir: b.TempDir(), Env: []string{"KUBE_CONFIG_PATH=" + cp.Kubeconfig}})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("CLI: %s, %d routes, wait_for_served = %v", ws.CLI, n, waitForServed)

	// The operations timed and counted, in order.
	const (
		opPlan = iota
		opApply
		opNoop
		opDestroy
		nOps
	)
	names := [nOps]string{"plan", "apply", "noop-plan", "destroy"}
	var secs, reqs [nOps]float64
	var noopWrites, noopDry float64
	for i := 0; i < b.N; i++ {
		ns := cp.Namespace(b)
		class := "bench-" + rand.String(6)
		gc := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gwruntime.ControllerName}}
		if _, err := cp.Gateway.GatewayV1().GatewayClasses().Create(ctx, gc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cp.Gateway.GatewayV1().GatewayClasses().Delete(ctx, class, metav1.DeleteOptions{}) })
		gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: ns}, Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(class),
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}},
		}}
		if _, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := ws.WriteFile("main.tf", tfcli.RequiredProviders+fmt.Sprintf(`
provider "varnishgw" {}

resource "varnishgw_http_route" "r" {
  count           = %d
  namespace       = %q
  name            = "r${count.index}"
  hostnames       = ["r${count.index}.example.com"]
  wait_for_served = %v
  parent_ref {
    name = "gw"
  }
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, n, ns, waitForServed)); err != nil {
			b.Fatal(err)
		}

		// measure times op and counts its requests.
		measure := func(op int, run func() error) requestCounts {
			before, err := apiRequests(ctx, cp)
			if err != nil {
				b.Fatal(err)
			}
			load := loadAverage()
			cliCPU := childrenCPU()
			start := time.Now()
			if err := run(); err != nil {
				b.Fatalf("%s: %v", names[op], err)
			}
			el := time.Since(start).Seconds()
			cliCPU = childrenCPU() - cliCPU
			secs[op] += el
			after, err := apiRequests(ctx, cp)
			if err != nil {
				b.Fatal(err)
			}
			d := after.diff(before)
			reqs[op] += d.total()
			if i == 0 {
				b.Logf("%s: %.1f s (load average %s at the start); CPU: %.1f s of the CLI and provider, %.1f s of kube-apiserver; "+
					"requests: %.0f, per route: %s", names[op], el, load, cliCPU, d[apiserverCPU], d.total(), d.perRoute(n))
			}
			return d
		}
		measure(opPlan, func() error {
			if changed, err := ws.Plan(ctx); err != nil || !changed {
				return fmt.Errorf("changes %v, err %v; want changes", changed, err)
			}
			return nil
		})
		measure(opApply, func() error { return ws.Apply(ctx) })
		d := measure(opNoop, func() error {
			if changed, err := ws.Plan(ctx); err != nil || changed {
				return fmt.Errorf("changes %v, err %v; want no changes", changed, err)
			}
			return nil
		})
		w, what := d.writes()
		if w != 0 {
			b.Errorf("the no-change plan wrote to the API server: %s", strings.Join(what, ", "))
		}
		for k, v := range d {
			if strings.HasPrefix(k, "dry-run ") {
				noopDry += v
			}
		}
		noopWrites += w
		measure(opDestroy, func() error { return ws.Destroy(ctx) })
	}
	N := float64(b.N)
	b.ReportMetric(0, "ns/op")
	for op := range nOps {
		b.ReportMetric(secs[op]/N, names[op]+"-s")
		b.ReportMetric(reqs[op]/N/float64(n), names[op]+"-requests/route")
	}
	b.ReportMetric(noopDry/N, "noop-plan-dry-runs")
	b.ReportMetric(noopWrites/N, "noop-plan-writes")
}

func TestRequestCountsWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		diff  requestCounts
		want  float64
		total float64
	}{
		{"reads only", requestCounts{"GET /configmaps": 3, "LIST /services": 1}, 0, 4},
		{"dry runs are not writes", requestCounts{"dry-run APPLY gateway.networking.k8s.io/httproutes": 2, "GET /services": 1}, 0, 3},
		{"writes", requestCounts{"APPLY /configmaps": 1, "PATCH gateway.networking.k8s.io/httproutes/status": 1, "DELETE /configmaps": 2}, 4, 4},
		{"lease heartbeats are not the provider's", requestCounts{"PUT coordination.k8s.io/leases": 5, "GET coordination.k8s.io/leases": 5}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, what := tc.diff.writes(); got != tc.want {
				t.Errorf("writes() = %v (%v), want %v", got, what, tc.want)
			}
			if got := tc.diff.total(); got != tc.total {
				t.Errorf("total() = %v, want %v", got, tc.total)
			}
		})
	}
	before := requestCounts{"GET /configmaps": 3, "APPLY /configmaps": 1}
	after := requestCounts{"GET /configmaps": 5, "APPLY /configmaps": 1, "POST /namespaces": 1}
	if d := after.diff(before); d.String() != "GET /configmaps=2, POST /namespaces=1" {
		t.Errorf("diff = %s", d)
	}
}
