package provider

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gatewaystatus"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// TestAccListenerSet applies a gateway that admits the ListenerSets of its
// namespace, a ListenerSet with a listener on a port of its own, a route
// attached to that ListenerSet, and a younger ListenerSet whose listener
// conflicts (created later, or at the same second and later by name):
// the first is accepted, its port becomes a port of the
// gateway's Service and a listen port of varnishd, the Gateway's
// annotation records the listener for the pods, the route is accepted on
// the ListenerSet's listener only; the conflicting one is not accepted and
// says why; a second plan is empty (the gateway sees the ListenerSet's
// port). Removing the ListenerSet removes its port. An HTTPS listener
// without tls is rejected at plan (TestAccListenerSetHTTPS serves one).
func TestAccListenerSet(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	ctx := context.Background()
	gw := object.Ref{Namespace: ns, Name: "edge"}
	createService(t, cp, ns, "web")

	gateway := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+`
  allowed_listeners {
    namespaces = "Same"
  }
`)
	sets := fmt.Sprintf(`
resource "varnishgw_listener_set" "team" {
  namespace        = %[1]q
  name             = "team"
  wait_for_rollout = false
  parent_ref {
    name = varnishgw_gateway.test.name
  }
  listener {
    name     = "extra"
    port     = 9090
    hostname = "team.example.com"
  }
}

resource "varnishgw_listener_set" "late" {
  namespace        = %[1]q
  name             = "team-late"
  wait_for_rollout = false
  parent_ref {
    name = varnishgw_gateway.test.name
  }
  listener {
    name     = "dup"
    port     = 9090
    hostname = "team.example.com"
  }
  depends_on = [varnishgw_listener_set.team]
}

# Applied in parallel with team: each apply sees the other's port.
resource "varnishgw_listener_set" "other" {
  namespace        = %[1]q
  name             = "other"
  wait_for_rollout = false
  parent_ref {
    name = varnishgw_gateway.test.name
  }
  listener {
    name     = "other"
    port     = 9191
    hostname = "other.example.com"
  }
}

resource "varnishgw_http_route" "team" {
  namespace = %[1]q
  name      = "team"
  parent_ref {
    kind = "ListenerSet"
    name = varnishgw_listener_set.team.name
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}

data "varnishgw_routing" "gw" {
  namespace  = %[1]q
  name       = varnishgw_gateway.test.name
  depends_on = [varnishgw_http_route.team, varnishgw_listener_set.late, varnishgw_listener_set.other]
}
`, ns)
	servicePorts := func() ([]int32, error) {
		svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, gwruntime.Name(gw), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		var ports []int32
		for _, p := range svc.Spec.Ports {
			ports = append(ports, p.Port)
		}
		return ports, nil
	}
	listenArgs := func() (string, error) {
		d, err := getDeployment(cp, gw)
		if err != nil {
			return "", err
		}
		return strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "), nil
	}
	const addr = "varnishgw_listener_set.team"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, name := range []string{"team", "team-late", "other"} {
				if _, err := cp.Gateway.GatewayV1().ListenerSets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("ListenerSet %s after destroy: %v, want NotFound", name, err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: gateway + sets,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/team")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("conditions").AtSliceIndex(0).AtMapKey("type"), knownvalue.StringExact("Accepted")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("conditions").AtSliceIndex(0).AtMapKey("status"), knownvalue.StringExact("True")),
					statecheck.ExpectKnownValue("varnishgw_listener_set.late", tfjsonpath.New("conditions").AtSliceIndex(0).AtMapKey("reason"), knownvalue.StringExact("ListenersNotValid")),
					statecheck.ExpectKnownValue("varnishgw_listener_set.late", tfjsonpath.New("listener_conditions").AtMapKey("dup").AtSliceIndex(2).AtMapKey("reason"), knownvalue.StringExact("HostnameConflict")),
					statecheck.ExpectKnownValue("varnishgw_http_route.team", tfjsonpath.New("routing"), knownvalue.StringRegexp(regexp.MustCompile(`"listeners":\[\{"name":"`+ns+`/team/extra","port":9090,"hostnames":\["team.example.com"\]\}\]`))),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					// The merged routing, as the pods serve it: the
					// ListenerSet's host on its own socket only.
					resource.TestCheckResourceAttr("data.varnishgw_routing.gw", "vhosts.#", "3"),
					resource.TestCheckResourceAttr("data.varnishgw_routing.gw", "vhosts.2.hostname", "team.example.com"),
					resource.TestCheckResourceAttr("data.varnishgw_routing.gw", "vhosts.2.sockets.#", "1"),
					resource.TestCheckResourceAttr("data.varnishgw_routing.gw", "vhosts.2.sockets.0", "port-9090"),
					resource.TestCheckResourceAttr("data.varnishgw_routing.gw", "vhosts.2.routes.0.route", ns+"/team"),
					resource.TestCheckResourceAttr("data.varnishgw_routing.gw", "vhosts.1.sockets.0", "port-9191"),
					resource.TestCheckResourceAttr("data.varnishgw_routing.gw", "vhosts.0.routes.#", "0"),
					func(*terraform.State) error {
						ports, err := servicePorts()
						if err != nil {
							return err
						}
						if !slices.Equal(ports, []int32{8080, 9090, 9191}) {
							return fmt.Errorf("Service ports %v, want 8080 and the ListenerSets' 9090 and 9191", ports)
						}
						args, err := listenArgs()
						if err != nil {
							return err
						}
						if !strings.Contains(args, "9090") {
							return fmt.Errorf("the chaperone's arguments lack the ListenerSet's port 9090: %s", args)
						}
						g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
						if err != nil {
							return err
						}
						served, err := routing.WithListenerSetListeners(g)
						if err != nil {
							return err
						}
						if n := len(served.Spec.Listeners); n != 3 || !slices.ContainsFunc(served.Spec.Listeners, func(l gatewayv1.Listener) bool { return string(l.Name) == ns+"/team/extra" }) {
							return fmt.Errorf("the pods would serve %d listeners: %+v", n, served.Spec.Listeners)
						}
						if g.Status.AttachedListenerSets == nil || *g.Status.AttachedListenerSets != 2 {
							return fmt.Errorf("attachedListenerSets = %v, want 2 (team and other)", g.Status.AttachedListenerSets)
						}
						ls, err := cp.Gateway.GatewayV1().ListenerSets(ns).Get(ctx, "team", metav1.GetOptions{})
						if err != nil {
							return err
						}
						// attachedRoutes: the route's apply updates it.
						if len(ls.Status.Listeners) != 1 || ls.Status.Listeners[0].Name != "extra" || len(ls.Status.Listeners[0].SupportedKinds) != 1 ||
							ls.Status.Listeners[0].AttachedRoutes != 1 {
							return fmt.Errorf("ListenerSet listener status %+v, want extra with 1 attached route", ls.Status.Listeners)
						}
						r, err := getRoute(ns, "team", cp)
						if err != nil {
							return err
						}
						for _, p := range r.Status.Parents {
							if p.ParentRef.Kind != nil && *p.ParentRef.Kind == "ListenerSet" && len(p.Conditions) > 0 &&
								p.Conditions[0].Type == string(gatewayv1.RouteConditionAccepted) && p.Conditions[0].Status == metav1.ConditionTrue {
								return nil
							}
						}
						return fmt.Errorf("route status %+v: want Accepted on the ListenerSet parent", r.Status.Parents)
					},
				),
			},
			{
				// Refreshed, the gateway sees the ListenerSet's port it
				// serves: nothing to change.
				Config:   gateway + sets,
				PlanOnly: true,
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     ns + "/team",
				ImportStateVerify: true,
				// attached routes: the ListenerSet's status is written at
				// each ListenerSet apply of the gateway, before or after
				// the route's, as Terraform's parallelism has it.
				ImportStateVerifyIgnore: []string{"wait_for_rollout", "listener_attached_routes"},
			},
			{
				// HTTPS without its tls block: an error at plan, on the
				// attribute.
				Config: gateway + strings.Replace(sets, `name     = "extra"`, `name     = "extra"
    protocol = "HTTPS"`, 1),
				ExpectError: words(`an HTTPS listener needs tls with a certificateRef`),
			},
			{
				// The ListenerSets gone: their port goes.
				Config: gateway,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroy)},
				},
				Check: func(*terraform.State) error {
					ports, err := servicePorts()
					if err != nil {
						return err
					}
					if !slices.Equal(ports, []int32{8080}) {
						return fmt.Errorf("Service ports %v after the ListenerSets are gone, want 8080", ports)
					}
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if v, ok := g.Annotations[routing.ListenerSetListenersAnnotation]; ok {
						return fmt.Errorf("annotation %s = %q after the ListenerSets are gone", routing.ListenerSetListenersAnnotation, v)
					}
					return nil
				},
			},
		},
	})
}

// TestAccListenerSetExample: the documented example plans.
func TestAccListenerSetExample(t *testing.T) {
	cp := accPreCheck(t)
	example, err := os.ReadFile("../examples/resources/varnishgw_listener_set/resource.tf")
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

// TestAccListenerSetIdentity checks the ListenerSet's identity after
// apply and imports it by identity with an import block. The CLI must be
// Terraform 1.12 or later (TF_ACC_TERRAFORM_PATH, as make
// testacc-identity sets it); with an older CLI or OpenTofu the test is
// skipped.
func TestAccListenerSetIdentity(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	config := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+`
  allowed_listeners {
    namespaces = "Same"
  }
`) + fmt.Sprintf(`
resource "varnishgw_listener_set" "team" {
  namespace        = %q
  name             = "team"
  wait_for_rollout = false
  parent_ref {
    name = varnishgw_gateway.test.name
  }
  listener {
    name = "extra"
    port = 8080
    hostname = "team.example.com"
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
					statecheck.ExpectIdentity("varnishgw_listener_set.team", map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact(ns),
						"name":      knownvalue.StringExact("team"),
					}),
				},
			},
			{
				// Like the gateway's, an import takes wait_for_rollout's
				// default, true, where the configuration says false: the
				// plan after the import updates it and nothing else.
				ResourceName:       "varnishgw_listener_set.team",
				ImportState:        true,
				ImportStateKind:    resource.ImportBlockWithResourceIdentity,
				ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("varnishgw_listener_set.team", plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue("varnishgw_listener_set.team", tfjsonpath.New("wait_for_rollout"), knownvalue.Bool(false)),
					},
				},
			},
		},
	})
}

// TestAccListenerSetHTTPS applies a gateway whose ListenerSet, in another
// namespace, has two HTTPS listeners on one port: one with a certificate
// Secret of the ListenerSet's namespace, one with a Secret of a third
// namespace that no ReferenceGrant opens to ListenerSets, and a third
// whose Secret does not exist yet. The first is served: its port is a TLS port of the pods (--tls-listen), the Gateway's
// annotation records it with the Secret's namespace, and the pods may read
// exactly that Secret through a Role in the ListenerSet's namespace; the
// second is not (ResolvedRefs False, RefNotPermitted, on the ListenerSet,
// written by the provider) and the pods may read nothing in the third
// namespace; the third is served (the pods wait for its Secret, which
// they may read). The ResolvedRefs condition of the two served HTTPS
// listeners is the pods' (no pods run here): the provider does not write
// it, the Gateway's annotation records the ListenerSet's generation for
// them, and a Role in the ListenerSet's namespace lets the pods read and
// patch the status of exactly that ListenerSet, which they do as the
// chaperone does (gatewaystatus.ListenerSetWriter). Deleting that Role is
// drift the gateway's next apply repairs. A further step applies
// the ListenerSet again (another hostname for shared): the pods' condition
// stays. The last turns the secure listener into an HTTP one on the same
// port and removes the others: the
// provider's status apply succeeds although the pods owned a condition of
// a removed listener (its entry is removed), writes ResolvedRefs of the
// HTTP listener itself, and the status Role is deleted.
func TestAccListenerSetHTTPS(t *testing.T) {
	cp := accPreCheck(t)
	ns, lsNS, certs := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	ctx := context.Background()
	gw := object.Ref{Namespace: ns, Name: "edge"}
	createService(t, cp, lsNS, "web")
	secret, _ := tlsSecret(t, lsNS, "team-cert", "team.example.com")
	if _, err := cp.Client.CoreV1().Secrets(lsNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gateway := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+`
  allowed_listeners {
    namespaces = "All"
  }
`)
	// route is attached to the ListenerSet's listener "secure".
	route := fmt.Sprintf(`
resource "varnishgw_http_route" "team" {
  namespace = %[1]q
  name      = "team"
  parent_ref {
    kind         = "ListenerSet"
    name         = varnishgw_listener_set.team.name
    section_name = "secure"
  }
  rule {
    backend_ref {
      name = "web"
      port = 80
    }
  }
}
`, lsNS)
	sets := teamListenerSetHCL(lsNS,
		setHTTPSListenerHCL("secure", "team.example.com", "team-cert", ""),
		setHTTPSListenerHCL("pending", "pending.example.com", "not-yet", ""),
		setHTTPSListenerHCL("shared", "shared.example.com", "shared", certs)) + route
	httpOnly := teamListenerSetHCL(lsNS, "  listener {\n    name     = \"secure\"\n    port     = 8443\n    hostname = \"team.example.com\"\n  }\n") + route
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: gateway + sets,
			Check: func(*terraform.State) error {
				ls, err := cp.Gateway.GatewayV1().ListenerSets(lsNS).Get(ctx, "team", metav1.GetOptions{})
				if err != nil {
					return err
				}
				refs := map[string]string{}
				for _, l := range ls.Status.Listeners {
					for _, c := range l.Conditions {
						if c.Type == string(gatewayv1.ListenerEntryConditionResolvedRefs) {
							refs[string(l.Name)] = string(c.Status) + "/" + c.Reason
						}
					}
				}
				route, err := cp.Gateway.GatewayV1().HTTPRoutes(lsNS).Get(ctx, "team", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if len(route.Status.Parents) != 1 || !meta.IsStatusConditionTrue(route.Status.Parents[0].Conditions, string(gatewayv1.RouteConditionAccepted)) {
					return fmt.Errorf("the route attached to the HTTPS listener: status %+v, want accepted", route.Status.Parents)
				}
				if refs["secure"] != "" || refs["shared"] != "False/RefNotPermitted" || refs["pending"] != "" {
					return fmt.Errorf("ListenerSet listeners' ResolvedRefs %v, want shared False/RefNotPermitted from the provider and none for secure and pending (the pods')", refs)
				}
				d, err := getDeployment(cp, gw)
				if err != nil {
					return err
				}
				if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--tls-listen=8443") {
					return fmt.Errorf("chaperone args %q lack --tls-listen=8443", args)
				}
				live, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
				if err != nil {
					return err
				}
				ann := live.Annotations[routing.ListenerSetListenersAnnotation]
				if !strings.Contains(ann, lsNS+"/team/secure") || !strings.Contains(ann, lsNS+"/team/pending") || strings.Contains(ann, "shared") ||
					!strings.Contains(ann, `"namespace":"`+lsNS+`"`) {
					return fmt.Errorf("annotation %s = %s: want the secure and pending listeners, their certificates in namespace %s", routing.ListenerSetListenersAnnotation, ann, lsNS)
				}
				role, err := cp.Client.RbacV1().Roles(lsNS).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("the Role in the ListenerSet's namespace: %w", err)
				}
				if len(role.Rules) == 0 || !slices.Equal(role.Rules[0].ResourceNames, []string{"not-yet", "team-cert"}) {
					return fmt.Errorf("Role %s/%s rules %+v, want exactly not-yet and team-cert", lsNS, role.Name, role.Rules)
				}
				if _, err := cp.Client.RbacV1().Roles(certs).Get(ctx, gwruntime.CertificateRoleName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("a Role in %s, whose Secret no ReferenceGrant permits: %v", certs, err)
				}
				if g := live.Annotations[routing.ListenerSetGenerationsAnnotation]; g != fmt.Sprintf(`{"%s/team":%d}`, lsNS, ls.Generation) {
					return fmt.Errorf("annotation %s = %s, want the ListenerSet's generation %d", routing.ListenerSetGenerationsAnnotation, g, ls.Generation)
				}
				statusRole, err := cp.Client.RbacV1().Roles(lsNS).Get(ctx, gwruntime.ListenerSetStatusRoleName(gw), metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("the ListenerSet status Role: %w", err)
				}
				if !equality.Semantic.DeepEqual(statusRole.Rules, gwruntime.ListenerSetStatusRules([]string{"team"})) {
					return fmt.Errorf("Role %s/%s rules %+v, want get and status patch of ListenerSet team only", lsNS, statusRole.Name, statusRole.Rules)
				}
				cfg, err := cp.ServiceAccountConfig(ctx, ns, gwruntime.Name(gw))
				if err != nil {
					return err
				}
				// The pods write the served listeners' ResolvedRefs.
				podsGateway := gatewayclient.NewForConfigOrDie(cfg)
				w := gatewaystatus.NewListenerSetWriter(podsGateway, gw, nil)
				if err := w.Apply(ctx, object.Ref{Namespace: lsNS, Name: "team"}, gatewaystatus.ListenerSetConditions{Generation: ls.Generation,
					Conditions: []gatewaystatus.ListenerCondition{
						{Listener: "secure", Status: metav1.ConditionTrue, Reason: gatewayv1.ListenerReasonResolvedRefs, Message: "served"},
						{Listener: "pending", Status: metav1.ConditionFalse, Reason: gatewayv1.ListenerReasonInvalidCertificateRef, Message: "not found"},
					}}); err != nil {
					return fmt.Errorf("the pods' write of the ListenerSet listeners' ResolvedRefs: %w", err)
				}
				if _, err := podsGateway.GatewayV1().ListenerSets(lsNS).Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
					return fmt.Errorf("the pods read another ListenerSet: %v, want Forbidden", err)
				}
				pods := kubernetes.NewForConfigOrDie(cfg)
				if _, err := pods.CoreV1().Secrets(lsNS).Get(ctx, "team-cert", metav1.GetOptions{}); err != nil {
					return fmt.Errorf("the pods cannot read the ListenerSet's certificate Secret: %w", err)
				}
				if _, err := pods.CoreV1().Secrets(lsNS).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
					return fmt.Errorf("the pods list every Secret of the ListenerSet's namespace: %v", err)
				}
				if _, err := pods.CoreV1().Secrets(certs).Get(ctx, "shared", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
					return fmt.Errorf("reading %s/shared as the pods: %v, want Forbidden", certs, err)
				}
				return nil
			},
		}, {
			// The status Role deleted behind Terraform's back: the
			// gateway's plan sees the drift and its apply writes it again.
			PreConfig: func() {
				if err := cp.Client.RbacV1().Roles(lsNS).Delete(ctx, gwruntime.ListenerSetStatusRoleName(gw), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			Config: gateway + sets,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("varnishgw_gateway.test", plancheck.ResourceActionUpdate),
			}},
			Check: func(*terraform.State) error {
				_, err := cp.Client.RbacV1().Roles(lsNS).Get(ctx, gwruntime.ListenerSetStatusRoleName(gw), metav1.GetOptions{})
				return err
			},
		}, {
			// An apply of the ListenerSet rewrites its status: the pods'
			// conditions stay.
			Config: gateway + strings.Replace(sets, `"shared.example.com"`, `"shared2.example.com"`, 1),
			Check: func(*terraform.State) error {
				ls, err := cp.Gateway.GatewayV1().ListenerSets(lsNS).Get(ctx, "team", metav1.GetOptions{})
				if err != nil {
					return err
				}
				for _, l := range ls.Status.Listeners {
					c := meta.FindStatusCondition(l.Conditions, string(gatewayv1.ListenerEntryConditionResolvedRefs))
					if l.Name == "pending" && (c == nil || c.Reason != string(gatewayv1.ListenerReasonInvalidCertificateRef) || c.Message != "not found") {
						return fmt.Errorf("the pods' ResolvedRefs of listener pending after a provider apply: %+v", c)
					}
				}
				return nil
			},
		}, {
			Config: gateway + httpOnly,
			Check: func(*terraform.State) error {
				ls, err := cp.Gateway.GatewayV1().ListenerSets(lsNS).Get(ctx, "team", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if len(ls.Status.Listeners) != 1 || ls.Status.Listeners[0].Name != "secure" {
					return fmt.Errorf("ListenerSet listener status %+v, want the secure listener's only", ls.Status.Listeners)
				}
				c := meta.FindStatusCondition(ls.Status.Listeners[0].Conditions, string(gatewayv1.ListenerEntryConditionResolvedRefs))
				if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != ls.Generation {
					return fmt.Errorf("ResolvedRefs of the HTTP listener %+v, want True from the provider at generation %d", c, ls.Generation)
				}
				if _, err := cp.Client.RbacV1().Roles(lsNS).Get(ctx, gwruntime.ListenerSetStatusRoleName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the ListenerSet status Role without HTTPS listeners: %v, want NotFound", err)
				}
				if _, err := cp.Client.RbacV1().RoleBindings(lsNS).Get(ctx, gwruntime.ListenerSetStatusRoleName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the ListenerSet status RoleBinding without HTTPS listeners: %v, want NotFound", err)
				}
				return nil
			},
		}},
	})
}

// TestAccListenerSetHTTPSProviderRoles applies a gateway and a ListenerSet
// of another namespace with an HTTPS listener as an identity holding only
// the provider's roles of the security guide (ProviderClusterRules bound
// cluster-wide, ProviderNamespaceRules in the gateway's namespace and in
// the ListenerSet's, which holds its certificate): Kubernetes lets it write
// the Role that grants the pods get and status patch of exactly that
// ListenerSet, since it holds those rights itself; destroying the
// ListenerSet deletes the Role.
func TestAccListenerSetHTTPSProviderRoles(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns, lsNS := cp.Namespace(t), cp.Namespace(t)
	kubeconfig, _ := providerIdentity(t, cp, ProviderClusterRules(), ns, lsNS)
	class := className(t, cp)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	gateway := strings.Replace(gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+`
  allowed_listeners {
    namespaces = "All"
  }
`), providerBlock(cp), fmt.Sprintf("provider \"varnishgw\" {\n  config_path = %q\n}\n", kubeconfig), 1)
	set := teamListenerSetHCL(lsNS, setHTTPSListenerHCL("secure", "team.example.com", "team-cert", ""))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: gateway + set,
			Check: func(*terraform.State) error {
				role, err := cp.Client.RbacV1().Roles(lsNS).Get(ctx, gwruntime.ListenerSetStatusRoleName(gw), metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("the ListenerSet status Role: %w", err)
				}
				if !equality.Semantic.DeepEqual(role.Rules, gwruntime.ListenerSetStatusRules([]string{"team"})) {
					return fmt.Errorf("Role %s/%s rules %+v, want get and status patch of ListenerSet team only", lsNS, role.Name, role.Rules)
				}
				return nil
			},
		}, {
			Config: gateway,
			Check: func(*terraform.State) error {
				if _, err := cp.Client.RbacV1().Roles(lsNS).Get(ctx, gwruntime.ListenerSetStatusRoleName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the ListenerSet status Role after the ListenerSet's destroy: %v, want NotFound", err)
				}
				return nil
			},
		}},
	})
}
