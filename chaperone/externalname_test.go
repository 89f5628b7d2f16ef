package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/dnstest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// loopbackBackends starts HTTP servers on the same port of each loopback
// address, answering the address's body and the Host header they got (in
// X-Got-Host); the port is returned.
func loopbackBackends(t testing.TB, bodies map[string]string) int32 {
	t.Helper()
	for try := 0; try < 20; try++ {
		var ls []net.Listener
		port := 0
		ok := true
		for ip := range bodies {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			port = l.Addr().(*net.TCPAddr).Port
			ls = append(ls, l)
		}
		if !ok {
			for _, l := range ls {
				l.Close()
			}
			continue
		}
		for _, l := range ls {
			body := bodies[l.Addr().(*net.TCPAddr).IP.String()]
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Got-Host", r.Host)
				io.WriteString(w, body)
			})}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		}
		return int32(port)
	}
	t.Fatal("no port free on every loopback address")
	return 0
}

// externalNameFragment is the RoutingFragment of a route for
// app.example.com to the ExternalName Service ext, attached as the
// provider does for a class with external_name_services = allow; the
// route's ResolvedRefs condition is returned as "Status/Reason: Message".
func externalNameFragment(t testing.TB, ns string, port int, svc *corev1.Service, allow bool) (*gatewayv1.Gateway, *unstructured.Unstructured, string) {
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
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "ext", Port: ptr(gatewayv1.PortNumber(svcPort(svc)))},
			}}}}},
		},
	}
	frag, err := routing.Attach(gw, route, &routing.Objects{Services: []*corev1.Service{svc}, ExternalNameServices: allow})
	must(t, err)
	if !frag.Accepted() {
		t.Fatalf("route not accepted: %+v", frag.Parents)
	}
	var cond string
	for _, c := range frag.Parents[0].Conditions {
		if c.Type == string(gatewayv1.RouteConditionResolvedRefs) {
			cond = c.Status + "/" + c.Reason + ": " + c.Message
		}
	}
	obj, err := routingfragment.New(frag)
	must(t, err)
	return gw, obj, cond
}

// svcPort is the port the test's backendRef names: the one the
// ExternalName Service lists.
func svcPort(svc *corev1.Service) int32 { return svc.Spec.Ports[0].Port }

// TestExternalNameServices runs the chaperone binary against the test API
// server with a route to an ExternalName Service whose name a real DNS
// server in this process serves. Without --external-name-services (the
// class's default) the route's ResolvedRefs is False naming the class
// attribute, requests get 500 and the DNS server is never asked. With it,
// traffic reaches the address DNS gives, follows a new address after the
// record's TTL, and stays on the last good address when the DNS server
// stops. The backends sit on loopback addresses (this machine's test
// traffic stays on loopback), so the test narrows --external-name-refuse to
// link-local addresses; the default refusals are tested in dnswatch.
func TestExternalNameServices(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "edge"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, "chaperone")
	must(t, err)

	const name = "api.ext.test"
	port := loopbackBackends(t, map[string]string{"127.0.0.2": "A", "127.0.0.3": "B"})
	dns := dnstest.Start(t)
	dns.SetAddrs(name, 5, "127.0.0.2")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: name,
			Ports: []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}}},
	}
	_, err = cp.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	must(t, err)
	frags := fragmentClient(t, cp, ns)
	kubeArgs := []string{"--routing=kubernetes", "--gateway=" + ns + "/edge", "--kubeconfig=" + kubeconfig, "--pod-name=edge-pod-1"}

	t.Run("class off", func(t *testing.T) {
		listen := varnishdtest.FreeAddr(t)
		gw, frag, cond := externalNameFragment(t, ns, varnishdtest.Port(t, listen), svc, false)
		for _, want := range []string{"False/BackendNotFound", "Service " + ns + "/ext is of type ExternalName (" + name + ")", "set external_name_services = true on its varnishgw_gateway_class"} {
			if !strings.Contains(cond, want) {
				t.Errorf("ResolvedRefs = %s, want it to say %q", cond, want)
			}
		}
		_, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
		must(t, err)
		created, err := frags.Create(ctx, frag, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			must(t, frags.Delete(ctx, created.GetName(), metav1.DeleteOptions{}))
			must(t, cp.Gateway.GatewayV1().Gateways(ns).Delete(ctx, "edge", metav1.DeleteOptions{}))
		})
		c := launchChaperone(t, varnishdtest.Dir(t), chaperonetest.Backend(t, "file"), listen, kubeArgs...)
		c.WaitFor("the Gateway's routing loaded (500 for the ExternalName backend)", 90*time.Second, func() bool {
			code, _, _ := c.get()
			return code == 500
		})
		for range 10 {
			if code, body, _ := c.get(); code != 500 {
				t.Fatalf("request for the ExternalName backend of a class without external_name_services: %d %q, want 500", code, body)
			}
		}
		if n := dns.Queries(); n != 0 {
			t.Errorf("the DNS server was asked %d times; without --external-name-services it must not be", n)
		}
	})

	t.Run("class on", func(t *testing.T) {
		listen := varnishdtest.FreeAddr(t)
		gw, frag, cond := externalNameFragment(t, ns, varnishdtest.Port(t, listen), svc, true)
		if !strings.HasPrefix(cond, "True/ResolvedRefs") {
			t.Errorf("ResolvedRefs = %s, want True", cond)
		}
		_, err := cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
		must(t, err)
		_, err = frags.Create(ctx, frag, metav1.CreateOptions{})
		must(t, err)
		c := launchChaperone(t, varnishdtest.Dir(t), chaperonetest.Backend(t, "file"), listen, append(kubeArgs,
			"--external-name-services", "--dns-server="+dns.Addr(), "--external-name-refuse=169.254.0.0/16")...)
		c.wantTraffic("A", "v1")
		// The client's Host header reaches the backend unchanged.
		if _, _, h := c.get(); h.Get("X-Got-Host") != "app.example.com" {
			t.Errorf("the backend got Host %q, want the client's app.example.com", h.Get("X-Got-Host"))
		}
		ok := fmt.Sprintf(`varnishgw_dns_lookups_total{name=%q,result="ok"}`, name)
		if v := c.metric(ok); v < 1 {
			t.Errorf("%s = %v, want 1 or more", ok, v)
		}
		if v := c.metric(fmt.Sprintf(`varnishgw_dns_addresses{name=%q}`, name)); v != 1 {
			t.Errorf("varnishgw_dns_addresses = %v, want 1", v)
		}

		// The record changes: traffic follows within its TTL (5 s), a
		// lookup and the routing sync.
		dns.SetAddrs(name, 5, "127.0.0.3")
		moved := time.Now()
		c.WaitFor("traffic on the new address", 30*time.Second, func() bool {
			code, body, _ := c.get()
			return code == 200 && body == "B"
		})
		if d := time.Since(moved); d > 15*time.Second {
			t.Errorf("traffic followed the new address after %s, want within the 5 s TTL, a lookup and a sync", d)
		}

		// The DNS server stops: lookups fail, and the last good address
		// keeps serving.
		errMetric := fmt.Sprintf(`varnishgw_dns_lookups_total{name=%q,result="error"}`, name)
		dns.Stop()
		c.WaitFor("a failed lookup counted", 30*time.Second, func() bool { return c.metric(errMetric) >= 1 })
		for range 20 {
			if code, body, _ := c.get(); code != 200 || body != "B" {
				t.Fatalf("with the DNS server down: %d %q, want 200 B from the last good address", code, body)
			}
		}
		if !strings.Contains(c.Out.String(), "DNS lookup failed; keeping the last good addresses") {
			t.Errorf("the failed lookup is not logged:\n%s", c.Out.String())
		}
	})
}
