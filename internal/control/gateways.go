package control

import (
	"context"
	"fmt"
	"slices"

	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/applyconfig"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GatewayObjects are a gateway's objects as the cluster has them, nil
// where one does not exist: the Gateway, its VCL ConfigMap, Deployment,
// Service and PodDisruptionBudget.
type GatewayObjects struct {
	Gateway    *gatewayv1.Gateway
	VCL        *corev1.ConfigMap
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	PDB        *policyv1.PodDisruptionBudget
}

// ReadGateway reads the objects of the gateway ref. It returns a NotFound
// error when the Gateway is gone.
func (c *Cluster) ReadGateway(ctx context.Context, ref object.Ref) (*GatewayObjects, error) {
	gw, err := c.Gateway.GatewayV1().Gateways(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("get Gateway %s: %w", ref, err)
	}
	out := &GatewayObjects{Gateway: gw}
	ns, name := ref.Namespace, gwruntime.Name(ref)
	if out.VCL, err = get(c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, gwruntime.VCLConfigMapName(ref), metav1.GetOptions{})); err != nil {
		return nil, fmt.Errorf("get ConfigMap %s/%s: %w", ns, gwruntime.VCLConfigMapName(ref), err)
	}
	if out.Deployment, err = get(c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})); err != nil {
		return nil, fmt.Errorf("get Deployment %s/%s: %w", ns, name, err)
	}
	if out.Service, err = get(c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})); err != nil {
		return nil, fmt.Errorf("get Service %s/%s: %w", ns, name, err)
	}
	if out.PDB, err = get(c.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})); err != nil {
		return nil, fmt.Errorf("get PodDisruptionBudget %s/%s: %w", ns, name, err)
	}
	return out, nil
}

// get is the object of a Get, nil without an error when it does not exist.
func get[T any](o *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// DeleteGateway deletes the Gateway ref if the provider created it (it
// carries gwruntime.ManagedLabels); a Gateway already gone is no error.
func (c *Cluster) DeleteGateway(ctx context.Context, ref object.Ref) error {
	gw, err := c.Gateway.GatewayV1().Gateways(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err == nil && gw.Labels[gwruntime.ManagedByLabel] == gwruntime.ManagedBy {
		err = c.Gateway.GatewayV1().Gateways(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &gw.UID}})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Gateway %s: %w", ref, err)
	}
	return nil
}

// ServedGateways lists the Gateways of namespace that match selector and
// whose class varnishgw serves, by name.
func (c *Cluster) ServedGateways(ctx context.Context, namespace string, selector labels.Selector) ([]string, error) {
	gws, err := c.Gateway.GatewayV1().Gateways(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list the Gateways of namespace %s: %w", namespace, err)
	}
	ours := map[string]bool{}
	var names []string
	for _, gw := range gws.Items {
		class := string(gw.Spec.GatewayClassName)
		served, seen := ours[class]
		if !seen {
			gc, err := c.Gateway.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("get GatewayClass %s of Gateway %s/%s: %w", class, namespace, gw.Name, err)
			}
			served = err == nil && gc.Spec.ControllerName == gwruntime.ControllerName
			ours[class] = served
		}
		if served {
			names = append(names, gw.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// ApplyGateway writes gw's labels, spec and the annotations the provider
// owns (the routes' default cache policy and the escaped-slash setting: a
// Gateway without one is applied without it, which server-side apply then
// removes), and returns the stored Gateway. Every field of the typed spec
// is applied (applyconfig).
func (c *Cluster) ApplyGateway(ctx context.Context, gw *gatewayv1.Gateway) (*gatewayv1.Gateway, error) {
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithLabels(gw.Labels).
		WithSpec(applyconfig.Of[gatewayv1apply.GatewaySpecApplyConfiguration](gw.Spec))
	for _, k := range []string{routing.CachePolicyAnnotation, routing.EscapedSlashesAnnotation} {
		if v, ok := gw.Annotations[k]; ok {
			ac.WithAnnotations(map[string]string{k: v})
		}
	}
	live, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Apply(ctx, ac, ApplyOptions())
	if err != nil {
		return nil, fmt.Errorf("apply Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return live, nil
}
