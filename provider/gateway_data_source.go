package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

var (
	_ datasource.DataSource              = (*gatewayDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*gatewayDataSource)(nil)
)

// NewGatewayDataSource is the varnishgw_gateway data source.
func NewGatewayDataSource() datasource.DataSource { return &gatewayDataSource{} }

type gatewayDataSource struct{ c *clients }

type gatewayDataModel struct {
	ID               types.String               `tfsdk:"id"`
	Namespace        types.String               `tfsdk:"namespace"`
	Name             types.String               `tfsdk:"name"`
	GatewayClassName types.String               `tfsdk:"gateway_class_name"`
	Generation       types.Int64                `tfsdk:"generation"`
	Listeners        []gatewayDataListenerModel `tfsdk:"listeners"`
	Addresses        []gatewayDataAddressModel  `tfsdk:"addresses"`
	Conditions       []conditionDataModel       `tfsdk:"conditions"`
}

type gatewayDataListenerModel struct {
	Name           types.String         `tfsdk:"name"`
	Hostname       types.String         `tfsdk:"hostname"`
	Port           types.Int64          `tfsdk:"port"`
	Protocol       types.String         `tfsdk:"protocol"`
	AttachedRoutes types.Int64          `tfsdk:"attached_routes"`
	FragmentRoutes types.Int64          `tfsdk:"fragment_routes"`
	Conditions     []conditionDataModel `tfsdk:"conditions"`
}

type gatewayDataAddressModel struct {
	Type  types.String `tfsdk:"type"`
	Value types.String `tfsdk:"value"`
}

type conditionDataModel struct {
	Type               types.String `tfsdk:"type"`
	Status             types.String `tfsdk:"status"`
	Reason             types.String `tfsdk:"reason"`
	Message            types.String `tfsdk:"message"`
	ObservedGeneration types.Int64  `tfsdk:"observed_generation"`
}

func (d *gatewayDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_gateway"
}

func conditionsDataAttribute(of string) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Computed:    true,
		Description: "The status conditions of the " + of + ".",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"type":                schema.StringAttribute{Computed: true, Description: "The condition type, for example Accepted or Programmed."},
			"status":              schema.StringAttribute{Computed: true, Description: "True, False or Unknown."},
			"reason":              schema.StringAttribute{Computed: true, Description: "A CamelCase reason for the status."},
			"message":             schema.StringAttribute{Computed: true, Description: "A human-readable explanation."},
			"observed_generation": schema.Int64Attribute{Computed: true, Description: "The Gateway generation the condition was computed for; compare it with generation to see whether it is current."},
		}},
	}
}

func (d *gatewayDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := gatewayRefDataAttributes()
	attrs["gateway_class_name"] = schema.StringAttribute{Computed: true, Description: "The GatewayClass of the Gateway."}
	attrs["generation"] = schema.Int64Attribute{Computed: true, Description: "The Gateway's metadata.generation, which changes with its spec."}
	attrs["listeners"] = schema.ListNestedAttribute{
		Computed:    true,
		Description: "The listeners of the Gateway in spec order, with their status.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":     schema.StringAttribute{Computed: true, Description: "The listener name."},
			"hostname": schema.StringAttribute{Computed: true, Description: "The hostname the listener accepts, or null for any host."},
			"port":     schema.Int64Attribute{Computed: true, Description: "The listener port."},
			"protocol": schema.StringAttribute{Computed: true, Description: "The listener protocol, for example HTTP or HTTPS."},
			"attached_routes": schema.Int64Attribute{Computed: true,
				Description: "The number of routes attached to the listener as the Gateway status reports it, or null when the status has no entry for the listener."},
			"fragment_routes": schema.Int64Attribute{Computed: true,
				Description: "The number of accepted routes attached to the listener, counted now from the RoutingFragments the gateway pods read. It can be ahead of attached_routes until the status is written."},
			"conditions": conditionsDataAttribute("listener"),
		}},
	}
	attrs["addresses"] = schema.ListNestedAttribute{
		Computed:    true,
		Description: "The addresses the Gateway is reachable at (status.addresses); empty until they are assigned.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"type":  schema.StringAttribute{Computed: true, Description: "The address type, IPAddress or Hostname."},
			"value": schema.StringAttribute{Computed: true, Description: "The address."},
		}},
	}
	attrs["conditions"] = conditionsDataAttribute("Gateway")
	resp.Schema = schema.Schema{
		Description: "A Gateway API Gateway with its status: class, listeners with their attached routes, addresses " +
			"and conditions. It reads any Gateway, whoever manages it; the per-listener route counts from RoutingFragments " +
			"are only non-zero for Gateways served by varnishgw.",
		Attributes: attrs,
	}
}

func (d *gatewayDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

func (d *gatewayDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m gatewayDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !requireClients(d.c, &resp.Diagnostics) {
		return
	}
	ref := object.Ref{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}
	gw, err := d.c.Gateway.GatewayV1().Gateways(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		resp.Diagnostics.AddError("Read the Gateway "+ref.String(), gatewayDataReadDetail(ref, err))
		return
	}
	frags, _, err := d.c.GatewayFragments(ctx, ref)
	if err != nil {
		resp.Diagnostics.AddError("Read the route fragments of Gateway "+ref.String(), err.Error())
		return
	}
	fillGatewayDataModel(&m, gw, routing.ListenerAttachedRoutes(frags))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// fillGatewayDataModel fills m from gw and the per-listener route counts of its
// fragments.
func fillGatewayDataModel(m *gatewayDataModel, gw *gatewayv1.Gateway, counted map[string]int32) {
	m.ID = types.StringValue(gw.Namespace + "/" + gw.Name)
	m.GatewayClassName = types.StringValue(string(gw.Spec.GatewayClassName))
	m.Generation = types.Int64Value(gw.Generation)
	status := map[gatewayv1.SectionName]*gatewayv1.ListenerStatus{}
	for i := range gw.Status.Listeners {
		status[gw.Status.Listeners[i].Name] = &gw.Status.Listeners[i]
	}
	m.Listeners = make([]gatewayDataListenerModel, 0, len(gw.Spec.Listeners))
	for _, l := range gw.Spec.Listeners {
		lm := gatewayDataListenerModel{
			Name:           types.StringValue(string(l.Name)),
			Hostname:       types.StringNull(),
			Port:           types.Int64Value(int64(l.Port)),
			Protocol:       types.StringValue(string(l.Protocol)),
			AttachedRoutes: types.Int64Null(),
			FragmentRoutes: types.Int64Value(int64(counted[string(l.Name)])),
			Conditions:     []conditionDataModel{},
		}
		if l.Hostname != nil && *l.Hostname != "" {
			lm.Hostname = types.StringValue(string(*l.Hostname))
		}
		if st := status[l.Name]; st != nil {
			lm.AttachedRoutes = types.Int64Value(int64(st.AttachedRoutes))
			lm.Conditions = conditionDataModels(st.Conditions)
		}
		m.Listeners = append(m.Listeners, lm)
	}
	m.Addresses = make([]gatewayDataAddressModel, 0, len(gw.Status.Addresses))
	for _, a := range gw.Status.Addresses {
		typ := string(gatewayv1.IPAddressType)
		if a.Type != nil {
			typ = string(*a.Type)
		}
		m.Addresses = append(m.Addresses, gatewayDataAddressModel{Type: types.StringValue(typ), Value: types.StringValue(a.Value)})
	}
	m.Conditions = conditionDataModels(gw.Status.Conditions)
}

func conditionDataModels(cs []metav1.Condition) []conditionDataModel {
	out := make([]conditionDataModel, 0, len(cs))
	for _, c := range cs {
		out = append(out, conditionDataModel{
			Type:               types.StringValue(c.Type),
			Status:             types.StringValue(string(c.Status)),
			Reason:             types.StringValue(c.Reason),
			Message:            types.StringValue(c.Message),
			ObservedGeneration: types.Int64Value(c.ObservedGeneration),
		})
	}
	return out
}
