package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
)

// TestAccHTTPRouteStatusRoleProviderRoles: as an identity with exactly the
// security guide's roles (the namespace role bound in the Gateway's
// namespace only), a route in another namespace writes there the Role and
// RoleBinding that let the Gateway's pods patch its status (Kubernetes
// lets the provider grant only what it holds), with exactly the route's
// rules; destroying the route deletes them.
func TestAccHTTPRouteStatusRoleProviderRoles(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns, apps := cp.Namespace(t), cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	name := gwruntime.RouteStatusRoleName(gw, object.Ref{Namespace: apps, Name: "web"})
	createService(t, cp, apps, "web")
	kubeconfig, _ := providerIdentity(t, cp, ProviderClusterRules(), ns)
	class := className(t, cp)
	base := identityClassHCL(kubeconfig, class, ns) + fmt.Sprintf(`
resource "varnishgw_gateway" "test" {
  namespace          = %[1]q
  name               = "edge"
  gateway_class_name = varnishgw_gateway_class.test.name
  wait_for_rollout   = false
  listener {
    name = "http"
    port = 8080
    allowed_routes {
      namespaces = "All"
    }
  }
}
`, ns)
	route := base + fmt.Sprintf(`
resource "varnishgw_http_route" "web" {
  namespace = %q
  name      = "web"
  parent_ref {
    name      = varnishgw_gateway.test.name
    namespace = %q
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, apps, ns)
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: protoV6ProviderFactories, Steps: []resource.TestStep{
		{
			Config: route,
			Check: func(*terraform.State) error {
				role, err := cp.Client.RbacV1().Roles(apps).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("the route's status Role: %v", err)
				}
				want := gwruntime.RouteStatusRules("web")
				if len(role.Rules) != len(want) {
					return fmt.Errorf("Role rules = %+v, want %+v", role.Rules, want)
				}
				for i := range want {
					if !equalRule(role.Rules[i], want[i]) {
						return fmt.Errorf("Role rule %d = %+v, want %+v", i, role.Rules[i], want[i])
					}
				}
				rb, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("the route's status RoleBinding: %v", err)
				}
				if len(rb.Subjects) != 1 || rb.Subjects[0].Name != gwruntime.Name(gw) || rb.Subjects[0].Namespace != ns || rb.RoleRef.Name != name {
					return fmt.Errorf("RoleBinding = %+v %+v, want the Role bound to %s/%s", rb.RoleRef, rb.Subjects, ns, gwruntime.Name(gw))
				}
				return nil
			},
		},
		{
			Config: base,
			Check: func(*terraform.State) error {
				if _, err := cp.Client.RbacV1().Roles(apps).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the route's status Role after the route was destroyed: %v, want NotFound", err)
				}
				if _, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the route's status RoleBinding after the route was destroyed: %v, want NotFound", err)
				}
				return nil
			},
		},
	}})
}
