package provider

import (
	"context"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// applyRoute writes the HTTPRoute spec with server-side apply and returns
// the object the API server stored. dryRun returns what it would store.
func (c *clients) applyRoute(ctx context.Context, route *gatewayv1.HTTPRoute, dryRun bool) (*gatewayv1.HTTPRoute, error) {
	opts := control.ApplyOptions()
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.Gateway.GatewayV1().HTTPRoutes(route.Namespace).Apply(ctx, httpRouteApply(route), opts)
}
