package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/object"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/varnish/varnishd"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The varnishgw_gateway resource's model and its conversion into the
// Gateway and the gateway's gwruntime.Spec.

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

func (m *gatewayModel) ref() object.Ref {
	return object.Ref{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}
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
