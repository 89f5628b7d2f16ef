package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"

	"github.com/hashicorp/terraform-plugin-framework/attr"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

var (
	_ resource.Resource                   = (*gatewayClassResource)(nil)
	_ resource.ResourceWithConfigure      = (*gatewayClassResource)(nil)
	_ resource.ResourceWithImportState    = (*gatewayClassResource)(nil)
	_ resource.ResourceWithValidateConfig = (*gatewayClassResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*gatewayClassResource)(nil)
)

// NewGatewayClassResource is the varnishgw_gateway_class resource.
func NewGatewayClassResource() resource.Resource { return &gatewayClassResource{} }

type gatewayClassResource struct{ c *clients }

type gatewayClassModel struct {
	ID                  types.String `tfsdk:"id"`
	Name                types.String `tfsdk:"name"`
	Description         types.String `tfsdk:"description"`
	ParametersNamespace types.String `tfsdk:"parameters_namespace"`
	Image               types.String `tfsdk:"image"`
	ImagePullPolicy     types.String `tfsdk:"image_pull_policy"`
	Storage             types.String `tfsdk:"storage"`
	VarnishdParams      types.Map    `tfsdk:"varnishd_params"`
	VCL                 types.String `tfsdk:"vcl"`
	LogLevel            types.String `tfsdk:"log_level"`
	AccessLog           types.Bool   `tfsdk:"access_log"`
	ExternalNames       types.Bool   `tfsdk:"external_name_services"`
	ControllerName      types.String `tfsdk:"controller_name"`
}

func (r *gatewayClassResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_gateway_class"
}

func (r *gatewayClassResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A Gateway API GatewayClass served by varnishgw, with the defaults its gateways inherit: " +
			"the container image, varnishd storage and parameters, user VCL, log level and access log. The defaults are " +
			"stored in a ConfigMap that the GatewayClass names as its parametersRef. The provider sets the " +
			"class's Accepted condition and its status.supportedFeatures: the Gateway API features that the " +
			"conformance suite's scenarios prove when replayed through the gateway (the conformance guide).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The GatewayClass name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "The GatewayClass name, a DNS subdomain. Changing it replaces the class.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.RegexMatches(dnsSubdomain, "must be a lower-case DNS subdomain, for example varnish"),
				},
			},
			"description": schema.StringAttribute{
				Optional:    true,
				Description: "A human-readable description of the class (spec.description).",
				Validators:  []validator.String{stringvalidator.LengthAtMost(64)},
			},
			"parameters_namespace": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString("default"),
				Description:   "The namespace of the ConfigMap that holds the class defaults. It must exist. Changing it replaces the class.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a namespace name (a DNS label)")},
			},
			"image": schema.StringAttribute{
				Required: true,
				Description: "The container image of the gateway pods (the chaperone, varnishd and the ghost VMOD), " +
					"as the kubelet pulls it, for example registry.example.com/varnishgw/gateway:1.4.0. No image is " +
					"published: make image builds one (localhost/varnishgw/gateway:VERSION) to push to a registry the " +
					"cluster pulls from or to import into the nodes. Give every build its own tag or a digest: a changed " +
					"image rolls the gateways' pods, a new build under the same name does not.",
				Validators: []validator.String{imageValidator{}},
			},
			"image_pull_policy": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(gwruntime.DefaultImagePullPolicy),
				Description: "When the kubelet pulls the image (the containers' imagePullPolicy): IfNotPresent (the " +
					"default) pulls an image the node lacks, which suits both pushed images with a tag per build and images " +
					"imported into the nodes; Always asks the registry at every pod start; Never only uses images already " +
					"on the node. Changing it rolls the gateways' pods.",
				Validators: []validator.String{stringvalidator.OneOf(string(corev1.PullIfNotPresent), string(corev1.PullAlways), string(corev1.PullNever))},
			},
			"storage": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(gwruntime.DefaultStorage),
				Description: "The varnishd storage specification (-s), for example malloc,1g.",
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"varnishd_params": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "varnishd run-time parameters (-p name=value), for example { thread_pool_min = \"50\" }. A " +
					"parameter named here replaces the gateway's default of the same name: thread_pools = \"1\", and a " +
					"vsl_mask that leaves out of varnishd's shared memory log what the access log does not read (the " +
					"backend request and response, the response headers); { vsl_mask = \"default\" } logs everything " +
					"varnishd logs by default, for example to debug with varnishlog.",
				Validators: []validator.Map{paramNamesValidator{}},
			},
			"vcl": schema.StringAttribute{
				Optional: true,
				Description: "User VCL added after the ghost preamble of every gateway of the class. Its vcl_recv runs " +
					"for routed requests after ghost's routing and may return (hash) to cache responses; without that, " +
					"gateways pass every request to the backends.",
			},
			"log_level": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("info"),
				Description: "The chaperone's log level: debug, info, warn or error.",
				Validators:  []validator.String{stringvalidator.OneOf("debug", "info", "warn", "error")},
			},
			"access_log": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
				Description: "Whether the gateway pods write an access log: one JSON line per client request on the " +
					"chaperone container's standard output (the container log), with the time, the request ID (the " +
					"client's X-Request-Id when well formed, else one made for the request and sent to the backend), " +
					"the client, method, host, URL, status, bytes, duration, time to first byte, and the route, backend " +
					"and endpoint that served it; written by a varnishncsa that the chaperone runs. Off by default. " +
					"Changing it rolls the gateways' pods.",
			},
			"external_name_services": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
				Description: "Whether routes attached to the class's gateways may send traffic to Services of type ExternalName, " +
					"at the addresses the gateway pods resolve the Service's DNS name to (loopback and link-local " +
					"addresses are always refused); false by default, when such references get ResolvedRefs=False " +
					"(BackendNotFound) and answer 500. Turning it on lets anyone who may create Services in a namespace " +
					"that a route reaches send the gateway's traffic, with the clients' headers, wherever DNS points: " +
					"read the ExternalName Services guide first. Changing it rolls the gateways' pods.",
			},
			"controller_name": schema.StringAttribute{
				Computed:      true,
				Description:   "The class's controllerName, " + gwruntime.ControllerName + ".",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
	}
}

// ValidateConfig warns about an image whose tag does not name one build.
func (r *gatewayClassResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var image, policy types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("image"), &image)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("image_pull_policy"), &policy)...)
	if resp.Diagnostics.HasError() || image.IsNull() || image.IsUnknown() || policy.IsUnknown() {
		return
	}
	p := gwruntime.DefaultImagePullPolicy
	if !policy.IsNull() {
		p = policy.ValueString()
	}
	if w := imageTagWarning(image.ValueString(), p); w != "" {
		resp.Diagnostics.AddAttributeWarning(path.Root("image"), "Gateway image without a version tag", w)
	}
}

// ModifyPlan records, for the plans of the class's gateways, which
// attributes that their pods or main.vcl are made from change (see
// classChanges): the gateways are then updated in the same apply.
func (r *gatewayClassResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.c == nil || req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var state, plan gatewayClassModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !plan.Name.Equal(state.Name) {
		return // a new name is a new class: its gateways' gateway_class_name changes
	}
	var changed []string
	for _, a := range []struct {
		name        string
		old, future attr.Value
	}{
		{"image", state.Image, plan.Image},
		{"image_pull_policy", state.ImagePullPolicy, plan.ImagePullPolicy},
		{"storage", state.Storage, plan.Storage},
		{"varnishd_params", state.VarnishdParams, plan.VarnishdParams},
		{"vcl", state.VCL, plan.VCL},
		{"log_level", state.LogLevel, plan.LogLevel},
		{"access_log", state.AccessLog, plan.AccessLog},
		{"external_name_services", state.ExternalNames, plan.ExternalNames},
		{"parameters_namespace", state.ParametersNamespace, plan.ParametersNamespace},
	} {
		if !a.old.Equal(a.future) {
			changed = append(changed, a.name)
		}
	}
	if len(changed) > 0 {
		r.c.classChanges.note(plan.Name.ValueString(), changed)
	}
}

func (r *gatewayClassResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

func (r *gatewayClassResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan gatewayClassModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	if err := r.apply(ctx, &plan); err != nil {
		resp.Diagnostics.AddError("Create the gateway class", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *gatewayClassResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan gatewayClassModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	if err := r.apply(ctx, &plan); err != nil {
		resp.Diagnostics.AddError("Update the gateway class", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// apply writes the parameters ConfigMap, the GatewayClass and its status.
func (r *gatewayClassResource) apply(ctx context.Context, m *gatewayClassModel) error {
	name, ns := m.Name.ValueString(), m.ParametersNamespace.ValueString()
	params := map[string]string{}
	if !m.VarnishdParams.IsNull() {
		for k, v := range m.VarnishdParams.Elements() {
			params[k] = v.(types.String).ValueString()
		}
	}
	paramsJSON, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode varnishd_params: %w", err)
	}
	data := map[string]string{
		gwruntime.ClassKeyImage:           m.Image.ValueString(),
		gwruntime.ClassKeyImagePullPolicy: m.ImagePullPolicy.ValueString(),
		gwruntime.ClassKeyStorage:         m.Storage.ValueString(),
		gwruntime.ClassKeyParams:          string(paramsJSON),
		gwruntime.ClassKeyLogLevel:        m.LogLevel.ValueString(),
		gwruntime.ClassKeyAccessLog:       strconv.FormatBool(m.AccessLog.ValueBool()),
		gwruntime.ClassKeyExternalNames:   strconv.FormatBool(m.ExternalNames.ValueBool()),
	}
	if !m.VCL.IsNull() {
		data[gwruntime.ClassKeyVCL] = m.VCL.ValueString()
	}
	if err := r.c.ApplyGatewayClass(ctx, name, m.Description.ValueStringPointer(), ns, data); err != nil {
		return err
	}

	m.ID = types.StringValue(name)
	m.ControllerName = types.StringValue(gwruntime.ControllerName)
	return nil
}

func (r *gatewayClassResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state gatewayClassModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	name := state.ID.ValueString()
	if name == "" {
		name = state.Name.ValueString()
	}
	gc, data, err := r.c.ReadGatewayClass(ctx, name)
	if apierrors.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Read the gateway class", err.Error())
		return
	}
	state.ID = types.StringValue(gc.Name)
	state.Name = types.StringValue(gc.Name)
	state.ControllerName = types.StringValue(string(gc.Spec.ControllerName))
	state.Description = types.StringPointerValue(gc.Spec.Description)
	if data == nil {
		// Someone removed or changed the reference: show it as a change.
		state.ParametersNamespace = types.StringNull()
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		return
	}
	state.ParametersNamespace = types.StringValue(string(*gc.Spec.ParametersRef.Namespace))
	resp.Diagnostics.Append(state.readParameters(ctx, data)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (m *gatewayClassModel) readParameters(ctx context.Context, data map[string]string) (diags diag.Diagnostics) {
	str := func(key string) types.String {
		if v, ok := data[key]; ok {
			return types.StringValue(v)
		}
		return types.StringNull()
	}
	m.Image = str(gwruntime.ClassKeyImage)
	m.ImagePullPolicy = str(gwruntime.ClassKeyImagePullPolicy)
	m.Storage = str(gwruntime.ClassKeyStorage)
	m.VCL = str(gwruntime.ClassKeyVCL)
	m.LogLevel = str(gwruntime.ClassKeyLogLevel)
	m.AccessLog = types.BoolValue(false)
	if v, ok := data[gwruntime.ClassKeyAccessLog]; ok {
		m.AccessLog = types.BoolValue(v == "true")
	}
	m.ExternalNames = types.BoolValue(data[gwruntime.ClassKeyExternalNames] == "true")

	params := map[string]string{}
	if raw, ok := data[gwruntime.ClassKeyParams]; ok {
		if err := json.Unmarshal([]byte(raw), &params); err != nil {
			diags.AddWarning("Read the gateway class", fmt.Sprintf("the ConfigMap key %s is not a JSON object of strings (%v); the next apply rewrites it", gwruntime.ClassKeyParams, err))
		}
	}
	if len(params) == 0 && m.VarnishdParams.IsNull() {
		return diags
	}
	v, d := types.MapValueFrom(ctx, types.StringType, params)
	diags.Append(d...)
	m.VarnishdParams = v
	return diags
}

func (r *gatewayClassResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state gatewayClassModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	if err := r.c.DeleteGatewayClass(ctx, state.Name.ValueString(), state.ParametersNamespace.ValueString()); err != nil {
		resp.Diagnostics.AddError("Delete the gateway class", err.Error())
	}
}

func (r *gatewayClassResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !dnsSubdomain.MatchString(req.ID) {
		resp.Diagnostics.AddError("Import the gateway class",
			fmt.Sprintf("the import ID %q is not a GatewayClass name; GatewayClasses are cluster-scoped, import them by name, for example: terraform import varnishgw_gateway_class.main varnish", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

// paramNamesValidator checks varnishd parameter names.
type paramNamesValidator struct{}

func (paramNamesValidator) Description(context.Context) string {
	return "parameter names are lower-case varnishd parameter names such as thread_pool_min"
}
func (v paramNamesValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (paramNamesValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(req.ConfigValue.Elements())) {
		if !gwruntime.ParamName.MatchString(k) {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid varnishd parameter name",
				fmt.Sprintf("%q is not a varnishd parameter name; use the name varnishd -x parameter lists, for example thread_pool_min", k))
		}
	}
}
