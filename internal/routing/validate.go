package routing

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/vclregex"
)

const (
	maxWeight       = 1000000
	maxValueMatches = 16
	maxHeaderMods   = 16
	maxPathLength   = 1024
	maxValueLength  = 4096
	maxHostnames    = 16
	// The Gateway API CRD limits.
	maxParentRefs   = 32
	maxRules        = 16
	maxRuleMatches  = 64
	maxRouteMatches = 128
	maxFilters      = 16
	maxBackendRefs  = 16
)

var (
	supportedFilterTypes = []string{
		string(gatewayv1.HTTPRouteFilterRequestHeaderModifier),
		string(gatewayv1.HTTPRouteFilterResponseHeaderModifier),
		string(gatewayv1.HTTPRouteFilterRequestRedirect),
		string(gatewayv1.HTTPRouteFilterURLRewrite),
		string(gatewayv1.HTTPRouteFilterRequestMirror),
		string(gatewayv1.HTTPRouteFilterCORS),
	}
	methodList       = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
	supportedMethods = func() map[string]bool {
		m := map[string]bool{}
		for _, v := range methodList {
			m[v] = true
		}
		return m
	}()
	// headerNameRE is the Gateway API HTTPHeaderName pattern (an RFC 9110
	// token), which ghost.schema.json uses too. apimachinery's
	// IsHTTPHeaderName is stricter (no "_" and other token characters).
	headerNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$")
	// durationRE is the Gateway API duration format (GEP-2257).
	durationRE = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)
)

// ValidateHTTPRoute checks everything varnishgw accepts in an HTTPRoute spec:
// hostnames, matches (paths, regular expressions, header and query names),
// filters and their combinations, backend references, weights, timeouts,
// retries and session persistence. Unsupported features (ExternalAuth,
// ExtensionRef, backendRef filters other than RequestHeaderModifier) are
// rejected, never ignored. Each
// error names the field path (spec.rules[0].matches[1].path.value), the
// value and what to do instead.
func ValidateHTTPRoute(route *gatewayv1.HTTPRoute) field.ErrorList {
	if route == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "nil HTTPRoute")}
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if len(route.Spec.Hostnames) > maxHostnames {
		errs = append(errs, field.TooMany(spec.Child("hostnames"), len(route.Spec.Hostnames), maxHostnames))
	}
	for i, h := range route.Spec.Hostnames {
		errs = append(errs, validateHostname(spec.Child("hostnames").Index(i), string(h), true)...)
	}
	if len(route.Spec.ParentRefs) > maxParentRefs {
		errs = append(errs, field.TooMany(spec.Child("parentRefs"), len(route.Spec.ParentRefs), maxParentRefs))
	}
	if len(route.Spec.Rules) > maxRules {
		errs = append(errs, field.TooMany(spec.Child("rules"), len(route.Spec.Rules), maxRules))
	}
	matches := 0
	for i := range route.Spec.Rules {
		errs = append(errs, validateHTTPRouteRule(spec.Child("rules").Index(i), &route.Spec.Rules[i])...)
		matches += len(route.Spec.Rules[i].Matches)
	}
	if matches > maxRouteMatches {
		errs = append(errs, field.TooMany(spec.Child("rules").Key("*").Child("matches"), matches, maxRouteMatches))
	}
	return errs
}

func validateHTTPRouteRule(p *field.Path, r *gatewayv1.HTTPRouteRule) field.ErrorList {
	var errs field.ErrorList
	if r.Name != nil {
		if msg := objectNameProblem(string(*r.Name), false, "rule names"); msg != "" {
			errs = append(errs, field.Invalid(p.Child("name"), *r.Name, msg))
		}
	}
	for _, l := range []struct {
		name string
		n    int
		max  int
	}{{"matches", len(r.Matches), maxRuleMatches}, {"filters", len(r.Filters), maxFilters}, {"backendRefs", len(r.BackendRefs), maxBackendRefs}} {
		if l.n > l.max {
			errs = append(errs, field.TooMany(p.Child(l.name), l.n, l.max))
		}
	}
	for i := range r.Matches {
		errs = append(errs, validateHTTPRouteMatch(p.Child("matches").Index(i), &r.Matches[i])...)
	}
	seen := map[gatewayv1.HTTPRouteFilterType]bool{}
	for i := range r.Filters {
		fp := p.Child("filters").Index(i)
		f := &r.Filters[i]
		errs = append(errs, validateFilter(fp, f, r)...)
		if f.Type != gatewayv1.HTTPRouteFilterRequestMirror && seen[f.Type] {
			errs = append(errs, field.Duplicate(fp.Child("type"), f.Type))
		}
		seen[f.Type] = true
	}
	if seen[gatewayv1.HTTPRouteFilterRequestRedirect] && seen[gatewayv1.HTTPRouteFilterURLRewrite] {
		errs = append(errs, field.Invalid(p.Child("filters"), "RequestRedirect+URLRewrite", "a rule may have a RequestRedirect or a URLRewrite filter, not both"))
	}
	if seen[gatewayv1.HTTPRouteFilterRequestRedirect] && len(r.BackendRefs) > 0 {
		errs = append(errs, field.Invalid(p.Child("backendRefs"), len(r.BackendRefs), "a rule with a RequestRedirect filter must not have backendRefs: remove them or the redirect"))
	}
	for i := range r.BackendRefs {
		bp := p.Child("backendRefs").Index(i)
		b := &r.BackendRefs[i]
		errs = append(errs, validateBackendObjectRef(bp, &b.BackendObjectReference)...)
		if b.Weight != nil && (*b.Weight < 0 || *b.Weight > maxWeight) {
			errs = append(errs, field.Invalid(bp.Child("weight"), *b.Weight, fmt.Sprintf("must be from 0 to %d", maxWeight)))
		}
		errs = append(errs, validateBackendRefFilters(bp.Child("filters"), b.Filters, r)...)
	}
	if t := r.Timeouts; t != nil {
		req, e1 := parseDuration(p.Child("timeouts", "request"), t.Request)
		be, e2 := parseDuration(p.Child("timeouts", "backendRequest"), t.BackendRequest)
		errs = append(errs, e1...)
		errs = append(errs, e2...)
		if len(e1)+len(e2) == 0 && req > 0 && be > req {
			errs = append(errs, field.Invalid(p.Child("timeouts", "backendRequest"), *t.BackendRequest, fmt.Sprintf("must not be longer than timeouts.request (%s)", *t.Request)))
		}
	}
	if r.Retry != nil {
		errs = append(errs, validateRetry(p.Child("retry"), r)...)
	}
	errs = append(errs, validateSessionPersistence(p.Child("sessionPersistence"), r.SessionPersistence, r)...)
	return errs
}

// retryWithBackendFilters says why a rule cannot have both.
const retryWithBackendFilters = "a rule with a retry policy cannot have backendRefs with filters of their own: a retry picks " +
	"a backend again, and the first backend's header changes would stay on the request; move the filters to the rule's " +
	"filters or remove the retry"

// validateRetry checks a rule's retry policy (HTTPRouteRetry): attempts
// from 1 to ghostjson.MaxRetryAttempts, codes from 400 to 599 each once,
// a backoff no longer than ghostjson.MaxRetryBackoffMs, and no
// backendRef filters in the same rule.
func validateRetry(p *field.Path, r *gatewayv1.HTTPRouteRule) field.ErrorList {
	var errs field.ErrorList
	rt := r.Retry
	if a := rt.Attempts; a != nil && (*a < 1 || *a > ghostjson.MaxRetryAttempts) {
		errs = append(errs, field.Invalid(p.Child("attempts"), *a, fmt.Sprintf("must be from 1 to %d retries; varnishd's "+
			"max_retries (4 by default) bounds it too", ghostjson.MaxRetryAttempts)))
	}
	codes := make([]int, len(rt.Codes))
	for i, c := range rt.Codes {
		codes[i] = int(c)
	}
	errs = append(errs, validateRetryCodes(p.Child("codes"), codes)...)
	if b, e := parseDuration(p.Child("backoff"), rt.Backoff); len(e) > 0 {
		errs = append(errs, e...)
	} else if b.Milliseconds() > ghostjson.MaxRetryBackoffMs {
		errs = append(errs, field.Invalid(p.Child("backoff"), *rt.Backoff, fmt.Sprintf("must not be longer than %s: a backoff holds one of the "+
			"gateway's worker threads, which every route shares", time.Duration(ghostjson.MaxRetryBackoffMs)*time.Millisecond)))
	}
	for i := range r.BackendRefs {
		if len(r.BackendRefs[i].Filters) > 0 {
			errs = append(errs, field.Forbidden(p, retryWithBackendFilters))
			break
		}
	}
	return errs
}

// backendRefFilterTypes are the filter types varnishgw applies on a
// backendRef (ghost applies them only when that backend is picked).
var backendRefFilterTypes = []string{string(gatewayv1.HTTPRouteFilterRequestHeaderModifier)}

// validateBackendRefFilters checks a backendRef's filters: only a
// RequestHeaderModifier, once; the other types are rejected with where to
// put them instead.
func validateBackendRefFilters(p *field.Path, fs []gatewayv1.HTTPRouteFilter, r *gatewayv1.HTTPRouteRule) field.ErrorList {
	var errs field.ErrorList
	if len(fs) > maxFilters {
		return field.ErrorList{field.TooMany(p, len(fs), maxFilters)}
	}
	seen := false
	for i := range fs {
		fp := p.Index(i)
		f := &fs[i]
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			if seen {
				errs = append(errs, field.Duplicate(fp.Child("type"), f.Type))
				continue
			}
			seen = true
			errs = append(errs, validateFilter(fp, f, r)...)
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier, gatewayv1.HTTPRouteFilterRequestRedirect, gatewayv1.HTTPRouteFilterURLRewrite,
			gatewayv1.HTTPRouteFilterRequestMirror, gatewayv1.HTTPRouteFilterCORS:
			errs = append(errs, field.Invalid(fp.Child("type"), f.Type, fmt.Sprintf("not supported on a backendRef, which may have "+
				"%s filters only: move this filter to the rule's filters, which apply to all of its backends, or give this backend "+
				"a rule of its own", strings.Join(backendRefFilterTypes, ", "))))
		default:
			// ExternalAuth, ExtensionRef and unknown types: the rule
			// filter's message says why.
			errs = append(errs, validateFilter(fp, f, r)...)
		}
	}
	return errs
}

func parseDuration(p *field.Path, d *gatewayv1.Duration) (time.Duration, field.ErrorList) {
	if d == nil {
		return 0, nil
	}
	s := string(*d)
	if !durationRE.MatchString(s) {
		return 0, field.ErrorList{field.Invalid(p, s, `must be a Gateway API duration such as "10s", "1m30s" or "500ms"`)}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, field.ErrorList{field.Invalid(p, s, err.Error())}
	}
	return v, nil
}

func validateHTTPRouteMatch(p *field.Path, m *gatewayv1.HTTPRouteMatch) field.ErrorList {
	var errs field.ErrorList
	if m.Path != nil {
		pt := gatewayv1.PathMatchPathPrefix
		if m.Path.Type != nil {
			pt = *m.Path.Type
		}
		value := "/"
		if m.Path.Value != nil {
			value = *m.Path.Value
		}
		vp := p.Child("path", "value")
		switch pt {
		case gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix:
			errs = append(errs, validatePathValue(vp, value)...)
		case gatewayv1.PathMatchRegularExpression:
			if err := vclregex.Validate(value); err != nil {
				errs = append(errs, field.Invalid(vp, value, err.Error()))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("path", "type"), pt, []string{"Exact", "PathPrefix", "RegularExpression"}))
		}
	}
	if len(m.Headers) > maxValueMatches {
		errs = append(errs, field.TooMany(p.Child("headers"), len(m.Headers), maxValueMatches))
	}
	seen := map[string]bool{}
	for i, h := range m.Headers {
		hp := p.Child("headers").Index(i)
		errs = append(errs, validateHeaderName(hp.Child("name"), string(h.Name))...)
		if k := strings.ToLower(string(h.Name)); seen[k] {
			errs = append(errs, field.Duplicate(hp.Child("name"), h.Name))
		} else {
			seen[k] = true
		}
		errs = append(errs, validateMatchValue(hp, h.Type == nil || *h.Type == gatewayv1.HeaderMatchExact, h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression, h.Type, h.Value)...)
	}
	if len(m.QueryParams) > maxValueMatches {
		errs = append(errs, field.TooMany(p.Child("queryParams"), len(m.QueryParams), maxValueMatches))
	}
	seen = map[string]bool{}
	for i, q := range m.QueryParams {
		qp := p.Child("queryParams").Index(i)
		// The CRD types query parameter names as HTTPHeaderName: tokens.
		errs = append(errs, validateHeaderName(qp.Child("name"), string(q.Name))...)
		if seen[string(q.Name)] {
			errs = append(errs, field.Duplicate(qp.Child("name"), q.Name))
		}
		seen[string(q.Name)] = true
		errs = append(errs, validateMatchValue(qp, q.Type == nil || *q.Type == gatewayv1.QueryParamMatchExact, q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression, q.Type, q.Value)...)
	}
	if m.Method != nil && !supportedMethods[string(*m.Method)] {
		errs = append(errs, field.NotSupported(p.Child("method"), *m.Method, methodList))
	}
	return errs
}

func validateMatchValue[T ~string](p *field.Path, exact, regex bool, typ *T, value string) field.ErrorList {
	switch {
	case exact:
		return validateHeaderValue(p.Child("value"), value)
	case regex:
		if err := vclregex.Validate(value); err != nil {
			return field.ErrorList{field.Invalid(p.Child("value"), value, err.Error())}
		}
		return nil
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), *typ, []string{"Exact", "RegularExpression"})}
	}
}

// validatePathValue checks an Exact or PathPrefix path the way the Gateway
// API CRD does.
func validatePathValue(p *field.Path, v string) field.ErrorList {
	switch {
	case !strings.HasPrefix(v, "/"):
		return field.ErrorList{field.Invalid(p, v, `must be an absolute path starting with "/"`)}
	case len(v) > maxPathLength:
		return field.ErrorList{field.TooLong(p, v, maxPathLength)}
	}
	for _, bad := range []string{"//", "/./", "/../", "%2f", "%2F", "#"} {
		if strings.Contains(v, bad) {
			return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must not contain %q: write the normalised path", bad))}
		}
	}
	if strings.HasSuffix(v, "/..") || strings.HasSuffix(v, "/.") {
		return field.ErrorList{field.Invalid(p, v, `must not end with "/." or "/..": write the normalised path`)}
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] == 0x7f || v[i] >= 0x80 {
			return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("byte 0x%02x at offset %d must be percent-encoded", v[i], i))}
		}
	}
	return nil
}

func validateHeaderName(p *field.Path, name string) field.ErrorList {
	if len(name) > 256 {
		return field.ErrorList{field.TooLong(p, name, 256)}
	}
	if !headerNameRE.MatchString(name) {
		return field.ErrorList{field.Invalid(p, name, "must be an HTTP token: letters, digits and !#$%&'*+-.^_`|~ (RFC 9110)")}
	}
	return nil
}

func validateHeaderValue(p *field.Path, v string) field.ErrorList {
	if len(v) > maxValueLength {
		return field.ErrorList{field.TooLong(p, v, maxValueLength)}
	}
	if i := strings.IndexAny(v, "\r\n\x00"); i >= 0 {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("control character at offset %d: header values must not contain CR, LF or NUL", i))}
	}
	return nil
}

// validateHostname checks an exact DNS name or, when wildcard is true, also
// *.suffix. IP addresses are rejected. The message says how to fix it.
func validateHostname(p *field.Path, h string, wildcard bool) field.ErrorList {
	if msg := hostnameProblem(h, wildcard); msg != "" {
		return field.ErrorList{field.Invalid(p, h, msg)}
	}
	return nil
}

func validateBackendObjectRef(p *field.Path, b *gatewayv1.BackendObjectReference) field.ErrorList {
	var errs field.ErrorList
	if b.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "the name of the Service"))
	} else if msg := objectNameProblem(string(b.Name), false, backendNames(b)); msg != "" {
		errs = append(errs, field.Invalid(p.Child("name"), b.Name, msg))
	}
	if b.Namespace != nil {
		if msg := objectNameProblem(string(*b.Namespace), true, "namespace names"); msg != "" {
			errs = append(errs, field.Invalid(p.Child("namespace"), *b.Namespace, msg))
		}
	}
	if isServiceRef(b.Group, b.Kind) && b.Port == nil {
		errs = append(errs, field.Required(p.Child("port"), "a Service backendRef needs the Service port"))
	}
	if b.Port != nil && (*b.Port < 1 || *b.Port > 65535) {
		errs = append(errs, field.Invalid(p.Child("port"), *b.Port, "must be a port number from 1 to 65535"))
	}
	return errs
}

// backendNames is what the names of b's kind are called in messages.
func backendNames(b *gatewayv1.BackendObjectReference) string {
	if isServiceRef(b.Group, b.Kind) {
		return "Service names"
	}
	return "object names"
}

func isServiceRef(group *gatewayv1.Group, kind *gatewayv1.Kind) bool {
	return (group == nil || *group == "" || *group == "core") && (kind == nil || *kind == "Service")
}

func validateFilter(p *field.Path, f *gatewayv1.HTTPRouteFilter, r *gatewayv1.HTTPRouteRule) field.ErrorList {
	var errs field.ErrorList
	set := map[gatewayv1.HTTPRouteFilterType]bool{
		gatewayv1.HTTPRouteFilterRequestHeaderModifier:  f.RequestHeaderModifier != nil,
		gatewayv1.HTTPRouteFilterResponseHeaderModifier: f.ResponseHeaderModifier != nil,
		gatewayv1.HTTPRouteFilterRequestRedirect:        f.RequestRedirect != nil,
		gatewayv1.HTTPRouteFilterURLRewrite:             f.URLRewrite != nil,
		gatewayv1.HTTPRouteFilterRequestMirror:          f.RequestMirror != nil,
		gatewayv1.HTTPRouteFilterCORS:                   f.CORS != nil,
		gatewayv1.HTTPRouteFilterExternalAuth:           f.ExternalAuth != nil,
		gatewayv1.HTTPRouteFilterExtensionRef:           f.ExtensionRef != nil,
	}
	// The filters of the Gateway API varnishgw does not implement: a
	// filter of that type, or its field in a filter of another type.
	unsupported := []struct {
		typ gatewayv1.HTTPRouteFilterType
		set bool
		why string
	}{
		{gatewayv1.HTTPRouteFilterExternalAuth, f.ExternalAuth != nil, "ExternalAuth filters are not supported yet: authenticate " +
			"requests in the backend"},
		{gatewayv1.HTTPRouteFilterExtensionRef, f.ExtensionRef != nil, "ExtensionRef filters are not supported: varnishgw has no " +
			"filter extensions; custom request handling goes in the gateway's or the class's VCL"},
	}
	for _, u := range unsupported {
		if f.Type == u.typ {
			return field.ErrorList{field.Invalid(p.Child("type"), f.Type, u.why+"; remove the filter")}
		}
	}
	switch f.Type {
	case gatewayv1.HTTPRouteFilterRequestHeaderModifier, gatewayv1.HTTPRouteFilterResponseHeaderModifier,
		gatewayv1.HTTPRouteFilterRequestRedirect, gatewayv1.HTTPRouteFilterURLRewrite, gatewayv1.HTTPRouteFilterRequestMirror,
		gatewayv1.HTTPRouteFilterCORS:
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), f.Type, supportedFilterTypes)}
	}
	for _, u := range unsupported {
		if u.set {
			errs = append(errs, field.Forbidden(p.Child(filterFieldName(u.typ)), u.why+"; remove it"))
		}
		delete(set, u.typ)
	}
	for _, t := range supportedFilterTypes {
		ok := set[gatewayv1.HTTPRouteFilterType(t)]
		if ok != (gatewayv1.HTTPRouteFilterType(t) == f.Type) {
			fn := filterFieldName(gatewayv1.HTTPRouteFilterType(t))
			if ok {
				errs = append(errs, field.Forbidden(p.Child(fn), fmt.Sprintf("must not be set when type is %s", f.Type)))
			} else {
				errs = append(errs, field.Required(p.Child(fn), fmt.Sprintf("must be set when type is %s", f.Type)))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	switch f.Type {
	case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
		errs = append(errs, validateHeaderFilter(p.Child("requestHeaderModifier"), f.RequestHeaderModifier)...)
	case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
		errs = append(errs, validateHeaderFilter(p.Child("responseHeaderModifier"), f.ResponseHeaderModifier)...)
	case gatewayv1.HTTPRouteFilterRequestRedirect:
		rp := p.Child("requestRedirect")
		rd := f.RequestRedirect
		if rd.Scheme != nil && *rd.Scheme != "http" && *rd.Scheme != "https" {
			errs = append(errs, field.NotSupported(rp.Child("scheme"), *rd.Scheme, []string{"http", "https"}))
		}
		if rd.Hostname != nil {
			errs = append(errs, validateHostname(rp.Child("hostname"), string(*rd.Hostname), false)...)
		}
		if rd.Port != nil && (*rd.Port < 1 || *rd.Port > 65535) {
			errs = append(errs, field.Invalid(rp.Child("port"), *rd.Port, "must be a port number from 1 to 65535"))
		}
		if rd.StatusCode != nil {
			switch *rd.StatusCode {
			case 301, 302, 303, 307, 308:
			default:
				errs = append(errs, field.NotSupported(rp.Child("statusCode"), *rd.StatusCode, []string{"301", "302", "303", "307", "308"}))
			}
		}
		errs = append(errs, validatePathModifier(rp.Child("path"), rd.Path, r)...)
	case gatewayv1.HTTPRouteFilterURLRewrite:
		up := p.Child("urlRewrite")
		if h := f.URLRewrite.Hostname; h != nil {
			errs = append(errs, validateHostname(up.Child("hostname"), string(*h), false)...)
		}
		errs = append(errs, validatePathModifier(up.Child("path"), f.URLRewrite.Path, r)...)
	case gatewayv1.HTTPRouteFilterRequestMirror:
		mp := p.Child("requestMirror")
		m := f.RequestMirror
		errs = append(errs, validateBackendObjectRef(mp.Child("backendRef"), &m.BackendRef)...)
		if m.Percent != nil && m.Fraction != nil {
			errs = append(errs, field.Invalid(mp, "percent+fraction", "set percent or fraction, not both"))
		}
		if m.Percent != nil && (*m.Percent < 0 || *m.Percent > 100) {
			errs = append(errs, field.Invalid(mp.Child("percent"), *m.Percent, "must be from 0 to 100"))
		}
		if fr := m.Fraction; fr != nil {
			if _, err := fractionPercent(fr); err != nil {
				errs = append(errs, field.Invalid(mp.Child("fraction"), fmt.Sprintf("%d/%d", fr.Numerator, denominator(fr)), err.Error()))
			}
		}
	case gatewayv1.HTTPRouteFilterCORS:
		errs = append(errs, validateCORS(p.Child("cors"), f.CORS)...)
	}
	return errs
}

func filterFieldName(t gatewayv1.HTTPRouteFilterType) string {
	switch t {
	case gatewayv1.HTTPRouteFilterURLRewrite:
		return "urlRewrite"
	case gatewayv1.HTTPRouteFilterCORS:
		return "cors"
	default:
		s := string(t)
		return strings.ToLower(s[:1]) + s[1:]
	}
}

func denominator(f *gatewayv1.Fraction) int32 {
	if f.Denominator == nil {
		return 100
	}
	return *f.Denominator
}

// fractionPercent converts a mirror fraction to the whole percentage
// ghost.json carries; fractions that are not a whole percentage are rejected.
func fractionPercent(f *gatewayv1.Fraction) (int32, error) {
	d := int64(denominator(f))
	n := int64(f.Numerator)
	switch {
	case d < 1:
		return 0, fmt.Errorf("denominator must be at least 1")
	case n < 0 || n > d:
		return 0, fmt.Errorf("numerator must be from 0 to the denominator")
	case n*100%d != 0:
		return 0, fmt.Errorf("must be a whole percentage (varnishgw mirrors in steps of 1%%): use percent")
	}
	return int32(n * 100 / d), nil
}

func validateHeaderFilter(p *field.Path, h *gatewayv1.HTTPHeaderFilter) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		name string
		vals []gatewayv1.HTTPHeader
	}{{"set", h.Set}, {"add", h.Add}} {
		lp := p.Child(l.name)
		if len(l.vals) > maxHeaderMods {
			errs = append(errs, field.TooMany(lp, len(l.vals), maxHeaderMods))
		}
		seen := map[string]bool{}
		for i, v := range l.vals {
			errs = append(errs, validateHeaderName(lp.Index(i).Child("name"), string(v.Name))...)
			errs = append(errs, validateHeaderValue(lp.Index(i).Child("value"), v.Value)...)
			k := strings.ToLower(string(v.Name))
			if seen[k] {
				errs = append(errs, field.Duplicate(lp.Index(i).Child("name"), v.Name))
			}
			seen[k] = true
		}
	}
	if len(h.Remove) > maxHeaderMods {
		errs = append(errs, field.TooMany(p.Child("remove"), len(h.Remove), maxHeaderMods))
	}
	seen := map[string]bool{}
	for i, n := range h.Remove {
		errs = append(errs, validateHeaderName(p.Child("remove").Index(i), n)...)
		k := strings.ToLower(n)
		if seen[k] {
			errs = append(errs, field.Duplicate(p.Child("remove").Index(i), n))
		}
		seen[k] = true
	}
	return errs
}

func validatePathModifier(p *field.Path, m *gatewayv1.HTTPPathModifier, r *gatewayv1.HTTPRouteRule) field.ErrorList {
	if m == nil {
		return nil
	}
	var errs field.ErrorList
	switch m.Type {
	case gatewayv1.FullPathHTTPPathModifier:
		if m.ReplaceFullPath == nil || m.ReplacePrefixMatch != nil {
			return field.ErrorList{field.Invalid(p, m.Type, "type ReplaceFullPath needs replaceFullPath and no replacePrefixMatch")}
		}
		errs = append(errs, validateModifierPath(p.Child("replaceFullPath"), *m.ReplaceFullPath)...)
	case gatewayv1.PrefixMatchHTTPPathModifier:
		if m.ReplacePrefixMatch == nil || m.ReplaceFullPath != nil {
			return field.ErrorList{field.Invalid(p, m.Type, "type ReplacePrefixMatch needs replacePrefixMatch and no replaceFullPath")}
		}
		errs = append(errs, validateModifierPath(p.Child("replacePrefixMatch"), *m.ReplacePrefixMatch)...)
		for i, match := range r.Matches {
			if match.Path != nil && match.Path.Type != nil && *match.Path.Type != gatewayv1.PathMatchPathPrefix {
				errs = append(errs, field.Invalid(p.Child("type"), m.Type,
					fmt.Sprintf("ReplacePrefixMatch needs PathPrefix matches, but matches[%d] is %s: use ReplaceFullPath", i, *match.Path.Type)))
			}
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, []string{"ReplaceFullPath", "ReplacePrefixMatch"}))
	}
	return errs
}

func validateModifierPath(p *field.Path, v string) field.ErrorList {
	if len(v) > maxPathLength {
		return field.ErrorList{field.TooLong(p, v, maxPathLength)}
	}
	if v != "" && !strings.HasPrefix(v, "/") {
		return field.ErrorList{field.Invalid(p, v, `must start with "/"`)}
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] == 0x7f || v[i] >= 0x80 {
			return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("byte 0x%02x at offset %d must be percent-encoded", v[i], i))}
		}
	}
	return nil
}

// normalizeMatch fills in the spec defaults; the route has been validated.
func normalizeMatch(m *gatewayv1.HTTPRouteMatch) ghostjson.Match {
	out := ghostjson.Match{Path: ghostjson.PathMatch{Type: ghostjson.PathPrefix, Value: "/"}}
	if m.Path != nil {
		if m.Path.Type != nil {
			out.Path.Type = string(*m.Path.Type)
		}
		if m.Path.Value != nil {
			out.Path.Value = *m.Path.Value
		}
	}
	if m.Method != nil {
		out.Method = string(*m.Method)
	}
	for _, h := range m.Headers {
		t := ghostjson.PathExact
		if h.Type != nil {
			t = string(*h.Type)
		}
		// Header names are case-insensitive; ghost gets them in lower case.
		out.Headers = append(out.Headers, ghostjson.ValueMatch{Type: t, Name: strings.ToLower(string(h.Name)), Value: h.Value})
	}
	for _, q := range m.QueryParams {
		t := ghostjson.PathExact
		if q.Type != nil {
			t = string(*q.Type)
		}
		out.QueryParams = append(out.QueryParams, ghostjson.ValueMatch{Type: t, Name: string(q.Name), Value: q.Value})
	}
	return out
}
