package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/build/imagebuild"
)

// EnvImages names the directory `make image` writes the images to
// (bin/images); the GNUmakefile exports it.
const EnvImages = "VARNISHGW_IMAGES"

// Images are the images `make image` built: the gateway's and the echo
// backend's.
type Images struct {
	Gateway, Echo imagebuild.Info
}

// LoadImages reads the descriptions of the images in dir; an empty dir is
// $VARNISHGW_IMAGES, else bin/images under root.
func LoadImages(root, dir string) (*Images, error) {
	if dir == "" {
		dir = os.Getenv(EnvImages)
	}
	if dir == "" {
		dir = filepath.Join(root, "bin", "images")
	}
	gw, err := imagebuild.ReadInfo(dir, "gateway")
	if err != nil {
		return nil, err
	}
	echo, err := imagebuild.ReadInfo(dir, "echo")
	if err != nil {
		return nil, err
	}
	return &Images{Gateway: gw, Echo: echo}, nil
}

// EchoPort is the port the echo backend pods listen on.
const EchoPort = 8080

// echoFieldManager owns the echo Deployments and Services.
const echoFieldManager = "varnishgw-demo"

// DeployEcho creates or updates the Deployment and the Service name in ns:
// replicas echo backend pods (the echo image, answering with their pod
// name) behind a ClusterIP Service on port 80. The pods become Ready through
// a readiness probe and, when deleted, keep serving for two seconds
// (preStop) while the endpoints drop them, as a well-behaved backend does.
func DeployEcho(ctx context.Context, kube kubernetes.Interface, ns, name, image string, replicas int32) error {
	labels := map[string]string{"app": name}
	probe := corev1apply.Probe().WithHTTPGet(corev1apply.HTTPGetAction().WithPath("/").WithPort(intstr.FromInt32(EchoPort))).
		WithPeriodSeconds(1)
	ctr := corev1apply.Container().WithName("echo").WithImage(image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs(fmt.Sprintf("-listen=:%d", EchoPort)).
		WithPorts(corev1apply.ContainerPort().WithName("http").WithContainerPort(EchoPort)).
		WithReadinessProbe(probe).
		WithLifecycle(corev1apply.Lifecycle().WithPreStop(corev1apply.LifecycleHandler().
			WithSleep(corev1apply.SleepAction().WithSeconds(2)))).
		WithSecurityContext(corev1apply.SecurityContext().WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).WithCapabilities(corev1apply.Capabilities().WithDrop("ALL")))
	pod := corev1apply.PodTemplateSpec().WithLabels(labels).WithSpec(corev1apply.PodSpec().
		WithContainers(ctr).
		WithTerminationGracePeriodSeconds(15).
		WithSecurityContext(corev1apply.PodSecurityContext().WithRunAsNonRoot(true).WithRunAsUser(65532).WithRunAsGroup(65532).
			WithSeccompProfile(corev1apply.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))))
	d := appsv1apply.Deployment(name, ns).WithLabels(labels).WithSpec(appsv1apply.DeploymentSpec().
		WithReplicas(replicas).
		WithSelector(metav1apply.LabelSelector().WithMatchLabels(labels)).
		WithStrategy(appsv1apply.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1apply.RollingUpdateDeployment().WithMaxUnavailable(intstr.FromInt32(0)))).
		WithTemplate(pod))
	opts := metav1.ApplyOptions{FieldManager: echoFieldManager, Force: true}
	if _, err := kube.AppsV1().Deployments(ns).Apply(ctx, d, opts); err != nil {
		return fmt.Errorf("apply the echo Deployment %s/%s: %w", ns, name, err)
	}
	svc := corev1apply.Service(name, ns).WithLabels(labels).WithSpec(corev1apply.ServiceSpec().
		WithSelector(labels).
		WithPorts(corev1apply.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromString("http"))))
	if _, err := kube.CoreV1().Services(ns).Apply(ctx, svc, opts); err != nil {
		return fmt.Errorf("apply the echo Service %s/%s: %w", ns, name, err)
	}
	return nil
}
