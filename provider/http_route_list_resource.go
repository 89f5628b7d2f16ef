package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"

	"github.com/hashicorp/terraform-plugin-framework/list"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NewHTTPRouteListResource lists the HTTPRoutes of a namespace that
// varnishgw serves: those with at least one parent Gateway of a class with
// varnishgw's controllerName.
func NewHTTPRouteListResource() list.ListResource {
	return &kubeListResource{
		typeName:    "http_route",
		kind:        "HTTPRoute",
		description: "that varnishgw serves (with a parent Gateway whose GatewayClass has controllerName " + gwruntime.ControllerName + ")",
		resource:    NewHTTPRouteResource().(*httpRouteResource),
		find:        findHTTPRoutes,
	}
}

// findHTTPRoutes lists the HTTPRoutes of namespace that match selector and
// that have a parent Gateway varnishgw serves, by name.
func findHTTPRoutes(ctx context.Context, c *clients, namespace string, selector labels.Selector) ([]string, error) {
	routes, err := c.Gateway.GatewayV1().HTTPRoutes(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list the HTTPRoutes of namespace %s: %w", namespace, err)
	}
	var names []string
	for i := range routes.Items {
		parents, err := c.ParentGateways(ctx, &routes.Items[i])
		if err != nil {
			return nil, fmt.Errorf("HTTPRoute %s/%s: %w", namespace, routes.Items[i].Name, err)
		}
		if slices.ContainsFunc(parents, func(p control.RouteParent) bool { return p.Ours }) {
			names = append(names, routes.Items[i].Name)
		}
	}
	slices.Sort(names)
	return names, nil
}
