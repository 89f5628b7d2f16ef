package provider

import (
	"context"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The Terraform model of varnishgw_http_route: the HTTPRoute spec in
// snake_case. Leaves are framework types; nested lists and objects are Go
// slices and pointers (null is nil).

type httpRouteModel struct {
	ID         types.String     `tfsdk:"id"`
	Namespace  types.String     `tfsdk:"namespace"`
	Name       types.String     `tfsdk:"name"`
	ParentRefs []parentRefModel `tfsdk:"parent_refs"`
	Hostnames  []types.String   `tfsdk:"hostnames"`
	Rules      []ruleModel      `tfsdk:"rules"`
	Routing    types.String     `tfsdk:"routing"`

	WaitForServed types.Bool   `tfsdk:"wait_for_served"`
	ServedTimeout types.String `tfsdk:"served_timeout"`
}

type parentRefModel struct {
	Name        types.String `tfsdk:"name"`
	Namespace   types.String `tfsdk:"namespace"`
	SectionName types.String `tfsdk:"section_name"`
	Port        types.Int64  `tfsdk:"port"`
}

type ruleModel struct {
	Name        types.String      `tfsdk:"name"`
	Matches     []matchModel      `tfsdk:"matches"`
	Filters     []filterModel     `tfsdk:"filters"`
	BackendRefs []backendRefModel `tfsdk:"backend_refs"`
	Timeouts    *timeoutsModel    `tfsdk:"timeouts"`
}

type matchModel struct {
	Path        *pathMatchModel   `tfsdk:"path"`
	Headers     []valueMatchModel `tfsdk:"headers"`
	QueryParams []valueMatchModel `tfsdk:"query_params"`
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
}

type objectRefModel struct {
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
	Port      types.Int64  `tfsdk:"port"`
}

type backendRefModel struct {
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
	Port      types.Int64  `tfsdk:"port"`
	Weight    types.Int64  `tfsdk:"weight"`
}

type timeoutsModel struct {
	Request        types.String `tfsdk:"request"`
	BackendRequest types.String `tfsdk:"backend_request"`
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

// toHTTPRoute converts the model to the HTTPRoute the provider applies.
func (m *httpRouteModel) toHTTPRoute() *gatewayv1.HTTPRoute {
	route := &gatewayv1.HTTPRoute{}
	route.APIVersion = gatewayv1.GroupVersion.String()
	route.Kind = "HTTPRoute"
	route.Namespace = m.Namespace.ValueString()
	route.Name = m.Name.ValueString()
	route.Labels = managedLabels
	for _, p := range m.ParentRefs {
		group := gatewayv1.Group(gatewayv1.GroupName)
		kind := gatewayv1.Kind("Gateway")
		route.Spec.ParentRefs = append(route.Spec.ParentRefs, gatewayv1.ParentReference{
			Group:       &group,
			Kind:        &kind,
			Name:        gatewayv1.ObjectName(p.Name.ValueString()),
			Namespace:   strPtr[gatewayv1.Namespace](p.Namespace),
			SectionName: strPtr[gatewayv1.SectionName](p.SectionName),
			Port:        int32Ptr[gatewayv1.PortNumber](p.Port),
		})
	}
	for _, h := range m.Hostnames {
		route.Spec.Hostnames = append(route.Spec.Hostnames, gatewayv1.Hostname(h.ValueString()))
	}
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
			ref.Name = gatewayv1.ObjectName(b.Name.ValueString())
			ref.Namespace = strPtr[gatewayv1.Namespace](b.Namespace)
			ref.Port = int32Ptr[gatewayv1.PortNumber](b.Port)
			ref.Weight = int32Ptr[int32](b.Weight)
			rule.BackendRefs = append(rule.BackendRefs, ref)
		}
		if r.Timeouts != nil {
			rule.Timeouts = &gatewayv1.HTTPRouteTimeouts{
				Request:        strPtr[gatewayv1.Duration](r.Timeouts.Request),
				BackendRequest: strPtr[gatewayv1.Duration](r.Timeouts.BackendRequest),
			}
		}
		route.Spec.Rules = append(route.Spec.Rules, rule)
	}
	return route
}

func (f *filterModel) toFilter() gatewayv1.HTTPRouteFilter {
	out := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterType(f.Type.ValueString())}
	out.RequestHeaderModifier = f.RequestHeaderModifier.toHeaderFilter()
	out.ResponseHeaderModifier = f.ResponseHeaderModifier.toHeaderFilter()
	if r := f.RequestRedirect; r != nil {
		out.RequestRedirect = &gatewayv1.HTTPRequestRedirectFilter{
			Scheme:   strPtr[string](r.Scheme),
			Hostname: strPtr[gatewayv1.PreciseHostname](r.Hostname),
			Port:     int32Ptr[gatewayv1.PortNumber](r.Port),
			Path:     r.Path.toPathModifier(),
		}
		if !r.StatusCode.IsNull() && !r.StatusCode.IsUnknown() {
			code := int(r.StatusCode.ValueInt64())
			out.RequestRedirect.StatusCode = &code
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
			out.RequestMirror.BackendRef = gatewayv1.BackendObjectReference{
				Name:      gatewayv1.ObjectName(b.Name.ValueString()),
				Namespace: strPtr[gatewayv1.Namespace](b.Namespace),
				Port:      int32Ptr[gatewayv1.PortNumber](b.Port),
			}
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
	for _, s := range h.Remove {
		out.Remove = append(out.Remove, s.ValueString())
	}
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
// after an out-of-band change). Values the API server defaulted show as set.
func (m *httpRouteModel) fromHTTPRoute(route *gatewayv1.HTTPRoute) {
	m.ID = types.StringValue(route.Namespace + "/" + route.Name)
	m.Namespace = types.StringValue(route.Namespace)
	m.Name = types.StringValue(route.Name)
	m.ParentRefs = nil
	for _, p := range route.Spec.ParentRefs {
		m.ParentRefs = append(m.ParentRefs, parentRefModel{
			Name:        types.StringValue(string(p.Name)),
			Namespace:   strVal(p.Namespace),
			SectionName: strVal(p.SectionName),
			Port:        int64Val(p.Port),
		})
	}
	m.Hostnames = nil
	for _, h := range route.Spec.Hostnames {
		m.Hostnames = append(m.Hostnames, types.StringValue(string(h)))
	}
	m.Rules = nil
	for _, r := range route.Spec.Rules {
		rule := ruleModel{Name: strVal(r.Name)}
		for _, mt := range r.Matches {
			match := matchModel{Method: strVal(mt.Method)}
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
			rule.BackendRefs = append(rule.BackendRefs, backendRefModel{
				Name:      types.StringValue(string(b.Name)),
				Namespace: strVal(b.Namespace),
				Port:      int64Val(b.Port),
				Weight:    int64Val(b.Weight),
			})
		}
		if t := r.Timeouts; t != nil {
			rule.Timeouts = &timeoutsModel{Request: strVal(t.Request), BackendRequest: strVal(t.BackendRequest)}
		}
		m.Rules = append(m.Rules, rule)
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
		out.RequestMirror = &mirrorModel{
			BackendRef: &objectRefModel{
				Name:      types.StringValue(string(r.BackendRef.Name)),
				Namespace: strVal(r.BackendRef.Namespace),
				Port:      int64Val(r.BackendRef.Port),
			},
			Percent: int64Val(r.Percent),
		}
	}
	return out
}

func fromHeaderFilter(h *gatewayv1.HTTPHeaderFilter) *headerModifierModel {
	if h == nil {
		return nil
	}
	out := &headerModifierModel{}
	for _, s := range h.Set {
		out.Set = append(out.Set, headerModel{Name: types.StringValue(string(s.Name)), Value: types.StringValue(s.Value)})
	}
	for _, s := range h.Add {
		out.Add = append(out.Add, headerModel{Name: types.StringValue(string(s.Name)), Value: types.StringValue(s.Value)})
	}
	for _, s := range h.Remove {
		out.Remove = append(out.Remove, types.StringValue(s))
	}
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

var (
	fieldSegment = regexp.MustCompile(`^([A-Za-z]+)((?:\[[0-9]+\])*)$`)
	fieldIndex   = regexp.MustCompile(`\[([0-9]+)\]`)
	camelHump    = regexp.MustCompile(`([a-z0-9])([A-Z])`)
)

// attributePath maps a field path of the routing core
// (spec.rules[0].matches[1].path.value) to the resource attribute path
// (rules[0].matches[1].path.value), stopping at the deepest attribute the
// schema has: a field varnishgw does not model (for example
// spec.rules[0].filters[0].extensionRef) points at its parent.
func attributePath(ctx context.Context, s schema.Schema, fp string) (path.Path, string) {
	segs := strings.Split(strings.TrimPrefix(fp, "spec."), ".")
	var p path.Path
	var names []string
	for i, seg := range segs {
		g := fieldSegment.FindStringSubmatch(seg)
		if g == nil {
			break
		}
		name := strings.ToLower(camelHump.ReplaceAllString(g[1], "${1}_${2}"))
		name = strings.ReplaceAll(name, "u_r_l", "url")
		next := path.Root(name)
		if i > 0 {
			next = p.AtName(name)
		}
		if _, d := s.AttributeAtPath(ctx, next); d.HasError() {
			break
		}
		text := name
		for _, idx := range fieldIndex.FindAllStringSubmatch(g[2], -1) {
			n, _ := strconv.Atoi(idx[1])
			next = next.AtListIndex(n)
			text += "[" + idx[1] + "]"
		}
		p = next
		names = append(names, text)
	}
	if len(names) == 0 {
		return path.Empty(), ""
	}
	return p, strings.Join(names, ".")
}
