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

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestAccHTTPRouteSessionPersistence: a rule's session_persistence block
// reaches the HTTPRoute as written (type Cookie by default), the
// RoutingFragment (version 3, the cookie name, the timeout in
// milliseconds, permanent) and the planned routing; it imports back,
// refuses an unknown type and a cookie name with a space at plan time, on
// their attributes with the fix, updates in place to the defaults (a
// cookie name derived from the rule), then to type Header.
func TestAccHTTPRouteSessionPersistence(t *testing.T) {
	cp := experimentalControlPlane(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	const addr = "varnishgw_http_route.session"

	config := func(block string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "session" {
  namespace = %[1]q
  name      = "session"

  parent_ref {
    name = %[2]q
  }

  rule {
    match {
      path {
        value = "/cart"
      }
    }
    backend_ref {
      name   = "web"
      port   = 80
      weight = 50
    }
    backend_ref {
      name   = "api"
      port   = 80
      weight = 50
    }
    %[3]s
  }
}
`, ns, gw, block)
	}
	check := func(wantAPI *gatewayv1.SessionPersistence, want *routing.SessionPersistence) resource.TestCheckFunc {
		return func(*terraform.State) error {
			route, err := getRoute(ns, "session", cp)
			if err != nil {
				return err
			}
			if got := route.Spec.Rules[0].SessionPersistence; !reflect.DeepEqual(got, wantAPI) {
				return fmt.Errorf("HTTPRoute sessionPersistence = %s, want %s", spDesc(got), spDesc(wantAPI))
			}
			_, frag, err := fragment(cp, ns, gw, "session")
			if err != nil {
				return fmt.Errorf("fragment: %w", err)
			}
			if frag.Version != routing.FragmentVersion {
				return fmt.Errorf("fragment version %d, want %d", frag.Version, routing.FragmentVersion)
			}
			if got := frag.Rules[0].SessionPersistence; got == nil || *got != *want {
				return fmt.Errorf("fragment sessionPersistence = %+v, want %+v", got, *want)
			}
			return nil
		}
	}
	str := func(s string) *string { return &s }
	cookie := gatewayv1.CookieBasedSessionPersistence
	permanent := gatewayv1.PermanentCookieLifetimeType
	hour := gatewayv1.Duration("1h")
	header := gatewayv1.HeaderBasedSessionPersistence
	halfHour := gatewayv1.Duration("30m")
	defaultName := routing.DefaultSessionCookieName(routing.SessionScope(ns, "session", 0, ""))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config(`session_persistence {
      session_name     = "shop"
      absolute_timeout = "1h"
      cookie_config {
        lifetime_type = "Permanent"
      }
    }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{routingKnown{addr, `"sessionPersistence":{"type":"Cookie","sessionName":"shop","absoluteTimeoutMs":3600000,"permanent":true}`}},
				},
				Check: check(&gatewayv1.SessionPersistence{SessionName: str("shop"), AbsoluteTimeout: &hour, Type: &cookie,
					CookieConfig: &gatewayv1.CookieConfig{LifetimeType: &permanent}},
					&routing.SessionPersistence{Type: "Cookie", SessionName: "shop", AbsoluteTimeoutMs: 3600000, Permanent: true}),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     ns + "/session",
				ImportStateVerify: true,
			},
			{
				Config: config(`session_persistence {
      type = "Query"
    }`),
				ExpectError: regexp.MustCompile(`rule\[0\]\.session_persistence\.type: Unsupported value: "Query":\s+supported\s+values: "Cookie", "Header"`),
			},
			{
				Config: config(`session_persistence {
      absolute_timeout = "90s"
      cookie_config {
        lifetime_type = "Permanent"
      }
      session_name = "a b"
    }`),
				ExpectError: regexp.MustCompile(`rule\[0\]\.session_persistence\.session_name: Invalid value: "a b": must be a\s+cookie\s+or\s+header\s+name`),
			},
			{
				Config: config(`session_persistence {}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `"sessionPersistence":{"type":"Cookie","sessionName":"` + defaultName + `"}`},
					},
				},
				Check: check(&gatewayv1.SessionPersistence{Type: &cookie},
					&routing.SessionPersistence{Type: "Cookie", SessionName: defaultName}),
			},
			{
				Config: config(`session_persistence {
      type             = "Header"
      session_name     = "X-Session"
      absolute_timeout = "30m"
    }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `"sessionPersistence":{"type":"Header","sessionName":"X-Session","absoluteTimeoutMs":1800000}`},
					},
				},
				Check: check(&gatewayv1.SessionPersistence{Type: &header, SessionName: str("X-Session"), AbsoluteTimeout: &halfHour},
					&routing.SessionPersistence{Type: "Header", SessionName: "X-Session", AbsoluteTimeoutMs: 1800000}),
			},
		},
	})
}

func spDesc(sp *gatewayv1.SessionPersistence) string {
	if sp == nil {
		return "nil"
	}
	return mustJSON(sp)
}
