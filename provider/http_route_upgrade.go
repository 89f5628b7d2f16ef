package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// httpRouteRenamed are the version 0 names of the arguments and blocks of
// varnishgw_http_route that version 1 renamed (lists of objects became
// repeated blocks with a singular name).
var httpRouteRenamed = map[string]string{
	"parent_ref":  "parent_refs",
	"rule":        "rules",
	"match":       "matches",
	"header":      "headers",
	"query_param": "query_params",
	"filter":      "filters",
	"backend_ref": "backend_refs", // in a rule; request_mirror's backend_ref keeps its name
}

// UpgradeState upgrades state stored by provider versions whose schema had
// nested attributes (version 0) to blocks, keeping every value.
func (r *httpRouteResource) UpgradeState(ctx context.Context) map[int64]resource.StateUpgrader {
	prior := httpRouteSchemaV0()
	return map[int64]resource.StateUpgrader{
		0: {
			PriorSchema: &prior,
			StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
				var s resource.SchemaResponse
				r.Schema(ctx, resource.SchemaRequest{}, &s)
				v, err := upgradeState(ctx, req.State.Raw, s.Schema, httpRouteRenamed, nil)
				if err == nil {
					// Settings version 0 did not have take their defaults,
					// so that the upgraded state plans no change.
					v, err = withDefaults(v, map[string]tftypes.Value{
						"wait_for_served": tftypes.NewValue(tftypes.Bool, true),
						"served_timeout":  tftypes.NewValue(tftypes.String, "1m"),
					})
				}
				if err != nil {
					resp.Diagnostics.AddError("Upgrade the HTTP route's state",
						"The state stored by the previous provider version could not be converted: "+err.Error()+
							". This is a bug in the provider; remove the route from the state (terraform state rm) and import it again.")
					return
				}
				resp.State.Raw = v
			},
		},
	}
}

// withDefaults sets the top-level attributes of the object v that are null
// to the values of defaults.
func withDefaults(v tftypes.Value, defaults map[string]tftypes.Value) (tftypes.Value, error) {
	if v.IsNull() {
		return v, nil
	}
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		return v, err
	}
	for k, d := range defaults {
		if cur, ok := attrs[k]; ok && cur.IsNull() {
			attrs[k] = d
		}
	}
	return tftypes.NewValue(v.Type(), attrs), nil
}

// httpRouteSchemaV0 is the schema of varnishgw_http_route version 0, as far
// as decoding stored state needs it: names and types.
func httpRouteSchemaV0() schema.Schema {
	str := schema.StringAttribute{Optional: true}
	num := schema.Int64Attribute{Optional: true}
	strList := schema.ListAttribute{Optional: true, ElementType: types.StringType}
	obj := func(attrs map[string]schema.Attribute) schema.SingleNestedAttribute {
		return schema.SingleNestedAttribute{Optional: true, Attributes: attrs}
	}
	list := func(attrs map[string]schema.Attribute) schema.ListNestedAttribute {
		return schema.ListNestedAttribute{Optional: true, NestedObject: schema.NestedAttributeObject{Attributes: attrs}}
	}
	headers := list(map[string]schema.Attribute{"name": str, "value": str})
	headerModifier := obj(map[string]schema.Attribute{"set": headers, "add": headers, "remove": strList})
	pathModifier := obj(map[string]schema.Attribute{"type": str, "replace_full_path": str, "replace_prefix_match": str})
	valueMatch := list(map[string]schema.Attribute{"type": str, "name": str, "value": str})
	return schema.Schema{
		Attributes: map[string]schema.Attribute{
			"id":        str,
			"namespace": str,
			"name":      str,
			"parent_refs": list(map[string]schema.Attribute{
				"name": str, "namespace": str, "section_name": str, "port": num,
			}),
			"hostnames": strList,
			"rules": list(map[string]schema.Attribute{
				"name": str,
				"matches": list(map[string]schema.Attribute{
					"path":         obj(map[string]schema.Attribute{"type": str, "value": str}),
					"headers":      valueMatch,
					"query_params": valueMatch,
					"method":       str,
				}),
				"filters": list(map[string]schema.Attribute{
					"type":                     str,
					"request_header_modifier":  headerModifier,
					"response_header_modifier": headerModifier,
					"request_redirect": obj(map[string]schema.Attribute{
						"scheme": str, "hostname": str, "port": num, "path": pathModifier, "status_code": num,
					}),
					"url_rewrite": obj(map[string]schema.Attribute{"hostname": str, "path": pathModifier}),
					"request_mirror": obj(map[string]schema.Attribute{
						"backend_ref": obj(map[string]schema.Attribute{"name": str, "namespace": str, "port": num}),
						"percent":     num,
					}),
				}),
				"backend_refs": list(map[string]schema.Attribute{"name": str, "namespace": str, "port": num, "weight": num}),
				"timeouts":     obj(map[string]schema.Attribute{"request": str, "backend_request": str}),
			}),
			"routing": str,
		},
	}
}
