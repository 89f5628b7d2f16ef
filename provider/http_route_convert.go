package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The Terraform model of varnishgw_http_route: the HTTPRoute spec in
// snake_case, each list of objects a repeated block with a singular name
// (rule, match, filter, backend_ref). Leaves are framework types; blocks
// are Go slices (a list block with no element is an empty list, never
// null) and pointers (an absent single block is nil).

type httpRouteModel struct {
	ID                 types.String     `tfsdk:"id"`
	Namespace          types.String     `tfsdk:"namespace"`
	Name               types.String     `tfsdk:"name"`
	ParentRefs         []parentRefModel `tfsdk:"parent_ref"`
	UseDefaultGateways types.String     `tfsdk:"use_default_gateways"`
	Hostnames          []types.String   `tfsdk:"hostnames"`
	Rules              []ruleModel      `tfsdk:"rule"`
	Routing            types.String     `tfsdk:"routing"`
	EffectiveCache     types.List       `tfsdk:"effective_cache"`

	WaitForServed types.Bool   `tfsdk:"wait_for_served"`
	ServedTimeout types.String `tfsdk:"served_timeout"`
}

type parentRefModel struct {
	Group       types.String `tfsdk:"group"`
	Kind        types.String `tfsdk:"kind"`
	Name        types.String `tfsdk:"name"`
	Namespace   types.String `tfsdk:"namespace"`
	SectionName types.String `tfsdk:"section_name"`
	Port        types.Int64  `tfsdk:"port"`
}

type ruleModel struct {
	Name               types.String             `tfsdk:"name"`
	Matches            []matchModel             `tfsdk:"match"`
	Filters            []filterModel            `tfsdk:"filter"`
	BackendRefs        []backendRefModel        `tfsdk:"backend_ref"`
	Timeouts           *timeoutsModel           `tfsdk:"timeouts"`
	Retry              *retryModel              `tfsdk:"retry"`
	SessionPersistence *sessionPersistenceModel `tfsdk:"session_persistence"`
	Cache              *cachePolicyModel        `tfsdk:"cache"`
}

type matchModel struct {
	Path        *pathMatchModel   `tfsdk:"path"`
	Headers     []valueMatchModel `tfsdk:"header"`
	QueryParams []valueMatchModel `tfsdk:"query_param"`
	Method      types.String      `tfsdk:"method"`
}

type pathMatchModel struct {
	Type  types.String `tfsdk:"type"`
	Value types.String `tfsdk:"value"`
}

type valueMatchModel struct {
	Type  types.String `tfsdk:"type"`
	Name  types.String `tfsdk:"name"`
	Value types.String `tfsdk:"value"`
}

type filterModel struct {
	Type                   types.String         `tfsdk:"type"`
	RequestHeaderModifier  *headerModifierModel `tfsdk:"request_header_modifier"`
	ResponseHeaderModifier *headerModifierModel `tfsdk:"response_header_modifier"`
	RequestRedirect        *redirectModel       `tfsdk:"request_redirect"`
	URLRewrite             *rewriteModel        `tfsdk:"url_rewrite"`
	RequestMirror          *mirrorModel         `tfsdk:"request_mirror"`
	CORS                   *corsModel           `tfsdk:"cors"`
	ExternalAuth           *externalAuthModel   `tfsdk:"external_auth"`
	ExtensionRef           *extensionRefModel   `tfsdk:"extension_ref"`
}

type headerModifierModel struct {
	Set    []headerModel  `tfsdk:"set"`
	Add    []headerModel  `tfsdk:"add"`
	Remove []types.String `tfsdk:"remove"`
}

type headerModel struct {
	Name  types.String `tfsdk:"name"`
	Value types.String `tfsdk:"value"`
}

type redirectModel struct {
	Scheme     types.String       `tfsdk:"scheme"`
	Hostname   types.String       `tfsdk:"hostname"`
	Port       types.Int64        `tfsdk:"port"`
	Path       *pathModifierModel `tfsdk:"path"`
	StatusCode types.Int64        `tfsdk:"status_code"`
}

type rewriteModel struct {
	Hostname types.String       `tfsdk:"hostname"`
	Path     *pathModifierModel `tfsdk:"path"`
}

type pathModifierModel struct {
	Type               types.String `tfsdk:"type"`
	ReplaceFullPath    types.String `tfsdk:"replace_full_path"`
	ReplacePrefixMatch types.String `tfsdk:"replace_prefix_match"`
}

type mirrorModel struct {
	BackendRef *objectRefModel `tfsdk:"backend_ref"`
	Percent    types.Int64     `tfsdk:"percent"`
	Fraction   *fractionModel  `tfsdk:"fraction"`
}

type fractionModel struct {
	Numerator   types.Int64 `tfsdk:"numerator"`
	Denominator types.Int64 `tfsdk:"denominator"`
}

// objectRefModel is a BackendObjectReference: a Service by default.
type objectRefModel struct {
	Group     types.String `tfsdk:"group"`
	Kind      types.String `tfsdk:"kind"`
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
	Port      types.Int64  `tfsdk:"port"`
}

type corsModel struct {
	AllowOrigins     []types.String `tfsdk:"allow_origins"`
	AllowCredentials types.Bool     `tfsdk:"allow_credentials"`
	AllowMethods     []types.String `tfsdk:"allow_methods"`
	AllowHeaders     []types.String `tfsdk:"allow_headers"`
	ExposeHeaders    []types.String `tfsdk:"expose_headers"`
	MaxAge           types.Int64    `tfsdk:"max_age"`
}

type externalAuthModel struct {
	Protocol    types.String      `tfsdk:"protocol"`
	BackendRef  *objectRefModel   `tfsdk:"backend_ref"`
	GRPC        *grpcAuthModel    `tfsdk:"grpc"`
	HTTP        *httpAuthModel    `tfsdk:"http"`
	ForwardBody *forwardBodyModel `tfsdk:"forward_body"`
}

type grpcAuthModel struct {
	AllowedHeaders []types.String `tfsdk:"allowed_headers"`
}

type httpAuthModel struct {
	Path                   types.String   `tfsdk:"path"`
	AllowedHeaders         []types.String `tfsdk:"allowed_headers"`
	AllowedResponseHeaders []types.String `tfsdk:"allowed_response_headers"`
}

type forwardBodyModel struct {
	MaxSize types.Int64 `tfsdk:"max_size"`
}

type extensionRefModel struct {
	Group types.String `tfsdk:"group"`
	Kind  types.String `tfsdk:"kind"`
	Name  types.String `tfsdk:"name"`
}

type backendRefModel struct {
	Group     types.String  `tfsdk:"group"`
	Kind      types.String  `tfsdk:"kind"`
	Name      types.String  `tfsdk:"name"`
	Namespace types.String  `tfsdk:"namespace"`
	Port      types.Int64   `tfsdk:"port"`
	Weight    types.Int64   `tfsdk:"weight"`
	Filters   []filterModel `tfsdk:"filter"`
}

type timeoutsModel struct {
	Request        types.String `tfsdk:"request"`
	BackendRequest types.String `tfsdk:"backend_request"`
}

type retryModel struct {
	Codes    []types.Int64 `tfsdk:"codes"`
	Attempts types.Int64   `tfsdk:"attempts"`
	Backoff  types.String  `tfsdk:"backoff"`
}

type sessionPersistenceModel struct {
	SessionName     types.String       `tfsdk:"session_name"`
	AbsoluteTimeout types.String       `tfsdk:"absolute_timeout"`
	Type            types.String       `tfsdk:"type"`
	CookieConfig    *cookieConfigModel `tfsdk:"cookie_config"`
}

type cookieConfigModel struct {
	LifetimeType types.String `tfsdk:"lifetime_type"`
}

// Conversion helpers: null leaves become nil pointers.

func strPtr[T ~string](v types.String) *T {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	s := T(v.ValueString())
	return &s
}

func int32Ptr[T ~int32](v types.Int64) *T {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	i := T(v.ValueInt64())
	return &i
}

func intPtr(v types.Int64) *int {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	i := int(v.ValueInt64())
	return &i
}

func boolPtr(v types.Bool) *bool {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	b := v.ValueBool()
	return &b
}

func strVal[T ~string](p *T) types.String {
	if p == nil {
		return types.StringNull()
	}
	return types.StringValue(string(*p))
}

func int64Val[T ~int32 | ~int](p *T) types.Int64 {
	if p == nil {
		return types.Int64Null()
	}
	return types.Int64Value(int64(*p))
}

// stringsOf converts a list attribute to Go strings of type T (nil for none).
func stringsOf[T ~string](l []types.String) []T {
	var out []T
	for _, v := range l {
		out = append(out, T(v.ValueString()))
	}
	return out
}

// stringValues converts Go strings to a list attribute (nil, which is null,
// for none).
func stringValues[T ~string](l []T) []types.String {
	var out []types.String
	for _, v := range l {
		out = append(out, types.StringValue(string(v)))
	}
	return out
}

// Gateway API defaults the API server fills in, which the model leaves
// null unless the configuration sets them.
const (
	gatewayGroup = gatewayv1.GroupName
	gatewayKind  = "Gateway"
	// listenerSetKind is the other kind of parent a route may name.
	listenerSetKind = "ListenerSet"
	backendGroup    = ""
	backendKind     = "Service"
)

// toHTTPRoute converts the model to the HTTPRoute the provider applies.
// Every field of the model is converted, the unsupported ones included, so
// that routing.ValidateHTTPRoute rejects them with its own error.
func (m *httpRouteModel) toHTTPRoute() *gatewayv1.HTTPRoute {
	route := &gatewayv1.HTTPRoute{}
	route.APIVersion = gatewayv1.GroupVersion.String()
	route.Kind = "HTTPRoute"
	route.Namespace = m.Namespace.ValueString()
	route.Name = m.Name.ValueString()
	route.Labels = managedLabels
	for _, p := range m.ParentRefs {
		group := gatewayv1.Group(gatewayGroup)
		kind := gatewayv1.Kind(gatewayKind)
		if !p.Group.IsNull() && !p.Group.IsUnknown() {
			group = gatewayv1.Group(p.Group.ValueString())
		}
		if !p.Kind.IsNull() && !p.Kind.IsUnknown() {
			kind = gatewayv1.Kind(p.Kind.ValueString())
		}
		route.Spec.ParentRefs = append(route.Spec.ParentRefs, gatewayv1.ParentReference{
			Group:       &group,
			Kind:        &kind,
			Name:        gatewayv1.ObjectName(p.Name.ValueString()),
			Namespace:   strPtr[gatewayv1.Namespace](p.Namespace),
			SectionName: strPtr[gatewayv1.SectionName](p.SectionName),
			Port:        int32Ptr[gatewayv1.PortNumber](p.Port),
		})
	}
	if v := strPtr[gatewayv1.GatewayDefaultScope](m.UseDefaultGateways); v != nil {
		route.Spec.UseDefaultGateways = *v
	}
	route.Spec.Hostnames = stringsOf[gatewayv1.Hostname](m.Hostnames)
	for _, r := range m.Rules {
		rule := gatewayv1.HTTPRouteRule{Name: strPtr[gatewayv1.SectionName](r.Name)}
		for _, mt := range r.Matches {
			match := gatewayv1.HTTPRouteMatch{Method: strPtr[gatewayv1.HTTPMethod](mt.Method)}
			if mt.Path != nil {
				match.Path = &gatewayv1.HTTPPathMatch{Type: strPtr[gatewayv1.PathMatchType](mt.Path.Type), Value: strPtr[string](mt.Path.Value)}
			}
			for _, h := range mt.Headers {
				match.Headers = append(match.Headers, gatewayv1.HTTPHeaderMatch{
					Type: strPtr[gatewayv1.HeaderMatchType](h.Type), Name: gatewayv1.HTTPHeaderName(h.Name.ValueString()), Value: h.Value.ValueString(),
				})
			}
			for _, q := range mt.QueryParams {
				match.QueryParams = append(match.QueryParams, gatewayv1.HTTPQueryParamMatch{
					Type: strPtr[gatewayv1.QueryParamMatchType](q.Type), Name: gatewayv1.HTTPHeaderName(q.Name.ValueString()), Value: q.Value.ValueString(),
				})
			}
			rule.Matches = append(rule.Matches, match)
		}
		for _, f := range r.Filters {
			rule.Filters = append(rule.Filters, f.toFilter())
		}
		for _, b := range r.BackendRefs {
			ref := gatewayv1.HTTPBackendRef{}
			ref.BackendObjectReference = objectRefModel{Group: b.Group, Kind: b.Kind, Name: b.Name, Namespace: b.Namespace, Port: b.Port}.toRef()
			ref.Weight = int32Ptr[int32](b.Weight)
			for _, f := range b.Filters {
				ref.Filters = append(ref.Filters, f.toFilter())
			}
			rule.BackendRefs = append(rule.BackendRefs, ref)
		}
		if r.Timeouts != nil {
			rule.Timeouts = &gatewayv1.HTTPRouteTimeouts{
				Request:        strPtr[gatewayv1.Duration](r.Timeouts.Request),
				BackendRequest: strPtr[gatewayv1.Duration](r.Timeouts.BackendRequest),
			}
		}
		if t := r.Retry; t != nil {
			rule.Retry = &gatewayv1.HTTPRouteRetry{Attempts: intPtr(t.Attempts), Backoff: strPtr[gatewayv1.Duration](t.Backoff)}
			for _, c := range t.Codes {
				rule.Retry.Codes = append(rule.Retry.Codes, gatewayv1.HTTPRouteRetryStatusCode(c.ValueInt64()))
			}
		}
		if s := r.SessionPersistence; s != nil {
			rule.SessionPersistence = &gatewayv1.SessionPersistence{
				SessionName:     strPtr[string](s.SessionName),
				AbsoluteTimeout: strPtr[gatewayv1.Duration](s.AbsoluteTimeout),
				Type:            strPtr[gatewayv1.SessionPersistenceType](s.Type),
			}
			if c := s.CookieConfig; c != nil {
				rule.SessionPersistence.CookieConfig = &gatewayv1.CookieConfig{LifetimeType: strPtr[gatewayv1.CookieLifetimeType](c.LifetimeType)}
			}
		}
		route.Spec.Rules = append(route.Spec.Rules, rule)
	}
	return route
}

// toRef is the BackendObjectReference o describes.
func (o objectRefModel) toRef() gatewayv1.BackendObjectReference {
	return gatewayv1.BackendObjectReference{
		Group:     strPtr[gatewayv1.Group](o.Group),
		Kind:      strPtr[gatewayv1.Kind](o.Kind),
		Name:      gatewayv1.ObjectName(o.Name.ValueString()),
		Namespace: strPtr[gatewayv1.Namespace](o.Namespace),
		Port:      int32Ptr[gatewayv1.PortNumber](o.Port),
	}
}

func (f *filterModel) toFilter() gatewayv1.HTTPRouteFilter {
	out := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterType(f.Type.ValueString())}
	out.RequestHeaderModifier = f.RequestHeaderModifier.toHeaderFilter()
	out.ResponseHeaderModifier = f.ResponseHeaderModifier.toHeaderFilter()
	if r := f.RequestRedirect; r != nil {
		out.RequestRedirect = &gatewayv1.HTTPRequestRedirectFilter{
			Scheme:     strPtr[string](r.Scheme),
			Hostname:   strPtr[gatewayv1.PreciseHostname](r.Hostname),
			Port:       int32Ptr[gatewayv1.PortNumber](r.Port),
			Path:       r.Path.toPathModifier(),
			StatusCode: intPtr(r.StatusCode),
		}
	}
	if r := f.URLRewrite; r != nil {
		out.URLRewrite = &gatewayv1.HTTPURLRewriteFilter{
			Hostname: strPtr[gatewayv1.PreciseHostname](r.Hostname),
			Path:     r.Path.toPathModifier(),
		}
	}
	if r := f.RequestMirror; r != nil {
		out.RequestMirror = &gatewayv1.HTTPRequestMirrorFilter{Percent: int32Ptr[int32](r.Percent)}
		if b := r.BackendRef; b != nil {
			out.RequestMirror.BackendRef = b.toRef()
		}
		if fr := r.Fraction; fr != nil {
			out.RequestMirror.Fraction = &gatewayv1.Fraction{Numerator: int32(fr.Numerator.ValueInt64()), Denominator: int32Ptr[int32](fr.Denominator)}
		}
	}
	if c := f.CORS; c != nil {
		out.CORS = &gatewayv1.HTTPCORSFilter{
			AllowOrigins:     stringsOf[gatewayv1.CORSOrigin](c.AllowOrigins),
			AllowCredentials: boolPtr(c.AllowCredentials),
			AllowMethods:     stringsOf[gatewayv1.HTTPMethodWithWildcard](c.AllowMethods),
			AllowHeaders:     stringsOf[gatewayv1.HTTPHeaderName](c.AllowHeaders),
			ExposeHeaders:    stringsOf[gatewayv1.HTTPHeaderName](c.ExposeHeaders),
			MaxAge:           int32(c.MaxAge.ValueInt64()),
		}
	}
	if a := f.ExternalAuth; a != nil {
		out.ExternalAuth = &gatewayv1.HTTPExternalAuthFilter{ExternalAuthProtocol: gatewayv1.HTTPRouteExternalAuthProtocol(a.Protocol.ValueString())}
		if a.BackendRef != nil {
			out.ExternalAuth.BackendRef = a.BackendRef.toRef()
		}
		if a.GRPC != nil {
			out.ExternalAuth.GRPCAuthConfig = &gatewayv1.GRPCAuthConfig{AllowedRequestHeaders: stringsOf[string](a.GRPC.AllowedHeaders)}
		}
		if a.HTTP != nil {
			out.ExternalAuth.HTTPAuthConfig = &gatewayv1.HTTPAuthConfig{
				Path:                   a.HTTP.Path.ValueString(),
				AllowedRequestHeaders:  stringsOf[string](a.HTTP.AllowedHeaders),
				AllowedResponseHeaders: stringsOf[string](a.HTTP.AllowedResponseHeaders),
			}
		}
		if a.ForwardBody != nil {
			out.ExternalAuth.ForwardBody = &gatewayv1.ForwardBodyConfig{MaxSize: uint16(a.ForwardBody.MaxSize.ValueInt64())}
		}
	}
	if e := f.ExtensionRef; e != nil {
		out.ExtensionRef = &gatewayv1.LocalObjectReference{
			Group: gatewayv1.Group(e.Group.ValueString()),
			Kind:  gatewayv1.Kind(e.Kind.ValueString()),
			Name:  gatewayv1.ObjectName(e.Name.ValueString()),
		}
	}
	return out
}

func (h *headerModifierModel) toHeaderFilter() *gatewayv1.HTTPHeaderFilter {
	if h == nil {
		return nil
	}
	out := &gatewayv1.HTTPHeaderFilter{}
	for _, s := range h.Set {
		out.Set = append(out.Set, gatewayv1.HTTPHeader{Name: gatewayv1.HTTPHeaderName(s.Name.ValueString()), Value: s.Value.ValueString()})
	}
	for _, s := range h.Add {
		out.Add = append(out.Add, gatewayv1.HTTPHeader{Name: gatewayv1.HTTPHeaderName(s.Name.ValueString()), Value: s.Value.ValueString()})
	}
	out.Remove = stringsOf[string](h.Remove)
	return out
}

func (p *pathModifierModel) toPathModifier() *gatewayv1.HTTPPathModifier {
	if p == nil {
		return nil
	}
	return &gatewayv1.HTTPPathModifier{
		Type:               gatewayv1.HTTPPathModifierType(p.Type.ValueString()),
		ReplaceFullPath:    strPtr[string](p.ReplaceFullPath),
		ReplacePrefixMatch: strPtr[string](p.ReplacePrefixMatch),
	}
}

// fromHTTPRoute sets the model from a live HTTPRoute (read after import or
// after an out-of-band change). Values the API server defaulted show as
// set, except the group and kind of references, which stay null when they
// are the defaults (a Gateway parent, a Service backend).
func (m *httpRouteModel) fromHTTPRoute(route *gatewayv1.HTTPRoute) {
	m.ID = types.StringValue(route.Namespace + "/" + route.Name)
	m.Namespace = types.StringValue(route.Namespace)
	m.Name = types.StringValue(route.Name)
	m.ParentRefs = []parentRefModel{}
	for _, p := range route.Spec.ParentRefs {
		m.ParentRefs = append(m.ParentRefs, parentRefModel{
			Group:       nonDefault(p.Group, gatewayGroup),
			Kind:        nonDefault(p.Kind, gatewayKind),
			Name:        types.StringValue(string(p.Name)),
			Namespace:   strVal(p.Namespace),
			SectionName: strVal(p.SectionName),
			Port:        int64Val(p.Port),
		})
	}
	m.UseDefaultGateways = types.StringNull()
	if v := route.Spec.UseDefaultGateways; v != "" {
		m.UseDefaultGateways = types.StringValue(string(v))
	}
	m.Hostnames = stringValues(route.Spec.Hostnames)
	m.Rules = []ruleModel{}
	for _, r := range route.Spec.Rules {
		rule := ruleModel{Name: strVal(r.Name), Matches: []matchModel{}, Filters: []filterModel{}, BackendRefs: []backendRefModel{}}
		for _, mt := range r.Matches {
			match := matchModel{Method: strVal(mt.Method), Headers: []valueMatchModel{}, QueryParams: []valueMatchModel{}}
			if mt.Path != nil {
				match.Path = &pathMatchModel{Type: strVal(mt.Path.Type), Value: strVal(mt.Path.Value)}
			}
			for _, h := range mt.Headers {
				match.Headers = append(match.Headers, valueMatchModel{Type: strVal(h.Type), Name: types.StringValue(string(h.Name)), Value: types.StringValue(h.Value)})
			}
			for _, q := range mt.QueryParams {
				match.QueryParams = append(match.QueryParams, valueMatchModel{Type: strVal(q.Type), Name: types.StringValue(string(q.Name)), Value: types.StringValue(q.Value)})
			}
			rule.Matches = append(rule.Matches, match)
		}
		for _, f := range r.Filters {
			rule.Filters = append(rule.Filters, fromFilter(f))
		}
		for _, b := range r.BackendRefs {
			o := fromRef(b.BackendObjectReference)
			ref := backendRefModel{Group: o.Group, Kind: o.Kind, Name: o.Name, Namespace: o.Namespace, Port: o.Port, Weight: int64Val(b.Weight), Filters: []filterModel{}}
			for _, f := range b.Filters {
				ref.Filters = append(ref.Filters, fromFilter(f))
			}
			rule.BackendRefs = append(rule.BackendRefs, ref)
		}
		if t := r.Timeouts; t != nil {
			rule.Timeouts = &timeoutsModel{Request: strVal(t.Request), BackendRequest: strVal(t.BackendRequest)}
		}
		if t := r.Retry; t != nil {
			rule.Retry = &retryModel{Attempts: int64Val(t.Attempts), Backoff: strVal(t.Backoff)}
			for _, c := range t.Codes {
				rule.Retry.Codes = append(rule.Retry.Codes, types.Int64Value(int64(c)))
			}
		}
		if s := r.SessionPersistence; s != nil {
			rule.SessionPersistence = &sessionPersistenceModel{SessionName: strVal(s.SessionName), AbsoluteTimeout: strVal(s.AbsoluteTimeout), Type: strVal(s.Type)}
			if c := s.CookieConfig; c != nil {
				rule.SessionPersistence.CookieConfig = &cookieConfigModel{LifetimeType: strVal(c.LifetimeType)}
			}
		}
		m.Rules = append(m.Rules, rule)
	}
}

// nonDefault is the value of p, null when it is unset or def.
func nonDefault[T ~string](p *T, def string) types.String {
	if p == nil || string(*p) == def {
		return types.StringNull()
	}
	return types.StringValue(string(*p))
}

func fromRef(r gatewayv1.BackendObjectReference) objectRefModel {
	return objectRefModel{
		Group:     nonDefault(r.Group, backendGroup),
		Kind:      nonDefault(r.Kind, backendKind),
		Name:      types.StringValue(string(r.Name)),
		Namespace: strVal(r.Namespace),
		Port:      int64Val(r.Port),
	}
}

func fromFilter(f gatewayv1.HTTPRouteFilter) filterModel {
	out := filterModel{Type: types.StringValue(string(f.Type))}
	out.RequestHeaderModifier = fromHeaderFilter(f.RequestHeaderModifier)
	out.ResponseHeaderModifier = fromHeaderFilter(f.ResponseHeaderModifier)
	if r := f.RequestRedirect; r != nil {
		out.RequestRedirect = &redirectModel{
			Scheme:     strVal(r.Scheme),
			Hostname:   strVal(r.Hostname),
			Port:       int64Val(r.Port),
			Path:       fromPathModifier(r.Path),
			StatusCode: int64Val(r.StatusCode),
		}
	}
	if r := f.URLRewrite; r != nil {
		out.URLRewrite = &rewriteModel{Hostname: strVal(r.Hostname), Path: fromPathModifier(r.Path)}
	}
	if r := f.RequestMirror; r != nil {
		ref := fromRef(r.BackendRef)
		out.RequestMirror = &mirrorModel{BackendRef: &ref, Percent: int64Val(r.Percent)}
		if fr := r.Fraction; fr != nil {
			out.RequestMirror.Fraction = &fractionModel{Numerator: types.Int64Value(int64(fr.Numerator)), Denominator: int64Val(fr.Denominator)}
		}
	}
	if c := f.CORS; c != nil {
		out.CORS = &corsModel{
			AllowOrigins:     stringValues(c.AllowOrigins),
			AllowCredentials: types.BoolPointerValue(c.AllowCredentials),
			AllowMethods:     stringValues(c.AllowMethods),
			AllowHeaders:     stringValues(c.AllowHeaders),
			ExposeHeaders:    stringValues(c.ExposeHeaders),
			MaxAge:           types.Int64Value(int64(c.MaxAge)),
		}
	}
	if a := f.ExternalAuth; a != nil {
		ref := fromRef(a.BackendRef)
		out.ExternalAuth = &externalAuthModel{Protocol: types.StringValue(string(a.ExternalAuthProtocol)), BackendRef: &ref}
		if g := a.GRPCAuthConfig; g != nil {
			out.ExternalAuth.GRPC = &grpcAuthModel{AllowedHeaders: stringValues(g.AllowedRequestHeaders)}
		}
		if h := a.HTTPAuthConfig; h != nil {
			out.ExternalAuth.HTTP = &httpAuthModel{Path: types.StringValue(h.Path), AllowedHeaders: stringValues(h.AllowedRequestHeaders),
				AllowedResponseHeaders: stringValues(h.AllowedResponseHeaders)}
		}
		if b := a.ForwardBody; b != nil {
			out.ExternalAuth.ForwardBody = &forwardBodyModel{MaxSize: types.Int64Value(int64(b.MaxSize))}
		}
	}
	if e := f.ExtensionRef; e != nil {
		out.ExtensionRef = &extensionRefModel{Group: types.StringValue(string(e.Group)), Kind: types.StringValue(string(e.Kind)), Name: types.StringValue(string(e.Name))}
	}
	return out
}

func fromHeaderFilter(h *gatewayv1.HTTPHeaderFilter) *headerModifierModel {
	if h == nil {
		return nil
	}
	out := &headerModifierModel{Set: []headerModel{}, Add: []headerModel{}}
	for _, s := range h.Set {
		out.Set = append(out.Set, headerModel{Name: types.StringValue(string(s.Name)), Value: types.StringValue(s.Value)})
	}
	for _, s := range h.Add {
		out.Add = append(out.Add, headerModel{Name: types.StringValue(string(s.Name)), Value: types.StringValue(s.Value)})
	}
	out.Remove = stringValues(h.Remove)
	return out
}

func fromPathModifier(p *gatewayv1.HTTPPathModifier) *pathModifierModel {
	if p == nil {
		return nil
	}
	return &pathModifierModel{
		Type:               types.StringValue(string(p.Type)),
		ReplaceFullPath:    strVal(p.ReplaceFullPath),
		ReplacePrefixMatch: strVal(p.ReplacePrefixMatch),
	}
}
