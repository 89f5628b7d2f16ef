package routingsync

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnishd/varnishdtest"
)

func testGateway(ns string) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{{
			Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}},
		}}},
	}
}

func testRoute(ns, name, host, svcNS, svc string) *gatewayv1.HTTPRoute {
	ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(svc), Port: ptr.To(gatewayv1.PortNumber(80)),
	}}}
	if svcNS != ns {
		ref.Namespace = ptr.To(gatewayv1.Namespace(svcNS))
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0))},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{ref}}},
		},
	}
}

// fragmentConfigMap attaches route to gw the way the provider does and
// returns the ConfigMap the provider writes.
func fragmentConfigMap(t testing.TB, gw *gatewayv1.Gateway, route *gatewayv1.HTTPRoute, objs *routing.Objects) *corev1.ConfigMap {
	t.Helper()
	f, err := routing.Attach(gw, route, objs)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Accepted() {
		t.Fatalf("route not accepted: %+v", f.Parents)
	}
	data, err := routing.MarshalFragment(f)
	if err != nil {
		t.Fatal(err)
	}
	gwRef := routing.ObjectRef{Namespace: gw.Namespace, Name: gw.Name}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: gw.Namespace,
			Name:      routing.FragmentConfigMapName(gwRef, routing.ObjectRef{Namespace: route.Namespace, Name: route.Name}),
			Labels:    routing.FragmentLabels(gwRef),
		},
		Data: map[string]string{routing.FragmentDataKey: string(data)},
	}
}

func service(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

// endpointSlice is a slice of Service svc with one endpoint, b.
func endpointSlice(ns, name, svc string, b backend, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(b.Port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{b.IP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
		}},
	}
}

// TestKubeTrafficMoves runs the Syncer as a real ServiceAccount against the
// test API server and a real varnishd with ghost, and checks that traffic
// follows fragments, EndpointSlices and ReferenceGrants.
func TestKubeTrafficMoves(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns, other := cp.Namespace(t), cp.Namespace(t)
	g := startGhost(t)
	be := backends(t, varnishdtest.HostIP(t), "be1", "be2", "shared")

	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", routing.GatewayRules(routing.ObjectRef{Namespace: ns, Name: "gw"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", routing.BackendRules())
	cp.GrantRole(t, other, "chaperone-backends", ns, "chaperone", routing.BackendRules())
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}

	gw, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, testGateway(ns), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().Services(ns).Create(ctx, service(ns, "app"), metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, endpointSlice(ns, "app-1", "app", be["be1"], true), metav1.CreateOptions{})
		return err
	})
	// An unreferenced Service with an EndpointSlice: it must never be
	// cached.
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().Services(ns).Create(ctx, service(ns, "unrelated"), metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, endpointSlice(ns, "unrelated-1", "unrelated", be["be2"], true), metav1.CreateOptions{})
		return err
	})

	src, err := NewKubeSource(KubeConfig{
		Client: kubernetes.NewForConfigOrDie(cfg), Gateway: gatewayclient.NewForConfigOrDie(cfg),
		Namespace: ns, Name: "gw", Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The wiring of chaperone/main.go: results feed the metrics and the
	// Programmed condition.
	var res results
	metrics := NewMetrics()
	status := gatewaystatus.NewWriter(gatewayclient.NewForConfigOrDie(cfg), ns, "gw", testLogger(t))
	sctx, stopStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() { status.Run(sctx); close(statusDone) }()
	t.Cleanup(func() { stopStatus(); <-statusDone })
	s, err := New(Config{
		Source: src, Path: g.GhostJSON, Logger: testLogger(t),
		Reloader: NewReloader(ReloaderConfig{Addr: g.AdminAddr}),
		OnResult: func(r Result) {
			res.add(r)
			metrics.Observe(r)
			if r.Gateway != nil {
				status.Set(gatewaystatus.ForError(r.Gateway.Generation, r.Err, r.Outcome == OutcomeError))
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	programmed := func(want metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		eventually(t, 60*time.Second, "Programmed="+string(want), func() error {
			got, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == "Programmed" {
					if c.Status != want || c.Reason != reason || !strings.Contains(c.Message, msg) || c.ObservedGeneration != got.Generation {
						return fmt.Errorf("Programmed = %+v", c)
					}
					return nil
				}
			}
			return fmt.Errorf("no Programmed condition: %+v", got.Status.Conditions)
		})
	}

	// No fragment yet: an empty routing table is loaded; nothing routed.
	eventually(t, 60*time.Second, "first load", func() error {
		if !s.Loaded() {
			return errNotYet
		}
		return nil
	})
	answers(t, g.HTTPAddr, "a.example.com", 404)

	// Fragment ConfigMap created → host routed.
	objs := &routing.Objects{Services: []*corev1.Service{service(ns, "app"), service(other, "shared")}}
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, fragmentConfigMap(t, gw, testRoute(ns, "a", "a.example.com", ns, "app"), objs), metav1.CreateOptions{})
		return err
	})
	servedBy(t, g.HTTPAddr, "a.example.com", "be1")
	programmed(metav1.ConditionTrue, "Programmed", "")
	res.waitFor(t, "endpoint count reported", func(r Result) bool {
		return r.Outcome == OutcomeReloaded && r.Endpoints[ns+"/app:80"] == 1
	})

	// Endpoint added → it gets traffic.
	mustCreate(t, func() error {
		_, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, endpointSlice(ns, "app-2", "app", be["be2"], true), metav1.CreateOptions{})
		return err
	})
	servedBy(t, g.HTTPAddr, "a.example.com", "be1", "be2")

	// Endpoint not ready → no traffic.
	mustCreate(t, func() error {
		_, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, endpointSlice(ns, "app-1", "app", be["be1"], false), metav1.UpdateOptions{})
		return err
	})
	servedBy(t, g.HTTPAddr, "a.example.com", "be2")

	// Cross-namespace share allowed by a ReferenceGrant in the backend
	// namespace; a new namespace enters the watched set.
	grant := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "allow"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(ns)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
	mustCreate(t, func() error {
		_, err := cp.Gateway.GatewayV1().ReferenceGrants(other).Create(ctx, grant, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().Services(other).Create(ctx, service(other, "shared"), metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cp.Client.DiscoveryV1().EndpointSlices(other).Create(ctx, endpointSlice(other, "shared-1", "shared", be["shared"], true), metav1.CreateOptions{})
		return err
	})
	objs.ReferenceGrants = []*gatewayv1.ReferenceGrant{grant}
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, fragmentConfigMap(t, gw, testRoute(ns, "b", "b.example.com", other, "shared"), objs), metav1.CreateOptions{})
		return err
	})
	servedBy(t, g.HTTPAddr, "b.example.com", "shared")

	// Only the EndpointSlices of referenced Services are cached.
	if n := src.cachedEndpointSlices(); n != 3 {
		t.Errorf("%d EndpointSlices cached, want 3 (of app and shared, none of unrelated)", n)
	}

	// ReferenceGrant deleted → the cross-namespace share answers 500,
	// without a new fragment.
	if err := cp.Gateway.GatewayV1().ReferenceGrants(other).Delete(ctx, "allow", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	answers(t, g.HTTPAddr, "b.example.com", 500)
	servedBy(t, g.HTTPAddr, "a.example.com", "be2")

	// Invalid fragment → the previous routing keeps serving, the error is
	// reported.
	bad := fragmentConfigMap(t, gw, testRoute(ns, "c", "c.example.com", ns, "app"), objs)
	bad.Data[routing.FragmentDataKey] = `{"version": 1, "gateway": {"namespace": "x"}, "bogus": true}`
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, bad, metav1.CreateOptions{})
		return err
	})
	r := res.waitFor(t, "invalid fragment reported", func(r Result) bool { return r.Outcome == OutcomeInvalid })
	if !strings.Contains(r.Err.Error(), bad.Name) {
		t.Errorf("error %q does not name the ConfigMap %s", r.Err, bad.Name)
	}
	servedBy(t, g.HTTPAddr, "a.example.com", "be2")
	if !s.Loaded() {
		t.Error("Loaded() false after an invalid fragment")
	}
	programmed(metav1.ConditionFalse, "Invalid", bad.Name)
	if v := testutil.ToFloat64(metrics.syncs.WithLabelValues("invalid")); v < 1 {
		t.Errorf("invalid syncs counted: %v", v)
	}
	if v := testutil.ToFloat64(metrics.endpoints.WithLabelValues(ns + "/app:80")); v != 1 {
		t.Errorf("endpoints of app: %v, want 1", v)
	}

	// Resync forces a reload (the child restarted) even when unchanged;
	// with the invalid fragment still there it reports the error.
	if err := s.Resync(ctx); err == nil {
		t.Error("Resync with an invalid fragment: no error")
	}
	if err := cp.Client.CoreV1().ConfigMaps(ns).Delete(ctx, bad.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "Resync after the fix", func() error { return s.Resync(ctx) })
	programmed(metav1.ConditionTrue, "Programmed", "")
}

var errNotYet = stringErr("not yet")

type stringErr string

func (e stringErr) Error() string { return string(e) }

func mustCreate(t testing.TB, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// TestKubeUnreadableNamespace references a Service in a namespace where
// the chaperone has no RBAC: after PendingTimeout the routing is built
// without it (its share answers 500) and the other routes are served.
func TestKubeUnreadableNamespace(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns, forbidden := cp.Namespace(t), cp.Namespace(t)
	g := startGhost(t)
	be := backends(t, varnishdtest.HostIP(t), "be1")
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", routing.GatewayRules(routing.ObjectRef{Namespace: ns, Name: "gw"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", routing.BackendRules())
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, testGateway(ns), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, func() error {
		_, err := cp.Client.CoreV1().Services(ns).Create(ctx, service(ns, "app"), metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, endpointSlice(ns, "app-1", "app", be["be1"], true), metav1.CreateOptions{})
		return err
	})
	grant := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: forbidden, Name: "allow"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(ns)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
	objs := &routing.Objects{Services: []*corev1.Service{service(ns, "app"), service(forbidden, "x")}, ReferenceGrants: []*gatewayv1.ReferenceGrant{grant}}
	for _, cm := range []*corev1.ConfigMap{
		fragmentConfigMap(t, gw, testRoute(ns, "a", "a.example.com", ns, "app"), objs),
		fragmentConfigMap(t, gw, testRoute(ns, "b", "b.example.com", forbidden, "x"), objs),
	} {
		mustCreate(t, func() error {
			_, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
	}
	src, err := NewKubeSource(KubeConfig{
		Client: kubernetes.NewForConfigOrDie(cfg), Gateway: gatewayclient.NewForConfigOrDie(cfg),
		Namespace: ns, Name: "gw", Logger: testLogger(t), PendingTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Source: src, Path: g.GhostJSON, Logger: testLogger(t), Reloader: NewReloader(ReloaderConfig{Addr: g.AdminAddr})})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	servedBy(t, g.HTTPAddr, "a.example.com", "be1")
	answers(t, g.HTTPAddr, "b.example.com", 500)
}
