package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/conformance"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
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

// ApplyGatewayClass writes the GatewayClass name of varnishgw with
// description (none when nil), its parameters ConfigMap in namespace ns
// with data (the ClassKey* keys), and its status: Accepted, and the
// features the conformance replay claims (internal/conformance,
// docs/guides/conformance.md).
func (c *Cluster) ApplyGatewayClass(ctx context.Context, name string, description *string, ns string, data map[string]string) error {
	params := gwruntime.ClassParametersName(name)
	cm := corev1apply.ConfigMap(params, ns).
		WithLabels(gwruntime.ManagedLabels()).
		WithData(data)
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Apply(ctx, cm, ApplyOptions()); err != nil {
		return fmt.Errorf("apply ConfigMap %s/%s with the class defaults: %w", ns, params, err)
	}

	spec := gatewayv1apply.GatewayClassSpec().
		WithControllerName(gwruntime.ControllerName).
		WithParametersRef(gatewayv1apply.ParametersReference().
			WithGroup("").WithKind("ConfigMap").WithName(params).WithNamespace(gatewayv1.Namespace(ns)))
	if description != nil {
		spec = spec.WithDescription(*description)
	}
	gc, err := c.Gateway.GatewayV1().GatewayClasses().Apply(ctx,
		gatewayv1apply.GatewayClass(name).WithLabels(gwruntime.ManagedLabels()).WithSpec(spec), ApplyOptions())
	if err != nil {
		return fmt.Errorf("apply GatewayClass %s: %w", name, err)
	}

	accepted := status.Condition(gc.Status.Conditions, metav1.Condition{Type: string(gatewayv1.GatewayClassConditionStatusAccepted), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.GatewayClassReasonAccepted), Message: "Accepted by the varnishgw provider.", ObservedGeneration: gc.Generation})
	var supported []*gatewayv1apply.SupportedFeatureApplyConfiguration
	for _, f := range conformance.SupportedFeatures() {
		supported = append(supported, gatewayv1apply.SupportedFeature().WithName(gatewayv1.FeatureName(f)))
	}
	st := gatewayv1apply.GatewayClass(name).WithStatus(gatewayv1apply.GatewayClassStatus().
		WithConditions(accepted).WithSupportedFeatures(supported...))
	if _, err := c.Gateway.GatewayV1().GatewayClasses().ApplyStatus(ctx, st, ApplyOptions()); err != nil {
		return fmt.Errorf("set the Accepted condition and supported features of GatewayClass %s: %w", name, err)
	}
	return nil
}

// ReadGatewayClass reads the GatewayClass name and the data of the
// parameters ConfigMap its parametersRef names: no data (nil) when the
// reference is not one to a namespaced ConfigMap, empty when the ConfigMap
// does not exist. A NotFound error means the class does not exist.
func (c *Cluster) ReadGatewayClass(ctx context.Context, name string) (*gatewayv1.GatewayClass, map[string]string, error) {
	gc, err := c.Gateway.GatewayV1().GatewayClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	ref := gc.Spec.ParametersRef
	if ref == nil || ref.Kind != "ConfigMap" || ref.Namespace == nil {
		return gc, nil, nil
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(string(*ref.Namespace)).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return gc, map[string]string{}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("get ConfigMap %s/%s: %w", *ref.Namespace, ref.Name, err)
	}
	if cm.Data == nil {
		return gc, map[string]string{}, nil
	}
	return gc, cm.Data, nil
}

// DeleteGatewayClass deletes the GatewayClass name and, when ns is set,
// its parameters ConfigMap there.
func (c *Cluster) DeleteGatewayClass(ctx context.Context, name, ns string) error {
	if err := c.Gateway.GatewayV1().GatewayClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete GatewayClass %s: %w", name, err)
	}
	if ns == "" {
		return nil
	}
	params := gwruntime.ClassParametersName(name)
	if err := c.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, params, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ConfigMap %s/%s: %w", ns, params, err)
	}
	return nil
}
