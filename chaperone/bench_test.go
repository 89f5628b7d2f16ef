package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// BenchmarkIdleRSS reports the resident memory of an idle chaperone (not
// varnishd) in supervise mode: ready, routing loaded, /metrics scraped every
// second for 10 seconds. One iteration is one chaperone; the figure is the
// peak RSS (VmHWM) and the RSS at the end (VmRSS).
func BenchmarkIdleRSS(b *testing.B) {
	for b.Loop() {
		c := startChaperone(b, chaperonetest.Backend(b, "A"))
		for i := 0; i < 10; i++ {
			c.Health("/metrics")
			time.Sleep(time.Second)
		}
		b.ReportMetric(procStatusKB(b, c.Cmd.Process.Pid, "VmRSS"), "rss-kB")
		b.ReportMetric(procStatusKB(b, c.Cmd.Process.Pid, "VmHWM"), "peak-rss-kB")
	}
}

func procStatusKB(b *testing.B, pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// BenchmarkKubeRSS reports the resident memory of the chaperone binary
// (not varnishd) run as in the pod (--routing=kubernetes --vcl=) against
// the test API server, for one Gateway with 1,000 HTTPRoutes
// (RoutingFragments), each to its own Service with one EndpointSlice of 10 ready
// endpoints: 1,000 referenced Services, 10,000 endpoints. The figures are
// read from /proc/PID/status once ghost has loaded all of them and
// /metrics has been scraped: VmRSS then (rss-kB) and the peak VmHWM
// (peak-rss-kB). No request goes to the endpoints (documentation
// addresses). Sub-benchmark default runs with the default --stats-exclude
// (VBE.*), all-counters with --stats-exclude= (every varnishstat counter,
// 10,000 dynamic backends' included, read and served).
func BenchmarkKubeRSS(b *testing.B) {
	b.Run("default", func(b *testing.B) { benchKubeRSS(b) })
	b.Run("all-counters", func(b *testing.B) { benchKubeRSS(b, "--stats-exclude=") })
}

func benchKubeRSS(b *testing.B, extra ...string) {
	const services, perSlice = 1000, 10
	for b.Loop() {
		cp := testenv.Get(b)
		ctx := context.Background()
		ns := cp.Namespace(b)
		cp.GrantRole(b, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "edge"}))
		cp.GrantRole(b, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
		kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
		must(b, err)
		listen := varnishdtest.FreeAddr(b)
		dir := varnishdtest.Dir(b)
		ghostPath := filepath.Join(dir, "ghost.json")
		gw, _ := kubeGateway(b, ns, varnishdtest.Port(b, listen))
		gw, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
		must(b, err)
		_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, providerVCL(b, cp, gw, mainVCL(ghostPath, "bench")), metav1.CreateOptions{})
		must(b, err)

		frags := fragmentClient(b, cp, ns)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, services)
		work := make(chan int)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					errs <- createBackend(b, cp.Client, frags, gw, i, perSlice)
				}
			}()
		}
		for i := range services {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			must(b, err)
		}
		b.Logf("created %d Services, EndpointSlices and RoutingFragments in %s", services, time.Since(start).Round(time.Millisecond))

		loaded := time.Now()
		c := startChaperoneIn(b, dir, chaperonetest.Backend(b, "file"), listen, append([]string{
			"--routing=kubernetes", "--gateway=" + ns + "/edge", "--vcl=", "--kubeconfig=" + kubeconfig, "--log-level=info"}, extra...)...)
		c.WaitFor("all endpoints loaded", 5*time.Minute, func() bool {
			_, body := c.Health("/metrics")
			n := 0
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "varnishgw_routing_backend_endpoints{") && strings.HasSuffix(line, " "+strconv.Itoa(perSlice)) {
					n++
				}
			}
			return n == services
		})
		b.Logf("ready and %d backends loaded %s after start", services, time.Since(loaded).Round(time.Millisecond))
		for range 5 {
			c.Health("/metrics")
			time.Sleep(time.Second)
		}
		b.ReportMetric(procStatusKB(b, c.Cmd.Process.Pid, "VmRSS"), "rss-kB")
		b.ReportMetric(procStatusKB(b, c.Cmd.Process.Pid, "VmHWM"), "peak-rss-kB")
		_, metrics := c.Health("/metrics")
		stat, _ := exec.Command(varnishdtest.StatBin(b), "-j", "-n", filepath.Join(dir, "work")).Output()
		b.Logf("/metrics: %d bytes, %d lines; varnishstat -j: %d bytes", len(metrics), strings.Count(metrics, "\n"), len(stat))
		varnishdtest.KillTree(c.Cmd.Process.Pid)
	}
}

// createBackend creates Service svc-I with one EndpointSlice of n ready
// endpoints on documentation addresses, and the RoutingFragment of an
// HTTPRoute hI.example.com → svc-I:80.
func createBackend(b *testing.B, c kubernetes.Interface, frags dynamic.ResourceInterface, gw *gatewayv1.Gateway, i, n int) error {
	ctx := context.Background()
	ns := gw.Namespace
	name := fmt.Sprintf("svc-%04d", i)
	svc := appService(ns, name)
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(10000 + i)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for j := range n {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("192.0.2.%d", j+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
		})
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return err
	}
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r-%04d", i), CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(gw.Name)}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(fmt.Sprintf("h%04d.example.com", i))},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: ptr(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}
	_, err := frags.Create(ctx, fragmentObject(b, gw, route, svc), metav1.CreateOptions{})
	return err
}
