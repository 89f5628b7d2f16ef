package provider

import (
	"context"
	"testing"

	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// upgrade runs the version 0 upgrader of r on the state stored as JSON and
// decodes the result into out.
func upgrade(t *testing.T, r fwresource.ResourceWithUpgradeState, stored string, out any) {
	t.Helper()
	ctx := context.Background()
	u := r.UpgradeState(ctx)[0]
	raw, err := (&tfprotov6.RawState{JSON: []byte(stored)}).Unmarshal(u.PriorSchema.Type().TerraformType(ctx))
	if err != nil {
		t.Fatalf("decode the version 0 state: %v", err)
	}
	var s fwresource.SchemaResponse
	r.(fwresource.Resource).Schema(ctx, fwresource.SchemaRequest{}, &s)
	req := fwresource.UpgradeStateRequest{State: &tfsdk.State{Schema: *u.PriorSchema, Raw: raw}}
	resp := fwresource.UpgradeStateResponse{State: tfsdk.State{Schema: s.Schema}}
	u.StateUpgrader(ctx, req, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("upgrade: %v", resp.Diagnostics)
	}
	if d := resp.State.Get(ctx, out); d.HasError() {
		t.Fatalf("read the upgraded state: %v", d)
	}
}

// A route as the provider stored it with schema version 0.
const routeStateV0 = `{
  "id": "shop/shop", "namespace": "shop", "name": "shop",
  "parent_refs": [{"name": "public", "namespace": "gateways", "section_name": "http", "port": null}],
  "hostnames": ["shop.example.com"],
  "rules": [
    {
      "name": "api",
      "matches": [{"path": {"type": "PathPrefix", "value": "/api"}, "headers": [{"type": "Exact", "name": "x-beta", "value": "1"}],
                   "query_params": null, "method": "GET"}],
      "filters": [
        {"type": "RequestHeaderModifier", "request_header_modifier": {"set": [{"name": "a", "value": "1"}], "add": null, "remove": ["x-debug"]},
         "response_header_modifier": null, "request_redirect": null, "url_rewrite": null, "request_mirror": null},
        {"type": "RequestMirror", "request_header_modifier": null, "response_header_modifier": null, "request_redirect": null, "url_rewrite": null,
         "request_mirror": {"backend_ref": {"name": "search-next", "namespace": null, "port": 8080}, "percent": 25}}
      ],
      "backend_refs": [{"name": "api", "namespace": null, "port": 8080, "weight": 90}, {"name": "api-canary", "namespace": "canary", "port": 8080, "weight": 10}],
      "timeouts": {"request": "10s", "backend_request": null}
    },
    {
      "name": null, "matches": null, "backend_refs": null, "timeouts": null,
      "filters": [{"type": "RequestRedirect", "request_header_modifier": null, "response_header_modifier": null, "url_rewrite": null, "request_mirror": null,
                   "request_redirect": {"scheme": null, "hostname": "www.example.com", "port": null, "status_code": 301,
                                        "path": {"type": "ReplaceFullPath", "replace_full_path": "/products", "replace_prefix_match": null}}}]
    }
  ],
  "routing": "[]"
}`

func TestHTTPRouteStateUpgrade(t *testing.T) {
	var m httpRouteModel
	upgrade(t, &httpRouteResource{}, routeStateV0, &m)
	if m.ID.ValueString() != "shop/shop" || m.Routing.ValueString() != "[]" || len(m.Hostnames) != 1 {
		t.Errorf("top level = %+v", m)
	}
	if len(m.ParentRefs) != 1 || m.ParentRefs[0].SectionName.ValueString() != "http" || m.ParentRefs[0].Namespace.ValueString() != "gateways" ||
		!m.ParentRefs[0].Port.IsNull() || !m.ParentRefs[0].Kind.IsNull() {
		t.Errorf("parent_ref = %+v", m.ParentRefs)
	}
	if !m.UseDefaultGateways.IsNull() {
		t.Errorf("use_default_gateways = %v, want null", m.UseDefaultGateways)
	}
	if len(m.Rules) != 2 {
		t.Fatalf("rules = %+v", m.Rules)
	}
	r := m.Rules[0]
	if r.Name.ValueString() != "api" || len(r.Matches) != 1 || r.Matches[0].Path.Value.ValueString() != "/api" || r.Matches[0].Method.ValueString() != "GET" ||
		len(r.Matches[0].Headers) != 1 || r.Matches[0].Headers[0].Name.ValueString() != "x-beta" || r.Matches[0].QueryParams == nil || len(r.Matches[0].QueryParams) != 0 {
		t.Errorf("rule[0].match = %+v", r.Matches)
	}
	if len(r.Filters) != 2 || r.Filters[0].RequestHeaderModifier.Set[0].Value.ValueString() != "1" || r.Filters[0].RequestHeaderModifier.Add == nil ||
		r.Filters[0].RequestHeaderModifier.Remove[0].ValueString() != "x-debug" {
		t.Errorf("rule[0].filter[0] = %+v", r.Filters)
	}
	if mr := r.Filters[1].RequestMirror; mr == nil || mr.BackendRef.Name.ValueString() != "search-next" || mr.BackendRef.Port.ValueInt64() != 8080 ||
		mr.Percent.ValueInt64() != 25 || mr.Fraction != nil {
		t.Errorf("rule[0].filter[1].request_mirror = %+v", r.Filters[1].RequestMirror)
	}
	if len(r.BackendRefs) != 2 || r.BackendRefs[0].Weight.ValueInt64() != 90 || r.BackendRefs[1].Namespace.ValueString() != "canary" ||
		!r.BackendRefs[1].Kind.IsNull() || r.BackendRefs[1].Filters == nil {
		t.Errorf("rule[0].backend_ref = %+v", r.BackendRefs)
	}
	if r.Timeouts == nil || r.Timeouts.Request.ValueString() != "10s" || !r.Timeouts.BackendRequest.IsNull() || r.Retry != nil || r.SessionPersistence != nil {
		t.Errorf("rule[0] timeouts %+v, retry %+v, session persistence %+v", r.Timeouts, r.Retry, r.SessionPersistence)
	}
	r = m.Rules[1]
	if r.Matches == nil || len(r.Matches) != 0 || r.BackendRefs == nil || len(r.BackendRefs) != 0 || r.Timeouts != nil {
		t.Errorf("rule[1]: an unset list must become an empty list of blocks, an unset object an absent block: %+v", r)
	}
	if rd := r.Filters[0].RequestRedirect; rd == nil || rd.StatusCode.ValueInt64() != 301 || rd.Path.ReplaceFullPath.ValueString() != "/products" {
		t.Errorf("rule[1].filter[0].request_redirect = %+v", r.Filters[0].RequestRedirect)
	}
}

// A gateway as the provider stored it with schema version 0.
const gatewayStateV0 = `{
  "id": "gateways/public", "namespace": "gateways", "name": "public", "gateway_class_name": "varnish",
  "listeners": [
    {"name": "http", "port": 80, "protocol": "HTTP", "hostname": null, "allowed_routes": {"namespaces": "Same", "selector": null}},
    {"name": "all", "port": 81, "protocol": "HTTP", "hostname": "a.example.com", "allowed_routes": {"namespaces": "All", "selector": null}},
    {"name": "team", "port": 82, "protocol": "HTTP", "hostname": null, "allowed_routes": {"namespaces": "Selector", "selector": {"team": "shop"}}}
  ],
  "vcl": null, "mode": "supervise", "replicas": 2, "drain_timeout_seconds": 300,
  "resources": {"requests": {"cpu": "500m"}, "limits": null},
  "pod": {"image_pull_secrets": ["registry"], "node_selector": null,
          "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "edge", "effect": "NoSchedule", "toleration_seconds": null}],
          "affinity": null, "topology_spread": null, "priority_class_name": null, "labels": {"team": "edge"}, "annotations": null},
  "infrastructure": {"labels": null, "annotations": {"a.io/b": "c"}, "parameters_ref": {"group": "", "kind": "ConfigMap", "name": "edge-params"}},
  "service_type": "ClusterIP", "service_annotations": null, "pdb_max_unavailable": "1", "wait_for_rollout": true, "rollout_timeout": "10m",
  "addresses": ["10.0.0.1"],
  "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok"}],
  "listener_attached_routes": {"http": 3}, "start_hash": "abc", "main_vcl_sha256": "def"
}`

func TestGatewayStateUpgrade(t *testing.T) {
	var m gatewayModel
	upgrade(t, &gatewayResource{}, gatewayStateV0, &m)
	if m.ID.ValueString() != "gateways/public" || m.Replicas.ValueInt64() != 2 || m.StartHash.ValueString() != "abc" || m.MainVCLSHA256.ValueString() != "def" ||
		len(m.Addresses.Elements()) != 1 || len(m.Conditions.Elements()) != 1 || m.ListenerAttachedRoutes.Elements()["http"] != types.Int64Value(3) {
		t.Errorf("top level = %+v", m)
	}
	if len(m.Listeners) != 3 {
		t.Fatalf("listeners = %+v", m.Listeners)
	}
	if m.Listeners[0].AllowedRoutes != nil {
		t.Errorf("listener[0]: the stored default allowed_routes (Same) must become an absent block, got %+v", m.Listeners[0].AllowedRoutes)
	}
	if ar := m.Listeners[1].AllowedRoutes; ar == nil || ar.Namespaces.ValueString() != "All" || m.Listeners[1].Hostname.ValueString() != "a.example.com" {
		t.Errorf("listener[1] = %+v", m.Listeners[1])
	}
	if ar := m.Listeners[2].AllowedRoutes; ar == nil || ar.Namespaces.ValueString() != "Selector" || stringMap(ar.Selector)["team"] != "shop" ||
		ar.SelectorExpressions == nil || ar.Kinds == nil {
		t.Errorf("listener[2].allowed_routes = %+v", m.Listeners[2].AllowedRoutes)
	}
	if m.Listeners[0].TLS != nil || !m.TLS.IsNull() || !m.AllowedListeners.IsNull() || !m.DefaultScope.IsNull() || len(m.SpecAddresses.Elements()) != 0 {
		t.Errorf("blocks version 0 did not have: tls %v, allowed_listeners %v, default_scope %v, address %v", m.TLS, m.AllowedListeners, m.DefaultScope, m.SpecAddresses)
	}
	if m.Resources == nil || stringMap(m.Resources.Requests)["cpu"] != "500m" || !m.Resources.Limits.IsNull() {
		t.Errorf("resources = %+v", m.Resources)
	}
	if p := m.Pod; p == nil || len(p.Tolerations) != 1 || p.Tolerations[0].Key.ValueString() != "dedicated" || p.TopologySpread == nil ||
		len(p.TopologySpread) != 0 || stringMap(p.Labels)["team"] != "edge" || len(p.ImagePullSecrets.Elements()) != 1 {
		t.Errorf("pod = %+v", m.Pod)
	}
	if i := m.Infrastructure; i == nil || i.ParametersRef == nil || i.ParametersRef.Name.ValueString() != "edge-params" || stringMap(i.Annotations)["a.io/b"] != "c" {
		t.Errorf("infrastructure = %+v", m.Infrastructure)
	}
}
