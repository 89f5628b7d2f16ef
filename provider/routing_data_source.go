package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vgwapi"
)

var (
	_ datasource.DataSource              = (*routingDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*routingDataSource)(nil)
)

// NewRoutingDataSource is the varnishgw_routing data source.
func NewRoutingDataSource() datasource.DataSource { return &routingDataSource{} }

type routingDataSource struct{ c *clients }

type routingDataModel struct {
	ID                types.String            `tfsdk:"id"`
	Namespace         types.String            `tfsdk:"namespace"`
	Name              types.String            `tfsdk:"name"`
	ResolveEndpoints  types.Bool              `tfsdk:"resolve_endpoints"`
	Valid             types.Bool              `tfsdk:"valid"`
	GhostJSON         types.String            `tfsdk:"ghost_json"`
	VHosts            []routingVHostModel     `tfsdk:"vhosts"`
	Conflicts         []routingConflictModel  `tfsdk:"conflicts"`
	RejectedFragments []rejectedFragmentModel `tfsdk:"rejected_fragments"`
	Pods              []routingPodModel       `tfsdk:"pods"`
}

type routingVHostModel struct {
	Hostname types.String        `tfsdk:"hostname"`
	Sockets  []string            `tfsdk:"sockets"`
	Routes   []routingRouteModel `tfsdk:"routes"`
}

type routingRouteModel struct {
	Name            types.String          `tfsdk:"name"`
	Route           types.String          `tfsdk:"route"`
	RuleIndex       types.Int64           `tfsdk:"rule_index"`
	MatchIndex      types.Int64           `tfsdk:"match_index"`
	PrecedenceGroup types.Int64           `tfsdk:"precedence_group"`
	PathType        types.String          `tfsdk:"path_type"`
	PathValue       types.String          `tfsdk:"path_value"`
	Method          types.String          `tfsdk:"method"`
	CachePolicy     types.String          `tfsdk:"cache_policy"`
	Backends        []routingBackendModel `tfsdk:"backends"`
}

type routingBackendModel struct {
	Namespace types.String `tfsdk:"namespace"`
	Name      types.String `tfsdk:"name"`
	Port      types.Int64  `tfsdk:"port"`
	Weight    types.Int64  `tfsdk:"weight"`
}

type routingConflictModel struct {
	Route    types.String `tfsdk:"route"`
	Winner   types.String `tfsdk:"winner"`
	Hostname types.String `tfsdk:"hostname"`
	Socket   types.String `tfsdk:"socket"`
	Message  types.String `tfsdk:"message"`
}

type rejectedFragmentModel struct {
	Fragment        types.String `tfsdk:"fragment"`
	ResourceVersion types.String `tfsdk:"resource_version"`
	Reason          types.String `tfsdk:"reason"`
	Kept            types.String `tfsdk:"kept"`
}

type routingPodModel struct {
	Name                     types.String            `tfsdk:"name"`
	FragmentsResourceVersion types.String            `tfsdk:"fragments_resource_version"`
	GatewayGeneration        types.Int64             `tfsdk:"gateway_generation"`
	Fragments                types.Int64             `tfsdk:"fragments"`
	RejectedFragments        []rejectedFragmentModel `tfsdk:"rejected_fragments"`
}

func rejectedFragmentModels(ns string, rs []vgwapi.Rejection) []rejectedFragmentModel {
	out := []rejectedFragmentModel{}
	for _, r := range rs {
		out = append(out, rejectedFragmentModel{
			Fragment: types.StringValue(ns + "/" + r.Name), ResourceVersion: types.StringValue(r.ResourceVersion),
			Reason: types.StringValue(r.Reason), Kept: types.StringValue(r.Kept),
		})
	}
	return out
}

func rejectedFragmentAttributes(kept string) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"fragment":         schema.StringAttribute{Computed: true, Description: "The RoutingFragment as namespace/name."},
		"resource_version": schema.StringAttribute{Computed: true, Description: "The resource version that was rejected."},
		"reason":           schema.StringAttribute{Computed: true, Description: "Why it was rejected, and what to do."},
		"kept":             schema.StringAttribute{Computed: true, Description: kept},
	}
}

func (d *routingDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_routing"
}

func gatewayRefDataAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{
			Computed:    true,
			Description: "The Gateway as namespace/name.",
		},
		"namespace": schema.StringAttribute{
			Required:    true,
			Description: "The namespace of the Gateway.",
			Validators:  []validator.String{stringvalidator.RegexMatches(dnsLabel, "must be a namespace name (a DNS label)")},
		},
		"name": schema.StringAttribute{
			Required:    true,
			Description: "The name of the Gateway.",
			Validators: []validator.String{
				stringvalidator.LengthBetween(1, 253),
				stringvalidator.RegexMatches(dnsSubdomain, "must be a Gateway name (a lower-case DNS subdomain)"),
			},
		},
	}
}

func (d *routingDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := gatewayRefDataAttributes()
	attrs["resolve_endpoints"] = schema.BoolAttribute{
		Optional: true,
		Description: "Whether to resolve backend Services to their ready endpoints, as the chaperone does at run time, so " +
			"that ghost_json lists them (this reads the referenced Services, EndpointSlices and ReferenceGrants). " +
			"The names of ExternalName Services are not looked up here, so their entries have no endpoints. " +
			"Endpoints change whenever pods do: leave it unset (false) for values that only change with the " +
			"configuration.",
	}
	attrs["valid"] = schema.BoolAttribute{
		Computed: true,
		Description: "Whether every RoutingFragment of the Gateway can be read: false when one is rejected (see " +
			"rejected_fragments). The gateway pods then serve the other routes as usual, and the rejected fragment's " +
			"route with its last accepted version where a pod has one. The other attributes show the routing of the " +
			"readable fragments.",
	}
	attrs["ghost_json"] = schema.StringAttribute{
		Computed: true,
		Description: "The routing as the ghost.json document (version 2) the chaperone writes for the ghost VMOD: " +
			"routes name backends of its backends table and cache policies of its cachePolicies table. The table lists endpoints only with resolve_endpoints; otherwise " +
			"every entry's endpoints list is empty and no reference is marked unresolved (except one of a kind other than Service).",
	}
	attrs["vhosts"] = schema.ListNestedAttribute{
		Computed:    true,
		Description: "The virtual hosts of the merged routing table, sorted by hostname.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"hostname": schema.StringAttribute{Computed: true, Description: `The hostname the virtual host serves; "*" for any host.`},
			"sockets": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				Description: "The listener sockets the virtual host is served on, by port (port-8080 for all listeners on port 8080)."},
			"routes": schema.ListNestedAttribute{
				Computed:    true,
				Description: "The route matches of the virtual host in the order ghost tries them (Gateway API precedence).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":             schema.StringAttribute{Computed: true, Description: "The ghost route name: namespace/route/rule index/match index."},
					"route":            schema.StringAttribute{Computed: true, Description: "The HTTPRoute the match comes from, as namespace/name."},
					"rule_index":       schema.Int64Attribute{Computed: true, Description: "The index of the rule in the HTTPRoute's rules."},
					"match_index":      schema.Int64Attribute{Computed: true, Description: "The index of the match in the rule's matches."},
					"precedence_group": schema.Int64Attribute{Computed: true, Description: "The hostname precedence group; 0 for routes with the most specific hostname."},
					"path_type":        schema.StringAttribute{Computed: true, Description: "The path match type: Exact, PathPrefix or RegularExpression."},
					"path_value":       schema.StringAttribute{Computed: true, Description: "The path match value."},
					"method":           schema.StringAttribute{Computed: true, Description: "The HTTP method the match requires, or null for any method."},
					"cache_policy": schema.StringAttribute{Computed: true, Description: "The name of the match's effective cache policy in " +
						"ghost_json's cachePolicies table (\"gateway\" for the Gateway's default), or null when its requests are passed."},
					"backends": schema.ListNestedAttribute{
						Computed:    true,
						Description: "The weighted backend Services of the rule.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"namespace": schema.StringAttribute{Computed: true, Description: "The namespace of the Service."},
							"name":      schema.StringAttribute{Computed: true, Description: "The name of the Service."},
							"port":      schema.Int64Attribute{Computed: true, Description: "The Service port."},
							"weight":    schema.Int64Attribute{Computed: true, Description: "The weight of the backend within the rule."},
						}},
					},
				}},
			},
		}},
	}
	attrs["conflicts"] = schema.ListNestedAttribute{
		Computed: true,
		Description: "What the merge could not apply as written: listeners that are not served, fragments for listeners " +
			"the Gateway no longer has, duplicate fragments, and matches shadowed by an identical match that takes precedence.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"route":    schema.StringAttribute{Computed: true, Description: "The route (namespace/name, or a ghost route name) that loses; empty for listener conflicts."},
			"winner":   schema.StringAttribute{Computed: true, Description: "The route that takes precedence, if any."},
			"hostname": schema.StringAttribute{Computed: true, Description: "The virtual host of a shadowed match."},
			"socket":   schema.StringAttribute{Computed: true, Description: "The socket of a shadowed match."},
			"message":  schema.StringAttribute{Computed: true, Description: "What happened and what to do."},
		}},
	}
	attrs["rejected_fragments"] = schema.ListNestedAttribute{
		Computed: true,
		Description: "RoutingFragments of the Gateway that cannot be read (corrupt or hand-edited, for another Gateway or " +
			"route than their name says, another fragment version), read with the gateway pods' own reader.",
		NestedObject: schema.NestedAttributeObject{Attributes: rejectedFragmentAttributes("Always empty here (the data source keeps no earlier versions); see pods.")},
	}
	attrs["pods"] = schema.ListNestedAttribute{
		Computed: true,
		Description: "What each gateway pod reports it serves (its GatewayPodReport), sorted by pod name: how far its view of " +
			"the RoutingFragments goes, and the fragments it rejected.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Computed: true, Description: "The pod's name."},
			"fragments_resource_version": schema.StringAttribute{Computed: true,
				Description: "Every RoutingFragment write up to this resource version is served by the pod, or rejected."},
			"gateway_generation": schema.Int64Attribute{Computed: true, Description: "The Gateway generation of the routing it serves."},
			"fragments":          schema.Int64Attribute{Computed: true, Description: "The number of fragments it serves."},
			"rejected_fragments": schema.ListNestedAttribute{
				Computed:     true,
				Description:  "The fragments the pod rejected.",
				NestedObject: schema.NestedAttributeObject{Attributes: rejectedFragmentAttributes("The resource version of the fragment's last accepted version the pod serves instead; empty when it serves none (the route's hosts answer 404 there).")},
			},
		}},
	}
	resp.Schema = schema.Schema{
		Description: "The merged routing table of a Gateway as its pods see it: the provider reads the Gateway and its " +
			"RoutingFragments and merges them with the same code as the chaperone, conflicts and rejected fragments " +
			"included, and reads what each pod reports it serves. Use it to check what a gateway will serve before or " +
			"without looking at a pod.",
		Attributes: attrs,
	}
}

func (d *routingDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

func (d *routingDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m routingDataModel
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
	frags, rejected, err := d.c.GatewayFragments(ctx, ref)
	if err != nil {
		resp.Diagnostics.AddError("Read the route fragments of Gateway "+ref.String(), err.Error())
		return
	}
	pods, err := d.c.routingPods(ctx, ref)
	if err != nil {
		resp.Diagnostics.AddError("Read the GatewayPodReports of Gateway "+ref.String(), err.Error())
		return
	}
	// With the listeners of its ListenerSets, as the pods serve them.
	served, err := routing.WithListenerSetListeners(gw)
	if err != nil {
		resp.Diagnostics.AddError("Read the ListenerSet listeners of Gateway "+ref.String(), err.Error())
		return
	}
	table, err := routing.Merge(served, frags)
	if err != nil {
		resp.Diagnostics.AddError("Merge the routing of Gateway "+ref.String(), err.Error())
		return
	}
	var objs *routing.Objects // nil: nothing looked up, no endpoints
	if m.ResolveEndpoints.ValueBool() {
		if objs, err = d.c.RoutingBackendObjects(ctx, frags); err != nil {
			resp.Diagnostics.AddError("Read the backends of Gateway "+ref.String(), err.Error())
			return
		}
		// ExternalName Services resolve as in the pods when the class
		// allows them, but the provider does not look their names up:
		// their entries have no endpoints here.
		gc, err := d.c.Gateway.GatewayV1().GatewayClasses().Get(ctx, string(gw.Spec.GatewayClassName), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			resp.Diagnostics.AddError("Read the GatewayClass of Gateway "+ref.String(), err.Error())
			return
		}
		if err == nil {
			if objs.ExternalNameServices, err = d.c.ClassExternalNames(ctx, gc); err != nil {
				resp.Diagnostics.AddError("Read the GatewayClass of Gateway "+ref.String(), err.Error())
				return
			}
		}
	}
	doc, err := routing.Resolve(table, objs)
	if err != nil {
		resp.Diagnostics.AddError("Resolve the backends of Gateway "+ref.String(), err.Error())
		return
	}
	data, err := ghostjson.Marshal(doc)
	if err != nil {
		resp.Diagnostics.AddError("Encode the routing of Gateway "+ref.String(), err.Error())
		return
	}

	m.ID = types.StringValue(ref.String())
	m.Valid = types.BoolValue(len(rejected) == 0)
	m.GhostJSON = types.StringValue(string(data))
	m.RejectedFragments = rejectedFragmentModels(ref.Namespace, rejected)
	m.Pods = pods
	m.VHosts = routingVHostModels(table, doc)
	m.Conflicts = []routingConflictModel{}
	for _, c := range table.Conflicts {
		m.Conflicts = append(m.Conflicts, routingConflictModel{
			Route: types.StringValue(c.Route), Winner: types.StringValue(c.Winner),
			Hostname: types.StringValue(c.Hostname), Socket: types.StringValue(c.Socket),
			Message: types.StringValue(c.Message),
		})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func routingVHostModels(t *routing.Table, doc *ghostjson.Document) []routingVHostModel {
	// the cache policy of each route of doc, by vhost and route name
	type key struct{ host, route string }
	policies := map[key]string{}
	for _, v := range doc.VHosts {
		for _, r := range v.Routes {
			if r.Cache != "" {
				policies[key{v.Hostname, r.Name}] = r.Cache
			}
		}
	}
	out := make([]routingVHostModel, 0, len(t.VHosts))
	for _, v := range t.VHosts {
		vm := routingVHostModel{Hostname: types.StringValue(v.Hostname), Sockets: slices.Clone(v.Sockets), Routes: make([]routingRouteModel, 0, len(v.Routes))}
		if vm.Sockets == nil {
			vm.Sockets = []string{}
		}
		for i := range v.Routes {
			tr := &v.Routes[i]
			match := tr.Match()
			rm := routingRouteModel{
				Name:            types.StringValue(tr.Name()),
				Route:           types.StringValue(tr.Route.String()),
				RuleIndex:       types.Int64Value(int64(tr.Rule.Index)),
				MatchIndex:      types.Int64Value(int64(tr.MatchIndex)),
				PrecedenceGroup: types.Int64Value(int64(tr.Group)),
				PathType:        types.StringValue(match.Path.Type),
				PathValue:       types.StringValue(match.Path.Value),
				Method:          types.StringNull(),
				CachePolicy:     types.StringNull(),
				Backends:        make([]routingBackendModel, 0, len(tr.Rule.Backends)),
			}
			if c, ok := policies[key{v.Hostname, tr.Name()}]; ok {
				rm.CachePolicy = types.StringValue(c)
			}
			if match.Method != "" {
				rm.Method = types.StringValue(match.Method)
			}
			for _, b := range tr.Rule.Backends {
				rm.Backends = append(rm.Backends, routingBackendModel{
					Namespace: types.StringValue(b.Namespace), Name: types.StringValue(b.Name),
					Port: types.Int64Value(int64(b.Port)), Weight: types.Int64Value(int64(b.Weight)),
				})
			}
			vm.Routes = append(vm.Routes, rm)
		}
		out = append(out, vm)
	}
	return out
}

// gatewayDataReadDetail explains a failed Gateway read.
func gatewayDataReadDetail(ref object.Ref, err error) string {
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("There is no Gateway %q in namespace %q. Check namespace and name, or create the Gateway first "+
			"(depend on its resource so that it exists when the data source is read).", ref.Name, ref.Namespace)
	}
	return fmt.Sprintf("get Gateway %s: %v", ref, err)
}

// routingPods reads the GatewayPodReports of gw, sorted by pod name.
func (c *clients) routingPods(ctx context.Context, gw object.Ref) ([]routingPodModel, error) {
	reports, err := vgwapi.ReadReports(ctx, c.Dynamic, gw)
	if apierrors.IsNotFound(err) {
		return []routingPodModel{}, nil // the CRD is not installed yet
	}
	if err != nil {
		return nil, err
	}
	out := []routingPodModel{}
	for _, pod := range slices.Sorted(maps.Keys(reports)) {
		m := routingPodModel{Name: types.StringValue(pod), FragmentsResourceVersion: types.StringValue(""),
			RejectedFragments: []rejectedFragmentModel{}}
		if r := reports[pod].Status.Routing; r != nil {
			m.FragmentsResourceVersion = types.StringValue(r.FragmentsResourceVersion)
			m.GatewayGeneration = types.Int64Value(r.GatewayGeneration)
			m.Fragments = types.Int64Value(int64(r.Fragments))
			m.RejectedFragments = rejectedFragmentModels(gw.Namespace, r.Rejected)
		}
		out = append(out, m)
	}
	return out, nil
}
