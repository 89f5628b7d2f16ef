package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestHTTPRouteCORSAnyOriginWithCredentialsWarning runs the route's
// ValidateConfig, which terraform calls on validate and plan, on CORS
// filters that differ in allow_origins and allow_credentials: any origin
// together with credentials is a warning on the filter's allow_origins,
// not an error (the Gateway API defines it: the gateway echoes the
// request's Origin).
func TestHTTPRouteCORSAnyOriginWithCredentialsWarning(t *testing.T) {
	ctx := context.Background()
	r := &httpRouteResource{}
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	cors := func(credentials *bool, origins ...string) *corsModel {
		c := &corsModel{AllowCredentials: types.BoolPointerValue(credentials), MaxAge: types.Int64Value(5)}
		for _, o := range origins {
			c.AllowOrigins = append(c.AllowOrigins, types.StringValue(o))
		}
		return c
	}
	config := func(filters ...*corsModel) tfsdk.Config {
		m := httpRouteModel{
			Namespace:  types.StringValue("default"),
			Name:       types.StringValue("api"),
			ParentRefs: []parentRefModel{{Name: types.StringValue("gw")}},
			// computed, null in a configuration
			EffectiveCache: types.ListNull(effectiveCacheType),
		}
		for _, c := range filters {
			m.Rules = append(m.Rules, ruleModel{
				Filters:     []filterModel{{Type: types.StringValue("CORS"), CORS: c}},
				BackendRefs: []backendRefModel{{Name: types.StringValue("web"), Port: types.Int64Value(80)}},
			})
		}
		st := tfsdk.State{Schema: sr.Schema}
		if d := st.Set(ctx, &m); d.HasError() {
			t.Fatalf("build the configuration: %v", d)
		}
		return tfsdk.Config{Schema: sr.Schema, Raw: st.Raw}
	}
	yes, no := true, false
	origins := func(rule int) path.Path {
		return path.Root("rule").AtListIndex(rule).AtName("filter").AtListIndex(0).AtName("cors").AtName("allow_origins")
	}
	for _, tc := range []struct {
		name    string
		filters []*corsModel
		want    []path.Path // where the warnings are
	}{
		{"any origin with credentials", []*corsModel{cors(&yes, "*")}, []path.Path{origins(0)}},
		{"any https origin with credentials", []*corsModel{cors(&yes, "https://*")}, []path.Path{origins(0)}},
		{"any origin on a port with credentials", []*corsModel{cors(&yes, "https://www.example.com", "http://*:8080")}, []path.Path{origins(0)}},
		{"the second rule", []*corsModel{cors(&yes, "https://www.example.com"), cors(&yes, "*")}, []path.Path{origins(1)}},
		{"any origin without credentials", []*corsModel{cors(nil, "*")}, nil},
		{"any origin, credentials false", []*corsModel{cors(&no, "*")}, nil},
		{"listed origins with credentials", []*corsModel{cors(&yes, "https://www.example.com", "https://*.example.org")}, nil},
		{"no origin with credentials", []*corsModel{cors(&yes)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp resource.ValidateConfigResponse
			r.ValidateConfig(ctx, resource.ValidateConfigRequest{Config: config(tc.filters...)}, &resp)
			if resp.Diagnostics.HasError() {
				t.Fatalf("errors: %v", resp.Diagnostics.Errors())
			}
			warnings := resp.Diagnostics.Warnings()
			if len(warnings) != len(tc.want) {
				t.Fatalf("warnings %v, want %d", warnings, len(tc.want))
			}
			for i, w := range warnings {
				wp, ok := w.(diag.DiagnosticWithPath)
				if !ok || !wp.Path().Equal(tc.want[i]) {
					t.Errorf("warning %q is not at %s", w.Summary(), tc.want[i])
				}
				if w.Summary() != "CORS filter lets any website make credentialed requests" {
					t.Errorf("summary %q", w.Summary())
				}
				for _, s := range []string{"allow_credentials = true", "any website", "read the answers", "list the origins you trust"} {
					if !strings.Contains(w.Detail(), s) {
						t.Errorf("detail %q lacks %q", w.Detail(), s)
					}
				}
			}
		})
	}
}
