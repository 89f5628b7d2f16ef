package routing

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestValidateGateway(t *testing.T) {
	https := listener("https", 443, "")
	https.Protocol = gatewayv1.HTTPSProtocolType
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
