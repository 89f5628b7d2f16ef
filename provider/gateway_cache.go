package provider

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
	"github.com/varnishgw/terraform-provider-varnishgw/internal/routing"
)

// The cache block of varnishgw_gateway (the default policy of its routes,
// written as the Gateway's routing.CachePolicyAnnotation) and of a
// varnishgw_http_route rule (the rule's own policy, in its
// RoutingFragments). The semantics are routing's (routing.CachePolicy,
// routing.EffectiveCache): an argument left unset inherits, so the block
// has no schema defaults; the descriptions give the values that apply.

// cachePolicyModel is a cache block. Lists are types.List so that an
// empty list (query_parameters_include = []: no query in the key) differs
// from an unset one (inherit).
type cachePolicyModel struct {
	Enabled                types.Bool   `tfsdk:"enabled"`
	TTL                    types.String `tfsdk:"ttl"`
	ForceTTL               types.Bool   `tfsdk:"force_ttl"`
	Grace                  types.String `tfsdk:"grace"`
	Keep                   types.String `tfsdk:"keep"`
	QueryParametersInclude types.List   `tfsdk:"query_parameters_include"`
	QueryParametersExclude types.List   `tfsdk:"query_parameters_exclude"`
	KeyHeaders             types.List   `tfsdk:"key_headers"`
	StripCookies           types.List   `tfsdk:"strip_cookies"`
	AllowAuthorization     types.Bool   `tfsdk:"allow_authorization"`
	TagHeader              types.String `tfsdk:"tag_header"`
	StatusHeader           types.String `tfsdk:"status_header"`
}

// cacheBlock is the schema of a cache block; onRule says whether it is a
// route rule's (whose unset arguments inherit the Gateway's) or the
// Gateway's (whose unset arguments take the defaults).
func cacheBlock(onRule bool) schema.SingleNestedBlock {
	unset := func(def string) string {
		if onRule {
			return " Unset, the Gateway's cache block decides (" + def + " when it does not say)."
		}
		return " Unset: " + def + "."
	}
	desc := "The default cache policy of the Gateway's routes, written as the Gateway's " + routing.CachePolicyAnnotation +
		" annotation; a rule's cache block overrides it argument by argument, and without either, requests are passed to the " +
		"backends. Only GET and HEAD requests are cached; a response with Set-Cookie, Cache-Control no-store or private, or " +
		"Vary: * never is, and a request with an Authorization header or with cookies left after strip_cookies is passed unless " +
		"allowed here. A change is a routing reload in the gateway pods, never a VCL compile."
	enabled := "Whether the routes' GET and HEAD requests are looked up in the cache. Unset: true (the block is present). " +
		"false defines the defaults without caching: only rules whose cache block sets enabled = true are cached."
	if onRule {
		desc = "The rule's cache policy: each argument set here overrides the Gateway's cache block, and one left unset takes " +
			"the Gateway's value, else its default. Without this block the rule takes the Gateway's policy whole (and is passed when " +
			"the Gateway has no cache block); the effective policy of each rule is the computed effective_cache."
		enabled = "Whether the rule's GET and HEAD requests are looked up in the cache. false: the rule's requests are passed, " +
			"whatever the Gateway's cache block says. Unset: the Gateway's enabled, or true when the Gateway does not set it."
	}
	durationValidators := []validator.String{stringvalidator.RegexMatches(routing.DurationPattern,
		`must be a Gateway API duration: up to four numbers each followed by h, m, s or ms, for example "2m", "1h30m" or "500ms"`)}
	headerValidators := []validator.String{
		stringvalidator.LengthAtMost(256),
		stringvalidator.Any(stringvalidator.OneOf(""), stringvalidator.RegexMatches(routing.TokenPattern,
			"must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~), or \"\" for none")),
	}
	queryParams := func(d string, other string) schema.ListAttribute {
		return schema.ListAttribute{
			Optional:    true,
			ElementType: types.StringType,
			Description: d,
			Validators: []validator.List{
				listvalidator.ConflictsWith(path.MatchRelative().AtParent().AtName(other)),
				listvalidator.SizeAtMost(64),
				listvalidator.ValueStringsAre(stringvalidator.LengthBetween(1, 256), stringvalidator.RegexMatches(routing.QueryParamPattern,
					`must be a query parameter name as it appears in the URL, without "&", "=", "#", "?", spaces or control characters`)),
			},
		}
	}
	return schema.SingleNestedBlock{
		Description: desc,
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{Optional: true, Description: enabled},
			"ttl": schema.StringAttribute{
				Optional: true,
				Description: "How long a response is cached when its origin says nothing (no Cache-Control max-age or s-maxage, no Expires), " +
					"a Gateway API duration such as 2m or 1h30m (beresp.ttl)." + unset("2m"),
				Validators: durationValidators,
			},
			"force_ttl": schema.BoolAttribute{
				Optional: true,
				Description: "Whether ttl replaces what the origin says (Cache-Control max-age, s-maxage and no-cache, Expires). Responses " +
					"with Set-Cookie, no-store, private or Vary: * are still not cached." + unset("false"),
			},
			"grace": schema.StringAttribute{
				Optional: true,
				Description: "How long an expired response is still served while it is fetched again in the background, or while the " +
					"origin is down (beresp.grace), a Gateway API duration." + unset("10s"),
				Validators: durationValidators,
			},
			"keep": schema.StringAttribute{
				Optional: true,
				Description: "How long an expired response is kept after its grace, for conditional requests to the origin (If-None-Match, " +
					"If-Modified-Since; beresp.keep), a Gateway API duration." + unset("0s"),
				Validators: durationValidators,
			},
			"query_parameters_include": queryParams("The query parameters kept in the cache key, compared exactly, in the request's "+
				"order; [] keeps no query string in the key. Conflicts with query_parameters_exclude; a rule that sets either replaces "+
				"the Gateway's choice of both."+unset("every parameter is in the key"), "query_parameters_exclude"),
			"query_parameters_exclude": queryParams("The query parameters left out of the cache key (for example utm_source), compared "+
				"exactly; the others stay in the request's order. Conflicts with query_parameters_include."+unset("every parameter is in the key"),
				"query_parameters_include"),
			"key_headers": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Request headers whose values are added to the cache key after the host, the path and the query, at most 16 " +
					"(for example Accept-Language). The origin's Vary is honoured as well." + unset("none"),
				Validators: []validator.List{
					listvalidator.SizeAtMost(16),
					listvalidator.ValueStringsAre(stringvalidator.LengthBetween(1, 256), stringvalidator.RegexMatches(routing.TokenPattern,
						"must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")),
				},
			},
			"strip_cookies": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Cookies removed from the request before the cache lookup, by name (for example _ga), \"*\" for all; the " +
					"backend does not get them. A request that still has a cookie is passed." + unset("none: a request with a cookie is passed"),
				Validators: []validator.List{
					listvalidator.SizeAtMost(64),
					listvalidator.ValueStringsAre(stringvalidator.LengthBetween(1, 256), stringvalidator.Any(stringvalidator.OneOf("*"),
						stringvalidator.RegexMatches(routing.TokenPattern, "must be a cookie name (letters, digits and !#$%&'*+-.^_`|~) or \"*\" for all"))),
				},
			},
			"allow_authorization": schema.BoolAttribute{
				Optional: true,
				Description: "Whether requests with an Authorization header are cached (and answered from the cache to other clients): " +
					"only for content that is the same for every user." + unset("false: they are passed"),
			},
			"tag_header": schema.StringAttribute{
				Optional: true,
				Description: "The response header in which the origin lists the response's tags (separated by commas or spaces), for " +
					"invalidation by tag; \"\" for none." + unset("Cache-Tag"),
				Validators: headerValidators,
			},
			"status_header": schema.StringAttribute{
				Optional: true,
				Description: "A response header the gateway sets to HIT, MISS or PASS on the rule's responses (for example X-Cache); " +
					"\"\" for none." + unset("none"),
				Validators: headerValidators,
			},
		},
	}
}

// policy is the routing.CachePolicy of the block: nil for an absent
// block; null and unknown arguments are unset.
func (m *cachePolicyModel) policy() *routing.CachePolicy {
	if m == nil {
		return nil
	}
	return &routing.CachePolicy{
		Enabled:                boolPtr(m.Enabled),
		TTL:                    cacheString(m.TTL),
		ForceTTL:               boolPtr(m.ForceTTL),
		Grace:                  cacheString(m.Grace),
		Keep:                   cacheString(m.Keep),
		QueryParametersInclude: cacheList(m.QueryParametersInclude),
		QueryParametersExclude: cacheList(m.QueryParametersExclude),
		KeyHeaders:             cacheList(m.KeyHeaders),
		StripCookies:           cacheList(m.StripCookies),
		AllowAuthorization:     boolPtr(m.AllowAuthorization),
		TagHeader:              cacheString(m.TagHeader),
		StatusHeader:           cacheString(m.StatusHeader),
	}
}

func cacheString(v types.String) *string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	s := v.ValueString()
	return &s
}

func cacheList(v types.List) *[]string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	out := []string{}
	for _, e := range v.Elements() {
		if s, ok := e.(types.String); ok && !s.IsNull() && !s.IsUnknown() {
			out = append(out, s.ValueString())
		}
	}
	return &out
}

// cachePolicyModelOf is the block of a policy read back (nil: no block).
func cachePolicyModelOf(c *routing.CachePolicy) *cachePolicyModel {
	if c == nil {
		return nil
	}
	str := func(p *string) types.String {
		if p == nil {
			return types.StringNull()
		}
		return types.StringValue(*p)
	}
	b := func(p *bool) types.Bool {
		if p == nil {
			return types.BoolNull()
		}
		return types.BoolValue(*p)
	}
	return &cachePolicyModel{
		Enabled: b(c.Enabled), TTL: str(c.TTL), ForceTTL: b(c.ForceTTL), Grace: str(c.Grace), Keep: str(c.Keep),
		QueryParametersInclude: cacheListValue(c.QueryParametersInclude), QueryParametersExclude: cacheListValue(c.QueryParametersExclude),
		KeyHeaders: cacheListValue(c.KeyHeaders), StripCookies: cacheListValue(c.StripCookies),
		AllowAuthorization: b(c.AllowAuthorization), TagHeader: str(c.TagHeader), StatusHeader: str(c.StatusHeader),
	}
}

// cacheListValue is a nullable list: null for nil.
func cacheListValue(l *[]string) types.List {
	if l == nil {
		return types.ListNull(types.StringType)
	}
	return stringListValue(*l)
}

// validateCache reports what the routing core rejects in a cache block at
// p (fp is its field path in routing's errors) that the schema's
// validators do not: duplicate names (header names compared ignoring
// case). The rest is the schema validators' (the same patterns and
// limits), so that each error is reported once.
func validateCache(p path.Path, fp *field.Path, m *cachePolicyModel, diags *diag.Diagnostics) {
	for _, e := range routing.ValidateCachePolicy(fp, m.policy()) {
		if e.Type != field.ErrorTypeDuplicate {
			continue
		}
		// fp.child[i]: the list element
		rest := strings.TrimPrefix(e.Field, fp.String()+".")
		name, idx, _ := strings.Cut(strings.TrimSuffix(rest, "]"), "[")
		i, err := strconv.Atoi(idx)
		if err != nil {
			diags.AddAttributeError(p, "Invalid cache policy", e.Error())
			continue
		}
		diags.AddAttributeError(p.AtName(attributeName(name)).AtListIndex(i), "Invalid cache policy",
			fmt.Sprintf("%s[%d]: %q is listed twice: remove one", attributeName(name), i, e.BadValue))
	}
}

// effectiveCacheType is the type of an element of a route's
// effective_cache.
var effectiveCacheType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"gateway":             types.StringType,
	"rule":                types.Int64Type,
	"cached":              types.BoolType,
	"ttl":                 types.StringType,
	"force_ttl":           types.BoolType,
	"grace":               types.StringType,
	"keep":                types.StringType,
	"query_key":           types.StringType,
	"query_parameters":    types.ListType{ElemType: types.StringType},
	"key_headers":         types.ListType{ElemType: types.StringType},
	"strip_cookies":       types.ListType{ElemType: types.StringType},
	"allow_authorization": types.BoolType,
	"tag_header":          types.StringType,
	"status_header":       types.StringType,
}}

// effectiveCacheValue is one element of effective_cache: the effective
// policy of rule index i on Gateway gw (nil p: passed).
func effectiveCacheValue(gw string, i int, p *ghostjson.CachePolicy) attr.Value {
	v := map[string]attr.Value{
		"gateway": types.StringValue(gw), "rule": types.Int64Value(int64(i)), "cached": types.BoolValue(p != nil),
		"ttl": types.StringNull(), "force_ttl": types.BoolNull(), "grace": types.StringNull(),
		"keep": types.StringNull(), "query_key": types.StringNull(), "query_parameters": types.ListNull(types.StringType),
		"key_headers": types.ListNull(types.StringType), "strip_cookies": types.ListNull(types.StringType),
		"allow_authorization": types.BoolNull(), "tag_header": types.StringNull(), "status_header": types.StringNull(),
	}
	if p != nil {
		list := func(l []string) types.List { return stringListValue(l) }
		v["ttl"] = types.StringValue(formatDuration(p.TTLMs))
		v["force_ttl"] = types.BoolValue(p.ForceTTL)
		v["grace"] = types.StringValue(formatDuration(p.GraceMs))
		v["keep"] = types.StringValue(formatDuration(p.KeepMs))
		v["query_key"] = types.StringValue(p.QueryKey)
		v["query_parameters"] = list(p.QueryParams)
		v["key_headers"] = list(p.KeyHeaders)
		v["strip_cookies"] = list(p.StripCookies)
		v["allow_authorization"] = types.BoolValue(p.AllowAuthorization)
		v["tag_header"] = types.StringValue(p.TagHeader)
		v["status_header"] = types.StringValue(p.StatusHeader)
	}
	return types.ObjectValueMust(effectiveCacheType.AttrTypes, v)
}

// formatDuration writes milliseconds as a Gateway API duration: "2m",
// "1h30m", "500ms", "0s".
func formatDuration(ms int64) string {
	if ms == 0 {
		return "0s"
	}
	d := time.Duration(ms) * time.Millisecond
	var b strings.Builder
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / u.unit; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}

// effectiveCacheList is the effective_cache of a route: for each parent
// Gateway (sorted by namespace/name, as in routing) and each rule, the
// policy ghost applies, computed with routing.EffectiveCache from the
// Gateway's annotation and the rule's cache block.
func effectiveCacheList(entries []effectiveCacheEntry) types.List {
	vals := make([]attr.Value, 0, len(entries))
	for _, e := range entries {
		vals = append(vals, effectiveCacheValue(e.gateway, e.rule, e.policy))
	}
	return types.ListValueMust(effectiveCacheType, vals)
}

type effectiveCacheEntry struct {
	gateway string
	rule    int
	policy  *ghostjson.CachePolicy
}

// effectiveCacheAttribute is the schema of a route's effective_cache.
func effectiveCacheAttribute() schema.ListNestedAttribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	strs := func(d string) schema.ListAttribute {
		return schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: d}
	}
	boolean := func(d string) schema.BoolAttribute { return schema.BoolAttribute{Computed: true, Description: d} }
	return schema.ListNestedAttribute{
		Computed: true,
		Description: "The cache policy each rule gets on each parent Gateway served by varnishgw that accepts the route: the rule's cache block merged " +
			"with the Gateway's (its " + routing.CachePolicyAnnotation + " annotation), defaults filled in, as the gateway pods " +
			"compute it; sorted by gateway then rule. The plan of an existing route computes it with the Gateways' policies as " +
			"the refresh before the plan read them; a new route's is known after apply. When a parent Gateway's cache block " +
			"changes in the same apply, the route keeps the value it planned until the next refresh, while the gateway pods " +
			"apply the new policy as soon as the Gateway is written.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"gateway":             str("The parent Gateway, namespace/name."),
			"rule":                schema.Int64Attribute{Computed: true, Description: "The rule's index in the route's rule blocks, from 0."},
			"cached":              boolean("Whether the rule's GET and HEAD requests are looked up in the cache; false: they are passed, and the other attributes are null."),
			"ttl":                 str("The TTL of responses whose origin says nothing, a Gateway API duration."),
			"force_ttl":           boolean("Whether ttl replaces what the origin says."),
			"grace":               str("The grace, a Gateway API duration."),
			"keep":                str("The keep, a Gateway API duration."),
			"query_key":           str("Which query parameters the cache key holds: all, include (query_parameters only), exclude (all but query_parameters) or none."),
			"query_parameters":    strs("The parameters of query_key include or exclude."),
			"key_headers":         strs("The request headers added to the cache key, lower case."),
			"strip_cookies":       strs("The cookies removed before the lookup; * for all."),
			"allow_authorization": boolean("Whether requests with an Authorization header are cached."),
			"tag_header":          str("The response header listing the tags, lower case; empty for none."),
			"status_header":       str("The response header set to HIT, MISS or PASS, lower case; empty for none."),
		}},
	}
}

// gatewayCacheAnnotation is the annotation value of a gateway's cache
// block, checked by the routing core as the gateway pods will read it;
// "" without a block.
func gatewayCacheAnnotation(m *cachePolicyModel) (string, error) {
	if m == nil {
		return "", nil
	}
	c := m.policy()
	s, err := routing.MarshalCachePolicy(c)
	if err != nil {
		return "", err
	}
	if _, err := routing.ParseCachePolicy(field.NewPath("cache"), s); err != nil {
		return "", fmt.Errorf("the cache block: %w", err)
	}
	return s, nil
}
