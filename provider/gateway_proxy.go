package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// proxySourcesAttribute is proxy_protocol_sources: the CIDRs of the load
// balancers that may send the PROXY protocol (mainvcl.Options.ProxySources).
func proxySourcesAttribute() schema.SetAttribute {
	return schema.SetAttribute{
		Optional:    true,
		ElementType: types.StringType,
		Description: "The load balancers that send the PROXY protocol, as CIDRs in canonical form (for example " +
			"[\"10.0.0.0/24\"], a single address as /32 or /128); required with proxy_protocol = true and used only " +
			"with it. On HTTP listeners varnishd honours a PROXY header only from these peers and answers any " +
			"other 403; on HTTPS listeners hitch cannot restrict its peers, and a NetworkPolicy that admits only " +
			"these CIDRs to the listener ports is the control (see the HTTPS guide). The list is in main.vcl, " +
			"which the pods reload: changing it rolls no pods.",
		Validators: []validator.Set{
			setvalidator.SizeAtLeast(1),
			setvalidator.ValueStringsAre(cidrValidator{}),
		},
	}
}

// cidrValidator accepts a CIDR in canonical form (what netip.Prefix
// prints): the ACL main.vcl renders then reads back the same.
type cidrValidator struct{}

func (cidrValidator) Description(context.Context) string {
	return "must be a CIDR in canonical form, for example 10.0.0.0/24"
}

func (v cidrValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (cidrValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid PROXY protocol source",
			fmt.Sprintf("proxy_protocol_sources: %q is not a CIDR (%v); write an address and prefix length, for example "+
				"\"10.0.0.0/24\", or \"192.0.2.10/32\" for one address.", s, err))
		return
	}
	if c := p.Masked().String(); c != s {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid PROXY protocol source",
			fmt.Sprintf("proxy_protocol_sources: %q is not in canonical form (host bits set, or another spelling of the "+
				"address); write %q.", s, c))
	}
}

// validateProxyProtocol: proxy_protocol_sources is required with
// proxy_protocol = true, and used only with it.
func (m *gatewayModel) validateProxyProtocol(diags *diag.Diagnostics) {
	if m.ProxyProtocol.IsUnknown() || m.ProxyProtocolSources.IsUnknown() {
		return
	}
	on, listed := m.ProxyProtocol.ValueBool(), !m.ProxyProtocolSources.IsNull()
	switch {
	case on && !listed:
		diags.AddAttributeError(path.Root("proxy_protocol_sources"), "Missing PROXY protocol sources",
			"proxy_protocol = true needs proxy_protocol_sources: list the load balancer's addresses as CIDRs, for example "+
				"proxy_protocol_sources = [\"10.0.0.0/24\"]. The gateway honours a PROXY header, and the client address it "+
				"claims, only from those peers; without the list anyone who reaches the pods could claim any client address.")
	case !on && listed:
		diags.AddAttributeError(path.Root("proxy_protocol_sources"), "PROXY protocol sources without the PROXY protocol",
			fmt.Sprintf("proxy_protocol_sources is used only with proxy_protocol = true (proxy_protocol is %s): set "+
				"proxy_protocol = true or remove proxy_protocol_sources.", boolOrUnset(m.ProxyProtocol)))
	}
}

func boolOrUnset(b types.Bool) string {
	if b.IsNull() {
		return "unset"
	}
	return fmt.Sprint(b.ValueBool())
}

// proxySources are the model's proxy_protocol_sources (validated).
func (m *gatewayModel) proxySources() []netip.Prefix {
	var out []netip.Prefix
	for _, v := range m.ProxyProtocolSources.Elements() {
		if s, ok := v.(types.String); ok {
			if p, err := netip.ParsePrefix(s.ValueString()); err == nil {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return out
}

// proxySourcesValue is proxy_protocol_sources as main.vcl has them; null
// without.
func proxySourcesValue(ps []netip.Prefix) types.Set {
	if len(ps) == 0 {
		return types.SetNull(types.StringType)
	}
	var vs []attr.Value
	for _, p := range ps {
		vs = append(vs, types.StringValue(p.String()))
	}
	return types.SetValueMust(types.StringType, vs)
}
