package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework/list"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NewGatewayListResource lists the Gateways of a namespace that varnishgw
// serves: those whose GatewayClass has varnishgw's controllerName.
func NewGatewayListResource() list.ListResource {
	return &kubeListResource{
		typeName:    "gateway",
		kind:        "Gateway",
		description: "that varnishgw serves (whose GatewayClass has controllerName " + gwruntime.ControllerName + ")",
		resource:    NewGatewayResource().(*gatewayResource),
		find:        findGateways,
	}
}

// findGateways lists the Gateways of namespace that match selector and
// whose class varnishgw serves, by name.
func findGateways(ctx context.Context, c *clients, namespace string, selector labels.Selector) ([]string, error) {
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
