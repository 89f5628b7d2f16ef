package demo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1apply "k8s.io/client-go/applyconfigurations/discovery/v1"
	"k8s.io/client-go/kubernetes"
)

// fieldManager writes the demo's Services and EndpointSlices.
const fieldManager = "varnishgw-demo"

// RegisterService makes backends the ready endpoints of Service ns/name
// port port, as the EndpointSlice controller would for ready pods: the
// Service (no selector; its port targets the named port "http") and one
// EndpointSlice per backend (each backend listens on its own port).
// Slices of the Service whose backend is not in backends are deleted, so
// calling it again with another set scales the Service.
func RegisterService(ctx context.Context, kube kubernetes.Interface, ns, name string, port int32, backends ...*Backend) error {
	svc := corev1apply.Service(name, ns).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": fieldManager}).
		WithSpec(corev1apply.ServiceSpec().
			WithPorts(corev1apply.ServicePort().WithName("http").WithProtocol(corev1.ProtocolTCP).
				WithPort(port).WithTargetPort(intstr.FromString("http"))))
	if _, err := kube.CoreV1().Services(ns).Apply(ctx, svc, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply Service %s/%s: %w", ns, name, err)
	}
	keep := map[string]bool{}
	for _, b := range backends {
		slice := name + "-" + b.Name
		keep[slice] = true
		es := discoveryv1apply.EndpointSlice(slice, ns).
			WithLabels(map[string]string{
				discoveryv1.LabelServiceName: name,
				discoveryv1.LabelManagedBy:   fieldManager,
			}).
			WithAddressType(discoveryv1.AddressTypeIPv4).
			WithEndpoints(discoveryv1apply.Endpoint().WithAddresses(b.IP).
				WithConditions(discoveryv1apply.EndpointConditions().WithReady(true).WithServing(true).WithTerminating(false))).
			WithPorts(discoveryv1apply.EndpointPort().WithName("http").WithProtocol(corev1.ProtocolTCP).WithPort(b.Port))
		if _, err := kube.DiscoveryV1().EndpointSlices(ns).Apply(ctx, es, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply EndpointSlice %s/%s: %w", ns, slice, err)
		}
	}
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return fmt.Errorf("list EndpointSlices of Service %s/%s: %w", ns, name, err)
	}
	for _, es := range list.Items {
		if !keep[es.Name] {
			if err := kube.DiscoveryV1().EndpointSlices(ns).Delete(ctx, es.Name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("delete EndpointSlice %s/%s: %w", ns, es.Name, err)
			}
		}
	}
	return nil
}

// EnsureNamespace creates namespace ns if it does not exist.
func EnsureNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	if _, err := kube.CoreV1().Namespaces().Apply(ctx, corev1apply.Namespace(ns), metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply Namespace %s: %w", ns, err)
	}
	return nil
}
