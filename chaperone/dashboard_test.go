package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// dashboardPath is the Grafana dashboard in the repository.
const dashboardPath = "../docs/grafana/varnishgw.json"

// TestGrafanaDashboardQueriesExportedMetrics parses every PromQL query of
// the Grafana dashboard and checks that each metric it names is one the
// chaperone exports: the names come from the /metrics of a chaperone
// binary run as the pod runs it (--routing=kubernetes, the default
// --stats-exclude) against the test API server, with a real varnishd and
// ghost serving traffic.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	queries := dashboardQueries(t)
	if len(queries) < 20 {
		t.Fatalf("%d queries in %s, want the dashboard's panels", len(queries), dashboardPath)
	}
	exported := kubeChaperoneMetrics(t)

	used := map[string]bool{}
	for _, q := range queries {
		// Grafana's variables, as Grafana substitutes them.
		expr := strings.NewReplacer("$__rate_interval", "5m", "$pod", ".*").Replace(q.expr)
		ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
		if err != nil {
			t.Errorf("panel %q: %q does not parse: %v", q.panel, q.expr, err)
			continue
		}
		names := 0
		parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			names++
			used[name] = true
			if !exported[name] {
				t.Errorf("panel %q queries %s, which the chaperone does not export: %s", q.panel, name, q.expr)
			}
			return nil
		})
		if names == 0 {
			t.Errorf("panel %q: %q names no metric", q.panel, q.expr)
		}
	}
	t.Logf("%d queries name %d metrics, all exported: %v", len(queries), len(used), slices.Sorted(func(yield func(string) bool) {
		for k := range used {
			if !yield(k) {
				return
			}
		}
	}))
}

type dashboardQuery struct{ panel, expr string }

// dashboardQueries returns the expr of every target of every panel (rows'
// panels included).
func dashboardQueries(t *testing.T) []dashboardQuery {
	data, err := os.ReadFile(dashboardPath)
	must(t, err)
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []dashboardQuery
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", dashboardPath, err)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q has a target without expr", p.Title)
					continue
				}
				out = append(out, dashboardQuery{p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	return out
}

// kubeChaperoneMetrics runs the chaperone binary with --routing=kubernetes
// against the shared test API server, sends traffic through it, and
// returns the metric names of its /metrics (with a histogram's _bucket,
// _sum and _count).
func kubeChaperoneMetrics(t *testing.T) map[string]bool {
	cp := testenv.Get(t)
	ctx := context.Background()
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
	ip, port := hostBackend(t, varnishdtest.HostIP(t), "K")
	_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--vcl=", "--kubeconfig="+kubeconfig)
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	c.wantTraffic("K", "cm")
	var fams map[string]*dto.MetricFamily
	c.WaitFor("varnishd's and ghost's counters of the traffic", 30*time.Second, func() bool {
		c.get()
		fams, err = scrape("http://" + c.HealthAddr + "/metrics")
		return err == nil && fams["varnish_ghost_requests_total"] != nil && fams["varnish_main_client_req"] != nil
	})
	names := map[string]bool{}
	for name, f := range fams {
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		}
	}
	return names
}
