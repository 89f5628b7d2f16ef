package provider

import (
	"github.com/varnishgw/terraform-provider-varnishgw/internal/status"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1apply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
)

// The apply configurations of an HTTPRoute, built from the typed route the
// model converts to (toHTTPRoute): its spec, which the provider applies,
// and its status.parents. Every field of the typed spec is converted, so
// that what is applied is what was validated; TestHTTPRouteApply checks
// that the apply configuration has the typed route's JSON form.

// httpRouteApply is the apply configuration of route's metadata (name,
// namespace, labels) and spec.
func httpRouteApply(route *gatewayv1.HTTPRoute) *gatewayv1apply.HTTPRouteApplyConfiguration {
	spec := gatewayv1apply.HTTPRouteSpec()
	for _, p := range route.Spec.ParentRefs {
		spec.WithParentRefs(parentRefApply(p))
	}
	if route.Spec.UseDefaultGateways != "" {
		spec.WithUseDefaultGateways(route.Spec.UseDefaultGateways)
	}
	spec.WithHostnames(route.Spec.Hostnames...)
	for _, r := range route.Spec.Rules {
		spec.WithRules(ruleApply(r))
	}
	ac := gatewayv1apply.HTTPRoute(route.Name, route.Namespace).WithSpec(spec)
	if len(route.Labels) > 0 {
		ac.WithLabels(route.Labels)
	}
	return ac
}

func parentRefApply(p gatewayv1.ParentReference) *gatewayv1apply.ParentReferenceApplyConfiguration {
	ac := gatewayv1apply.ParentReference().WithName(p.Name)
	if p.Group != nil {
		ac.WithGroup(*p.Group)
	}
	if p.Kind != nil {
		ac.WithKind(*p.Kind)
	}
	if p.Namespace != nil {
		ac.WithNamespace(*p.Namespace)
	}
	if p.SectionName != nil {
		ac.WithSectionName(*p.SectionName)
	}
	if p.Port != nil {
		ac.WithPort(*p.Port)
	}
	return ac
}

func ruleApply(r gatewayv1.HTTPRouteRule) *gatewayv1apply.HTTPRouteRuleApplyConfiguration {
	ac := gatewayv1apply.HTTPRouteRule()
	if r.Name != nil {
		ac.WithName(*r.Name)
	}
	for _, m := range r.Matches {
		ac.WithMatches(matchApply(m))
	}
	for _, f := range r.Filters {
		ac.WithFilters(filterApply(f))
	}
	for _, b := range r.BackendRefs {
		ref := gatewayv1apply.HTTPBackendRef()
		ref.BackendRefApplyConfiguration = *gatewayv1apply.BackendRef()
		ref.BackendObjectReferenceApplyConfiguration = *backendObjectRefApply(b.BackendObjectReference)
		if b.Weight != nil {
			ref.WithWeight(*b.Weight)
		}
		for _, f := range b.Filters {
			ref.WithFilters(filterApply(f))
		}
		ac.WithBackendRefs(ref)
	}
	if t := r.Timeouts; t != nil {
		ta := gatewayv1apply.HTTPRouteTimeouts()
		if t.Request != nil {
			ta.WithRequest(*t.Request)
		}
		if t.BackendRequest != nil {
			ta.WithBackendRequest(*t.BackendRequest)
		}
		ac.WithTimeouts(ta)
	}
	if t := r.Retry; t != nil {
		ra := gatewayv1apply.HTTPRouteRetry().WithCodes(t.Codes...)
		if t.Attempts != nil {
			ra.WithAttempts(*t.Attempts)
		}
		if t.Backoff != nil {
			ra.WithBackoff(*t.Backoff)
		}
		ac.WithRetry(ra)
	}
	if s := r.SessionPersistence; s != nil {
		sa := gatewayv1apply.SessionPersistence()
		if s.SessionName != nil {
			sa.WithSessionName(*s.SessionName)
		}
		if s.AbsoluteTimeout != nil {
			sa.WithAbsoluteTimeout(*s.AbsoluteTimeout)
		}
		if s.Type != nil {
			sa.WithType(*s.Type)
		}
		if c := s.CookieConfig; c != nil {
			ca := gatewayv1apply.CookieConfig()
			if c.LifetimeType != nil {
				ca.WithLifetimeType(*c.LifetimeType)
			}
			sa.WithCookieConfig(ca)
		}
		ac.WithSessionPersistence(sa)
	}
	return ac
}

func matchApply(m gatewayv1.HTTPRouteMatch) *gatewayv1apply.HTTPRouteMatchApplyConfiguration {
	ac := gatewayv1apply.HTTPRouteMatch()
	if p := m.Path; p != nil {
		pa := gatewayv1apply.HTTPPathMatch()
		if p.Type != nil {
			pa.WithType(*p.Type)
		}
		if p.Value != nil {
			pa.WithValue(*p.Value)
		}
		ac.WithPath(pa)
	}
	for _, h := range m.Headers {
		ha := gatewayv1apply.HTTPHeaderMatch().WithName(h.Name).WithValue(h.Value)
		if h.Type != nil {
			ha.WithType(*h.Type)
		}
		ac.WithHeaders(ha)
	}
	for _, q := range m.QueryParams {
		qa := gatewayv1apply.HTTPQueryParamMatch().WithName(q.Name).WithValue(q.Value)
		if q.Type != nil {
			qa.WithType(*q.Type)
		}
		ac.WithQueryParams(qa)
	}
	if m.Method != nil {
		ac.WithMethod(*m.Method)
	}
	return ac
}

func backendObjectRefApply(r gatewayv1.BackendObjectReference) *gatewayv1apply.BackendObjectReferenceApplyConfiguration {
	ac := gatewayv1apply.BackendObjectReference().WithName(r.Name)
	if r.Group != nil {
		ac.WithGroup(*r.Group)
	}
	if r.Kind != nil {
		ac.WithKind(*r.Kind)
	}
	if r.Namespace != nil {
		ac.WithNamespace(*r.Namespace)
	}
	if r.Port != nil {
		ac.WithPort(*r.Port)
	}
	return ac
}

func filterApply(f gatewayv1.HTTPRouteFilter) *gatewayv1apply.HTTPRouteFilterApplyConfiguration {
	ac := gatewayv1apply.HTTPRouteFilter().WithType(f.Type)
	if h := f.RequestHeaderModifier; h != nil {
		ac.WithRequestHeaderModifier(headerFilterApply(h))
	}
	if h := f.ResponseHeaderModifier; h != nil {
		ac.WithResponseHeaderModifier(headerFilterApply(h))
	}
	if r := f.RequestRedirect; r != nil {
		ra := gatewayv1apply.HTTPRequestRedirectFilter()
		if r.Scheme != nil {
			ra.WithScheme(*r.Scheme)
		}
		if r.Hostname != nil {
			ra.WithHostname(*r.Hostname)
		}
		if r.Path != nil {
			ra.WithPath(pathModifierApply(r.Path))
		}
		if r.Port != nil {
			ra.WithPort(*r.Port)
		}
		if r.StatusCode != nil {
			ra.WithStatusCode(*r.StatusCode)
		}
		ac.WithRequestRedirect(ra)
	}
	if r := f.URLRewrite; r != nil {
		ra := gatewayv1apply.HTTPURLRewriteFilter()
		if r.Hostname != nil {
			ra.WithHostname(*r.Hostname)
		}
		if r.Path != nil {
			ra.WithPath(pathModifierApply(r.Path))
		}
		ac.WithURLRewrite(ra)
	}
	if m := f.RequestMirror; m != nil {
		ma := gatewayv1apply.HTTPRequestMirrorFilter().WithBackendRef(backendObjectRefApply(m.BackendRef))
		if m.Percent != nil {
			ma.WithPercent(*m.Percent)
		}
		if fr := m.Fraction; fr != nil {
			fa := gatewayv1apply.Fraction().WithNumerator(fr.Numerator)
			if fr.Denominator != nil {
				fa.WithDenominator(*fr.Denominator)
			}
			ma.WithFraction(fa)
		}
		ac.WithRequestMirror(ma)
	}
	if c := f.CORS; c != nil {
		ca := gatewayv1apply.HTTPCORSFilter().
			WithAllowOrigins(c.AllowOrigins...).
			WithAllowMethods(c.AllowMethods...).
			WithAllowHeaders(c.AllowHeaders...).
			WithExposeHeaders(c.ExposeHeaders...)
		if c.AllowCredentials != nil {
			ca.WithAllowCredentials(*c.AllowCredentials)
		}
		if c.MaxAge != 0 {
			ca.WithMaxAge(c.MaxAge)
		}
		ac.WithCORS(ca)
	}
	if a := f.ExternalAuth; a != nil {
		aa := gatewayv1apply.HTTPExternalAuthFilter().WithBackendRef(backendObjectRefApply(a.BackendRef))
		if a.ExternalAuthProtocol != "" {
			aa.WithExternalAuthProtocol(a.ExternalAuthProtocol)
		}
		if g := a.GRPCAuthConfig; g != nil {
			aa.WithGRPCAuthConfig(gatewayv1apply.GRPCAuthConfig().WithAllowedRequestHeaders(g.AllowedRequestHeaders...))
		}
		if h := a.HTTPAuthConfig; h != nil {
			ha := gatewayv1apply.HTTPAuthConfig().
				WithAllowedRequestHeaders(h.AllowedRequestHeaders...).
				WithAllowedResponseHeaders(h.AllowedResponseHeaders...)
			if h.Path != "" {
				ha.WithPath(h.Path)
			}
			aa.WithHTTPAuthConfig(ha)
		}
		if b := a.ForwardBody; b != nil {
			ba := gatewayv1apply.ForwardBodyConfig()
			if b.MaxSize != 0 {
				ba.WithMaxSize(b.MaxSize)
			}
			aa.WithForwardBody(ba)
		}
		ac.WithExternalAuth(aa)
	}
	if e := f.ExtensionRef; e != nil {
		ac.WithExtensionRef(gatewayv1apply.LocalObjectReference().WithGroup(e.Group).WithKind(e.Kind).WithName(e.Name))
	}
	return ac
}

func headerFilterApply(h *gatewayv1.HTTPHeaderFilter) *gatewayv1apply.HTTPHeaderFilterApplyConfiguration {
	ac := gatewayv1apply.HTTPHeaderFilter().WithRemove(h.Remove...)
	for _, s := range h.Set {
		ac.WithSet(gatewayv1apply.HTTPHeader().WithName(s.Name).WithValue(s.Value))
	}
	for _, s := range h.Add {
		ac.WithAdd(gatewayv1apply.HTTPHeader().WithName(s.Name).WithValue(s.Value))
	}
	return ac
}

func pathModifierApply(p *gatewayv1.HTTPPathModifier) *gatewayv1apply.HTTPPathModifierApplyConfiguration {
	ac := gatewayv1apply.HTTPPathModifier().WithType(p.Type)
	if p.ReplaceFullPath != nil {
		ac.WithReplaceFullPath(*p.ReplaceFullPath)
	}
	if p.ReplacePrefixMatch != nil {
		ac.WithReplacePrefixMatch(*p.ReplacePrefixMatch)
	}
	return ac
}

// routeParentStatusApply is the apply configuration of a status.parents
// entry.
func routeParentStatusApply(p gatewayv1.RouteParentStatus) *gatewayv1apply.RouteParentStatusApplyConfiguration {
	ac := gatewayv1apply.RouteParentStatus().WithParentRef(parentRefApply(p.ParentRef)).WithControllerName(p.ControllerName)
	for _, c := range p.Conditions {
		ac.WithConditions(status.ConditionApply(c))
	}
	return ac
}
