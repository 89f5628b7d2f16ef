package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd/varnishdtest"
)

// TestKubernetesListenerSet runs the chaperone binary (supervise mode,
// routing from the API server as the Gateway's ServiceAccount) for a
// Gateway whose ListenerSet adds a listener on a port of its own, as the
// provider writes them: the ListenerSet's listeners in the Gateway's
// annotation, a route attached to the ListenerSet in its fragment, and
// the port in varnishd's listen addresses. The route is served on the
// ListenerSet's port only; once the Gateway admits ListenerSets no more,
// it is served nowhere, without a restart.
func TestKubernetesListenerSet(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(routing.ObjectRef{Namespace: ns, Name: "edge"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)

	listen, lsListen := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	lsPort := varnishdtest.Port(t, lsListen)
	dir := varnishdtest.Dir(t)
	ghostPath := filepath.Join(dir, "ghost.json")

	gw, _ := kubeGateway(t, ns, varnishdtest.Port(t, listen))
	gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptr(gatewayv1.NamespacesFromSame)}}
	ls := &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.ListenerSetSpec{
			ParentRef: gatewayv1.ParentGatewayReference{Name: "edge"},
			Listeners: []gatewayv1.ListenerEntry{{Name: "extra", Port: gatewayv1.PortNumber(lsPort), Protocol: gatewayv1.HTTPProtocolType, Hostname: ptr(gatewayv1.Hostname("ls.example.com"))}},
		},
	}
	composed := routing.ComposeGateway(gw, []*gatewayv1.ListenerSet{ls}, nil)
	if !composed.ListenerSets[0].Accepted() {
		t.Fatalf("ListenerSet not accepted: %+v", composed.ListenerSets[0])
	}
	ann, err := composed.ListenerSetListeners()
	must(t, err)
	gw.Annotations = map[string]string{routing.ListenerSetListenersAnnotation: ann}
	gw, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)

	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-app", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Group: ptr(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr(gatewayv1.Kind("ListenerSet")), Name: "team",
			}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}
	_, err = fragmentClient(t, cp, ns).Create(ctx, fragmentObject(t, composed.Gateway, route, appService(ns, "app")), metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().Services(ns).Create(ctx, appService(ns, "app"), metav1.CreateOptions{})
	must(t, err)
	ip, port := hostBackend(t, varnishdtest.HostIP(t), "LS")
	_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, vclConfigMap(gw, mainVCL(ghostPath, "cm-1")), metav1.CreateOptions{})
	must(t, err)

	c := launchChaperone(t, dir, backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--vcl=", "--kubeconfig="+kubeconfig, "--pod-name=edge-pod-1",
		"--listen", strconv.Itoa(lsPort))
	get := func(addr, host string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Host = host
		resp, err := noKeepAlive.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	c.waitFor("the ListenerSet's route served on its port", 90*time.Second, func() bool {
		code, body := get(lsListen, "ls.example.com")
		return code == 200 && body == "LS"
	})
	// Not on the Gateway's own listener, which the route is not attached
	// to, and not for another host on the ListenerSet's port.
	if code, body := get(listen, "ls.example.com"); code != 404 {
		t.Errorf("the Gateway's own port answered %d %q for the ListenerSet's host, want 404", code, body)
	}
	if code, body := get(lsListen, "other.example.com"); code != 404 {
		t.Errorf("the ListenerSet's port answered %d %q for another host, want 404", code, body)
	}

	// The Gateway admits no ListenerSet any more: its listener is not
	// served, although the annotation still names it.
	live, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
	must(t, err)
	live.Spec.AllowedListeners = nil
	_, err = cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, live, metav1.UpdateOptions{})
	must(t, err)
	c.waitFor("the ListenerSet's route no longer served", 90*time.Second, func() bool {
		code, _ := get(lsListen, "ls.example.com")
		return code == 404
	})
}

// TestKubernetesListenerSetHTTPS runs the chaperone binary with hitch for
// a Gateway whose ListenerSet, in another namespace, adds an HTTPS
// listener on a port of its own with a certificate from a Secret of the
// ListenerSet's namespace, as the provider records it in the Gateway's
// annotation; the chaperone may read exactly that Secret there. A route
// of the Gateway's namespace attached to the ListenerSet is served over
// TLS on that port with the ListenerSet's certificate (by SNI), and the
// chaperone writes no status for the ListenerSet's listener on the
// Gateway.
func TestKubernetesListenerSetHTTPS(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns, lsNS := cp.Namespace(t), cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(routing.ObjectRef{Namespace: ns, Name: "edge"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cp.GrantRole(t, lsNS, "chaperone-certificates", ns, "chaperone", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"team-cert"}, Verbs: []string{"get", "list", "watch"}},
	})
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)

	listen, tlsAddr := varnishdtest.FreeAddr(t), varnishdtest.FreeAddr(t)
	tlsPort := varnishdtest.Port(t, tlsAddr)
	tlsDir, err := os.MkdirTemp("", "chaptls")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(tlsDir) })
	dir := varnishdtest.Dir(t)
	ghostPath := filepath.Join(dir, "ghost.json")

	gw, _ := kubeGateway(t, ns, varnishdtest.Port(t, listen))
	gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptr(gatewayv1.NamespacesFromAll)}}
	ls := &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: lsNS, Name: "team", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.ListenerSetSpec{
			ParentRef: gatewayv1.ParentGatewayReference{Name: "edge", Namespace: ptr(gatewayv1.Namespace(ns))},
			Listeners: []gatewayv1.ListenerEntry{{
				Name: "secure", Port: gatewayv1.PortNumber(tlsPort), Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr(gatewayv1.Hostname("ls.example.com")),
				TLS:           &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "team-cert"}}},
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr(gatewayv1.NamespacesFromAll)}},
			}},
		},
	}
	composed := routing.ComposeGateway(gw, []*gatewayv1.ListenerSet{ls}, nil)
	if !composed.ListenerSets[0].Accepted() {
		t.Fatalf("ListenerSet not accepted: %+v", composed.ListenerSets[0])
	}
	ann, err := composed.ListenerSetListeners()
	must(t, err)
	gw.Annotations = map[string]string{routing.ListenerSetListenersAnnotation: ann}
	_, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)

	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-app", CreationTimestamp: metav1.Now()},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Group: ptr(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr(gatewayv1.Kind("ListenerSet")), Namespace: ptr(gatewayv1.Namespace(lsNS)), Name: "team",
			}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: ptr(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}
	_, err = fragmentClient(t, cp, ns).Create(ctx, fragmentObject(t, composed.Gateway, route, appService(ns, "app")), metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().Services(ns).Create(ctx, appService(ns, "app"), metav1.CreateOptions{})
	must(t, err)
	ip, port := hostBackend(t, varnishdtest.HostIP(t), "LS")
	_, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}, metav1.CreateOptions{})
	must(t, err)
	secret, serial := tlsSecret(t, "team-cert", "ls.example.com", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	secret.Namespace = lsNS
	_, err = cp.Client.CoreV1().Secrets(lsNS).Create(ctx, secret, metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, vclConfigMap(gw, mainVCL(ghostPath, "cm-1")), metav1.CreateOptions{})
	must(t, err)

	c := launchChaperone(t, dir, backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--vcl=", "--kubeconfig="+kubeconfig, "--pod-name=edge-pod-1",
		"--tls-listen", strconv.Itoa(tlsPort), "--tls-dir", tlsDir, "--hitch", "/usr/sbin/hitch")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", tlsAddr)
		},
	}}
	get := func(host string) (int, string) {
		resp, err := client.Get("https://" + host + "/")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	c.waitFor("the ListenerSet's route served over TLS", 90*time.Second, func() bool {
		code, body := get("ls.example.com")
		return code == 200 && body == "LS"
	})
	if got := servedSerial(tlsAddr, "ls.example.com"); got == nil || got.Cmp(serial) != 0 {
		t.Errorf("served certificate %v, want the ListenerSet's Secret's %v", got, serial)
	}
	if code, body := get("other.example.com"); code != 404 {
		t.Errorf("the ListenerSet's HTTPS port answered %d %q for another host, want 404", code, body)
	}
	// The Gateway's status has no entry for the ListenerSet's listener.
	live, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
	must(t, err)
	for _, l := range live.Status.Listeners {
		if strings.Contains(string(l.Name), "/") {
			t.Errorf("the chaperone wrote status for the ListenerSet's listener on the Gateway: %+v", l)
		}
	}
}
