package gwruntime

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/applyconfig"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// fieldEnv is an environment variable set from a field of the pod (the
// downward API).
func fieldEnv(name, fieldPath string) *corev1apply.EnvVarApplyConfiguration {
	return corev1apply.EnvVar().WithName(name).WithValueFrom(corev1apply.EnvVarSource().
		WithFieldRef(corev1apply.ObjectFieldSelector().WithFieldPath(fieldPath)))
}

// Deployment is the gateway's Deployment. In supervise mode one chaperone
// container runs varnishd as its child; in sidecar mode a varnish
// container runs varnishd and the chaperone steers it through the admin
// connection, sharing the work dir (and ghost.json) and the admin secret.
func (s *Spec) Deployment() *appsv1apply.DeploymentApplyConfiguration {
	name, ns := s.Name(), s.Gateway.Namespace
	ctr := corev1apply.Container().
		WithName(ChaperoneContainer).
		WithImage(s.Class.Image).
		WithArgs(s.ChaperoneArgs()...).
		// The pod's name and UID name its GatewayPodReport and make the
		// Pod its owner (chaperone --pod-name, --pod-uid).
		WithEnv(fieldEnv("VARNISHGW_POD_NAME", "metadata.name"), fieldEnv("VARNISHGW_POD_UID", "metadata.uid")).
		WithVolumeMounts(corev1apply.VolumeMount().WithName(stateVolume).WithMountPath(stateDir)).
		WithReadinessProbe(corev1apply.Probe().WithHTTPGet(corev1apply.HTTPGetAction().
			WithPath("/readyz").WithPort(intstr.FromString(healthPortName))).WithPeriodSeconds(2).WithFailureThreshold(2)).
		WithLivenessProbe(corev1apply.Probe().WithHTTPGet(corev1apply.HTTPGetAction().
			WithPath("/healthz").WithPort(intstr.FromString(healthPortName))).WithInitialDelaySeconds(10).WithPeriodSeconds(10)).
		WithLifecycle(corev1apply.Lifecycle().WithPreStop(corev1apply.LifecycleHandler().
			WithSleep(corev1apply.SleepAction().WithSeconds(preStopSleep))))
	for _, p := range s.Ports {
		ctr.WithPorts(corev1apply.ContainerPort().WithName(ghostjson.SocketName(p)).
			WithContainerPort(p).WithProtocol(corev1.ProtocolTCP))
	}
	ctr.WithPorts(corev1apply.ContainerPort().WithName(healthPortName).WithContainerPort(HealthPort).WithProtocol(corev1.ProtocolTCP))
	if s.InvalidatePort != 0 {
		ctr.WithPorts(corev1apply.ContainerPort().WithName(InvalidatePortName).WithContainerPort(s.InvalidatePort).WithProtocol(corev1.ProtocolTCP))
	}
	if len(s.Requests) > 0 || len(s.Limits) > 0 {
		rr := corev1apply.ResourceRequirements()
		if len(s.Requests) > 0 {
			rr.WithRequests(s.Requests)
		}
		if len(s.Limits) > 0 {
			rr.WithLimits(s.Limits)
		}
		ctr.WithResources(rr)
	}
	containers := []*corev1apply.ContainerApplyConfiguration{ctr}
	volumes := []*corev1apply.VolumeApplyConfiguration{
		corev1apply.Volume().WithName(stateVolume).WithEmptyDir(corev1apply.EmptyDirVolumeSource()),
	}
	var tlsMount *corev1apply.VolumeMountApplyConfiguration
	if len(s.TLSPorts) > 0 {
		tlsMount = corev1apply.VolumeMount().WithName(TLSVolume).WithMountPath(DefaultChaperoneFlags().TLSDir)
		ctr.WithVolumeMounts(tlsMount)
		volumes = append(volumes, corev1apply.Volume().WithName(TLSVolume).WithEmptyDir(corev1apply.EmptyDirVolumeSource().
			WithMedium(corev1.StorageMediumMemory).WithSizeLimit(resource.MustParse(tlsVolumeSize))))
	}
	if s.Mode == ModeSidecar {
		// The HTTP listener ports move to the varnish container; hitch,
		// which listens on the HTTPS ports, and the invalidation endpoint
		// stay in the chaperone's. The
		// chaperone keeps its preStop pause: its SIGTERM starts the drain too.
		var kept []corev1apply.ContainerPortApplyConfiguration
		for _, p := range ctr.Ports {
			if *p.Name == healthPortName || *p.Name == InvalidatePortName || slices.Contains(s.TLSPorts, *p.ContainerPort) {
				kept = append(kept, p)
			}
		}
		ctr.Ports = kept
		ctr.Resources = nil
		secretMount := corev1apply.VolumeMount().WithName(secretVolume).WithMountPath(secretDir).WithReadOnly(true)
		ctr.WithVolumeMounts(secretMount)
		varnish := corev1apply.Container().
			WithName(VarnishContainer).
			WithImage(s.Class.Image).
			WithCommand(varnishdBin).
			WithArgs(s.varnishdArgs()...).
			WithVolumeMounts(
				corev1apply.VolumeMount().WithName(stateVolume).WithMountPath(stateDir),
				secretMount,
				corev1apply.VolumeMount().WithName(bootVolume).WithMountPath(bootDir).WithReadOnly(true)).
			// preStop: after the same pause, the chaperone drains varnishd;
			// the hook returns once it is done. It talks to the chaperone
			// over its drain socket (mode 0600) on the shared state volume:
			// nothing reachable over the network can start a drain.
			WithLifecycle(corev1apply.Lifecycle().WithPreStop(corev1apply.LifecycleHandler().
				WithExec(corev1apply.ExecAction().WithCommand(chaperoneBin, "drain",
					"--socket="+DrainSocket, fmt.Sprintf("--delay=%ds", preStopSleep)))))
		if tlsMount != nil {
			// varnishd opens the TLS sockets hitch connects to.
			varnish.WithVolumeMounts(tlsMount)
		}
		for _, p := range s.Ports {
			if slices.Contains(s.TLSPorts, p) {
				continue
			}
			varnish.WithPorts(corev1apply.ContainerPort().WithName(ghostjson.SocketName(p)).
				WithContainerPort(p).WithProtocol(corev1.ProtocolTCP))
		}
		if len(s.Requests) > 0 || len(s.Limits) > 0 {
			rr := corev1apply.ResourceRequirements()
			if len(s.Requests) > 0 {
				rr.WithRequests(s.Requests)
			}
			if len(s.Limits) > 0 {
				rr.WithLimits(s.Limits)
			}
			varnish.WithResources(rr)
		}
		containers = []*corev1apply.ContainerApplyConfiguration{varnish, ctr}
		volumes = append(volumes,
			corev1apply.Volume().WithName(secretVolume).WithSecret(corev1apply.SecretVolumeSource().
				WithSecretName(AdminSecretName(s.Gateway)).WithDefaultMode(0o400)),
			corev1apply.Volume().WithName(bootVolume).WithConfigMap(corev1apply.ConfigMapVolumeSource().
				WithName(VCLConfigMapName(s.Gateway)).WithItems(corev1apply.KeyToPath().WithKey(BootVCLKey).WithPath(BootVCLKey))))
	}
	pod := corev1apply.PodTemplateSpec().
		WithLabels(Labels(s.Gateway)).
		WithAnnotations(map[string]string{StartHashAnnotation: s.StartHash()}).
		WithSpec(corev1apply.PodSpec().
			WithServiceAccountName(name).
			WithAutomountServiceAccountToken(true).
			WithTerminationGracePeriodSeconds(s.DrainTimeout + preStopSleep + graceAfterDrain).
			WithContainers(containers...).
			WithVolumes(volumes...))
	return s.withPodSettings(appsv1apply.Deployment(name, ns).WithLabels(RuntimeLabels(s.Gateway)).WithSpec(appsv1apply.DeploymentSpec().
		WithReplicas(s.Replicas).
		WithSelector(metav1apply.LabelSelector().WithMatchLabels(Labels(s.Gateway))).
		WithStrategy(appsv1apply.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1apply.RollingUpdateDeployment().WithMaxUnavailable(intstr.FromInt32(0)).WithMaxSurge(intstr.FromInt32(1)))).
		WithTemplate(pod)))
}

// withPodSettings completes the Deployment that Deployment builds: the
// metadata every generated object carries, the pod's security settings and
// the /tmp volume, the image pull policy of every container, and the
// scheduling settings of the pod attribute.
func (s *Spec) withPodSettings(d *appsv1apply.DeploymentApplyConfiguration) *appsv1apply.DeploymentApplyConfiguration {
	d.WithLabels(s.ObjectLabels())
	if a := s.ObjectAnnotations(); a != nil {
		d.WithAnnotations(a)
	}
	tpl := d.Spec.Template
	tpl.WithLabels(s.podLabels()).WithAnnotations(s.podAnnotations())
	ps := tpl.Spec

	sc := corev1apply.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithRunAsUser(gatewayUID).
		WithRunAsGroup(gatewayGID).
		WithFSGroup(gatewayGID).
		WithSeccompProfile(corev1apply.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if p := s.LowestPort(); p > 0 && p < 1024 {
		sc.WithSysctls(corev1apply.Sysctl().WithName(UnprivilegedPortSysctl).WithValue(strconv.Itoa(int(p))))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Sysctls)) {
		sc.WithSysctls(corev1apply.Sysctl().WithName(name).WithValue(s.Sysctls[name]))
	}
	ps.WithSecurityContext(sc)
	ps.WithVolumes(corev1apply.Volume().WithName(tmpVolume).WithEmptyDir(corev1apply.EmptyDirVolumeSource()))
	for i := range ps.Containers {
		c := &ps.Containers[i]
		c.WithImagePullPolicy(corev1.PullPolicy(s.Class.PullPolicy)).
			WithSecurityContext(corev1apply.SecurityContext().
				WithAllowPrivilegeEscalation(false).
				WithReadOnlyRootFilesystem(true).
				WithCapabilities(corev1apply.Capabilities().WithDrop("ALL"))).
			WithVolumeMounts(corev1apply.VolumeMount().WithName(tmpVolume).WithMountPath(tmpDir))
	}

	p := s.Pod
	for _, name := range p.ImagePullSecrets {
		ps.WithImagePullSecrets(corev1apply.LocalObjectReference().WithName(name))
	}
	if len(p.NodeSelector) > 0 {
		ps.WithNodeSelector(p.NodeSelector)
	}
	for _, t := range p.Tolerations {
		ps.WithTolerations(applyconfig.Of[corev1apply.TolerationApplyConfiguration](t))
	}
	if p.Affinity != nil {
		ps.WithAffinity(applyconfig.Of[corev1apply.AffinityApplyConfiguration](p.Affinity))
	}
	for _, t := range s.topologySpread() {
		ps.WithTopologySpreadConstraints(applyconfig.Of[corev1apply.TopologySpreadConstraintApplyConfiguration](t))
	}
	if p.PriorityClassName != "" {
		ps.WithPriorityClassName(p.PriorityClassName)
	}
	return d
}

// topologySpread are pod.topology_spread's constraints, each counting the
// gateway's own pods of the same pod template (matchLabelKeys
// pod-template-hash, so that a rollout's old pods do not skew the count).
func (s *Spec) topologySpread() []corev1.TopologySpreadConstraint {
	out := make([]corev1.TopologySpreadConstraint, len(s.Pod.TopologySpread))
	for i, t := range s.Pod.TopologySpread {
		t.LabelSelector = &metav1.LabelSelector{MatchLabels: Labels(s.Gateway)}
		t.MatchLabelKeys = []string{podTemplateHashLabel}
		out[i] = t
	}
	return out
}

// deploymentDrift compares the live Deployment with the dry run of the
