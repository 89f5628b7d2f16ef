package provider

import (
	"context"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/distribution/reference"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	corev1 "k8s.io/api/core/v1"
)

// imageTagWarning says why image, pulled with policy, does not pin one
// build: it has no tag (so it means :latest) or the tag latest. Empty for
// an image with another tag or with a digest.
func imageTagWarning(image, policy string) string {
	named, err := gwruntime.ParseImage(image)
	if err != nil {
		return "" // the validator reports it
	}
	if _, ok := named.(reference.Digested); ok {
		return ""
	}
	what := fmt.Sprintf("image = %q has no tag, so the kubelet pulls %s:latest.", image, named.String())
	if t, ok := named.(reference.Tagged); ok {
		if t.Tag() != "latest" {
			return ""
		}
		what = fmt.Sprintf("image = %q uses the tag latest.", image)
	}
	var why string
	switch corev1.PullPolicy(policy) {
	case corev1.PullAlways:
		why = "With image_pull_policy = \"Always\" each new pod pulls whatever latest names at that moment, so the pods " +
			"of one gateway can run different builds; and as image does not change, a new build does not roll the pods."
	default:
		why = fmt.Sprintf("With image_pull_policy = %q a node that already has an image of that name keeps using it: a new "+
			"build pushed or imported under the same name is never pulled, and as image does not change, the pods are not "+
			"rolled either.", policy)
	}
	return what + " " + why + " Give every build its own tag (make image names its image " +
		"localhost/varnishgw/gateway:VERSION) or pin a digest (NAME@sha256:...), and change image to roll the gateways."
}

// imageValidator checks image with parseImage.
type imageValidator struct{}

func (imageValidator) Description(context.Context) string {
	return "a container image reference as the kubelet parses it, such as localhost/varnishgw/gateway:1.0.0"
}
func (v imageValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (imageValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := gwruntime.ParseImage(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid gateway image", err.Error())
	}
}
