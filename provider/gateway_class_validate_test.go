package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestGatewayClassImageWarning runs the class's ValidateConfig, which
// terraform calls on validate and plan, on configurations that differ in
// image and image_pull_policy only.
func TestGatewayClassImageWarning(t *testing.T) {
	ctx := context.Background()
	r := &gatewayClassResource{}
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	typ := sr.Schema.Type().TerraformType(ctx).(tftypes.Object)
	config := func(image string, policy *string) tfsdk.Config {
		vals := map[string]tftypes.Value{}
		for name, at := range typ.AttributeTypes {
			vals[name] = tftypes.NewValue(at, nil)
		}
		vals["name"] = tftypes.NewValue(tftypes.String, "varnish")
		vals["image"] = tftypes.NewValue(tftypes.String, image)
		if policy != nil {
			vals["image_pull_policy"] = tftypes.NewValue(tftypes.String, *policy)
		}
		return tfsdk.Config{Schema: sr.Schema, Raw: tftypes.NewValue(typ, vals)}
	}
	always := "Always"
	for _, tc := range []struct {
		image  string
		policy *string
		want   string
	}{
		{"localhost/varnishgw/gateway:1.0.0", nil, ""},
		{"localhost/varnishgw/gateway:latest", nil, `With image_pull_policy = "IfNotPresent" a node that already has an image of that name keeps using it`},
		{"localhost/varnishgw/gateway", &always, `With image_pull_policy = "Always" each new pod pulls whatever latest names`},
	} {
		var resp resource.ValidateConfigResponse
		r.ValidateConfig(ctx, resource.ValidateConfigRequest{Config: config(tc.image, tc.policy)}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("%s: %v", tc.image, resp.Diagnostics)
		}
		var got string
		for _, d := range resp.Diagnostics.Warnings() {
			got += d.Summary() + ": " + d.Detail()
		}
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("image %s: warnings %q, want %q", tc.image, got, tc.want)
		}
	}
}
