package tlssource

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/chaperone/internal/tlsterm"
)

func tlsSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("crt-" + name), "tls.key": []byte("key-" + name)}}
}

func gateway(refs ...gatewayv1.SecretObjectReference) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "gw", Generation: 3},
		Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: refs}},
		}},
	}
}

func grant(ns, fromNS, kind string, name *string) *gatewayv1.ReferenceGrant {
	return &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}, Spec: gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: gatewayv1.Kind(kind), Namespace: gatewayv1.Namespace(fromNS)}},
		To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: (*gatewayv1.ObjectName)(name)}},
	}}
}

func TestResolve(t *testing.T) {
	secrets := map[tlsterm.SecretRef]*corev1.Secret{
		{Namespace: "edge", Name: "a"}:    tlsSecret("edge", "a"),
		{Namespace: "certs", Name: "b"}:   tlsSecret("certs", "b"),
		{Namespace: "edge", Name: "opaq"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "opaq"}, Type: corev1.SecretTypeOpaque},
	}
	lookup := func(r tlsterm.SecretRef) *corev1.Secret { return secrets[r] }
	certs := gatewayv1.Namespace("certs")
	tests := []struct {
		name   string
		ref    gatewayv1.SecretObjectReference
		grants []*gatewayv1.ReferenceGrant
		reason gatewayv1.ListenerConditionReason // "" when it resolves
		errHas string
	}{
		{"same namespace", gatewayv1.SecretObjectReference{Name: "a"}, nil, "", ""},
		{"explicit group and kind", gatewayv1.SecretObjectReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Secret")), Name: "a"}, nil, "", ""},
		{"missing", gatewayv1.SecretObjectReference{Name: "nope"}, nil, gatewayv1.ListenerReasonInvalidCertificateRef, "not found: create a Secret of type kubernetes.io/tls named nope in namespace edge"},
		{"not a TLS Secret", gatewayv1.SecretObjectReference{Name: "opaq"}, nil, gatewayv1.ListenerReasonInvalidCertificateRef, `type "Opaque"`},
		{"another kind", gatewayv1.SecretObjectReference{Kind: ptr.To(gatewayv1.Kind("ConfigMap")), Name: "a"}, nil, gatewayv1.ListenerReasonInvalidCertificateRef, `kind "ConfigMap"`},
		{"other namespace without grant", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, nil, gatewayv1.ListenerReasonRefNotPermitted, "no ReferenceGrant in namespace certs"},
		{"grant from another namespace", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "other", "Gateway", nil)}, gatewayv1.ListenerReasonRefNotPermitted, "no ReferenceGrant"},
		{"grant for HTTPRoutes", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "edge", "HTTPRoute", nil)}, gatewayv1.ListenerReasonRefNotPermitted, "no ReferenceGrant"},
		{"grant for another Secret", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "edge", "Gateway", ptr.To("c"))}, gatewayv1.ListenerReasonRefNotPermitted, "no ReferenceGrant"},
		{"grant for every Secret", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "edge", "Gateway", nil)}, "", ""},
		{"grant for this Secret", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "edge", "Gateway", ptr.To("b"))}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := Resolve(gateway(tt.ref), lookup, tt.grants)
			if len(ls) != 1 || ls[0].Name != "https" || ls[0].Port != 443 || len(ls[0].Certificates) != 1 {
				t.Fatalf("listeners = %+v, want the HTTPS one with one certificate", ls)
			}
			c := ls[0].Certificates[0]
			if tt.reason == "" {
				if c.Err != nil || string(c.Cert) != "crt-"+string(tt.ref.Name) || string(c.Key) != "key-"+string(tt.ref.Name) {
					t.Fatalf("certificate = %+v, want the Secret's data", c)
				}
				return
			}
			if c.Err == nil || c.Reason != tt.reason || !strings.Contains(c.Err.Error(), tt.errHas) {
				t.Fatalf("certificate error %v reason %q, want %q containing %q", c.Err, c.Reason, tt.reason, tt.errHas)
			}
		})
	}
}

func TestRefs(t *testing.T) {
	certs := gatewayv1.Namespace("certs")
	gw := gateway(gatewayv1.SecretObjectReference{Name: "a"}, gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"},
		gatewayv1.SecretObjectReference{Name: "a"}, gatewayv1.SecretObjectReference{Kind: ptr.To(gatewayv1.Kind("ConfigMap")), Name: "c"})
	got := Refs(gw)
	want := []tlsterm.SecretRef{{Namespace: "edge", Name: "a"}, {Namespace: "certs", Name: "b"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Refs = %v, want %v", got, want)
	}
}

// TestResolveListenerSet: the HTTPS listener of a ListenerSet among a
// composed Gateway's listeners references Secrets as its ListenerSet: in
// another namespace than the ListenerSet's, a ReferenceGrant from kind
// ListenerSet of its namespace permits them, one from Gateways does not.
func TestResolveListenerSet(t *testing.T) {
	secrets := map[tlsterm.SecretRef]*corev1.Secret{
		{Namespace: "apps", Name: "own"}: tlsSecret("apps", "own"),
		{Namespace: "certs", Name: "b"}:  tlsSecret("certs", "b"),
	}
	lookup := func(r tlsterm.SecretRef) *corev1.Secret { return secrets[r] }
	apps, certs := gatewayv1.Namespace("apps"), gatewayv1.Namespace("certs")
	tests := []struct {
		name   string
		ref    gatewayv1.SecretObjectReference
		grants []*gatewayv1.ReferenceGrant
		reason gatewayv1.ListenerConditionReason
		errHas string
	}{
		{"the ListenerSet's namespace", gatewayv1.SecretObjectReference{Namespace: &apps, Name: "own"}, nil, "", ""},
		{"grant from the ListenerSet's namespace", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "apps", "ListenerSet", nil)}, "", ""},
		{"grant from Gateways", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "apps", "Gateway", nil), grant("certs", "edge", "Gateway", nil)}, gatewayv1.ListenerReasonRefNotPermitted,
			"lets ListenerSets of namespace apps reference the Secret b: create one (from group gateway.networking.k8s.io kind ListenerSet namespace apps"},
		{"grant to another namespace's ListenerSets", gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"}, []*gatewayv1.ReferenceGrant{grant("certs", "edge", "ListenerSet", nil)}, gatewayv1.ListenerReasonRefNotPermitted, "no ReferenceGrant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := gateway(gatewayv1.SecretObjectReference{Name: "unused"})
			gw.Spec.Listeners = append(gw.Spec.Listeners[:1], gatewayv1.Listener{Name: "apps/team/https", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType,
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{tt.ref}}})
			ls := Resolve(gw, lookup, tt.grants)
			if len(ls) != 1 || ls[0].Name != "apps/team/https" || len(ls[0].Certificates) != 1 {
				t.Fatalf("listeners = %+v", ls)
			}
			c := ls[0].Certificates[0]
			if tt.reason == "" {
				if c.Err != nil || string(c.Cert) != "crt-"+string(tt.ref.Name) {
					t.Fatalf("certificate = %+v, want the Secret's data", c)
				}
				return
			}
			if c.Err == nil || c.Reason != tt.reason || !strings.Contains(c.Err.Error(), tt.errHas) {
				t.Fatalf("certificate error %v reason %q, want %q containing %q", c.Err, c.Reason, tt.reason, tt.errHas)
			}
		})
	}
}

// TestGrantNamespaces: ReferenceGrants are watched where a Secret is
// outside its listener owner's namespace only: the Gateway's for its own
// listeners, the ListenerSet's for a ListenerSet's.
func TestGrantNamespaces(t *testing.T) {
	apps, certs, edge := gatewayv1.Namespace("apps"), gatewayv1.Namespace("certs"), gatewayv1.Namespace("edge")
	gw := gateway(gatewayv1.SecretObjectReference{Name: "a"}, gatewayv1.SecretObjectReference{Namespace: &certs, Name: "b"})
	gw.Spec.Listeners = append(gw.Spec.Listeners,
		gatewayv1.Listener{Name: "apps/team/own", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
			CertificateRefs: []gatewayv1.SecretObjectReference{{Namespace: &apps, Name: "own"}}}},
		gatewayv1.Listener{Name: "apps/team/gw", Port: 8444, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
			CertificateRefs: []gatewayv1.SecretObjectReference{{Namespace: &edge, Name: "a"}}}},
		gatewayv1.Listener{Name: "other/team/certs", Port: 8445, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
			CertificateRefs: []gatewayv1.SecretObjectReference{{Namespace: &certs, Name: "b"}}}})
	if got := strings.Join(GrantNamespaces(gw), ","); got != "certs,edge" {
		t.Errorf("GrantNamespaces = %s, want certs,edge", got)
	}
}
