package provider

import (
	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework/list"
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
		find:        (*control.Cluster).ServedHTTPRoutes,
	}
}
