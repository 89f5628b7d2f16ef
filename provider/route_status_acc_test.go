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
// namespace only), routes in another namespace write there the one Role
// and RoleBinding that let the Gateway's pods patch their status
// (Kubernetes lets the provider grant only what it holds), naming exactly
// those routes; destroying a route removes it from the Role, and
// destroying the last deletes both.
func TestAccHTTPRouteStatusRoleProviderRoles(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns, apps := cp.Namespace(t), cp.Namespace(t)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	name := gwruntime.RouteStatusRoleName(gw)
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
	routeHCL := func(name string) string {
		return fmt.Sprintf(`
resource "varnishgw_http_route" %[1]q {
  namespace = %[2]q
  name      = %[1]q
  parent_ref {
    name      = varnishgw_gateway.test.name
    namespace = %[3]q
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, name, apps, ns)
	}
	// checkRole checks that the Role lists exactly routes and reads their
	// backends (in the routes' namespace), and its binding.
	checkRole := func(routes ...string) func(*terraform.State) error {
		return func(*terraform.State) error {
			role, err := cp.Client.RbacV1().Roles(apps).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("the routes' status Role: %v", err)
			}
			want := append(gwruntime.RouteStatusRules(routes), gwruntime.BackendRules()...)
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
				return fmt.Errorf("the routes' status RoleBinding: %v", err)
			}
			if len(rb.Subjects) != 1 || rb.Subjects[0].Name != gwruntime.Name(gw) || rb.Subjects[0].Namespace != ns || rb.RoleRef.Name != name {
				return fmt.Errorf("RoleBinding = %+v %+v, want the Role bound to %s/%s", rb.RoleRef, rb.Subjects, ns, gwruntime.Name(gw))
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: protoV6ProviderFactories, Steps: []resource.TestStep{
		{Config: base + routeHCL("web") + routeHCL("web2"), Check: checkRole("web", "web2")},
		{Config: base + routeHCL("web"), Check: checkRole("web")},
		{
			Config: base,
			Check: func(*terraform.State) error {
				if _, err := cp.Client.RbacV1().Roles(apps).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the routes' status Role after the last route was destroyed: %v, want NotFound", err)
				}
				if _, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the routes' status RoleBinding after the last route was destroyed: %v, want NotFound", err)
				}
				return nil
			},
		},
	}})
}
