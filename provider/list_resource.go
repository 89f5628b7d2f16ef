package provider

import (
	"context"
	"fmt"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/labels"
)

// List resources (Terraform 1.14 and later, terraform query): the
// varnishgw objects of one namespace that a configuration may not manage
// yet, each with its identity for an import block and, with
// include_resource, the state an import would give.

// listedResource is what a list resource needs of the resource it lists:
// its own ImportState and Read fill a result's resource, so that a listed
// resource is exactly what an import of it gives.
type listedResource interface {
	resource.ResourceWithImportState
	resource.ResourceWithConfigure
}

// kubeListResource lists the objects of one kind in a namespace.
type kubeListResource struct {
	typeName    string // without the provider prefix, as the resource's
	kind        string // the Kubernetes kind, for descriptions and errors
	description string // what the list holds, after "The ... of a namespace"
	resource    listedResource
	c           *clients
	// find lists the names of the objects of the namespace that match the
	// selector and that varnishgw serves, sorted.
	find func(c *control.Cluster, ctx context.Context, namespace string, selector labels.Selector) ([]string, error)
}

var (
	_ list.ListResourceWithConfigure = (*kubeListResource)(nil)
)

// listConfigModel is the configuration of a list block.
type listConfigModel struct {
	Namespace     types.String `tfsdk:"namespace"`
	LabelSelector types.String `tfsdk:"label_selector"`
}

func (l *kubeListResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + l.typeName
}

func (l *kubeListResource) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = listschema.Schema{
		Description: fmt.Sprintf("The %s of a namespace %s, for terraform query (Terraform 1.14 and later). "+
			"Each result has the %s's identity (namespace and name) for an import block; "+
			"with include_resource = true also the state an import of it gives.", l.kind+"s", l.description, l.kind),
		Attributes: map[string]listschema.Attribute{
			"namespace": listschema.StringAttribute{
				Required:    true,
				Description: fmt.Sprintf("The namespace whose %ss are listed.", l.kind),
				Validators:  []validator.String{namespaceValidator{}},
			},
			"label_selector": listschema.StringAttribute{
				Optional: true,
				Description: fmt.Sprintf("A Kubernetes label selector such as app=shop,tier!=cache: "+
					"only the %ss whose labels match are listed. Unset lists them all.", l.kind),
				Validators: []validator.String{labelSelectorValidator{}},
			},
		},
	}
}

func (l *kubeListResource) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	l.c = configureClients(req.ProviderData, &resp.Diagnostics)
	// The resource checks the same data: its diagnostics would repeat these.
	var same resource.ConfigureResponse
	l.resource.Configure(ctx, req, &same)
}

func (l *kubeListResource) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var diags diag.Diagnostics
	var cfg listConfigModel
	diags.Append(req.Config.Get(ctx, &cfg)...)
	if diags.HasError() || !requireClients(l.c, &diags) {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	selector, err := labels.Parse(cfg.LabelSelector.ValueString())
	if err != nil { // checked by the validator already
		diags.AddAttributeError(path.Root("label_selector"), "Invalid label selector", err.Error())
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	ns := cfg.Namespace.ValueString()
	names, err := l.find(l.c.Cluster, ctx, ns, selector)
	if err != nil {
		diags.AddError(fmt.Sprintf("List the %ss", l.kind), err.Error())
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		for i, name := range names {
			if req.Limit > 0 && int64(i) >= req.Limit {
				return
			}
			if !push(l.result(ctx, req, ns, name)) {
				return
			}
		}
	}
}

// result is one listed object: its identity and, when asked for, the state
// the resource's ImportState and Read give it.
func (l *kubeListResource) result(ctx context.Context, req list.ListRequest, namespace, name string) list.ListResult {
	res := req.NewListResult(ctx)
	ref := object.Ref{Namespace: namespace, Name: name}
	res.DisplayName = ref.String()
	res.Diagnostics.Append(res.Identity.SetAttribute(ctx, path.Root("namespace"), namespace)...)
	res.Diagnostics.Append(res.Identity.SetAttribute(ctx, path.Root("name"), name)...)
	if !req.IncludeResource || res.Diagnostics.HasError() {
		return res
	}
	empty := tfsdk.State{Schema: req.ResourceSchema, Raw: tftypes.NewValue(req.ResourceSchema.Type().TerraformType(ctx), nil)}
	imported := resource.ImportStateResponse{State: empty, Identity: res.Identity}
	l.resource.ImportState(ctx, resource.ImportStateRequest{ID: ref.String()}, &imported)
	res.Diagnostics.Append(imported.Diagnostics...)
	if res.Diagnostics.HasError() {
		return res
	}
	read := resource.ReadResponse{State: imported.State}
	l.resource.Read(ctx, resource.ReadRequest{State: imported.State}, &read)
	res.Diagnostics.Append(read.Diagnostics...)
	if res.Diagnostics.HasError() {
		return res
	}
	if read.State.Raw.IsNull() {
		// Deleted between the list and the read: the identity stays, the
		// resource is left out.
		res.Diagnostics.AddWarning(fmt.Sprintf("List the %ss", l.kind),
			fmt.Sprintf("%s %s was deleted while it was listed.", l.kind, ref))
		return res
	}
	res.Resource = &tfsdk.Resource{Schema: read.State.Schema, Raw: read.State.Raw}
	return res
}

// namespaceValidator checks a Kubernetes namespace name.
type namespaceValidator struct{}

func (namespaceValidator) Description(context.Context) string {
	return "a Kubernetes namespace name (a DNS label such as edge)"
}
func (v namespaceValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (namespaceValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if v := req.ConfigValue.ValueString(); !dnsLabel.MatchString(v) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid namespace",
			fmt.Sprintf("%q is not a Kubernetes namespace name; use lower-case letters, digits and '-', for example edge", v))
	}
}

// labelSelectorValidator checks a Kubernetes label selector.
type labelSelectorValidator struct{}

func (labelSelectorValidator) Description(context.Context) string {
	return "a Kubernetes label selector such as app=shop,tier!=cache"
}
func (v labelSelectorValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (labelSelectorValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := labels.Parse(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid label selector",
			fmt.Sprintf("%q is not a Kubernetes label selector (%v); write it as kubectl get -l takes it, for example app=shop,tier!=cache", req.ConfigValue.ValueString(), err))
	}
}
