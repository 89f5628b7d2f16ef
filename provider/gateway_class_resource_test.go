package provider

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/conformance"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

func TestAccGatewayClass(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	name := "varnish-" + rand.String(6)
	ctx := context.Background()

	config := func(body string) string {
		return providerBlock(cp) + fmt.Sprintf(`
resource "varnishgw_gateway_class" "test" {
  name                 = %q
  parameters_namespace = %q
%s
}
`, name, ns, body)
	}

	const addr = "varnishgw_gateway_class.test"
	updated := config(`
  description     = "Varnish gateways"
  image           = "registry.example.com/varnishgw/gateway@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  image_pull_policy = "Always"
  storage         = "malloc,1g"
  varnishd_params = { thread_pool_min = "50" }
  vcl             = "sub vcl_backend_response { set beresp.ttl = 10s; }"
  log_level       = "debug"
  access_log      = true
  external_name_services = true`)
	var uid string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := cp.Gateway.GatewayV1().GatewayClasses().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("GatewayClass %s after destroy: %v, want NotFound", name, err)
			}
			if _, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.ClassParametersName(name), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("parameters ConfigMap after destroy: %v, want NotFound", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config(`  description = "Varnish gateways"
  image       = "localhost/varnishgw/gateway:1.0"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("controller_name"), knownvalue.StringExact(gwruntime.ControllerName)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("image"), knownvalue.StringExact("localhost/varnishgw/gateway:1.0")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("image_pull_policy"), knownvalue.StringExact("IfNotPresent")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("storage"), knownvalue.StringExact(gwruntime.DefaultStorage)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("log_level"), knownvalue.StringExact("info")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("access_log"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("external_name_services"), knownvalue.Bool(false)),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error {
						gc := getClass(t, cp, name)
						uid = string(gc.UID)
						if gc.Spec.ControllerName != gwruntime.ControllerName {
							return fmt.Errorf("controllerName = %q", gc.Spec.ControllerName)
						}
						if ref := gc.Spec.ParametersRef; ref == nil || ref.Kind != "ConfigMap" || ref.Name != gwruntime.ClassParametersName(name) || ref.Namespace == nil || string(*ref.Namespace) != ns {
							return fmt.Errorf("parametersRef = %+v, want ConfigMap %s/%s", ref, ns, gwruntime.ClassParametersName(name))
						}
						if gc.Labels["app.kubernetes.io/managed-by"] != "varnishgw" {
							return fmt.Errorf("labels = %v, want managed-by varnishgw", gc.Labels)
						}
						if err := checkSupportedFeatures(gc); err != nil {
							return err
						}
						return checkAccepted(gc)
					},
				),
			},
			{
				// An update changes the defaults in place: same object.
				Config: updated,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("image_pull_policy"), knownvalue.StringExact("Always")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("varnishd_params"), knownvalue.MapExact(map[string]knownvalue.Check{"thread_pool_min": knownvalue.StringExact("50")})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("access_log"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("external_name_services"), knownvalue.Bool(true)),
				},
				Check: func(*terraform.State) error {
					if gc := getClass(t, cp, name); string(gc.UID) != uid {
						return fmt.Errorf("GatewayClass was replaced (uid %s, was %s)", gc.UID, uid)
					}
					cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.ClassParametersName(name), metav1.GetOptions{})
					if err != nil {
						return err
					}
					want := map[string]string{
						gwruntime.ClassKeyImage:           "registry.example.com/varnishgw/gateway@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
						gwruntime.ClassKeyImagePullPolicy: "Always",
						gwruntime.ClassKeyStorage:         "malloc,1g",
						gwruntime.ClassKeyParams:          `{"thread_pool_min":"50"}`,
						gwruntime.ClassKeyVCL:             "sub vcl_backend_response { set beresp.ttl = 10s; }",
						gwruntime.ClassKeyLogLevel:        "debug",
						gwruntime.ClassKeyAccessLog:       "true",
						gwruntime.ClassKeyExternalNames:   "true",
					}
					for k, v := range want {
						if cm.Data[k] != v {
							return fmt.Errorf("ConfigMap data[%s] = %q, want %q", k, cm.Data[k], v)
						}
					}
					return nil
				},
			},
			{
				// The same configuration again: nothing to do.
				Config: updated,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     name,
				ImportStateVerify: true,
			},
			{
				// Drift: an out-of-band edit of a managed field shows in the plan.
				PreConfig: func() {
					cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.ClassParametersName(name), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					cm.Data[gwruntime.ClassKeyStorage] = "file,/tmp/x,1g"
					cm.Data[gwruntime.ClassKeyImagePullPolicy] = "Never"
					if _, err := cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: updated,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: func(*terraform.State) error {
					cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.ClassParametersName(name), metav1.GetOptions{})
					if err != nil {
						return err
					}
					if cm.Data[gwruntime.ClassKeyStorage] != "malloc,1g" || cm.Data[gwruntime.ClassKeyImagePullPolicy] != "Always" {
						return fmt.Errorf("storage, pull policy after apply = %q, %q, want the drift corrected to malloc,1g and Always", cm.Data[gwruntime.ClassKeyStorage], cm.Data[gwruntime.ClassKeyImagePullPolicy])
					}
					return nil
				},
			},
		},
	})
}

func TestAccGatewayClassValidation(t *testing.T) {
	cp := accPreCheck(t)
	const img = "\nimage = \"localhost/varnishgw/gateway:1\"\n"
	for _, tc := range []struct{ name, body, want string }{
		{"bad name", `name = "Not_A_Name"` + img, `must be a lower-case DNS subdomain`},
		{"bad log level", `name = "ok"` + img + `log_level = "loud"`, `value must be one of`},
		{"bad param name", `name = "ok"` + img + `varnishd_params = { "Thread-Pool" = "1" }`, `"Thread-Pool" is not a varnishd parameter name`},
		{"no image", `name = "ok"`, `The argument "image" is required`},
		{"bad image", `name = "ok"` + "\n" + `image = "Registry.example.com/Gateway:1"`, `image = "Registry.example.com/Gateway:1" is not a container image reference \(invalid reference format: repository name \(Gateway\) must be lowercase\)`},
		{"bad pull policy", `name = "ok"` + img + `image_pull_policy = "Sometimes"`, `value must be one of: \["IfNotPresent" "Always" "Never"\]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      providerBlock(cp) + "resource \"varnishgw_gateway_class\" \"bad\" {\n" + tc.body + "\n}\n",
					PlanOnly:    true,
					ExpectError: words(tc.want),
				}},
			})
		})
	}
}

func getClass(t *testing.T, cp *testenv.ControlPlane, name string) *gatewayv1.GatewayClass {
	t.Helper()
	gc, err := cp.Gateway.GatewayV1().GatewayClasses().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get GatewayClass %s: %v", name, err)
	}
	return gc
}

// checkSupportedFeatures checks that status.supportedFeatures lists
// exactly the features the conformance replay claims.
func checkSupportedFeatures(gc *gatewayv1.GatewayClass) error {
	var got, want []string
	for _, f := range gc.Status.SupportedFeatures {
		got = append(got, string(f.Name))
	}
	for _, f := range conformance.SupportedFeatures() {
		want = append(want, string(f))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("status.supportedFeatures = %v, want %v (internal/conformance)", got, want)
	}
	return nil
}

func checkAccepted(gc *gatewayv1.GatewayClass) error {
	for _, c := range gc.Status.Conditions {
		if c.Type == string(gatewayv1.GatewayClassConditionStatusAccepted) {
			if c.Status != metav1.ConditionTrue || c.ObservedGeneration != gc.Generation {
				return fmt.Errorf("Accepted condition = %+v, want True at generation %d", c, gc.Generation)
			}
			return nil
		}
	}
	return fmt.Errorf("no Accepted condition in %+v", gc.Status.Conditions)
}
