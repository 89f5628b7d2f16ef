package routingsync

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/ghostadmin"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
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

// fragmentObject attaches route to gw the way the provider does and
// returns the RoutingFragment the provider writes.
func fragmentObject(t testing.TB, gw *gatewayv1.Gateway, route *gatewayv1.HTTPRoute, objs *routing.Objects) *unstructured.Unstructured {
	t.Helper()
	f, err := routing.Attach(gw, route, objs)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Accepted() {
		t.Fatalf("route not accepted: %+v", f.Parents)
	}
	obj, err := routingfragment.New(f)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// fragments installs the varnishgw.dev CRDs and returns an admin client of
// the namespace's RoutingFragments.
func fragments(t testing.TB, cp *testenv.ControlPlane, ns string) dynamic.ResourceInterface {
	t.Helper()
	if err := vgwapi.EnsureCRDs(context.Background(), apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(cp.Config).Resource(vgwapi.RoutingFragments).Namespace(ns)
}

// putFragment creates or replaces a RoutingFragment and returns it as stored.
func putFragment(t testing.TB, frags dynamic.ResourceInterface, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := frags.Apply(context.Background(), obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "test", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// kubeSource is a KubeSource acting as the ServiceAccount of cfg.
func kubeSource(t testing.TB, cfg *rest.Config, ns string, pending time.Duration) *KubeSource {
	t.Helper()
	src, err := NewKubeSource(KubeConfig{
		Client: kubernetes.NewForConfigOrDie(cfg), Gateway: gatewayclient.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg),
		Namespace: ns, Name: "gw", Logger: testLogger(t), PendingTimeout: pending,
	})
	if err != nil {
		t.Fatal(err)
	}
	return src
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

	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "gw"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cp.GrantRole(t, other, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
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

	frags := fragments(t, cp, ns)
	src := kubeSource(t, cfg, ns, 0)
	// The wiring of Agent: results feed the metrics and the Programmed
	// condition.
	var res results
	metrics := NewMetrics()
	status := gatewaystatus.NewWriter(gatewayclient.NewForConfigOrDie(cfg), ns, "gw", testLogger(t))
	sctx, stopStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() { status.Run(sctx); close(statusDone) }()
	t.Cleanup(func() { stopStatus(); <-statusDone })
	s, err := New(Config{
		Source: src, Path: g.GhostJSON, Logger: testLogger(t),
		Reloader: ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: g.AdminAddr}),
		OnResult: func(r Result) {
			res.add(r)
			metrics.Observe(r)
			if r.Gateway != nil {
				status.Set(programmed(routingState{r.Gateway.Generation, r.Err, r.Outcome == OutcomeError, r.Rejected}, nil))
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	// programmedMessage waits for the Gateway's Programmed condition to
	// have status want, reason and a message that msgOK accepts, for the
	// Gateway's generation; programmed accepts a message containing msg.
	programmedMessage := func(want metav1.ConditionStatus, reason string, msgOK func(string) bool) {
		t.Helper()
		eventually(t, 60*time.Second, "Programmed="+string(want), func() error {
			got, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == "Programmed" {
					if c.Status != want || c.Reason != reason || !msgOK(c.Message) || c.ObservedGeneration != got.Generation {
						return fmt.Errorf("Programmed = %+v", c)
					}
					return nil
				}
			}
			return fmt.Errorf("no Programmed condition: %+v", got.Status.Conditions)
		})
	}
	programmed := func(want metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		programmedMessage(want, reason, func(m string) bool { return strings.Contains(m, msg) })
	}

	// No fragment yet: an empty routing table is loaded; nothing routed.
	eventually(t, 60*time.Second, "first load", func() error {
		if !s.Loaded() {
			return errNotYet
		}
		return nil
	})
	answers(t, g.HTTPAddr, "a.example.com", 404)

	// RoutingFragment created → host routed.
	objs := &routing.Objects{Services: []*corev1.Service{service(ns, "app"), service(other, "shared")}}
	goodA := putFragment(t, frags, fragmentObject(t, gw, testRoute(ns, "a", "a.example.com", ns, "app"), objs))
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
	putFragment(t, frags, fragmentObject(t, gw, testRoute(ns, "b", "b.example.com", other, "shared"), objs))
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

	// A corrupt fragment of a new route is rejected alone: its host is not
	// served, every other route keeps flowing, Programmed stays True and
	// names it.
	bad := fragmentObject(t, gw, testRoute(ns, "c", "c.example.com", ns, "app"), objs)
	if err := unstructured.SetNestedField(bad.Object, true, "spec", "fragment", "bogus"); err != nil {
		t.Fatal(err)
	}
	bad = putFragment(t, frags, bad)
	r := res.waitFor(t, "rejection reported", func(r Result) bool { return len(r.Rejected) == 1 && r.Outcome != OutcomeInvalid })
	if rej := r.Rejected[0]; rej.Name != bad.GetName() || rej.ResourceVersion != bad.GetResourceVersion() || rej.Kept != "" ||
		!strings.Contains(rej.Reason, `unknown field "bogus"`) {
		t.Errorf("rejection %+v, want %s at %s, nothing kept, naming the unknown field", rej, bad.GetName(), bad.GetResourceVersion())
	}
	answers(t, g.HTTPAddr, "c.example.com", 404)
	servedBy(t, g.HTTPAddr, "a.example.com", "be2")
	programmed(metav1.ConditionTrue, "Programmed", bad.GetName())

	// A corrupt update of route a's fragment: route a keeps its last
	// accepted version, and its endpoints still follow the cluster.
	corruptA := goodA.DeepCopy()
	corruptA.SetResourceVersion("")
	corruptA.SetManagedFields(nil)
	if err := unstructured.SetNestedField(corruptA.Object, int64(99), "spec", "fragment", "version"); err != nil {
		t.Fatal(err)
	}
	corruptA = putFragment(t, frags, corruptA)
	r = res.waitFor(t, "second rejection", func(r Result) bool { return len(r.Rejected) == 2 })
	for _, rej := range r.Rejected {
		if rej.Name == corruptA.GetName() && (rej.Kept != goodA.GetResourceVersion() || !strings.Contains(rej.Reason, "version is 99")) {
			t.Errorf("rejection %+v, want the version named and %s kept", rej, goodA.GetResourceVersion())
		}
	}
	if r.FragmentsResourceVersion == "" {
		t.Error("no fragments resource version in the result")
	}
	mustCreate(t, func() error {
		_, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, endpointSlice(ns, "app-1", "app", be["be1"], true), metav1.UpdateOptions{})
		return err
	})
	servedBy(t, g.HTTPAddr, "a.example.com", "be1", "be2")
	if !s.Loaded() {
		t.Error("Loaded() false after rejected fragments")
	}
	// The metric follows the reload that the traffic already shows.
	eventually(t, 10*time.Second, "endpoints of app = 2", func() error {
		if v := testutil.ToFloat64(metrics.endpoints.WithLabelValues(ns + "/app:80")); v != 2 {
			return fmt.Errorf("endpoints of app: %v, want 2", v)
		}
		return nil
	})

	// Fixed: the rejections go, Programmed no longer names them.
	if err := frags.Delete(ctx, bad.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	goodA.SetResourceVersion("")
	goodA.SetManagedFields(nil)
	putFragment(t, frags, goodA)
	res.waitFor(t, "no rejection", func(r Result) bool { return len(r.Rejected) == 0 && r.Outcome == OutcomeUnchanged })
	eventually(t, 60*time.Second, "Resync after the fix", func() error { return s.Resync(ctx) })
	// The message while fragments were rejected starts with the same words:
	// wait for the whole message, which the writer sets after the Resync.
	programmedMessage(metav1.ConditionTrue, "Programmed", func(m string) bool {
		return m == "ghost loaded the routing of this generation"
	})
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
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "gw"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
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
	frags := fragments(t, cp, ns)
	putFragment(t, frags, fragmentObject(t, gw, testRoute(ns, "a", "a.example.com", ns, "app"), objs))
	putFragment(t, frags, fragmentObject(t, gw, testRoute(ns, "b", "b.example.com", forbidden, "x"), objs))
	src := kubeSource(t, cfg, ns, 2*time.Second)
	s, err := New(Config{Source: src, Path: g.GhostJSON, Logger: testLogger(t), Reloader: ghostadmin.NewReloader(ghostadmin.ReloaderConfig{Addr: g.AdminAddr})})
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, s)
	servedBy(t, g.HTTPAddr, "a.example.com", "be1")
	answers(t, g.HTTPAddr, "b.example.com", 500)
}
