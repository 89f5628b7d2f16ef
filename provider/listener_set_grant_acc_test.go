package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestAccListenerSetHTTPSGrantLater pins why a ReferenceGrant created
// after the apply waits for an apply (docs/guides/listener-sets.md, "Grants
// created after the apply"): the pods may read a ListenerSet listener's
// Secret of another namespace only once an apply has seen a grant for it.
// A ListenerSet has an HTTPS listener whose Secret is in a third
// namespace that no grant opens (and another on the same port with a
// Secret of its own namespace): it is not in the Gateway's annotation,
// no Role is written there, and the pods' own token cannot read the
// Secret, also once the grant exists and before an apply. The gateway's
// next plan sees the Role the grant calls for missing and updates the
// gateway; the apply writes the Role naming exactly that Secret and the
// listener into the annotation, and the pods' token reads the Secret.
// Once the grant is deleted the Role stays (the plan shows no change: the
// port keeps a served listener) and the pods may still read the Secret,
// until an apply that changes the ListenerSet removes the Role and the
// listener.
func TestAccListenerSetHTTPSGrantLater(t *testing.T) {
	cp := accPreCheck(t)
	ns, lsNS, certs := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	ctx := context.Background()
	gw := object.Ref{Namespace: ns, Name: "edge"}
	shared, _ := tlsSecret(t, certs, "shared", "shared.example.com")
	team, _ := tlsSecret(t, lsNS, "team-cert", "team.example.com")
	for _, s := range []*corev1.Secret{shared, team} {
		if _, err := cp.Client.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gateway := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+`
  allowed_listeners {
    namespaces = "All"
  }
`)
	set := func(plainHost string) string {
		return teamListenerSetHCL(lsNS,
			fmt.Sprintf("  listener {\n    name     = \"plain\"\n    port     = 8081\n    hostname = %q\n  }\n", plainHost),
			setHTTPSListenerHCL("team", "team.example.com", "team-cert", ""),
			setHTTPSListenerHCL("shared", "shared.example.com", "shared", certs))
	}
	grant := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: certs, Name: "listenersets-to-shared"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "ListenerSet", Namespace: gatewayv1.Namespace(lsNS)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: ptrTo(gatewayv1.ObjectName("shared"))}},
		},
	}
	roleName := gwruntime.CertificateRoleName(gw)
	// pods is the gateway pods' own identity.
	pods := func() (kubernetes.Interface, error) {
		cfg, err := cp.ServiceAccountConfig(ctx, ns, gwruntime.Name(gw))
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(cfg)
	}
	var podsRead func(want bool) error
	// served checks whether the shared listener is in the Gateway's
	// annotation, the Role in certs names exactly its Secret, and the
	// pods may read it, or none of these.
	served := func(want bool) error {
		live, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ann := live.Annotations[routing.ListenerSetListenersAnnotation]
		if got := strings.Contains(ann, lsNS+"/team/shared") && strings.Contains(ann, `"namespace":"`+certs+`"`); got != want {
			return fmt.Errorf("annotation %s = %s: shared listener with its Secret in %s recorded %v, want %v", routing.ListenerSetListenersAnnotation, ann, certs, got, want)
		}
		if !strings.Contains(ann, lsNS+"/team/plain") || !strings.Contains(ann, lsNS+"/team/team") {
			return fmt.Errorf("annotation %s = %s lacks the plain or the team listener", routing.ListenerSetListenersAnnotation, ann)
		}
		role, err := cp.Client.RbacV1().Roles(certs).Get(ctx, roleName, metav1.GetOptions{})
		switch {
		case want && err != nil:
			return fmt.Errorf("the Role in %s: %w", certs, err)
		case want && (len(role.Rules) == 0 || !slices.Equal(role.Rules[0].ResourceNames, []string{"shared"})):
			return fmt.Errorf("Role %s/%s rules %+v, want exactly the Secret shared", certs, roleName, role.Rules)
		case !want && !apierrors.IsNotFound(err):
			return fmt.Errorf("a Role %s/%s while no grant permits the Secret: %v", certs, roleName, err)
		}
		return podsRead(want)
	}
	podsRead = func(want bool) error {
		c, err := pods()
		if err != nil {
			return err
		}
		_, err = c.CoreV1().Secrets(certs).Get(ctx, "shared", metav1.GetOptions{})
		switch {
		case want && err != nil:
			return fmt.Errorf("the pods read %s/shared: %w", certs, err)
		case !want && !apierrors.IsForbidden(err):
			return fmt.Errorf("the pods read %s/shared: %v, want Forbidden", certs, err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: gateway + set("plain.example.com"),
			Check:  func(*terraform.State) error { return served(false) },
		}, {
			// The grant appears: nothing changes until an apply, whose
			// gateway plan sees the missing Role.
			PreConfig: func() {
				if _, err := cp.Gateway.GatewayV1().ReferenceGrants(certs).Create(ctx, grant, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := served(false); err != nil {
					t.Fatalf("once the grant exists, before an apply: %v", err)
				}
			},
			Config: gateway + set("plain.example.com"),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("varnishgw_gateway.test", plancheck.ResourceActionUpdate),
				plancheck.ExpectResourceAction("varnishgw_listener_set.team", plancheck.ResourceActionNoop),
			}},
			Check: func(*terraform.State) error { return served(true) },
		}, {
			// The grant is deleted: no plan shows the Role still there.
			PreConfig: func() {
				if err := cp.Gateway.GatewayV1().ReferenceGrants(certs).Delete(ctx, grant.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			Config:   gateway + set("plain.example.com"),
			PlanOnly: true,
		}, {
			// An apply that changes the ListenerSet drops the listener
			// and the Role.
			PreConfig: func() {
				if err := podsRead(true); err != nil {
					t.Fatalf("once the grant is deleted, before an apply: %v", err)
				}
			},
			Config: gateway + set("plain2.example.com"),
			Check:  func(*terraform.State) error { return served(false) },
		}},
	})
}
