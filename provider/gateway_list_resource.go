package provider

import (
	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework/list"
)

// NewGatewayListResource lists the Gateways of a namespace that varnishgw
// serves: those whose GatewayClass has varnishgw's controllerName.
func NewGatewayListResource() list.ListResource {
	return &kubeListResource{
		typeName:    "gateway",
		kind:        "Gateway",
		description: "that varnishgw serves (whose GatewayClass has controllerName " + gwruntime.ControllerName + ")",
		resource:    NewGatewayResource().(*gatewayResource),
		find:        (*control.Cluster).ServedGateways,
	}
}
