package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8srand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// TestAccGatewayBackendClusterRoleNamesAlike: the gateways X-b/c and X/b-c,
// whose names join to the same string, get a backend ClusterRole each;
// destroying one leaves the other's, and the other's pods, with their real
// ServiceAccount token, still read Services, EndpointSlices and
// ReferenceGrants in the backends' namespace.
func TestAccGatewayBackendClusterRoleNamesAlike(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	base := "vgw-cr-" + k8srand.String(5)
	gwA := object.Ref{Namespace: namedNamespace(t, cp, base+"-b"), Name: "c"}
	gwB := object.Ref{Namespace: namedNamespace(t, cp, base), Name: "b-c"}
	apps := cp.Namespace(t)
	createService(t, cp, apps, "web")
	class := className(t, cp)

	both := backendGatewaysHCL(providerBlock(cp), class, apps, map[string]object.Ref{"a": gwA, "b": gwB})
	onlyB := backendGatewaysHCL(providerBlock(cp), class, apps, map[string]object.Ref{"b": gwB})

	clusterRole := func(name string) error {
		_, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		return err
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, name := range []string{gwruntime.BackendClusterRoleName(gwA), gwruntime.BackendClusterRoleName(gwB)} {
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
					for _, gw := range []object.Ref{gwA, gwB} {
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
				Config: onlyB,
				Check: func(*terraform.State) error {
					if err := clusterRole(gwruntime.BackendClusterRoleName(gwA)); !apierrors.IsNotFound(err) {
						return fmt.Errorf("ClusterRole of the destroyed gateway %s: %v, want NotFound", gwA, err)
					}
					if err := clusterRole(gwruntime.BackendClusterRoleName(gwB)); err != nil {
						return fmt.Errorf("ClusterRole of gateway %s after the destroy of %s: %v", gwB, gwA, err)
					}
					return readsBackends(ctx, cp, gwB, apps)
				},
			},
		},
	})
}

// "web-<key>", with the backend Service apps/web.
func backendGatewaysHCL(provider, class, apps string, gateways map[string]object.Ref) string {
	var b strings.Builder
	b.WriteString(provider)
	fmt.Fprintf(&b, `
resource "varnishgw_gateway_class" "test" {
  name                 = %q
  parameters_namespace = %q
  image                = %q
}
`, class, apps, testImage)
	for _, key := range slices.Sorted(maps.Keys(gateways)) {
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

// readsBackends checks that gw's pods, with their ServiceAccount's real
// token, list the Services, EndpointSlices and ReferenceGrants of ns.
func readsBackends(ctx context.Context, cp *testenv.ControlPlane, gw object.Ref, ns string) error {
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
