package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Gateway API fields of the experimental channel.
//
// The Gateway API ships its CRDs in two channels. Some HTTPRoute fields
// (in GatewayAPIVersion: a rule's retry and sessionPersistence) exist only
// in the experimental channel's CRDs, and an API server with the standard
// channel's prunes them without an error: the HTTPRoute would be stored,
// and served, without them. So when a rule uses such a field the provider
// reads the cluster's HTTPRoute CRD and fails the plan (ModifyPlan, which
// Terraform runs again during the apply once every value is known) unless
// the CRD's schema has the field,
// naming the attribute, the channel the CRD says it is from
// (gateway.networking.k8s.io/channel) and the fix. The schema decides, not
// the annotation: a later standard channel that graduates the field
// passes, and a CRD without the annotation is judged by what it serves.

// checkExperimentalFields fails diags for each experimental channel field
// the route's rules use that the cluster's HTTPRoute CRD does not have
// (requireExperimentalField): a rule's retry and session persistence.
func (c *clients) checkExperimentalFields(ctx context.Context, route *gatewayv1.HTTPRoute, diags *diag.Diagnostics) {
	for i := range route.Spec.Rules {
		if route.Spec.Rules[i].Retry != nil {
			c.requireExperimentalField(ctx, path.Root("rule").AtListIndex(i).AtName("retry"), "rules[].retry", diags)
		}
		if route.Spec.Rules[i].SessionPersistence != nil {
			c.requireExperimentalField(ctx, path.Root("rule").AtListIndex(i).AtName("session_persistence"), "rules[].sessionPersistence", diags)
		}
	}
}

// requireExperimentalField adds an error at attr to diags unless the
// v1 schema of the cluster's HTTPRoute CRD has field, a JSON path under
// spec in the form of httpRouteFields ("rules[].retry": [] steps into
// list items). It also fails when the CRD cannot be read, saying why.
func (c *clients) requireExperimentalField(ctx context.Context, attr path.Path, field string, diags *diag.Diagnostics) {
	const summary = "Plan the HTTP route"
	crd, err := c.ReadHTTPRouteCRD(ctx)
	switch {
	case apierrors.IsNotFound(err):
		diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s, and the cluster has no HTTPRoute CRD "+
			"(%s): install the Gateway API %s experimental channel's CRDs.", attr, field, control.HTTPRouteCRD, GatewayAPIVersion))
		return
	case apierrors.IsForbidden(err):
		diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s, which only the Gateway API experimental "+
			"channel's CRDs have, and the provider cannot read the HTTPRoute CRD to check that the cluster has it: %v. Grant the "+
			"provider's identity get on customresourcedefinitions %s (the provider role of the security guide has it), or remove %s.",
			attr, field, err, control.HTTPRouteCRD, attr))
		return
	case err != nil:
		diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s: read the HTTPRoute CRD %s: %v", attr, field, control.HTTPRouteCRD, err))
		return
	}
	if control.CRDHasField(crd, gatewayv1.GroupVersion.Version, field) {
		return
	}
	channel := crd.Annotations[control.GatewayAPIChannelAnnotation]
	if channel == "" {
		channel = "not annotated"
	}
	bundle := crd.Annotations[control.GatewayAPIBundleAnnotation]
	if bundle == "" {
		bundle = "not annotated"
	}
	diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s, which the cluster's HTTPRoute CRD does not have "+
		"(%s: channel %s, bundle version %s). The field exists only in the Gateway API experimental channel, and an API server "+
		"with the standard channel's CRDs drops it without an error, so the gateways would serve the rule without it. Install "+
		"the experimental channel's CRDs of Gateway API %s (its experimental-install.yaml) in the cluster, or remove %s.",
		attr, field, control.HTTPRouteCRD, channel, bundle, GatewayAPIVersion, attr))
}
