package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// bindClusterRole binds ClusterRole role to ServiceAccount ns/sa in ns.
func bindClusterRole(t *testing.T, cp *testenv.ControlPlane, ns, sa, role string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.ServiceAccountConfig(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
}

// TestRoutingInjection is the attack of the security issue, with real
// tokens against the chaperone binary running as the Gateway's
// ServiceAccount with the Role the provider writes:
//   - a namespace editor (the rules Kubernetes aggregates into the built-in
//     edit role) writes a ConfigMap that carries the fragment label and a
//     fragment for evil.example.com: it is not served; the editor cannot
//     create or change a RoutingFragment;
//   - the gateway's identity cannot read another ConfigMap of its
//     namespace (one holding a password), nor list ConfigMaps, nor write
//     routing: it reads its own VCL ConfigMap and the RoutingFragments,
//     and writes only its pod's report.
func TestRoutingInjection(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	gwRef := object.Ref{Namespace: ns, Name: "edge"}
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(gwRef))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)
	gwCfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	must(t, err)

	listen := varnishdtest.FreeAddr(t)
	dir := varnishdtest.Dir(t)
	gw, frag := kubeGateway(t, ns, varnishdtest.Port(t, listen))
	gw, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)
	frags := fragmentClient(t, cp, ns)
	_, err = frags.Create(ctx, frag, metav1.CreateOptions{})
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
	ghostPath := dir + "/ghost.json"
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, providerVCL(t, cp, gw, mainVCL(ghostPath, "v1")), metav1.CreateOptions{})
	must(t, err)
	secret, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string]string{"password": "hunter2"},
	}, metav1.CreateOptions{})
	must(t, err)

	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--vcl=", "--kubeconfig="+kubeconfig, "--pod-name=edge-pod-1")
	c.wantTraffic("K", "v1")

	// The editor: what Kubernetes aggregates into the built-in edit role
	// (this control plane has no controller-manager to aggregate it).
	editor := bindClusterRole(t, cp, ns, "editor", "system:aggregate-to-edit")
	bindClusterRole(t, cp, ns, "editor", "system:aggregate-to-view")
	editorKube := kubernetes.NewForConfigOrDie(editor)
	editorDyn := dynamic.NewForConfigOrDie(editor)

	// A hand-made ConfigMap with the fragment label and a fragment for
	// evil.example.com, as fragments were stored before: written, and
	// never served.
	evilRoute := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
			Hostnames:       []gatewayv1.Hostname{"evil.example.com"},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}
	evil := fragmentObject(t, gw, evilRoute, appService(ns, "app"))
	evilJSON, err := json.Marshal(evil.Object["spec"].(map[string]any)["fragment"])
	must(t, err)
	_, err = editorKube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: evil.GetName(), Labels: gwruntime.GatewayLabels(gwRef)},
		Data:       map[string]string{"fragment.json": string(evilJSON)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the editor cannot write ConfigMaps, so this test shows nothing: %v", err)
	}
	_, err = editorDyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Create(ctx, evil, metav1.CreateOptions{})
	wantForbidden(t, "the editor creates a RoutingFragment", err)
	_, err = editorDyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Patch(ctx, frag.GetName(), types.MergePatchType,
		[]byte(`{"spec":{"route":"x/y"}}`), metav1.PatchOptions{})
	wantForbidden(t, "the editor patches a RoutingFragment", err)

	// A change that the chaperone does see (a new endpoint) is served,
	// and evil.example.com still is not.
	ip2, port2 := hostBackend(t, varnishdtest.HostIP(t), "L")
	_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port2), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip2}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}, metav1.UpdateOptions{})
	must(t, err)
	c.wantTraffic("L", "v1")
	if code := hostStatus(t, listen, "evil.example.com"); code != 404 {
		t.Errorf("evil.example.com answered %d, want 404: a ConfigMap changed the routing", code)
	}

	// The gateway's identity.
	gwKube := kubernetes.NewForConfigOrDie(gwCfg)
	gwDyn := dynamic.NewForConfigOrDie(gwCfg)
	_, err = gwKube.CoreV1().ConfigMaps(ns).Get(ctx, secret.Name, metav1.GetOptions{})
	wantForbidden(t, "the gateway reads another ConfigMap", err)
	_, err = gwKube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	wantForbidden(t, "the gateway lists ConfigMaps", err)
	if _, err := gwKube.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gwRef), metav1.GetOptions{}); err != nil {
		t.Errorf("the gateway reads its VCL ConfigMap: %v", err)
	}
	if _, err := gwDyn.Resource(vgwapi.RoutingFragments).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the gateway lists RoutingFragments: %v", err)
	}
	_, err = gwDyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Create(ctx, evil, metav1.CreateOptions{})
	wantForbidden(t, "the gateway creates a RoutingFragment", err)
	err = gwDyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Delete(ctx, frag.GetName(), metav1.DeleteOptions{})
	wantForbidden(t, "the gateway deletes a RoutingFragment", err)
	_, err = gatewayclient.NewForConfigOrDie(gwCfg).GatewayV1().Gateways(ns).Patch(ctx, "edge", types.MergePatchType,
		[]byte(`{"spec":{"listeners":[{"name":"x","port":1,"protocol":"HTTP"}]}}`), metav1.PatchOptions{})
	wantForbidden(t, "the gateway changes its Gateway's spec", err)
	err = gwDyn.Resource(vgwapi.GatewayPodReports).Namespace(ns).Delete(ctx, "edge-pod-1", metav1.DeleteOptions{})
	wantForbidden(t, "the gateway deletes a report", err)
}

// hostStatus is the status of a request for host through the listener.
func hostStatus(t *testing.T, listen, host string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+listen+"/", nil)
	req.Host = host
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := noKeepAlive.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", host, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
