package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// hostBackend is an HTTP server on ip answering body.
func hostBackend(t testing.TB, ip, body string) (string, int32) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return ip, int32(l.Addr().(*net.TCPAddr).Port)
}

// kubeGateway is a Gateway with one listener on port, its route's
// RoutingFragment for app.example.com → Service app:80, as the provider
// writes them.
func kubeGateway(t testing.TB, ns string, port int) (*gatewayv1.Gateway, *unstructured.Unstructured) {
	t.Helper()
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "varnishgw",
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
			Hostnames:       []gatewayv1.Hostname{"app.example.com"},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}
	return gw, fragmentObject(t, gw, route, appService(ns, "app"))
}

// fragmentObject is the RoutingFragment the provider writes for route and gw.
func fragmentObject(t testing.TB, gw *gatewayv1.Gateway, route *gatewayv1.HTTPRoute, svcs ...*corev1.Service) *unstructured.Unstructured {
	t.Helper()
	frag, err := routing.Attach(gw, route, &routing.Objects{Services: svcs})
	if err != nil {
		t.Fatal(err)
	}
	if !frag.Accepted() {
		t.Fatalf("route %s not accepted: %+v", route.Name, frag.Parents)
	}
	obj, err := routingfragment.New(frag)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// fragmentClient installs the varnishgw.dev CRDs and returns an admin
// client of the namespace's RoutingFragments.
func fragmentClient(t testing.TB, cp *testenv.ControlPlane, ns string) dynamic.ResourceInterface {
	t.Helper()
	if err := vgwapi.EnsureCRDs(context.Background(), apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(cp.Config).Resource(vgwapi.RoutingFragments).Namespace(ns)
}

func appService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

// providerVCL plays the provider's part in writing main.vcl: it records
// vcl's digest on the Gateway (gwruntime.VCLDigestAnnotation, which the
// pods check) and returns the Gateway's VCL ConfigMap to write, labelled
// like the provider's runtime objects (whose labels include the fragment
// label).
func providerVCL(t testing.TB, cp *testenv.ControlPlane, gw *gatewayv1.Gateway, vcl string) *corev1.ConfigMap {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gwruntime.VCLDigestAnnotation, gwruntime.VCLDigest(vcl))
	if _, err := cp.Gateway.GatewayV1().Gateways(gw.Namespace).Patch(context.Background(), gw.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("record the VCL digest on Gateway %s/%s: %v", gw.Namespace, gw.Name, err)
	}
	ref := object.Ref{Namespace: gw.Namespace, Name: gw.Name}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: gwruntime.VCLConfigMapName(ref), Labels: gwruntime.Labels(ref)},
		Data:       map[string]string{gwruntime.VCLDataKey: vcl},
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestKubernetesRoutingBinary runs the chaperone binary as the provider's
// Deployment does (--routing=kubernetes --vcl=""), as the Gateway's
// ServiceAccount with the documented RBAC, against the test API server:
// without the VCL ConfigMap it is not ready and Programmed is Pending
// naming it; then main.vcl comes from the VCL ConfigMap and routing from
// the fragment and EndpointSlice; VCL edits take effect; a VCL that does not compile is
// reported on the Gateway and traffic stays; SIGTERM drains and exits 0.
func TestKubernetesRoutingBinary(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "edge"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)

	listen := varnishdtest.FreeAddr(t)
	dir := varnishdtest.Dir(t)
	ghostPath := filepath.Join(dir, "ghost.json")
	gw, frag := kubeGateway(t, ns, varnishdtest.Port(t, listen))
	gw, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)
	frag, err = fragmentClient(t, cp, ns).Create(ctx, frag, metav1.CreateOptions{})
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

	// ghost.json starts out routing to "file": the Gateway's routing must
	// replace it. The --vcl flag is given empty, as the Deployment does.
	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--vcl=", "--kubeconfig="+kubeconfig, "--pod-name=edge-pod-1")

	programmed := func(want metav1.ConditionStatus, reason string, msgs ...string) {
		t.Helper()
		var last string
		c.WaitFor("Programmed="+string(want)+"/"+reason, 90*time.Second, func() bool {
			got, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type != string(gatewayv1.GatewayConditionProgrammed) {
					continue
				}
				last = fmt.Sprintf("%s/%s: %s", cond.Status, cond.Reason, cond.Message)
				if cond.Status != want || cond.Reason != reason || cond.ObservedGeneration != got.Generation {
					return false
				}
				for _, m := range msgs {
					if !strings.Contains(cond.Message, m) {
						return false
					}
				}
				return true
			}
			return false
		})
		t.Logf("Programmed: %s", last)
	}

	// No VCL ConfigMap yet: Pending naming it, not ready, and varnishd
	// still answers with its boot VCL.
	cmName := gwruntime.VCLConfigMapName(object.Ref{Namespace: ns, Name: "edge"})
	programmed(metav1.ConditionFalse, "Pending", ns+"/"+cmName, `"main.vcl"`)
	if code, body := c.Health("/readyz"); code != 503 {
		t.Errorf("/readyz without a main VCL = %d %s, want 503", code, body)
	}
	if code, _, _ := c.get(); code != 503 {
		t.Errorf("request without a main VCL answered %d, want the boot VCL's 503", code)
	}

	vcl, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, providerVCL(t, cp, gw, mainVCL(ghostPath, "cm-1")), metav1.CreateOptions{})
	must(t, err)
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	c.wantTraffic("K", "cm-1")
	programmed(metav1.ConditionTrue, "Programmed")

	// The pod reports, as its ServiceAccount, that it serves the fragment.
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	gwRef := object.Ref{Namespace: ns, Name: "edge"}
	c.WaitFor("GatewayPodReport serving the fragment", 30*time.Second, func() bool {
		reports, err := vgwapi.ReadReports(ctx, dyn, gwRef)
		if err != nil {
			return false
		}
		served, rej := reports["edge-pod-1"].Served(frag.GetName(), frag.GetResourceVersion())
		return served && rej == nil && reports["edge-pod-1"].Status.Routing.Fragments == 1
	})

	// A VCL edit in the ConfigMap takes effect.
	vcl.Data[gwruntime.VCLDataKey] = providerVCL(t, cp, gw, mainVCL(ghostPath, "cm-2")).Data[gwruntime.VCLDataKey]
	vcl, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, vcl, metav1.UpdateOptions{})
	must(t, err)
	c.wantTraffic("K", "cm-2")

	// A VCL that does not compile: Programmed=False/Invalid naming the
	// ConfigMap and the compiler's error; traffic stays on cm-2.
	vcl.Data[gwruntime.VCLDataKey] = providerVCL(t, cp, gw, strings.Replace(mainVCL(ghostPath, "cm-3"), "sub vcl_deliver {", "sub vcl_deliver { set resp.http.X-Broken = ;", 1)).Data[gwruntime.VCLDataKey]
	vcl, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, vcl, metav1.UpdateOptions{})
	must(t, err)
	programmed(metav1.ConditionFalse, "Invalid", vcl.Name, "does not compile", "Unknown token")
	for range 20 {
		code, body, h := c.get()
		if code != 200 || body != "K" || h.Get("X-VCL") != "cm-2" {
			t.Fatalf("after a broken VCL: %d %q X-VCL=%q, want 200 K from VCL cm-2", code, body, h.Get("X-VCL"))
		}
	}
	if v := c.metric("varnishgw_chaperone_vcl_compile_failures_total"); v < 1 {
		t.Errorf("varnishgw_chaperone_vcl_compile_failures_total = %v, want 1 or more", v)
	}

	// Fixed: True again, and the new VCL serves.
	vcl.Data[gwruntime.VCLDataKey] = providerVCL(t, cp, gw, mainVCL(ghostPath, "cm-4")).Data[gwruntime.VCLDataKey]
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, vcl, metav1.UpdateOptions{})
	must(t, err)
	c.wantTraffic("K", "cm-4")
	programmed(metav1.ConditionTrue, "Programmed")

	// SIGTERM drains (no client left) and exits 0.
	must(t, c.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-c.Exited:
	case <-time.After(120 * time.Second):
		t.Fatal("chaperone did not exit within 120 s of SIGTERM")
	}
	if c.ExitErr != nil {
		t.Errorf("chaperone exit after SIGTERM: %v, want status 0", c.ExitErr)
	}
}
