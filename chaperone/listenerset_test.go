package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/chaperonetest"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/varnishdtest"
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
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "edge"}))
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
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, providerVCL(t, cp, gw, mainVCL(ghostPath, "cm-1")), metav1.CreateOptions{})
	must(t, err)

	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
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
	c.WaitFor("the ListenerSet's route served on its port", 90*time.Second, func() bool {
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
	c.WaitFor("the ListenerSet's route no longer served", 90*time.Second, func() bool {
		code, _ := get(lsListen, "ls.example.com")
		return code == 404
	})
}

// TestKubernetesListenerSetHTTPS runs the chaperone binary with hitch for
// a Gateway whose ListenerSet, in another namespace, adds an HTTPS
// listener on a port of its own with a certificate from a Secret of the
// ListenerSet's namespace, as the provider records it in the Gateway's
// annotations; the chaperone may read exactly that Secret there, and
// read and patch the status of exactly that ListenerSet
// (gwruntime.ListenerSetStatusRules, with its real token). A route of the
// Gateway's namespace attached to the ListenerSet is served over TLS on
// that port with the ListenerSet's certificate (by SNI), and the
// chaperone writes no status for the ListenerSet's listener on the
// Gateway: it writes the listener's ResolvedRefs condition on the
// ListenerSet (observedGeneration: the ListenerSet generation the
// annotation records), False with InvalidCertificateRef once the Secret
// is deleted and True again once it is back, without an apply, leaving
// the provider's conditions alone.
func TestKubernetesListenerSetHTTPS(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns, lsNS, certNS := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	cp.GrantRole(t, ns, "chaperone-gateway", ns, "chaperone", gwruntime.GatewayRules(object.Ref{Namespace: ns, Name: "edge"}))
	cp.GrantRole(t, ns, "chaperone-backends", ns, "chaperone", gwruntime.BackendRules())
	cp.GrantRole(t, lsNS, "chaperone-certificates", ns, "chaperone", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"team-cert"}, Verbs: []string{"get", "list", "watch"}},
	})
	cp.GrantRole(t, certNS, "chaperone-certificates", ns, "chaperone", gwruntime.CertificateRules([]string{"shared-cert"}, true))
	cp.GrantRole(t, lsNS, "chaperone-listenersets", ns, "chaperone", gwruntime.ListenerSetStatusRules([]string{"team"}))
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
			}, {
				// A certificate of another namespace, which a
				// ReferenceGrant opens to ListenerSets of lsNS.
				Name: "shared", Port: gatewayv1.PortNumber(tlsPort), Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr(gatewayv1.Hostname("shared.example.com")),
				TLS:           &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "shared-cert", Namespace: ptr(gatewayv1.Namespace(certNS))}}},
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr(gatewayv1.NamespacesFromAll)}},
			}},
		},
	}
	// The ListenerSet in the API, at generation 2, with the provider's
	// status of its listener (all but ResolvedRefs, which the pods own).
	lsets := cp.Gateway.GatewayV1().ListenerSets(lsNS)
	created, err := lsets.Create(ctx, ls, metav1.CreateOptions{})
	must(t, err)
	created.Spec.Listeners[0].AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}}
	created, err = lsets.Update(ctx, created, metav1.UpdateOptions{})
	must(t, err)
	if created.Generation != 2 {
		t.Fatalf("ListenerSet generation %d, want 2", created.Generation)
	}
	ls.Generation = created.Generation
	provided := func(typ string) *metav1apply.ConditionApplyConfiguration {
		return metav1apply.Condition().WithType(typ).WithStatus(metav1.ConditionTrue).WithReason(typ).WithMessage("by the provider").
			WithObservedGeneration(created.Generation).WithLastTransitionTime(metav1.Now())
	}
	_, err = lsets.ApplyStatus(ctx, gwapply.ListenerSet("team", lsNS).WithStatus(gwapply.ListenerSetStatus().
		WithConditions(provided("Accepted"), provided("Programmed")).
		WithListeners(gwapply.ListenerEntryStatus().WithName("secure").WithAttachedRoutes(1).
			WithSupportedKinds(gwapply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
			WithConditions(provided("Accepted"), provided("Programmed")),
			gwapply.ListenerEntryStatus().WithName("shared").WithAttachedRoutes(1).
				WithSupportedKinds(gwapply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
				WithConditions(provided("Accepted"), provided("Programmed")))),
		metav1.ApplyOptions{FieldManager: "varnishgw", Force: true})
	must(t, err)
	grants := cp.Gateway.GatewayV1().ReferenceGrants(certNS)
	grant := &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: certNS, Name: "from-listenersets"}, Spec: gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "ListenerSet", Namespace: gatewayv1.Namespace(lsNS)}},
		To:   []gatewayv1.ReferenceGrantTo{{Kind: "Secret"}},
	}}
	_, err = grants.Create(ctx, grant, metav1.CreateOptions{})
	must(t, err)
	shared, sharedSerial := chaperonetest.TLSSecret(t, "demo", "shared-cert", "shared.example.com", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	shared.Namespace = certNS
	_, err = cp.Client.CoreV1().Secrets(certNS).Create(ctx, shared, metav1.CreateOptions{})
	must(t, err)
	composed := routing.ComposeGateway(gw, []*gatewayv1.ListenerSet{ls}, &routing.Objects{ReferenceGrants: []*gatewayv1.ReferenceGrant{grant}})
	if !composed.ListenerSets[0].Accepted() {
		t.Fatalf("ListenerSet not accepted: %+v", composed.ListenerSets[0])
	}
	ann, err := composed.ListenerSetListeners()
	must(t, err)
	gens, err := composed.ListenerSetGenerations()
	must(t, err)
	gw.Annotations = map[string]string{routing.ListenerSetListenersAnnotation: ann, routing.ListenerSetGenerationsAnnotation: gens}
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
	secret, serial := chaperonetest.TLSSecret(t, "demo", "team-cert", "ls.example.com", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	secret.Namespace = lsNS
	_, err = cp.Client.CoreV1().Secrets(lsNS).Create(ctx, secret, metav1.CreateOptions{})
	must(t, err)
	_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, providerVCL(t, cp, gw, mainVCL(ghostPath, "cm-1")), metav1.CreateOptions{})
	must(t, err)

	c := launchChaperone(t, dir, chaperonetest.Backend(t, "file"), listen,
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
	c.WaitFor("the ListenerSet's route served over TLS", 90*time.Second, func() bool {
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

	// The ListenerSet's listener's ResolvedRefs, from the pods.
	resolved := func(listener string, status metav1.ConditionStatus, reason gatewayv1.ListenerEntryConditionReason) {
		t.Helper()
		start := time.Now()
		var last string
		c.WaitFor("listener "+listener+"'s ResolvedRefs="+string(status)+"/"+string(reason), 30*time.Second, func() bool {
			l, err := lsets.Get(ctx, "team", metav1.GetOptions{})
			if err != nil || len(l.Status.Listeners) != 2 {
				return false
			}
			var e gatewayv1.ListenerEntryStatus
			for _, x := range l.Status.Listeners {
				if string(x.Name) == listener {
					e = x
				}
			}
			for _, typ := range []string{"Accepted", "Programmed"} {
				if c := meta.FindStatusCondition(e.Conditions, typ); c == nil || c.Message != "by the provider" {
					t.Fatalf("the provider's %s condition of the listener changed: %+v", typ, e.Conditions)
				}
			}
			if e.AttachedRoutes != 1 || len(e.SupportedKinds) != 1 {
				t.Fatalf("the provider's fields of the listener changed: %+v", e)
			}
			cond := meta.FindStatusCondition(e.Conditions, string(gatewayv1.ListenerEntryConditionResolvedRefs))
			if cond == nil {
				return false
			}
			last = fmt.Sprintf("%s/%s (observedGeneration %d): %s", cond.Status, cond.Reason, cond.ObservedGeneration, cond.Message)
			return cond.Status == status && cond.Reason == string(reason) && cond.ObservedGeneration == created.Generation
		})
		t.Logf("%s: ResolvedRefs %s after %s", listener, last, time.Since(start).Round(time.Millisecond))
	}
	resolved("secure", metav1.ConditionTrue, gatewayv1.ListenerEntryReasonResolvedRefs)
	resolved("shared", metav1.ConditionTrue, gatewayv1.ListenerEntryReasonResolvedRefs)
	c.WaitFor("the listener with the granted certificate served over TLS", 30*time.Second, func() bool {
		code, body := get("shared.example.com")
		return code == 200 && body == "LS"
	})
	if got := servedSerial(tlsAddr, "shared.example.com"); got == nil || got.Cmp(sharedSerial) != 0 {
		t.Errorf("served certificate %v for shared.example.com, want the granted Secret's %v", got, sharedSerial)
	}

	// overSNI asks for host on a TLS connection for the server name sni.
	overSNI := func(sni, host string) (int, string) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{ServerName: sni, InsecureSkipVerify: true},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", tlsAddr)
			},
		}}
		resp, err := c.Get("https://" + host + "/")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// stopped checks, once the listener's ResolvedRefs says its
	// certificate is withdrawn (since: when it was), that no handshake
	// for host presents that certificate (serial) or any other valid for
	// host, and that host is not routed any more: neither on a
	// connection for the other listener of the port (otherSNI) nor on
	// one for host itself (which gets another listener's certificate).
	stopped := func(host string, serial *big.Int, otherSNI string, since time.Time) {
		t.Helper()
		t.Logf("%s: ResolvedRefs False %s after the change", host, time.Since(since).Round(time.Millisecond))
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tlsAddr, &tls.Config{ServerName: host, InsecureSkipVerify: true})
		if err == nil {
			leaf := conn.ConnectionState().PeerCertificates[0]
			conn.Close()
			if leaf.SerialNumber.Cmp(serial) == 0 {
				t.Errorf("the handshake for %s still presents the withdrawn certificate (serial %v)", host, serial)
			} else if leaf.VerifyHostname(host) == nil {
				t.Errorf("the handshake for %s presents certificate %v (%v), which is valid for it", host, leaf.SerialNumber, leaf.DNSNames)
			} else {
				t.Logf("%s: the handshake presents the port's default certificate (%v), not valid for it", host, leaf.DNSNames)
			}
		} else {
			t.Logf("%s: the handshake fails: %v", host, err)
		}
		for _, sni := range []string{otherSNI, host} {
			var code int
			var body string
			c.WaitFor(host+" answered 421 or 404 on a connection for "+sni, 30*time.Second, func() bool {
				code, body = overSNI(sni, host)
				return code == 421 || code == 404
			})
			t.Logf("%s: %d %q on a connection for %s, %s after the change", host, code, strings.TrimSpace(body), sni, time.Since(since).Round(time.Millisecond))
		}
	}
	served := func(host, want string) {
		t.Helper()
		c.WaitFor(host+" served again", 30*time.Second, func() bool {
			code, body := get(host)
			return code == 200 && body == want
		})
	}

	// Ready: the routing loaded (the delays below are not the first
	// load's).
	c.WaitFor("ready", 90*time.Second, func() bool { code, _ := c.Health("/readyz"); return code == 200 })
	// The Secret deleted, then back.
	since := time.Now()
	must(t, cp.Client.CoreV1().Secrets(lsNS).Delete(ctx, "team-cert", metav1.DeleteOptions{}))
	resolved("secure", metav1.ConditionFalse, gatewayv1.ListenerEntryReasonInvalidCertificateRef)
	stopped("ls.example.com", serial, "shared.example.com", since)
	if code, body := get("shared.example.com"); code != 200 || body != "LS" {
		t.Errorf("the other listener of the port answered %d %q, want 200 LS", code, body)
	}
	secret.ResourceVersion = ""
	_, err = cp.Client.CoreV1().Secrets(lsNS).Create(ctx, secret, metav1.CreateOptions{})
	must(t, err)
	resolved("secure", metav1.ConditionTrue, gatewayv1.ListenerEntryReasonResolvedRefs)
	served("ls.example.com", "LS")
	// The ReferenceGrant deleted, then back.
	since = time.Now()
	must(t, grants.Delete(ctx, grant.Name, metav1.DeleteOptions{}))
	resolved("shared", metav1.ConditionFalse, gatewayv1.ListenerEntryReasonRefNotPermitted)
	stopped("shared.example.com", sharedSerial, "ls.example.com", since)
	resolved("secure", metav1.ConditionTrue, gatewayv1.ListenerEntryReasonResolvedRefs)
	if code, body := get("ls.example.com"); code != 200 || body != "LS" {
		t.Errorf("the other listener of the port answered %d %q, want 200 LS", code, body)
	}
	grant.ResourceVersion = ""
	_, err = grants.Create(ctx, grant, metav1.CreateOptions{})
	must(t, err)
	resolved("shared", metav1.ConditionTrue, gatewayv1.ListenerEntryReasonResolvedRefs)
	served("shared.example.com", "LS")
	l, err := lsets.Get(ctx, "team", metav1.GetOptions{})
	must(t, err)
	for _, mf := range l.ManagedFields {
		if mf.Subresource == "status" && mf.Manager != "varnishgw" && mf.Manager != gatewaystatus.ListenerFieldManager {
			t.Errorf("ListenerSet status written by %q, want the provider's and %s only", mf.Manager, gatewaystatus.ListenerFieldManager)
		}
	}

	// With its real token the chaperone may read and patch that
	// ListenerSet's status only: not another ListenerSet's, not the spec.
	saCfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	must(t, err)
	pods := gatewayclient.NewForConfigOrDie(saCfg).GatewayV1().ListenerSets(lsNS)
	other := ls.DeepCopy()
	other.Name, other.ResourceVersion = "other", ""
	_, err = lsets.Create(ctx, other, metav1.CreateOptions{})
	must(t, err)
	if _, err := pods.Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading another ListenerSet as the chaperone: %v, want Forbidden", err)
	}
	if _, err := pods.ApplyStatus(ctx, gwapply.ListenerSet("other", lsNS).WithStatus(gwapply.ListenerSetStatus()),
		metav1.ApplyOptions{FieldManager: gatewaystatus.ListenerFieldManager, Force: true}); !apierrors.IsForbidden(err) {
		t.Errorf("patching another ListenerSet's status as the chaperone: %v, want Forbidden", err)
	}
	if _, err := pods.Apply(ctx, gwapply.ListenerSet("team", lsNS).WithLabels(map[string]string{"x": "y"}),
		metav1.ApplyOptions{FieldManager: gatewaystatus.ListenerFieldManager, Force: true}); !apierrors.IsForbidden(err) {
		t.Errorf("patching the ListenerSet's spec as the chaperone: %v, want Forbidden", err)
	}
}

// TestListenerSetConditions: the statuses of the ListenerSet listeners
// among hitch's go to their ListenerSets by their names there, with the
// ListenerSet's generation; the Gateway's own listeners, and those of a
// ListenerSet without a recorded generation, are left out.
func TestListenerSetConditions(t *testing.T) {
	team, other := object.Ref{Namespace: "apps", Name: "team"}, object.Ref{Namespace: "apps", Name: "other"}
	ok := func(name string) tlsterm.ListenerStatus {
		return tlsterm.ListenerStatus{Name: name, Status: metav1.ConditionTrue, Reason: gatewayv1.ListenerReasonResolvedRefs, Message: "ok"}
	}
	bad := tlsterm.ListenerStatus{Name: "apps/team/b", Status: metav1.ConditionFalse, Reason: gatewayv1.ListenerReasonInvalidCertificateRef, Message: "missing"}
	tests := []struct {
		name string
		st   []tlsterm.ListenerStatus
		gens map[object.Ref]int64
		want map[object.Ref]gatewaystatus.ListenerSetConditions
	}{
		{"none", nil, nil, map[object.Ref]gatewaystatus.ListenerSetConditions{}},
		{"the Gateway's own only", []tlsterm.ListenerStatus{ok("https")}, map[object.Ref]int64{team: 1},
			map[object.Ref]gatewaystatus.ListenerSetConditions{}},
		{"two listeners of one ListenerSet", []tlsterm.ListenerStatus{ok("https"), ok("apps/team/a"), bad}, map[object.Ref]int64{team: 4},
			map[object.Ref]gatewaystatus.ListenerSetConditions{team: {Generation: 4, Conditions: []gatewaystatus.ListenerCondition{
				{Listener: "a", Status: metav1.ConditionTrue, Reason: gatewayv1.ListenerReasonResolvedRefs, Message: "ok"},
				{Listener: "b", Status: metav1.ConditionFalse, Reason: gatewayv1.ListenerReasonInvalidCertificateRef, Message: "missing"},
			}}}},
		{"a ListenerSet without generation", []tlsterm.ListenerStatus{ok("apps/team/a"), ok("apps/other/x")}, map[object.Ref]int64{other: 2},
			map[object.Ref]gatewaystatus.ListenerSetConditions{other: {Generation: 2, Conditions: []gatewaystatus.ListenerCondition{
				{Listener: "x", Status: metav1.ConditionTrue, Reason: gatewayv1.ListenerReasonResolvedRefs, Message: "ok"},
			}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := listenerSetConditions(tc.st, tc.gens); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("listenerSetConditions = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := gatewayListenerConditions([]tlsterm.ListenerStatus{ok("https"), ok("apps/team/a")}); len(got) != 1 || got[0].Listener != "https" {
		t.Errorf("gatewayListenerConditions = %+v, want the Gateway's own listener only", got)
	}
}
