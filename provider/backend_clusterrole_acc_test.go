package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8srand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// TestAccGatewayBackendClusterRoleNamesAlike: the gateways X-b/c and X/b-c,
// which earlier releases gave one backend ClusterRole
// (varnishgw-backends-X-b-c), get one each; destroying one leaves the
// other's, and the other's pods, with their real ServiceAccount token,
// still read Services, EndpointSlices and ReferenceGrants in the backends'
// namespace. The destroy also leaves the shared ClusterRole of the old name
// while a binding of the other gateway still references it; the other's
// route deletes both when it goes.
func TestAccGatewayBackendClusterRoleNamesAlike(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	base := "vgw-cr-" + k8srand.String(5)
	gwA := routing.ObjectRef{Namespace: namedNamespace(t, cp, base+"-b"), Name: "c"}
	gwB := routing.ObjectRef{Namespace: namedNamespace(t, cp, base), Name: "b-c"}
	legacy := gwruntime.LegacyBackendClusterRoleName(gwA)
	if legacy != gwruntime.LegacyBackendClusterRoleName(gwB) {
		t.Fatal("the legacy names of the two gateways differ: the test does not reproduce the earlier release")
	}
	apps := cp.Namespace(t)
	createService(t, cp, apps, "web")
	class := className(t, cp)
	routeB := routing.ObjectRef{Namespace: apps, Name: "web-b"}

	both := backendGatewaysHCL(providerBlock(cp), class, apps, map[string]routing.ObjectRef{"a": gwA, "b": gwB})
	onlyB := backendGatewaysHCL(providerBlock(cp), class, apps, map[string]routing.ObjectRef{"b": gwB})

	clusterRole := func(name string) error {
		_, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		return err
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, name := range []string{gwruntime.BackendClusterRoleName(gwA), gwruntime.BackendClusterRoleName(gwB), legacy} {
				if err := clusterRole(name); !apierrors.IsNotFound(err) {
					return fmt.Errorf("ClusterRole %s after destroy: %v, want NotFound", name, err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: both,
				Check: func(*terraform.State) error {
					a, b := gwruntime.BackendClusterRoleName(gwA), gwruntime.BackendClusterRoleName(gwB)
					if a == b {
						return fmt.Errorf("gateways %s and %s share the backend ClusterRole %s", gwA, gwB, a)
					}
					for _, gw := range []routing.ObjectRef{gwA, gwB} {
						if err := clusterRole(gwruntime.BackendClusterRoleName(gw)); err != nil {
							return fmt.Errorf("ClusterRole of gateway %s: %v", gw, err)
						}
						if err := readsBackends(ctx, cp, gw, apps); err != nil {
							return err
						}
					}
					return nil
				},
			},
			{
				// The earlier release's shared ClusterRole, still
				// referenced by a binding of b's route that its next apply
				// replaces: a's destroy must leave it.
				PreConfig: func() {
					writeLegacyBackendClusterRole(t, cp, gwA)
					createLegacyBackendBinding(t, cp, gwB, routeB)
				},
				Config: onlyB,
				Check: func(*terraform.State) error {
					if err := clusterRole(gwruntime.BackendClusterRoleName(gwA)); !apierrors.IsNotFound(err) {
						return fmt.Errorf("ClusterRole of the destroyed gateway %s: %v, want NotFound", gwA, err)
					}
					if err := clusterRole(gwruntime.BackendClusterRoleName(gwB)); err != nil {
						return fmt.Errorf("ClusterRole of gateway %s after the destroy of %s: %v", gwB, gwA, err)
					}
					if err := clusterRole(legacy); err != nil {
						return fmt.Errorf("the earlier release's ClusterRole %s, still referenced by a binding of %s, after the destroy of %s: %v", legacy, gwB, gwA, err)
					}
					return readsBackends(ctx, cp, gwB, apps)
				},
			},
		},
	})
}

// TestAccGatewayBackendClusterRoleUpgrade: from the state an earlier
// release left (the backend ClusterRole of the old name, referenced by the
// route's binding of the old name), the gateway's apply writes the
// ClusterRole of the new name and leaves the old one, still referenced;
// the route's next apply writes its binding of the new name, which
// references the new ClusterRole, deletes the old binding after it, and
// then the old ClusterRole. The gateway's pods read their backends at
// every step. An old ClusterRole that nothing references goes at the
// gateway's next apply, and at its destroy. The provider has only the
// rights the security guide gives it.
func TestAccGatewayBackendClusterRoleUpgrade(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	gw := routing.ObjectRef{Namespace: cp.Namespace(t), Name: "edge"}
	apps := cp.Namespace(t)
	createService(t, cp, apps, "web")
	class := className(t, cp)
	route := routing.ObjectRef{Namespace: apps, Name: "web-edge"}
	current, legacy := gwruntime.BackendClusterRoleName(gw), gwruntime.LegacyBackendClusterRoleName(gw)
	binding, legacyBinding := gwruntime.BackendRoleBindingName(gw, route), gwruntime.LegacyBackendRoleBindingName(gw, route)

	// The provider has only the rights of the security guide.
	kubeconfig, _ := providerIdentity(t, cp, ProviderClusterRules(), gw.Namespace, apps)
	config := backendGatewaysHCL(fmt.Sprintf("provider \"varnishgw\" {\n  config_path = %q\n}\n", kubeconfig), class, apps, map[string]routing.ObjectRef{"edge": gw})
	// changed changes the route alone, for an apply of it.
	changed := strings.Replace(config, `value = "/"`, `value = "/shop"`, 1)
	if changed == config {
		t.Fatal("the route configuration has no path to change")
	}

	exists := func(name string) bool {
		_, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// earlierRelease replaces the route's binding and the ClusterRole with
	// those of the old names.
	earlierRelease := func() {
		t.Helper()
		writeLegacyBackendClusterRole(t, cp, gw)
		createLegacyBackendBinding(t, cp, gw, route)
		if err := cp.Client.RbacV1().RoleBindings(apps).Delete(ctx, binding, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cp.Client.RbacV1().ClusterRoles().Delete(ctx, current, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := readsBackends(ctx, cp, gw, apps); err != nil {
			t.Fatalf("the earlier release's objects: %v", err)
		}
	}
	events := watchRoleBindings(t, cp, apps)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if exists(current) || exists(legacy) {
				return fmt.Errorf("after destroy: ClusterRole %s exists %v, %s exists %v; want neither", current, exists(current), legacy, exists(legacy))
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: func(*terraform.State) error {
					if !exists(current) || exists(legacy) {
						return fmt.Errorf("ClusterRole %s exists %v, %s exists %v; want only the first", current, exists(current), legacy, exists(legacy))
					}
					return readsBackends(ctx, cp, gw, apps)
				},
			},
			{
				// The gateway's plan sees the new ClusterRole missing; its
				// apply writes it and keeps the old one, which the old
				// binding still references (the route's plan is empty).
				PreConfig: earlierRelease,
				Config:    config,
				Check: func(*terraform.State) error {
					if !exists(current) || !exists(legacy) {
						return fmt.Errorf("ClusterRole %s exists %v, %s exists %v; want both", current, exists(current), legacy, exists(legacy))
					}
					rb, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, legacyBinding, metav1.GetOptions{})
					if err != nil || rb.RoleRef.Name != legacy {
						return fmt.Errorf("the earlier release's binding %s: %v, %+v", legacyBinding, err, rb)
					}
					events.reset()
					return readsBackends(ctx, cp, gw, apps)
				},
			},
			{
				// The route's apply replaces its binding, then the old
				// ClusterRole goes.
				Config: changed,
				Check: func(*terraform.State) error {
					rb, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, binding, metav1.GetOptions{})
					if err != nil {
						return fmt.Errorf("the route's binding %s: %v", binding, err)
					}
					if rb.RoleRef.Name != current {
						return fmt.Errorf("the route's binding %s references ClusterRole %s, want %s", binding, rb.RoleRef.Name, current)
					}
					seen := events.until("DELETED " + legacyBinding)
					added, deleted := slices.Index(seen, "ADDED "+binding), slices.Index(seen, "DELETED "+legacyBinding)
					if added < 0 || deleted < 0 || added > deleted {
						return fmt.Errorf("RoleBinding events %v: want %s added before %s is deleted", seen, binding, legacyBinding)
					}
					if exists(legacy) {
						return fmt.Errorf("ClusterRole %s is left after the last binding referencing it went", legacy)
					}
					return readsBackends(ctx, cp, gw, apps)
				},
			},
			{
				// An old ClusterRole nothing references goes at the
				// gateway's next apply.
				PreConfig: func() {
					writeLegacyBackendClusterRole(t, cp, gw)
					if err := cp.Client.RbacV1().ClusterRoles().Delete(ctx, current, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: changed,
				Check: func(*terraform.State) error {
					if !exists(current) || exists(legacy) {
						return fmt.Errorf("ClusterRole %s exists %v, %s exists %v; want only the first", current, exists(current), legacy, exists(legacy))
					}
					return readsBackends(ctx, cp, gw, apps)
				},
			},
			{
				// And at its destroy (CheckDestroy).
				PreConfig: func() { writeLegacyBackendClusterRole(t, cp, gw) },
				Config:    changed,
				PlanOnly:  true,
			},
		},
	})
}

// TestAccHTTPRouteBackendBindingBeforeGatewayUpgrade: a route applied
// before its gateway after the upgrade (its gateway's ClusterRole still has
// only the old name) writes its binding of the new name but keeps the old
// binding, the only one that grants the pods a right; once the gateway has
// the ClusterRole of the new name, the route's next apply deletes the old
// binding and the old ClusterRole.
func TestAccHTTPRouteBackendBindingBeforeGatewayUpgrade(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	gw := routing.ObjectRef{Namespace: cp.Namespace(t), Name: "public"}
	apps := cp.Namespace(t)
	class := createClass(t, cp, ControllerName)
	createGatewayAllNamespaces(t, cp, gw, class)
	createService(t, cp, apps, "web")
	route := routing.ObjectRef{Namespace: apps, Name: "web"}
	current, legacy := gwruntime.BackendClusterRoleName(gw), gwruntime.LegacyBackendClusterRoleName(gw)
	legacyBinding := gwruntime.LegacyBackendRoleBindingName(gw, route)
	// The earlier release's gateway and route RBAC.
	writeLegacyBackendClusterRole(t, cp, gw)
	t.Cleanup(func() { _ = cp.Client.RbacV1().ClusterRoles().Delete(ctx, legacy, metav1.DeleteOptions{}) })
	createLegacyBackendBinding(t, cp, gw, route)

	config := func(path string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "web" {
  namespace = %[1]q
  name      = "web"
  parent_ref {
    name      = %[2]q
    namespace = %[3]q
  }
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = %[4]q
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, apps, gw.Name, gw.Namespace, path)
	}
	exists := func(get func() error) bool {
		err := get()
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	legacyRole := func() error {
		_, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, legacy, metav1.GetOptions{})
		return err
	}
	legacyRB := func() error {
		_, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, legacyBinding, metav1.GetOptions{})
		return err
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config("/"),
				Check: func(*terraform.State) error {
					rb, err := cp.Client.RbacV1().RoleBindings(apps).Get(ctx, gwruntime.BackendRoleBindingName(gw, route), metav1.GetOptions{})
					if err != nil || rb.RoleRef.Name != current {
						return fmt.Errorf("the route's binding of the new name: %v, %+v; want it referencing %s", err, rb, current)
					}
					if !exists(legacyRB) || !exists(legacyRole) {
						return fmt.Errorf("the earlier release's binding %s exists %v and ClusterRole %s exists %v, want both while %s is missing",
							legacyBinding, exists(legacyRB), legacy, exists(legacyRole), current)
					}
					return readsBackends(ctx, cp, gw, apps)
				},
			},
			{
				// The gateway's apply wrote the ClusterRole of the new name.
				PreConfig: func() {
					cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: current, Labels: runtimeLabels(gw)}, Rules: gwruntime.BackendRules()}
					if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = cp.Client.RbacV1().ClusterRoles().Delete(ctx, current, metav1.DeleteOptions{}) })
				},
				Config: config("/shop"),
				Check: func(*terraform.State) error {
					if exists(legacyRB) || exists(legacyRole) {
						return fmt.Errorf("the earlier release's binding %s exists %v and ClusterRole %s exists %v, want neither once %s exists",
							legacyBinding, exists(legacyRB), legacy, exists(legacyRole), current)
					}
					return readsBackends(ctx, cp, gw, apps)
				},
			},
		},
	})
}

// backendGatewaysHCL is the provider block provider, a class, and for each key a gateway (one HTTP
// listener admitting routes of every namespace) and a route in apps, named
// "web-<key>", with the backend Service apps/web.
func backendGatewaysHCL(provider, class, apps string, gateways map[string]routing.ObjectRef) string {
	var b strings.Builder
	b.WriteString(provider)
	fmt.Fprintf(&b, `
resource "varnishgw_gateway_class" "test" {
  name                 = %q
  parameters_namespace = %q
  image                = %q
}
`, class, apps, testImage)
	for _, key := range slices.Sorted(mapsKeys(gateways)) {
		gw := gateways[key]
		fmt.Fprintf(&b, `
resource "varnishgw_gateway" %[1]q {
  namespace          = %[2]q
  name               = %[3]q
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

resource "varnishgw_http_route" %[1]q {
  namespace = %[4]q
  name      = "web-%[1]s"
  parent_ref {
    name      = varnishgw_gateway.%[1]s.name
    namespace = varnishgw_gateway.%[1]s.namespace
  }
  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, key, gw.Namespace, gw.Name, apps)
	}
	return b.String()
}

// namedNamespace creates the namespace name, deleted when the test ends.
func namedNamespace(t *testing.T, cp *testenv.ControlPlane, name string) string {
	t.Helper()
	if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// writeLegacyBackendClusterRole writes the backend ClusterRole an earlier
// release wrote for gw: the rules and labels of this release, the old name.
func writeLegacyBackendClusterRole(t *testing.T, cp *testenv.ControlPlane, gw routing.ObjectRef) {
	t.Helper()
	cr := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: gwruntime.LegacyBackendClusterRoleName(gw), Labels: runtimeLabels(gw)},
		Rules:      gwruntime.BackendRules(),
	}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(context.Background(), cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// readsBackends checks that gw's pods, with their ServiceAccount's real
// token, list the Services, EndpointSlices and ReferenceGrants of ns.
func readsBackends(ctx context.Context, cp *testenv.ControlPlane, gw routing.ObjectRef, ns string) error {
	cfg, err := cp.ServiceAccountConfig(ctx, gw.Namespace, gwruntime.Name(gw))
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gwc, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("gateway %s lists the Services of %s: %w", gw, ns, err)
	}
	if _, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("gateway %s lists the EndpointSlices of %s: %w", gw, ns, err)
	}
	if _, err := gwc.GatewayV1().ReferenceGrants(ns).List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("gateway %s lists the ReferenceGrants of %s: %w", gw, ns, err)
	}
	return nil
}
