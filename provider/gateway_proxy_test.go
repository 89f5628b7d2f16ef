package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestCIDRValidator: a PROXY source is a CIDR in canonical form, the
// error names the value and the fix.
func TestCIDRValidator(t *testing.T) {
	for _, tc := range []struct {
		in, err string // err "": valid
	}{
		{in: "10.0.0.0/8"},
		{in: "192.0.2.10/32"},
		{in: "2001:db8::/32"},
		{in: "10.0.0.1/8", err: `"10.0.0.1/8" is not in canonical form (host bits set, or another spelling of the address); write "10.0.0.0/8"`},
		{in: "2001:DB8::/32", err: `write "2001:db8::/32"`},
		{in: "192.0.2.10", err: `"192.0.2.10" is not a CIDR`},
		{in: "lb.example.com", err: `"lb.example.com" is not a CIDR`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var resp validator.StringResponse
			cidrValidator{}.ValidateString(context.Background(), validator.StringRequest{
				Path: path.Root("proxy_protocol_sources"), ConfigValue: types.StringValue(tc.in)}, &resp)
			if got := diagText(resp.Diagnostics); (tc.err == "") != (got == "") || !strings.Contains(got, tc.err) {
				t.Errorf("error %q, want one containing %q", got, tc.err)
			}
		})
	}
}

// TestValidateProxyProtocol: proxy_protocol_sources is required with
// proxy_protocol = true and used only with it.
func TestValidateProxyProtocol(t *testing.T) {
	sources := types.SetValueMust(types.StringType, []attr.Value{types.StringValue("10.0.0.0/8")})
	null := types.SetNull(types.StringType)
	for _, tc := range []struct {
		name    string
		proxy   types.Bool
		sources types.Set
		err     string
	}{
		{name: "neither", proxy: types.BoolNull(), sources: null},
		{name: "off", proxy: types.BoolValue(false), sources: null},
		{name: "on with sources", proxy: types.BoolValue(true), sources: sources},
		{name: "on without sources", proxy: types.BoolValue(true), sources: null,
			err: "proxy_protocol = true needs proxy_protocol_sources: list the load balancer's addresses as CIDRs"},
		{name: "sources, proxy unset", proxy: types.BoolNull(), sources: sources,
			err: "proxy_protocol_sources is used only with proxy_protocol = true (proxy_protocol is unset)"},
		{name: "sources, proxy false", proxy: types.BoolValue(false), sources: sources,
			err: "(proxy_protocol is false): set proxy_protocol = true or remove proxy_protocol_sources"},
		{name: "unknown", proxy: types.BoolUnknown(), sources: null},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var diags diag.Diagnostics
			(&gatewayModel{ProxyProtocol: tc.proxy, ProxyProtocolSources: tc.sources}).validateProxyProtocol(&diags)
			if got := diagText(diags); (tc.err == "") != (got == "") || !strings.Contains(got, tc.err) {
				t.Errorf("error %q, want one containing %q", got, tc.err)
			}
		})
	}
}

// diagText is the details of diags' errors, one a line.
func diagText(diags diag.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags.Errors() {
		b.WriteString(d.Detail() + "\n")
	}
	return b.String()
}
