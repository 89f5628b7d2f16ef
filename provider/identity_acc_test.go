package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestAccResourceIdentity checks each resource's identity after apply and
// imports each by identity with an import block. The CLI must be Terraform
// 1.12 or later (make testacc-identity builds one); with an older CLI or
// OpenTofu the test is skipped.
func TestAccResourceIdentity(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	createService(t, cp, ns, "web")
	config := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)) + fmt.Sprintf(`
resource "varnishgw_http_route" "test" {
  namespace = %q
  name      = "web"

  parent_ref {
    name = varnishgw_gateway.test.name
  }

  # The match the API server defaults a rule without one to, so that the
  # plan after an import is empty.
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
`, ns)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)},
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectIdentity("varnishgw_gateway_class.test", map[string]knownvalue.Check{
						"name": knownvalue.StringExact(class),
					}),
					statecheck.ExpectIdentity("varnishgw_gateway.test", map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact(ns),
						"name":      knownvalue.StringExact("edge"),
					}),
					statecheck.ExpectIdentity("varnishgw_http_route.test", map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact(ns),
						"name":      knownvalue.StringExact("web"),
					}),
					statecheck.ExpectIdentityValueMatchesState("varnishgw_gateway.test", tfjsonpath.New("name")),
					statecheck.ExpectIdentityValueMatchesState("varnishgw_http_route.test", tfjsonpath.New("namespace")),
				},
			},
			{
				ResourceName:    "varnishgw_gateway_class.test",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
			{
				// An import takes wait_for_rollout's default, true, where the
				// configuration says false (a provider setting that is not in
				// the cluster; TestAccGateway ignores it the same way), so
				// the plan after the import updates it and nothing else.
				ResourceName:       "varnishgw_gateway.test",
				ImportState:        true,
				ImportStateKind:    resource.ImportBlockWithResourceIdentity,
				ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("varnishgw_gateway.test", plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue("varnishgw_gateway.test", tfjsonpath.New("wait_for_rollout"), knownvalue.Bool(false)),
					},
				},
			},
			{
				ResourceName:    "varnishgw_http_route.test",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
			{
				// The ID string of import blocks and terraform import still works.
				ResourceName:    "varnishgw_http_route.test",
				ImportState:     true,
				ImportStateKind: resource.ImportBlockWithID,
			},
		},
	})
}

// TestAccListResources runs terraform query on the list resources: the
// Gateways and HTTPRoutes varnishgw serves in a namespace, by label, with
// identity and with the resource an import gives. The CLI must be
// Terraform 1.14 or later (make testacc-identity builds one).
func TestAccListResources(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	ctx := context.Background()
	ours := createClass(t, cp, gwruntime.ControllerName)
	foreign := createClass(t, cp, "example.com/other-controller")
	createGateway(t, cp, ns, "edge", ours, "")
	createGateway(t, cp, ns, "inner", ours, "")
	createGateway(t, cp, ns, "not-ours", foreign, "")
	createService(t, cp, ns, "web")
	route := func(name, parent string, labels map[string]string) {
		r := &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(parent)}}},
			},
		}
		if _, err := cp.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	route("shop", "edge", map[string]string{"team": "shop"})
	route("blog", "inner", map[string]string{"team": "blog"})
	route("elsewhere", "not-ours", map[string]string{"team": "shop"})
	if gw, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "inner", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else {
		gw.Labels = map[string]string{"tier": "internal"}
		if _, err := cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, gw, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	id := func(name string) map[string]knownvalue.Check {
		return map[string]knownvalue.Check{"namespace": knownvalue.StringExact(ns), "name": knownvalue.StringExact(name)}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		Steps: []resource.TestStep{
			{
				// A query needs a configuration that declares the provider.
				Config: providerBlock(cp),
			},
			{
				// The query files come with the configuration of the step
				// before, which configures the provider.
				Query: true,
				Config: fmt.Sprintf(`
list "varnishgw_gateway" "all" {
  provider = varnishgw
  config {
    namespace = %[1]q
  }
}

list "varnishgw_gateway" "internal" {
  provider         = varnishgw
  include_resource = true
  config {
    namespace      = %[1]q
    label_selector = "tier=internal"
  }
}

list "varnishgw_http_route" "shop" {
  provider         = varnishgw
  include_resource = true
  config {
    namespace      = %[1]q
    label_selector = "team=shop"
  }
}

list "varnishgw_http_route" "all" {
  provider = varnishgw
  config {
    namespace = %[1]q
  }
}
`, ns),
				QueryResultChecks: []querycheck.QueryResultCheck{
					// Not the Gateway of the other controller's class.
					querycheck.ExpectLength("varnishgw_gateway.all", 2),
					querycheck.ExpectIdentity("varnishgw_gateway.all", id("edge")),
					querycheck.ExpectIdentity("varnishgw_gateway.all", id("inner")),
					querycheck.ExpectLength("varnishgw_gateway.internal", 1),
					querycheck.ExpectResourceDisplayName("varnishgw_gateway.internal", queryfilter.ByResourceIdentity(id("inner")),
						knownvalue.StringExact(ns+"/inner")),
					querycheck.ExpectResourceKnownValues("varnishgw_gateway.internal", queryfilter.ByResourceIdentity(id("inner")),
						[]querycheck.KnownValueCheck{
							{Path: tfjsonpath.New("gateway_class_name"), KnownValue: knownvalue.StringExact(ours)},
							{Path: tfjsonpath.New("id"), KnownValue: knownvalue.StringExact(ns + "/inner")},
						}),
					// Not the route whose only parent is the other controller's.
					querycheck.ExpectLength("varnishgw_http_route.shop", 1),
					querycheck.ExpectIdentity("varnishgw_http_route.shop", id("shop")),
					querycheck.ExpectResourceKnownValues("varnishgw_http_route.shop", queryfilter.ByResourceIdentity(id("shop")),
						[]querycheck.KnownValueCheck{
							{Path: tfjsonpath.New("parent_ref").AtSliceIndex(0).AtMapKey("name"), KnownValue: knownvalue.StringExact("edge")},
						}),
					querycheck.ExpectLength("varnishgw_http_route.all", 2),
				},
			},
		},
	})
}
