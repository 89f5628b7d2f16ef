package provider

import (
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/applyconfig"
)

// httpRouteApply is the apply configuration of route's metadata (name,
// namespace, labels) and spec, built from the typed route the model
// converts to (toHTTPRoute): every field of the typed spec is converted
// (applyconfig), so that what is applied is what was validated.
func httpRouteApply(route *gatewayv1.HTTPRoute) *gatewayv1apply.HTTPRouteApplyConfiguration {
	ac := gatewayv1apply.HTTPRoute(route.Name, route.Namespace).
		WithSpec(applyconfig.Of[gatewayv1apply.HTTPRouteSpecApplyConfiguration](route.Spec))
	if len(route.Labels) > 0 {
		ac.WithLabels(route.Labels)
	}
	return ac
}
