package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

var (
	_ resource.Resource                   = (*httpRouteResource)(nil)
	_ resource.ResourceWithConfigure      = (*httpRouteResource)(nil)
	_ resource.ResourceWithImportState    = (*httpRouteResource)(nil)
	_ resource.ResourceWithValidateConfig = (*httpRouteResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*httpRouteResource)(nil)
)

// NewHTTPRouteResource is the varnishgw_http_route resource.
func NewHTTPRouteResource() resource.Resource { return &httpRouteResource{} }

type httpRouteResource struct{ c *clients }

func (r *httpRouteResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_http_route"
}

var portValidators = []validator.Int64{int64validator.Between(1, 65535)}

func headerListAttribute(desc string) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional:    true,
		Description: desc,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":  schema.StringAttribute{Required: true, Description: "The header name, case-insensitive."},
			"value": schema.StringAttribute{Required: true, Description: "The header value."},
		}},
	}
}

func headerModifierAttribute(desc string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:    true,
		Description: desc,
		Attributes: map[string]schema.Attribute{
			"set": headerListAttribute("Headers to set, replacing any value the message has."),
			"add": headerListAttribute("Headers to add, appending to any value the message has."),
			"remove": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Names of headers to remove.",
			},
		},
	}
}

func pathModifierAttribute(desc string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:    true,
		Description: desc,
		Attributes: map[string]schema.Attribute{
			"type": schema.StringAttribute{
				Required:    true,
				Description: "ReplaceFullPath or ReplacePrefixMatch.",
				Validators:  []validator.String{stringvalidator.OneOf("ReplaceFullPath", "ReplacePrefixMatch")},
			},
			"replace_full_path": schema.StringAttribute{
				Optional:    true,
				Description: "The path that replaces the whole request path, with type ReplaceFullPath.",
			},
			"replace_prefix_match": schema.StringAttribute{
				Optional: true,
				Description: "The prefix that replaces the matched PathPrefix, with type ReplacePrefixMatch. The rule " +
					"must then have exactly one match, a PathPrefix.",
			},
		},
	}
}

func valueMatchAttribute(desc, what string) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional:    true,
		Description: desc,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"type": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("Exact"),
				Description: "Exact (the default) or RegularExpression.",
			},
			"name":  schema.StringAttribute{Required: true, Description: "The " + what + " name."},
			"value": schema.StringAttribute{Required: true, Description: "The value, or the regular expression, to match."},
		}},
	}
}

func (r *httpRouteResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A Gateway API HTTPRoute attached to varnishgw Gateways. The attributes mirror the HTTPRoute spec " +
			"in snake_case. The provider validates the route at plan time as the gateways will apply it, writes the " +
			"HTTPRoute with its status (Accepted, ResolvedRefs) for every parent Gateway whose GatewayClass is served " +
			"by varnishgw, and stores what the route contributes to each such Gateway in a RoutingFragment (varnishgw.dev) " +
			"in the Gateway's namespace, which the gateway pods load; by default it waits until they serve it. In every namespace its backends live in, it writes a " +
			"RoleBinding that lets the pods of each such Gateway that accepts the route read Services, EndpointSlices and " +
			"ReferenceGrants there, and removes it when no longer needed. The computed routing attribute shows that " +
			"contribution in the plan.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "The route's namespace/name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"namespace": schema.StringAttribute{
				Required:      true,
				Description:   "The namespace of the HTTPRoute. It must exist. Changing it replaces the route.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a namespace name (a DNS label)")},
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "The name of the HTTPRoute, a DNS subdomain. Changing it replaces the route.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{
					stringvalidator.LengthBetween(1, 253),
					stringvalidator.RegexMatches(dnsSubdomain, "must be a lower-case DNS subdomain, for example web"),
				},
			},
			"parent_refs": schema.ListNestedAttribute{
				Required: true,
				Description: "The Gateways the route attaches to. Only Gateways whose GatewayClass has the controllerName " +
					ControllerName + " get a status entry and a routing fragment from the provider.",
				Validators: []validator.List{listvalidator.SizeBetween(1, 32)},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, Description: "The Gateway name."},
					"namespace": schema.StringAttribute{
						Optional:    true,
						Description: "The Gateway namespace; the route's namespace when unset.",
					},
					"section_name": schema.StringAttribute{
						Optional:    true,
						Description: "The name of the one listener to attach to; all listeners that allow the route when unset.",
					},
					"port": schema.Int64Attribute{
						Optional:    true,
						Description: "Attach only to listeners on this port.",
						Validators:  portValidators,
					},
				}},
			},
			"hostnames": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Hostnames the route serves, such as www.example.com or *.example.com. They are intersected with the listeners' hostnames; unset means the listeners' hostnames.",
			},
			"rules": schema.ListNestedAttribute{
				Optional:    true,
				Description: "The routing rules. A request is served by the most specific matching rule across the Gateway's routes (Gateway API precedence).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Optional: true, Description: "The rule name, a DNS label."},
					"matches": schema.ListNestedAttribute{
						Optional:    true,
						Description: "The conditions of which any one selects the rule; every request when unset (PathPrefix /).",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"path": schema.SingleNestedAttribute{
								Optional:    true,
								Description: "The path match.",
								Attributes: map[string]schema.Attribute{
									"type": schema.StringAttribute{
										Optional:    true,
										Computed:    true,
										Default:     stringdefault.StaticString("PathPrefix"),
										Description: "PathPrefix (the default), Exact or RegularExpression.",
									},
									"value": schema.StringAttribute{Required: true, Description: "The path, prefix or regular expression."},
								},
							},
							"headers":      valueMatchAttribute("Header matches, all of which must match.", "header"),
							"query_params": valueMatchAttribute("Query parameter matches, all of which must match.", "query parameter"),
							"method": schema.StringAttribute{
								Optional:    true,
								Description: "The HTTP method to match, for example GET.",
							},
						}},
					},
					"filters": schema.ListNestedAttribute{
						Optional:    true,
						Description: "Filters applied to requests the rule selects, in order.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"type": schema.StringAttribute{
								Required:    true,
								Description: "RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite or RequestMirror; set the attribute of the same name.",
							},
							"request_header_modifier":  headerModifierAttribute("Changes to the request headers, with type RequestHeaderModifier."),
							"response_header_modifier": headerModifierAttribute("Changes to the response headers, with type ResponseHeaderModifier."),
							"request_redirect": schema.SingleNestedAttribute{
								Optional:    true,
								Description: "A redirect response, with type RequestRedirect. A rule with a redirect has no backend_refs.",
								Attributes: map[string]schema.Attribute{
									"scheme":      schema.StringAttribute{Optional: true, Description: "The scheme of the location, http or https."},
									"hostname":    schema.StringAttribute{Optional: true, Description: "The hostname of the location."},
									"port":        schema.Int64Attribute{Optional: true, Description: "The port of the location.", Validators: portValidators},
									"path":        pathModifierAttribute("How the location's path is built from the request path."),
									"status_code": schema.Int64Attribute{Optional: true, Description: "The status code: 301, 302 (the default), 303, 307 or 308."},
								},
							},
							"url_rewrite": schema.SingleNestedAttribute{
								Optional:    true,
								Description: "A rewrite of the request sent to the backend, with type URLRewrite.",
								Attributes: map[string]schema.Attribute{
									"hostname": schema.StringAttribute{Optional: true, Description: "The Host header sent to the backend."},
									"path":     pathModifierAttribute("How the path sent to the backend is built from the request path."),
								},
							},
							"request_mirror": schema.SingleNestedAttribute{
								Optional:    true,
								Description: "A copy of the requests sent to another Service, with type RequestMirror; its responses are ignored.",
								Attributes: map[string]schema.Attribute{
									"backend_ref": schema.SingleNestedAttribute{
										Required:    true,
										Description: "The Service that receives the copies.",
										Attributes: map[string]schema.Attribute{
											"name":      schema.StringAttribute{Required: true, Description: "The Service name."},
											"namespace": schema.StringAttribute{Optional: true, Description: "The Service namespace; the route's when unset. Another namespace needs a ReferenceGrant there."},
											"port":      schema.Int64Attribute{Required: true, Description: "The Service port.", Validators: portValidators},
										},
									},
									"percent": schema.Int64Attribute{
										Optional:    true,
										Description: "The percentage of requests mirrored; all when unset.",
										Validators:  []validator.Int64{int64validator.Between(0, 100)},
									},
								},
							},
						}},
					},
					"backend_refs": schema.ListNestedAttribute{
						Optional:    true,
						Description: "The Services that serve the rule's requests, chosen by weight.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"name":      schema.StringAttribute{Required: true, Description: "The Service name."},
							"namespace": schema.StringAttribute{Optional: true, Description: "The Service namespace; the route's when unset. Another namespace needs a ReferenceGrant there."},
							"port":      schema.Int64Attribute{Required: true, Description: "The Service port.", Validators: portValidators},
							"weight": schema.Int64Attribute{
								Optional:    true,
								Computed:    true,
								Default:     int64default.StaticInt64(1),
								Description: "The relative share of requests this backend gets; 1 when unset, 0 sends it none.",
								Validators:  []validator.Int64{int64validator.Between(0, 1000000)},
							},
						}},
					},
					"timeouts": schema.SingleNestedAttribute{
						Optional:    true,
						Description: "Timeouts as Gateway API durations, for example 10s or 1m30s.",
						Attributes: map[string]schema.Attribute{
							"request":         schema.StringAttribute{Optional: true, Description: "The time to answer a request, retries included."},
							"backend_request": schema.StringAttribute{Optional: true, Description: "The time for one request to a backend."},
						},
					},
				}},
			},
			"wait_for_served": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(true),
				Description: "Whether create, update and destroy wait until every Ready pod of each parent Gateway reports " +
					"that it serves the route's new routing (its GatewayPodReport). A pod that rejects the routing fails the " +
					"apply with the pod's reason and sets the route's Accepted condition to False. Gateways without Ready " +
					"pods are not waited for.",
			},
			"served_timeout": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("1m"),
				Description: "How long to wait for the gateway pods to serve the routing, a Go duration such as 1m.",
				Validators:  []validator.String{durationValidator{}},
			},
			"routing": schema.StringAttribute{
				Computed: true,
				Description: "What the route contributes to each parent Gateway served by varnishgw, as deterministic JSON: " +
					"an array sorted by gateway (namespace/name) of objects with gateway, accepted, listeners (name, port, " +
					"intersected hostnames), rules (normalised as the gateways apply them: matches, filters, timeouts, " +
					"backends with weights) and status (the conditions of each parent reference). Known at plan time.",
			},
		},
	}
}

func (r *httpRouteResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks the route as the gateways will apply it, so that an
// invalid value fails the plan on its attribute.
func (r *httpRouteResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	known := req.Config.Raw.IsFullyKnown()
	var m httpRouteModel
	if d := req.Config.Get(ctx, &m); d.HasError() {
		if known {
			resp.Diagnostics.Append(d...)
		}
		// A list or object known only after apply: validated at apply.
		return
	}
	var s resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &s)
	for _, e := range routing.ValidateHTTPRoute(m.toHTTPRoute()) {
		p, text := attributePath(ctx, s.Schema, e.Field)
		if !known && (text == "" || !knownAt(req.Config.Raw, p)) {
			// The value, or part of it, is known only after apply
			// (unknown values read as unset here): validated at apply.
			continue
		}
		if text == "" {
			resp.Diagnostics.AddError("Invalid HTTP route", e.Error())
			continue
		}
		resp.Diagnostics.AddAttributeError(p, "Invalid HTTP route", fmt.Sprintf("%s: %s", text, e.ErrorBody()))
	}
}

// knownAt reports whether the value at p in v is known, nested values
// included.
func knownAt(v tftypes.Value, p path.Path) bool {
	tp := tftypes.NewAttributePath()
	for _, step := range p.Steps() {
		switch st := step.(type) {
		case path.PathStepAttributeName:
			tp = tp.WithAttributeName(string(st))
		case path.PathStepElementKeyInt:
			tp = tp.WithElementKeyInt(int(st))
		default:
			return false
		}
	}
	got, _, err := tftypes.WalkAttributePath(v, tp)
	if err != nil {
		return false
	}
	val, ok := got.(tftypes.Value)
	return ok && val.IsFullyKnown()
}

// ModifyPlan computes the routing attribute from the planned route and the
// parent Gateways and backend Services in the cluster.
func (r *httpRouteResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.c == nil {
		return
	}
	if !req.Config.Raw.IsFullyKnown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("routing"), types.StringUnknown())...)
		return
	}
	var plan httpRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	route := plan.toHTTPRoute()
	if len(routing.ValidateHTTPRoute(route)) > 0 {
		return // ValidateConfig reported it
	}
	// A dry run gives the route exactly as the API server will store it
	// (defaults filled in) and reports what its validation rejects.
	dry, err := r.c.applyRoute(ctx, route, true)
	switch {
	case err == nil:
		route = dry
	case apierrors.IsInvalid(err):
		var s resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &s)
		if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil && len(st.Status().Details.Causes) > 0 {
			for _, c := range st.Status().Details.Causes {
				p, text := attributePath(ctx, s.Schema, c.Field)
				if text == "" {
					resp.Diagnostics.AddError("Plan the HTTP route", fmt.Sprintf("the API server rejects the route: %s: %s", c.Field, c.Message))
					continue
				}
				resp.Diagnostics.AddAttributeError(p, "Plan the HTTP route", fmt.Sprintf("the API server rejects the route: %s: %s", text, c.Message))
			}
		} else {
			resp.Diagnostics.AddError("Plan the HTTP route", "the API server rejects the route: "+err.Error())
		}
		return
	default:
		// For example the namespace does not exist yet: plan with the
		// route as configured.
	}
	parents, frags, err := r.c.attachAll(ctx, route)
	if err != nil {
		resp.Diagnostics.AddError("Plan the HTTP route", err.Error()+"\nCheck that the provider can read Gateways, GatewayClasses, Services and ReferenceGrants.")
		return
	}
	if req.State.Raw.IsNull() {
		// A new route whose parent Gateway (or its class) does not exist
		// yet is usually applied together with it: its routing is known
		// only once they exist, so it is "known after apply" rather than
		// an empty list that apply would contradict.
		for _, p := range parents {
			if p.gateway == nil || !p.ours {
				resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("routing"), types.StringUnknown())...)
				resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("id"), plan.Namespace.ValueString()+"/"+plan.Name.ValueString())...)
				return
			}
		}
	}
	rj, err := routingJSON(frags)
	if err != nil {
		resp.Diagnostics.AddError("Plan the HTTP route", "encode the routing: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("routing"), rj)...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("id"), plan.Namespace.ValueString()+"/"+plan.Name.ValueString())...)
}

func (r *httpRouteResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan httpRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, nil, "Create the HTTP route", resp.Diagnostics.AddError, resp.Diagnostics.AddWarning)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *httpRouteResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state httpRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, parentRefs(state.toHTTPRoute()), "Update the HTTP route", resp.Diagnostics.AddError, resp.Diagnostics.AddWarning)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// apply writes the HTTPRoute, its fragments and its status. oldParents are
// the parent Gateways of the prior state, whose fragments are deleted when
// they are parents no more.
func (r *httpRouteResource) apply(ctx context.Context, m *httpRouteModel, oldParents []routing.ObjectRef, action string, fail, warn func(string, string)) {
	desired := m.toHTTPRoute()
	if errs := routing.ValidateHTTPRoute(desired); len(errs) > 0 {
		fail(action, errs.ToAggregate().Error())
		return
	}
	live, err := r.c.applyRoute(ctx, desired, false)
	if err != nil {
		fail(action, fmt.Sprintf("apply HTTPRoute %s/%s: %v", desired.Namespace, desired.Name, err))
		return
	}
	_, frags, err := r.c.attachAll(ctx, live)
	if err != nil {
		fail(action, err.Error())
		return
	}
	stale := append(oldParents, parentRefs(live)...)
	// The RoleBindings first: a gateway pod starts watching a backend
	// namespace as soon as a fragment names it, and a watch refused for
	// lack of a binding backs off for seconds before it tries again.
	if err := r.c.writeBackendBindings(ctx, live, frags, stale); err != nil {
		fail(action, err.Error())
		return
	}
	writes, err := r.c.writeFragments(ctx, live, frags, stale)
	if err != nil {
		fail(action, err.Error())
		return
	}
	timeout, _ := time.ParseDuration(m.ServedTimeout.ValueString())
	var served error
	if m.WaitForServed.ValueBool() {
		served = r.c.waitServed(ctx, writes, timeout)
	}
	if served == nil {
		if err := r.c.retireLegacyFragments(ctx, routing.ObjectRef{Namespace: live.Namespace, Name: live.Name}, writes, timeout); err != nil {
			fail(action, err.Error())
			return
		}
	}
	var rejected *servedError
	if errors.As(served, &rejected) {
		frags = rejectedByPod(frags, rejected)
	}
	if err := r.c.writeStatus(ctx, live, frags); err != nil {
		fail(action, err.Error())
		return
	}
	if served != nil {
		fail(action, served.Error())
		return
	}
	rj, err := routingJSON(frags)
	if err != nil {
		fail(action, "encode the routing: "+err.Error())
		return
	}
	m.ID = types.StringValue(live.Namespace + "/" + live.Name)
	if !m.Routing.IsUnknown() && m.Routing.ValueString() != rj {
		warn(action, "The routing changed between plan and apply (a parent Gateway, backend Service or ReferenceGrant "+
			"changed meanwhile). The gateways got the routing as of now; run terraform plan to see it:\n"+rj)
		return
	}
	m.Routing = types.StringValue(rj)
}

func (r *httpRouteResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state httpRouteModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	live, err := r.c.gateway.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Read the HTTP route", fmt.Sprintf("get HTTPRoute %s/%s: %v", ns, name, err))
		return
	}
	if state.ParentRefs == nil {
		state.fromHTTPRoute(live) // import
	} else {
		// The route as the provider would write it now, defaults filled in
		// by the API server: if the live spec differs, someone changed a
		// managed field, and the state takes the live values so the plan
		// shows the change back.
		dry, err := r.c.applyRoute(ctx, state.toHTTPRoute(), true)
		if err != nil {
			resp.Diagnostics.AddError("Read the HTTP route", fmt.Sprintf("dry-run apply HTTPRoute %s/%s to detect changes: %v", ns, name, err))
			return
		}
		if !equality.Semantic.DeepEqual(dry.Spec, live.Spec) {
			state.fromHTTPRoute(live)
		}
	}
	frags, err := r.c.readFragments(ctx, live)
	if err != nil {
		resp.Diagnostics.AddError("Read the HTTP route", err.Error())
		return
	}
	rj, err := routingJSON(frags)
	if err != nil {
		resp.Diagnostics.AddError("Read the HTTP route", "encode the routing: "+err.Error())
		return
	}
	state.Routing = types.StringValue(rj)
	state.ID = types.StringValue(ns + "/" + name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *httpRouteResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state httpRouteModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	route := state.toHTTPRoute()
	gateways := parentRefs(route)
	live, err := r.c.gateway.GatewayV1().HTTPRoutes(route.Namespace).Get(ctx, route.Name, metav1.GetOptions{})
	if err == nil {
		gateways = append(gateways, parentRefs(live)...)
		err = r.c.gateway.GatewayV1().HTTPRoutes(route.Namespace).Delete(ctx, route.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		resp.Diagnostics.AddError("Delete the HTTP route", fmt.Sprintf("delete HTTPRoute %s/%s: %v", route.Namespace, route.Name, err))
		return
	}
	routeRef := routing.ObjectRef{Namespace: route.Namespace, Name: route.Name}
	var writes []fragmentWrite
	for _, gw := range gateways {
		w, err := r.c.deleteFragment(ctx, gw, routeRef)
		if err != nil {
			resp.Diagnostics.AddError("Delete the HTTP route", err.Error()+"\nDelete the RoutingFragment by hand or run terraform destroy again.")
			return
		}
		if w != nil {
			writes = append(writes, *w)
		}
	}
	if state.WaitForServed.ValueBool() {
		// The pods stop serving the route before its backends' RoleBindings go.
		timeout, _ := time.ParseDuration(state.ServedTimeout.ValueString())
		if err := r.c.waitServed(ctx, writes, timeout); err != nil {
			resp.Diagnostics.AddError("Delete the HTTP route", err.Error())
			return
		}
	}
	for _, gw := range gateways {
		if err := r.c.pruneBackendBindings(ctx, gw, routeRef, nil); err != nil {
			resp.Diagnostics.AddError("Delete the HTTP route", err.Error()+"\nDelete the RoleBinding by hand or run terraform destroy again.")
			return
		}
	}
}

func (r *httpRouteResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || !dnsLabel.MatchString(ns) || !dnsSubdomain.MatchString(name) {
		resp.Diagnostics.AddError("Import the HTTP route",
			fmt.Sprintf("the import ID %q is not namespace/name; import an HTTPRoute by its namespace and name, for example: terraform import varnishgw_http_route.web default/web", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	// The provider's own settings take their defaults, so that the plan
	// after an import is empty.
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_for_served"), true)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("served_timeout"), "1m")...)
}
