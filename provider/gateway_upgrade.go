package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// gatewayRenamed are the version 0 names of the arguments and blocks of
// varnishgw_gateway that version 1 renamed.
var gatewayRenamed = map[string]string{
	"listener":   "listeners",
	"toleration": "tolerations",
}

// UpgradeState upgrades state stored by provider versions whose schema had
// nested attributes (version 0) to blocks, keeping every value.
func (r *gatewayResource) UpgradeState(ctx context.Context) map[int64]resource.StateUpgrader {
	prior := gatewaySchemaV0()
	return map[int64]resource.StateUpgrader{
		0: {
			PriorSchema: &prior,
			StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
				var s resource.SchemaResponse
				r.Schema(ctx, resource.SchemaRequest{}, &s)
				v, err := upgradeState(ctx, req.State.Raw, s.Schema, gatewayRenamed, upgradeAllowedRoutes)
				if err != nil {
					resp.Diagnostics.AddError("Upgrade the gateway's state",
						"The state stored by the previous provider version could not be converted: "+err.Error()+
							". This is a bug in the provider; remove the gateway from the state (terraform state rm) and import it again.")
					return
				}
				resp.State.Raw = v
			},
		},
	}
}

// upgradeAllowedRoutes drops the allowed_routes that version 0 stored for
// every listener, { namespaces = "Same" } when the configuration had none:
// version 1 leaves the block absent for the default. (A configuration that
// spelt out allowed_routes = { namespaces = "Same" } plans adding the
// block once, which changes nothing in the cluster.)
func upgradeAllowedRoutes(at string, obj map[string]tftypes.Value) map[string]tftypes.Value {
	if at != "allowed_routes" {
		return obj
	}
	var ns string
	if v := obj["namespaces"]; !v.IsNull() && v.As(&ns) == nil && ns != "Same" {
		return obj
	}
	for _, k := range []string{"selector", "selector_expression", "kind"} {
		v := obj[k]
		if v.IsNull() {
			continue
		}
		var elems []tftypes.Value
		if err := v.As(&elems); err == nil && len(elems) == 0 {
			continue
		}
		var m map[string]tftypes.Value
		if err := v.As(&m); err == nil && len(m) == 0 {
			continue
		}
		return obj
	}
	return nil
}

// gatewaySchemaV0 is the schema of varnishgw_gateway version 0, as far as
// decoding stored state needs it: names and types.
func gatewaySchemaV0() schema.Schema {
	str := schema.StringAttribute{Optional: true}
	num := schema.Int64Attribute{Optional: true}
	strMap := schema.MapAttribute{Optional: true, ElementType: types.StringType}
	obj := func(attrs map[string]schema.Attribute) schema.SingleNestedAttribute {
		return schema.SingleNestedAttribute{Optional: true, Attributes: attrs}
	}
	list := func(attrs map[string]schema.Attribute) schema.ListNestedAttribute {
		return schema.ListNestedAttribute{Optional: true, NestedObject: schema.NestedAttributeObject{Attributes: attrs}}
	}
	return schema.Schema{
		Attributes: map[string]schema.Attribute{
			"id":                 str,
			"namespace":          str,
			"name":               str,
			"gateway_class_name": str,
			"listeners": list(map[string]schema.Attribute{
				"name": str, "port": num, "protocol": str, "hostname": str,
				"allowed_routes": obj(map[string]schema.Attribute{"namespaces": str, "selector": strMap}),
			}),
			"vcl":                   str,
			"mode":                  str,
			"replicas":              num,
			"drain_timeout_seconds": num,
			"resources":             obj(map[string]schema.Attribute{"requests": strMap, "limits": strMap}),
			"pod": obj(map[string]schema.Attribute{
				"image_pull_secrets": schema.ListAttribute{Optional: true, ElementType: types.StringType},
				"node_selector":      strMap,
				"tolerations": list(map[string]schema.Attribute{
					"key": str, "operator": str, "value": str, "effect": str, "toleration_seconds": num,
				}),
				"affinity": str,
				"topology_spread": list(map[string]schema.Attribute{
					"max_skew": num, "topology_key": str, "when_unsatisfiable": str, "min_domains": num,
					"node_affinity_policy": str, "node_taints_policy": str,
				}),
				"priority_class_name": str,
				"labels":              strMap,
				"annotations":         strMap,
			}),
			"infrastructure": obj(map[string]schema.Attribute{
				"labels":         strMap,
				"annotations":    strMap,
				"parameters_ref": obj(map[string]schema.Attribute{"group": str, "kind": str, "name": str}),
			}),
			"service_type":             str,
			"service_annotations":      strMap,
			"pdb_max_unavailable":      str,
			"wait_for_rollout":         schema.BoolAttribute{Optional: true},
			"rollout_timeout":          str,
			"addresses":                schema.ListAttribute{Computed: true, ElementType: types.StringType},
			"conditions":               schema.ListAttribute{Computed: true, ElementType: conditionType},
			"listener_attached_routes": schema.MapAttribute{Computed: true, ElementType: types.Int64Type},
			"start_hash":               str,
			"main_vcl_sha256":          str,
		},
	}
}
