package routing

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestValidateGateway(t *testing.T) {
	https := httpsListener("https", 443, "", gatewayv1.SecretObjectReference{Name: "cert"})
	mixed := https
	mixed.Name, mixed.Port = "mixed", 80
	tcp := listener("tcp", 9000, "")
	tcp.Protocol = gatewayv1.TCPProtocolType
	kinds := listener("kinds", 81, "")
	kinds.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}, {Kind: "GRPCRoute"}}}
	badSel := fromNS(listener("sel", 82, ""), gatewayv1.NamespacesFromSelector, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}})
	tests := []struct {
		name      string
		listeners []gatewayv1.Listener
		wantErr   string
	}{
		{"valid", []gatewayv1.Listener{listener("http", 80, ""), listener("foo", 80, "foo.example.com"), https}, ""},
		{"no listeners", nil, "spec.listeners: Required"},
		{"duplicate name", []gatewayv1.Listener{listener("a", 80, ""), listener("a", 81, "")}, "spec.listeners[1].name: Duplicate"},
		{"bad name", []gatewayv1.Listener{listener("A_1", 80, "")}, "spec.listeners[0].name"},
		{"bad port", []gatewayv1.Listener{listener("a", 0, "")}, "spec.listeners[0].port"},
		{"tcp", []gatewayv1.Listener{tcp}, `spec.listeners[0].protocol: Unsupported value: "TCP"`},
		{"http and https on one port", []gatewayv1.Listener{listener("a", 80, ""), mixed}, "one port (socket port-80) serves one protocol"},
		{"same port and hostname", []gatewayv1.Listener{listener("a", 80, "x.org"), listener("b", 80, "x.org")}, "listener a already serves this hostname on port 80"},
		{"upper-case hostname", []gatewayv1.Listener{listener("a", 80, "X.org")}, "must be lower case: x.org"},
		{"bad hostname", []gatewayv1.Listener{listener("a", 80, "*")}, "spec.listeners[0].hostname"},
		{"unsupported kind", []gatewayv1.Listener{kinds}, `spec.listeners[0].allowedRoutes.kinds[1]: Unsupported value: "GRPCRoute"`},
		{"bad selector", []gatewayv1.Listener{badSel}, "spec.listeners[0].allowedRoutes.namespaces.selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateGateway(gateway(tt.listeners...)).ToAggregate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func httpsListener(name string, port int32, host string, refs ...gatewayv1.SecretObjectReference) gatewayv1.Listener {
	l := listener(name, port, host)
	l.Protocol = gatewayv1.HTTPSProtocolType
	l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: refs}
	return l
}

func TestValidateListenerTLS(t *testing.T) {
	secret := gatewayv1.SecretObjectReference{Name: "www-cert"}
	with := func(f func(*gatewayv1.Listener)) gatewayv1.Listener {
		l := httpsListener("https", 443, "www.example.com", secret)
		f(&l)
		return l
	}
	tests := []struct {
		name    string
		l       gatewayv1.Listener
		wantErr []string // each in the errors; none: valid
	}{
		{"one certificate", httpsListener("https", 443, "", secret), nil},
		{"several certificates, one in another namespace", httpsListener("https", 443, "", secret,
			gatewayv1.SecretObjectReference{Group: ptr(gatewayv1.Group("")), Kind: ptr(gatewayv1.Kind("Secret")), Name: "other", Namespace: ptr(gatewayv1.Namespace("certs"))}), nil},
		{"mode Terminate", with(func(l *gatewayv1.Listener) { l.TLS.Mode = ptr(gatewayv1.TLSModeTerminate) }), nil},
		{"HTTP", listener("http", 80, ""), nil},
		{"HTTPS without tls", with(func(l *gatewayv1.Listener) { l.TLS = nil }),
			[]string{"spec.listeners[0].tls: Required value: an HTTPS listener needs tls with a certificateRef"}},
		{"HTTP with tls", with(func(l *gatewayv1.Listener) { l.Protocol = gatewayv1.HTTPProtocolType }),
			[]string{"spec.listeners[0].tls: Forbidden: an HTTP listener has no TLS: remove tls, or set protocol HTTPS"}},
		{"Passthrough", with(func(l *gatewayv1.Listener) { l.TLS.Mode = ptr(gatewayv1.TLSModePassthrough) }),
			[]string{`spec.listeners[0].tls.mode: Unsupported value: "Passthrough": Passthrough hands the encrypted connection to a backend`, "set mode Terminate"}},
		{"options", with(func(l *gatewayv1.Listener) {
			l.TLS.Options = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"b": "1", "a": "2"}
		}), []string{"spec.listeners[0].tls.options: Forbidden: varnishgw has no implementation-specific TLS options (got a, b): remove options"}},
		{"no certificate", with(func(l *gatewayv1.Listener) { l.TLS.CertificateRefs = nil }),
			[]string{"spec.listeners[0].tls.certificateRefs: Required value: at least one Secret of type kubernetes.io/tls"}},
		{"too many certificates", with(func(l *gatewayv1.Listener) {
			l.TLS.CertificateRefs = make([]gatewayv1.SecretObjectReference, 65)
			for i := range l.TLS.CertificateRefs {
				l.TLS.CertificateRefs[i].Name = gatewayv1.ObjectName(fmt.Sprintf("c%d", i))
			}
		}), []string{"spec.listeners[0].tls.certificateRefs: Too many: 65: must have at most 64 items"}},
		{"a ConfigMap", with(func(l *gatewayv1.Listener) { l.TLS.CertificateRefs[0].Kind = ptr(gatewayv1.Kind("ConfigMap")) }),
			[]string{`spec.listeners[0].tls.certificateRefs[0].kind: Unsupported value: "ConfigMap": certificates come from Secrets of type kubernetes.io/tls: set kind Secret`}},
		{"another group", with(func(l *gatewayv1.Listener) { l.TLS.CertificateRefs[0].Group = ptr(gatewayv1.Group("cert-manager.io")) }),
			[]string{`spec.listeners[0].tls.certificateRefs[0].group: Unsupported value: "cert-manager.io": certificates come from core Secrets: remove group`}},
		{"bad name", with(func(l *gatewayv1.Listener) { l.TLS.CertificateRefs[0].Name = "Www" }),
			[]string{`spec.listeners[0].tls.certificateRefs[0].name: Invalid value: "Www": must be lower case`}},
		{"bad namespace", with(func(l *gatewayv1.Listener) { l.TLS.CertificateRefs[0].Namespace = ptr(gatewayv1.Namespace("a.b")) }),
			[]string{`spec.listeners[0].tls.certificateRefs[0].namespace: Invalid value: "a.b": must not contain '.'`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateGateway(gateway(tt.l))
			if len(tt.wantErr) == 0 {
				if len(errs) > 0 {
					t.Fatalf("got %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("no error, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errs.ToAggregate().Error(), w) {
					t.Errorf("got %v\nwant %q in it", errs.ToAggregate(), w)
				}
			}
		})
	}
}

func TestCertificateSecrets(t *testing.T) {
	ns := func(n string) *gatewayv1.Namespace { return ptr(gatewayv1.Namespace(n)) }
	gw := gateway(
		listener("http", 80, ""),
		httpsListener("a", 443, "a.example.com", gatewayv1.SecretObjectReference{Name: "b"}, gatewayv1.SecretObjectReference{Name: "a"},
			gatewayv1.SecretObjectReference{Name: "shared", Namespace: ns("certs")}),
		httpsListener("b", 443, "b.example.com", gatewayv1.SecretObjectReference{Name: "a", Namespace: ns("infra")},
			gatewayv1.SecretObjectReference{Name: "shared", Namespace: ns("certs")},
			gatewayv1.SecretObjectReference{Name: "x", Kind: ptr(gatewayv1.Kind("ConfigMap"))}),
	)
	got := CertificateSecrets(gw)
	want := []object.Ref{{Namespace: "certs", Name: "shared"}, {Namespace: "infra", Name: "a"}, {Namespace: "infra", Name: "b"}}
	if !slices.Equal(got, want) {
		t.Errorf("CertificateSecrets = %v, want %v", got, want)
	}
	if got := CertificateSecrets(gateway(listener("http", 80, ""))); len(got) != 0 {
		t.Errorf("an HTTP gateway has certificate Secrets %v", got)
	}
}

func TestCertificateRefPermitted(t *testing.T) {
	grant := func(ns string, from gatewayv1.ReferenceGrantFrom, to gatewayv1.ReferenceGrantTo) *gatewayv1.ReferenceGrant {
		return &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
			Spec: gatewayv1.ReferenceGrantSpec{From: []gatewayv1.ReferenceGrantFrom{from}, To: []gatewayv1.ReferenceGrantTo{to}}}
	}
	fromGW := gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "infra"}
	allSecrets := gatewayv1.ReferenceGrantTo{Group: "", Kind: "Secret"}
	tests := []struct {
		name     string
		grants   []*gatewayv1.ReferenceGrant
		secretNS string
		want     bool
	}{
		{"same namespace", nil, "infra", true},
		{"no grant", nil, "certs", false},
		{"every Secret", []*gatewayv1.ReferenceGrant{grant("certs", fromGW, allSecrets)}, "certs", true},
		{"this Secret", []*gatewayv1.ReferenceGrant{grant("certs", fromGW, gatewayv1.ReferenceGrantTo{Kind: "Secret", Name: ptr(gatewayv1.ObjectName("www"))})}, "certs", true},
		{"another Secret", []*gatewayv1.ReferenceGrant{grant("certs", fromGW, gatewayv1.ReferenceGrantTo{Kind: "Secret", Name: ptr(gatewayv1.ObjectName("api"))})}, "certs", false},
		{"grant in another namespace", []*gatewayv1.ReferenceGrant{grant("other", fromGW, allSecrets)}, "certs", false},
		{"from HTTPRoutes", []*gatewayv1.ReferenceGrant{grant("certs", gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "infra"}, allSecrets)}, "certs", false},
		{"from another namespace", []*gatewayv1.ReferenceGrant{grant("certs", gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "other"}, allSecrets)}, "certs", false},
		{"to Services", []*gatewayv1.ReferenceGrant{grant("certs", fromGW, gatewayv1.ReferenceGrantTo{Kind: "Service"})}, "certs", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CertificateRefPermitted(tt.grants, "infra", tt.secretNS, "www"); got != tt.want {
				t.Errorf("CertificateRefPermitted = %v, want %v", got, tt.want)
			}
		})
	}
}
