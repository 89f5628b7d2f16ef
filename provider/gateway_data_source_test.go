package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestAccGatewayDataSource(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	ctx := context.Background()

	// Status as a controller would write it: the data source reports it
	// as is (attached_routes 7 is deliberately not the fragment count).
	g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, gw, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now().Rfc3339Copy()
	ip := gatewayv1.IPAddressType
	g.Status = gatewayv1.GatewayStatus{
		Addresses: []gatewayv1.GatewayStatusAddress{{Type: &ip, Value: "10.0.0.7"}},
		Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Pending",
			Message: "waiting for pods", ObservedGeneration: g.Generation, LastTransitionTime: now}},
		Listeners: []gatewayv1.ListenerStatus{{Name: "http", AttachedRoutes: 7, SupportedKinds: []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: g.Generation, LastTransitionTime: now}}}},
	}
	if _, err := cp.Gateway.GatewayV1().Gateways(ns).UpdateStatus(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	const addr = "data.varnishgw_gateway.gw"
	config := providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "web" {
  namespace = %[1]q
  name      = "web"
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

data "varnishgw_gateway" "gw" {
  namespace  = %[1]q
  name       = %[2]q
  depends_on = [varnishgw_http_route.web]
}
`, ns, gw)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// A Gateway that does not exist is an error that says what to check.
				Config: providerBlock(cp) + fmt.Sprintf(`
data "varnishgw_gateway" "nope" {
  namespace = %q
  name      = "nope"
}
`, ns),
				ExpectError: regexp.MustCompile(`(?s)Read the Gateway.*There is no Gateway "nope" in namespace`),
			},
			{
				Config: providerBlock(cp) + `
data "varnishgw_gateway" "bad" {
  namespace = "Not_A_Namespace"
  name      = "gw"
}
`,
				ExpectError: regexp.MustCompile(`must be a namespace name`),
			},
			{
				Config: config,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(addr, "id", ns+"/"+gw),
					resource.TestCheckResourceAttr(addr, "gateway_class_name", string(g.Spec.GatewayClassName)),
					resource.TestCheckResourceAttr(addr, "generation", "1"),
					resource.TestCheckResourceAttr(addr, "listeners.#", "1"),
					resource.TestCheckResourceAttr(addr, "listeners.0.name", "http"),
					resource.TestCheckNoResourceAttr(addr, "listeners.0.hostname"),
					resource.TestCheckResourceAttr(addr, "listeners.0.port", "8080"),
					resource.TestCheckResourceAttr(addr, "listeners.0.protocol", "HTTP"),
					resource.TestCheckResourceAttr(addr, "listeners.0.attached_routes", "7"),
					resource.TestCheckResourceAttr(addr, "listeners.0.fragment_routes", "1"),
					resource.TestCheckResourceAttr(addr, "listeners.0.conditions.0.type", "Accepted"),
					resource.TestCheckResourceAttr(addr, "addresses.#", "1"),
					resource.TestCheckResourceAttr(addr, "addresses.0.type", "IPAddress"),
					resource.TestCheckResourceAttr(addr, "addresses.0.value", "10.0.0.7"),
					resource.TestCheckResourceAttr(addr, "conditions.#", "1"),
					resource.TestCheckResourceAttr(addr, "conditions.0.type", "Programmed"),
					resource.TestCheckResourceAttr(addr, "conditions.0.status", "False"),
					resource.TestCheckResourceAttr(addr, "conditions.0.reason", "Pending"),
					resource.TestCheckResourceAttr(addr, "conditions.0.message", "waiting for pods"),
					resource.TestCheckResourceAttr(addr, "conditions.0.observed_generation", "1"),
				),
			},
		},
	})
}
