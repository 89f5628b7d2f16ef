package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

var (
	_ resource.Resource                   = (*cacheInvalidationResource)(nil)
	_ resource.ResourceWithConfigure      = (*cacheInvalidationResource)(nil)
	_ resource.ResourceWithValidateConfig = (*cacheInvalidationResource)(nil)
)

// NewCacheInvalidationResource is the varnishgw_cache_invalidation resource.
func NewCacheInvalidationResource() resource.Resource { return &cacheInvalidationResource{} }

// cacheInvalidationResource issues one CacheInvalidation when it is
// created (or replaced) and waits until every Ready pod of the Gateway has
// applied it. Every attribute but the wait settings replaces it.
type cacheInvalidationResource struct{ c *clients }

// invalidationModel is what the resource and the varnishgw_cache_invalidate
// action share: the Gateway and the invalidation.
type invalidationModel struct {
	GatewayNamespace types.String `tfsdk:"gateway_namespace"`
	GatewayName      types.String `tfsdk:"gateway_name"`
	Purge            []purgeModel `tfsdk:"purge"`
	Ban              []banModel   `tfsdk:"ban"`
	Tags             types.List   `tfsdk:"tags"`
	WaitForApplied   types.Bool   `tfsdk:"wait_for_applied"`
	AppliedTimeout   types.String `tfsdk:"applied_timeout"`
}

type cacheInvalidationModel struct {
	invalidationModel
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	UID         types.String `tfsdk:"uid"`
	Triggers    types.Map    `tfsdk:"triggers"`
	AppliedPods types.List   `tfsdk:"applied_pods"`
}

type purgeModel struct {
	Host  types.String `tfsdk:"host"`
	Path  types.String `tfsdk:"path"`
	Query types.String `tfsdk:"query"`
}

type banModel struct {
	Host       types.String `tfsdk:"host"`
	PathPrefix types.String `tfsdk:"path_prefix"`
	PathRegex  types.String `tfsdk:"path_regex"`
}

func (r *cacheInvalidationResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cache_invalidation"
}

// invalidationAttributes are the Gateway, the tags and the wait settings,
// shared with the action; replace adds the plan modifier that makes a
// change replace the resource.
func invalidationDescriptions() (gwNS, gwName, tags, wait, timeout, purge, ban string) {
	return "The namespace of the Gateway whose cache is invalidated; the CacheInvalidation is created there.",
		"The name of the Gateway whose cache is invalidated (a Gateway of a varnishgw class).",
		"Tags: every object whose response listed one of these tags in the cache policy's tag header (Cache-Tag by default) is removed. Tags are compared exactly; they cannot contain white space.",
		"Whether to wait until every Ready, non-terminating pod of the Gateway has applied the invalidation " +
			"(its GatewayPodReport acknowledges it); a Gateway without Ready pods is not waited for. A pod that " +
			"refuses the invalidation fails the apply with its reason.",
		"How long to wait for the gateway pods' acknowledgements, a Go duration such as 1m.",
		"A URL whose cached objects are removed: host, path and, optionally, the query.",
		"A host plus a path prefix or a path regular expression (exactly one of them) whose cached objects are removed."
}

func (r *cacheInvalidationResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	gwNS, gwName, tags, wait, timeout, purge, ban := invalidationDescriptions()
	replaceString := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "Invalidates the cache of every pod of a gateway once, when it is created or replaced: purges URLs, " +
			"bans a host's paths by prefix or regular expression, and removes tagged objects, through a " +
			"CacheInvalidation object that each pod applies and acknowledges. Any change of its attributes but " +
			"the wait settings replaces it, which invalidates again: put what should trigger a new invalidation " +
			"in triggers. Destroying it deletes the CacheInvalidation and invalidates nothing.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The CacheInvalidation as namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Computed:      true,
				Description:   "The name of the CacheInvalidation: the Gateway's name followed by a generated suffix.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"uid": schema.StringAttribute{
				Computed:      true,
				Description:   "The UID of the CacheInvalidation, which the pods acknowledge.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"gateway_namespace": schema.StringAttribute{
				Required: true, Description: gwNS, PlanModifiers: replaceString,
				Validators: []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a namespace name (a DNS label)")},
			},
			"gateway_name": schema.StringAttribute{
				Required: true, Description: gwName, PlanModifiers: replaceString,
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.RegexMatches(dnsSubdomain, "must be a Gateway name (a lower-case DNS subdomain)"),
				},
			},
			"tags": schema.ListAttribute{
				Optional: true, ElementType: types.StringType, Description: tags,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				Validators:    []validator.List{listvalidator.SizeAtMost(vgwapi.MaxInvalidationItems)},
			},
			"triggers": schema.MapAttribute{
				Optional: true, ElementType: types.StringType,
				Description: "Arbitrary values that replace the resource, and so invalidate again, whenever one of them " +
					"changes (like terraform_data's triggers_replace): for example a release version or a content hash.",
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
			},
			"wait_for_applied": schema.BoolAttribute{
				Optional: true, Computed: true, Default: booldefault.StaticBool(true), Description: wait,
			},
			"applied_timeout": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("1m"), Description: timeout,
				Validators: []validator.String{durationValidator{}},
			},
			"applied_pods": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "The gateway pods that acknowledged the invalidation when it was created, sorted; empty " +
					"when wait_for_applied is false or the Gateway had no Ready pod.",
				PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()},
			},
		},
		Blocks: map[string]schema.Block{
			"purge": schema.ListNestedBlock{
				Description:   purge,
				Validators:    []validator.List{listvalidator.SizeAtMost(vgwapi.MaxInvalidationItems)},
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"host": schema.StringAttribute{Required: true, Description: "The request's host name in lower case, without port."},
					"path": schema.StringAttribute{Required: true, Description: "The path as clients send it (percent-encoded), without query."},
					"query": schema.StringAttribute{Optional: true, Description: "The query string, without '?', as the cache key holds it " +
						"(after the cache policy's query parameter lists): only that URL is removed. Unset, the path's objects are removed " +
						"whatever their query; \"\" removes the URL without query only."},
				}},
			},
			"ban": schema.ListNestedBlock{
				Description:   ban,
				Validators:    []validator.List{listvalidator.SizeAtMost(vgwapi.MaxInvalidationItems)},
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"host": schema.StringAttribute{Required: true, Description: "The request's host name in lower case, without port."},
					"path_prefix": schema.StringAttribute{Optional: true, Description: "Paths starting with this prefix (byte for byte) are removed.",
						Validators: []validator.String{stringvalidator.ExactlyOneOf(path.MatchRelative().AtParent().AtName("path_regex"))}},
					"path_regex": schema.StringAttribute{Optional: true, Description: "Paths matching this regular expression (PCRE2, in the " +
						"subset whose meaning Go and PCRE2 agree on, as for route matches) are removed. Expressions whose matching can " +
						"exceed PCRE2's limits in varnishd (a repeated group holding a quantifier or |, a group repeated without bound) " +
						"are refused: see the caching guide."},
				}},
			},
		},
	}
}

func (r *cacheInvalidationResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

// spec is m's invalidation; ok is false while a value is unknown.
func (m *invalidationModel) spec(ctx context.Context) (spec vgwapi.InvalidationSpec, ok bool, diags diag.Diagnostics) {
	spec.Gateway = m.GatewayName.ValueString()
	for _, p := range m.Purge {
		if p.Host.IsUnknown() || p.Path.IsUnknown() || p.Query.IsUnknown() {
			return spec, false, nil
		}
		vp := vgwapi.Purge{Host: p.Host.ValueString(), Path: p.Path.ValueString()}
		if !p.Query.IsNull() {
			q := p.Query.ValueString()
			vp.Query = &q
		}
		spec.Purges = append(spec.Purges, vp)
	}
	for _, b := range m.Ban {
		if b.Host.IsUnknown() || b.PathPrefix.IsUnknown() || b.PathRegex.IsUnknown() {
			return spec, false, nil
		}
		spec.Bans = append(spec.Bans, vgwapi.Ban{Host: b.Host.ValueString(), PathPrefix: b.PathPrefix.ValueString(), PathRegex: b.PathRegex.ValueString()})
	}
	if m.Tags.IsUnknown() || m.GatewayName.IsUnknown() {
		return spec, false, nil
	}
	if !m.Tags.IsNull() {
		var tags []types.String
		diags.Append(m.Tags.ElementsAs(ctx, &tags, false)...)
		for _, t := range tags {
			if t.IsUnknown() {
				return spec, false, diags
			}
			spec.Tags = append(spec.Tags, t.ValueString())
		}
	}
	return spec, true, diags
}

// tfFieldNames turns the CacheInvalidation field names of vgwapi's errors
// into the Terraform configuration's.
var tfFieldNames = strings.NewReplacer("purges[", "purge[", "bans[", "ban[", "pathPrefix", "path_prefix", "pathRegex", "path_regex",
	"give at least one purge URL, ban or tag", "give at least one purge block, ban block or tag")

// validate checks m's invalidation as the CRD and the pods will, with an
// error per problem naming the block, the value and the fix.
func (m *invalidationModel) validate(ctx context.Context, diags *diag.Diagnostics) {
	spec, ok, d := m.spec(ctx)
	diags.Append(d...)
	if !ok {
		return
	}
	if spec.Gateway == "" {
		spec.Gateway = "x" // gateway_name has its own validators
	}
	err := vgwapi.ValidateInvalidation(&spec)
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		msg := tfFieldNames.Replace(line)
		root := "tags"
		switch {
		case strings.HasPrefix(msg, "purge"):
			root = "purge"
		case strings.HasPrefix(msg, "ban"):
			root = "ban"
		case strings.HasPrefix(msg, "nothing to invalidate"):
			diags.AddError("Invalid cache invalidation", msg)
			continue
		}
		diags.AddAttributeError(path.Root(root), "Invalid cache invalidation", msg)
	}
}

func (r *cacheInvalidationResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m cacheInvalidationModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.validate(ctx, &resp.Diagnostics)
}

// invalidated is what invalidate did.
// invalidate creates the CacheInvalidation of m and, when m says so, waits
// for the acknowledgements of the Gateway's Ready pods (control.Invalidate).
func (c *clients) invalidate(ctx context.Context, m *invalidationModel) (*control.Invalidated, error) {
	spec, ok, diags := m.spec(ctx)
	if diags.HasError() || !ok {
		return nil, errors.New("the invalidation has unknown values")
	}
	gw := object.Ref{Namespace: m.GatewayNamespace.ValueString(), Name: m.GatewayName.ValueString()}
	// Null in the action, whose attributes have no defaults.
	wait := m.WaitForApplied.IsNull() || m.WaitForApplied.ValueBool()
	timeout := time.Minute
	if !m.AppliedTimeout.IsNull() {
		timeout, _ = time.ParseDuration(m.AppliedTimeout.ValueString())
	}
	return c.Invalidate(ctx, gw, spec, wait, timeout)
}

func (r *cacheInvalidationResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan cacheInvalidationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	done, err := r.c.invalidate(ctx, &plan.invalidationModel)
	if done != nil {
		// Saved even when the wait failed: Terraform then marks it
		// tainted, and the next apply invalidates again.
		plan.Name = types.StringValue(done.Name)
		plan.UID = types.StringValue(done.UID)
		plan.ID = types.StringValue(plan.GatewayNamespace.ValueString() + "/" + done.Name)
		plan.AppliedPods = stringListValue(done.Applied)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
	if err != nil {
		resp.Diagnostics.AddError("Invalidate the gateway's cache", err.Error())
	}
}

func (r *cacheInvalidationResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state cacheInvalidationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	obj, err := r.c.Dynamic.Resource(vgwapi.CacheInvalidations).Namespace(state.GatewayNamespace.ValueString()).Get(ctx, state.Name.ValueString(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Deleted outside Terraform: the next apply invalidates again.
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		resp.Diagnostics.AddError("Read the cache invalidation", fmt.Sprintf("read the CacheInvalidation %s: %v", state.ID.ValueString(), err))
		return
	case string(obj.GetUID()) != state.UID.ValueString():
		// Another object of the same name: this one is gone.
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update only changes the wait settings (everything else replaces).
func (r *cacheInvalidationResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state cacheInvalidationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	state.WaitForApplied, state.AppliedTimeout = plan.WaitForApplied, plan.AppliedTimeout
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *cacheInvalidationResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state cacheInvalidationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	err := r.c.Dynamic.Resource(vgwapi.CacheInvalidations).Namespace(state.GatewayNamespace.ValueString()).Delete(ctx, state.Name.ValueString(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		resp.Diagnostics.AddError("Delete the cache invalidation", fmt.Sprintf("delete the CacheInvalidation %s: %v", state.ID.ValueString(), err))
	}
}
