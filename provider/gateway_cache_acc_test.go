package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// effectiveCachePlanned checks the planned effective_cache of a route:
// known, with want (rule index -> attribute -> value) in its elements.
type effectiveCachePlanned struct {
	addr string
	want map[int]map[string]any
}

func (c effectiveCachePlanned) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr {
			continue
		}
		if unknown, ok := rc.Change.AfterUnknown.(map[string]any); ok && unknown["effective_cache"] == true {
			resp.Error = fmt.Errorf("%s: effective_cache is unknown in the plan, want it known", c.addr)
			return
		}
		after, _ := rc.Change.After.(map[string]any)
		list, _ := after["effective_cache"].([]any)
		for rule, attrs := range c.want {
			if rule >= len(list) {
				resp.Error = fmt.Errorf("%s: planned effective_cache has %d elements, want rule %d", c.addr, len(list), rule)
				return
			}
			e, _ := list[rule].(map[string]any)
			for k, v := range attrs {
				if fmt.Sprint(e[k]) != fmt.Sprint(v) {
					resp.Error = fmt.Errorf("%s: planned effective_cache[%d].%s = %v, want %v (%v)", c.addr, rule, k, e[k], v, e)
					return
				}
			}
		}
		return
	}
	resp.Error = fmt.Errorf("no change for %s in the plan", c.addr)
}

// TestAccCachePolicy: the gateway's cache block is the Gateway's
// annotation (removed with the block); a rule's cache block is in the
// route's fragment; effective_cache merges them, known at plan
// time once the Gateway exists; a Gateway default changed in the same apply
// shows in the route after the next refresh.
func TestAccCachePolicy(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	createService(t, cp, ns, "web")
	ctx := context.Background()
	const route = "varnishgw_http_route.test"
	config := func(gwCache, rule0 string) string {
		return cacheConfig(cp, ns, class, gwCache, rule0,
			"    cache {\n      ttl = \"1h\"\n      query_parameters_include = []\n      strip_cookies = [\"_ga\"]\n    }",
			"    cache {\n      enabled = false\n    }")
	}
	gwCache := func(ttl string) string {
		return fmt.Sprintf("  cache {\n    ttl = %q\n    status_header = \"X-Cache\"\n    query_parameters_exclude = [\"utm_source\"]\n  }", ttl)
	}
	annotation := func(want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			gw, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got, ok := gw.Annotations[routing.CachePolicyAnnotation]
			switch {
			case want == "" && ok:
				return fmt.Errorf("annotation %s = %s, want none", routing.CachePolicyAnnotation, got)
			case want != "" && got != want:
				return fmt.Errorf("annotation %s = %q, want %q", routing.CachePolicyAnnotation, got, want)
			}
			return nil
		}
	}
	effective := func(rule int, attr string, v knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(route, tfjsonpath.New("effective_cache").AtSliceIndex(rule).AtMapKey(attr), v)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: config(gwCache("5m"), ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					annotation(`{"ttl":"5m","queryParametersExclude":["utm_source"],"statusHeader":"X-Cache"}`),
					func(*terraform.State) error {
						obj, f, err := fragment(cp, ns, "edge", "web")
						if err != nil {
							return err
						}
						if v, _, _ := unstructured.NestedInt64(obj.Object, "spec", "fragment", "version"); v != routing.FragmentVersion {
							return fmt.Errorf("fragment version %d, want %d", v, routing.FragmentVersion)
						}
						if len(f.Rules) != 3 || f.Rules[0].Cache != nil || f.Rules[1].Cache == nil || *f.Rules[1].Cache.TTL != "1h" ||
							f.Rules[2].Cache == nil || *f.Rules[2].Cache.Enabled {
							return fmt.Errorf("fragment rules' cache policies: %+v", f.Rules)
						}
						return nil
					},
				),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(route, tfjsonpath.New("effective_cache"), knownvalue.ListSizeExact(3)),
					effective(0, "gateway", knownvalue.StringExact(ns+"/edge")),
					effective(0, "cached", knownvalue.Bool(true)),
					effective(0, "ttl", knownvalue.StringExact("5m")),
					effective(0, "grace", knownvalue.StringExact("10s")),
					effective(0, "query_key", knownvalue.StringExact("exclude")),
					effective(0, "query_parameters", knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("utm_source")})),
					effective(0, "status_header", knownvalue.StringExact("x-cache")),
					effective(0, "tag_header", knownvalue.StringExact("cache-tag")),
					effective(1, "ttl", knownvalue.StringExact("1h")),
					effective(1, "query_key", knownvalue.StringExact("none")),
					effective(1, "strip_cookies", knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("_ga")})),
					effective(1, "status_header", knownvalue.StringExact("x-cache")),
					effective(2, "cached", knownvalue.Bool(false)),
					effective(2, "ttl", knownvalue.Null()),
				},
			},
			{
				// A rule's own block: the plan shows its effective policy.
				Config: config(gwCache("5m"), "    cache {\n      grace = \"1m\"\n      key_headers = [\"Accept-Language\"]\n    }"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(route, plancheck.ResourceActionUpdate),
						effectiveCachePlanned{addr: route, want: map[int]map[string]any{
							0: {"ttl": "5m", "grace": "1m", "key_headers": []any{"accept-language"}, "status_header": "x-cache"},
							1: {"ttl": "1h"},
							2: {"cached": false},
						}},
					},
				},
			},
			{
				// Import reads the rules' cache blocks back from the
				// fragments, the gateway's from its annotation.
				ResourceName:      route,
				ImportState:       true,
				ImportStateId:     ns + "/web",
				ImportStateVerify: true,
				// A setting of the provider's, not of the route.
				ImportStateVerifyIgnore: []string{"wait_for_served"},
			},
			{
				ResourceName:            "varnishgw_gateway.test",
				ImportState:             true,
				ImportStateId:           ns + "/edge",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"wait_for_rollout"},
			},
			{
				// An out-of-band edit of the annotation shows in the plan.
				PreConfig: func() {
					gw, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					gw.Annotations[routing.CachePolicyAnnotation] = `{"ttl":"1s"}`
					if _, err := cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, gw, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:             config(gwCache("5m"), "    cache {\n      grace = \"1m\"\n      key_headers = [\"Accept-Language\"]\n    }"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// The Gateway's default changes: the route's planned value
				// stays until the refresh after the apply.
				Config: config(gwCache("10m"), "    cache {\n      grace = \"1m\"\n      key_headers = [\"Accept-Language\"]\n    }"),
				Check:  annotation(`{"ttl":"10m","queryParametersExclude":["utm_source"],"statusHeader":"X-Cache"}`),
			},
			{
				Config:            config(gwCache("10m"), "    cache {\n      grace = \"1m\"\n      key_headers = [\"Accept-Language\"]\n    }"),
				ConfigStateChecks: []statecheck.StateCheck{effective(0, "ttl", knownvalue.StringExact("10m")), effective(1, "ttl", knownvalue.StringExact("1h"))},
			},
			{
				// No gateway block: the annotation is removed, and the
				// rules without a block of their own are passed.
				Config: config("", ""),
				Check:  annotation(""),
			},
			{
				Config: config("", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					effective(0, "cached", knownvalue.Bool(false)),
					effective(1, "ttl", knownvalue.StringExact("1h")),
					effective(1, "status_header", knownvalue.StringExact("")),
				},
			},
		},
	})
}

// TestAccCachePolicyValidation: bad values fail the plan at their
// argument, naming it and the fix.
func TestAccCachePolicyValidation(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	for _, tc := range []struct {
		name, gwCache, rule0 string
		want                 string
	}{
		{"gateway ttl", "  cache {\n    ttl = \"1.5h\"\n  }", "",
			`Attribute cache.ttl must be a Gateway API duration: up to four numbers each followed by h, m, s or ms`},
		{"rule grace", "", "    cache {\n      grace = \"10 s\"\n    }",
			`Attribute rule\[0\]\.cache\.grace must be a Gateway API duration`},
		{"include and exclude", "", "    cache {\n      query_parameters_include = [\"a\"]\n      query_parameters_exclude = [\"b\"]\n    }",
			`Attribute "rule\[0\]\.cache\.query_parameters_exclude" cannot be specified when "rule\[0\]\.cache\.query_parameters_include" is specified`},
		{"key header", "  cache {\n    key_headers = [\"Accept Language\"]\n  }", "",
			`Attribute cache\.key_headers\[0\] must be an HTTP header name`},
		{"duplicate key header", "", "    cache {\n      key_headers = [\"Accept\", \"accept\"]\n    }",
			`key_headers\[1\]: "accept" is listed twice: remove one`},
		{"status header", "", "    cache {\n      status_header = \"X Cache\"\n    }",
			`Attribute rule\[0\]\.cache\.status_header value must be one of|must be an HTTP header name`},
		{"query parameter", "", "    cache {\n      query_parameters_exclude = [\"utm=1\"]\n    }",
			`Attribute rule\[0\]\.cache\.query_parameters_exclude\[0\] must be a query parameter name as it appears in the URL`},
		{"cookie", "  cache {\n    strip_cookies = [\"a;b\"]\n  }", "",
			`Attribute cache\.strip_cookies\[0\] value must be one of|must be a cookie name`},
		{"too many key headers", "  cache {\n    key_headers = [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]\n  }", "",
			`Attribute cache\.key_headers list must contain at most 16 elements, got: 17`},
		{"unknown argument", "  cache {\n    ttl_seconds = 3\n  }", "",
			`An argument named "ttl_seconds" is not expected here`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      cacheConfig(cp, ns, "vgw-"+rand.String(6), tc.gwCache, tc.rule0, "", ""),
					PlanOnly:    true,
					ExpectError: words(tc.want),
				}},
			})
		})
	}
}

// TestAccRoutingDataSourceCachePolicy: the varnishgw_routing data source
// names each match's effective cache policy as ghost.json does: the
// Gateway's default, a rule's own, none for a rule with caching off.
func TestAccRoutingDataSourceCachePolicy(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	createService(t, cp, ns, "web")
	config := cacheConfig(cp, ns, class, "  cache {\n    ttl = \"5m\"\n  }", "",
		"    cache {\n      ttl = \"1h\"\n    }",
		"    cache {\n      enabled = false\n    }") + fmt.Sprintf(`
data "varnishgw_routing" "gw" {
  namespace  = %q
  name       = "edge"
  depends_on = [varnishgw_http_route.test]
}
`, ns)
	// vhost "*": /account, /static, then / (the longest prefix first)
	policy := func(i int, v knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("data.varnishgw_routing.gw",
			tfjsonpath.New("vhosts").AtSliceIndex(0).AtMapKey("routes").AtSliceIndex(i).AtMapKey("cache_policy"), v)
	}
	path := func(i int, v string) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("data.varnishgw_routing.gw",
			tfjsonpath.New("vhosts").AtSliceIndex(0).AtMapKey("routes").AtSliceIndex(i).AtMapKey("path_value"), knownvalue.StringExact(v))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				path(0, "/account"), policy(0, knownvalue.Null()),
				path(1, "/static"), policy(1, knownvalue.StringExact(ns+"/web/1")),
				path(2, "/"), policy(2, knownvalue.StringExact(routing.GatewayCachePolicyName)),
			},
		}},
	})
}
