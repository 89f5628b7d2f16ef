package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

func podTemplateJSON(cp *testenv.ControlPlane, gw object.Ref) (string, error) {
	d, err := getDeployment(cp, gw)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(d.Spec.Template)
	return string(b), err
}

func TestAccGateway(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	ctx := context.Background()
	gw := object.Ref{Namespace: ns, Name: "edge"}
	name := gwruntime.Name(gw)
	const addr = "varnishgw_gateway.test"

	// Objects the resource did not create: they must survive destroy.
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns}, Data: map[string]string{"a": "b"}}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, bystander, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	oneListener := listenerHCL("http", 8080)
	twoListeners := listenerHCL("http", 8080) + listenerHCL("alt", 9090)

	var svcUID types.UID
	var template, startHash string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			checks := map[string]error{}
			_, checks["Gateway"] = cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
			_, checks["Deployment"] = cp.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			_, checks["Service"] = cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			_, checks["PodDisruptionBudget"] = cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			_, checks["ServiceAccount"] = cp.Client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
			_, checks["Role"] = cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
			_, checks["RoleBinding"] = cp.Client.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
			_, checks["ClusterRole"] = cp.Client.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(gw), metav1.GetOptions{})
			_, checks["VCL ConfigMap"] = cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
			for what, err := range checks {
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s after destroy: %v, want NotFound", what, err)
				}
			}
			if _, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "bystander", metav1.GetOptions{}); err != nil {
				return fmt.Errorf("destroy removed a ConfigMap it did not create: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// Create: every object with the right content.
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`, oneListener+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"1\"; }"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(ns+"/edge")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("replicas"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("mode"), knownvalue.StringExact("supervise")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("service_type"), knownvalue.StringExact("ClusterIP")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("listener_attached_routes"), knownvalue.MapExact(map[string]knownvalue.Check{"http": knownvalue.Int64Exact(0)})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("addresses"), knownvalue.ListSizeExact(1)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("start_hash"), knownvalue.NotNull()),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error { return checkGatewayOwned(ctx, cp, gw) },
					func(*terraform.State) error {
						g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
						if err != nil {
							return err
						}
						if string(g.Spec.GatewayClassName) != class || len(g.Spec.Listeners) != 1 || g.Spec.Listeners[0].Port != 8080 {
							return fmt.Errorf("Gateway spec = %+v", g.Spec)
						}
						if err := checkGatewayAccepted(g); err != nil {
							return err
						}
						if len(g.Status.Listeners) != 1 || len(g.Status.Listeners[0].SupportedKinds) != 1 || g.Status.Listeners[0].SupportedKinds[0].Kind != "HTTPRoute" {
							return fmt.Errorf("listener status = %+v", g.Status.Listeners)
						}
						if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value == "" {
							return fmt.Errorf("status addresses = %+v, want the Service's cluster IP", g.Status.Addresses)
						}
						cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
						if err != nil {
							return err
						}
						vcl := cm.Data[gwruntime.VCLDataKey]
						for _, want := range []string{`ghost.router("ghost.json", admin_socket = "ghost-admin")`, `set resp.http.x-v = "1";`} {
							if !strings.Contains(vcl, want) {
								return fmt.Errorf("main.vcl lacks %q:\n%s", want, vcl)
							}
						}
						// The pods load only the main.vcl whose digest the
						// provider recorded on the Gateway.
						if got, want := g.Annotations[gwruntime.VCLDigestAnnotation], gwruntime.VCLDigest(vcl); got != want {
							return fmt.Errorf("Gateway annotation %s = %q, want the digest of the ConfigMap's main.vcl %q", gwruntime.VCLDigestAnnotation, got, want)
						}
						d, err := getDeployment(cp, gw)
						if err != nil {
							return err
						}
						pod := d.Spec.Template
						if pod.Spec.ServiceAccountName != name || len(pod.Spec.Containers) != 1 {
							return fmt.Errorf("pod spec: serviceAccountName %q, %d containers", pod.Spec.ServiceAccountName, len(pod.Spec.Containers))
						}
						args := pod.Spec.Containers[0].Args
						for _, want := range []string{"--routing=kubernetes", "--gateway=" + ns + "/edge", "--vcl=", "--listen=8080",
							"--workdir=/var/lib/varnishgw/varnishd", "--ghost-json=/var/lib/varnishgw/varnishd/ghost.json", "--storage=" + gwruntime.DefaultStorage, "--param=thread_pool_min=20", "--log-level=info", "--drain-timeout=300s"} {
							if !slices.Contains(args, want) {
								return fmt.Errorf("chaperone args %q lack %q", args, want)
							}
						}
						if pod.Spec.Containers[0].Image != testImage || pod.Annotations[gwruntime.StartHashAnnotation] == "" {
							return fmt.Errorf("image %q, start hash %q", pod.Spec.Containers[0].Image, pod.Annotations[gwruntime.StartHashAnnotation])
						}
						if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 335 {
							return fmt.Errorf("terminationGracePeriodSeconds = %v, want 335", g)
						}
						if c := pod.Spec.Containers[0]; c.ReadinessProbe == nil || c.LivenessProbe == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
							return fmt.Errorf("container lacks probes or preStop: %+v", c)
						}
						if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].EmptyDir == nil || pod.Spec.Volumes[1].Name != "tmp" || pod.Spec.Volumes[1].EmptyDir == nil {
							return fmt.Errorf("volumes = %+v, want the emptyDirs state and tmp", pod.Spec.Volumes)
						}
						for k, v := range gwruntime.Labels(gw) {
							if d.Spec.Selector.MatchLabels[k] != v || pod.Labels[k] != v || d.Labels[k] != v {
								return fmt.Errorf("label %s=%s missing on selector, pod or Deployment", k, v)
							}
						}
						svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						svcUID = svc.UID
						if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "port-8080" || svc.Spec.Ports[0].Port != 8080 {
							return fmt.Errorf("Service ports = %+v", svc.Spec.Ports)
						}
						pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" {
							return fmt.Errorf("PDB maxUnavailable = %v, want 1", pdb.Spec.MaxUnavailable)
						}
						if template, err = podTemplateJSON(cp, gw); err != nil {
							return err
						}
						startHash = pod.Annotations[gwruntime.StartHashAnnotation]
						return nil
					},
				),
			},
			{
				// VCL changed: the ConfigMap changes, the pod template does not.
				// The chaperone's Programmed condition survives the apply.
				PreConfig: func() {
					programmed := gatewayv1apply.Gateway("edge", ns).WithStatus(gatewayv1apply.GatewayStatus().WithConditions(
						metav1apply.Condition().WithType("Programmed").WithStatus(metav1.ConditionTrue).WithReason("Programmed").
							WithMessage("by the chaperone").WithLastTransitionTime(metav1.Now()).WithObservedGeneration(1)))
					if _, err := cp.Gateway.GatewayV1().Gateways(ns).ApplyStatus(ctx, programmed, metav1.ApplyOptions{FieldManager: "varnishgw-chaperone"}); err != nil {
						t.Fatal(err)
					}
				},
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`, oneListener+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"2\"; }"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: func(*terraform.State) error {
					cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
					if err != nil {
						return err
					}
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if c := meta.FindStatusCondition(g.Status.Conditions, "Programmed"); c == nil || c.Message != "by the chaperone" {
						return fmt.Errorf("the apply lost the chaperone's Programmed condition: %+v", g.Status.Conditions)
					}
					if err := checkGatewayAccepted(g); err != nil {
						return err
					}
					if !strings.Contains(cm.Data[gwruntime.VCLDataKey], `x-v = "2"`) {
						return fmt.Errorf("main.vcl not updated:\n%s", cm.Data[gwruntime.VCLDataKey])
					}
					if got, want := g.Annotations[gwruntime.VCLDigestAnnotation], gwruntime.VCLDigest(cm.Data[gwruntime.VCLDataKey]); got != want {
						return fmt.Errorf("Gateway annotation %s = %q after the VCL change, want %q", gwruntime.VCLDigestAnnotation, got, want)
					}
					got, err := podTemplateJSON(cp, gw)
					if err != nil {
						return err
					}
					if got != template {
						return fmt.Errorf("a VCL change changed the pod template:\n%s\nwas\n%s", got, template)
					}
					return nil
				},
			},
			{
				// The same configuration again: nothing to do.
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`, oneListener+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"2\"; }"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// Listener added: the Service gets the port in place.
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`, twoListeners+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"2\"; }"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("listener_attached_routes"), knownvalue.MapExact(map[string]knownvalue.Check{
						"http": knownvalue.Int64Exact(0), "alt": knownvalue.Int64Exact(0),
					})),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(*terraform.State) error {
						svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						if svc.UID != svcUID {
							return fmt.Errorf("Service replaced: uid %s, was %s", svc.UID, svcUID)
						}
						if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "port-9090" {
							return fmt.Errorf("Service ports = %+v, want port-8080 and port-9090", svc.Spec.Ports)
						}
						d, err := getDeployment(cp, gw)
						if err != nil {
							return err
						}
						if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--listen=8080,9090") {
							return fmt.Errorf("args = %q, want --listen=8080,9090", d.Spec.Template.Spec.Containers[0].Args)
						}
						if d.Spec.Template.Annotations[gwruntime.StartHashAnnotation] == startHash {
							return fmt.Errorf("a new listener port did not change the start hash")
						}
						startHash = d.Spec.Template.Annotations[gwruntime.StartHashAnnotation]
						return nil
					},
				),
			},
			{
				// Storage changed in the class: the same plan updates the
				// gateway after the class, and its pods' start hash changes.
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`+"\n  storage = \"malloc,512m\"", twoListeners+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"2\"; }"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("varnishgw_gateway_class.test", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						plancheck.ExpectUnknownValue(addr, tfjsonpath.New("start_hash")),
					},
				},
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--storage=malloc,512m") {
						return fmt.Errorf("args = %q, want --storage=malloc,512m", d.Spec.Template.Spec.Containers[0].Args)
					}
					if d.Spec.Template.Annotations[gwruntime.StartHashAnnotation] == startHash {
						return fmt.Errorf("a storage change did not change the start hash")
					}
					return nil
				},
			},
			{
				ResourceName:            addr,
				ImportState:             true,
				ImportStateId:           ns + "/edge",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"wait_for_rollout"},
			},
			{
				// Drift: out-of-band edits of the Deployment and the Gateway
				// show in the plan and the apply puts them back.
				PreConfig: func() {
					d, err := getDeployment(cp, gw)
					if err != nil {
						t.Fatal(err)
					}
					three := int32(3)
					d.Spec.Replicas = &three
					if _, err := cp.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					g.Spec.Listeners[1].Port = 9191
					if _, err := cp.Gateway.GatewayV1().Gateways(ns).Update(ctx, g, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`+"\n  storage = \"malloc,512m\"", twoListeners+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"2\"; }"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("replicas"), knownvalue.Int64Exact(1)),
					},
				},
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if *d.Spec.Replicas != 1 || g.Spec.Listeners[1].Port != 9090 {
						return fmt.Errorf("replicas %d, port %d after apply: want the drift corrected to 1 and 9090", *d.Spec.Replicas, g.Spec.Listeners[1].Port)
					}
					return nil
				},
			},
			{
				// Drift no attribute shows: a deleted Role and VCL
				// ConfigMap, an edited image.
				PreConfig: func() {
					if err := cp.Client.RbacV1().Roles(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					if err := cp.Client.CoreV1().ConfigMaps(ns).Delete(ctx, gwruntime.VCLConfigMapName(gw), metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					d, err := getDeployment(cp, gw)
					if err != nil {
						t.Fatal(err)
					}
					d.Spec.Template.Spec.Containers[0].Image = "example.com/other:1"
					if _, err := cp.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`+"\n  storage = \"malloc,512m\"", twoListeners+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"2\"; }"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: func(*terraform.State) error {
					if _, err := cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
						return fmt.Errorf("Role not restored: %v", err)
					}
					if cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{}); err != nil || !strings.Contains(cm.Data[gwruntime.VCLDataKey], `x-v = "2"`) {
						return fmt.Errorf("VCL ConfigMap not restored: %v", err)
					}
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					if d.Spec.Template.Spec.Containers[0].Image != testImage {
						return fmt.Errorf("image = %q, want the drift corrected", d.Spec.Template.Spec.Containers[0].Image)
					}
					if *d.Spec.Replicas != 1 {
						return fmt.Errorf("replicas after apply = %d, want the drift corrected to 1", *d.Spec.Replicas)
					}
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if g.Spec.Listeners[1].Port != 9090 {
						return fmt.Errorf("listener port after apply = %d, want the drift corrected to 9090", g.Spec.Listeners[1].Port)
					}
					return nil
				},
			},
			{
				// The gateway pods own attachedRoutes (and an HTTPS
				// listener's ResolvedRefs) under their field managers: an
				// apply keeps their value, and removing a listener removes
				// its whole status entry, their fields included.
				PreConfig: func() {
					st := gatewayv1apply.GatewayStatus()
					for _, l := range []gatewayv1.SectionName{"http", "alt"} {
						st.WithListeners(gatewayv1apply.ListenerStatus().WithName(l).WithAttachedRoutes(3))
					}
					if _, err := cp.Gateway.GatewayV1().Gateways(ns).ApplyStatus(ctx, gatewayv1apply.Gateway("edge", ns).WithStatus(st),
						metav1.ApplyOptions{FieldManager: "varnishgw-chaperone-routes", Force: true}); err != nil {
						t.Fatal(err)
					}
				},
				Config: gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`+"\n  storage = \"malloc,512m\"", listenerHCL("http", 8080)+`  vcl = "sub vcl_deliver { set resp.http.x-v = \"2\"; }"`),
				Check: func(*terraform.State) error {
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if len(g.Status.Listeners) != 1 || g.Status.Listeners[0].Name != "http" || g.Status.Listeners[0].AttachedRoutes != 3 {
						return fmt.Errorf("listener status = %+v, want http alone with the pods' attachedRoutes 3", g.Status.Listeners)
					}
					for _, c := range g.Status.Listeners[0].Conditions {
						if c.ObservedGeneration != g.Generation {
							return fmt.Errorf("listener condition %s at observedGeneration %d, want %d", c.Type, c.ObservedGeneration, g.Generation)
						}
					}
					return checkGatewayAccepted(g)
				},
			},
		},
	})
}

func checkGatewayAccepted(g *gatewayv1.Gateway) error {
	for _, c := range g.Status.Conditions {
		if c.Type == string(gatewayv1.GatewayConditionAccepted) {
			if c.Status != metav1.ConditionTrue || c.ObservedGeneration != g.Generation {
				return fmt.Errorf("Accepted = %+v, want True at generation %d", c, g.Generation)
			}
			return nil
		}
	}
	return fmt.Errorf("no Accepted condition in %+v", g.Status.Conditions)
}

// TestAccGatewayRBAC checks the gateway ServiceAccount's permissions with
// its real token: what the chaperone needs and nothing more, and backend
// namespaces readable only once a route with a backend there is applied
// (their ReferenceGrants permit it; TestAccHTTPRouteBackendBindingsNeedAGrant
// checks a namespace without one).
func TestAccGatewayRBAC(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	backends := cp.Namespace(t)
	moved := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	ctx := context.Background()
	gw := object.Ref{Namespace: ns, Name: "edge"}
	createService(t, cp, backends, "api")
	// The backend namespaces permit the routes of ns (a binding goes only
	// where a grant permits the route).
	for _, n := range []string{backends, moved} {
		grant := &gatewayv1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "routes-of-" + ns},
			Spec: gatewayv1.ReferenceGrantSpec{
				From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(ns)}},
				To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
			},
		}
		if _, err := cp.Gateway.GatewayV1().ReferenceGrants(n).Create(ctx, grant, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Another Gateway in the same namespace, not created by the resource.
	createGateway(t, cp, ns, "other", createClass(t, cp, gwruntime.ControllerName), "")

	base := gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080))
	route := base + fmt.Sprintf(`
resource "varnishgw_http_route" "api" {
  namespace = %q
  name      = "api"
  parent_ref {
    name = varnishgw_gateway.test.name
  }
  rule {
    backend_ref {
      name      = "api"
      namespace = %q
      port      = 80
    }
  }
}
`, ns, backends)
	// A route the Gateway does not accept (its listener allows routes
	// from its own namespace only) gets no binding for its backends.
	foreign := cp.Namespace(t)
	route += fmt.Sprintf(`
resource "varnishgw_http_route" "foreign" {
  namespace = %q
  name      = "foreign"
  parent_ref {
    name      = varnishgw_gateway.test.name
    namespace = %q
  }
  rule {
    backend_ref {
      name      = "api"
      namespace = %q
      port      = 80
    }
  }
}
`, backends, ns, foreign)
	routeMoved := strings.Replace(route, fmt.Sprintf("namespace = %q\n      port      = 80", backends), fmt.Sprintf("namespace = %q\n      port      = 80", moved), 1)

	var kube kubernetes.Interface
	var dyn dynamic.Interface
	var gwc gatewayclient.Interface
	login := func() error {
		cfg, err := cp.ServiceAccountConfig(ctx, ns, gwruntime.Name(gw))
		if err != nil {
			return err
		}
		if kube, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return err
		}
		gwc, err = gatewayclient.NewForConfig(cfg)
		return err
	}
	can := func(ns, verb, group, res, name string) bool {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: group, Resource: res, Name: name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview: %v", err)
		}
		return r.Status.Allowed
	}
	// canRoute: may it verb the route ns/name's status (or, with
	// sub "", the route itself)?
	canRoute := func(ns, verb, sub, name string) bool {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: gatewayv1.GroupName, Resource: "httproutes", Subresource: sub, Name: name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview: %v", err)
		}
		return r.Status.Allowed
	}
	statusPatch := []byte(`{"status":{"conditions":[{"type":"Programmed","status":"True","reason":"Programmed","message":"test","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1}]}}`)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: base,
				Check: func(*terraform.State) error {
					if err := login(); err != nil {
						return err
					}
					// Real requests: what the chaperone does.
					vclOnly := metav1.ListOptions{FieldSelector: "metadata.name=" + gwruntime.VCLConfigMapName(gw)}
					if _, err := kube.CoreV1().ConfigMaps(ns).List(ctx, vclOnly); err != nil {
						return fmt.Errorf("list its VCL ConfigMap by name: %v", err)
					}
					if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{}); err != nil {
						return fmt.Errorf("get the VCL ConfigMap: %v", err)
					}
					if _, err := dyn.Resource(vgwapi.RoutingFragments).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
						return fmt.Errorf("list RoutingFragments: %v", err)
					}
					if !can(ns, "create", vgwapi.Group, vgwapi.GatewayPodReportResource, "") || !can(ns, "patch", vgwapi.Group, vgwapi.GatewayPodReportResource, "x") {
						return fmt.Errorf("cannot create and patch its pods' GatewayPodReports")
					}
					if _, err := dyn.Resource(vgwapi.CacheInvalidations).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
						return fmt.Errorf("list CacheInvalidations: %v", err)
					}
					if !can(ns, "watch", vgwapi.Group, vgwapi.CacheInvalidationResource, "") {
						return fmt.Errorf("cannot watch CacheInvalidations")
					}
					if _, err := gwc.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{}); err != nil {
						return fmt.Errorf("get its Gateway: %v", err)
					}
					if _, err := gwc.GatewayV1().Gateways(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=edge"}); err != nil {
						return fmt.Errorf("list its Gateway by name: %v", err)
					}
					if _, err := gwc.GatewayV1().Gateways(ns).Patch(ctx, "edge", types.MergePatchType, statusPatch, metav1.PatchOptions{FieldManager: "varnishgw-chaperone"}, "status"); err != nil {
						return fmt.Errorf("patch its Gateway's status: %v", err)
					}
					// And nothing more.
					if _, err := gwc.GatewayV1().Gateways(ns).Patch(ctx, "other", types.MergePatchType, statusPatch, metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
						return fmt.Errorf("patch another Gateway's status: %v, want Forbidden", err)
					}
					if _, err := gwc.GatewayV1().Gateways(ns).Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
						return fmt.Errorf("get another Gateway: %v, want Forbidden", err)
					}
					if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
						return fmt.Errorf("create a ConfigMap: %v, want Forbidden", err)
					}
					if _, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
						return fmt.Errorf("list every ConfigMap: %v, want Forbidden", err)
					}
					for _, denied := range []struct{ ns, verb, group, res, name string }{
						{ns, "update", "", "configmaps", gwruntime.VCLConfigMapName(gw)},
						{ns, "get", "", "configmaps", "bystander"},
						{ns, "create", vgwapi.Group, vgwapi.RoutingFragmentResource, ""},
						{ns, "patch", vgwapi.Group, vgwapi.RoutingFragmentResource, "x"},
						{ns, "delete", vgwapi.Group, vgwapi.GatewayPodReportResource, "x"},
						{ns, "create", vgwapi.Group, vgwapi.CacheInvalidationResource, ""},
						{ns, "list", "", "pods", ""},
						{ns, "delete", "", "configmaps", gwruntime.VCLConfigMapName(gw)},
						{ns, "update", gatewayv1.GroupName, "gateways", "edge"},
						{ns, "list", "", "secrets", ""},
						{backends, "list", "discovery.k8s.io", "endpointslices", ""},
						{backends, "list", "", "services", ""},
						{ns, "list", "discovery.k8s.io", "endpointslices", ""},
						{ns, "get", gatewayv1.GroupName, "httproutes", "api"},
					} {
						if can(denied.ns, denied.verb, denied.group, denied.res, denied.name) {
							return fmt.Errorf("the ServiceAccount may %s %s %s/%s before any route: want denied", denied.verb, denied.res, denied.ns, denied.name)
						}
					}
					if _, err := kube.DiscoveryV1().EndpointSlices(backends).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
						return fmt.Errorf("list EndpointSlices in %s before a route: %v, want Forbidden", backends, err)
					}
					return nil
				},
			},
			{
				// A route with a backend in another namespace: readable now.
				Config: route,
				Check: func(*terraform.State) error {
					if _, err := kube.DiscoveryV1().EndpointSlices(backends).List(ctx, metav1.ListOptions{}); err != nil {
						return fmt.Errorf("list EndpointSlices in %s after the route: %v", backends, err)
					}
					if _, err := kube.CoreV1().Services(backends).Get(ctx, "api", metav1.GetOptions{}); err != nil {
						return fmt.Errorf("get the backend Service: %v", err)
					}
					if !can(backends, "watch", gatewayv1.GroupName, "referencegrants", "") {
						return fmt.Errorf("cannot watch ReferenceGrants in %s after the route", backends)
					}
					if can(ns, "list", "discovery.k8s.io", "endpointslices", "") {
						return fmt.Errorf("may list EndpointSlices in %s, where the route has no backend", ns)
					}
					if can(foreign, "list", "discovery.k8s.io", "endpointslices", "") {
						return fmt.Errorf("may list EndpointSlices in %s, the backend namespace of a route the Gateway does not accept", foreign)
					}
					if can(backends, "list", "", "secrets", "") || can(backends, "update", "", "services", "api") {
						return fmt.Errorf("the backend binding grants more than read access to services, endpointslices and referencegrants")
					}
					// The status of the route it serves, to keep its
					// ResolvedRefs condition true; not the route's spec,
					// not the route it does not accept, not others.
					if !canRoute(ns, "get", "", "api") || !canRoute(ns, "patch", "status", "api") {
						return fmt.Errorf("cannot get route %s/api and patch its status", ns)
					}
					if _, err := gwc.GatewayV1().HTTPRoutes(ns).Get(ctx, "api", metav1.GetOptions{}); err != nil {
						return fmt.Errorf("get the route it serves: %v", err)
					}
					for _, denied := range []struct{ ns, verb, sub, name string }{
						{ns, "patch", "", "api"}, {ns, "update", "status", "api"}, {ns, "list", "", ""}, {ns, "patch", "status", "other"},
						{backends, "get", "", "foreign"}, {backends, "patch", "status", "foreign"},
					} {
						if canRoute(denied.ns, denied.verb, denied.sub, denied.name) {
							return fmt.Errorf("the ServiceAccount may %s httproutes/%s %s/%s: want denied", denied.verb, denied.sub, denied.ns, denied.name)
						}
					}
					return nil
				},
			},
			{
				// The backend moved to another namespace: the binding moves.
				Config: routeMoved,
				Check: func(*terraform.State) error {
					if !can(moved, "list", "discovery.k8s.io", "endpointslices", "") {
						return fmt.Errorf("cannot list EndpointSlices in %s, where the backend moved", moved)
					}
					if can(backends, "list", "discovery.k8s.io", "endpointslices", "") {
						return fmt.Errorf("may still list EndpointSlices in %s, which the route no longer references", backends)
					}
					return nil
				},
			},
			{
				// The route gone: its binding is gone too.
				Config: base,
				Check: func(*terraform.State) error {
					if can(moved, "list", "discovery.k8s.io", "endpointslices", "") {
						return fmt.Errorf("may still list EndpointSlices in %s after the route was destroyed", moved)
					}
					if canRoute(ns, "patch", "status", "api") {
						return fmt.Errorf("may still patch the status of route %s/api after it was destroyed", ns)
					}
					name := gwruntime.RouteStatusRoleName(gw)
					if _, err := cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("the route's status Role %s/%s after the route was destroyed: %v, want NotFound", ns, name, err)
					}
					for _, n := range []string{backends, moved} {
						list, err := cp.Client.RbacV1().RoleBindings(n).List(ctx, metav1.ListOptions{})
						if err != nil {
							return err
						}
						if len(list.Items) != 0 {
							return fmt.Errorf("RoleBindings left in %s: %d", n, len(list.Items))
						}
					}
					return nil
				},
			},
		},
	})
}

// TestAccGatewayRolloutWait checks wait_for_rollout: apply waits until the
// Deployment reports the rollout (the test plays the Deployment
// controller, which the test control plane lacks), and times out with a
// clear error when it never comes.
func TestAccGatewayRolloutWait(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	ctx := context.Background()
	gw := object.Ref{Namespace: ns, Name: "edge"}
	cfg := func(wait string) string {
		return strings.Replace(gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+"\n  replicas = 2\n"+wait),
			"  wait_for_rollout   = false\n", "", 1)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      cfg(`  rollout_timeout = "3s"`),
				ExpectError: words(`did not roll out within rollout_timeout \(3s\)`),
			},
			{
				PreConfig: func() {
					// Play the Deployment controller while apply waits: once
					// the new template (log level debug) is written, report
					// it rolled out.
					go func() {
						deadline := time.Now().Add(2 * time.Minute)
						for time.Now().Before(deadline) {
							d, err := getDeployment(cp, gw)
							if err == nil && slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") {
								d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
								if _, err := cp.Client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err == nil {
									return
								}
							}
							time.Sleep(200 * time.Millisecond)
						}
					}()
				},
				Config: strings.Replace(cfg(`  rollout_timeout = "2m"`), "parameters_namespace", "log_level = \"debug\"\n  parameters_namespace", 1),
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					if ok, why := control.RolledOut(d); !ok {
						return fmt.Errorf("apply returned before the rollout: %s", why)
					}
					return nil
				},
			},
		},
	})
}

func TestAccGatewayValidation(t *testing.T) {
	cp := accPreCheck(t)
	listener := "listener {\n  name = \"a\"\n  port = 80\n}\n"
	for _, tc := range []struct{ name, body, line, want string }{
		{"tls passthrough protocol", "listener {\n  name     = \"tls\"\n  port     = 443\n  protocol = \"TLS\"\n}", `protocol = "TLS"`,
			`listener "tls": protocol "TLS" is not served: varnishgw serves HTTP and HTTPS`},
		{"https without tls", "listener {\n  name     = \"https\"\n  port     = 443\n  protocol = \"HTTPS\"\n}", `listener {`,
			`listener\[0\]\.tls: Required value: an HTTPS listener needs tls with a certificateRef`},
		{"passthrough", "listener {\n  name     = \"https\"\n  port     = 443\n  protocol = \"HTTPS\"\n  tls {\n    mode = \"Passthrough\"\n    certificate_ref {\n      name = \"www\"\n    }\n  }\n}",
			`mode = "Passthrough"`, `listener\[0\]\.tls\.mode: Unsupported value: "Passthrough": Passthrough hands the encrypted connection to a backend \(protocol TLS with TLSRoutes\), which varnishgw does not serve; varnishgw terminates TLS on HTTPS listeners: set mode Terminate \(the default\) or remove mode`},
		{"tls on http", "listener {\n  name     = \"http\"\n  port     = 80\n  tls {\n    certificate_ref {\n      name = \"www\"\n    }\n  }\n}",
			`tls {`, `listener\[0\]\.tls: Forbidden: an HTTP listener has no TLS: remove tls, or set protocol HTTPS`},
		{"no certificate", "listener {\n  name     = \"https\"\n  port     = 443\n  protocol = \"HTTPS\"\n  tls {\n    mode = \"Terminate\"\n  }\n}",
			`tls {`, `listener\[0\]\.tls\.certificate_ref: Required value: at least one Secret of type kubernetes.io/tls`},
		{"certificate of another kind", "listener {\n  name     = \"https\"\n  port     = 443\n  protocol = \"HTTPS\"\n  tls {\n    certificate_ref {\n      kind = \"ConfigMap\"\n      name = \"www\"\n    }\n  }\n}",
			`kind = "ConfigMap"`, `listener\[0\]\.tls\.certificate_ref\[0\]\.kind: Unsupported value: "ConfigMap": certificates come from Secrets of type kubernetes.io/tls: set kind Secret or remove kind "ConfigMap"`},
		{"external traffic policy on ClusterIP", listener + "external_traffic_policy = \"Local\"", `external_traffic_policy = "Local"`,
			`external_traffic_policy = "Local" applies to traffic from outside the cluster, which a ClusterIP Service does not take`},
		{"bad mode", listener + "mode = \"daemon\"", `mode = "daemon"`, `value must be one of: \["supervise" "sidecar"\]`},
		{"duplicate listener", listener + strings.Replace(listener, "80", "81", 1), `name = "a"`, `listener\[1\]\.name: Duplicate value: "a"`},
		{"bad port", "listener {\n  name = \"a\"\n  port = 0\n}", `port = 0`, `listener\[0\]\.port: Invalid value: 0: must be a port number from 1 to 65535`},
		{"bad listener name", "listener {\n  name = \"Web\"\n  port = 80\n}", `name = "Web"`, `listener\[0\]\.name: Invalid value: "Web": must be lower case: use "web"`},
		{"bad listener hostname", "listener {\n  name     = \"a\"\n  port     = 80\n  hostname = \"*.bücher.example\"\n}", `hostname = "\*.bücher.example"`,
			`listener\[0\]\.hostname: Invalid value: "\*.bücher.example": is a Unicode \(internationalised\) name: use its punycode \(xn--...\) form "\*.xn--bcher-kva.example"`},
		{"bad quantity", listener + "resources {\n  limits = { memory = \"lots\" }\n}", `limits = { memory = "lots" }`, `resources.limits\["memory"\] = "lots" is not a Kubernetes quantity`},
		{"selector without Selector", "listener {\n  name = \"a\"\n  port = 80\n  allowed_routes {\n    namespaces = \"All\"\n    selector   = { team = \"x\" }\n  }\n}",
			`selector   = { team = "x" }`, `selector and selector_expression are used only with namespaces = "Selector"`},
		{"Selector without selector", "listener {\n  name = \"a\"\n  port = 80\n  allowed_routes {\n    namespaces = \"Selector\"\n  }\n}",
			`allowed_routes {`, `namespaces = "Selector" needs selector`},
		{"unsupported route kind", "listener {\n  name = \"a\"\n  port = 80\n  allowed_routes {\n    kind {\n      kind = \"GRPCRoute\"\n    }\n  }\n}",
			`kind = "GRPCRoute"`, `listener\[0\]\.allowed_routes\.kind\[0\]: Unsupported value: "GRPCRoute": supported values: "HTTPRoute"`},
		{"no listener", "replicas = 1", `resource "varnishgw_gateway" "bad" {`, `Block listener must have a configuration value as the provider has marked it as required`},
		{"bad pdb", listener + "pdb_max_unavailable = \"half\"", `pdb_max_unavailable = "half"`, `must be a whole number such as 1 or a percentage`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config: providerBlock(cp) + "resource \"varnishgw_gateway\" \"bad\" {\nnamespace = \"default\"\nname = \"bad\"\ngateway_class_name = \"c\"\n" +
						tc.body + "\n}\n",
					PlanOnly:    true,
					ExpectError: onlyError(tc.line, tc.want),
				}},
			})
		})
	}
	t.Run("class not served by varnishgw", func(t *testing.T) {
		ns := cp.Namespace(t)
		other := createClass(t, cp, "example.com/other")
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: protoV6ProviderFactories,
			Steps: []resource.TestStep{{
				Config: providerBlock(cp) + fmt.Sprintf(`resource "varnishgw_gateway" "bad" {
  namespace          = %q
  name               = "bad"
  gateway_class_name = %q
  wait_for_rollout   = false
  listener {
    name = "http"
    port = 80
  }
}
`, ns, other),
				ExpectError: words(`controllerName "example.com/other", not "varnishgw.dev/gateway-controller"`),
			}},
		})
		if _, err := cp.Gateway.GatewayV1().Gateways(ns).Get(context.Background(), "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Gateway written although its class is not varnishgw's: %v", err)
		}
	})
}

func TestAccGatewayExample(t *testing.T) {
	cp := accPreCheck(t)
	example, err := os.ReadFile("../examples/resources/varnishgw_gateway/resource.tf")
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

// TestAccGatewaySidecar checks sidecar mode: a varnish container running
// varnishd as design/chaperone.md describes, the chaperone steering it, the
// shared admin Secret kept across applies, and the switch back to
// supervise mode.
func TestAccGatewaySidecar(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	ctx := context.Background()
	gw := object.Ref{Namespace: ns, Name: "edge"}
	listeners := listenerHCL("http", 8080) + `  listener {
    name     = "admin"
    port     = 8080
    hostname = "admin.example.com"
  }
` + listenerHCL("alt", 9090)
	cfg := func(body string) string {
		return gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20" }`, listeners+body)
	}
	var secret []byte
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("admin Secret after destroy: %v, want NotFound", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: cfg(`  mode = "sidecar"` + "\n" + "  resources {\n    limits = { memory = \"1Gi\" }\n  }"),
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					pod := d.Spec.Template.Spec
					if len(pod.Containers) != 2 || pod.Containers[0].Name != "varnish" || pod.Containers[1].Name != "chaperone" {
						return fmt.Errorf("containers = %d, want varnish and chaperone", len(pod.Containers))
					}
					varnish, chap := pod.Containers[0], pod.Containers[1]
					wantVarnishd := "-F -n /var/lib/varnishgw/varnishd -a port-8080=:8080 -a port-9090=:9090 -a ghost-admin=127.0.0.1:6084 " +
						"-M 127.0.0.1:6082 -T none -S /etc/varnishgw/secret/secret -f /etc/varnishgw/boot/boot.vcl -s " + gwruntime.DefaultStorage +
						" -p " + strings.Join(varnishd.DefaultParams(), " -p ") + " -p thread_pool_min=20"
					if got := strings.Join(varnish.Args, " "); got != wantVarnishd || len(varnish.Command) != 1 || varnish.Command[0] != "/usr/sbin/varnishd" {
						return fmt.Errorf("varnish container runs %q %q, want varnishd %q", varnish.Command, got, wantVarnishd)
					}
					wantHook := []string{"/usr/local/bin/chaperone", "drain", "--socket=/var/lib/varnishgw/drain.sock", "--delay=5s"}
					if varnish.Lifecycle == nil || varnish.Lifecycle.PreStop == nil || varnish.Lifecycle.PreStop.Exec == nil ||
						varnish.Lifecycle.PreStop.HTTPGet != nil || !slices.Equal(varnish.Lifecycle.PreStop.Exec.Command, wantHook) {
						return fmt.Errorf("varnish preStop = %+v, want exec %q", varnish.Lifecycle, wantHook)
					}
					if chap.Lifecycle == nil || chap.Lifecycle.PreStop == nil || chap.Lifecycle.PreStop.Sleep == nil || chap.Lifecycle.PreStop.Sleep.Seconds != 5 {
						return fmt.Errorf("chaperone preStop = %+v, want sleep 5 s (its SIGTERM drains too)", chap.Lifecycle)
					}
					if q := varnish.Resources.Limits.Memory(); q.String() != "1Gi" {
						return fmt.Errorf("varnish memory limit = %s, want 1Gi", q)
					}
					for _, want := range []string{"--mode=sidecar", "--secret-file=/etc/varnishgw/secret/secret", "--routing=kubernetes", "--vcl="} {
						if !slices.Contains(chap.Args, want) {
							return fmt.Errorf("chaperone args %q lack %q", chap.Args, want)
						}
					}
					mounts := func(c corev1.Container) (out []string) {
						for _, m := range c.VolumeMounts {
							out = append(out, m.Name+":"+m.MountPath)
						}
						return out
					}
					for _, m := range []string{"state:/var/lib/varnishgw", "admin-secret:/etc/varnishgw/secret"} {
						if !slices.Contains(mounts(varnish), m) || !slices.Contains(mounts(chap), m) {
							return fmt.Errorf("volume mount %s not shared: varnish %v, chaperone %v", m, mounts(varnish), mounts(chap))
						}
					}
					cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
					if err != nil {
						return err
					}
					if !strings.Contains(cm.Data["boot.vcl"], "varnishgw: starting") {
						return fmt.Errorf("boot.vcl = %q", cm.Data["boot.vcl"])
					}
					sec, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(gw), metav1.GetOptions{})
					if err != nil {
						return err
					}
					if len(sec.Data["secret"]) < 32 {
						return fmt.Errorf("admin secret is %d bytes", len(sec.Data["secret"]))
					}
					secret = sec.Data["secret"]
					return nil
				},
			},
			{
				ResourceName:            "varnishgw_gateway.test",
				ImportState:             true,
				ImportStateId:           ns + "/edge",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"wait_for_rollout"},
			},
			{
				// Another apply keeps the admin secret (no pod roll).
				Config: cfg(`  mode = "sidecar"` + "\n" + "  resources {\n    limits = { memory = \"1Gi\" }\n  }" + "\n  vcl = \"sub vcl_deliver { }\""),
				Check: func(*terraform.State) error {
					sec, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(gw), metav1.GetOptions{})
					if err != nil {
						return err
					}
					if string(sec.Data["secret"]) != string(secret) {
						return fmt.Errorf("an apply changed the admin secret")
					}
					return nil
				},
			},
			{
				// Back to supervise: one container, no Secret.
				Config: cfg(""),
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					if n := len(d.Spec.Template.Spec.Containers); n != 1 || d.Spec.Template.Spec.Containers[0].Name != "chaperone" {
						return fmt.Errorf("%d containers after the switch to supervise, want the chaperone only", n)
					}
					if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--listen=8080,9090") {
						return fmt.Errorf("chaperone args = %q, want --listen=8080,9090", d.Spec.Template.Spec.Containers[0].Args)
					}
					if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(gw), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("admin Secret in supervise mode: %v, want NotFound", err)
					}
					return nil
				},
			},
		},
	})
}

// checkGatewayOwned checks that the namespaced runtime objects of gw are
// owned by its Gateway (so that the garbage collector deletes them with
// it) and that the cluster-scoped ClusterRole is not.
func checkGatewayOwned(ctx context.Context, cp *testenv.ControlPlane, gw object.Ref) error {
	g, err := cp.Gateway.GatewayV1().Gateways(gw.Namespace).Get(ctx, gw.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ns, name := gw.Namespace, gwruntime.Name(gw)
	objs := map[string]func() (metav1.Object, error){
		"Deployment": func() (metav1.Object, error) {
			return cp.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		},
		"Service": func() (metav1.Object, error) {
			return cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		},
		"PodDisruptionBudget": func() (metav1.Object, error) {
			return cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		"ServiceAccount": func() (metav1.Object, error) {
			return cp.Client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		},
		"Role": func() (metav1.Object, error) { return cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{}) },
		"RoleBinding": func() (metav1.Object, error) {
			return cp.Client.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
		},
		"VCL ConfigMap": func() (metav1.Object, error) {
			return cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{})
		},
	}
	for what, get := range objs {
		o, err := get()
		if err != nil {
			return fmt.Errorf("get the %s: %w", what, err)
		}
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != g.UID || refs[0].Kind != "Gateway" || refs[0].APIVersion != gatewayv1.GroupVersion.String() ||
			refs[0].Name != gw.Name || refs[0].Controller == nil || !*refs[0].Controller {
			return fmt.Errorf("owner references of the %s = %+v, want the Gateway %s (uid %s) as controller", what, refs, gw, g.UID)
		}
	}
	cr, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(gw), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(cr.OwnerReferences) != 0 {
		return fmt.Errorf("owner references of the ClusterRole %s = %+v, want none (a namespaced owner of a cluster-scoped object is invalid)", cr.Name, cr.OwnerReferences)
	}
	return nil
}
