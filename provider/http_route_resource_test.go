package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routingfragment"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

// fragmentOf reads the stored RoutingFragment of route for gw.
func fragmentOf(cp *testenv.ControlPlane, gw, route object.Ref) (*unstructured.Unstructured, *routing.Fragment, error) {
	obj, err := dynamic.NewForConfigOrDie(cp.Config).Resource(vgwapi.RoutingFragments).Namespace(gw.Namespace).
		Get(context.Background(), gwruntime.FragmentName(gw, route), metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	f, err := routingfragment.Read(gw, obj)
	return obj, f, err
}

func (c routingKnown) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr {
			continue
		}
		if unknown, ok := rc.Change.AfterUnknown.(map[string]any); ok && unknown["routing"] == true {
			resp.Error = fmt.Errorf("%s: routing is unknown in the plan, want it known", c.addr)
			return
		}
		after, _ := rc.Change.After.(map[string]any)
		s, _ := after["routing"].(string)
		if !strings.Contains(s, c.want) {
			resp.Error = fmt.Errorf("%s: planned routing %s does not contain %s", c.addr, s, c.want)
		}
		return
	}
	resp.Error = fmt.Errorf("no change for %s in the plan", c.addr)
}

func TestAccHTTPRoute(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	ctx := context.Background()
	const addr = "varnishgw_http_route.test"

	// A ConfigMap that looks like a fragment of the Gateway but is not this
	// route's: destroy must leave it alone.
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vgw-foreign", Namespace: ns,
		Labels: map[string]string{gwruntime.GatewayLabel: gw, "app.kubernetes.io/managed-by": "varnishgw"}}}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := func(path string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "test" {
  namespace = %[1]q
  name      = "web"
  hostnames = ["www.example.com"]

  parent_ref {
    name = %[2]q
  }

  rule {
    match {
      path {
        type  = "PathPrefix"
        value = %[3]q
      }
      header {
        type  = "Exact"
        name  = "x-canary"
        value = "1"
      }
    }
    backend_ref {
      name   = "web"
      port   = 80
      weight = 90
    }
    backend_ref {
      name   = "api"
      port   = 80
      weight = 10
    }
    timeouts {
      request = "10s"
    }
  }

  rule {
    match {
      path {
        type  = "Exact"
        value = "/old"
      }
    }
    filter {
      type = "RequestRedirect"
      request_redirect {
        status_code = 301
        path {
          type              = "ReplaceFullPath"
          replace_full_path = "/new"
        }
      }
    }
  }
}
`, ns, gw, path)
	}

	var uid string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := getRoute(ns, "web", cp); !apierrors.IsNotFound(err) {
				return fmt.Errorf("HTTPRoute after destroy: %v, want NotFound", err)
			}
			if _, _, err := fragment(cp, ns, gw, "web"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("RoutingFragment after destroy: %v, want NotFound", err)
			}
			if _, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "vgw-foreign", metav1.GetOptions{}); err != nil {
				return fmt.Errorf("the foreign ConfigMap did not survive destroy: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config("/app"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{routingKnown{addr, `"value":"/app"`}},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/web")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("rule").AtSliceIndex(0).AtMapKey("backend_ref").AtSliceIndex(0).AtMapKey("weight"), knownvalue.Int64Exact(90)),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkRouteCondition(cp, ns, "web", gw, "Accepted", metav1.ConditionTrue, "Accepted"),
					checkRouteCondition(cp, ns, "web", gw, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs"),
					func(*terraform.State) error {
						route, err := getRoute(ns, "web", cp)
						if err != nil {
							return err
						}
						uid = string(route.UID)
						if v := route.Spec.Rules[0].Matches[0].Path.Value; v == nil || *v != "/app" {
							return fmt.Errorf("path = %v, want /app", v)
						}
						if route.Labels["app.kubernetes.io/managed-by"] != "varnishgw" {
							return fmt.Errorf("route labels = %v", route.Labels)
						}
						obj, f, err := fragment(cp, ns, gw, "web")
						if err != nil {
							return fmt.Errorf("fragment: %w", err)
						}
						for k, v := range gwruntime.GatewayLabels(object.Ref{Namespace: ns, Name: gw}) {
							if obj.GetLabels()[k] != v {
								return fmt.Errorf("fragment labels = %v, want %s=%s", obj.GetLabels(), k, v)
							}
						}
						if !f.Accepted() || len(f.Rules) != 2 || len(f.Rules[0].Backends) != 2 {
							return fmt.Errorf("fragment = %+v, want accepted with 2 rules and a 2-backend split", f)
						}
						return nil
					},
				),
			},
			{
				// A path change: the plan shows the new routing, known.
				Config: config("/v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `"value":"/v2"`},
					},
				},
				Check: func(*terraform.State) error {
					route, err := getRoute(ns, "web", cp)
					if err != nil {
						return err
					}
					if string(route.UID) != uid {
						return fmt.Errorf("route replaced")
					}
					_, f, err := fragment(cp, ns, gw, "web")
					if err != nil {
						return err
					}
					if b, _ := json.Marshal(f.Rules); !strings.Contains(string(b), `"/v2"`) {
						return fmt.Errorf("fragment rules %s lack /v2", b)
					}
					return nil
				},
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     ns + "/web",
				ImportStateVerify: true,
			},
			{
				// Drift: an out-of-band path change shows in the plan.
				PreConfig: func() {
					route, err := getRoute(ns, "web", cp)
					if err != nil {
						t.Fatal(err)
					}
					v := "/hacked"
					route.Spec.Rules[0].Matches[0].Path.Value = &v
					if _, err := cp.Gateway.GatewayV1().HTTPRoutes(ns).Update(ctx, route, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: config("/v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: func(*terraform.State) error {
					route, err := getRoute(ns, "web", cp)
					if err != nil {
						return err
					}
					if v := route.Spec.Rules[0].Matches[0].Path.Value; *v != "/v2" {
						return fmt.Errorf("path after apply = %s, want the drift corrected to /v2", *v)
					}
					return nil
				},
			},
			{
				// A fragment deleted out of band shows as a routing change
				// and the apply writes it again.
				PreConfig: func() {
					obj, _, err := fragment(cp, ns, gw, "web")
					if err != nil {
						t.Fatal(err)
					}
					if err := dynamic.NewForConfigOrDie(cp.Config).Resource(vgwapi.RoutingFragments).Namespace(ns).
						Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: config("/v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `"value":"/v2"`},
					},
				},
				Check: func(*terraform.State) error {
					_, _, err := fragment(cp, ns, gw, "web")
					return err
				},
			},
			{
				// A listener added to the Gateway: the plan shows the route
				// attaching to it, before anything changes.
				PreConfig: func() {
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, gw, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					g.Spec.Listeners = append(g.Spec.Listeners, gatewayv1.Listener{Name: "admin", Port: 9090, Protocol: gatewayv1.HTTPProtocolType})
					if _, err := cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, g, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: config("/v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						routingKnown{addr, `{"name":"admin","port":9090,"hostnames":["www.example.com"]}`},
					},
				},
				Check: func(*terraform.State) error {
					_, f, err := fragment(cp, ns, gw, "web")
					if err != nil {
						return err
					}
					if len(f.Listeners) != 2 {
						return fmt.Errorf("fragment listeners = %+v, want http and admin", f.Listeners)
					}
					return nil
				},
			},
			{
				// The same configuration again: nothing to do.
				Config: config("/v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
		},
	})
}

func TestAccHTTPRouteStatus(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	other := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "*.example.com")
	createService(t, cp, other, "remote")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "remote" {
  namespace = %[1]q
  name      = "remote"
  parent_ref {
    name = %[2]q
  }
  rule {
    backend_ref {
      name      = "remote"
      namespace = %[3]q
      port      = 80
    }
  }
}

resource "varnishgw_http_route" "elsewhere" {
  namespace = %[1]q
  name      = "elsewhere"
  hostnames = ["www.example.org"]
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
`, ns, gw, other),
			Check: resource.ComposeAggregateTestCheckFunc(
				checkRouteCondition(cp, ns, "remote", gw, "Accepted", metav1.ConditionTrue, "Accepted"),
				checkRouteCondition(cp, ns, "remote", gw, "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted"),
				checkRouteCondition(cp, ns, "elsewhere", gw, "Accepted", metav1.ConditionFalse, "NoMatchingListenerHostname"),
				resource.TestMatchResourceAttr("varnishgw_http_route.elsewhere", "routing", regexp.MustCompile(`"accepted":false`)),
			),
		}},
	})
}

// TestAccHTTPRouteValidation: an invalid value fails the plan with one
// error, attached to the argument it is about: the CLI shows that line.
func TestAccHTTPRouteValidation(t *testing.T) {
	cp := accPreCheck(t)
	for _, tc := range []struct {
		name, rules string
		line        string // the configuration line the CLI shows
		want        string // the message
	}{
		{"bad regex", `
  rule {
    match {
      path {
        type  = "RegularExpression"
        value = "/(a"
      }
    }
  }`, `value = "/\(a"`, `rule\[0\]\.match\[0\]\.path\.value: Invalid value: "/\(a"`},
		{"bad header name", `
  rule {
    match {
      header {
        name  = "bad header"
        value = "1"
      }
    }
  }`, `name  = "bad header"`, `rule\[0\]\.match\[0\]\.header\[0\]\.name: Invalid value: "bad header": must be an HTTP token`},
		{"redirect with backends", `
  rule {
    filter {
      type = "RequestRedirect"
      request_redirect {
        hostname = "example.com"
      }
    }
    backend_ref {
      name = "web"
      port = 80
    }
  }`, `backend_ref {`, `rule\[0\]\.backend_ref: Invalid value: 1: a rule with a RequestRedirect filter`},
		{"bad rule name", `
  rule {
    name = "Bad_Name"
  }`, `name = "Bad_Name"`, `rule\[0\]\.name: Invalid value: "Bad_Name": must be lower case, and has an underscore in "bad_name"`},
		{"section name the API server rejects", `
  parent_ref {
    name         = "other"
    section_name = "Bad_Name"
  }`, `section_name = "Bad_Name"`, `the API server rejects the route: parent_ref\[1\]\.section_name: Invalid value: "Bad_Name"`},
		{"unsupported filter", `
  rule {
    filter {
      type = "ExtensionRef"
      extension_ref {
        group = "example.com"
        kind  = "Filter"
        name  = "x"
      }
    }
  }`, `type = "ExtensionRef"`, `rule\[0\]\.filter\[0\]\.type: Invalid value: "ExtensionRef": ExtensionRef filters are not supported`},
		{"cors origin", `
  rule {
    filter {
      type = "CORS"
      cors {
        allow_origins = ["https://www.example.com", "www.example.org"]
      }
    }
  }`, `allow_origins = \["https://www.example.com", "www.example.org"\]`,
			`rule\[0\]\.filter\[0\]\.cors\.allow_origins\[1\]: Invalid value: "www.example.org": must be scheme://host\[:port\] with scheme http or https`},
		{"cors wildcard with credentials", `
  rule {
    filter {
      type = "CORS"
      cors {
        allow_origins     = ["https://www.example.com"]
        expose_headers    = ["*"]
        allow_credentials = true
      }
    }
  }`, `expose_headers    = \["\*"\]`,
			`rule\[0\]\.filter\[0\]\.cors\.expose_headers: Invalid value: "\*": with credentials allowed, browsers read "\*" as a header named "\*"`},
		{"cors method", `
  rule {
    filter {
      type = "CORS"
      cors {
        allow_methods = ["get"]
      }
    }
  }`, `allow_methods = \["get"\]`, `rule\[0\]\.filter\[0\]\.cors\.allow_methods\[0\]: Invalid value: "get": must be one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH \(upper case\)`},
		{"cors max age", `
  rule {
    filter {
      type = "CORS"
      cors {
        max_age = 0
      }
    }
  }`, `max_age = 0`, `Attribute rule\[0\]\.filter\[0\]\.cors\.max_age value must be between 1 and 2147483647, got: 0`},
		{"weight", `
  rule {
    backend_ref {
      name   = "web"
      port   = 80
      weight = -1
    }
  }`, `weight = -1`, `rule\[0\]\.backend_ref\[0\]\.weight: Invalid value: -1: must be from 0 to 1000000`},
		{"port", `
  rule {
    backend_ref {
      name = "web"
      port = 70000
    }
  }`, `port = 70000`, `rule\[0\]\.backend_ref\[0\]\.port: Invalid value: 70000: must be a port number from 1 to 65535`},
		{"mirror without backend", `
  rule {
    filter {
      type = "RequestMirror"
      request_mirror {
        percent = 10
      }
    }
  }`, `request_mirror {`, `Attribute "rule\[0\]\.filter\[0\]\.request_mirror\.backend_ref" must be specified when "rule\[0\]\.filter\[0\]\.request_mirror" is specified`},
		{"hostname", `
  hostnames = ["www.example.com", "Shop.Example.com"]`, `hostnames = \["www.example.com", "Shop.Example.com"\]`,
			`hostnames\[1\]: Invalid value: "Shop.Example.com": must be lower case: use "shop.example.com"`},
		{"unicode hostname", `
  rule {
    filter {
      type = "RequestRedirect"
      request_redirect {
        hostname = "bücher.example"
      }
    }
  }`, `hostname = "bücher.example"`, `rule\[0\]\.filter\[0\]\.request_redirect\.hostname: Invalid value: "bücher.example": is a Unicode \(internationalised\) name: use\s+its\s+punycode \(xn--...\) form\s+"xn--bcher-kva.example"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config: providerBlock(cp) + `
resource "varnishgw_http_route" "bad" {
  namespace = "default"
  name      = "bad"
  parent_ref {
    name = "gw"
  }` + tc.rules + `
}
`,
					PlanOnly:    true,
					ExpectError: onlyError(tc.line, tc.want),
				}},
			})
		})
	}
}

// noError matches text without "Error:".
const noError = `(?:[^E]|E[^r]|Er[^r]|Err[^o]|Erro[^r]|Error[^:])*`

// TestAccHTTPRouteBackendKind: a backend of another kind than Service is
// accepted, as the Gateway API asks: it gets the 500 share and the route's
// ResolvedRefs condition is False with reason InvalidKind; group and kind
// read back on import.
func TestAccHTTPRouteBackendKind(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	gw := routeFixture(t, cp, ns, "")
	const addr = "varnishgw_http_route.kinds"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "kinds" {
  namespace = %[1]q
  name      = "kinds"
  parent_ref {
    name = %[2]q
    kind = "Gateway"
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
    backend_ref {
      group = "storage.example.com"
      kind  = "Bucket"
      name  = "assets"
    }
  }
}
`, ns, gw),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkRouteCondition(cp, ns, "kinds", gw, "Accepted", metav1.ConditionTrue, "Accepted"),
					checkRouteCondition(cp, ns, "kinds", gw, "ResolvedRefs", metav1.ConditionFalse, "InvalidKind"),
					resource.TestMatchResourceAttr(addr, "routing", regexp.MustCompile(`"name":"assets","port":[0-9]+,"weight":1,"unresolved":"InvalidKind"`)),
					resource.TestCheckResourceAttr(addr, "rule.0.backend_ref.1.kind", "Bucket"),
					resource.TestCheckNoResourceAttr(addr, "rule.0.backend_ref.0.kind"),
				),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     ns + "/kinds",
				ImportStateVerify: true,
				// The configuration spells out the default kind of the parent,
				// which import leaves unset; and the API server stores the
				// default match (PathPrefix /) of a rule without one, which
				// import reads.
				ImportStateVerifyIgnore: []string{"parent_ref.0.kind", "rule.0.match"},
			},
		},
	})
}

// TestOnlyError: onlyError tells one error from two.
func TestOnlyError(t *testing.T) {
	one := "Error running non-refresh plan: exit status 1\n╷\n│ Warning: Unable to open CLI configuration file\n╵\n\n" +
		"Error: Invalid HTTP route\n\n  with varnishgw_http_route.bad,\n  on main.tf line 3, in resource \"varnishgw_http_route\" \"bad\":\n" +
		"   3:       weight = -1\n\nrule[0].backend_ref[0].weight: Invalid value: -1: must be\nfrom 0 to 1000000\n"
	two := one + "\nError: Invalid HTTP route\n\n  on main.tf line 3:\n   3:       weight = -1\n\nrule[0].backend_ref[0].weight: again\n"
	re := onlyError(`weight = -1`, `weight: Invalid value: -1: must be from 0 to 1000000`)
	if !re.MatchString(one) {
		t.Errorf("onlyError does not match one error:\n%s", one)
	}
	if re.MatchString(two) {
		t.Errorf("onlyError matches two errors:\n%s", two)
	}
	if onlyError(`port = 80`, `weight`).MatchString(one) {
		t.Error("onlyError matches another line")
	}
}

func TestAccHTTPRouteParents(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	gw := routeFixture(t, cp, ns, "")
	createGateway(t, cp, ns, "gw2", createClass(t, cp, gwruntime.ControllerName), "")
	createGateway(t, cp, ns, "other", createClass(t, cp, "example.com/other-controller"), "")
	const addr = "varnishgw_http_route.test"
	config := func(name string, parents ...string) string {
		var refs []string
		for _, p := range parents {
			refs = append(refs, fmt.Sprintf("  parent_ref {\n    name = %q\n  }\n", p))
		}
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "test" {
  namespace = %[1]q
  name      = %[2]q
%[3]s
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

resource "varnishgw_http_route" "foreign" {
  namespace = %[1]q
  name      = "foreign"
  parent_ref {
    name = "other"
  }
}
`, ns, name, strings.Join(refs, ""))
	}
	ourParents := func(name string, want ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			route, err := getRoute(ns, name, cp)
			if err != nil {
				return err
			}
			var got []string
			for _, p := range route.Status.Parents {
				if p.ControllerName == gwruntime.ControllerName {
					got = append(got, string(p.ParentRef.Name))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("varnishgw status parents = %v, want %v", got, want)
			}
			for _, gw := range []string{"gw", "gw2", "other"} {
				_, _, err := fragment(cp, ns, gw, name)
				if wanted := strings.Contains(fmt.Sprint(want), gw); wanted && err != nil || !wanted && !apierrors.IsNotFound(err) {
					return fmt.Errorf("fragment for Gateway %s: %v (wanted: %v)", gw, err, wanted)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// The Gateway of another controller gets neither status nor fragment.
				Config: config("web", gw, "gw2", "other"),
				Check: resource.ComposeAggregateTestCheckFunc(
					ourParents("web", gw, "gw2"),
					// A route with only another controller's parent gets no status.
					func(*terraform.State) error {
						route, err := getRoute(ns, "foreign", cp)
						if err != nil {
							return err
						}
						if len(route.Status.Parents) != 0 {
							return fmt.Errorf("status parents of a route without varnishgw parent = %+v, want none", route.Status.Parents)
						}
						return nil
					},
					resource.TestCheckResourceAttr("varnishgw_http_route.foreign", "routing", "[]"),
				),
			},
			{
				// Another controller's status entry survives our writes; the
				// fragment of a removed parent is deleted.
				PreConfig: func() {
					route, err := getRoute(ns, "web", cp)
					if err != nil {
						t.Fatal(err)
					}
					route.Status.Parents = append(route.Status.Parents, gatewayv1.RouteParentStatus{
						ParentRef:      gatewayv1.ParentReference{Name: "other"},
						ControllerName: "example.com/other-controller",
						Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted",
							ObservedGeneration: route.Generation, LastTransitionTime: metav1.Now()}},
					})
					if _, err := cp.Gateway.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: config("web", gw, "other"),
				Check: resource.ComposeAggregateTestCheckFunc(
					ourParents("web", gw),
					func(*terraform.State) error {
						route, err := getRoute(ns, "web", cp)
						if err != nil {
							return err
						}
						for _, p := range route.Status.Parents {
							if p.ControllerName == "example.com/other-controller" {
								return nil
							}
						}
						return fmt.Errorf("the other controller's status entry is gone: %+v", route.Status.Parents)
					},
				),
			},
			{
				// A new name replaces the route; the old route's fragment goes.
				Config: config("web2", gw),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					ourParents("web2", gw),
					func(*terraform.State) error {
						if _, err := getRoute(ns, "web", cp); !apierrors.IsNotFound(err) {
							return fmt.Errorf("old HTTPRoute web: %v, want NotFound", err)
						}
						if _, _, err := fragment(cp, ns, gw, "web"); !apierrors.IsNotFound(err) {
							return fmt.Errorf("old fragment: %v, want NotFound", err)
						}
						return nil
					},
				),
			},
		},
	})
}

// TestAccHTTPRouteValidationUnknown: a value known only after apply does
// not hide the errors of the values known at plan time.
func TestAccHTTPRouteValidationUnknown(t *testing.T) {
	cp := accPreCheck(t)
	config := func(path string) string {
		return providerBlock(cp) + `
resource "terraform_data" "svc" {
  input = "web"
}

resource "varnishgw_http_route" "bad" {
  namespace = "default"
  name      = "bad"
  parent_ref {
    name = "gw"
  }
  rule {
    match {
      path {
        type  = "RegularExpression"
        value = "` + path + `"
      }
    }
    backend_ref {
      name = terraform_data.svc.output
      port = 80
    }
  }
}
`
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      config("/(a"),
			PlanOnly:    true,
			ExpectError: onlyError(`value = "/\(a"`, `rule\[0\]\.match\[0\]\.path\.value: Invalid value: "/\(a"`),
		}, {
			// The unknown backend name is no error, and the routing is
			// known after apply.
			Config:             config("/(a|b)"),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}

func TestHTTPRouteAttributePath(t *testing.T) {
	ctx := context.Background()
	var s fwresource.SchemaResponse
	(&httpRouteResource{}).Schema(ctx, fwresource.SchemaRequest{}, &s)
	for field, want := range map[string]string{
		"spec.rules[0].matches[1].path.value":                         "rule[0].match[1].path.value",
		"spec.rules[0].matches[0].headers[2].name":                    "rule[0].match[0].header[2].name",
		"spec.rules[2].matches[0].queryParams[3].name":                "rule[2].match[0].query_param[3].name",
		"spec.rules[0].filters[1].urlRewrite.path.replacePrefixMatch": "rule[0].filter[1].url_rewrite.path.replace_prefix_match",
		"spec.rules[0].filters[0].requestMirror.backendRef.port":      "rule[0].filter[0].request_mirror.backend_ref.port",
		"spec.rules[0].filters[0].requestHeaderModifier.set[1].name":  "rule[0].filter[0].request_header_modifier.set[1].name",
		"spec.rules[0].filters[0].requestHeaderModifier.remove[2]":    "rule[0].filter[0].request_header_modifier.remove[2]",
		"spec.rules[0].filters[0].extensionRef.name":                  "rule[0].filter[0].extension_ref.name",
		"spec.rules[0].filters[0].cors.allowOrigins[0]":               "rule[0].filter[0].cors.allow_origins[0]",
		"spec.rules[0].backendRefs[1].weight":                         "rule[0].backend_ref[1].weight",
		"spec.rules[0].backendRefs[1].filters":                        "rule[0].backend_ref[1].filter",
		"spec.parentRefs[0].sectionName":                              "parent_ref[0].section_name",
		"spec.hostnames[2]":                                           "hostnames[2]",
		"spec.rules[0].timeouts.backendRequest":                       "rule[0].timeouts.backend_request",
		"spec.rules[0].sessionPersistence":                            "rule[0].session_persistence",
		"spec.rules[0].retry.codes[0]":                                "rule[0].retry.codes[0]",
		"spec.rules[*].matches":                                       "rule",
		"spec.rules[1].somethingNew":                                  "rule[1]",
		"metadata.name":                                               "",
	} {
		p, text := attributePath(ctx, s.Schema, field)
		if text != want || (want != "" && p.String() != want) {
			t.Errorf("attributePath(%s) = %s (%s), want %s", field, text, p, want)
		}
	}
}

// TestAccHTTPRouteNamespaceSelector: a listener that admits routes from
// namespaces by label accepts a route from a labelled namespace only.
func TestAccHTTPRouteNamespaceSelector(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	gwNS, teamNS, otherNS := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	n, err := cp.Client.CoreV1().Namespaces().Get(ctx, teamNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["team"] = "shop"
	if _, err := cp.Client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	from := gatewayv1.NamespacesFromSelector
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: gwNS},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(createClass(t, cp, gwruntime.ControllerName)),
			Listeners: []gatewayv1.Listener{{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
					From: &from, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}}}}},
		},
	}
	if _, err := cp.Gateway.GatewayV1().Gateways(gwNS).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createService(t, cp, teamNS, "web")
	createService(t, cp, otherNS, "web")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "team" {
  namespace = %[2]q
  name      = "web"
  parent_ref {
    name      = "shared"
    namespace = %[1]q
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

resource "varnishgw_http_route" "other" {
  namespace = %[3]q
  name      = "web"
  parent_ref {
    name      = "shared"
    namespace = %[1]q
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, gwNS, teamNS, otherNS),
			Check: resource.ComposeAggregateTestCheckFunc(
				checkRouteCondition(cp, teamNS, "web", "shared", "Accepted", metav1.ConditionTrue, "Accepted"),
				checkRouteCondition(cp, otherNS, "web", "shared", "Accepted", metav1.ConditionFalse, "NotAllowedByListeners"),
				func(*terraform.State) error {
					// Both fragments live in the Gateway's namespace.
					for _, ns := range []string{teamNS, otherNS} {
						if _, _, err := fragmentOf(cp, object.Ref{Namespace: gwNS, Name: "shared"}, object.Ref{Namespace: ns, Name: "web"}); err != nil {
							return fmt.Errorf("fragment of %s/web: %w", ns, err)
						}
					}
					return nil
				},
			),
		}},
	})
}

// TestAccHTTPRouteExample plans the documentation example: it must pass
// validation.
func TestAccHTTPRouteExample(t *testing.T) {
	cp := accPreCheck(t)
	example, err := os.ReadFile("../examples/resources/varnishgw_http_route/resource.tf")
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             providerBlock(cp) + string(example),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
		}},
	})
}

// TestAccHTTPRouteExternalName: a backendRef to an ExternalName Service
// gets ResolvedRefs=False naming the class attribute while the class does
// not allow such Services; once its external_name_services is on, the
// next plan shows the route's routing change and the apply makes it True.
func TestAccHTTPRouteExternalName(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	class := createClass(t, cp, gwruntime.ControllerName)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gwruntime.ClassParametersName(class)},
		Data: map[string]string{gwruntime.ClassKeyImage: "localhost/varnishgw/gateway:1.0", gwruntime.ClassKeyExternalNames: "false"}}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gc, err := cp.Gateway.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gc.Spec.ParametersRef = &gatewayv1.ParametersReference{Group: "", Kind: "ConfigMap", Name: cm.Name, Namespace: ptrTo(gatewayv1.Namespace(ns))}
	if _, err := cp.Gateway.GatewayV1().GatewayClasses().Update(ctx, gc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createGateway(t, cp, ns, "gw", class, "")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "api.example.org"},
	}
	if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const addr = "varnishgw_http_route.ext"
	config := providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_http_route" "ext" {
  namespace = %q
  name      = "ext"
  parent_ref {
    name = "gw"
  }
  rule {
    backend_ref {
      name = "ext"
      port = 443
    }
  }
}
`, ns)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{routingKnown{addr, `set external_name_services = true on its varnishgw_gateway_class`}},
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				checkRouteCondition(cp, ns, "ext", "gw", "ResolvedRefs", metav1.ConditionFalse, "BackendNotFound"),
				resource.TestMatchResourceAttr(addr, "routing", regexp.MustCompile(`Service `+ns+`/ext is of type ExternalName \(api\.example\.org\)`)),
			),
		}, {
			PreConfig: func() {
				cm.Data[gwruntime.ClassKeyExternalNames] = "true"
				if _, err := cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					routingKnown{addr, `"reason":"ResolvedRefs"`},
				},
			},
			Check: checkRouteCondition(cp, ns, "ext", "gw", "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs"),
		}},
	})
}
