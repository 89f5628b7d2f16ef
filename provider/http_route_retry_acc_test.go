package provider

import (
	"fmt"
	"reflect"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// retryRouteConfig is a route whose rule has the retry block retry ("" for
// none).
func retryRouteConfig(cp *testenv.ControlPlane, ns, gw, retry string) string {
	return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "retry" {
  namespace = %[1]q
  name      = "retry"

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
    %[3]s
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, ns, gw, retry)
}

// TestAccHTTPRouteRetryStandardChannel: on the shared control plane,
// which has the Gateway API standard channel's CRDs (whose API server
// would drop the rule's retry), a retry block fails the plan at the block,
// naming the channel found and the fix, and nothing is written; when the
// plan cannot check it (attempts known only after apply), the apply fails
// during the apply, before the HTTPRoute is written.
func TestAccHTTPRouteRetryStandardChannel(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: retryRouteConfig(cp, ns, gw, `retry {
      codes    = [503]
      attempts = 2
    }`),
				ExpectError: wrapped(`(?s)Plan the HTTP route.*` + standardChannelError),
			},
			{
				Config: `resource "terraform_data" "attempts" {
  input = 2
}
` + retryRouteConfig(cp, ns, gw, `retry {
      codes    = [503]
      attempts = terraform_data.attempts.output
    }`),
				// Terraform plans the route again during the apply, once
				// attempts is known: that plan fails.
				ExpectError: wrapped(`(?s)Error running apply.*(Plan|Create) the HTTP route.*` + standardChannelError),
			},
		},
	})
	if _, err := getRoute(ns, "retry", cp); err == nil {
		t.Error("the HTTPRoute was created although the plan failed")
	}
}

// TestAccHTTPRouteRetry: on a control plane with the experimental
// channel's CRDs, a rule's retry reaches the HTTPRoute as written and the
// RoutingFragment in ghost's form (version 3, attempts 1 when unset),
// planned with its routing known, imported back, updated in place and
// removed.
func TestAccHTTPRouteRetry(t *testing.T) {
	accPreCheck(t)
	cp := experimentalControlPlane(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	const addr = "varnishgw_http_route.retry"
	check := func(wantAPI *gatewayv1.HTTPRouteRetry, want *ghostjson.Retry) resource.TestCheckFunc {
		return func(*terraform.State) error {
			route, err := getRoute(ns, "retry", cp)
			if err != nil {
				return err
			}
			if got := route.Spec.Rules[0].Retry; !reflect.DeepEqual(got, wantAPI) {
				return fmt.Errorf("HTTPRoute rules[0].retry = %+v, want %+v", got, wantAPI)
			}
			_, frag, err := fragment(cp, ns, gw, "retry")
			if err != nil {
				return fmt.Errorf("fragment: %w", err)
			}
			if len(frag.Rules) != 1 || !reflect.DeepEqual(frag.Rules[0].Retry, want) {
				return fmt.Errorf("fragment rules = %+v, want the retry %+v", frag.Rules, want)
			}
			if frag.Version != routing.FragmentVersion {
				return fmt.Errorf("fragment version %d, want %d", frag.Version, routing.FragmentVersion)
			}
			return nil
		}
	}
	two, backoff := 2, gatewayv1.Duration("100ms")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: retryRouteConfig(cp, ns, gw, `retry {
      codes    = [502, 503]
      attempts = 2
      backoff  = "100ms"
    }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{routingKnown{addr, `"retry":{"attempts":2,"backoffMs":100,"codes":[502,503]}`}},
				},
				Check: check(&gatewayv1.HTTPRouteRetry{Codes: []gatewayv1.HTTPRouteRetryStatusCode{502, 503}, Attempts: &two, Backoff: &backoff},
					&ghostjson.Retry{Attempts: 2, BackoffMs: 100, Codes: []int{502, 503}}),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     ns + "/retry",
				ImportStateVerify: true,
			},
			{
				Config: retryRouteConfig(cp, ns, gw, `retry {
      codes = [500]
    }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `"retry":{"attempts":1,"codes":[500]}`},
					},
				},
				Check: check(&gatewayv1.HTTPRouteRetry{Codes: []gatewayv1.HTTPRouteRetryStatusCode{500}},
					&ghostjson.Retry{Attempts: routing.DefaultRetryAttempts, Codes: []int{500}}),
			},
			{
				Config: retryRouteConfig(cp, ns, gw, ""),
				Check:  check(nil, nil),
			},
		},
	})
}

// TestAccHTTPRouteRetryInvalid: bad retry values fail validate, each once,
// at its argument, on any control plane.
func TestAccHTTPRouteRetryInvalid(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	for _, tc := range []struct {
		name, retry, want string
	}{
		{"attempts 0", `retry {
      attempts = 0
    }`, `(?s)Attribute rule\[0\]\.retry\.attempts value must be between 1 and 100, got: 0`},
		{"code 302", `retry {
      codes = [503, 302]
    }`, `(?s)Attribute rule\[0\]\.retry\.codes\[1\] value must be between 400 and 599, got: 302`},
		{"code twice", `retry {
      codes = [503, 503]
    }`, `(?s)Duplicate List Value.*duplicate values of: 503`},
		{"backoff", `retry {
      backoff = "1.5s"
    }`, `(?s)rule\[0\]\.retry\.backoff: Invalid value: "1\.5s": must be a Gateway API duration`},
		{"backend filters", `retry {
      attempts = 1
    }
    backend_ref {
      name = "api"
      port = 80
      filter {
        type = "RequestHeaderModifier"
        request_header_modifier {
          set {
            name  = "X-Variant"
            value = "api"
          }
        }
      }
    }`, `(?s)rule\[0\]\.retry: Forbidden: a rule with a retry policy cannot have backendRefs with filters of their own`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      retryRouteConfig(cp, ns, "gw", tc.retry),
					PlanOnly:    true,
					ExpectError: wrapped(tc.want),
				}},
			})
		})
	}
}

// standardChannelError is the detail of the diagnostic for a retry on a
// cluster with the standard channel's HTTPRoute CRD, for wrapped.
var standardChannelError = `rule\[0\]\.retry needs the HTTPRoute field rules\[\]\.retry, which the cluster's HTTPRoute CRD ` +
	`does not have \(httproutes\.gateway\.networking\.k8s\.io: channel standard, bundle version ` + regexp.QuoteMeta(GatewayAPIVersion) +
	`\).*Install the experimental channel's CRDs of Gateway API ` + regexp.QuoteMeta(GatewayAPIVersion) + `.*or remove rule\[0\]\.retry\.`
