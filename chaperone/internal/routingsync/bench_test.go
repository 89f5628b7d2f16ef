package routingsync

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// benchState is one Gateway with 1,000 HTTPRoutes (one hostname each), each
// to its own Service with 10 ready endpoints: 1,000 Services, 10,000
// endpoints.
func benchState(b *testing.B) *State {
	gw := testGateway("ns")
	st := &State{Gateway: gw, Objects: &routing.Objects{}}
	for i := range 1000 {
		svc := service("ns", fmt.Sprintf("svc-%04d", i))
		f, err := routing.Attach(gw, testRoute("ns", fmt.Sprintf("r-%04d", i), fmt.Sprintf("h%04d.example.com", i), "ns", svc.Name),
			&routing.Objects{Services: []*corev1.Service{svc}})
		if err != nil {
			b.Fatal(err)
		}
		es := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc.Name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
		}
		for j := range 10 {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j+1)}})
		}
		st.Fragments = append(st.Fragments, f)
		st.Objects.Services = append(st.Objects.Services, svc)
		st.Objects.EndpointSlices = append(st.Objects.EndpointSlices, es)
	}
	return st
}

// BenchmarkBuildWrite measures what the Syncer does per change before the
// reload: Merge, Resolve, and streaming the document (ghostjson.Encode)
// into a hashed temporary file moved into place.
func BenchmarkBuildWrite(b *testing.B) {
	st := benchState(b)
	path := filepath.Join(b.TempDir(), "ghost.json")
	b.ReportAllocs()
	for b.Loop() {
		_, doc, err := Build(st)
		if err != nil {
			b.Fatal(err)
		}
		tmp, _, err := writeTemp(path, func(w io.Writer) error { return ghostjson.Encode(w, doc) })
		if err != nil {
			b.Fatal(err)
		}
		if err := commitTemp(tmp, path); err != nil {
			b.Fatal(err)
		}
	}
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size()), "file-bytes")
	}
}

// BenchmarkEndpointUpdateToTraffic measures, over 100 updates, the time from
// an EndpointSlice update in the API server to the first request that the
// new endpoint serves through varnishd and ghost. The ns/op figure is not
// meaningful; see the p50-ms and p99-ms metrics.
func BenchmarkEndpointUpdateToTraffic(b *testing.B) {
	cp := testenv.Get(b)
	ctx := context.Background()
	ns := cp.Namespace(b)
	g := startGhost(b)
	be := backends(b, varnishdtest.HostIP(b), "A", "B")
	cp.GrantRole(b, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "gw"}))
	cp.GrantRole(b, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		b.Fatal(err)
	}
	gw, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, testGateway(ns), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, service(ns, "app"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	slices := cp.Client.DiscoveryV1().EndpointSlices(ns)
	if _, err := slices.Create(ctx, endpointSlice(ns, "app-1", "app", be["A"], true), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	objs := &routing.Objects{Services: []*corev1.Service{service(ns, "app")}}
	putFragment(b, fragments(b, cp, ns), fragmentObject(b, gw, testRoute(ns, "a", "a.example.com", ns, "app"), objs))
	src := kubeSource(b, cfg, ns, 0)
	s, err := New(Config{Source: src, Path: g.GhostJSON, Reloader: ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: g.AdminAddr}),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	runSyncer(b, s)
	servedBy(b, g.HTTPAddr, "a.example.com", "A")

	b.ResetTimer()
	var lat []time.Duration
	for b.Loop() {
		lat = lat[:0]
		cur := "A"
		for range 100 {
			next := map[string]string{"A": "B", "B": "A"}[cur]
			start := time.Now()
			if _, err := slices.Update(ctx, endpointSlice(ns, "app-1", "app", be[next], true), metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			for {
				code, body, err := get(g.HTTPAddr, "a.example.com")
				if err == nil && code == 200 && body == next {
					break
				}
				if time.Since(start) > 60*time.Second {
					b.Fatalf("%s not served within 60s: %d %q %v", next, code, body, err)
				}
				time.Sleep(time.Millisecond)
			}
			lat = append(lat, time.Since(start))
			cur = next
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}
