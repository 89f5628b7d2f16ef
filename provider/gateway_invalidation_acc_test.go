package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8srand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/invalidation"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// invalidationEndpointCheck checks what invalidation_endpoint_port = port
// (0: unset) makes of gw's runtime: the chaperone's --invalidate-addr and
// its container port "invalidate" (no other container has it), the
// endpoint's rules in the pods' Role, the gateway's Service without the
// port, and the ClusterRoleBinding to system:auth-delegator, labelled as
// the gateway's objects, with which the pods' ServiceAccount (its real
// token) may create TokenReviews and SubjectAccessReviews; without it, it
// may not.
func invalidationEndpointCheck(cp *testenv.ControlPlane, gw object.Ref, port int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		d, err := getDeployment(cp, gw)
		if err != nil {
			return err
		}
		flag := fmt.Sprintf("--invalidate-addr=:%d", port)
		for _, c := range d.Spec.Template.Spec.Containers {
			var got int32
			for _, p := range c.Ports {
				if p.Name == gwruntime.InvalidatePortName {
					got = p.ContainerPort
				}
			}
			hasFlag := slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--invalidate-addr") })
			switch {
			case c.Name == gwruntime.ChaperoneContainer && port != 0 && (!slices.Contains(c.Args, flag) || got != port):
				return fmt.Errorf("chaperone container: args %q, port %q = %d; want %s and port %d", c.Args, gwruntime.InvalidatePortName, got, flag, port)
			case c.Name == gwruntime.ChaperoneContainer && port == 0 && (hasFlag || got != 0):
				return fmt.Errorf("chaperone container without the endpoint: args %q, port %q = %d", c.Args, gwruntime.InvalidatePortName, got)
			case c.Name != gwruntime.ChaperoneContainer && (hasFlag || got != 0):
				return fmt.Errorf("container %s: args %q, port %q = %d; the endpoint is the chaperone's", c.Name, c.Args, gwruntime.InvalidatePortName, got)
			}
		}
		role, err := cp.Client.RbacV1().Roles(gw.Namespace).Get(ctx, gwruntime.Name(gw), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, want := range gwruntime.InvalidateEndpointRules() {
			if has := slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return equalRule(r, want) }); has != (port != 0) {
				return fmt.Errorf("Role %s: rule %+v present %v, want %v", role.Name, want, has, port != 0)
			}
		}
		svc, err := cp.Client.CoreV1().Services(gw.Namespace).Get(ctx, gwruntime.Name(gw), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range svc.Spec.Ports {
			if port != 0 && (p.Port == port || p.TargetPort.IntValue() == int(port) || p.TargetPort.String() == gwruntime.InvalidatePortName) {
				return fmt.Errorf("the gateway's Service exposes the invalidation endpoint: %+v", p)
			}
		}
		name := gwruntime.InvalidateAuthBindingName(gw)
		crb, err := cp.Client.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		switch {
		case port == 0 && !apierrors.IsNotFound(err):
			return fmt.Errorf("without the endpoint, ClusterRoleBinding %s: %v, want NotFound", name, err)
		case port != 0 && err != nil:
			return fmt.Errorf("ClusterRoleBinding %s: %w", name, err)
		case port != 0:
			want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: gwruntime.Name(gw), Namespace: gw.Namespace}}
			if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != gwruntime.AuthDelegatorClusterRole || !slices.Equal(crb.Subjects, want) {
				return fmt.Errorf("ClusterRoleBinding %s binds %+v to %+v, want %s to %+v", name, crb.RoleRef, crb.Subjects, gwruntime.AuthDelegatorClusterRole, want)
			}
			if !hasLabels(crb, gwruntime.RuntimeLabels(gw)) || crb.Labels[gatewayv1.GatewayNameLabelKey] != gw.Name {
				return fmt.Errorf("ClusterRoleBinding %s has labels %v, want the gateway's %v", name, crb.Labels, gwruntime.RuntimeLabels(gw))
			}
		}
		return podsMayReviewTokens(cp, gw, port != 0)
	}
}

// podsMayReviewTokens checks, with the real token of gw's ServiceAccount,
// whether it may create TokenReviews and SubjectAccessReviews (what the
// endpoint checks its callers with).
func podsMayReviewTokens(cp *testenv.ControlPlane, gw object.Ref, want bool) error {
	ctx := context.Background()
	cfg, err := cp.ServiceAccountConfig(ctx, gw.Namespace, gwruntime.Name(gw))
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token", Audiences: []string{invalidation.Audience}}}, metav1.CreateOptions{})
	if (err == nil) != want || (err != nil && !apierrors.IsForbidden(err)) {
		return fmt.Errorf("the pods' ServiceAccount creating a TokenReview: %v, want allowed %v", err, want)
	}
	_, err = kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "someone", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: gw.Namespace, Verb: "create", Group: "varnishgw.dev", Resource: "cacheinvalidations"}}},
		metav1.CreateOptions{})
	if (err == nil) != want || (err != nil && !apierrors.IsForbidden(err)) {
		return fmt.Errorf("the pods' ServiceAccount creating a SubjectAccessReview: %v, want allowed %v", err, want)
	}
	return nil
}

// TestAccGatewayInvalidationEndpoint: invalidation_endpoint_port in both
// modes turns the endpoint on (flag, container port, Role rules, the
// ClusterRoleBinding to system:auth-delegator) and nothing else (the
// gateway's Service, a LoadBalancer here, does not get the port); import
// reads it back; a deleted ClusterRoleBinding shows in the plan and comes
// back; removing the attribute turns it all off; destroy deletes the
// ClusterRoleBinding. A port that clashes fails the plan, naming the
// attribute and value.
func TestAccGatewayInvalidationEndpoint(t *testing.T) {
	cp := accPreCheck(t)
	for _, mode := range []string{gwruntime.ModeSupervise, gwruntime.ModeSidecar} {
		t.Run(mode, func(t *testing.T) {
			ns := cp.Namespace(t)
			class := "vgw-" + k8srand.String(6)
			gw := object.Ref{Namespace: ns, Name: "edge"}
			body := listenerHCL("http", 8080) + "  service_type = \"LoadBalancer\"\n  mode = \"" + mode + "\"\n"
			with := func(port int) string {
				return gatewayConfig(cp, ns, class, "", body+fmt.Sprintf("  invalidation_endpoint_port = %d\n", port))
			}
			binding := gwruntime.InvalidateAuthBindingName(gw)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				CheckDestroy: func(*terraform.State) error {
					if _, err := cp.Client.RbacV1().ClusterRoleBindings().Get(context.Background(), binding, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("after destroy, ClusterRoleBinding %s: %v, want NotFound", binding, err)
					}
					return nil
				},
				Steps: []resource.TestStep{
					{Config: with(8080), PlanOnly: true, ExpectError: words(`invalidation_endpoint_port = 8080 is the port of listener "http"`)},
					{Config: with(9091), PlanOnly: true, ExpectError: words(`invalidation_endpoint_port = 9091 is the port of the chaperone's health server`)},
					{Config: with(80), PlanOnly: true, ExpectError: words(`invalidation_endpoint_port value must be between 1024 and 65535, got: 80`)},
					{Config: with(9092), Check: resource.ComposeAggregateTestCheckFunc(
						invalidationEndpointCheck(cp, gw, 9092), resource.TestCheckResourceAttr("varnishgw_gateway.test", "invalidation_endpoint_port", "9092"))},
					{ResourceName: "varnishgw_gateway.test", ImportState: true, ImportStateId: ns + "/edge", ImportStateVerify: true,
						ImportStateVerifyIgnore: []string{"wait_for_rollout"}},
					// Deleted outside Terraform: the plan shows an update,
					// which writes it again.
					{PreConfig: func() {
						if err := cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{}); err != nil {
							t.Fatal(err)
						}
					}, Config: with(9092), PlanOnly: true, ExpectNonEmptyPlan: true},
					{Config: with(9092), Check: invalidationEndpointCheck(cp, gw, 9092)},
					{Config: with(9093), Check: invalidationEndpointCheck(cp, gw, 9093)},
					{Config: gatewayConfig(cp, ns, class, "", body), Check: resource.ComposeAggregateTestCheckFunc(
						invalidationEndpointCheck(cp, gw, 0), resource.TestCheckNoResourceAttr("varnishgw_gateway.test", "invalidation_endpoint_port"))},
					{Config: with(9092), Check: invalidationEndpointCheck(cp, gw, 9092)},
				},
			})
		})
	}
}

// withoutEndpointRights is ProviderClusterRules without the rules the
// invalidation endpoint needs: enough for gateways without it.
func withoutEndpointRights() []rbacv1.PolicyRule {
	return slices.DeleteFunc(withoutBind(), func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "clusterrolebindings") })
}

// withoutBind is ProviderClusterRules without the bind rule.
func withoutBind() []rbacv1.PolicyRule {
	return slices.DeleteFunc(ProviderClusterRules(), func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, "bind") })
}

// TestProviderRoleBindsOnlyAuthDelegator: with the real token of an
// identity holding the provider's cluster-wide role, Kubernetes' RBAC
// escalation check lets it bind system:auth-delegator and no ClusterRole
// whose rights it does not hold (built-in roles with rules: the test
// control plane runs no controller manager, so the aggregated roles admin,
// edit and view are empty there and prove nothing); without its bind rule,
// not system:auth-delegator either.
func TestProviderRoleBindsOnlyAuthDelegator(t *testing.T) {
	cp := testenv.Get(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		rules   []rbacv1.PolicyRule
		allowed []string
		refused []string
	}{
		{"the guide's role", ProviderClusterRules(), []string{gwruntime.AuthDelegatorClusterRole},
			[]string{"cluster-admin", "system:kube-scheduler", "system:controller:clusterrole-aggregation-controller"}},
		{"without bind", withoutBind(), nil, []string{gwruntime.AuthDelegatorClusterRole, "cluster-admin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, kube := providerIdentity(t, cp, tc.rules)
			sa := cp.Namespace(t)
			for _, role := range append(slices.Clone(tc.allowed), tc.refused...) {
				crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind-test-" + sa + "-" + strings.ReplaceAll(role, ":", "-")},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
					Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa, Name: "pods"}}}
				_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
				if err == nil {
					t.Cleanup(func() {
						_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
					})
				}
				switch want := slices.Contains(tc.allowed, role); {
				case want && err != nil:
					t.Errorf("binding %s: %v, want allowed", role, err)
				case !want && (err == nil || !apierrors.IsForbidden(err)):
					t.Errorf("binding %s: %v, want Forbidden", role, err)
				}
			}
		})
	}
}

// TestAccGatewayInvalidationEndpointProviderRoles applies a gateway with
// the invalidation endpoint, removes it and destroys the gateway as an
// identity holding only the provider's roles of the security guide; with
// its cluster-wide role lacking bind of system:auth-delegator, the apply
// fails at the ClusterRoleBinding. With a role lacking only the
// endpoint's rights (no ClusterRoleBinding rights), a gateway without the
// endpoint is applied, planned and destroyed.
func TestAccGatewayInvalidationEndpointProviderRoles(t *testing.T) {
	cp := accPreCheck(t)
	for _, tc := range []struct {
		name    string
		rules   []rbacv1.PolicyRule
		wantErr string
	}{
		{"the guide's roles", ProviderClusterRules(), ""},
		{"without bind", withoutBind(), "apply ClusterRoleBinding varnishgw-invalidate-"},
		{"role without endpoint rights, no endpoint", withoutEndpointRights(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			gw := object.Ref{Namespace: ns, Name: "edge"}
			kubeconfig, _ := providerIdentity(t, cp, tc.rules, ns)
			class := className(t, cp)
			config := func(extra string) string {
				return identityClassHCL(kubeconfig, class, ns) + fmt.Sprintf(`
resource "varnishgw_gateway" "test" {
  namespace          = %[1]q
  name               = "edge"
  gateway_class_name = varnishgw_gateway_class.test.name
  wait_for_rollout   = false
%[2]s
  listener {
    name = "http"
    port = 8080
  }
}
`, ns, extra)
			}
			binding := gwruntime.InvalidateAuthBindingName(gw)
			var steps []resource.TestStep
			switch {
			case tc.wantErr != "":
				steps = []resource.TestStep{{Config: config("  invalidation_endpoint_port = 9092"), ExpectError: words(tc.wantErr)}}
			case len(tc.rules) != len(ProviderClusterRules()):
				steps = []resource.TestStep{{Config: config(""), Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrSet("varnishgw_gateway.test", "start_hash"),
					resource.TestCheckNoResourceAttr("varnishgw_gateway.test", "invalidation_endpoint_port"))}}
			default:
				steps = []resource.TestStep{
					{Config: config("  invalidation_endpoint_port = 9092"), Check: invalidationEndpointCheck(cp, gw, 9092)},
					{Config: config(""), Check: invalidationEndpointCheck(cp, gw, 0)},
					{Config: config("  invalidation_endpoint_port = 9092"), Check: invalidationEndpointCheck(cp, gw, 9092)},
				}
			}
			resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: protoV6ProviderFactories, Steps: steps,
				CheckDestroy: func(*terraform.State) error {
					if _, err := cp.Client.RbacV1().ClusterRoleBindings().Get(context.Background(), binding, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("after destroy, ClusterRoleBinding %s: %v, want NotFound", binding, err)
					}
					return nil
				}})
		})
	}
}
