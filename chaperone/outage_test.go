package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// TestAPIServerOutage runs the chaperone binary as the pod does
// (--routing=kubernetes) against a control plane of its own, then stops
// kube-apiserver (an orderly shutdown) and later starts it again, then
// kills it (a crash) and starts it again. Throughout: every request is
// served, /readyz stays 200. Each outage is logged once per watched
// resource at WARN, however long the informers retry, and once at INFO
// when it is over; the sync age grows during the outage and is 0 after;
// afterwards a routing change is served (the watches really came back).
func TestAPIServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane of its own; skipped with -short")
	}
	ctx := context.Background()
	cp, err := testenv.Start(ctx, testenv.Options{})
	must(t, err)
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "edge"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)

	listen := varnishdtest.FreeAddr(t)
	dir := varnishdtest.Dir(t)
	gw, frag := kubeGateway(t, ns, varnishdtest.Port(t, listen))
	_, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)
	_, err = fragmentClient(t, cp, ns).Create(ctx, frag, metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, providerVCL(t, cp, gw, mainVCL(filepath.Join(dir, "ghost.json"), "cm")), metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().Services(ns).Create(ctx, appService(ns, "app"), metav1.CreateOptions{})
	must(t, err)
	hostIP := varnishdtest.HostIP(t)
	ip, port := hostBackend(t, hostIP, "K")
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}
	slice, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
	must(t, err)

	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--vcl=", "--kubeconfig="+kubeconfig)
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	c.wantTraffic("K", "cm")
	const age, broken = "varnishgw_chaperone_kube_api_sync_age_seconds", "varnishgw_chaperone_kube_api_broken_watches"
	c.WaitFor("in sync", 30*time.Second, func() bool { return c.metric(age) == 0 && c.metric(broken) == 0 })

	// Traffic and readiness, checked every 100 ms while the API server
	// is away (and until a routing change after it is back).
	var requests, failures atomic.Int64
	var mu sync.Mutex
	var problems []string
	checkTraffic := func() (stop func()) {
		quit, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-quit:
					return
				case <-time.After(100 * time.Millisecond):
				}
				requests.Add(1)
				code, body, _ := c.get()
				ready, _ := c.Health("/readyz")
				if code != 200 || body != "K" || ready != 200 {
					failures.Add(1)
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s: %d %q, /readyz %d", time.Now().Format("15:04:05.000"), code, body, ready))
					mu.Unlock()
				}
			}
		}()
		return func() { close(quit); <-done }
	}

	records := func(msg string) []map[string]any {
		var out []map[string]any
		for _, line := range strings.Split(c.Out.String(), "\n") {
			if !strings.Contains(line, msg) {
				continue
			}
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil {
				out = append(out, rec)
			}
		}
		return out
	}
	const brokeMsg, backMsg = "Kubernetes API: watch broken", "Kubernetes API: watch recovered"

	for i, outage := range []struct {
		name string
		stop func()
	}{{"stopped", cp.StopAPIServer}, {"killed", cp.KillAPIServer}} {
		brokeBefore, backBefore := len(records(brokeMsg)), len(records(backMsg))
		stopChecking := checkTraffic()
		outage.stop()
		c.WaitFor("a broken watch logged", 60*time.Second, func() bool { return len(records(brokeMsg)) > brokeBefore })
		a1 := c.metric(age)
		time.Sleep(6 * time.Second) // the informers retry meanwhile
		a2 := c.metric(age)
		if a2 < a1+4 || c.metric(broken) < 1 {
			t.Errorf("API server %s: sync age %v then %v 6 s later, %v broken watches; want it growing, 1 or more broken", outage.name, a1, a2, c.metric(broken))
		}
		breaks := records(brokeMsg)[brokeBefore:]
		seen := map[string]bool{}
		for _, rec := range breaks {
			key := fmt.Sprint(rec["resource"], rec["namespace"], rec["name"], rec["labelSelector"], rec["fieldSelector"])
			if seen[key] {
				t.Errorf("API server %s: the break of %s logged more than once", outage.name, key)
			}
			seen[key] = true
			if rec["level"] != "WARN" || rec["error"] == nil || rec["resource"] == nil {
				t.Errorf("API server %s: break record %v, want WARN naming the resource and the error", outage.name, rec)
			}
		}
		t.Logf("API server %s: %d watches broken: %v", outage.name, len(breaks), seen)

		must(t, cp.StartAPIServer(ctx))
		c.WaitFor("in sync again", 120*time.Second, func() bool { return c.metric(age) == 0 && c.metric(broken) == 0 })
		// Count the breaks again: a watch that retried late (a loaded
		// machine) logs its break after the count above.
		breaks = records(brokeMsg)[brokeBefore:]
		backs := records(backMsg)[backBefore:]
		if len(backs) != len(breaks) {
			t.Errorf("API server %s: %d recovery records for %d breaks", outage.name, len(backs), len(breaks))
		}
		for _, rec := range backs {
			if rec["level"] != "INFO" || rec["after"] == nil {
				t.Errorf("API server %s: recovery record %v, want INFO with how long it lasted", outage.name, rec)
			}
		}

		// The watches work again: a new endpoint is routed.
		body := fmt.Sprintf("L%d", i)
		ip2, port2 := hostBackend(t, hostIP, body)
		cur, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, slice.Name, metav1.GetOptions{})
		must(t, err)
		cur.Ports[0].Port = ptr(port2)
		cur.Endpoints[0].Addresses = []string{ip2}
		_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, cur, metav1.UpdateOptions{})
		must(t, err)
		stopChecking()
		c.wantTraffic(body, "cm")
		// Back to the first backend for the traffic check of the next round.
		cur, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, slice.Name, metav1.GetOptions{})
		must(t, err)
		cur.Ports[0].Port = ptr(port)
		cur.Endpoints[0].Addresses = []string{ip}
		_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, cur, metav1.UpdateOptions{})
		must(t, err)
		c.wantTraffic("K", "cm")
	}
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of %d requests failed or found /readyz not 200 during the outages: %v", n, requests.Load(), problems)
	}
	t.Logf("%d requests during the outages, all 200 with /readyz 200", requests.Load())
	if strings.Contains(c.Out.String(), "reflector.go") && !strings.Contains(c.Out.String(), `"component":"client-go"`) {
		t.Error("client-go's own messages are not JSON records")
	}
}
