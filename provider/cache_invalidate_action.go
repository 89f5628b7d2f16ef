package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

var (
	_ action.Action                   = (*cacheInvalidateAction)(nil)
	_ action.ActionWithConfigure      = (*cacheInvalidateAction)(nil)
	_ action.ActionWithValidateConfig = (*cacheInvalidateAction)(nil)
)

// NewCacheInvalidateAction is the varnishgw_cache_invalidate action
// (Terraform 1.14 and later): the invalidation of
// varnishgw_cache_invalidation, run on demand (terraform apply
// -invoke=action.varnishgw_cache_invalidate.NAME) or from a resource's
// action_trigger, with no state.
func NewCacheInvalidateAction() action.Action { return &cacheInvalidateAction{} }

type cacheInvalidateAction struct{ c *clients }

func (a *cacheInvalidateAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cache_invalidate"
}

func (a *cacheInvalidateAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	gwNS, gwName, tags, wait, timeout, purge, ban := invalidationDescriptions()
	resp.Schema = schema.Schema{
		Description: "Invalidates the cache of every pod of a gateway each time it is invoked (Terraform 1.14 and later): " +
			"the same purges, bans and tags as the varnishgw_cache_invalidation resource, without state. It creates a " +
			"CacheInvalidation, waits until every Ready pod of the gateway has applied it and then deletes it; after a " +
			"timeout the object stays, so that the late pods still apply it.",
		Attributes: map[string]schema.Attribute{
			"gateway_namespace": schema.StringAttribute{
				Required: true, Description: gwNS,
				Validators: []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a namespace name (a DNS label)")},
			},
			"gateway_name": schema.StringAttribute{
				Required: true, Description: gwName,
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.RegexMatches(dnsSubdomain, "must be a Gateway name (a lower-case DNS subdomain)"),
				},
			},
			"tags": schema.ListAttribute{
				Optional: true, ElementType: types.StringType, Description: tags,
				Validators: []validator.List{listvalidator.SizeAtMost(vgwapi.MaxInvalidationItems)},
			},
			"wait_for_applied": schema.BoolAttribute{Optional: true, Description: wait + " Defaults to true."},
			"applied_timeout": schema.StringAttribute{
				Optional: true, Description: timeout + " Defaults to 1m.",
				Validators: []validator.String{durationValidator{}},
			},
		},
		Blocks: map[string]schema.Block{
			"purge": schema.ListNestedBlock{
				Description: purge,
				Validators:  []validator.List{listvalidator.SizeAtMost(vgwapi.MaxInvalidationItems)},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"host":  schema.StringAttribute{Required: true, Description: "The request's host name in lower case, without port."},
					"path":  schema.StringAttribute{Required: true, Description: "The path as clients send it (percent-encoded), without query."},
					"query": schema.StringAttribute{Optional: true, Description: "The query string, without '?', as the cache key holds it: only that URL is removed. Unset, every query of the path is."},
				}},
			},
			"ban": schema.ListNestedBlock{
				Description: ban,
				Validators:  []validator.List{listvalidator.SizeAtMost(vgwapi.MaxInvalidationItems)},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"host": schema.StringAttribute{Required: true, Description: "The request's host name in lower case, without port."},
					"path_prefix": schema.StringAttribute{Optional: true, Description: "Paths starting with this prefix (byte for byte) are removed.",
						Validators: []validator.String{stringvalidator.ExactlyOneOf(path.MatchRelative().AtParent().AtName("path_regex"))}},
					"path_regex": schema.StringAttribute{Optional: true, Description: "Paths matching this regular expression (PCRE2, in the subset whose meaning Go and PCRE2 agree on) are removed. " +
						"Expressions whose matching can exceed PCRE2's limits in varnishd (a repeated group holding a quantifier or |, " +
						"a group repeated without bound) are refused: see the caching guide."},
				}},
			},
		},
	}
}

func (a *cacheInvalidateAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

func (a *cacheInvalidateAction) ValidateConfig(ctx context.Context, req action.ValidateConfigRequest, resp *action.ValidateConfigResponse) {
	var m invalidationModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.validate(ctx, &resp.Diagnostics)
}

func (a *cacheInvalidateAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m invalidationModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !requireClients(a.c, &resp.Diagnostics) {
		return
	}
	done, err := a.c.invalidate(ctx, &m)
	if err != nil {
		resp.Diagnostics.AddError("Invalidate the gateway's cache", err.Error())
		return
	}
	msg := fmt.Sprintf("CacheInvalidation %s/%s applied by %d gateway pod(s)", m.GatewayNamespace.ValueString(), done.Name, len(done.Applied))
	if len(done.Applied) > 0 {
		msg += ": " + strings.Join(done.Applied, ", ")
	}
	if resp.SendProgress != nil {
		resp.SendProgress(action.InvokeProgressEvent{Message: msg})
	}
	if m.WaitForApplied.IsNull() || m.WaitForApplied.ValueBool() {
		// Applied everywhere: nothing needs the object any more (a pod
		// started later has nothing older in its cache).
		err := a.c.Dynamic.Resource(vgwapi.CacheInvalidations).Namespace(m.GatewayNamespace.ValueString()).Delete(ctx, done.Name, metav1.DeleteOptions{})
		if err != nil {
			resp.Diagnostics.AddWarning("Delete the applied cache invalidation",
				fmt.Sprintf("The invalidation was applied, but the CacheInvalidation %s/%s could not be deleted: %v. Delete it with kubectl.", m.GatewayNamespace.ValueString(), done.Name, err))
		}
	}
}
