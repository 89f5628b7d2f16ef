package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// Session persistence (GEP-1619, HTTPRouteRule.SessionPersistence): ghost
// keeps a client on the endpoint it was first sent to by a cookie (type
// Cookie) or a header (type Header) that names that endpoint within the
// rule; see docs/guides/session-persistence.md.

// maxSessionName is the Gateway API CRD's limit on sessionName.
const maxSessionName = 128

// DefaultSessionCookiePrefix starts the cookie (or header) name of a rule
// without a sessionName: the prefix and 16 hexadecimal digits of the SHA-256 of the
// rule's identity (SessionScope), so that each rule has its own cookie, the
// same on every replica of the Gateway.
const DefaultSessionCookiePrefix = "vgw-session-"

// SessionPersistence is a rule's session persistence, normalised: the type
// (Cookie, the default, or Header), the cookie or header name (sessionName
// or the default), the absolute timeout in milliseconds (0: none) and
// whether the cookie is permanent (Max-Age, lifetimeType Permanent) rather
// than a session cookie.
type SessionPersistence struct {
	Type              string `json:"type"`
	SessionName       string `json:"sessionName"`
	AbsoluteTimeoutMs int64  `json:"absoluteTimeoutMs,omitempty"`
	Permanent         bool   `json:"permanent,omitempty"`
}

// SessionPersistence.Type values.
const (
	// SessionTypeCookie: a cookie the gateway sets carries the session.
	SessionTypeCookie = string(gatewayv1.CookieBasedSessionPersistence)
	// SessionTypeHeader: a response header of the gateway carries it, and
	// the client sends it back as a request header of the same name.
	SessionTypeHeader = string(gatewayv1.HeaderBasedSessionPersistence)
)

var sessionTypes = []string{SessionTypeCookie, SessionTypeHeader}

// validateSessionPersistence checks a rule's sessionPersistence: type
// Cookie or Header, a sessionName that is a cookie or header name (both
// HTTP tokens), an absoluteTimeout of whole seconds, cookieConfig for type
// Cookie only, lifetimeType Permanent only with an absoluteTimeout, and a
// rule that sends requests to backends.
func validateSessionPersistence(p *field.Path, sp *gatewayv1.SessionPersistence, r *gatewayv1.HTTPRouteRule) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	if sp.Type != nil && *sp.Type != gatewayv1.CookieBasedSessionPersistence && *sp.Type != gatewayv1.HeaderBasedSessionPersistence {
		errs = append(errs, field.NotSupported(p.Child("type"), *sp.Type, sessionTypes))
	}
	if sp.SessionName != nil {
		errs = append(errs, validateCookieName(p.Child("sessionName"), *sp.SessionName)...)
	}
	if sp.AbsoluteTimeout != nil {
		d, e := parseDuration(p.Child("absoluteTimeout"), sp.AbsoluteTimeout)
		errs = append(errs, e...)
		switch {
		case len(e) > 0:
		case d < time.Second || d%time.Second != 0:
			errs = append(errs, field.Invalid(p.Child("absoluteTimeout"), string(*sp.AbsoluteTimeout),
				`must be a whole number of seconds, at least 1s (such as "30m" or "3600s"): the cookie's Max-Age and the time it carries count seconds`))
		}
	}
	if c := sp.CookieConfig; c != nil {
		if sp.Type != nil && *sp.Type != gatewayv1.CookieBasedSessionPersistence {
			errs = append(errs, field.Forbidden(p.Child("cookieConfig"), "cookieConfig is for type Cookie only: remove it, or set type Cookie"))
		}
		if lt := c.LifetimeType; lt != nil {
			switch *lt {
			case gatewayv1.SessionCookieLifetimeType:
			case gatewayv1.PermanentCookieLifetimeType:
				if sp.AbsoluteTimeout == nil {
					errs = append(errs, field.Required(p.Child("absoluteTimeout"), "lifetimeType Permanent needs an absoluteTimeout, the cookie's Max-Age: set one, or use lifetimeType Session"))
				}
			default:
				errs = append(errs, field.NotSupported(p.Child("cookieConfig", "lifetimeType"), *lt,
					[]string{string(gatewayv1.SessionCookieLifetimeType), string(gatewayv1.PermanentCookieLifetimeType)}))
			}
		}
	}
	for _, f := range r.Filters {
		if f.Type == gatewayv1.HTTPRouteFilterRequestRedirect {
			errs = append(errs, field.Invalid(p, "sessionPersistence", "a rule with a RequestRedirect filter sends no request to a backend, so it has no session to keep: remove sessionPersistence or the redirect"))
			break
		}
	}
	return errs
}

// validateCookieName checks a session name: a cookie name (an RFC 6265
// cookie-name) or a header name, both HTTP tokens, of at most
// maxSessionName characters.
func validateCookieName(p *field.Path, name string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Invalid(p, name, "must not be empty: give a name such as \"gw-session\", or leave sessionName unset for a generated one")}
	case len(name) > maxSessionName:
		return field.ErrorList{field.TooLong(p, name, maxSessionName)}
	case !headerNameRE.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, "must be a cookie or header name: letters, digits and !#$%&'*+-.^_`|~ only (no spaces, '=', ';' or quotes)")}
	}
	return nil
}

// normalizeSessionPersistence converts a validated sessionPersistence of
// rule ruleIndex of route ns/name (ruleName its name, may be empty).
func normalizeSessionPersistence(ns, name string, ruleIndex int, ruleName string, sp *gatewayv1.SessionPersistence) *SessionPersistence {
	if sp == nil {
		return nil
	}
	out := &SessionPersistence{Type: SessionTypeCookie}
	if sp.Type != nil {
		out.Type = string(*sp.Type)
	}
	if sp.SessionName != nil {
		out.SessionName = *sp.SessionName
	} else {
		out.SessionName = DefaultSessionCookieName(SessionScope(ns, name, ruleIndex, ruleName))
	}
	if sp.AbsoluteTimeout != nil {
		d, _ := parseDuration(nil, sp.AbsoluteTimeout)
		out.AbsoluteTimeoutMs = d.Milliseconds()
	}
	if c := sp.CookieConfig; c != nil && c.LifetimeType != nil && *c.LifetimeType == gatewayv1.PermanentCookieLifetimeType {
		out.Permanent = true
	}
	return out
}

// SessionScope identifies a rule for session persistence:
// "namespace/route/rule" with the rule's name, or its index when it has
// none. ghost mixes it into the cookie's endpoint identifiers, so a cookie
// of one rule never selects an endpoint in another.
func SessionScope(ns, name string, ruleIndex int, ruleName string) string {
	r := ruleName
	if r == "" {
		r = strconv.Itoa(ruleIndex)
	}
	return ns + "/" + name + "/" + r
}

// DefaultSessionCookieName is the cookie name of a rule without a
// sessionName: DefaultSessionCookiePrefix and the first 16 hexadecimal
// digits of the SHA-256 of its scope.
func DefaultSessionCookieName(scope string) string {
	sum := sha256.Sum256([]byte(scope))
	return DefaultSessionCookiePrefix + hex.EncodeToString(sum[:8])
}

// SessionCookiePath is the cookie Path for a match (GEP-1619, "Path"):
// the path of an Exact or PathPrefix match (without a trailing "/"), and
// for a regular expression the longest literal prefix cut back to its last
// "/" (so a request the expression matches always sends the cookie); "/"
// when nothing is left. A ';' or a control character ends the literal
// part, as neither may appear in a cookie attribute.
func SessionCookiePath(m ghostjson.PathMatch) string {
	v := m.Value
	literal := v
	if m.Type == ghostjson.PathRegularExpression {
		v = strings.TrimPrefix(v, "^")
		n := strings.IndexAny(v, `.*+?()[]{}|\^$`)
		if n < 0 {
			n = len(v)
		}
		literal = v[:n]
		if n < len(v) {
			literal = literal[:strings.LastIndexByte(literal, '/')+1]
		}
	}
	if n := strings.IndexFunc(literal, func(c rune) bool { return c == ';' || c < 0x20 || c == 0x7f }); n >= 0 {
		literal = literal[:strings.LastIndexByte(literal[:n], '/')+1]
	}
	if !strings.HasPrefix(literal, "/") {
		return "/"
	}
	if len(literal) > 1 {
		literal = strings.TrimRight(literal, "/")
		if literal == "" {
			return "/"
		}
	}
	return literal
}

// validateFragmentSession checks a fragment rule's session persistence.
func validateFragmentSession(p *field.Path, sp *SessionPersistence) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	if sp.Type != SessionTypeCookie && sp.Type != SessionTypeHeader {
		errs = append(errs, field.NotSupported(p.Child("type"), sp.Type, sessionTypes))
	}
	if sp.Type == SessionTypeHeader && sp.Permanent {
		errs = append(errs, field.Forbidden(p.Child("permanent"), "a header session has no cookie to make permanent"))
	}
	errs = append(errs, validateCookieName(p.Child("sessionName"), sp.SessionName)...)
	if ms := sp.AbsoluteTimeoutMs; ms < 0 || ms%1000 != 0 {
		errs = append(errs, field.Invalid(p.Child("absoluteTimeoutMs"), ms, "must be 0 (none) or a whole number of seconds in milliseconds"))
	}
	if sp.Permanent && sp.AbsoluteTimeoutMs == 0 {
		errs = append(errs, field.Required(p.Child("absoluteTimeoutMs"), "a permanent cookie needs an absolute timeout, its Max-Age"))
	}
	return errs
}

// ghostSession is the ghost.json session persistence of one match of a
// rule of route.
func ghostSession(route RouteRef, rule *Rule, m *ghostjson.Match) *ghostjson.SessionPersistence {
	sp := rule.SessionPersistence
	if sp == nil {
		return nil
	}
	path := ""
	if sp.Type == SessionTypeCookie {
		path = SessionCookiePath(m.Path)
	}
	return &ghostjson.SessionPersistence{
		Type:              sp.Type,
		Name:              sp.SessionName,
		Path:              path,
		Scope:             SessionScope(route.Namespace, route.Name, rule.Index, rule.Name),
		AbsoluteTimeoutMs: sp.AbsoluteTimeoutMs,
		Permanent:         sp.Permanent,
	}
}
