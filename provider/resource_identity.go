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

	_ resource.ResourceWithIdentity       = httpRouteWithIdentity{}
	_ resource.ResourceWithConfigure      = httpRouteWithIdentity{}
	_ resource.ResourceWithImportState    = httpRouteWithIdentity{}
	_ resource.ResourceWithValidateConfig = httpRouteWithIdentity{}
	_ resource.ResourceWithModifyPlan     = httpRouteWithIdentity{}

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
	listenerSetIdentity  = objectIdentity{kind: "ListenerSet", resource: "listener_set", namespaced: true}
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

// withIdentity is the identity half of each decorator below: its
// IdentitySchema, and Create, Read, Update and ImportState that run those
// of the wrapped resource (inner) and then set the identity (or, for
// ImportState, first turn an identity into an ID).
//
// A decorator embeds withIdentity and, one level deeper (in a struct that
// embeds the resource), the resource itself: Go promotes the shallower of
// two methods of one name, so these five are withIdentity's, and every
// other method of the resource (Metadata, Schema, Delete and the optional
// interfaces it implements, no more) is the resource's own.
type withIdentity struct {
	id    objectIdentity
	inner resource.ResourceWithImportState
}

func (w withIdentity) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = w.id.schema()
}

func (w withIdentity) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	w.inner.Create(ctx, req, resp)
	w.id.set(ctx, resp.State, tfsdk.State{}, resp.Identity, &resp.Diagnostics)
}

func (w withIdentity) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	w.inner.Read(ctx, req, resp)
	w.id.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (w withIdentity) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	w.inner.Update(ctx, req, resp)
	w.id.set(ctx, resp.State, req.State, resp.Identity, &resp.Diagnostics)
}

func (w withIdentity) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID = w.id.importID(ctx, req, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	w.inner.ImportState(ctx, req, resp)
}

// gatewayWithIdentity is varnishgw_gateway with its identity.
type gatewayWithIdentity struct {
	withIdentity
	gatewayOwn
}

type gatewayOwn struct{ *gatewayResource }

// NewGatewayResourceWithIdentity is varnishgw_gateway as the provider serves it.
func NewGatewayResourceWithIdentity() resource.Resource {
	r := NewGatewayResource().(*gatewayResource)
	return gatewayWithIdentity{withIdentity{gatewayIdentity, r}, gatewayOwn{r}}
}

// httpRouteWithIdentity is varnishgw_http_route with its identity.
type httpRouteWithIdentity struct {
	withIdentity
	httpRouteOwn
}

type httpRouteOwn struct{ *httpRouteResource }

// NewHTTPRouteResourceWithIdentity is varnishgw_http_route as the provider serves it.
func NewHTTPRouteResourceWithIdentity() resource.Resource {
	r := NewHTTPRouteResource().(*httpRouteResource)
	return httpRouteWithIdentity{withIdentity{httpRouteIdentity, r}, httpRouteOwn{r}}
}

// gatewayClassWithIdentity is varnishgw_gateway_class with its identity.
type gatewayClassWithIdentity struct {
	withIdentity
	gatewayClassOwn
}

type gatewayClassOwn struct{ *gatewayClassResource }

// NewGatewayClassResourceWithIdentity is varnishgw_gateway_class as the provider serves it.
func NewGatewayClassResourceWithIdentity() resource.Resource {
	r := NewGatewayClassResource().(*gatewayClassResource)
	return gatewayClassWithIdentity{withIdentity{gatewayClassIdentity, r}, gatewayClassOwn{r}}
}

// listenerSetWithIdentity is varnishgw_listener_set with its identity.
type listenerSetWithIdentity struct {
	withIdentity
	listenerSetOwn
}

type listenerSetOwn struct{ *listenerSetResource }

// NewListenerSetResourceWithIdentity is varnishgw_listener_set as the provider serves it.
func NewListenerSetResourceWithIdentity() resource.Resource {
	r := NewListenerSetResource().(*listenerSetResource)
	return listenerSetWithIdentity{withIdentity{listenerSetIdentity, r}, listenerSetOwn{r}}
}
