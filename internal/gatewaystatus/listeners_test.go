package gatewaystatus

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func listenerCondition(gw *gatewayv1.Gateway, listener, typ string) *metav1.Condition {
	for _, ls := range gw.Status.Listeners {
		if string(ls.Name) == listener {
			for i := range ls.Conditions {
				if ls.Conditions[i].Type == typ {
					return &ls.Conditions[i]
				}
			}
		}
	}
	return nil
}

// TestListenerResolvedRefsOwnership: with the real API server, the
// chaperone applies only status.listeners[name].conditions[ResolvedRefs]
// under its field manager, as a ServiceAccount with the chaperone's rights,
// while the provider's manager owns the rest of the listener entry
// (supportedKinds, attachedRoutes, Accepted); each manager's applies leave
// the other's fields alone. Before the provider wrote the entry, the apply
// is refused (required fields missing) and Run retries.
func TestListenerResolvedRefsOwnership(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "chaperone"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways"}, ResourceNames: []string{"gw"}, Verbs: []string{"get"}},
		{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gateways/status"}, ResourceNames: []string{"gw"}, Verbs: []string{"get", "patch"}},
	}}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "chaperone"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "chaperone"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "chaperone"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "chaperone")
	if err != nil {
		t.Fatal(err)
	}
	gws := cp.Gateway.GatewayV1().Gateways(ns)
	mode := gatewayv1.TLSModeTerminate
	gw, err := gws.Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "varnishgw", Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
				Mode: &mode, CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := NewListenerWriter(gatewayclient.NewForConfigOrDie(cfg), ns, "gw", nil)
	want := []ListenerCondition{{Listener: "https", Status: metav1.ConditionFalse, Reason: gatewayv1.ListenerReasonInvalidCertificateRef, Message: "Secret " + ns + "/cert: not found"}}

	// Before the provider has written the listener's entry.
	// The API server refuses it: attachedRoutes is required.
	if err := w.Apply(ctx, gw.Generation, want); err == nil || !strings.Contains(err.Error(), "attachedRoutes: Required value") {
		t.Errorf("apply before the provider's listener entry: %v, want attachedRoutes: Required value", err)
	}

	// The provider's listener entries.
	provider := func(msg string) {
		t.Helper()
		st := gwapply.GatewayStatus()
		for _, name := range []string{"http", "https"} {
			st.WithListeners(gwapply.ListenerStatus().WithName(gatewayv1.SectionName(name)).WithAttachedRoutes(0).
				WithSupportedKinds(gwapply.RouteGroupKind().WithGroup(gatewayv1.GroupName).WithKind("HTTPRoute")).
				WithConditions(metav1apply.Condition().WithType("Accepted").WithStatus(metav1.ConditionTrue).WithReason("Accepted").
					WithMessage(msg).WithObservedGeneration(gw.Generation).WithLastTransitionTime(metav1.Now())))
		}
		if _, err := gws.ApplyStatus(ctx, gwapply.Gateway("gw", ns).WithStatus(st), metav1.ApplyOptions{FieldManager: "varnishgw-provider", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	provider("by the provider")
	if err := w.Apply(ctx, gw.Generation, want); err != nil {
		t.Fatalf("apply ResolvedRefs next to the provider's listener entry: %v", err)
	}
	check := func(acceptedMsg string) {
		t.Helper()
		got, err := gws.Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := listenerCondition(got, "https", "ResolvedRefs")
		if r == nil || r.Status != metav1.ConditionFalse || r.Reason != "InvalidCertificateRef" || r.ObservedGeneration != gw.Generation {
			t.Errorf("https ResolvedRefs = %+v", r)
		}
		if r := listenerCondition(got, "http", "ResolvedRefs"); r != nil {
			t.Errorf("the HTTP listener got a ResolvedRefs from the chaperone: %+v", r)
		}
		for _, l := range []string{"http", "https"} {
			if a := listenerCondition(got, l, "Accepted"); a == nil || a.Message != acceptedMsg {
				t.Errorf("%s Accepted = %+v, want the provider's %q", l, a, acceptedMsg)
			}
		}
		for _, ls := range got.Status.Listeners {
			if len(ls.SupportedKinds) != 1 {
				t.Errorf("%s supportedKinds = %v", ls.Name, ls.SupportedKinds)
			}
		}
	}
	check("by the provider")
	// The provider applies its entries again without ResolvedRefs: the
	// chaperone's condition stays.
	provider("again")
	check("again")
	// The chaperone's Programmed writer applies its condition: the
	// listener condition (another field manager) stays, and the other way
	// round.
	pw := NewWriter(gatewayclient.NewForConfigOrDie(cfg), ns, "gw", nil)
	if err := pw.Apply(ctx, ForError(gw.Generation, nil, false)); err != nil {
		t.Fatal(err)
	}
	check("again")
	want[0].Message = "changed"
	if err := w.Apply(ctx, gw.Generation, want); err != nil {
		t.Fatal(err)
	}
	got, err := gws.Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := condition(got, "Programmed"); p == nil || p.Status != metav1.ConditionTrue {
		t.Errorf("Programmed lost after the listener writer's apply: %+v", got.Status.Conditions)
	}
}
