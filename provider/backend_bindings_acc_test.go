package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// TestAccHTTPRouteBackendBindingsSameGatewayName: a route whose parents
// are two Gateways of one name in two namespaces, with backends in its own
// namespace, gets there one routes Role for each Gateway that also reads
// the backends, bound to each Gateway's own ServiceAccount, and no backend
// RoleBinding; the route's destroy deletes both Roles.
func TestAccHTTPRouteBackendBindingsSameGatewayName(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	g1, g2, apps := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	class := createClass(t, cp, gwruntime.ControllerName)
	gateways := []object.Ref{{Namespace: g1, Name: "public"}, {Namespace: g2, Name: "public"}}
	for _, gw := range gateways {
		createGatewayAllNamespaces(t, cp, gw, class)
	}
	createService(t, cp, apps, "web")
	route := object.Ref{Namespace: apps, Name: "web"}
	config := providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "web" {
  namespace = %[1]q
  name      = "web"
  parent_ref {
    name      = "public"
    namespace = %[2]q
  }
  parent_ref {
    name      = "public"
    namespace = %[3]q
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, apps, g1, g2)
	// Backends in the route's own namespace: each Gateway's routes Role
	// there reads them, and the route writes no backend RoleBinding.
	bindingsGone := func() error {
		for _, gw := range gateways {
			name := gwruntime.RouteStatusRoleName(gw)
			if _, err := cp.Client.RbacV1().Roles(apps).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("routes Role %s of Gateway %s after destroy: %v, want NotFound", name, gw, err)
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return bindingsGone() },
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: func(*terraform.State) error {
					for _, gw := range gateways {
						name := gwruntime.RouteStatusRoleName(gw)
						role, err := cp.Client.RbacV1().Roles(apps).Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return fmt.Errorf("routes Role of Gateway %s: %v", gw, err)
						}
						want := append(gwruntime.RouteStatusRules([]string{"web"}), gwruntime.BackendRules()...)
						if len(role.Rules) != len(want) {
							return fmt.Errorf("routes Role of Gateway %s has rules %+v, want %+v", gw, role.Rules, want)
						}
						for i := range want {
							if !equalRule(role.Rules[i], want[i]) {
								return fmt.Errorf("routes Role of Gateway %s: rule %d = %+v, want %+v", gw, i, role.Rules[i], want[i])
							}
						}
						rb, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return fmt.Errorf("routes RoleBinding of Gateway %s: %v", gw, err)
						}
						if len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != gw.Namespace || rb.Subjects[0].Name != gwruntime.Name(gw) || rb.RoleRef.Name != name {
							return fmt.Errorf("RoleBinding %s binds %+v to %+v, want %s bound to %s/%s",
								name, rb.RoleRef, rb.Subjects, name, gw.Namespace, gwruntime.Name(gw))
						}
						backend := gwruntime.BackendRoleBindingName(gw, route)
						if _, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, backend, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
							return fmt.Errorf("backend RoleBinding %s in the route's own namespace: %v, want NotFound", backend, err)
						}
					}
					return nil
				},
			},
		},
	})
}

// createGatewayAllNamespaces creates gw with one HTTP listener on port
// 8080 that admits routes from every namespace.
func createGatewayAllNamespaces(t *testing.T, cp *testenv.ControlPlane, gw object.Ref, class string) {
	t.Helper()
	all := gatewayv1.NamespacesFromAll
	obj := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: gw.Namespace},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: []gatewayv1.Listener{{
			Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}},
		}}},
	}
	if _, err := cp.Gateway.GatewayV1().Gateways(gw.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAccHTTPRouteBackendBindingsNeedAGrant: a route whose backend is in
// another namespace writes the backend RoleBinding there only when a
// ReferenceGrant permits the reference, so the Gateway's pods get no read
// right in a namespace that never agreed to the route; the route's next
// apply after the grant exists writes it, and one after the grant is gone
// deletes it.
func TestAccHTTPRouteBackendBindingsNeedAGrant(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	gwNS, apps, backs := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	class := createClass(t, cp, gwruntime.ControllerName)
	gw := object.Ref{Namespace: gwNS, Name: "public"}
	createGatewayAllNamespaces(t, cp, gw, class)
	createService(t, cp, backs, "api")
	route := object.Ref{Namespace: apps, Name: "web"}
	binding := gwruntime.BackendRoleBindingName(gw, route)
	config := func(weight int) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "web" {
  namespace       = %[1]q
  name            = "web"
  wait_for_served = false
  parent_ref {
    name      = "public"
    namespace = %[2]q
  }
  rule {
    backend_ref {
      namespace = %[3]q
      name      = "api"
      port      = 80
      weight    = %[4]d
    }
  }
}
`, apps, gwNS, backs, weight)
	}
	bound := func(want bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			_, err := cp.Client.RbacV1().RoleBindings(backs).Get(ctx, binding, metav1.GetOptions{})
			switch {
			case want && err != nil:
				return fmt.Errorf("backend RoleBinding %s/%s with the grant: %v", backs, binding, err)
			case !want && !apierrors.IsNotFound(err):
				return fmt.Errorf("backend RoleBinding %s/%s without a grant: %v, want NotFound", backs, binding, err)
			}
			return nil
		}
	}
	grant := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: backs, Name: "apps-to-api"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(apps)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(1), Check: bound(false)},
			{
				PreConfig: func() {
					if _, err := cp.Gateway.GatewayV1().ReferenceGrants(backs).Create(ctx, grant, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: config(2),
				Check:  bound(true),
			},
			{
				PreConfig: func() {
					if err := cp.Gateway.GatewayV1().ReferenceGrants(backs).Delete(ctx, grant.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: config(3),
				Check:  bound(false),
			},
		},
	})
}
