package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

var (
	_ resource.Resource                   = (*listenerSetResource)(nil)
	_ resource.ResourceWithConfigure      = (*listenerSetResource)(nil)
	_ resource.ResourceWithImportState    = (*listenerSetResource)(nil)
	_ resource.ResourceWithValidateConfig = (*listenerSetResource)(nil)
)

// NewListenerSetResource is the varnishgw_listener_set resource.
func NewListenerSetResource() resource.Resource { return &listenerSetResource{} }

type listenerSetResource struct{ c *clients }

type listenerSetModel struct {
	ID                     types.String               `tfsdk:"id"`
	Namespace              types.String               `tfsdk:"namespace"`
	Name                   types.String               `tfsdk:"name"`
	ParentRef              *listenerSetParentModel    `tfsdk:"parent_ref"`
	Listeners              []listenerSetListenerModel `tfsdk:"listener"`
	WaitForRollout         types.Bool                 `tfsdk:"wait_for_rollout"`
	RolloutTimeout         types.String               `tfsdk:"rollout_timeout"`
	Conditions             types.List                 `tfsdk:"conditions"`
	ListenerConditions     types.Map                  `tfsdk:"listener_conditions"`
	ListenerAttachedRoutes types.Map                  `tfsdk:"listener_attached_routes"`
}

type listenerSetParentModel struct {
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
}

type listenerSetListenerModel struct {
	Name          types.String        `tfsdk:"name"`
	Port          types.Int64         `tfsdk:"port"`
	Protocol      types.String        `tfsdk:"protocol"`
	Hostname      types.String        `tfsdk:"hostname"`
	AllowedRoutes *allowedRoutesModel `tfsdk:"allowed_routes"`
	TLS           *listenerTLSModel   `tfsdk:"tls"`
}

func (r *listenerSetResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_listener_set"
}

func (r *listenerSetResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

func (r *listenerSetResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A Gateway API ListenerSet (GEP-1713): listeners added to a varnishgw gateway by another team or " +
			"configuration, served by the gateway's pods when the gateway's allowed_listeners block admits the " +
			"ListenerSet's namespace (a new port rolls them). Routes attach to it with a parent_ref of kind " +
			"ListenerSet; a listener that conflicts with the gateway's own or an older ListenerSet's (the same " +
			"port with another protocol, or the same port and hostname) is not served, and its conditions say " +
			"why. An HTTPS listener uses the certificates of Secrets in the ListenerSet's namespace (or, with a " +
			"ReferenceGrant from ListenerSets, another one), which the pods may then read by name.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The ListenerSet's namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"namespace": schema.StringAttribute{
				Required:      true,
				Description:   "The ListenerSet's namespace. Changing it replaces the ListenerSet.",
				Validators:    []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a DNS label (lower case letters, digits and '-')")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "The ListenerSet's name. Changing it replaces the ListenerSet.",
				Validators:    []validator.String{stringvalidator.RegexMatches(dnsSubdomain, "must be a DNS subdomain (lower case letters, digits, '-' and '.')")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"wait_for_rollout": schema.BoolAttribute{
				Optional:    true,
				Computed:    true,
				Default:     booldefault.StaticBool(true),
				Description: "Wait, after an apply that changes the gateway's ports, until the gateway's pods have rolled out (the default, true).",
			},
			"rollout_timeout": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("10m"),
				Description: "How long to wait for the gateway's rollout, a Go duration such as 10m (the default).",
				Validators:  []validator.String{durationValidator{}},
			},
			"conditions": schema.ListAttribute{
				Computed:    true,
				ElementType: conditionType,
				Description: "The ListenerSet's conditions: Accepted (False with NotAllowed when the gateway's allowed_listeners does not admit it, ListenersNotValid when none of its listeners is served) and Programmed.",
			},
			"listener_conditions": schema.MapAttribute{
				Computed:    true,
				ElementType: types.ListType{ElemType: conditionType},
				Description: "The conditions of each listener, by name: Accepted, Programmed, Conflicted (HostnameConflict or ProtocolConflict) and ResolvedRefs. " +
					"The ResolvedRefs condition of a served HTTPS listener is written by the gateway's pods, which keep it current as its certificate " +
					"Secrets and ReferenceGrants change; it is absent until they have written it.",
			},
			"listener_attached_routes": schema.MapAttribute{
				Computed:    true,
				ElementType: types.Int64Type,
				Description: "The number of routes attached to each listener, by name.",
			},
		},
		Blocks: map[string]schema.Block{
			"parent_ref": schema.SingleNestedBlock{
				Description: "The gateway (varnishgw_gateway) the listeners are added to; required.",
				Validators:  []validator.Object{objectvalidator.IsRequired()},
				Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{
						Optional:    true, // required with the block: its validator says so
						Description: "The gateway's name.",
						Validators:  []validator.String{stringvalidator.RegexMatches(dnsSubdomain, "must be a DNS subdomain (lower case letters, digits, '-' and '.')")},
					},
					"namespace": schema.StringAttribute{
						Optional:    true,
						Description: "The gateway's namespace; the ListenerSet's namespace when unset.",
						Validators:  []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a DNS label (lower case letters, digits and '-')")},
					},
				},
			},
			"listener": schema.ListNestedBlock{
				Description: "A listener added to the gateway; at least one, at most 64, names unique within the ListenerSet.",
				Validators:  []validator.List{listvalidator.IsRequired(), listvalidator.SizeBetween(1, 64)},
				NestedObject: schema.NestedBlockObject{
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{
							Required:    true,
							Description: "The listener's name, a DNS subdomain: what a route's parent_ref names in section_name.",
						},
						"port": schema.Int64Attribute{
							Required:    true,
							Description: "The port the listener accepts connections on, from 1 to 65535. A port the gateway does not listen on yet is added to its Service and to varnishd's listen addresses.",
							Validators:  portValidators,
						},
						"protocol": schema.StringAttribute{
							Optional:    true,
							Computed:    true,
							Default:     stringdefault.StaticString("HTTP"),
							Description: "The protocol: HTTP (the default) or HTTPS, which needs a tls block.",
							Validators:  []validator.String{stringvalidator.OneOf("HTTP", "HTTPS")},
						},
						"hostname": schema.StringAttribute{
							Optional:    true,
							Description: "The hostname the listener serves, such as app.example.com or *.example.com; every hostname when unset.",
						},
					},
					Blocks: map[string]schema.Block{
						"allowed_routes": allowedRoutesBlock("ListenerSet"),
						"tls":            listenerTLSBlock("ListenerSet"),
					},
				},
			},
		},
	}
}

// toListenerSet converts the model to the ListenerSet the provider applies.
func (m *listenerSetModel) toListenerSet() *gatewayv1.ListenerSet {
	ls := &gatewayv1.ListenerSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "ListenerSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString(), Labels: managedLabels},
	}
	group, kind := gatewayv1.Group(gatewayv1.GroupName), gatewayv1.Kind(gatewayKind)
	ls.Spec.ParentRef = gatewayv1.ParentGatewayReference{Group: &group, Kind: &kind}
	if p := m.ParentRef; p != nil {
		ls.Spec.ParentRef.Name = gatewayv1.ObjectName(p.Name.ValueString())
		ls.Spec.ParentRef.Namespace = strPtr[gatewayv1.Namespace](p.Namespace)
	}
	for _, l := range m.Listeners {
		e := gatewayv1.ListenerEntry{
			Name:     gatewayv1.SectionName(l.Name.ValueString()),
			Port:     gatewayv1.PortNumber(l.Port.ValueInt64()),
			Protocol: gatewayv1.ProtocolType(l.Protocol.ValueString()),
			Hostname: strPtr[gatewayv1.Hostname](l.Hostname),
		}
		if e.Protocol == "" {
			e.Protocol = gatewayv1.HTTPProtocolType
		}
		e.AllowedRoutes = l.AllowedRoutes.allowedRoutes()
		e.TLS = l.TLS.listenerTLS()
		ls.Spec.Listeners = append(ls.Spec.Listeners, e)
	}
	return ls
}

func (m *listenerSetModel) ref() object.Ref {
	return object.Ref{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}
}

// ValidateConfig checks the ListenerSet as the gateway's pods will serve
// it (routing.ValidateListenerSet), each error at the argument it is
// about.
func (r *listenerSetResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m listenerSetModel
	if d := req.Config.Get(ctx, &m); d.HasError() {
		return // unknown values: checked at apply
	}
	if m.ParentRef != nil && m.ParentRef.Name.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("parent_ref").AtName("name"), "Missing gateway name",
			"parent_ref needs name, the name of the gateway the listeners are added to.")
	}
	if !req.Config.Raw.IsFullyKnown() || m.ParentRef == nil {
		return
	}
	var s resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &s)
	for _, e := range routing.ValidateListenerSet(m.toListenerSet()) {
		if e.Field == "spec.listeners" || e.Field == "spec.parentRef.name" {
			continue // the block's validators say it
		}
		p, text := attributePath(ctx, s.Schema, e.Field)
		if text == "" {
			resp.Diagnostics.AddError("Invalid ListenerSet", e.Error())
			continue
		}
		resp.Diagnostics.AddAttributeError(diagnosticPath(req.Config.Raw, p), "Invalid ListenerSet", fmt.Sprintf("%s: %s", text, e.ErrorBody()))
	}
}

func (r *listenerSetResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan listenerSetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, "Create the ListenerSet", &resp.Diagnostics, func() { resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...) })
}

func (r *listenerSetResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan listenerSetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, "Update the ListenerSet", &resp.Diagnostics, func() { resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...) })
}

// apply writes the ListenerSet and its status, records the listeners the
// gateway serves in the Gateway's annotation for its pods, and brings the
// gateway's runtime (Service ports, varnishd's listen addresses) to the
// composed listeners.
func (r *listenerSetResource) apply(ctx context.Context, m *listenerSetModel, action string, diags interface {
	AddError(string, string)
	HasError() bool
}, setState func()) {
	fail := func(format string, a ...any) { diags.AddError(action, fmt.Sprintf(format, a...)) }
	timeout, err := time.ParseDuration(m.RolloutTimeout.ValueString())
	if err != nil {
		fail("rollout_timeout = %q: %v; use a Go duration such as 10m", m.RolloutTimeout.ValueString(), err)
		return
	}
	desired := m.toListenerSet()
	if errs := routing.ValidateListenerSet(desired); len(errs) > 0 {
		fail("%v", errs.ToAggregate())
		return
	}
	gwRef, _ := routing.ListenerSetParent(desired)
	gw, err := r.c.Gateway.GatewayV1().Gateways(gwRef.Namespace).Get(ctx, gwRef.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fail("Gateway %s, the ListenerSet's parent_ref, does not exist: create the gateway (varnishgw_gateway) first, "+
			"for example by referring to its name and namespace attributes in parent_ref.", gwRef)
		return
	}
	if err != nil {
		fail("get Gateway %s: %v", gwRef, err)
		return
	}
	gc, err := r.c.Gateway.GatewayV1().GatewayClasses().Get(ctx, string(gw.Spec.GatewayClassName), metav1.GetOptions{})
	if err != nil || gc.Spec.ControllerName != gwruntime.ControllerName {
		fail("Gateway %s is not served by varnishgw (its GatewayClass %q is not one of varnishgw_gateway_class's): "+
			"a varnishgw_listener_set adds listeners to a varnishgw gateway only.", gwRef, gw.Spec.GatewayClassName)
		return
	}
	live, err := r.c.ApplyListenerSet(ctx, desired)
	if err != nil {
		fail("%v", err)
		return
	}
	m.ID = types.StringValue(live.Namespace + "/" + live.Name)
	changed, err := r.c.refreshListenerSets(ctx, gw, live)
	if err != nil {
		fail("%v\nFix the cause and apply again: the ListenerSet is written.", err)
		return
	}
	if err := r.c.readListenerSetComputed(ctx, m, gw); err != nil {
		fail("%v", err)
		return
	}
	setState()
	if diags.HasError() {
		return
	}
	if changed && m.WaitForRollout.ValueBool() {
		if err := r.c.WaitRollout(ctx, gwRef, timeout); err != nil {
			diags.AddError("Wait for the gateway rollout", err.Error())
		}
	}
}

// readListenerSetComputed fills the computed attributes of m from the
// ListenerSet's status.
func (c *clients) readListenerSetComputed(ctx context.Context, m *listenerSetModel, gw *gatewayv1.Gateway) error {
	ls, err := c.Gateway.GatewayV1().ListenerSets(m.Namespace.ValueString()).Get(ctx, m.Name.ValueString(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get ListenerSet %s: %w", m.ref(), err)
	}
	conds := func(cs []metav1.Condition) types.List {
		out := []attr.Value{}
		for _, cd := range cs {
			out = append(out, types.ObjectValueMust(conditionType.AttrTypes, map[string]attr.Value{
				"type": types.StringValue(cd.Type), "status": types.StringValue(string(cd.Status)),
				"reason": types.StringValue(cd.Reason), "message": types.StringValue(cd.Message),
			}))
		}
		return types.ListValueMust(conditionType, out)
	}
	m.Conditions = conds(ls.Status.Conditions)
	lc, ar := map[string]attr.Value{}, map[string]attr.Value{}
	for _, l := range ls.Status.Listeners {
		lc[string(l.Name)] = conds(l.Conditions)
		ar[string(l.Name)] = types.Int64Value(int64(l.AttachedRoutes))
	}
	m.ListenerConditions = types.MapValueMust(types.ListType{ElemType: conditionType}, lc)
	m.ListenerAttachedRoutes = types.MapValueMust(types.Int64Type, ar)
	return nil
}

func (r *listenerSetResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state listenerSetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	ls, err := r.c.Gateway.GatewayV1().ListenerSets(state.Namespace.ValueString()).Get(ctx, state.Name.ValueString(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Read the ListenerSet", fmt.Sprintf("get ListenerSet %s: %v", state.ref(), err))
		return
	}
	state.readSpec(ls)
	if err := r.c.readListenerSetComputed(ctx, &state, nil); err != nil {
		resp.Diagnostics.AddError("Read the ListenerSet", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// readSpec refreshes the configured part of m from the live ListenerSet,
// so that a change made outside Terraform shows in the next plan.
func (m *listenerSetModel) readSpec(ls *gatewayv1.ListenerSet) {
	m.ID = types.StringValue(ls.Namespace + "/" + ls.Name)
	prior := m.ParentRef
	m.ParentRef = &listenerSetParentModel{Name: types.StringValue(string(ls.Spec.ParentRef.Name)), Namespace: types.StringNull()}
	if ns := ls.Spec.ParentRef.Namespace; ns != nil && (string(*ns) != ls.Namespace || (prior != nil && !prior.Namespace.IsNull())) {
		m.ParentRef.Namespace = types.StringValue(string(*ns))
	}
	was := map[string]listenerSetListenerModel{}
	for _, l := range m.Listeners {
		was[l.Name.ValueString()] = l
	}
	m.Listeners = []listenerSetListenerModel{}
	for _, e := range ls.Spec.Listeners {
		lm := listenerSetListenerModel{
			Name:     types.StringValue(string(e.Name)),
			Port:     types.Int64Value(int64(e.Port)),
			Protocol: types.StringValue(string(e.Protocol)),
			Hostname: types.StringNull(),
		}
		if e.Hostname != nil {
			lm.Hostname = types.StringValue(string(*e.Hostname))
		}
		lm.AllowedRoutes = readAllowedRoutes(was[string(e.Name)].AllowedRoutes, e.AllowedRoutes)
		lm.TLS = readListenerTLS(was[string(e.Name)].TLS, e.TLS)
		m.Listeners = append(m.Listeners, lm)
	}
	if m.WaitForRollout.IsNull() {
		m.WaitForRollout = types.BoolValue(true)
	}
	if m.RolloutTimeout.IsNull() {
		m.RolloutTimeout = types.StringValue("10m")
	}
}

func (r *listenerSetResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state listenerSetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	ls := state.toListenerSet()
	err := r.c.Gateway.GatewayV1().ListenerSets(ls.Namespace).Delete(ctx, ls.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		resp.Diagnostics.AddError("Delete the ListenerSet", fmt.Sprintf("delete ListenerSet %s/%s: %v", ls.Namespace, ls.Name, err))
		return
	}
	gwRef, _ := routing.ListenerSetParent(ls)
	gw, err := r.c.Gateway.GatewayV1().Gateways(gwRef.Namespace).Get(ctx, gwRef.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // the gateway went first: nothing serves the listeners
	}
	if err != nil {
		resp.Diagnostics.AddError("Delete the ListenerSet", fmt.Sprintf("get Gateway %s: %v", gwRef, err))
		return
	}
	// The gateway serves the listeners no more; its runtime drops their
	// ports.
	if _, err := r.c.refreshListenerSets(ctx, gw, nil); err != nil {
		resp.Diagnostics.AddError("Delete the ListenerSet", err.Error()+"\nApply the gateway again to bring its runtime up to date.")
	}
}

func (r *listenerSetResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || !dnsLabel.MatchString(ns) || !dnsSubdomain.MatchString(name) {
		resp.Diagnostics.AddError("Import the ListenerSet",
			fmt.Sprintf("the import ID %q is not namespace/name; import a ListenerSet by its namespace and name, for example: terraform import varnishgw_listener_set.team default/team", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
