package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/testing/testenv"
)

// TestAccGatewayPodSecurityRestricted proves that the gateway pods are
// admitted where Pod Security "restricted" is enforced: the namespace has
// the enforce label, and the real API server's PodSecurity admission
// judges a Pod made from the Deployment's pod template, in supervise and
// sidecar mode, with a listener port below 1024 (the sysctl) and every pod
// setting. A pod without the hardening is rejected there, so the label is
// in force.
func TestAccGatewayPodSecurityRestricted(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	nsObj, err := cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := cp.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	gw := object.Ref{Namespace: ns, Name: "edge"}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	admitted := func(*terraform.State) error {
		d, err := getDeployment(cp, gw)
		if err != nil {
			return err
		}
		plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}, Spec: corev1.PodSpec{
			ServiceAccountName: d.Spec.Template.Spec.ServiceAccountName, Containers: []corev1.Container{{Name: "c", Image: testImage}}}}
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, plain, dryRun); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
			return fmt.Errorf("a pod without hardening in the restricted namespace: %v, want Forbidden by PodSecurity", err)
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "from-template", Namespace: ns, Labels: d.Spec.Template.Labels,
			Annotations: d.Spec.Template.Annotations}, Spec: d.Spec.Template.Spec}
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, dryRun); err != nil {
			return fmt.Errorf("a pod of the gateway's template is not admitted in a restricted namespace: %v", err)
		}
		return nil
	}
	listeners := listenerHCL("http", 80) + listenerHCL("alt", 8080)
	pod := `  pod {
    node_selector      = { "kubernetes.io/os" = "linux" }
    affinity           = jsonencode({ podAntiAffinity = { preferredDuringSchedulingIgnoredDuringExecution = [{ weight = 100, podAffinityTerm = { topologyKey = "kubernetes.io/hostname", labelSelector = { matchLabels = { team = "edge" } } } }] } })
    image_pull_secrets = ["registry"]
    labels             = { team = "edge" }
    toleration {
      key      = "dedicated"
      operator = "Equal"
      value    = "edge"
      effect   = "NoSchedule"
    }
    topology_spread {
      topology_key = "topology.kubernetes.io/zone"
      max_skew     = 1
    }
  }
`
	class := "vgw-" + rand.String(6)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: gatewayConfig(cp, ns, class, "", listeners), Check: admitted},
			{Config: gatewayConfig(cp, ns, class, "", listeners+`  mode = "sidecar"`+"\n"+pod), Check: admitted},
			// An HTTPS listener adds the memory-backed TLS volume, in both
			// containers in sidecar mode: still restricted.
			{Config: gatewayConfig(cp, ns, class, "", listeners+httpsListenerHCL+`  mode = "sidecar"`+"\n"+pod), Check: resource.ComposeTestCheckFunc(admitted,
				func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					for _, c := range d.Spec.Template.Spec.Containers {
						if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == gwruntime.TLSVolume }) {
							return fmt.Errorf("container %s does not mount the TLS volume", c.Name)
						}
						if c.Name == gwruntime.VarnishContainer && !slices.Contains(c.Args, "port-8443=/run/varnishgw/tls/port-8443.sock,PROXY,mode=0600") {
							return fmt.Errorf("varnishd args %q lack the TLS socket of port 8443", c.Args)
						}
						if c.Name == gwruntime.ChaperoneContainer && !slices.Contains(c.Args, "--tls-listen=8443") {
							return fmt.Errorf("chaperone args %q lack --tls-listen=8443", c.Args)
						}
					}
					return nil
				})},
			// An HTTPS gateway imports as configured: the values the API
			// server defaults (mode, group, kind) stay unset.
			{
				ResourceName:            "varnishgw_gateway.test",
				ImportState:             true,
				ImportStateId:           ns + "/edge",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"wait_for_rollout"},
			},
		},
	})
}

// httpsListenerHCL is an HTTPS listener on 8443 with the certificate of
// the Secret www-cert, which the tests that use it do not create (a plan
// warning).
const httpsListenerHCL = `  listener {
    name     = "https"
    port     = 8443
    protocol = "HTTPS"
    tls {
      certificate_ref {
        name = "www-cert"
      }
    }
  }
`

// playController acts, in a goroutine, as the Deployment controller and
// the kubelet that the test control plane lacks, once the gateway's
// Deployment has a template ready reports true for: it creates the
// current ReplicaSet and a pod of it, writes the pod's status as a kubelet
// would (status), and, when rolledOut, the Deployment's status of a
// finished rollout.
func playController(t *testing.T, cp *testenv.ControlPlane, gw object.Ref, ready func(*appsv1.Deployment) bool, status corev1.PodStatus, rolledOut bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			d, err := getDeployment(cp, gw)
			if err != nil || !ready(d) {
				continue
			}
			_, pod, err := createReplica(ctx, cp, d, "h"+rand.String(8))
			if err != nil {
				t.Errorf("play the Deployment controller: %v", err)
				return
			}
			pod.Status = status
			if _, err := cp.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Errorf("write the pod status as a kubelet: %v", err)
				return
			}
			if rolledOut {
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
				if _, err := cp.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
					t.Errorf("write the Deployment status: %v", err)
				}
			}
			return
		}
	}()
}

// createReplica creates, as the Deployment controller does, a ReplicaSet
// with d's current template and the pod-template-hash label hash, and one
// pod of it.
func createReplica(ctx context.Context, cp *testenv.ControlPlane, d *appsv1.Deployment, hash string) (*appsv1.ReplicaSet, *corev1.Pod, error) {
	tpl := *d.Spec.Template.DeepCopy()
	tpl.Labels[podTemplateHashLabel] = hash
	sel := maps.Clone(d.Spec.Selector.MatchLabels)
	sel[podTemplateHashLabel] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-" + hash, Labels: tpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tpl},
	}
	rs, err := cp.Client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: rs.Name + "-" + rand.String(5), Labels: tpl.Labels, Annotations: tpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: tpl.Spec,
	}
	pod, err = cp.Client.CoreV1().Pods(d.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	return rs, pod, err
}

// TestAccGatewayRolloutFailsFast checks that the rollout wait fails within
// the fail-fast delay, not rollout_timeout, when a pod of the current
// template cannot pull its image, and that a failing pod of an older
// template does not count. The test plays the Deployment controller and
// the kubelet (playController): the test control plane runs neither.
func TestAccGatewayRolloutFailsFast(t *testing.T) {
	cp := accPreCheck(t)
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	cfg := func(body string) string {
		return strings.Replace(gatewayConfig(cp, ns, class, "", listenerHCL("http", 8080)+"\n  rollout_timeout = \"10m\"\n"+body),
			"  wait_for_rollout   = false\n", "", 1)
	}
	hasLabel := func(v string) func(*appsv1.Deployment) bool {
		return func(d *appsv1.Deployment) bool { return d.Spec.Template.Labels["step"] == v }
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: gwruntime.ChaperoneContainer, Image: testImage, Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
	crashing := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: gwruntime.ChaperoneContainer, Image: testImage, RestartCount: 5,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}}
	pullBackOff := corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: gwruntime.ChaperoneContainer, Image: testImage,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
			Message: `Back-off pulling image "` + testImage + `": ErrImagePull: failed to resolve reference "` + testImage + `": not found`}}}}}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// A first template whose pod crash-loops.
				PreConfig: func() { playController(t, cp, gw, hasLabel("one"), crashing, false) },
				Config:    cfg("  wait_for_rollout = false\n  pod {\n    labels = { step = \"one\" }\n  }\n"),
			},
			{
				// A new template whose pod runs: the wait succeeds although
				// the old template's pod still crash-loops.
				PreConfig: func() { playController(t, cp, gw, hasLabel("two"), running, true) },
				Config:    cfg("  pod {\n    labels = { step = \"two\" }\n  }\n"),
			},
			{
				// A new template whose pod cannot pull its image: the wait
				// fails with the pod, container, image, reason and message,
				// long before rollout_timeout (10m).
				PreConfig:   func() { playController(t, cp, gw, hasLabel("three"), pullBackOff, false) },
				Config:      cfg("  pod {\n    labels = { step = \"three\" }\n  }\n"),
				ExpectError: words(`(?s)Wait for the gateway rollout.*the Deployment ` + ns + `/varnishgw-edge cannot roll out: pod ` + ns + `/varnishgw-edge-h[a-z0-9]+-[a-z0-9]+, container chaperone, image "` + testImage + `": ImagePullBackOff: Back-off pulling image "` + testImage + `": ErrImagePull: failed to resolve reference`),
			},
		},
	})
}

// TestAccGatewayPodSettings applies every pod setting and the Gateway's
// infrastructure, reads them back on import, detects their drift and
// rejects bad values at plan time.
func TestAccGatewayPodSettings(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	name := gwruntime.Name(gw)
	const addr = "varnishgw_gateway.test"
	listeners := listenerHCL("http", 8080)
	full := listeners + `  mode = "sidecar"
  service_annotations = { "example.com/lb" = "internal" }
  pod {
    image_pull_secrets = ["registry"]
    node_selector      = { "kubernetes.io/os" = "linux" }
    affinity = jsonencode({
      nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = [{ matchExpressions = [{ key = "kubernetes.io/arch", operator = "In", values = ["amd64", "arm64"] }] }] } }
    })
    priority_class_name = "system-cluster-critical"
    labels              = { team = "edge" }
    annotations         = { "prometheus.io/scrape" = "true" }
    toleration {
      key      = "dedicated"
      operator = "Equal"
      value    = "edge"
      effect   = "NoSchedule"
    }
    toleration {
      operator           = "Exists"
      effect             = "NoExecute"
      toleration_seconds = 30
    }
    topology_spread {
      topology_key = "topology.kubernetes.io/zone"
      max_skew     = 1
      min_domains  = 2
    }
  }
  infrastructure {
    labels      = { "example.com/cost-center" = "42" }
    annotations = { "example.com/owner" = "platform" }
  }
`
	fewer := strings.Replace(strings.Replace(full, `    labels      = { "example.com/cost-center" = "42" }`+"\n", "", 1),
		"    toleration {\n      operator           = \"Exists\"\n      effect             = \"NoExecute\"\n      toleration_seconds = 30\n    }\n", "", 1)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: gatewayConfig(cp, ns, class, `  image_pull_policy = "Never"`, full),
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					ps := d.Spec.Template.Spec
					if len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "registry" || ps.NodeSelector["kubernetes.io/os"] != "linux" ||
						len(ps.Tolerations) != 2 || ptr.Deref(ps.Tolerations[1].TolerationSeconds, 0) != 30 || ps.PriorityClassName != "system-cluster-critical" {
						return fmt.Errorf("pod spec: pull secrets %v, node selector %v, tolerations %+v, priority class %q", ps.ImagePullSecrets, ps.NodeSelector, ps.Tolerations, ps.PriorityClassName)
					}
					if a := ps.Affinity; a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values) != 2 {
						return fmt.Errorf("affinity = %+v", ps.Affinity)
					}
					if len(ps.TopologySpreadConstraints) != 1 || !slices.Equal(ps.TopologySpreadConstraints[0].MatchLabelKeys, []string{"pod-template-hash"}) ||
						ps.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/instance"] != name {
						return fmt.Errorf("topology spread = %+v", ps.TopologySpreadConstraints)
					}
					for _, c := range ps.Containers {
						if c.ImagePullPolicy != corev1.PullNever {
							return fmt.Errorf("container %s imagePullPolicy %q, want the class's Never", c.Name, c.ImagePullPolicy)
						}
					}
					tl, ta := d.Spec.Template.Labels, d.Spec.Template.Annotations
					if tl["team"] != "edge" || tl["example.com/cost-center"] != "42" || ta["prometheus.io/scrape"] != "true" || ta["example.com/owner"] != "platform" {
						return fmt.Errorf("pod labels %v, annotations %v", tl, ta)
					}
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if gi := g.Spec.Infrastructure; gi == nil || gi.Labels["example.com/cost-center"] != "42" || gi.Annotations["example.com/owner"] != "platform" {
						return fmt.Errorf("Gateway spec.infrastructure = %+v", g.Spec.Infrastructure)
					}
					// Every generated object carries the infrastructure's and
					// the Gateway API's labels and annotations.
					objects := map[string]metav1.Object{}
					objects["Deployment"] = d
					if objects["Service"], err = cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
						return err
					}
					if objects["ServiceAccount"], err = cp.Client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
						return err
					}
					if objects["Role"], err = cp.Client.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
						return err
					}
					if objects["RoleBinding"], err = cp.Client.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
						return err
					}
					if objects["ClusterRole"], err = cp.Client.RbacV1().ClusterRoles().Get(ctx, gwruntime.BackendClusterRoleName(gw), metav1.GetOptions{}); err != nil {
						return err
					}
					if objects["ConfigMap"], err = cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(gw), metav1.GetOptions{}); err != nil {
						return err
					}
					if objects["PodDisruptionBudget"], err = cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
						return err
					}
					if objects["Secret"], err = cp.Client.CoreV1().Secrets(ns).Get(ctx, gwruntime.AdminSecretName(gw), metav1.GetOptions{}); err != nil {
						return err
					}
					for what, o := range objects {
						l, a := o.GetLabels(), o.GetAnnotations()
						if l["example.com/cost-center"] != "42" || a["example.com/owner"] != "platform" ||
							l[gatewayv1.GatewayNameLabelKey] != "edge" || l[gatewayv1.GatewayClassNameLabelKey] != class {
							return fmt.Errorf("%s: labels %v, annotations %v: want the infrastructure's and the Gateway API's", what, l, a)
						}
					}
					if a := objects["Service"].GetAnnotations(); a["example.com/lb"] != "internal" {
						return fmt.Errorf("Service annotations %v lack service_annotations", a)
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
				// Drift of the pod template, out of band: a toleration
				// dropped, a container's securityContext and a pod label
				// edited. The plan shows an update and apply restores them.
				PreConfig: func() {
					d, err := getDeployment(cp, gw)
					if err != nil {
						t.Fatal(err)
					}
					d.Spec.Template.Spec.Tolerations = d.Spec.Template.Spec.Tolerations[:1]
					d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
					if _, err := cp.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: gatewayConfig(cp, ns, class, `  image_pull_policy = "Never"`, full),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					if len(d.Spec.Template.Spec.Tolerations) != 2 || !ptr.Deref(d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem, false) {
						return fmt.Errorf("tolerations %+v, securityContext %+v after apply: want the drift corrected", d.Spec.Template.Spec.Tolerations, d.Spec.Template.Spec.Containers[0].SecurityContext)
					}
					return nil
				},
			},
			{
				// Removed settings are removed from the cluster.
				Config: gatewayConfig(cp, ns, class, `  image_pull_policy = "Never"`, fewer),
				Check: func(*terraform.State) error {
					d, err := getDeployment(cp, gw)
					if err != nil {
						return err
					}
					svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if len(d.Spec.Template.Spec.Tolerations) != 1 || d.Labels["example.com/cost-center"] != "" || d.Spec.Template.Labels["example.com/cost-center"] != "" || svc.Labels["example.com/cost-center"] != "" {
						return fmt.Errorf("after removal: tolerations %+v, Deployment labels %v, Service labels %v", d.Spec.Template.Spec.Tolerations, d.Labels, svc.Labels)
					}
					return nil
				},
			},
		},
	})
}

func TestAccGatewayPodSettingsValidation(t *testing.T) {
	cp := accPreCheck(t)
	for _, tc := range []struct{ name, body, line, want string }{
		{"selector label", "pod {\n  labels = { \"app.kubernetes.io/instance\" = \"x\" }\n}", `labels = { "app.kubernetes.io/instance" = "x" }`,
			`"app.kubernetes.io/instance" is a label the provider sets on the gateway's objects and selects its pods by`},
		{"reserved prefix", "infrastructure {\n  labels = { \"gateway.networking.k8s.io/gateway-name\" = \"x\" }\n}", `labels = { "gateway.networking.k8s.io/gateway-name" = "x" }`,
			`uses the prefix gateway.networking.k8s.io/, which is reserved`},
		{"bad label value", "pod {\n  labels = { team = \"a b\" }\n}", `labels = { team = "a b" }`, `"a b" is not a label value`},
		{"label twice", "pod {\n  labels = { team = \"a\" }\n}\ninfrastructure {\n  labels = { team = \"b\" }\n}", `labels = { team = "a" }`,
			`the label "team" is set in infrastructure.labels`},
		{"service annotation twice", "service_annotations = { \"a.io/x\" = \"1\" }\ninfrastructure {\n  annotations = { \"a.io/x\" = \"1\" }\n}",
			`service_annotations = { "a.io/x" = "1" }`, `the annotation "a.io/x" is set in infrastructure.annotations`},
		{"affinity typo", "pod {\n  affinity = jsonencode({ nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerm = [] } } })\n}",
			`affinity = jsonencode\(.*\)`, `unknown field "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerm"`},
		{"toleration value with Exists", "pod {\n  toleration {\n    key      = \"k\"\n    operator = \"Exists\"\n    value    = \"v\"\n  }\n}",
			`value    = "v"`, `value = "v" is set with operator = "Exists"`},
		{"toleration seconds without NoExecute", "pod {\n  toleration {\n    key                = \"k\"\n    value              = \"v\"\n    toleration_seconds = 5\n  }\n}",
			`toleration_seconds = 5`, `toleration_seconds applies to effect NoExecute only`},
		{"bad pull secret", "pod {\n  image_pull_secrets = [\"Not_A_Name\"]\n}", `image_pull_secrets = \["Not_A_Name"\]`, `"Not_A_Name" is not a Secret name`},
		{"parameters_ref kind", "infrastructure {\n  parameters_ref {\n    kind = \"Secret\"\n    name = \"p\"\n  }\n}", `kind = "Secret"`, `value must be one of: \["ConfigMap"\]`},
		{"parameters_ref without name", "infrastructure {\n  parameters_ref {\n    kind = \"ConfigMap\"\n  }\n}", `parameters_ref {`,
			`Attribute "infrastructure.parameters_ref.name" must be specified when "infrastructure.parameters_ref" is specified`},
		{"too many infrastructure labels", "infrastructure {\n  labels = { a = \"1\", b = \"1\", c = \"1\", d = \"1\", e = \"1\", f = \"1\", g = \"1\", h = \"1\", i = \"1\" }\n}",
			`labels = {.*}`, `map must contain at least 1 elements and at most 8 elements`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config: providerBlock(cp) + "resource \"varnishgw_gateway\" \"bad\" {\nnamespace = \"default\"\nname = \"bad\"\ngateway_class_name = \"c\"\n" +
						"listener {\n  name = \"a\"\n  port = 80\n}\n" + tc.body + "\n}\n",
					PlanOnly:    true,
					ExpectError: onlyError(tc.line, tc.want),
				}},
			})
		})
	}
}

// TestAccGatewayParametersRef checks infrastructure.parameters_ref: the
// ConfigMap's keys override the class's for the gateway, a change of the
// ConfigMap shows in the next plan, and a missing or invalid ConfigMap
// fails the apply and sets the Gateway's Accepted condition to False with
// reason InvalidParameters, as the Gateway API asks.
func TestAccGatewayParametersRef(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	gw := object.Ref{Namespace: ns, Name: "edge"}
	setParams := func(data map[string]string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "edge-params", Namespace: ns}, Data: data}
		if _, err := cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	cfg := gatewayConfig(cp, ns, class, `  varnishd_params = { thread_pool_min = "20", thread_pool_max = "500" }`,
		listenerHCL("http", 8080)+"  infrastructure {\n    parameters_ref {\n      name = \"edge-params\"\n    }\n  }\n")
	args := func() []string {
		d, err := getDeployment(cp, gw)
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	accepted := func() *metav1.Condition {
		g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(g.Status.Conditions, string(gatewayv1.GatewayConditionAccepted))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					setParams(map[string]string{"storage": "malloc,2g", "varnishd-params.json": `{"thread_pool_min":"50"}`, "image": "localhost/varnishgw/gateway:edge"})
				},
				Config: cfg,
				Check: func(*terraform.State) error {
					a := args()
					for _, want := range []string{"--storage=malloc,2g", "--param=thread_pool_min=50", "--param=thread_pool_max=500"} {
						if !slices.Contains(a, want) {
							return fmt.Errorf("chaperone args %q lack %q", a, want)
						}
					}
					d, _ := getDeployment(cp, gw)
					if img := d.Spec.Template.Spec.Containers[0].Image; img != "localhost/varnishgw/gateway:edge" {
						return fmt.Errorf("image %q, want the gateway parameters' image", img)
					}
					g, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if r := g.Spec.Infrastructure.ParametersRef; r == nil || r.Kind != "ConfigMap" || r.Name != "edge-params" || r.Group != "" {
						return fmt.Errorf("spec.infrastructure.parametersRef = %+v", r)
					}
					return nil
				},
			},
			{
				// The ConfigMap changed: the next plan shows the update.
				PreConfig: func() { setParams(map[string]string{"storage": "malloc,3g"}) },
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("varnishgw_gateway.test", plancheck.ResourceActionUpdate)},
				},
				Check: func(*terraform.State) error {
					if a := args(); !slices.Contains(a, "--storage=malloc,3g") || !slices.Contains(a, "--param=thread_pool_min=20") {
						return fmt.Errorf("args %q after the ConfigMap change", a)
					}
					if c := accepted(); c == nil || c.Status != metav1.ConditionTrue {
						return fmt.Errorf("Accepted = %+v", c)
					}
					return nil
				},
			},
			{
				// An invalid key: not accepted, pods unchanged.
				PreConfig:   func() { setParams(map[string]string{"storage": "malloc,4g", "replicas": "3"}) },
				Config:      cfg,
				ExpectError: words(`key "replicas" is not a gateway parameter`),
			},
			{
				PreConfig: func() {
					if c := accepted(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "InvalidParameters" || !strings.Contains(c.Message, `key "replicas" is not a gateway parameter`) {
						t.Fatalf("Accepted after an invalid parametersRef = %+v, want False/InvalidParameters", c)
					}
					if a := args(); slices.Contains(a, "--storage=malloc,4g") {
						t.Fatalf("the pods changed although the parameters are invalid: %q", a)
					}
					if err := cp.Client.CoreV1().ConfigMaps(ns).Delete(ctx, "edge-params", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:      cfg,
				ExpectError: words(`ConfigMap ` + ns + `/edge-params does not exist; create it, or remove parameters_ref`),
			},
			{
				// Fixed: accepted again.
				PreConfig: func() { setParams(map[string]string{"storage": "malloc,1g"}) },
				Config:    cfg,
				Check: func(*terraform.State) error {
					if c := accepted(); c == nil || c.Status != metav1.ConditionTrue {
						return fmt.Errorf("Accepted after the fix = %+v", c)
					}
					return nil
				},
			},
		},
	})
}

// TestAccGatewayInvalidPodTemplate checks that what only the API server
// knows to be invalid in the pod template (here an affinity operator) is
// reported, naming the field, before anything is written: by the plan
// that apply makes once the class is created in the same apply, and by
// the plan once the class exists.
func TestAccGatewayInvalidPodTemplate(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	class := "vgw-" + rand.String(6)
	listeners := listenerHCL("http", 8080)
	affinity := func(op string) string {
		return fmt.Sprintf("  pod {\n    affinity = jsonencode({ nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = [{ matchExpressions = [{ key = \"kubernetes.io/arch\", operator = %q, values = [\"amd64\"] }] }] } } })\n  }\n", op)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      gatewayConfig(cp, ns, class, "", listeners+affinity("Sometimes")),
				ExpectError: words(`(?s)Invalid gateway pod template.*spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms\[0\].matchExpressions\[0\].operator: Invalid value: "Sometimes": not a valid selector operator`),
			},
			{
				PreConfig: func() {
					if _, err := cp.Gateway.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						t.Fatalf("Gateway after a rejected pod template: %v, want NotFound", err)
					}
				},
				Config: gatewayConfig(cp, ns, class, "", listeners+affinity("In")),
			},
			{
				Config:      gatewayConfig(cp, ns, class, "", listeners+affinity("Sometimes")),
				PlanOnly:    true,
				ExpectError: words(`(?s)Invalid gateway pod template.*operator: Invalid value: "Sometimes"`),
			},
		},
	})
}

// TestAccGatewaySysctls: sysctls reach the pod template after the
// provider's own sysctl, import reads them back, and removing them gives
// back the pod template without a diff. The namespace enforces Pod
// Security baseline, which, as the attribute's description says, admits a
// pod of the template only without the unsafe sysctl.
func TestAccGatewaySysctls(t *testing.T) {
	cp := accPreCheck(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	nsObj, err := cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := cp.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	gw := object.Ref{Namespace: ns, Name: "edge"}
	sysctls := func(want ...string) func(*terraform.State) error {
		return func(*terraform.State) error {
			d, err := getDeployment(cp, gw)
			if err != nil {
				return err
			}
			var got []string
			if sc := d.Spec.Template.Spec.SecurityContext; sc != nil {
				for _, s := range sc.Sysctls {
					got = append(got, s.Name+"="+s.Value)
				}
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("the pod template's sysctls are %q, want %q", got, want)
			}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "from-template", Namespace: ns, Labels: d.Spec.Template.Labels,
				Annotations: d.Spec.Template.Annotations}, Spec: d.Spec.Template.Spec}
			_, err = cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			unsafe := slices.Contains(want, "net.ipv4.tcp_migrate_req=1")
			switch {
			case unsafe && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "forbidden sysctls (net.ipv4.tcp_migrate_req)")):
				return fmt.Errorf("a pod of the template with net.ipv4.tcp_migrate_req in a baseline namespace: %v, want Forbidden naming the sysctl", err)
			case !unsafe && err != nil:
				return fmt.Errorf("a pod of the template is not admitted in a baseline namespace: %v", err)
			}
			return nil
		}
	}
	listeners := listenerHCL("http", 80) + listenerHCL("alt", 8080)
	class := "vgw-" + rand.String(6)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: protoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: gatewayConfig(cp, ns, class, "", listeners+`  sysctls = { "net.ipv4.tcp_migrate_req" = "1" }`+"\n"),
				Check: resource.ComposeAggregateTestCheckFunc(
					sysctls("net.ipv4.ip_unprivileged_port_start=80", "net.ipv4.tcp_migrate_req=1"),
					resource.TestCheckResourceAttr("varnishgw_gateway.test", "sysctls.%", "1"),
					resource.TestCheckResourceAttr("varnishgw_gateway.test", "sysctls.net.ipv4.tcp_migrate_req", "1"))},
			{ResourceName: "varnishgw_gateway.test", ImportState: true, ImportStateId: ns + "/edge", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"wait_for_rollout"}},
			{Config: gatewayConfig(cp, ns, class, "", listeners),
				Check: resource.ComposeAggregateTestCheckFunc(
					sysctls("net.ipv4.ip_unprivileged_port_start=80"),
					resource.TestCheckNoResourceAttr("varnishgw_gateway.test", "sysctls"))},
		},
	})
}

// TestAccGatewaySysctlsValidation: a sysctl name Kubernetes would refuse,
// the provider's own sysctl and an empty value are rejected at plan, each
// error naming the key and the fix.
func TestAccGatewaySysctlsValidation(t *testing.T) {
	cp := accPreCheck(t)
	for _, tc := range []struct{ name, body, line, want string }{
		{"bad name", `sysctls = { "Net.IPv4.tcp_migrate_req" = "1" }`, `sysctls = { "Net\.IPv4\.tcp_migrate_req" = "1" }`,
			`Attribute sysctls\["Net\.IPv4\.tcp_migrate_req"\] must be a sysctl name: segments of lower-case letters, digits, - and _ separated by dots or slashes, for example net\.ipv4\.tcp_migrate_req`},
		{"the provider's", `sysctls = { "net.ipv4.ip_unprivileged_port_start" = "0" }`, `sysctls = { "net\.ipv4\.ip_unprivileged_port_start" = "0" }`,
			`"net\.ipv4\.ip_unprivileged_port_start" is set by the provider from the gateway's lowest listener port, so that varnishd, which runs as a non-root user, can bind ports below 1024\. Remove it from sysctls\.`},
		{"empty value", `sysctls = { "net.ipv4.tcp_migrate_req" = "" }`, `sysctls = { "net\.ipv4\.tcp_migrate_req" = "" }`,
			`Attribute sysctls\["net\.ipv4\.tcp_migrate_req"\] must be the sysctl's value, for example "1", not empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: protoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config: providerBlock(cp) + "resource \"varnishgw_gateway\" \"bad\" {\nnamespace = \"default\"\nname = \"bad\"\ngateway_class_name = \"c\"\n" +
						"listener {\n  name = \"a\"\n  port = 80\n}\n" + tc.body + "\n}\n",
					PlanOnly:    true,
					ExpectError: onlyError(tc.line, tc.want),
				}},
			})
		})
	}
}
