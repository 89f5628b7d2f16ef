package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
)

// TestKubernetesHTTPSBinary runs the chaperone binary with an HTTPS
// listener against the test API server, as the Gateway's ServiceAccount
// with the Gateway's Roles and get/list/watch on exactly the referenced
// Secret (resourceNames): before the Secret exists the pod is not ready
// and the listener's ResolvedRefs is False/InvalidCertificateRef naming
// it; the Secret created afterwards is picked up, HTTPS traffic flows and
// ResolvedRefs turns True next to the provider's listener status.
func TestKubernetesHTTPSBinary(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "edge"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cp.GrantRole(t, ns, "chaperone-certificates", ns, "chaperone", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"app-cert"}, Verbs: []string{"get", "list", "watch"}},
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
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: gatewayv1.PortNumber(varnishdtest.Port(t, listen)), Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: gatewayv1.PortNumber(tlsPort), Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
				CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "app-cert"}}}},
		}},
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
	frag := fragmentObject(t, gw, route, appService(ns, "app"))
	gw, err = cp.Gateway.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{})
	must(t, err)
	// The provider's listener status entries.
	st := gwapply.GatewayStatus()
	for _, l := range gw.Spec.Listeners {
		st.WithListeners(gwapply.ListenerStatus().WithName(l.Name).WithAttachedRoutes(1).
			WithSupportedKinds(gwapply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
			WithConditions(metav1apply.Condition().WithType("Accepted").WithStatus(metav1.ConditionTrue).WithReason("Accepted").
				WithMessage("by the provider").WithObservedGeneration(gw.Generation).WithLastTransitionTime(metav1.Now())))
	}
	_, err = cp.Gateway.GatewayV1().Gateways(ns).ApplyStatus(ctx, gwapply.Gateway("edge", ns).WithStatus(st), metav1.ApplyOptions{FieldManager: "varnishgw-provider", Force: true})
	must(t, err)
	_, err = fragmentClient(t, cp, ns).Create(ctx, frag, metav1.CreateOptions{})
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
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, providerVCL(t, cp, gw, mainVCL(ghostPath, "cm-1")), metav1.CreateOptions{})
	must(t, err)

	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
		"--routing=kubernetes", "--gateway="+ns+"/edge", "--vcl=", "--kubeconfig="+kubeconfig, "--pod-name=edge-pod-1",
		"--tls-listen", strconv.Itoa(tlsPort), "--tls-dir", tlsDir, "--hitch", "/usr/sbin/hitch")

	resolvedRefs := func(want metav1.ConditionStatus, reason string, msgs ...string) {
		t.Helper()
		var last string
		c.WaitFor("ResolvedRefs="+string(want)+"/"+reason, 90*time.Second, func() bool {
			got, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false
			}
			for _, ls := range got.Status.Listeners {
				for _, cond := range ls.Conditions {
					if ls.Name == "http" && cond.Type == "ResolvedRefs" {
						t.Fatalf("the chaperone wrote ResolvedRefs of the HTTP listener: %+v", cond)
					}
					if ls.Name != "https" || cond.Type != "ResolvedRefs" {
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
			}
			return false
		})
		t.Logf("ResolvedRefs: %s", last)
	}
	resolvedRefs(metav1.ConditionFalse, "InvalidCertificateRef", "Secret "+ns+"/app-cert", "not found")
	c.wantTraffic("K", "cm-1") // HTTP serves meanwhile
	// The missing certificate holds no one back: the HTTP listener serves
	// and the pod is ready (a rollout goes on; cert-manager's HTTP-01
	// challenge is answered).
	c.WaitFor("/readyz 200 without the certificate", 30*time.Second, func() bool {
		code, _ := c.Health("/readyz")
		return code == 200
	})

	secret, serial := chaperonetest.TLSSecret(t, "demo", "app-cert", "app.example.com", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	secret.Namespace = ns
	_, err = cp.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	must(t, err)
	c.WaitFor("ready", 60*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	resolvedRefs(metav1.ConditionTrue, "ResolvedRefs")
	if got := servedSerial(tlsAddr, "app.example.com"); got == nil || got.Cmp(serial) != 0 {
		t.Errorf("served certificate %v, want the Secret's %v", got, serial)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", tlsAddr)
		},
	}}
	c.WaitFor("HTTPS traffic", 30*time.Second, func() bool {
		resp, err := client.Get("https://app.example.com/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && string(b) == "K"
	})
	// A new Gateway generation that changes no certificate: the
	// condition's observedGeneration follows it.
	gw, err = cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
	must(t, err)
	gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{Labels: map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "edge"}}
	_, err = cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, gw, metav1.UpdateOptions{})
	must(t, err)
	resolvedRefs(metav1.ConditionTrue, "ResolvedRefs")
	got, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
	must(t, err)
	for _, ls := range got.Status.Listeners {
		if ls.AttachedRoutes != 1 || len(ls.SupportedKinds) != 1 {
			t.Errorf("listener %s: the provider's fields changed: %+v", ls.Name, ls)
		}
	}
	// Programmed (the routing half's writer) and ResolvedRefs (the TLS
	// half's) stand side by side.
	var programmed bool
	for _, cond := range got.Status.Conditions {
		programmed = programmed || (cond.Type == "Programmed" && cond.Status == metav1.ConditionTrue)
	}
	if !programmed {
		t.Errorf("Programmed is not True next to ResolvedRefs: %+v", got.Status.Conditions)
	}

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
