package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ClassParameters reads the GatewayClass name and its parameters
// ConfigMap. The class must be served by varnishgw and name an image.
func (c *Cluster) ClassParameters(ctx context.Context, name string) (*gwruntime.Class, error) {
	gc, err := c.Gateway.GatewayV1().GatewayClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("gateway_class_name %q: the GatewayClass does not exist; create it first (resource varnishgw_gateway_class) or fix the name", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	if gc.Spec.ControllerName != gwruntime.ControllerName {
		return nil, fmt.Errorf("gateway_class_name %q: the GatewayClass has controllerName %q, not %q, so varnishgw does not serve it; use a class created by varnishgw_gateway_class",
			name, gc.Spec.ControllerName, gwruntime.ControllerName)
	}
	ref := gc.Spec.ParametersRef
	if ref == nil {
		return nil, fmt.Errorf("GatewayClass %s has no parametersRef, so its gateways have no image; apply its varnishgw_gateway_class again", name)
	}
	if ref.Kind != "ConfigMap" || ref.Group != "" || ref.Namespace == nil {
		return nil, fmt.Errorf("GatewayClass %s: parametersRef %s/%s is not a namespaced core ConfigMap; apply its varnishgw_gateway_class again", name, ref.Kind, ref.Name)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(string(*ref.Namespace)).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the parameters ConfigMap %s/%s of GatewayClass %s: %w", *ref.Namespace, ref.Name, name, err)
	}
	d := gwruntime.NewClass()
	if err := d.Merge(cm.Data, true); err != nil {
		return nil, fmt.Errorf("GatewayClass %s: parameters ConfigMap %s/%s: %w; apply its varnishgw_gateway_class again", name, *ref.Namespace, ref.Name, err)
	}
	if d.Image == "" {
		return nil, fmt.Errorf("GatewayClass %s: parameters ConfigMap %s/%s has no %s, so its gateways have no image; set image on its varnishgw_gateway_class and apply it",
			name, *ref.Namespace, ref.Name, gwruntime.ClassKeyImage)
	}
	return d, nil
}

// InvalidParametersError is a Gateway parametersRef that cannot be used:
// the Gateway is not accepted (reason InvalidParameters).
type InvalidParametersError struct{ msg string }

func (e *InvalidParametersError) Error() string { return e.msg }

// GatewayParameters are the parameters of a gateway: its class's, overridden
// by the ConfigMap its infrastructure.parameters_ref names. An unusable
// reference is an *InvalidParametersError.
func (c *Cluster) GatewayParameters(ctx context.Context, className, ns string, infra gwruntime.InfraSettings) (*gwruntime.Class, error) {
	d, err := c.ClassParameters(ctx, className)
	if err != nil {
		return nil, err
	}
	ref := infra.ParametersRef
	if ref == nil {
		return d, nil
	}
	invalid := func(format string, a ...any) error {
		return &InvalidParametersError{fmt.Sprintf("infrastructure.parameters_ref: "+format, a...)}
	}
	if ref.Group != "" || ref.Kind != "ConfigMap" {
		return nil, invalid("%s %q of group %q is not supported; varnishgw reads a ConfigMap (group \"\", kind ConfigMap)", ref.Kind, ref.Name, ref.Group)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, invalid("ConfigMap %s/%s does not exist; create it, or remove parameters_ref", ns, ref.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("get the parameters ConfigMap %s/%s of the gateway: %w", ns, ref.Name, err)
	}
	merged := d.Clone()
	if err := merged.Merge(cm.Data, false); err != nil {
		return nil, invalid("ConfigMap %s/%s: %v", ns, ref.Name, err)
	}
	return merged, nil
}

// IsInvalidParameters reports whether err is an *InvalidParametersError.
func IsInvalidParameters(err error) bool {
	var ip *InvalidParametersError
	return errors.As(err, &ip)
}

// ClassExternalNames reports whether a varnishgw GatewayClass allows
// ExternalName Services (external_name_services in its parameters
// ConfigMap). A class without its ConfigMap does not.
func (c *Cluster) ClassExternalNames(ctx context.Context, gc *gatewayv1.GatewayClass) (bool, error) {
	ref := gc.Spec.ParametersRef
	if ref == nil || ref.Kind != "ConfigMap" || ref.Group != "" || ref.Namespace == nil {
		return false, nil
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(string(*ref.Namespace)).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get the parameters ConfigMap %s/%s of GatewayClass %s: %w", *ref.Namespace, ref.Name, gc.Name, err)
	}
	return cm.Data[gwruntime.ClassKeyExternalNames] == "true", nil
}
