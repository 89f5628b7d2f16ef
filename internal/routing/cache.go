package routing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// CachePolicyAnnotation is the Gateway annotation that holds the Gateway's
// default cache policy: the JSON of a CachePolicy, written by the provider
// with the Gateway. Absent: the Gateway has no default (its routes are
// passed unless a rule sets a policy).
const CachePolicyAnnotation = "varnishgw.dev/cache-policy"

// Cache policy defaults: the values of the fields that neither the rule nor
// the Gateway sets.
const (
	DefaultCacheTTL       = 2 * time.Minute
	DefaultCacheGrace     = 10 * time.Second
	DefaultCacheKeep      = time.Duration(0)
	DefaultCacheTagHeader = "Cache-Tag"
)

// Limits of a cache policy, those of ghost/ghost.schema.json.
const (
	maxCacheQueryParams  = 64
	maxCacheKeyHeaders   = 16
	maxCacheStripCookies = 64
	maxCacheName         = 256
)

// Patterns of cache policy values, for the provider's schema validators
// (ValidateCachePolicy applies them too).
var (
	// DurationPattern is the Gateway API duration format (GEP-2257) of
	// ttl, grace and keep: "2m", "1h30m", "500ms".
	DurationPattern = durationRE
	// TokenPattern is an HTTP token (RFC 9110): header names and cookie
	// names.
	TokenPattern = headerNameRE
	// QueryParamPattern is a query parameter name as it appears in the
	// URL: no "&", "=", "#", "?", space or control character.
	QueryParamPattern = regexp.MustCompile(`^[^&=#? \x00-\x1f\x7f]+$`)
)

// CachePolicy is a cache policy as written: a Gateway's default (the
// CachePolicyAnnotation) or a route rule's own (Rule.Cache). Every field is
// nullable: a rule's field left nil takes the Gateway's, and a field nil in
// both takes its default (EffectiveCache). The JSON names are those of the
// field paths in validation errors.
type CachePolicy struct {
	// Enabled: false passes the requests (on a rule: whatever the Gateway
	// says). Nil: true when the policy is present, except that a rule
	// inherits a Gateway's explicit false.
	Enabled *bool `json:"enabled,omitempty"`
	// TTL is a Gateway API duration ("2m"): the time to live of a
	// response whose origin says nothing (DefaultCacheTTL).
	TTL *string `json:"ttl,omitempty"`
	// ForceTTL makes TTL replace the origin's max-age, s-maxage, Expires
	// and no-cache (default false).
	ForceTTL *bool `json:"forceTtl,omitempty"`
	// Grace and Keep are Gateway API durations: beresp.grace
	// (DefaultCacheGrace) and beresp.keep (DefaultCacheKeep).
	Grace *string `json:"grace,omitempty"`
	Keep  *string `json:"keep,omitempty"`
	// QueryParametersInclude keeps only these query parameters in the
	// cache key (an empty list: no query in the key);
	// QueryParametersExclude keeps all but these. At most one is set;
	// both nil: every parameter is in the key. A rule that sets either
	// replaces the Gateway's choice of both.
	QueryParametersInclude *[]string `json:"queryParametersInclude,omitempty"`
	QueryParametersExclude *[]string `json:"queryParametersExclude,omitempty"`
	// KeyHeaders are request header names whose values are added to the
	// cache key (default none).
	KeyHeaders *[]string `json:"keyHeaders,omitempty"`
	// StripCookies are cookie names removed from the request before the
	// lookup; "*" removes every cookie (default none: a request with a
	// cookie is passed).
	StripCookies *[]string `json:"stripCookies,omitempty"`
	// AllowAuthorization lets requests with an Authorization header be
	// cached (default false: they are passed).
	AllowAuthorization *bool `json:"allowAuthorization,omitempty"`
	// TagHeader is the response header listing the object's tags
	// (DefaultCacheTagHeader); "" for none.
	TagHeader *string `json:"tagHeader,omitempty"`
	// StatusHeader is a response header set to HIT, MISS or PASS; ""
	// (the default) for none.
	StatusHeader *string `json:"statusHeader,omitempty"`
}

// ValidateCachePolicy checks c, whose field path is p, and names the field,
// the value and the fix in each error. A nil c is valid (no policy).
func ValidateCachePolicy(p *field.Path, c *CachePolicy) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	for _, d := range []struct {
		name string
		v    *string
	}{{"ttl", c.TTL}, {"grace", c.Grace}, {"keep", c.Keep}} {
		if d.v != nil {
			_, e := parseDuration(p.Child(d.name), (*gatewayv1.Duration)(d.v))
			errs = append(errs, e...)
		}
	}
	if c.QueryParametersInclude != nil && c.QueryParametersExclude != nil {
		errs = append(errs, field.Invalid(p.Child("queryParametersExclude"), *c.QueryParametersExclude,
			"conflicts with queryParametersInclude: set one of them (include lists the parameters kept in the cache key, exclude the ones left out)"))
	}
	errs = append(errs, validateCacheNames(p.Child("queryParametersInclude"), c.QueryParametersInclude, maxCacheQueryParams, queryParamNameProblem, true)...)
	errs = append(errs, validateCacheNames(p.Child("queryParametersExclude"), c.QueryParametersExclude, maxCacheQueryParams, queryParamNameProblem, true)...)
	errs = append(errs, validateCacheNames(p.Child("keyHeaders"), c.KeyHeaders, maxCacheKeyHeaders, headerNameProblem, false)...)
	errs = append(errs, validateCacheNames(p.Child("stripCookies"), c.StripCookies, maxCacheStripCookies, cookieNameProblem, true)...)
	for _, h := range []struct {
		name string
		v    *string
	}{{"tagHeader", c.TagHeader}, {"statusHeader", c.StatusHeader}} {
		if h.v == nil || *h.v == "" {
			continue
		}
		if msg := headerNameProblem(*h.v); msg != "" {
			errs = append(errs, field.Invalid(p.Child(h.name), *h.v, msg+`, or "" for none`))
		}
	}
	return errs
}

// validateCacheNames checks a list of names: at most limit, each valid
// (problem returns "" for a valid name), no duplicates (compared exactly,
// or ignoring case when exact is false).
func validateCacheNames(p *field.Path, l *[]string, limit int, problem func(string) string, exact bool) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	if len(*l) > limit {
		errs = append(errs, field.TooMany(p, len(*l), limit))
	}
	seen := map[string]bool{}
	for i, n := range *l {
		if msg := problem(n); msg != "" {
			errs = append(errs, field.Invalid(p.Index(i), n, msg))
			continue
		}
		k := n
		if !exact {
			k = strings.ToLower(n)
		}
		if seen[k] {
			errs = append(errs, field.Duplicate(p.Index(i), n))
		}
		seen[k] = true
	}
	return errs
}

func headerNameProblem(n string) string {
	if len(n) > maxCacheName {
		return fmt.Sprintf("is longer than %d characters: use a shorter header name", maxCacheName)
	}
	if !headerNameRE.MatchString(n) {
		return "must be an HTTP header name: letters, digits and !#$%&'*+-.^_`|~ (RFC 9110)"
	}
	return ""
}

// cookieNameProblem: a cookie name is an HTTP token (RFC 6265), or "*" for
// every cookie.
func cookieNameProblem(n string) string {
	if n == "*" {
		return ""
	}
	if len(n) > maxCacheName {
		return fmt.Sprintf("is longer than %d characters: use a shorter cookie name", maxCacheName)
	}
	if !headerNameRE.MatchString(n) {
		return `must be a cookie name (letters, digits and !#$%&'*+-.^_` + "`" + `|~, RFC 6265) or "*" for every cookie`
	}
	return ""
}

// queryParamNameProblem: a query parameter name as it appears in the URL,
// compared exactly: not empty, no '&', '=', '#', space or control
// character.
func queryParamNameProblem(n string) string {
	switch {
	case n == "":
		return "must not be empty: name a query parameter such as utm_source"
	case len(n) > maxCacheName:
		return fmt.Sprintf("is longer than %d characters: use a shorter parameter name", maxCacheName)
	case !QueryParamPattern.MatchString(n):
		return `must be a query parameter name as it appears in the URL, without "&", "=", "#", "?", spaces or control characters`
	}
	return ""
}

// ParseCachePolicy decodes and validates the JSON of a CachePolicy (the
// CachePolicyAnnotation's value). Unknown fields are rejected: a policy
// this build does not fully understand is never applied in part. p is the
// field path in errors.
func ParseCachePolicy(p *field.Path, data string) (*CachePolicy, error) {
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	var c CachePolicy
	if err := dec.Decode(&c); err != nil {
		return nil, field.Invalid(p, data, "must be the JSON of a cache policy: "+err.Error())
	}
	if dec.More() {
		return nil, field.Invalid(p, data, "trailing data after the JSON object")
	}
	if errs := ValidateCachePolicy(p, &c); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &c, nil
}

// MarshalCachePolicy encodes c as the CachePolicyAnnotation's value:
// compact JSON, only the fields set.
func MarshalCachePolicy(c *CachePolicy) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return "", fmt.Errorf("encode the cache policy: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// GatewayCachePolicy is the default cache policy of gw from its
// CachePolicyAnnotation: nil without the annotation, an error naming the
// annotation and the field when it is invalid.
func GatewayCachePolicy(gw *gatewayv1.Gateway) (*CachePolicy, error) {
	if gw == nil {
		return nil, nil
	}
	v, ok := gw.Annotations[CachePolicyAnnotation]
	if !ok {
		return nil, nil
	}
	c, err := ParseCachePolicy(field.NewPath("metadata", "annotations").Key(CachePolicyAnnotation), v)
	if err != nil {
		return nil, fmt.Errorf("the default cache policy of Gateway %s/%s: %w; fix the Gateway's cache block and apply it again", gw.Namespace, gw.Name, err)
	}
	return c, nil
}

// EffectiveCache merges a Gateway's default policy and a rule's own, field
// by field (the rule's set fields win; QueryParametersInclude and
// QueryParametersExclude count as one field), fills in the defaults and
// returns the policy ghost applies, nil when the rule's requests are
// passed:
//
//   - neither policy: passed;
//   - a rule with Enabled false: passed, whatever the Gateway says;
//   - a rule without Enabled: the Gateway's Enabled (a Gateway with
//     Enabled false defines defaults that only rules with Enabled true
//     use); no Gateway policy, or one without Enabled: cached.
//
// The inputs must be valid (ValidateCachePolicy); a duration that does not
// parse counts as unset. Header names are lower case and the result has no
// Name (Resolve names it).
func EffectiveCache(gatewayDefault, rule *CachePolicy) *ghostjson.CachePolicy {
	if gatewayDefault == nil && rule == nil {
		return nil
	}
	g, r := gatewayDefault, rule
	if g == nil {
		g = &CachePolicy{}
	}
	if r == nil {
		r = &CachePolicy{}
	}
	if !*pick(r.Enabled, g.Enabled, ptrTo(true)) {
		return nil
	}
	out := &ghostjson.CachePolicy{
		TTLMs:              durationMs(pick(r.TTL, g.TTL, nil), DefaultCacheTTL),
		ForceTTL:           *pick(r.ForceTTL, g.ForceTTL, ptrTo(false)),
		GraceMs:            durationMs(pick(r.Grace, g.Grace, nil), DefaultCacheGrace),
		KeepMs:             durationMs(pick(r.Keep, g.Keep, nil), DefaultCacheKeep),
		AllowAuthorization: *pick(r.AllowAuthorization, g.AllowAuthorization, ptrTo(false)),
		TagHeader:          strings.ToLower(*pick(r.TagHeader, g.TagHeader, ptrTo(DefaultCacheTagHeader))),
		StatusHeader:       strings.ToLower(*pick(r.StatusHeader, g.StatusHeader, ptrTo(""))),
	}
	q := r
	if q.QueryParametersInclude == nil && q.QueryParametersExclude == nil {
		q = g
	}
	switch {
	case q.QueryParametersInclude != nil && len(*q.QueryParametersInclude) == 0:
		out.QueryKey = ghostjson.QueryKeyNone
	case q.QueryParametersInclude != nil:
		out.QueryKey, out.QueryParams = ghostjson.QueryKeyInclude, slices.Clone(*q.QueryParametersInclude)
	case q.QueryParametersExclude != nil && len(*q.QueryParametersExclude) > 0:
		out.QueryKey, out.QueryParams = ghostjson.QueryKeyExclude, slices.Clone(*q.QueryParametersExclude)
	default:
		out.QueryKey = ghostjson.QueryKeyAll
	}
	if l := pick(r.KeyHeaders, g.KeyHeaders, nil); l != nil {
		for _, h := range *l {
			out.KeyHeaders = append(out.KeyHeaders, strings.ToLower(h))
		}
	}
	if l := pick(r.StripCookies, g.StripCookies, nil); l != nil && len(*l) > 0 {
		out.StripCookies = slices.Clone(*l)
	}
	return out
}

// pick returns the first non-nil of rule, gateway and def.
func pick[T any](rule, gateway, def *T) *T {
	if rule != nil {
		return rule
	}
	if gateway != nil {
		return gateway
	}
	return def
}

func ptrTo[T any](v T) *T { return &v }

// durationMs is the Gateway API duration s in milliseconds, def when s is
// nil or does not parse.
func durationMs(s *string, def time.Duration) int64 {
	d := def
	if s != nil && durationRE.MatchString(*s) {
		if v, err := time.ParseDuration(*s); err == nil {
			d = v
		}
	}
	return d.Milliseconds()
}

// CachePolicyName is the name of a rule's effective policy in ghost.json's
// cachePolicies when the rule has a policy of its own:
// "<namespace>/<route>/<rule index>". GatewayCachePolicyName names the
// Gateway's default when a rule inherits it unchanged.
func CachePolicyName(route *RouteRef, rule int) string {
	return fmt.Sprintf("%s/%s/%d", route.Namespace, route.Name, rule)
}

// GatewayCachePolicyName is the ghost.json name of the Gateway's default
// policy (the effective policy of rules without a policy of their own).
const GatewayCachePolicyName = "gateway"
