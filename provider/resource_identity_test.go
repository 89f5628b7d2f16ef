package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestImportByIdentity imports each resource by identity, as an import
// block with identity = {...} does (Terraform 1.12), without a CLI: the
// state takes the identity's namespace and name, and a bad identity is an
// error naming the attribute, the value and the fix.
func TestImportByIdentity(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		resource fwresource.Resource
		identity map[string]string
		want     map[string]string // state attributes after the import
		err      string
	}{
		{"gateway", NewGatewayResourceWithIdentity(), map[string]string{"namespace": "edge", "name": "public"},
			map[string]string{"id": "edge/public", "namespace": "edge", "name": "public"}, ""},
		{"http route", NewHTTPRouteResourceWithIdentity(), map[string]string{"namespace": "default", "name": "web"},
			map[string]string{"id": "default/web", "namespace": "default", "name": "web", "served_timeout": "1m"}, ""},
		{"gateway class", NewGatewayClassResourceWithIdentity(), map[string]string{"name": "varnish"},
			map[string]string{"id": "varnish", "name": "varnish"}, ""},
		{"gateway bad namespace", NewGatewayResourceWithIdentity(), map[string]string{"namespace": "Edge_1", "name": "public"},
			nil, `identity namespace "Edge_1" is not a Kubernetes namespace name`},
		{"http route bad name", NewHTTPRouteResourceWithIdentity(), map[string]string{"namespace": "default", "name": "web/x"},
			nil, `identity name "web/x" is not a Kubernetes object name`},
		{"gateway class bad name", NewGatewayClassResourceWithIdentity(), map[string]string{"name": "Varnish"},
			nil, `identity name "Varnish" is not a Kubernetes object name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.resource.(interface {
				fwresource.ResourceWithIdentity
				fwresource.ResourceWithImportState
			})
			var schemaResp fwresource.SchemaResponse
			r.Schema(ctx, fwresource.SchemaRequest{}, &schemaResp)
			var idResp fwresource.IdentitySchemaResponse
			r.IdentitySchema(ctx, fwresource.IdentitySchemaRequest{}, &idResp)
			vals := map[string]tftypes.Value{}
			for k := range idResp.IdentitySchema.Attributes {
				vals[k] = tftypes.NewValue(tftypes.String, tc.identity[k])
			}
			identity := &tfsdk.ResourceIdentity{Schema: idResp.IdentitySchema,
				Raw: tftypes.NewValue(idResp.IdentitySchema.Type().TerraformType(ctx), vals)}
			resp := fwresource.ImportStateResponse{
				State:    tfsdk.State{Schema: schemaResp.Schema, Raw: tftypes.NewValue(schemaResp.Schema.Type().TerraformType(ctx), nil)},
				Identity: identity,
			}
			r.ImportState(ctx, fwresource.ImportStateRequest{Identity: identity}, &resp)
			if tc.err != "" {
				if !resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), tc.err) {
					t.Fatalf("diagnostics = %v, want an error containing %q", resp.Diagnostics, tc.err)
				}
				if !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), "identity = {") {
					t.Errorf("error %q does not show an identity block to write instead", resp.Diagnostics.Errors()[0].Detail())
				}
				return
			}
			if resp.Diagnostics.HasError() {
				t.Fatal(resp.Diagnostics)
			}
			for k, want := range tc.want {
				var got *string
				if d := resp.State.GetAttribute(ctx, path.Root(k), &got); d.HasError() {
					t.Fatal(d)
				}
				if got == nil || *got != want {
					t.Errorf("state %s = %v, want %q", k, got, want)
				}
			}
		})
	}
}

// TestListConfigValidators checks the list resources' namespace and
// label_selector arguments: a bad value is an error naming it and the fix.
func TestListConfigValidators(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		v     validator.String
		value string
		err   string
	}{
		{"namespace", namespaceValidator{}, "shop", ""},
		{"namespace upper case", namespaceValidator{}, "Shop", `"Shop" is not a Kubernetes namespace name; use lower-case letters`},
		{"namespace with a dot", namespaceValidator{}, "shop.eu", `"shop.eu" is not a Kubernetes namespace name`},
		{"selector", labelSelectorValidator{}, "app=shop,tier!=cache", ""},
		{"selector set", labelSelectorValidator{}, "team in (shop, blog),!archived", ""},
		{"selector bad", labelSelectorValidator{}, "team in shop", `"team in shop" is not a Kubernetes label selector`},
		{"selector bad key", labelSelectorValidator{}, "-app=shop", "for example app=shop,tier!=cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := validator.StringRequest{Path: path.Root("config").AtName("x"), ConfigValue: types.StringValue(tc.value)}
			var resp validator.StringResponse
			tc.v.ValidateString(ctx, req, &resp)
			if tc.err == "" {
				if resp.Diagnostics.HasError() {
					t.Fatalf("%q: %v", tc.value, resp.Diagnostics)
				}
				return
			}
			if !resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), tc.err) {
				t.Fatalf("%q: diagnostics = %v, want an error containing %q", tc.value, resp.Diagnostics, tc.err)
			}
		})
	}
}

// TestIdentityKeepsInterfaces: each decorator implements exactly the
// optional interfaces of the resource it wraps (the framework calls
// ModifyPlan, UpgradeState and the others only on resources that have
// them), plus the identity, and its methods are the resource's own except
// the five the identity wraps.
func TestIdentityKeepsInterfaces(t *testing.T) {
	optional := map[string]func(any) bool{
		"Configure":        func(r any) bool { _, ok := r.(fwresource.ResourceWithConfigure); return ok },
		"ConfigValidators": func(r any) bool { _, ok := r.(fwresource.ResourceWithConfigValidators); return ok },
		"ImportState":      func(r any) bool { _, ok := r.(fwresource.ResourceWithImportState); return ok },
		"ModifyPlan":       func(r any) bool { _, ok := r.(fwresource.ResourceWithModifyPlan); return ok },
		"MoveState":        func(r any) bool { _, ok := r.(fwresource.ResourceWithMoveState); return ok },
		"UpgradeState":     func(r any) bool { _, ok := r.(fwresource.ResourceWithUpgradeState); return ok },
		"ValidateConfig":   func(r any) bool { _, ok := r.(fwresource.ResourceWithValidateConfig); return ok },
		"UpgradeIdentity":  func(r any) bool { _, ok := r.(fwresource.ResourceWithUpgradeIdentity); return ok },
	}
	for _, tc := range []struct {
		name               string
		wrapped, decorated fwresource.Resource
	}{
		{"gateway", NewGatewayResource(), NewGatewayResourceWithIdentity()},
		{"http route", NewHTTPRouteResource(), NewHTTPRouteResourceWithIdentity()},
		{"gateway class", NewGatewayClassResource(), NewGatewayClassResourceWithIdentity()},
		{"listener set", NewListenerSetResource(), NewListenerSetResourceWithIdentity()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, has := range optional {
				if has(tc.wrapped) != has(tc.decorated) {
					t.Errorf("%s: the resource has it: %v, the decorator: %v", name, has(tc.wrapped), has(tc.decorated))
				}
			}
			if _, ok := tc.decorated.(fwresource.ResourceWithIdentity); !ok {
				t.Error("the decorator has no identity")
			}
			var want, got fwresource.MetadataResponse
			tc.wrapped.Metadata(context.Background(), fwresource.MetadataRequest{ProviderTypeName: "varnishgw"}, &want)
			tc.decorated.Metadata(context.Background(), fwresource.MetadataRequest{ProviderTypeName: "varnishgw"}, &got)
			if want.TypeName != got.TypeName || got.TypeName == "" {
				t.Errorf("type name %q, want the resource's %q", got.TypeName, want.TypeName)
			}
		})
	}
}
