package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func TestAccRoutingDataSource(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	ctx := context.Background()

	// A ready endpoint of Service web, for resolve_endpoints.
	ready := true
	portName, port := "http", int32(8080)
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	if _, err := cp.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	routes := providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "a" {
  namespace = %[1]q
  name      = "a"
  parent_ref {
    name = %[2]q
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

# The same match as route a, created later: shadowed.
resource "varnishgw_http_route" "b" {
  namespace = %[1]q
  name      = "b"
  parent_ref {
    name = %[2]q
  }
  rule {
    backend_ref {
      name = "api"
      port = 80
    }
  }
  depends_on = [varnishgw_http_route.a]
}

resource "varnishgw_http_route" "c" {
  namespace = %[1]q
  name      = "c"
  parent_ref {
    name = %[2]q
  }
  rule {
    match {
      method = "GET"
      path {
        type  = "Exact"
        value = "/x"
      }
    }
    backend_ref {
      name   = "api"
      port   = 80
      weight = 3
    }
  }
}
`, ns, gw)
	data := func(resolve bool) string {
		return fmt.Sprintf(`
data "varnishgw_routing" "gw" {
  namespace         = %q
  name              = %q
  resolve_endpoints = %v
  depends_on        = [varnishgw_http_route.a, varnishgw_http_route.b, varnishgw_http_route.c]
}
`, ns, gw, resolve)
	}
	const addr = "data.varnishgw_routing.gw"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: routes + data(false),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", ns+"/"+gw),
					resource.TestCheckResourceAttr(addr, "valid", "true"),
					resource.TestCheckResourceAttr(addr, "rejected_fragments.#", "0"),
					resource.TestCheckResourceAttr(addr, "vhosts.#", "1"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.hostname", "*"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.sockets.#", "1"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.sockets.0", "port-8080"),
					// Precedence: the Exact match first, then a before b (created first).
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.#", "3"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.name", ns+"/c/0/0"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.route", ns+"/c"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.path_type", "Exact"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.path_value", "/x"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.method", "GET"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.backends.0.name", "api"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.backends.0.namespace", ns),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.backends.0.port", "80"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.0.backends.0.weight", "3"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.1.route", ns+"/a"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.1.path_type", "PathPrefix"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.1.path_value", "/"),
					resource.TestCheckNoResourceAttr(addr, "vhosts.0.routes.1.method"),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.2.route", ns+"/b"),
					resource.TestCheckResourceAttr(addr, "conflicts.#", "1"),
					resource.TestCheckResourceAttr(addr, "conflicts.0.route", ns+"/b/0/0"),
					resource.TestCheckResourceAttr(addr, "conflicts.0.winner", ns+"/a/0/0"),
					resource.TestCheckResourceAttr(addr, "conflicts.0.hostname", "*"),
					resource.TestCheckResourceAttr(addr, "conflicts.0.socket", "port-8080"),
					resource.TestMatchResourceAttr(addr, "conflicts.0.message", regexp.MustCompile(`never used`)),
					// Without resolve_endpoints, the table lists no endpoints
					// and routes name its entries.
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`\{"name":"`+ns+`/web:80","endpoints":\[\]\}`)),
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`\{"backend":"`+ns+`/web:80","weight":1\}`)),
				),
			},
			{
				Config: routes + data(true),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`\{"name":"`+ns+`/web:80","endpoints":\[\{"address":"10.1.2.3","port":8080\}\]\}`)),
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`\{"name":"`+ns+`/api:80","endpoints":\[\]\}`)),
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`\{"backend":"`+ns+`/api:80","weight":3\}`)),
				),
			},
			{
				// A corrupt RoutingFragment: the pods reject it alone, the
				// data source says so and names it; a pod's report shows.
				PreConfig: func() {
					dyn := dynamic.NewForConfigOrDie(cp.Config)
					corrupt := &unstructured.Unstructured{Object: map[string]any{
						"apiVersion": vgwapi.GroupVersion.String(), "kind": vgwapi.RoutingFragmentKind,
						"metadata": map[string]any{"name": "vgw-corrupt", "namespace": ns,
							"labels": map[string]any{gwruntime.GatewayLabel: gw}},
						"spec": map[string]any{"gateway": gw, "route": ns + "/corrupt",
							"fragment": map[string]any{"version": int64(1), "gateway": map[string]any{}}},
					}}
					if _, err := dyn.Resource(vgwapi.RoutingFragments).Namespace(ns).Create(ctx, corrupt, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
					report, err := vgwapi.NewReport(object.Ref{Namespace: ns, Name: gw}, vgwapi.Pod{Name: gw + "-pod-1"}, vgwapi.ReportStatus{
						Routing: &vgwapi.RoutingReport{FragmentsResourceVersion: "12345", GatewayGeneration: 1, Fragments: 3,
							Rejected: []vgwapi.Rejection{{Name: "vgw-corrupt", ResourceVersion: "12000", Reason: "corrupt"}},
							Time:     metav1.Now()},
					})
					if err != nil {
						t.Fatal(err)
					}
					if err := vgwapi.ApplyReport(ctx, dyn, report); err != nil {
						t.Fatal(err)
					}
				},
				Config: routes + data(false),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "valid", "false"),
					resource.TestCheckResourceAttr(addr, "rejected_fragments.#", "1"),
					resource.TestCheckResourceAttr(addr, "rejected_fragments.0.fragment", ns+"/vgw-corrupt"),
					resource.TestMatchResourceAttr(addr, "rejected_fragments.0.reason", regexp.MustCompile(`gateway.namespace: Required value.*re-apply the route`)),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.#", "3"),
					resource.TestCheckResourceAttr(addr, "pods.#", "1"),
					resource.TestCheckResourceAttr(addr, "pods.0.name", gw+"-pod-1"),
					resource.TestCheckResourceAttr(addr, "pods.0.fragments_resource_version", "12345"),
					resource.TestCheckResourceAttr(addr, "pods.0.fragments", "3"),
					resource.TestCheckResourceAttr(addr, "pods.0.rejected_fragments.0.fragment", ns+"/vgw-corrupt"),
					resource.TestCheckResourceAttr(addr, "pods.0.rejected_fragments.0.reason", "corrupt"),
				),
			},
		},
	})
}

// TestAccRoutingDataSourceOfProviderGateway: for a Gateway that
// varnishgw_gateway made (its VCL ConfigMap carries the gateway's labels,
// the fragment label among them), the data source reads the routes'
// RoutingFragments with the pods' reader and finds nothing to reject.
func TestAccRoutingDataSourceOfProviderGateway(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	createService(t, cp, ns, "web")
	class := "vgw-" + rand.String(6)
	config := gatewayConfig(cp, ns, class, "", `
  listener {
    name     = "http"
    port     = 8080
    protocol = "HTTP"
  }`) + fmt.Sprintf(`
resource "varnishgw_http_route" "web" {
  namespace = %[1]q
  name      = "web"
  hostnames = ["www.example.com"]
  parent_ref {
    name = varnishgw_gateway.test.name
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

data "varnishgw_routing" "gw" {
  namespace  = %[1]q
  name       = varnishgw_gateway.test.name
  depends_on = [varnishgw_http_route.web]
}
`, ns)
	const addr = "data.varnishgw_routing.gw"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			Check: resource.ComposeAggregateTestCheckFunc(
				func(*terraform.State) error {
					// The VCL ConfigMap is there, with the gateway label.
					cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), gwruntime.VCLConfigMapName(object.Ref{Namespace: ns, Name: "edge"}), metav1.GetOptions{})
					if err != nil {
						return err
					}
					if cm.Labels[gwruntime.GatewayLabel] == "" {
						return fmt.Errorf("the VCL ConfigMap lacks the gateway label %s: this test checks nothing", gwruntime.GatewayLabel)
					}
					return nil
				},
				resource.TestCheckResourceAttr(addr, "valid", "true"),
				resource.TestCheckResourceAttr(addr, "rejected_fragments.#", "0"),
				// The listener's catch-all and the route's host.
				resource.TestCheckResourceAttr(addr, "vhosts.#", "2"),
				resource.TestCheckResourceAttr(addr, "vhosts.1.hostname", "www.example.com"),
				resource.TestCheckResourceAttr(addr, "vhosts.1.routes.0.route", ns+"/web"),
			),
		}},
	})
}
