package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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

func (r *httpRouteResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks the route as the gateways will apply it, so that an
// invalid value fails the plan on its attribute: what the provider rejects
// itself (rejectUnsupportedRoute), then what the routing core rejects,
// each error once, at the attribute or block it is about.
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
	rejectUnsupportedRoute(&m, &resp.Diagnostics)
	warnCORSAnyOriginWithCredentials(&m, &resp.Diagnostics)
	for i := range m.Rules {
		validateCache(path.Root("rule").AtListIndex(i).AtName("cache"), field.NewPath("spec", "rules").Index(i).Child("cache"), m.Rules[i].Cache, &resp.Diagnostics)
	}
	var s resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &s)
	for _, e := range routing.ValidateHTTPRoute(m.toHTTPRoute()) {
		if schemaValidated.MatchString(e.Field) {
			continue // the attribute's validators report it
		}
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
		if insideAbsentBlock(req.Config.Raw, p) {
			continue // the block is required: its validator reports it
		}
		resp.Diagnostics.AddAttributeError(diagnosticPath(req.Config.Raw, p), "Invalid HTTP route", fmt.Sprintf("%s: %s", text, e.ErrorBody()))
	}
}

// warnCORSAnyOriginWithCredentials warns about each CORS filter that
// allows credentials from any origin: "*", or an origin whose host is "*"
// (any website of that scheme and port). The Gateway API defines it (the
// gateway echoes the request's Origin, as the conformance suite expects),
// so it is no error; but any website a user visits can then make requests
// with the user's cookies to the route and read the answers.
func warnCORSAnyOriginWithCredentials(m *httpRouteModel, diags *diag.Diagnostics) {
	for i, rule := range m.Rules {
		for j, f := range rule.Filters {
			c := f.CORS
			if c == nil || !c.AllowCredentials.ValueBool() {
				continue
			}
			k := slices.IndexFunc(c.AllowOrigins, func(o types.String) bool { return corsAnyOrigin(o.ValueString()) })
			if k < 0 {
				continue
			}
			p := path.Root("rule").AtListIndex(i).AtName("filter").AtListIndex(j).AtName("cors")
			diags.AddAttributeWarning(p.AtName("allow_origins"), "CORS filter lets any website make credentialed requests",
				fmt.Sprintf("rule[%d].filter[%d].cors: allow_origins has %q and allow_credentials = true: the gateway answers "+
					"every matching Origin with Access-Control-Allow-Origin set to it and Access-Control-Allow-Credentials: true, "+
					"so any website a user visits can send requests with the user's cookies or HTTP authentication to this "+
					"route and read the answers. Unless that is meant (the answers hold nothing private), list the origins "+
					"you trust in allow_origins instead, such as \"https://app.example.com\" or \"https://*.example.com\", "+
					"or set allow_credentials = false.", i, j, c.AllowOrigins[k].ValueString()))
		}
	}
}

// corsAnyOrigin reports whether a CORS origin allows any website: "*", or
// scheme://* with an optional port.
func corsAnyOrigin(o string) bool {
	if o == "*" {
		return true
	}
	_, rest, ok := strings.Cut(o, "://")
	host, _, _ := strings.Cut(rest, ":")
	return ok && host == "*"
}

// schemaValidated matches the fields of the routing core's errors that the
// schema's validators check too (retryBlock), so each is reported once.
var schemaValidated = regexp.MustCompile(`^spec\.rules\[\d+\]\.retry\.(attempts|codes\[\d+\])$`)

// ModifyPlan computes the routing attribute from the planned route and the
// parent Gateways and backend Services in the cluster.
func (r *httpRouteResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.c == nil {
		return
	}
	if !req.Config.Raw.IsFullyKnown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("routing"), types.StringUnknown())...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("effective_cache"), types.ListUnknown(effectiveCacheType))...)
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
	// Before the dry run, whose answer lacks the experimental channel's
	// fields on a standard channel cluster. (A value known only after
	// apply is checked here too: Terraform plans the route again during
	// the apply, with every value known, before it is applied.)
	if r.c.checkExperimentalFields(ctx, route, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	ref := object.Ref{Namespace: route.Namespace, Name: route.Name}
	// A dry run gives the route exactly as the API server will store it
	// (defaults filled in) and reports what its validation rejects. The
	// stored route, as Read just found it unchanged since the provider
	// wrote it, is that already when the plan keeps the state's spec.
	var dry *gatewayv1.HTTPRoute
	err := error(nil)
	if snap := r.c.routes.take(ref); snap != nil && snap.inputs == nil && !req.State.Raw.IsNull() {
		var state httpRouteModel
		if d := req.State.Get(ctx, &state); !d.HasError() && sameSpec(state.toHTTPRoute(), route) {
			dry = snap.route
		}
	}
	if dry == nil {
		dry, err = r.c.applyRoute(ctx, route, true)
	}
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
				resp.Diagnostics.AddAttributeError(diagnosticPath(req.Config.Raw, p), "Plan the HTTP route", fmt.Sprintf("the API server rejects the route: %s: %s", text, c.Message))
			}
		} else {
			resp.Diagnostics.AddError("Plan the HTTP route", "the API server rejects the route: "+err.Error())
		}
		return
	default:
		// For example the namespace does not exist yet: plan with the
		// route as configured.
	}
	in, err := r.c.ReadAttachInputs(ctx, route)
	var frags []*routing.Fragment
	if err == nil {
		frags, err = in.Attach(route)
	}
	if err != nil {
		resp.Diagnostics.AddError("Plan the HTTP route", err.Error()+"\nCheck that the provider can read Gateways, GatewayClasses, Services and ReferenceGrants.")
		return
	}
	plan.setRuleCaches(frags)
	// For the apply that follows this plan in an apply run.
	r.c.routes.put(ref, routeSnapshot{route: route, inputs: in})
	parents := in.Parents
	if req.State.Raw.IsNull() || slices.ContainsFunc(parents, func(p control.RouteParent) bool { return p.PendingListenerSet }) {
		// A new route whose parent Gateway (or its class) does not exist
		// yet is usually applied together with it: its routing is known
		// only once they exist, so it is "known after apply" rather than
		// an empty list that apply would contradict; so is the routing of
		// a route that names a ListenerSet not created yet.
		for _, p := range parents {
			if p.Gateway == nil || !p.Ours {
				resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("routing"), types.StringUnknown())...)
				resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("effective_cache"), types.ListUnknown(effectiveCacheType))...)
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
	// The effective cache policy of each rule, with the parent Gateways'
	// default policies as the route's last refresh (or apply) read them,
	// kept in its private state: the plan Terraform makes again during
	// the apply must give the same value, even when a parent Gateway's
	// cache block is applied before the route. A new route's value is
	// known after apply.
	ec := types.ListUnknown(effectiveCacheType)
	if !req.State.Raw.IsNull() {
		data, d := req.Private.GetKey(ctx, gatewayCachePoliciesKey)
		resp.Diagnostics.Append(d...)
		if policies, ok := recordedPolicies(data, frags); ok {
			ec = effectiveCache(frags, policies)
		}
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("effective_cache"), ec)...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("routing"), rj)...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("id"), plan.Namespace.ValueString()+"/"+plan.Name.ValueString())...)
}

func (r *httpRouteResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan httpRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	live, record := r.apply(ctx, &plan, nil, "Create the HTTP route", resp.Diagnostics.AddError, resp.Diagnostics.AddWarning)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if record != nil {
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, gatewayCachePoliciesKey, record)...)
	}
	resp.Diagnostics.Append(recordWrittenRoute(ctx, resp.Private.SetKey, live)...)
}

func (r *httpRouteResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state httpRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	live, record := r.apply(ctx, &plan, r.c.ParentRefs(ctx, state.toHTTPRoute()), "Update the HTTP route", resp.Diagnostics.AddError, resp.Diagnostics.AddWarning)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if record != nil {
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, gatewayCachePoliciesKey, record)...)
	}
	resp.Diagnostics.Append(recordWrittenRoute(ctx, resp.Private.SetKey, live)...)
}

// apply writes the HTTPRoute, its fragments and its status, and returns
// the HTTPRoute written and, when it computed effective_cache, the
// Gateways' cache policies it used, for the private state (nil: keep
// it). oldParents are the parent Gateways of the prior state, whose
// fragments are deleted when they are parents no more.
func (r *httpRouteResource) apply(ctx context.Context, m *httpRouteModel, oldParents []object.Ref, action string, fail, warn func(string, string)) (*gatewayv1.HTTPRoute, []byte) {
	desired := m.toHTTPRoute()
	if errs := routing.ValidateHTTPRoute(desired); len(errs) > 0 {
		fail(action, errs.ToAggregate().Error())
		return nil, nil
	}
	snap := r.c.routes.take(object.Ref{Namespace: desired.Namespace, Name: desired.Name})
	live, err := r.c.applyRoute(ctx, desired, false)
	if err != nil {
		fail(action, fmt.Sprintf("apply HTTPRoute %s/%s: %v", desired.Namespace, desired.Name, err))
		return nil, nil
	}
	// What the plan of this apply read, when it planned the route stored
	// now; else the route's Gateways and Services are read again.
	var in *control.AttachInputs
	if snap != nil && snap.inputs != nil && snap.inputs.Complete() && equality.Semantic.DeepEqual(snap.route.Spec, live.Spec) {
		in = snap.inputs
	} else if in, err = r.c.ReadAttachInputs(ctx, live); err != nil {
		fail(action, err.Error())
		return nil, nil
	}
	frags, err := in.Attach(live)
	if err != nil {
		fail(action, err.Error())
		return nil, nil
	}
	m.setRuleCaches(frags)
	policies, record, err := policiesOf(in.Parents)
	if err != nil {
		fail(action, fmt.Sprintf("read the default cache policy of a parent Gateway: %v", err))
		return nil, nil
	}
	stale := append(oldParents, r.c.ParentRefs(ctx, live)...)
	timeout, _ := time.ParseDuration(m.ServedTimeout.ValueString())
	published, err := r.c.PublishRoute(ctx, live, frags, stale, in.Parents, m.WaitForServed.ValueBool(), timeout)
	if published != nil && published.StatusWarning != "" {
		warn(action, published.StatusWarning)
	}
	if err != nil {
		fail(action, err.Error())
		return nil, nil
	}
	frags, served := published.Fragments, published.Served
	if served != nil {
		fail(action, served.Error())
		return nil, nil
	}
	rj, err := routingJSON(frags)
	if err != nil {
		fail(action, "encode the routing: "+err.Error())
		return nil, nil
	}
	m.ID = types.StringValue(live.Namespace + "/" + live.Name)
	// A value known at plan time is kept: a parent Gateway's cache block
	// applied in the same run changes the policy only after the plan was
	// made, and Terraform requires the planned value. The next refresh
	// (Read) shows the Gateway's new default.
	if m.EffectiveCache.IsUnknown() || m.EffectiveCache.IsNull() {
		m.EffectiveCache = effectiveCache(frags, policies)
	} else {
		record = nil
	}
	if !m.Routing.IsUnknown() && m.Routing.ValueString() != rj {
		warn(action, "The routing changed between plan and apply (a parent Gateway, backend Service or ReferenceGrant "+
			"changed meanwhile). The gateways got the routing as of now; run terraform plan to see it:\n"+rj)
		return live, record
	}
	m.Routing = types.StringValue(rj)
	return live, record
}

func (r *httpRouteResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state httpRouteModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	ns, name := state.Namespace.ValueString(), state.Name.ValueString()
	live, err := r.c.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Read the HTTP route", fmt.Sprintf("get HTTPRoute %s/%s: %v", ns, name, err))
		return
	}
	imported := len(state.ParentRefs) == 0
	priorCaches := make([]*cachePolicyModel, len(state.Rules))
	for i := range state.Rules {
		priorCaches[i] = state.Rules[i].Cache
	}
	switch {
	case imported:
		state.fromHTTPRoute(live) // import
	case readWrittenRoute(ctx, req.Private).is(live):
		// The spec has not changed since the provider wrote it.
		r.c.routes.put(object.Ref{Namespace: ns, Name: name}, routeSnapshot{route: live})
	default:
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
			// The cache blocks are not in the HTTPRoute: keep them.
			for i := range state.Rules {
				if i < len(priorCaches) {
					state.Rules[i].Cache = priorCaches[i]
				}
			}
			break
		}
		// Unchanged where the provider writes: no dry run next time.
		resp.Diagnostics.Append(recordWrittenRoute(ctx, resp.Private.SetKey, live)...)
		r.c.routes.put(object.Ref{Namespace: ns, Name: name}, routeSnapshot{route: live})
	}
	frags, err := r.c.ReadFragments(ctx, live)
	if err != nil {
		resp.Diagnostics.AddError("Read the HTTP route", err.Error())
		return
	}
	if imported {
		state.ruleCachesFromFragments(frags)
	}
	rj, err := routingJSON(frags)
	if err != nil {
		resp.Diagnostics.AddError("Read the HTTP route", "encode the routing: "+err.Error())
		return
	}
	policies, record, err := r.c.gatewayPoliciesOf(ctx, frags)
	if err != nil {
		resp.Diagnostics.AddError("Read the HTTP route", err.Error())
		return
	}
	state.EffectiveCache = effectiveCache(frags, policies)
	if resp.Private != nil { // nil when a list resource reads for terraform query
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, gatewayCachePoliciesKey, record)...)
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
	gateways := r.c.ParentRefs(ctx, route)
	live, err := r.c.Gateway.GatewayV1().HTTPRoutes(route.Namespace).Get(ctx, route.Name, metav1.GetOptions{})
	if err == nil {
		gateways = append(gateways, r.c.ParentRefs(ctx, live)...)
		err = r.c.Gateway.GatewayV1().HTTPRoutes(route.Namespace).Delete(ctx, route.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		resp.Diagnostics.AddError("Delete the HTTP route", fmt.Sprintf("delete HTTPRoute %s/%s: %v", route.Namespace, route.Name, err))
		return
	}
	// Each Gateway once: the state's and the live route's parents are
	// usually the same.
	seen := map[object.Ref]bool{}
	for _, gw := range gateways {
		seen[gw] = true
	}
	gateways = sortedRefs(seen)
	routeRef := object.Ref{Namespace: route.Namespace, Name: route.Name}
	var writes []control.FragmentWrite
	for _, gw := range gateways {
		w, err := r.c.DeleteFragment(ctx, gw, routeRef, state.WaitForServed.ValueBool())
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
		if err := r.c.WaitServed(ctx, writes, timeout); err != nil {
			resp.Diagnostics.AddError("Delete the HTTP route", err.Error())
			return
		}
	}
	for _, gw := range gateways {
		if err := r.c.PruneBackendBindings(ctx, gw, routeRef, nil); err != nil {
			resp.Diagnostics.AddError("Delete the HTTP route", err.Error()+"\nDelete the RoleBinding by hand or run terraform destroy again.")
			return
		}
		if err := r.c.DeleteRouteStatusRole(ctx, gw, routeRef); err != nil {
			resp.Diagnostics.AddError("Delete the HTTP route", err.Error()+"\nDelete the Role and RoleBinding by hand or run terraform destroy again.")
			return
		}
	}
	// The attached routes of the ListenerSets' listeners.
	if control.NamesListenerSet(route) {
		for _, ref := range gateways {
			gw, err := r.c.Gateway.GatewayV1().Gateways(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err == nil {
				err = r.c.WriteListenerSetStatuses(ctx, gw)
			}
			if err != nil {
				resp.Diagnostics.AddError("Delete the HTTP route", fmt.Sprintf("update the status of the ListenerSets of Gateway %s: %v", ref, err))
				return
			}
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
