package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

const (
	// httpRouteCRD is the name of the HTTPRoute CustomResourceDefinition.
	httpRouteCRD = "httproutes." + gatewayv1.GroupName
	// gatewayAPIChannelAnnotation and gatewayAPIBundleAnnotation are the
	// annotations of the Gateway API's CRDs naming their channel and
	// release.
	gatewayAPIChannelAnnotation = gatewayv1.GroupName + "/channel"
	gatewayAPIBundleAnnotation  = gatewayv1.GroupName + "/bundle-version"
)

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
	crd, err := c.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, httpRouteCRD, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s, and the cluster has no HTTPRoute CRD "+
			"(%s): install the Gateway API %s experimental channel's CRDs.", attr, field, httpRouteCRD, GatewayAPIVersion))
		return
	case apierrors.IsForbidden(err):
		diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s, which only the Gateway API experimental "+
			"channel's CRDs have, and the provider cannot read the HTTPRoute CRD to check that the cluster has it: %v. Grant the "+
			"provider's identity get on customresourcedefinitions %s (the provider role of the security guide has it), or remove %s.",
			attr, field, err, httpRouteCRD, attr))
		return
	case err != nil:
		diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s: read the HTTPRoute CRD %s: %v", attr, field, httpRouteCRD, err))
		return
	}
	if crdHasField(crd, gatewayv1.GroupVersion.Version, field) {
		return
	}
	channel := crd.Annotations[gatewayAPIChannelAnnotation]
	if channel == "" {
		channel = "not annotated"
	}
	bundle := crd.Annotations[gatewayAPIBundleAnnotation]
	if bundle == "" {
		bundle = "not annotated"
	}
	diags.AddAttributeError(attr, summary, fmt.Sprintf("%s needs the HTTPRoute field %s, which the cluster's HTTPRoute CRD does not have "+
		"(%s: channel %s, bundle version %s). The field exists only in the Gateway API experimental channel, and an API server "+
		"with the standard channel's CRDs drops it without an error, so the gateways would serve the rule without it. Install "+
		"the experimental channel's CRDs of Gateway API %s (its experimental-install.yaml) in the cluster, or remove %s.",
		attr, field, httpRouteCRD, channel, bundle, GatewayAPIVersion, attr))
}

// crdHasField reports whether version's schema of crd has field (under
// spec, "[]" stepping into list items).
func crdHasField(crd *apiextensionsv1.CustomResourceDefinition, version, field string) bool {
	var s *apiextensionsv1.JSONSchemaProps
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Name == version && v.Schema != nil {
			s = v.Schema.OpenAPIV3Schema
		}
	}
	if s == nil {
		return false
	}
	for _, seg := range append([]string{"spec"}, strings.Split(field, ".")...) {
		name, list := strings.CutSuffix(seg, "[]")
		p, ok := s.Properties[name]
		if !ok {
			return false
		}
		s = &p
		if list {
			if s.Items == nil || s.Items.Schema == nil {
				return false
			}
			s = s.Items.Schema
		}
	}
	return true
}
