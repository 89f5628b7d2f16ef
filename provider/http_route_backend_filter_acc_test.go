package provider

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestAccHTTPRouteBackendFilter: a RequestHeaderModifier on a backend_ref
// is applied to the HTTPRoute on that backendRef only, stored in the
// RoutingFragment on that backend, planned with its routing
// known, imported back, and updated in place; a second backend without a
// filter keeps none.
func TestAccHTTPRouteBackendFilter(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	const addr = "varnishgw_http_route.split"

	config := func(value string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "split" {
  namespace = %[1]q
  name      = "split"
  hostnames = ["split.example.com"]

  parent_ref {
    name = %[2]q
  }

  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/"
      }
    }
    filter {
      type = "RequestHeaderModifier"
      request_header_modifier {
        set {
          name  = "X-Rule"
          value = "r"
        }
      }
    }
    backend_ref {
      name   = "web"
      port   = 80
      weight = 3
      filter {
        type = "RequestHeaderModifier"
        request_header_modifier {
          set {
            name  = "Backend"
            value = %[3]q
          }
          remove = ["X-Debug"]
        }
      }
    }
    backend_ref {
      name = "api"
      port = 80
    }
  }
}
`, ns, gw, value)
	}
	check := func(value string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			route, err := getRoute(ns, "split", cp)
			if err != nil {
				return err
			}
			b := route.Spec.Rules[0].BackendRefs
			wantAPI := []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
				Set: []gatewayv1.HTTPHeader{{Name: "Backend", Value: value}}, Remove: []string{"X-Debug"}}}}
			if len(b) != 2 || !reflect.DeepEqual(b[0].Filters, wantAPI) || len(b[1].Filters) != 0 {
				return fmt.Errorf("HTTPRoute backendRefs = %+v, want the filter %+v on the first only", b, wantAPI)
			}
			_, frag, err := fragment(cp, ns, gw, "split")
			if err != nil {
				return fmt.Errorf("fragment: %w", err)
			}
			if frag.Version != routing.FragmentVersion {
				return fmt.Errorf("fragment version %d, want %d", frag.Version, routing.FragmentVersion)
			}
			want := []routing.Filter{{Type: ghostjson.FilterRequestHeaderModifier, RequestHeaderModifier: &ghostjson.HeaderModifier{
				Set: []ghostjson.HeaderValue{{Name: "Backend", Value: value}}, Remove: []string{"X-Debug"}}}}
			if len(frag.Rules) != 1 || len(frag.Rules[0].Backends) != 2 || !reflect.DeepEqual(frag.Rules[0].Backends[0].Filters, want) ||
				len(frag.Rules[0].Backends[1].Filters) != 0 || len(frag.Rules[0].Filters) != 1 {
				return fmt.Errorf("fragment rules = %+v, want the backend filter %+v on the first backend only", frag.Rules, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config("web"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{routingKnown{addr, `"weight":3,"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":"Backend","value":"web"}],"remove":["X-Debug"]}}]}`}},
				},
				Check: check("web"),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     ns + "/split",
				ImportStateVerify: true,
			},
			{
				Config: config("web-v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `"value":"web-v2"`},
					},
				},
				Check: check("web-v2"),
			},
		},
	})
}
