// Package provider is the varnishgw Terraform/OpenTofu provider: the control
// plane of Varnish gateways for the Kubernetes Gateway API. Its resources
// write Gateway API objects (with status) and each gateway's runtime with
// server-side apply under one field manager.
package provider

import (
	"context"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
)

const (
	// Address is the provider's registry address.
	Address = "registry.terraform.io/varnishgw/varnishgw"
	// GatewayAPIVersion is the Gateway API release whose CRDs the provider
	// is built against (the sigs.k8s.io/gateway-api version in go.mod).
	GatewayAPIVersion = "v1.6.3"
)

// managedLabels go on every object the provider creates.
var managedLabels = gwruntime.ManagedLabels()

var (
	_ provider.Provider                  = (*varnishgwProvider)(nil)
	_ provider.ProviderWithListResources = (*varnishgwProvider)(nil)
	_ provider.ProviderWithActions       = (*varnishgwProvider)(nil)
)

type varnishgwProvider struct {
	version string
}

// New returns a constructor of the provider, for providerserver.Serve and
// for acceptance tests.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &varnishgwProvider{version: version} }
}

// clients is the provider data handed to resources and data sources: the
// cluster the provider controls, and what its Terraform operations hand
// each other during a run.
type clients struct {
	*control.Cluster

	// routes hand what one operation on a route read to the next one
	// (route_reads.go).
	routes routeSnapshots

	// classChanges are the classes whose plan, in this run, changes what
	// their gateways are started or configured with (see
	// gatewayClassResource.ModifyPlan).
	classChanges classChanges
}

func (p *varnishgwProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "varnishgw"
	resp.Version = p.version
}

func (p *varnishgwProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The varnishgw provider runs Varnish Cache as a Kubernetes Gateway API gateway. " +
			"It connects to a cluster the way the kubernetes provider does: a kubeconfig file, or an " +
			"explicit host with credentials, each also settable with a KUBE_* environment variable. " +
			"There is no fallback to localhost: a configuration that names no cluster is an error.",
		Attributes: map[string]schema.Attribute{
			"config_path": schema.StringAttribute{
				Optional:    true,
				Description: "The path of a kubeconfig file. Also KUBE_CONFIG_PATH.",
			},
			"config_paths": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Paths of kubeconfig files, merged in order as kubectl does. Also KUBE_CONFIG_PATHS (separated by the OS path list separator).",
			},
			"config_context": schema.StringAttribute{
				Optional:    true,
				Description: "The kubeconfig context to use instead of the current context. Also KUBE_CTX.",
			},
			"host": schema.StringAttribute{
				Optional:    true,
				Description: "The Kubernetes API server URL, for example https://10.0.0.1:6443. With a kubeconfig it overrides the cluster's server. Also KUBE_HOST.",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "A bearer token for the API server. Also KUBE_TOKEN.",
			},
			"cluster_ca_certificate": schema.StringAttribute{
				Optional:    true,
				Description: "The PEM-encoded CA certificate of the API server. Also KUBE_CLUSTER_CA_CERT_DATA.",
			},
			"client_certificate": schema.StringAttribute{
				Optional:    true,
				Description: "A PEM-encoded client certificate for TLS client authentication. Also KUBE_CLIENT_CERT_DATA.",
			},
			"client_key": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "The PEM-encoded private key of client_certificate. Also KUBE_CLIENT_KEY_DATA.",
			},
			"insecure": schema.BoolAttribute{
				Optional:    true,
				Description: "Whether to skip verifying the API server's certificate. Never use this in production. Also KUBE_INSECURE.",
			},
		},
		Blocks: map[string]schema.Block{
			"exec": schema.SingleNestedBlock{
				Description: "A client-go credential plugin that prints credentials for the API server, as in a kubeconfig's exec section.",
				Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{
						Optional:    true,
						Description: "The API version of the ExecCredential the plugin prints, for example client.authentication.k8s.io/v1.",
					},
					"command": schema.StringAttribute{
						Optional:    true,
						Description: "The command to run.",
					},
					"args": schema.ListAttribute{
						Optional:    true,
						ElementType: types.StringType,
						Description: "The command's arguments.",
					},
					"env": schema.MapAttribute{
						Optional:    true,
						ElementType: types.StringType,
						Description: "Environment variables set for the command.",
					},
				},
			},
		},
	}
}

func (p *varnishgwProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m connectionModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.hasUnknown() {
		// Values known only after apply (for example a cluster created in
		// the same configuration): resources report the missing client.
		return
	}
	cfg, err := m.restConfig()
	if err != nil {
		resp.Diagnostics.AddError("Configure the Kubernetes connection", err.Error())
		return
	}
	cfg.UserAgent = "terraform-provider-varnishgw/" + p.version
	// client-go's default client-side limit (5 requests/s, bursts of 10)
	// serialises parallel applies: a route takes about 7 requests to plan and
	// apply (make bench-provider, docs/performance.md).
	if cfg.QPS == 0 && cfg.Burst == 0 {
		cfg.QPS, cfg.Burst = 100, 200
	}

	cluster, err := control.NewCluster(cfg)
	if err != nil {
		resp.Diagnostics.AddError("Connect to the Kubernetes cluster", err.Error())
		return
	}
	c := &clients{Cluster: cluster}
	if err := c.CheckGatewayAPI(GatewayAPIVersion); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("host"), "Check the Gateway API CRDs", err.Error())
		return
	}
	resp.ResourceData = c
	resp.DataSourceData = c
	resp.ListResourceData = c
	resp.ActionData = c
}

func (p *varnishgwProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewGatewayClassResourceWithIdentity,
		NewHTTPRouteResourceWithIdentity,
		NewGatewayResourceWithIdentity,
		NewCacheInvalidationResource,
		NewListenerSetResourceWithIdentity,
	}
}

// ListResources are the list resources of terraform query (Terraform 1.14).
func (p *varnishgwProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{NewGatewayListResource, NewHTTPRouteListResource}
}

// Actions are the provider's actions (Terraform 1.14).
func (p *varnishgwProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{NewCacheInvalidateAction}
}

func (p *varnishgwProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewGatewayDataSource, NewRoutingDataSource}
}
