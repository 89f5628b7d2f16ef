package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/control"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/mainvcl"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

var (
	_ resource.Resource                   = (*gatewayResource)(nil)
	_ resource.ResourceWithConfigure      = (*gatewayResource)(nil)
	_ resource.ResourceWithImportState    = (*gatewayResource)(nil)
	_ resource.ResourceWithValidateConfig = (*gatewayResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*gatewayResource)(nil)
)

// NewGatewayResource is the varnishgw_gateway resource.
func NewGatewayResource() resource.Resource { return &gatewayResource{} }

type gatewayResource struct{ c *clients }

type gatewayModel struct {
	ID                     types.String         `tfsdk:"id"`
	Namespace              types.String         `tfsdk:"namespace"`
	Name                   types.String         `tfsdk:"name"`
	GatewayClassName       types.String         `tfsdk:"gateway_class_name"`
	Listeners              []listenerModel      `tfsdk:"listener"`
	SpecAddresses          types.List           `tfsdk:"address"`
	AllowedListeners       types.Object         `tfsdk:"allowed_listeners"`
	TLS                    types.Object         `tfsdk:"tls"`
	DefaultScope           types.String         `tfsdk:"default_scope"`
	VCL                    types.String         `tfsdk:"vcl"`
	Mode                   types.String         `tfsdk:"mode"`
	Replicas               types.Int64          `tfsdk:"replicas"`
	DrainTimeoutSeconds    types.Int64          `tfsdk:"drain_timeout_seconds"`
	Resources              *resourcesModel      `tfsdk:"resources"`
	Pod                    *podModel            `tfsdk:"pod"`
	Infrastructure         *infrastructureModel `tfsdk:"infrastructure"`
	Cache                  *cachePolicyModel    `tfsdk:"cache"`
	EscapedSlashes         types.String         `tfsdk:"escaped_slashes"`
	ServiceType            types.String         `tfsdk:"service_type"`
	ServiceAnnotations     types.Map            `tfsdk:"service_annotations"`
	ExternalTrafficPolicy  types.String         `tfsdk:"external_traffic_policy"`
	HTTP2                  types.Bool           `tfsdk:"http2"`
	ProxyProtocol          types.Bool           `tfsdk:"proxy_protocol"`
	ProxyProtocolSources   types.Set            `tfsdk:"proxy_protocol_sources"`
	InvalidationPort       types.Int64          `tfsdk:"invalidation_endpoint_port"`
	Sysctls                types.Map            `tfsdk:"sysctls"`
	PDBMaxUnavailable      types.String         `tfsdk:"pdb_max_unavailable"`
	WaitForRollout         types.Bool           `tfsdk:"wait_for_rollout"`
	RolloutTimeout         types.String         `tfsdk:"rollout_timeout"`
	Addresses              types.List           `tfsdk:"addresses"`
	Conditions             types.List           `tfsdk:"conditions"`
	ListenerAttachedRoutes types.Map            `tfsdk:"listener_attached_routes"`
	StartHash              types.String         `tfsdk:"start_hash"`
	MainVCLSHA256          types.String         `tfsdk:"main_vcl_sha256"`
}

type listenerModel struct {
	Name          types.String        `tfsdk:"name"`
	Port          types.Int64         `tfsdk:"port"`
	Protocol      types.String        `tfsdk:"protocol"`
	Hostname      types.String        `tfsdk:"hostname"`
	TLS           *listenerTLSModel   `tfsdk:"tls"`
	AllowedRoutes *allowedRoutesModel `tfsdk:"allowed_routes"`
}

// listenerTLSModel is a listener's tls block.
type listenerTLSModel struct {
	Mode            types.String          `tfsdk:"mode"`
	Options         types.Map             `tfsdk:"options"`
	CertificateRefs []certificateRefModel `tfsdk:"certificate_ref"`
}

// certificateRefModel is a certificate_ref block: a Gateway API
// SecretObjectReference. Only the reference is stored, never the Secret.
type certificateRefModel struct {
	Group     types.String `tfsdk:"group"`
	Kind      types.String `tfsdk:"kind"`
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
}

type allowedRoutesModel struct {
	Namespaces          types.String              `tfsdk:"namespaces"`
	Selector            types.Map                 `tfsdk:"selector"`
	SelectorExpressions []selectorExpressionModel `tfsdk:"selector_expression"`
	Kinds               []routeKindModel          `tfsdk:"kind"`
}

type selectorExpressionModel struct {
	Key      types.String   `tfsdk:"key"`
	Operator types.String   `tfsdk:"operator"`
	Values   []types.String `tfsdk:"values"`
}

type routeKindModel struct {
	Group types.String `tfsdk:"group"`
	Kind  types.String `tfsdk:"kind"`
}

type resourcesModel struct {
	Requests types.Map `tfsdk:"requests"`
	Limits   types.Map `tfsdk:"limits"`
}

var conditionType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"type": types.StringType, "status": types.StringType, "reason": types.StringType, "message": types.StringType,
}}

func (r *gatewayResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_gateway"
}

func (r *gatewayResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.c = configureClients(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig checks the gateway as its pods will serve it: what the
// provider rejects itself, then the listeners as the routing core sees
// them, each error once, at the argument or block it is about.
func (r *gatewayResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m gatewayModel
	if d := req.Config.Get(ctx, &m); d.HasError() {
		return // unknown values: checked at apply
	}
	rejectUnsupportedGateway(&m, req.Config.Raw, &resp.Diagnostics)
	reported := map[string]bool{} // attribute paths with an error of the provider's
	for i, l := range m.Listeners {
		if p := l.Protocol.ValueString(); !l.Protocol.IsNull() && !l.Protocol.IsUnknown() && p != "HTTP" && p != "HTTPS" {
			ap := path.Root("listener").AtListIndex(i).AtName("protocol")
			reported[ap.String()] = true
			resp.Diagnostics.AddAttributeError(ap, "Unsupported listener protocol",
				fmt.Sprintf("listener %q: protocol %q is not served: varnishgw serves HTTP and HTTPS (TLS terminated in the gateway pod); "+
					"TLS passthrough, TCP and UDP are not. Set protocol = \"HTTP\" or \"HTTPS\".", l.Name.ValueString(), p))
		}
	}
	for i, l := range m.Listeners {
		ar := l.AllowedRoutes
		if ar == nil || ar.Namespaces.IsUnknown() || ar.Selector.IsUnknown() {
			continue
		}
		p := path.Root("listener").AtListIndex(i).AtName("allowed_routes")
		hasSelector := len(stringMap(ar.Selector)) > 0 || len(ar.SelectorExpressions) > 0
		switch {
		case ar.Namespaces.ValueString() == "Selector" && !hasSelector:
			reported[p.AtName("selector").String()] = true
			resp.Diagnostics.AddAttributeError(p.AtName("selector"), "Invalid allowed routes",
				fmt.Sprintf("listener %q: namespaces = \"Selector\" needs selector, the labels a route's namespace must have, for example "+
					"selector = { team = \"shop\" }, or selector_expression blocks", l.Name.ValueString()))
		case ar.Namespaces.ValueString() != "Selector" && hasSelector:
			at := p.AtName("selector")
			if len(stringMap(ar.Selector)) == 0 {
				at = p.AtName("selector_expression").AtListIndex(0)
			}
			resp.Diagnostics.AddAttributeError(at, "Invalid allowed routes",
				fmt.Sprintf("listener %q: selector and selector_expression are used only with namespaces = \"Selector\" (namespaces is %q); "+
					"set namespaces = \"Selector\" or remove them", l.Name.ValueString(), ar.Namespaces.ValueString()))
		}
	}
	if etp := m.ExternalTrafficPolicy; !etp.IsNull() && !etp.IsUnknown() && !m.ServiceType.IsUnknown() &&
		(m.ServiceType.IsNull() || m.ServiceType.ValueString() == string(corev1.ServiceTypeClusterIP)) {
		resp.Diagnostics.AddAttributeError(path.Root("external_traffic_policy"), "External traffic policy without external traffic",
			fmt.Sprintf("external_traffic_policy = %q applies to traffic from outside the cluster, which a ClusterIP Service does not take; "+
				"set service_type = \"LoadBalancer\" (or \"NodePort\"), or remove external_traffic_policy.", etp.ValueString()))
	}
	m.Pod.validate(&resp.Diagnostics)
	m.validateInvalidationPort(&resp.Diagnostics)
	m.validateProxyProtocol(&resp.Diagnostics)
	m.validateMetadataKeys(&resp.Diagnostics)
	validateCache(path.Root("cache"), field.NewPath("cache"), m.Cache, &resp.Diagnostics)
	if m.Resources != nil {
		for attr, v := range map[string]types.Map{"requests": m.Resources.Requests, "limits": m.Resources.Limits} {
			if _, err := parseResources("resources."+attr, stringMap(v)); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("resources").AtName(attr), "Invalid gateway resources", err.Error())
			}
		}
	}
	if !req.Config.Raw.IsFullyKnown() {
		return
	}
	gw, err := m.toGateway(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Invalid gateway", err.Error())
		return
	}
	var s resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &s)
	for _, e := range append(routing.ValidateGateway(gw), routing.ValidateAllowedListeners(gw)...) {
		p, text := attributePath(ctx, s.Schema, e.Field)
		switch {
		case text == "":
			resp.Diagnostics.AddError("Invalid gateway", e.Error())
		case reported[p.String()], e.Field == "spec.listeners":
			// the provider's own error says it, or the listener block's
			// validators (at least one, at most 64)
		default:
			resp.Diagnostics.AddAttributeError(diagnosticPath(req.Config.Raw, p), "Invalid gateway listener", fmt.Sprintf("%s: %s", text, e.ErrorBody()))
		}
	}
}

// validateMetadataKeys rejects a label or annotation key set in two
// attributes that reach the same object, where one would silently win.
func (m *gatewayModel) validateMetadataKeys(diags *diag.Diagnostics) {
	if m.Infrastructure == nil {
		return
	}
	infraLabels, infraAnn := stringMap(m.Infrastructure.Labels), stringMap(m.Infrastructure.Annotations)
	twice := func(p path.Path, kind, key, other string) {
		diags.AddAttributeError(p, "Key set twice",
			fmt.Sprintf("the %s %q is set in infrastructure.%ss, which apply to every object generated for the gateway, and in %s; "+
				"set it in one place", kind, key, kind, other))
	}
	if m.Pod != nil {
		for _, k := range slices.Sorted(maps.Keys(stringMap(m.Pod.Labels))) {
			if _, ok := infraLabels[k]; ok {
				twice(path.Root("pod").AtName("labels").AtMapKey(k), "label", k, "pod.labels")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(stringMap(m.Pod.Annotations))) {
			if _, ok := infraAnn[k]; ok {
				twice(path.Root("pod").AtName("annotations").AtMapKey(k), "annotation", k, "pod.annotations")
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(stringMap(m.ServiceAnnotations))) {
		if _, ok := infraAnn[k]; ok {
			twice(path.Root("service_annotations").AtMapKey(k), "annotation", k, "service_annotations")
		}
	}
}

// allowedRoutes is the listener's allowedRoutes: routes of the Gateway's
// namespace when the block is absent.
func (ar *allowedRoutesModel) allowedRoutes() *gatewayv1.AllowedRoutes {
	from := gatewayv1.NamespacesFromSame
	out := &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}
	if ar == nil {
		return out
	}
	if v := ar.Namespaces.ValueString(); v != "" {
		from = gatewayv1.FromNamespaces(v)
	}
	labels := stringMap(ar.Selector)
	var exprs []metav1.LabelSelectorRequirement
	for _, e := range ar.SelectorExpressions {
		exprs = append(exprs, metav1.LabelSelectorRequirement{
			Key:      e.Key.ValueString(),
			Operator: metav1.LabelSelectorOperator(e.Operator.ValueString()),
			Values:   stringsOf[string](e.Values),
		})
	}
	if len(labels) > 0 || len(exprs) > 0 || from == gatewayv1.NamespacesFromSelector {
		out.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs}
	}
	for _, k := range ar.Kinds {
		out.Kinds = append(out.Kinds, gatewayv1.RouteGroupKind{Group: strPtr[gatewayv1.Group](k.Group), Kind: gatewayv1.Kind(k.Kind.ValueString())})
	}
	return out
}

// listenerTLS is the listener's tls, nil without the block. Mode is
// written as configured (the API server defaults it to Terminate).
func (t *listenerTLSModel) listenerTLS() *gatewayv1.ListenerTLSConfig {
	if t == nil {
		return nil
	}
	out := &gatewayv1.ListenerTLSConfig{Mode: strPtr[gatewayv1.TLSModeType](t.Mode)}
	if opts := stringMap(t.Options); len(opts) > 0 {
		out.Options = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{}
		for k, v := range opts {
			out.Options[gatewayv1.AnnotationKey(k)] = gatewayv1.AnnotationValue(v)
		}
	}
	for _, r := range t.CertificateRefs {
		out.CertificateRefs = append(out.CertificateRefs, gatewayv1.SecretObjectReference{
			Group:     strPtr[gatewayv1.Group](r.Group),
			Kind:      strPtr[gatewayv1.Kind](r.Kind),
			Name:      gatewayv1.ObjectName(r.Name.ValueString()),
			Namespace: strPtr[gatewayv1.Namespace](r.Namespace),
		})
	}
	return out
}

// readListenerTLS is the tls block of a live listener's tls. The values
// the API server defaults (mode Terminate, group "", kind Secret) stay
// unset when they were unset before (or on import).
func readListenerTLS(prior *listenerTLSModel, t *gatewayv1.ListenerTLSConfig) *listenerTLSModel {
	if t == nil {
		return nil
	}
	out := &listenerTLSModel{Mode: nonDefault(t.Mode, string(gatewayv1.TLSModeTerminate)), Options: types.MapNull(types.StringType), CertificateRefs: []certificateRefModel{}}
	if prior != nil && prior.Mode.ValueString() == string(gatewayv1.TLSModeTerminate) && t.Mode != nil && *t.Mode == gatewayv1.TLSModeTerminate {
		out.Mode = prior.Mode
	}
	if len(t.Options) > 0 {
		opts := map[string]string{}
		for k, v := range t.Options {
			opts[string(k)] = string(v)
		}
		out.Options = stringMapValue(opts)
	} else if prior != nil && !prior.Options.IsNull() && len(prior.Options.Elements()) == 0 {
		out.Options = prior.Options
	}
	for i, r := range t.CertificateRefs {
		rm := certificateRefModel{
			Group:     nonDefault(r.Group, ""),
			Kind:      nonDefault(r.Kind, "Secret"),
			Name:      types.StringValue(string(r.Name)),
			Namespace: strVal(r.Namespace),
		}
		if prior != nil && i < len(prior.CertificateRefs) {
			was := prior.CertificateRefs[i]
			if was.Group.ValueString() == "" && !was.Group.IsNull() && rm.Group.IsNull() {
				rm.Group = was.Group
			}
			if was.Kind.ValueString() == "Secret" && rm.Kind.IsNull() {
				rm.Kind = was.Kind
			}
		}
		out.CertificateRefs = append(out.CertificateRefs, rm)
	}
	return out
}

func (m *gatewayModel) ref() routing.ObjectRef {
	return routing.ObjectRef{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}
}

// toGateway is the Gateway the model describes.
func (m *gatewayModel) toGateway(ctx context.Context) (*gatewayv1.Gateway, error) {
	gw := &gatewayv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString(), Labels: managedLabels},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(m.GatewayClassName.ValueString()),
			Infrastructure:   gatewayInfrastructure(m.Infrastructure.settings()),
		},
	}
	for _, l := range m.Listeners {
		gl := gatewayv1.Listener{
			Name:     gatewayv1.SectionName(l.Name.ValueString()),
			Port:     gatewayv1.PortNumber(l.Port.ValueInt64()),
			Protocol: gatewayv1.ProtocolType(l.Protocol.ValueString()),
		}
		if gl.Protocol == "" {
			gl.Protocol = gatewayv1.HTTPProtocolType
		}
		if !l.Hostname.IsNull() {
			h := gatewayv1.Hostname(l.Hostname.ValueString())
			gl.Hostname = &h
		}
		gl.AllowedRoutes = l.AllowedRoutes.allowedRoutes()
		gl.TLS = l.TLS.listenerTLS()
		gw.Spec.Listeners = append(gw.Spec.Listeners, gl)
	}
	al, err := m.allowedListeners(ctx)
	if err != nil {
		return nil, err
	}
	gw.Spec.AllowedListeners = al
	cache, err := gatewayCacheAnnotation(m.Cache)
	if err != nil {
		return nil, err
	}
	if cache != "" {
		gw.Annotations = map[string]string{routing.CachePolicyAnnotation: cache}
	}
	if v := m.EscapedSlashes.ValueString(); v != "" {
		if gw.Annotations == nil {
			gw.Annotations = map[string]string{}
		}
		gw.Annotations[routing.EscapedSlashesAnnotation] = v
	}
	return gw, nil
}

// runtimeSpec builds the runtime's description from the model and the
// class defaults.
func (m *gatewayModel) runtimeSpec(class *gwruntime.Class) (*gwruntime.Spec, error) {
	pod, err := m.Pod.settings()
	if err != nil {
		return nil, err
	}
	s := &gwruntime.Spec{
		Gateway:            m.ref(),
		ClassName:          m.GatewayClassName.ValueString(),
		Class:              class,
		Pod:                pod,
		Infra:              m.Infrastructure.settings(),
		Replicas:           int32(m.Replicas.ValueInt64()),
		Mode:               m.Mode.ValueString(),
		DrainTimeout:       m.DrainTimeoutSeconds.ValueInt64(),
		ServiceType:        corev1.ServiceType(m.ServiceType.ValueString()),
		ServiceAnnotations: stringMap(m.ServiceAnnotations),
		MaxUnavailable:     intstr.Parse(m.PDBMaxUnavailable.ValueString()),
		SidecarVarnishd:    varnishdArgs,
		BootVCL:            varnishd.BootVCL,
	}
	if !m.VCL.IsNull() {
		v := m.VCL.ValueString()
		s.GatewayVCL = &v
	}
	seen := map[int32]bool{}
	for _, l := range m.Listeners {
		p := int32(l.Port.ValueInt64())
		if !seen[p] {
			seen[p] = true
			s.Ports = append(s.Ports, p)
			if l.Protocol.ValueString() == string(gatewayv1.HTTPSProtocolType) {
				s.TLSPorts = append(s.TLSPorts, p)
			}
		}
	}
	slices.Sort(s.Ports)
	slices.Sort(s.TLSPorts)
	s.NoHTTP2 = !m.HTTP2.IsNull() && !m.HTTP2.ValueBool()
	s.ProxyProtocol = m.ProxyProtocol.ValueBool()
	s.ProxySources = m.proxySources()
	s.InvalidatePort = int32(m.InvalidationPort.ValueInt64())
	if sc := stringMap(m.Sysctls); len(sc) > 0 {
		s.Sysctls = sc
	}
	s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicy(m.ExternalTrafficPolicy.ValueString())
	gw, err := m.toGateway(context.Background())
	if err != nil {
		return nil, err
	}
	s.CertSecrets = routing.CertificateSecrets(gw)
	if m.Resources != nil {
		if s.Requests, err = parseResources("resources.requests", stringMap(m.Resources.Requests)); err != nil {
			return nil, err
		}
		if s.Limits, err = parseResources("resources.limits", stringMap(m.Resources.Limits)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ModifyPlan checks the gateway's pod template with a server-side dry run
// when it can be built (the class exists), so that the API server's
// errors show at plan time. For an existing gateway it also shows a change
// of the GatewayClass or of the ConfigMap of infrastructure.parameters_ref,
// and out-of-band changes of runtime objects that no attribute reflects (a
// deleted Role, an edited pod template), as an update: when the plan has no
// other change (start_hash and main_vcl_sha256 still hold the state's
// values) but the parameters as the cluster has them now give other
// hashes, or the runtime differs, they and the other computed attributes
// become unknown, so the gateway is updated. Known values are never
// planned: the class may change in the same apply, and apply computes them.
func (r *gatewayResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.c == nil || !req.Config.Raw.IsFullyKnown() {
		return
	}
	var plan gatewayModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() {
		return
	}
	create := req.State.Raw.IsNull()
	update := func() {
		for a, v := range map[string]attr.Value{
			"start_hash":               types.StringUnknown(),
			"main_vcl_sha256":          types.StringUnknown(),
			"addresses":                types.ListUnknown(types.StringType),
			"conditions":               types.ListUnknown(conditionType),
			"listener_attached_routes": types.MapUnknown(types.Int64Type),
		} {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(a), v)...)
		}
	}
	r.c.warnCertificates(ctx, &plan, &resp.Diagnostics)
	class, err := r.c.GatewayParameters(ctx, plan.GatewayClassName.ValueString(), plan.Namespace.ValueString(), plan.Infrastructure.settings())
	if control.IsInvalidParameters(err) {
		resp.Diagnostics.AddAttributeWarning(path.Root("infrastructure").AtName("parameters_ref"), "The gateway's parameters cannot be used",
			fmt.Sprintf("%v. Unless this changes before apply (for example because this configuration creates the ConfigMap), apply fails "+
				"and sets the Gateway's Accepted condition to False with reason InvalidParameters.", err))
		if !create {
			update()
		}
		return
	}
	if err != nil {
		return // apply reports it
	}
	spec, err := plan.runtimeSpec(class)
	if err != nil {
		return
	}
	if err := r.c.addListenerSets(ctx, &plan, spec); err != nil {
		resp.Diagnostics.AddWarning("Read the gateway's ListenerSets", err.Error()+"\nThe plan may miss the ports of the gateway's ListenerSets; apply reads them again.")
	}
	dry, dryErr := r.c.DryRunDeployment(ctx, spec)
	if apierrors.IsInvalid(dryErr) {
		resp.Diagnostics.AddError("Invalid gateway pod template",
			fmt.Sprintf("The API server rejects the gateway's Deployment: %v\nFix the attribute the field belongs to (pod, or the class's parameters).", dryErr))
		return
	}
	if create || plan.StartHash.IsUnknown() || plan.MainVCLSHA256.IsUnknown() {
		return // nothing to add: created or already updated
	}
	if changed := r.c.classChanges.of(plan.GatewayClassName.ValueString()); len(changed) > 0 {
		// The class changes in this apply: the pods and main.vcl are
		// made again from what it will be.
		tflog.Info(ctx, "the gateway's class changes in this plan; the gateway is updated after it",
			map[string]any{"class": plan.GatewayClassName.ValueString(), "attributes": changed})
		update()
		return
	}
	hashOK := plan.StartHash.ValueString() == spec.StartHash()
	if !hashOK {
		// A ListenerSet's apply may have brought the pods to what the
		// gateway plans now (its ports) since the state was written.
		d, err := r.c.Kube.AppsV1().Deployments(spec.Gateway.Namespace).Get(ctx, spec.Name(), metav1.GetOptions{})
		hashOK = err == nil && d.Spec.Template.Annotations[gwruntime.StartHashAnnotation] == spec.StartHash()
	}
	if hashOK && plan.MainVCLSHA256.ValueString() == spec.MainVCLDigest() {
		drift, err := "", dryErr
		if err == nil {
			drift, err = r.c.RuntimeDrift(ctx, spec, dry)
		}
		if err != nil {
			resp.Diagnostics.AddWarning("Check the gateway runtime", err.Error()+"\nThe plan may miss changes made outside Terraform.")
			return
		}
		if drift == "" {
			return
		}
		resp.Diagnostics.AddWarning("The gateway runtime changed outside Terraform",
			fmt.Sprintf("Gateway %s: %s. The next apply restores it.", spec.Gateway, drift))
	}
	update()
}

// warnCertificates warns at plan about the certificate Secrets of the
// HTTPS listeners that will not serve when applied: a Secret that does not
// exist (yet: cert-manager, for one, creates it after the Gateway; the
// listener serves once it exists, without another apply), one that is not
// of type kubernetes.io/tls, and one in another namespace that no
// ReferenceGrant lets the Gateway use. Neither is an error: the pods pick
// the Secret up when it appears, and report it on the listener's
// ResolvedRefs condition until then. The Secret is read for its type only;
// its data never enters the plan or the state.
func (c *clients) warnCertificates(ctx context.Context, m *gatewayModel, diags *diag.Diagnostics) {
	gwNS := m.Namespace.ValueString()
	grants := map[string][]*gatewayv1.ReferenceGrant{}
	checked := map[routing.ObjectRef]bool{}
	for i, l := range m.Listeners {
		if l.TLS == nil || l.Protocol.ValueString() != string(gatewayv1.HTTPSProtocolType) {
			continue
		}
		for j, r := range l.TLS.CertificateRefs {
			if (!r.Group.IsNull() && r.Group.ValueString() != "") || (!r.Kind.IsNull() && r.Kind.ValueString() != "Secret") || r.Name.IsUnknown() {
				continue // an error of ValidateConfig
			}
			ref := routing.ObjectRef{Namespace: gwNS, Name: r.Name.ValueString()}
			if v := r.Namespace.ValueString(); v != "" {
				ref.Namespace = v
			}
			if checked[ref] {
				continue
			}
			checked[ref] = true
			at := path.Root("listener").AtListIndex(i).AtName("tls").AtName("certificate_ref").AtListIndex(j).AtName("name")
			listener := l.Name.ValueString()
			if ref.Namespace != gwNS {
				if _, ok := grants[ref.Namespace]; !ok {
					list, err := c.Gateway.GatewayV1().ReferenceGrants(ref.Namespace).List(ctx, metav1.ListOptions{})
					if err != nil {
						diags.AddAttributeWarning(at, "Cannot check the certificate's ReferenceGrant",
							fmt.Sprintf("listing the ReferenceGrants of namespace %s failed: %v. Listener %q serves Secret %s only if a ReferenceGrant there "+
								"lets Gateways of namespace %s reference it.", ref.Namespace, err, listener, ref, gwNS))
						grants[ref.Namespace] = nil
						continue
					}
					grants[ref.Namespace] = []*gatewayv1.ReferenceGrant{}
					for k := range list.Items {
						grants[ref.Namespace] = append(grants[ref.Namespace], &list.Items[k])
					}
				}
				if g := grants[ref.Namespace]; g != nil && !routing.CertificateRefPermitted(g, gwNS, ref.Namespace, ref.Name) {
					diags.AddAttributeWarning(at, "The certificate Secret is in another namespace without a ReferenceGrant",
						fmt.Sprintf("Listener %q references Secret %s, but no ReferenceGrant in namespace %s lets Gateways of namespace %s reference it. "+
							"Until one does, the listener's ResolvedRefs condition is False with reason RefNotPermitted and the certificate is not served. "+
							"Create a ReferenceGrant in %s from group gateway.networking.k8s.io, kind Gateway, namespace %s to kind Secret (name %s), "+
							"or move the Secret to namespace %s.", listener, ref, ref.Namespace, gwNS, ref.Namespace, gwNS, ref.Name, gwNS))
				}
			}
			sec, err := c.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				diags.AddAttributeWarning(at, "The certificate Secret does not exist yet",
					fmt.Sprintf("Listener %q references Secret %s, which does not exist. The listener serves once it exists, without another apply "+
						"(for example when cert-manager issues the certificate after the Gateway is created); until then its ResolvedRefs condition "+
						"is False with reason InvalidCertificateRef. If the name is wrong, fix it.", listener, ref))
			case err != nil:
				diags.AddAttributeWarning(at, "Cannot check the certificate Secret",
					fmt.Sprintf("reading Secret %s failed: %v. Listener %q serves once the Secret exists and is of type kubernetes.io/tls.", ref, err, listener))
			case sec.Type != corev1.SecretTypeTLS:
				diags.AddAttributeWarning(at, "The certificate Secret is not of type kubernetes.io/tls",
					fmt.Sprintf("Listener %q references Secret %s, whose type is %q. The gateway serves certificates from Secrets of type kubernetes.io/tls "+
						"(keys tls.crt and tls.key) only: until the Secret is one, the listener's ResolvedRefs condition is False with reason "+
						"InvalidCertificateRef. Create it with kubectl create secret tls, or let cert-manager issue it.", listener, ref, sec.Type))
			}
		}
	}
}

func (r *gatewayResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan gatewayModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, "Create the gateway", &resp.Diagnostics, &resp.State)
}

func (r *gatewayResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan gatewayModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	r.apply(ctx, &plan, "Update the gateway", &resp.Diagnostics, &resp.State)
}

// apply writes the Gateway, its runtime and its status, then optionally
// waits for the rollout. Everything is checked before the first write, so
// an invalid configuration never replaces a working one.
func (r *gatewayResource) apply(ctx context.Context, m *gatewayModel, action string, diags *diag.Diagnostics, state *tfsdk.State) {
	setState := func() bool { diags.Append(state.Set(ctx, m)...); return !diags.HasError() }
	fail := func(format string, a ...any) { diags.AddError(action, fmt.Sprintf(format, a...)) }

	timeout, err := time.ParseDuration(m.RolloutTimeout.ValueString())
	if err != nil {
		fail("rollout_timeout = %q: %v; use a Go duration such as 10m", m.RolloutTimeout.ValueString(), err)
		return
	}
	gw, err := m.toGateway(ctx)
	if err != nil {
		fail("%v", err)
		return
	}
	if errs := routing.ValidateGateway(gw); len(errs) > 0 {
		fail("the listeners are invalid: %v", errs.ToAggregate())
		return
	}
	class, err := r.c.GatewayParameters(ctx, m.GatewayClassName.ValueString(), gw.Namespace, m.Infrastructure.settings())
	if control.IsInvalidParameters(err) {
		// As the Gateway API asks: the Gateway is written and not
		// accepted; its runtime is left as it is.
		r.rejectGateway(ctx, gw, err, fail)
		return
	}
	if err != nil {
		fail("%v", err)
		return
	}
	spec, err := m.runtimeSpec(class)
	if err != nil {
		fail("%v", err)
		return
	}
	if err := r.c.addListenerSets(ctx, m, spec); err != nil {
		fail("%v", err)
		return
	}
	// The gateway pods watch RoutingFragments and write GatewayPodReports.
	if err := r.c.EnsureAPI(ctx); err != nil {
		fail("%v", err)
		return
	}
	// The API server checks the pod template before anything is written.
	if _, err := r.c.DryRunDeployment(ctx, spec); apierrors.IsInvalid(err) {
		fail("the gateway's pod template is invalid: %v\nFix the attribute the field belongs to (pod, or the class's parameters); nothing was written.", err)
		return
	}

	live, err := r.c.applyGateway(ctx, gw)
	if err != nil {
		fail("%v", err)
		return
	}
	if err := r.c.ApplyRuntime(ctx, spec, live); err != nil {
		fail("%v\nFix the cause and apply again: the objects written so far are kept.", err)
		return
	}
	// The pods serve the ListenerSets' listeners the Gateway admits now.
	if cg, err := r.c.ComposeGateway(ctx, live, nil); err != nil {
		fail("%v", err)
		return
	} else if err := r.c.WriteListenerSetListeners(ctx, cg); err != nil {
		fail("%v", err)
		return
	}
	svc, err := r.c.Kube.CoreV1().Services(gw.Namespace).Get(ctx, spec.Name(), metav1.GetOptions{})
	if err != nil {
		fail("get Service %s/%s: %v", gw.Namespace, spec.Name(), err)
		return
	}
	if err := r.c.WriteGatewayStatus(ctx, live, svc, nil); err != nil {
		fail("%v", err)
		return
	}
	m.ID = types.StringValue(gw.Namespace + "/" + gw.Name)
	objs, err := r.c.ReadGateway(ctx, m.ref())
	if apierrors.IsNotFound(err) {
		err = fmt.Errorf("get Gateway %s: %w", m.ref(), err)
	}
	if err == nil {
		err = r.c.readComputed(ctx, m, objs)
	}
	if err != nil {
		fail("%v", err)
		return
	}
	if !setState() {
		return
	}
	if m.WaitForRollout.ValueBool() {
		if err := r.c.WaitRollout(ctx, spec.Gateway, timeout); err != nil {
			diags.AddError("Wait for the gateway rollout", err.Error())
			return
		}
	}
}

// rejectGateway writes the Gateway and its status with Accepted False,
// reason InvalidParameters, and reports why.
func (r *gatewayResource) rejectGateway(ctx context.Context, gw *gatewayv1.Gateway, why error, fail func(string, ...any)) {
	live, err := r.c.applyGateway(ctx, gw)
	if err != nil {
		fail("%v", err)
		return
	}
	svc, err := r.c.Kube.CoreV1().Services(gw.Namespace).Get(ctx, gwruntime.Name(routing.ObjectRef{Namespace: gw.Namespace, Name: gw.Name}), metav1.GetOptions{})
	if err != nil {
		svc = nil // not created yet: no addresses
	}
	if err := r.c.WriteGatewayStatus(ctx, live, svc, why); err != nil {
		fail("%v", err)
		return
	}
	fail("%v.\nThe Gateway is not accepted (condition Accepted is False, reason InvalidParameters) and its pods were not changed; "+
		"fix the ConfigMap or parameters_ref and apply again.", why)
}

// applyGateway writes the Gateway spec and returns the stored Gateway.
func (c *clients) applyGateway(ctx context.Context, gw *gatewayv1.Gateway) (*gatewayv1.Gateway, error) {
	spec := gatewayv1apply.GatewaySpec().WithGatewayClassName(gw.Spec.GatewayClassName)
	for _, l := range gw.Spec.Listeners {
		la := gatewayv1apply.Listener().WithName(l.Name).WithPort(l.Port).WithProtocol(l.Protocol)
		if l.Hostname != nil {
			la.WithHostname(*l.Hostname)
		}
		la.WithAllowedRoutes(allowedRoutesApply(l.AllowedRoutes))
		if t := l.TLS; t != nil {
			la.WithTLS(listenerTLSApply(t))
		}
		spec.WithListeners(la)
	}
	if gw.Spec.Infrastructure != nil {
		spec.WithInfrastructure(infrastructureApply(gw.Spec.Infrastructure))
	}
	if gw.Spec.AllowedListeners != nil {
		spec.WithAllowedListeners(allowedListenersApply(gw.Spec.AllowedListeners))
	}
	ac := gatewayv1apply.Gateway(gw.Name, gw.Namespace).WithLabels(managedLabels).WithSpec(spec)
	// The default cache policy of the routes and the escaped-slash
	// setting; a Gateway without one is applied without its annotation,
	// which server-side apply then removes.
	for _, k := range []string{routing.CachePolicyAnnotation, routing.EscapedSlashesAnnotation} {
		if v, ok := gw.Annotations[k]; ok {
			ac.WithAnnotations(map[string]string{k: v})
		}
	}
	live, err := c.Gateway.GatewayV1().Gateways(gw.Namespace).Apply(ctx, ac, control.ApplyOptions())
	if err != nil {
		return nil, fmt.Errorf("apply Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return live, nil
}

// allowedRoutesApply is the apply configuration of a listener's
// allowedRoutes (which allowedRoutes() always sets).
func allowedRoutesApply(a *gatewayv1.AllowedRoutes) *gatewayv1apply.AllowedRoutesApplyConfiguration {
	ns := gatewayv1apply.RouteNamespaces().WithFrom(*a.Namespaces.From)
	if sel := a.Namespaces.Selector; sel != nil {
		ls := metav1apply.LabelSelector()
		if len(sel.MatchLabels) > 0 {
			ls.WithMatchLabels(sel.MatchLabels)
		}
		for _, e := range sel.MatchExpressions {
			ls.WithMatchExpressions(metav1apply.LabelSelectorRequirement().WithKey(e.Key).WithOperator(e.Operator).WithValues(e.Values...))
		}
		ns.WithSelector(ls)
	}
	ar := gatewayv1apply.AllowedRoutes().WithNamespaces(ns)
	for _, k := range a.Kinds {
		rk := gatewayv1apply.RouteGroupKind().WithKind(k.Kind)
		if k.Group != nil {
			rk.WithGroup(*k.Group)
		}
		ar.WithKinds(rk)
	}
	return ar
}

// listenerTLSApply is the apply configuration of a listener's tls: the
// references to the certificate Secrets, never their contents.
func listenerTLSApply(t *gatewayv1.ListenerTLSConfig) *gatewayv1apply.ListenerTLSConfigApplyConfiguration {
	ac := gatewayv1apply.ListenerTLSConfig()
	if t.Mode != nil {
		ac.WithMode(*t.Mode)
	}
	for _, r := range t.CertificateRefs {
		ref := gatewayv1apply.SecretObjectReference().WithName(r.Name)
		if r.Group != nil {
			ref.WithGroup(*r.Group)
		}
		if r.Kind != nil {
			ref.WithKind(*r.Kind)
		}
		if r.Namespace != nil {
			ref.WithNamespace(*r.Namespace)
		}
		ac.WithCertificateRefs(ref)
	}
	if len(t.Options) > 0 {
		ac.WithOptions(t.Options)
	}
	return ac
}

// readComputed sets the computed attributes from the gateway's objects.
func (c *clients) readComputed(ctx context.Context, m *gatewayModel, objs *control.GatewayObjects) error {
	gw := objs.Gateway
	var addrs []attr.Value
	if objs.Service != nil {
		for _, a := range control.ServiceAddresses(objs.Service) {
			addrs = append(addrs, types.StringValue(a.Value))
		}
	}
	m.Addresses = types.ListValueMust(types.StringType, nonNil(addrs))
	var conds []attr.Value
	for _, cd := range gw.Status.Conditions {
		conds = append(conds, types.ObjectValueMust(conditionType.AttrTypes, map[string]attr.Value{
			"type": types.StringValue(cd.Type), "status": types.StringValue(string(cd.Status)),
			"reason": types.StringValue(cd.Reason), "message": types.StringValue(cd.Message),
		}))
	}
	m.Conditions = types.ListValueMust(conditionType, nonNil(conds))
	attached, err := c.AttachedRoutes(ctx, gw)
	if err != nil {
		return err
	}
	counts := map[string]attr.Value{}
	for k, v := range attached {
		counts[k] = types.Int64Value(int64(v))
	}
	m.ListenerAttachedRoutes = types.MapValueMust(types.Int64Type, counts)
	m.MainVCLSHA256 = types.StringNull()
	if objs.VCL != nil {
		m.MainVCLSHA256 = types.StringValue(gwruntime.VCLDigest(objs.VCL.Data[gwruntime.VCLDataKey]))
	}
	m.StartHash = types.StringNull()
	if objs.Deployment != nil {
		if h, ok := objs.Deployment.Spec.Template.Annotations[gwruntime.StartHashAnnotation]; ok {
			m.StartHash = types.StringValue(h)
		}
	}
	return nil
}

func (r *gatewayResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state gatewayModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	if err := r.c.readGateway(ctx, &state); err != nil {
		if apierrors.IsNotFound(err) {
			resp.State.RemoveResource(ctx)
			return
		}
		resp.Diagnostics.AddError("Read the gateway", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// readGateway refreshes m from the cluster: the Gateway spec, the gateway
// VCL and the managed fields of the Deployment, Service and PDB, so that
// an out-of-band change shows in the next plan. It returns a NotFound
// error when the Gateway is gone.
func (c *clients) readGateway(ctx context.Context, m *gatewayModel) error {
	ref := m.ref()
	objs, err := c.ReadGateway(ctx, ref)
	if err != nil {
		return err
	}
	gw := objs.Gateway
	imported := m.Listeners == nil
	m.ID = types.StringValue(ref.String())
	m.GatewayClassName = types.StringValue(string(gw.Spec.GatewayClassName))
	prior := map[string]listenerModel{}
	for _, l := range m.Listeners {
		prior[l.Name.ValueString()] = l
	}
	m.Listeners = []listenerModel{}
	for _, l := range gw.Spec.Listeners {
		was := prior[string(l.Name)]
		lm := listenerModel{
			Name:     types.StringValue(string(l.Name)),
			Port:     types.Int64Value(int64(l.Port)),
			Protocol: types.StringValue(string(l.Protocol)),
			Hostname: types.StringNull(),
			TLS:      readListenerTLS(was.TLS, l.TLS),
		}
		if l.Hostname != nil {
			lm.Hostname = types.StringValue(string(*l.Hostname))
		}
		lm.AllowedRoutes = readAllowedRoutes(was.AllowedRoutes, l.AllowedRoutes)
		m.Listeners = append(m.Listeners, lm)
	}
	if m.SpecAddresses.IsNull() || m.SpecAddresses.IsUnknown() {
		m.SpecAddresses = types.ListValueMust(gatewayBlockType(ctx, path.Root("address").AtListIndex(0)), nil)
	}
	m.Infrastructure = readInfrastructure(m.Infrastructure, gw)
	m.AllowedListeners = readAllowedListeners(ctx, m.AllowedListeners, gw.Spec.AllowedListeners)
	// The cache block as the Gateway's annotation has it: a change made
	// to the annotation outside Terraform shows in the next plan. An
	// annotation the routing core rejects (the gateway pods keep their
	// routing) leaves the block as it was, so the next apply rewrites it.
	if policy, err := routing.GatewayCachePolicy(gw); err == nil {
		m.Cache = cachePolicyModelOf(policy)
	}
	// escaped_slashes likewise; unset when the Gateway has no annotation.
	if v, ok := gw.Annotations[routing.EscapedSlashesAnnotation]; ok {
		m.EscapedSlashes = types.StringValue(v)
	} else {
		m.EscapedSlashes = types.StringNull()
	}

	switch cm := objs.VCL; {
	case cm != nil:
		if v, ok := cm.Data[gwruntime.GatewayVCLKey]; ok {
			m.VCL = types.StringValue(v)
		} else {
			m.VCL = types.StringNull()
		}
		// proxy_protocol_sources as main.vcl's ACL has them.
		m.ProxyProtocolSources = proxySourcesValue(mainvcl.ProxySourcesOf(cm.Data[gwruntime.VCLDataKey]))
	default:
		// Keep vcl: main_vcl_sha256 becomes null, and the plan shows the
		// update that writes the ConfigMap again.
	}

	switch d := objs.Deployment; {
	case d != nil:
		if d.Spec.Replicas != nil {
			m.Replicas = types.Int64Value(int64(*d.Spec.Replicas))
		}
		m.Mode = types.StringValue(gwruntime.ModeSupervise)
		m.Pod = readPod(m.Pod, d.Spec.Template, infraFromGateway(gw), imported)
		m.Sysctls = readSysctls(m.Sysctls, d.Spec.Template.Spec.SecurityContext)
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if ctr.Name == gwruntime.VarnishContainer {
				m.Resources = readResources(m.Resources, ctr.Resources)
			}
			if ctr.Name != gwruntime.ChaperoneContainer {
				continue
			}
			// Arguments the chaperone would refuse are drift the next
			// apply replaces; the last known values stay.
			if f, err := gwruntime.ParseChaperoneArgs(ctr.Args); err == nil {
				m.DrainTimeoutSeconds = types.Int64Value(int64(f.DrainTimeout / time.Second))
				m.Mode = types.StringValue(f.Mode)
				// http2 unset is true, the chaperone's default.
				if !f.HTTP2 || !m.HTTP2.IsNull() {
					m.HTTP2 = types.BoolValue(f.HTTP2)
				}
				// proxy_protocol unset is false, the chaperone's default.
				if f.ProxyProtocol || !m.ProxyProtocol.IsNull() {
					m.ProxyProtocol = types.BoolValue(f.ProxyProtocol)
				}
				m.InvalidationPort = invalidationPortOf(f.InvalidateAddr)
			}
			if m.Mode.ValueString() != gwruntime.ModeSidecar {
				m.Resources = readResources(m.Resources, ctr.Resources)
			}
		}
	default:
		m.Replicas = types.Int64Null() // shows as a change: the next apply recreates it
	}

	switch svc := objs.Service; {
	case svc != nil:
		m.ServiceType = types.StringValue(string(svc.Spec.Type))
		// Unset stays unset while the Service has Kubernetes' default.
		if etp := svc.Spec.ExternalTrafficPolicy; etp != "" && (etp != corev1.ServiceExternalTrafficPolicyCluster || !m.ExternalTrafficPolicy.IsNull()) {
			m.ExternalTrafficPolicy = types.StringValue(string(etp))
		} else if etp == "" {
			m.ExternalTrafficPolicy = types.StringNull()
		}
		// Only the annotations the configuration sets are the provider's;
		// on import, all but the infrastructure's.
		ann := map[string]string{}
		want := stringMap(m.ServiceAnnotations)
		infraAnn := infraFromGateway(gw).Annotations
		for k, v := range svc.Annotations {
			_, fromInfra := infraAnn[k]
			if _, ok := want[k]; ok || (imported && !fromInfra && reservedKeyPrefix(k) == "") {
				ann[k] = v
			}
		}
		if len(ann) == 0 && m.ServiceAnnotations.IsNull() {
			m.ServiceAnnotations = types.MapNull(types.StringType)
		} else {
			m.ServiceAnnotations = stringMapValue(ann)
		}
	default:
		m.ServiceType = types.StringNull()
	}

	switch pdb := objs.PDB; {
	case pdb != nil:
		if pdb.Spec.MaxUnavailable != nil {
			m.PDBMaxUnavailable = types.StringValue(pdb.Spec.MaxUnavailable.String())
		} else {
			m.PDBMaxUnavailable = types.StringNull()
		}
	default:
		m.PDBMaxUnavailable = types.StringNull()
	}

	if m.WaitForRollout.IsNull() {
		m.WaitForRollout = types.BoolValue(true)
	}
	if m.RolloutTimeout.IsNull() {
		m.RolloutTimeout = types.StringValue("10m")
	}
	return c.readComputed(ctx, m, objs)
}

// gatewayBlockType is the object type of the block at p in the gateway's
// schema.
func gatewayBlockType(ctx context.Context, p path.Path) types.ObjectType {
	var s resource.SchemaResponse
	(&gatewayResource{}).Schema(ctx, resource.SchemaRequest{}, &s)
	t, d := s.Schema.TypeAtPath(ctx, p)
	if d.HasError() {
		panic(fmt.Sprintf("no block %s in the gateway schema: %v", p, d))
	}
	return t.(types.ObjectType)
}

// readAllowedRoutes is the allowed_routes block for a live listener's
// allowedRoutes. The block stays absent (nil) while the listener admits
// the routes of its Gateway's namespace, the default, unless it was set;
// a kind's group stays unset when it is the default and was not set.
func readAllowedRoutes(prior *allowedRoutesModel, ar *gatewayv1.AllowedRoutes) *allowedRoutesModel {
	out := &allowedRoutesModel{
		Namespaces:          types.StringValue(string(gatewayv1.NamespacesFromSame)),
		Selector:            types.MapNull(types.StringType),
		SelectorExpressions: []selectorExpressionModel{},
		Kinds:               []routeKindModel{},
	}
	if ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			out.Namespaces = types.StringValue(string(*ar.Namespaces.From))
		}
		if sel := ar.Namespaces.Selector; sel != nil {
			if len(sel.MatchLabels) > 0 {
				out.Selector = stringMapValue(sel.MatchLabels)
			}
			for _, e := range sel.MatchExpressions {
				out.SelectorExpressions = append(out.SelectorExpressions, selectorExpressionModel{
					Key: types.StringValue(e.Key), Operator: types.StringValue(string(e.Operator)), Values: stringValues(e.Values),
				})
			}
		}
	}
	if ar != nil {
		for i, k := range ar.Kinds {
			km := routeKindModel{Group: nonDefault(k.Group, gatewayv1.GroupName), Kind: types.StringValue(string(k.Kind))}
			if prior != nil && i < len(prior.Kinds) && !prior.Kinds[i].Group.IsNull() && k.Group != nil && prior.Kinds[i].Group.ValueString() == string(*k.Group) {
				km.Group = prior.Kinds[i].Group
			}
			out.Kinds = append(out.Kinds, km)
		}
	}
	if prior == nil && out.Namespaces.ValueString() == string(gatewayv1.NamespacesFromSame) && out.Selector.IsNull() &&
		len(out.SelectorExpressions) == 0 && len(out.Kinds) == 0 {
		return nil
	}
	return out
}

// readResources reads the container's resources, keeping the configured
// spelling of quantities equal to the stored ones ("0.5" and "500m").
func readResources(prior *resourcesModel, rr corev1.ResourceRequirements) *resourcesModel {
	if len(rr.Requests) == 0 && len(rr.Limits) == 0 {
		return nil
	}
	read := func(list corev1.ResourceList, prior types.Map) types.Map {
		if len(list) == 0 {
			return types.MapNull(types.StringType)
		}
		was := stringMap(prior)
		out := map[string]string{}
		for k, q := range list {
			out[string(k)] = q.String()
			if p, err := k8sresource.ParseQuantity(was[string(k)]); err == nil && p.Cmp(q) == 0 {
				out[string(k)] = was[string(k)]
			}
		}
		return stringMapValue(out)
	}
	out := &resourcesModel{}
	if prior == nil {
		prior = &resourcesModel{Requests: types.MapNull(types.StringType), Limits: types.MapNull(types.StringType)}
	}
	out.Requests = read(rr.Requests, prior.Requests)
	out.Limits = read(rr.Limits, prior.Limits)
	return out
}

func (r *gatewayResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state gatewayModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !requireClients(r.c, &resp.Diagnostics) {
		return
	}
	ref := state.ref()
	// The runtime first, then the Gateway: the provider deletes every
	// object it wrote itself. The owner references (the Gateway owns the
	// namespaced runtime) are for a Gateway deleted outside Terraform; had
	// the Gateway gone first, the garbage collector would race these
	// deletions.
	if err := r.c.DeleteRuntime(ctx, ref); err != nil {
		resp.Diagnostics.AddError("Delete the gateway", err.Error()+"\nRun terraform destroy again, or delete the object by hand.")
		return
	}
	if err := r.c.DeleteGateway(ctx, ref); err != nil {
		resp.Diagnostics.AddError("Delete the gateway", err.Error()+"\nRun terraform destroy again, or delete the Gateway by hand.")
	}
}

func (r *gatewayResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || !dnsLabel.MatchString(ns) || !dnsSubdomain.MatchString(name) {
		resp.Diagnostics.AddError("Import the gateway",
			fmt.Sprintf("the import ID %q is not namespace/name; import a Gateway by its namespace and name, for example: terraform import varnishgw_gateway.public edge/public", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

func stringMap(m types.Map) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	for k, v := range m.Elements() {
		if s, ok := v.(types.String); ok {
			out[k] = s.ValueString()
		}
	}
	return out
}

func stringMapValue(m map[string]string) types.Map {
	vals := map[string]attr.Value{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		vals[k] = types.StringValue(m[k])
	}
	return types.MapValueMust(types.StringType, vals)
}

// intOrPercent is a PodDisruptionBudget maxUnavailable value.
var intOrPercent = regexp.MustCompile(`^([0-9]+|[0-9]{1,3}%)$`)

// durationValidator checks a Go duration such as 10m.
type durationValidator struct{}

func (durationValidator) Description(context.Context) string {
	return "a Go duration such as 30s or 10m"
}
func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration",
			fmt.Sprintf("%q is not a positive Go duration; use for example 30s, 10m or 1h", req.ConfigValue.ValueString()))
	}
}
