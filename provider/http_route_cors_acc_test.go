package provider

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// TestAccHTTPRouteCORS: a CORS filter is applied to the HTTPRoute as
// written, stored in the RoutingFragment in ghost's form (origins and
// header names in lower case, maxAge 5 when unset), planned with its
// routing known, imported back, and updated in place.
func TestAccHTTPRouteCORS(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	const addr = "varnishgw_http_route.cors"

	config := func(extra string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "cors" {
  namespace = %[1]q
  name      = "cors"
  hostnames = ["api.example.com"]

  parent_ref {
    name = %[2]q
  }

  rule {
    match {
      path {
        type  = "PathPrefix"
        value = "/api"
      }
    }
    filter {
      type = "CORS"
      cors {
        allow_origins     = ["https://www.example.com", "https://*.Example.org"]
        allow_headers     = ["X-Requested-With"]
        expose_headers    = ["x-total-count"]
        allow_credentials = true
        %[3]s
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, ns, gw, extra)
	}
	cors := func(want *ghostjson.CORS, wantAPI *gatewayv1.HTTPCORSFilter) resource.TestCheckFunc {
		return func(*terraform.State) error {
			route, err := getRoute(ns, "cors", cp)
			if err != nil {
				return err
			}
			f := route.Spec.Rules[0].Filters
			if len(f) != 1 || f[0].Type != gatewayv1.HTTPRouteFilterCORS || !reflect.DeepEqual(f[0].CORS, wantAPI) {
				return fmt.Errorf("HTTPRoute filters = %+v (cors %+v), want %+v", f, f[0].CORS, wantAPI)
			}
			_, frag, err := fragment(cp, ns, gw, "cors")
			if err != nil {
				return fmt.Errorf("fragment: %w", err)
			}
			if len(frag.Rules) != 1 || len(frag.Rules[0].Filters) != 1 || !reflect.DeepEqual(frag.Rules[0].Filters[0].CORS, want) {
				return fmt.Errorf("fragment rules = %+v, want the CORS filter %+v", frag.Rules, want)
			}
			return nil
		}
	}
	yes := true
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config(`allow_methods = ["GET", "PUT"]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{routingKnown{addr, `"cors":{"allowOrigins":["https://www.example.com","https://*.example.org"],"allowMethods":["GET","PUT"],"allowHeaders":["x-requested-with"],"exposeHeaders":["x-total-count"],"allowCredentials":true,"maxAge":5}`}},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("rule").AtSliceIndex(0).AtMapKey("filter").AtSliceIndex(0).AtMapKey("cors").AtMapKey("max_age"), knownvalue.Int64Exact(5)),
				},
				Check: cors(&ghostjson.CORS{AllowOrigins: []string{"https://www.example.com", "https://*.example.org"}, AllowMethods: []string{"GET", "PUT"},
					AllowHeaders: []string{"x-requested-with"}, ExposeHeaders: []string{"x-total-count"}, AllowCredentials: true, MaxAge: 5},
					&gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"https://www.example.com", "https://*.Example.org"},
						AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"GET", "PUT"}, AllowHeaders: []gatewayv1.HTTPHeaderName{"X-Requested-With"},
						ExposeHeaders: []gatewayv1.HTTPHeaderName{"x-total-count"}, AllowCredentials: &yes, MaxAge: 5}),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     ns + "/cors",
				ImportStateVerify: true,
			},
			{
				Config: config(`allow_methods = ["*"]
        max_age       = 600`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `"allowMethods":["*"],"allowHeaders":["x-requested-with"],"exposeHeaders":["x-total-count"],"allowCredentials":true,"maxAge":600}`},
					},
				},
				Check: cors(&ghostjson.CORS{AllowOrigins: []string{"https://www.example.com", "https://*.example.org"}, AllowMethods: []string{"*"},
					AllowHeaders: []string{"x-requested-with"}, ExposeHeaders: []string{"x-total-count"}, AllowCredentials: true, MaxAge: 600},
					&gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"https://www.example.com", "https://*.Example.org"},
						AllowMethods: []gatewayv1.HTTPMethodWithWildcard{"*"}, AllowHeaders: []gatewayv1.HTTPHeaderName{"X-Requested-With"},
						ExposeHeaders: []gatewayv1.HTTPHeaderName{"x-total-count"}, AllowCredentials: &yes, MaxAge: 600}),
			},
		},
	})
}
