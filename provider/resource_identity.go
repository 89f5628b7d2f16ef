package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Resource identity (Terraform 1.12 and later): each resource names its
// Kubernetes object by namespace and name (a GatewayClass, which is
// cluster-scoped, by name alone), so that an import block can say
// identity = { namespace = "edge", name = "public" } instead of an ID
// string, and terraform query (1.14) can hand results to import blocks.
//
// The identity is a decorator around each resource, kept apart from the
// resources' own files: Create, Read and Update run the resource's own
// method and then copy namespace and name from the state into the
// identity, and ImportState turns an identity into the namespace/name ID
// the resource's ImportState already checks. Older CLIs and OpenTofu never
// send or ask for an identity; for them nothing changes.

// Each decorator keeps every interface of the resource it wraps.
var (
	_ resource.ResourceWithIdentity       = gatewayWithIdentity{}
	_ resource.ResourceWithConfigure      = gatewayWithIdentity{}
	_ resource.ResourceWithImportState    = gatewayWithIdentity{}
	_ resource.ResourceWithValidateConfig = gatewayWithIdentity{}
	_ resource.ResourceWithModifyPlan     = gatewayWithIdentity{}
	_ resource.ResourceWithUpgradeState   = gatewayWithIdentity{}

	_ resource.ResourceWithIdentity       = httpRouteWithIdentity{}
	_ resource.ResourceWithConfigure      = httpRouteWithIdentity{}
	_ resource.ResourceWithImportState    = httpRouteWithIdentity{}
	_ resource.ResourceWithValidateConfig = httpRouteWithIdentity{}
	_ resource.ResourceWithModifyPlan     = httpRouteWithIdentity{}
	_ resource.ResourceWithUpgradeState   = httpRouteWithIdentity{}

	_ resource.ResourceWithIdentity       = listenerSetWithIdentity{}
	_ resource.ResourceWithConfigure      = listenerSetWithIdentity{}
	_ resource.ResourceWithImportState    = listenerSetWithIdentity{}
	_ resource.ResourceWithValidateConfig = listenerSetWithIdentity{}

	_ resource.ResourceWithIdentity       = gatewayClassWithIdentity{}
	_ resource.ResourceWithConfigure      = gatewayClassWithIdentity{}
	_ resource.ResourceWithImportState    = gatewayClassWithIdentity{}
	_ resource.ResourceWithValidateConfig = gatewayClassWithIdentity{}
	_ resource.ResourceWithModifyPlan     = gatewayClassWithIdentity{}
)

// objectIdentity describes the identity of one resource type.
type objectIdentity struct {
	kind       string // the Kubernetes kind, for descriptions and errors
	resource   string // the resource type's name without the provider prefix
	namespaced bool
}

var (
	gatewayIdentity      = objectIdentity{kind: "Gateway", resource: "gateway", namespaced: true}
	httpRouteIdentity    = objectIdentity{kind: "HTTPRoute", resource: "http_route", namespaced: true}
	gatewayClassIdentity = objectIdentity{kind: "GatewayClass", resource: "gateway_class"}
)

func (o objectIdentity) schema() identityschema.Schema {
	attrs := map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{
			RequiredForImport: true,
			Description:       fmt.Sprintf("The name of the %s.", o.kind),
		},
	}
	if o.namespaced {
		attrs["namespace"] = identityschema.StringAttribute{
			RequiredForImport: true,
			Description:       fmt.Sprintf("The namespace of the %s.", o.kind),
		}
	}
	return identityschema.Schema{Attributes: attrs}
}

// set copies namespace and name from state (or, when the resource is gone
// from the state, from prior) into identity.
func (o objectIdentity) set(ctx context.Context, state, prior tfsdk.State, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	if identity == nil {
		return
	}
	from := state
	if from.Raw.IsNull() {
		from = prior
	}
	if from.Raw.IsNull() {
		return
	}
	var name, namespace types.String
	diags.Append(from.GetAttribute(ctx, path.Root("name"), &name)...)
	if o.namespaced {
		diags.Append(from.GetAttribute(ctx, path.Root("namespace"), &namespace)...)
	}
	if diags.HasError() || name.IsNull() || name.IsUnknown() || o.namespaced && (namespace.IsNull() || namespace.IsUnknown()) {
		return
	}
	diags.Append(identity.SetAttribute(ctx, path.Root("name"), name)...)
	if o.namespaced {
		diags.Append(identity.SetAttribute(ctx, path.Root("namespace"), namespace)...)
	}
}

// importID returns the import ID the resource's ImportState takes: req.ID
// itself, or for an import by identity namespace/name (name for a class),
// checked with the same rules as an ID.
func (o objectIdentity) importID(ctx context.Context, req resource.ImportStateRequest, diags *diag.Diagnostics) string {
	if req.ID != "" || req.Identity == nil {
		return req.ID
	}
	var name, namespace types.String
	diags.Append(req.Identity.GetAttribute(ctx, path.Root("name"), &name)...)
	if o.namespaced {
		diags.Append(req.Identity.GetAttribute(ctx, path.Root("namespace"), &namespace)...)
	}
	if diags.HasError() {
		return ""
	}
	summary := fmt.Sprintf("Import the %s by identity", o.kind)
	example := fmt.Sprintf("for example identity = { namespace = \"default\", name = \"web\" } in the import block of varnishgw_%s", o.resource)
	if !o.namespaced {
		example = fmt.Sprintf("for example identity = { name = \"varnish\" } in the import block of varnishgw_%s", o.resource)
	}
	if !dnsSubdomain.MatchString(name.ValueString()) {
		diags.AddAttributeError(path.Root("identity").AtName("name"), summary,
			fmt.Sprintf("identity name %q is not a Kubernetes object name (lower-case letters, digits, '-' and '.'); set the %s's name, %s", name.ValueString(), o.kind, example))
		return ""
	}
	if !o.namespaced {
		return name.ValueString()
	}
	if !dnsLabel.MatchString(namespace.ValueString()) {
		diags.AddAttributeError(path.Root("identity").AtName("namespace"), summary,
			fmt.Sprintf("identity namespace %q is not a Kubernetes namespace name (a DNS label such as edge); set the %s's namespace, %s", namespace.ValueString(), o.kind, example))
		return ""
	}
	return namespace.ValueString() + "/" + name.ValueString()
}

// gatewayWithIdentity is varnishgw_gateway with its identity.
type gatewayWithIdentity struct{ *gatewayResource }

// NewGatewayResourceWithIdentity is varnishgw_gateway as the provider serves it.
func NewGatewayResourceWithIdentity() resource.Resource {
	return gatewayWithIdentity{NewGatewayResource().(*gatewayResource)}
}

func (r gatewayWithIdentity) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = gatewayIdentity.schema()
}

func (r gatewayWithIdentity) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.gatewayResource.Create(ctx, req, resp)
	gatewayIdentity.set(ctx, resp.State, tfsdk.State{}, resp.Identity, &resp.Diagnostics)
}

func (r gatewayWithIdentity) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	r.gatewayResource.Read(ctx, req, resp)
	gatewayIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r gatewayWithIdentity) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.gatewayResource.Update(ctx, req, resp)
	gatewayIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r gatewayWithIdentity) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID = gatewayIdentity.importID(ctx, req, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	r.gatewayResource.ImportState(ctx, req, resp)
}

// httpRouteWithIdentity is varnishgw_http_route with its identity.
type httpRouteWithIdentity struct{ *httpRouteResource }

// NewHTTPRouteResourceWithIdentity is varnishgw_http_route as the provider serves it.
func NewHTTPRouteResourceWithIdentity() resource.Resource {
	return httpRouteWithIdentity{NewHTTPRouteResource().(*httpRouteResource)}
}

func (r httpRouteWithIdentity) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = httpRouteIdentity.schema()
}

func (r httpRouteWithIdentity) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.httpRouteResource.Create(ctx, req, resp)
	httpRouteIdentity.set(ctx, resp.State, tfsdk.State{}, resp.Identity, &resp.Diagnostics)
}

func (r httpRouteWithIdentity) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	r.httpRouteResource.Read(ctx, req, resp)
	httpRouteIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r httpRouteWithIdentity) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.httpRouteResource.Update(ctx, req, resp)
	httpRouteIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r httpRouteWithIdentity) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID = httpRouteIdentity.importID(ctx, req, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	r.httpRouteResource.ImportState(ctx, req, resp)
}

// gatewayClassWithIdentity is varnishgw_gateway_class with its identity.
type gatewayClassWithIdentity struct{ *gatewayClassResource }

// NewGatewayClassResourceWithIdentity is varnishgw_gateway_class as the provider serves it.
func NewGatewayClassResourceWithIdentity() resource.Resource {
	return gatewayClassWithIdentity{NewGatewayClassResource().(*gatewayClassResource)}
}

func (r gatewayClassWithIdentity) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = gatewayClassIdentity.schema()
}

func (r gatewayClassWithIdentity) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.gatewayClassResource.Create(ctx, req, resp)
	gatewayClassIdentity.set(ctx, resp.State, tfsdk.State{}, resp.Identity, &resp.Diagnostics)
}

func (r gatewayClassWithIdentity) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	r.gatewayClassResource.Read(ctx, req, resp)
	gatewayClassIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r gatewayClassWithIdentity) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.gatewayClassResource.Update(ctx, req, resp)
	gatewayClassIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r gatewayClassWithIdentity) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID = gatewayClassIdentity.importID(ctx, req, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	r.gatewayClassResource.ImportState(ctx, req, resp)
}

// listenerSetWithIdentity is varnishgw_listener_set with its identity.
type listenerSetWithIdentity struct{ *listenerSetResource }

var listenerSetIdentity = objectIdentity{kind: "ListenerSet", resource: "listener_set", namespaced: true}

// NewListenerSetResourceWithIdentity is varnishgw_listener_set as the provider serves it.
func NewListenerSetResourceWithIdentity() resource.Resource {
	return listenerSetWithIdentity{NewListenerSetResource().(*listenerSetResource)}
}

func (r listenerSetWithIdentity) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = listenerSetIdentity.schema()
}

func (r listenerSetWithIdentity) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.listenerSetResource.Create(ctx, req, resp)
	listenerSetIdentity.set(ctx, resp.State, tfsdk.State{}, resp.Identity, &resp.Diagnostics)
}

func (r listenerSetWithIdentity) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	r.listenerSetResource.Read(ctx, req, resp)
	listenerSetIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r listenerSetWithIdentity) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.listenerSetResource.Update(ctx, req, resp)
	listenerSetIdentity.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (r listenerSetWithIdentity) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID = listenerSetIdentity.importID(ctx, req, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	r.listenerSetResource.ImportState(ctx, req, resp)
}
