package routing

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// The Gateway API limits of HTTPCORSFilter's lists, and the default of
// maxAge when it is unset.
const (
	maxCORSOrigins  = 64
	maxCORSMethods  = 9
	maxCORSHeaders  = 64
	defaultCORSAge  = 5
	corsWildcard    = "*"
	corsOriginShape = "scheme://host[:port] with scheme http or https (https://www.example.com, https://*.example.com:8443), or \"*\" alone"
)

// corsOriginRE is the Gateway API CORSOrigin pattern without its "*"
// alternative: a scheme, a host that may start with "*." or be "*", and
// an optional port.
var corsOriginRE = regexp.MustCompile(`^(https?)://((\*\.)?([a-zA-Z0-9-]+\.)*[a-zA-Z0-9-]+|\*)(:([0-9]{1,5}))?$`)

// validateCORS checks a CORS filter as the Gateway API CRD does (origin
// form, method names, header names, "*" alone, no duplicates, the list
// limits) and rejects exposeHeaders "*" with allowCredentials, which
// browsers would read as a header named "*".
func validateCORS(p *field.Path, c *gatewayv1.HTTPCORSFilter) field.ErrorList {
	var errs field.ErrorList
	if len(c.AllowOrigins) > maxCORSOrigins {
		errs = append(errs, field.TooMany(p.Child("allowOrigins"), len(c.AllowOrigins), maxCORSOrigins))
	}
	seen := map[string]int{}
	for i, o := range c.AllowOrigins {
		op := p.Child("allowOrigins").Index(i)
		s := string(o)
		if s == corsWildcard {
			if len(c.AllowOrigins) > 1 {
				errs = append(errs, field.Invalid(op, s, `"*" allows every origin: keep it alone, or list the origins without it`))
			}
			continue
		}
		if len(s) > 253 {
			errs = append(errs, field.TooLong(op, s, 253))
			continue
		}
		m := corsOriginRE.FindStringSubmatch(s)
		if m == nil {
			errs = append(errs, field.Invalid(op, s, "must be "+corsOriginShape))
			continue
		}
		if m[6] != "" {
			if n, _ := strconv.Atoi(m[6]); n < 1 || n > 65535 {
				errs = append(errs, field.Invalid(op, s, fmt.Sprintf("port %s is not from 1 to 65535: use a port number or leave it out (80 for http, 443 for https)", m[6])))
				continue
			}
		}
		n := normalizeOrigin(s)
		if j, dup := seen[n]; dup {
			errs = append(errs, field.Invalid(op, s, fmt.Sprintf("is the origin of allowOrigins[%d] (%s): remove one", j, c.AllowOrigins[j])))
		}
		seen[n] = i
	}
	methods := make([]string, len(c.AllowMethods))
	for i, m := range c.AllowMethods {
		methods[i] = string(m)
	}
	errs = append(errs, validateCORSList(p.Child("allowMethods"), methods, maxCORSMethods, true, func(s string) string {
		if !supportedMethods[s] {
			return "must be one of " + strings.Join(methodList, ", ") + ` (upper case) or "*" alone`
		}
		return ""
	})...)
	header := func(s string) string {
		if !headerNameRE.MatchString(s) {
			return "must be a header name (letters, digits and !#$%&'*+-.^_`|~) or \"*\" alone"
		}
		return ""
	}
	errs = append(errs, validateCORSList(p.Child("allowHeaders"), headerNames(c.AllowHeaders), maxCORSHeaders, false, header)...)
	errs = append(errs, validateCORSList(p.Child("exposeHeaders"), headerNames(c.ExposeHeaders), maxCORSHeaders, false, header)...)
	if c.AllowCredentials != nil && *c.AllowCredentials && slices.Contains(c.ExposeHeaders, corsWildcard) {
		errs = append(errs, field.Invalid(p.Child("exposeHeaders"), corsWildcard, `with credentials allowed, browsers read "*" as a header named "*": list the header names to expose, or stop allowing credentials`))
	}
	if c.MaxAge < 0 {
		errs = append(errs, field.Invalid(p.Child("maxAge"), c.MaxAge, "must be 1 or more seconds (unset: 5)"))
	}
	return errs
}

// validateCORSList checks one list of a CORS filter: its length, each
// value (bad returns the problem, "" when the value is fine), "*" alone
// and duplicates (compared case-insensitively unless caseSensitive).
func validateCORSList(p *field.Path, items []string, limit int, caseSensitive bool, bad func(string) string) field.ErrorList {
	var errs field.ErrorList
	if len(items) > limit {
		errs = append(errs, field.TooMany(p, len(items), limit))
	}
	seen := map[string]int{}
	for i, v := range items {
		ip := p.Index(i)
		if v == corsWildcard {
			if len(items) > 1 {
				errs = append(errs, field.Invalid(ip, v, `"*" allows every value: keep it alone, or list the values without it`))
			}
			continue
		}
		if msg := bad(v); msg != "" {
			errs = append(errs, field.Invalid(ip, v, msg))
			continue
		}
		k := v
		if !caseSensitive {
			k = strings.ToLower(v)
		}
		if j, dup := seen[k]; dup {
			errs = append(errs, field.Invalid(ip, v, fmt.Sprintf("repeats %s[%d] (%s): remove one", p.String()[strings.LastIndexByte(p.String(), '.')+1:], j, items[j])))
		}
		seen[k] = i
	}
	return errs
}

func headerNames(hs []gatewayv1.HTTPHeaderName) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = string(h)
	}
	return out
}

// normalizeOrigin writes a valid origin in lower case and without its
// scheme's default port, the form ghost compares.
func normalizeOrigin(o string) string {
	o = strings.ToLower(o)
	switch {
	case strings.HasPrefix(o, "http://") && strings.HasSuffix(o, ":80"):
		return strings.TrimSuffix(o, ":80")
	case strings.HasPrefix(o, "https://") && strings.HasSuffix(o, ":443"):
		return strings.TrimSuffix(o, ":443")
	}
	return o
}

// normalizeCORS turns a valid CORS filter into ghost.json's form: origins
// in lower case without default ports, header names in lower case (they
// are case-insensitive), and maxAge 5 when it is unset.
func normalizeCORS(c *gatewayv1.HTTPCORSFilter) *ghostjson.CORS {
	out := &ghostjson.CORS{MaxAge: c.MaxAge}
	if out.MaxAge == 0 {
		out.MaxAge = defaultCORSAge
	}
	for _, o := range c.AllowOrigins {
		out.AllowOrigins = append(out.AllowOrigins, normalizeOrigin(string(o)))
	}
	for _, m := range c.AllowMethods {
		out.AllowMethods = append(out.AllowMethods, string(m))
	}
	for _, h := range c.AllowHeaders {
		out.AllowHeaders = append(out.AllowHeaders, strings.ToLower(string(h)))
	}
	for _, h := range c.ExposeHeaders {
		out.ExposeHeaders = append(out.ExposeHeaders, strings.ToLower(string(h)))
	}
	out.AllowCredentials = c.AllowCredentials != nil && *c.AllowCredentials
	return out
}

// validateGhostCORS checks a fragment's CORS filter as ghost will.
func validateGhostCORS(p *field.Path, c *ghostjson.CORS) field.ErrorList {
	err := c.Check()
	if err == nil {
		return nil
	}
	// "allowOrigins[1]: problem": the field under p, then the problem
	where, detail, _ := strings.Cut(err.Error(), ": ")
	return field.ErrorList{&field.Error{Type: field.ErrorTypeInvalid, Field: p.String() + "." + where, BadValue: field.OmitValueType{}, Detail: detail}}
}
