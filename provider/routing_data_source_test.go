package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
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
					// Without resolve_endpoints, groups list no endpoints.
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`"name":"`+ns+`/web:80","weight":1,"endpoints":\[\]`)),
				),
			},
			{
				Config: routes + data(true),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`"name":"`+ns+`/web:80","weight":1,"endpoints":\[\{"address":"10.1.2.3","port":8080\}\]`)),
					resource.TestMatchResourceAttr(addr, "ghost_json", regexp.MustCompile(`"name":"`+ns+`/api:80","weight":3,"endpoints":\[\]`)),
				),
			},
			{
				// A corrupt fragment ConfigMap: the chaperone would keep its
				// last good routing, the data source says so and names it.
				PreConfig: func() {
					cm := &corev1.ConfigMap{
						ObjectMeta: metav1.ObjectMeta{Name: "vgw-corrupt", Namespace: ns,
							Labels: routing.FragmentLabels(routing.ObjectRef{Namespace: ns, Name: gw})},
						Data: map[string]string{routing.FragmentDataKey: `{"version": 1, "gateway": {}}`},
					}
					if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: routes + data(false),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "valid", "false"),
					resource.TestCheckResourceAttr(addr, "rejected_fragments.#", "1"),
					resource.TestCheckResourceAttr(addr, "rejected_fragments.0.config_map", ns+"/vgw-corrupt"),
					resource.TestMatchResourceAttr(addr, "rejected_fragments.0.error", regexp.MustCompile(`gateway.namespace: Required value.*re-apply the route`)),
					resource.TestCheckResourceAttr(addr, "vhosts.0.routes.#", "3"),
				),
			},
		},
	})
}
