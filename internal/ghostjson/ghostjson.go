// Package ghostjson defines ghost.json, version 2: the routing state the
// chaperone writes and the ghost VMOD reads on reload. A table of named
// backends holds every endpoint once; routes' weighted groups and mirrors
// name a backend of the table, so the file grows with routes plus
// endpoints. The types mirror ghost/ghost.schema.json field for field;
// Marshal writes them deterministically, so the same document always gives
// the same bytes.
//
// The chaperone and ghost ship in one image, and both read version 2 only.
package ghostjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Version is the only schema version this package writes and reads.
const Version = 2

// Document is a complete ghost.json file.
type Document struct {
	Version int `json:"version"`
	// Sockets describe the listener sockets that are not plain HTTP:
	// today the TLS sockets of HTTPS listeners. A socket not listed is
	// plain HTTP. Optional: a file without it is what ghost read before.
	Sockets []Socket `json:"sockets,omitempty"`
	// Backends is the table of every backend the routes and mirrors
	// name, each once, with its endpoints; names are unique.
	Backends []Backend `json:"backends"`
	// CachePolicies is the table of the effective cache policies the
	// routes name (Route.Cache), each once; names are unique. Optional: a
	// file without it caches nothing by policy.
	CachePolicies []CachePolicy `json:"cachePolicies,omitempty"`
	// EscapedSlashes is what a request path's %2F or %5C does: "keep"
	// keeps them escaped; empty or "reject" answers 400. ghost
	// normalises every path before matching either way.
	EscapedSlashes string  `json:"escapedSlashes,omitempty"`
	VHosts         []VHost `json:"vhosts"`
}

// CachePolicy is an effective cache policy: the Gateway's default merged
// with a route rule's own policy, every field resolved. A route that names
// one is looked up in the cache (GET and HEAD only) unless the request
// must be passed: it carries an Authorization header and
// AllowAuthorization is false, or it still carries cookies after the
// StripCookies names are removed. A route without one is passed.
type CachePolicy struct {
	// Name identifies the policy in the table (routes name it).
	Name string `json:"name"`
	// TTLMs is the time to live in milliseconds given to a response whose
	// origin says nothing (no Cache-Control max-age/s-maxage, no
	// Expires), or to every cacheable response when ForceTTL is set.
	TTLMs int64 `json:"ttlMs"`
	// ForceTTL makes TTLMs replace the origin's max-age, s-maxage,
	// Expires and no-cache. Responses with Set-Cookie, Cache-Control
	// no-store or private, or Vary: * are never cached, forced or not.
	ForceTTL bool `json:"forceTtl,omitempty"`
	// GraceMs: how long an expired object is served while it is
	// refreshed in the background, or while the origin is down
	// (beresp.grace).
	GraceMs int64 `json:"graceMs,omitempty"`
	// KeepMs: how long an expired object past its grace is kept for
	// conditional requests to the origin (beresp.keep).
	KeepMs int64 `json:"keepMs,omitempty"`
	// QueryKey says which query parameters the cache key holds:
	// QueryKeyAll (the default when empty), QueryKeyInclude (only
	// QueryParams), QueryKeyExclude (all but QueryParams) or QueryKeyNone.
	QueryKey    string   `json:"queryKey,omitempty"`
	QueryParams []string `json:"queryParams,omitempty"`
	// KeyHeaders are request header names, lower case, whose values are
	// added to the cache key (host, path and query are always in it).
	KeyHeaders []string `json:"keyHeaders,omitempty"`
	// StripCookies are cookie names removed from the request's Cookie
	// header before the lookup; "*" removes every cookie.
	StripCookies []string `json:"stripCookies,omitempty"`
	// AllowAuthorization lets requests with an Authorization header be
	// looked up (and their responses cached) instead of passed.
	AllowAuthorization bool `json:"allowAuthorization,omitempty"`
	// TagHeader is the response header, lower case, in which the origin
	// lists the object's tags (separated by commas or white space) for
	// invalidation by tag; empty: no tags.
	TagHeader string `json:"tagHeader,omitempty"`
	// StatusHeader is a response header, lower case, that ghost sets to
	// HIT, MISS or PASS on every response of the route; empty: none.
	StatusHeader string `json:"statusHeader,omitempty"`
}

// CachePolicy.QueryKey values.
const (
	QueryKeyAll     = "all"
	QueryKeyInclude = "include"
	QueryKeyExclude = "exclude"
	QueryKeyNone    = "none"
)

// Socket is a listener socket (varnishd -a NAME=..., compared with
// local.socket) and the Gateway listeners it serves.
type Socket struct {
	Name string `json:"name"`
	// TLS says the socket's connections come from a TLS terminator
	// (hitch, with the PROXY protocol): ghost gives their requests scheme
	// https (redirect defaults) and checks the TLS server name (SNI,
	// router.sni() in VCL) against the Host header, answering 421
	// Misdirected Request when they select different listeners.
	TLS bool `json:"tls,omitempty"`
	// Listeners are the Gateway listeners on the socket, for the SNI
	// check: at most one without a hostname, hostnames unique.
	Listeners []Listener `json:"listeners,omitempty"`
}

// Listener is a Gateway listener of a socket: its name (for logs) and
// hostname, lower case, exact or wildcard (*.example.com); empty for every
// host.
type Listener struct {
	Name     string `json:"name"`
	Hostname string `json:"hostname,omitempty"`
}

// Backend is an entry of the backends table: a name (for the chaperone the
// backendRef namespace/service:port) and its endpoints. An empty Endpoints
// list answers the share of the groups that name it with 500.
type Backend struct {
	Name      string     `json:"name"`
	Endpoints []Endpoint `json:"endpoints"`
	// WebSocket says the Service port has appProtocol kubernetes.io/ws
	// (GEP-1911): ghost pipes WebSocket upgrades only to such a backend
	// and serves an upgrade to any other as plain HTTP.
	WebSocket bool `json:"websocket,omitempty"`
}

// VHost is the route list for one hostname on a set of listener sockets.
type VHost struct {
	Hostname  string   `json:"hostname"`
	Listeners []string `json:"listeners,omitempty"`
	Routes    []Route  `json:"routes"`
}

// Route is one match of one HTTPRoute rule.
type Route struct {
	Name string `json:"name,omitempty"`
	// PrecedenceGroup is compared before the match precedence: ghost
	// tries every route of a lower group before any route of a higher
	// group. Resolve uses it for the Gateway API hostname precedence (0:
	// the most specific route hostname of the vhost). Zero is not written.
	PrecedenceGroup int       `json:"precedenceGroup,omitempty"`
	Match           Match     `json:"match"`
	Filters         []Filter  `json:"filters,omitempty"`
	Timeouts        *Timeouts `json:"timeouts,omitempty"`
	// Retry is the rule's retry policy (Gateway API HTTPRouteRetry);
	// nil: a failed backend request is not retried.
	Retry    *Retry         `json:"retry,omitempty"`
	Backends []BackendGroup `json:"backends,omitempty"`
	// Cache names the route's effective cache policy in the document's
	// CachePolicies table; empty: the route's requests are passed.
	Cache string `json:"cache,omitempty"`
	// Session keeps a client on the endpoint it was first sent to (the
	// Gateway API sessionPersistence of the route's rule); nil: every
	// request is sent by weight.
	Session *SessionPersistence `json:"sessionPersistence,omitempty"`
}

// SessionPersistence.Type values.
const (
	SessionTypeCookie = "Cookie"
	SessionTypeHeader = "Header"
)

// SessionPersistence is a route's session persistence. ghost sends a
// request whose cookie Name (type Cookie) or header Name (type Header)
// holds the identifier of an endpoint of the route's backend groups (any
// weight, 0 included) that is still healthy to that endpoint; otherwise it
// picks by weight and, on the response, sets the cookie (or the response
// header) to the picked endpoint's identifier and the time. The identifier is derived from Scope, the group's backend name
// and the endpoint's address and port (README, "Session persistence"), so
// a cookie can only name an endpoint of the route.
type SessionPersistence struct {
	// Type is SessionTypeCookie or SessionTypeHeader.
	Type string `json:"type"`
	// Name is the cookie or header name, an HTTP token.
	Name string `json:"name"`
	// Path is the cookie's Path attribute, an absolute path without ';';
	// type Cookie only (required), empty for Header.
	Path string `json:"path,omitempty"`
	// Scope identifies the rule ("namespace/route/rule"): the routes of
	// one rule share sessions, those of different rules never do.
	Scope string `json:"scope"`
	// AbsoluteTimeoutMs ends a session that long after it began (whole
	// seconds); 0: never.
	AbsoluteTimeoutMs int64 `json:"absoluteTimeoutMs,omitempty"`
	// Permanent gives the cookie Max-Age (AbsoluteTimeoutMs, required);
	// otherwise it is a session cookie, dropped when the browser closes.
	// Type Cookie only.
	Permanent bool `json:"permanent,omitempty"`
}

// check reports the first field of s that ghost would reject, as
// "field: problem" (Document.Check prefixes the route's path).
func (s *SessionPersistence) check() error {
	switch {
	case s.Type != SessionTypeCookie && s.Type != SessionTypeHeader:
		return fmt.Errorf("type: %q is not supported: use %q or %q", s.Type, SessionTypeCookie, SessionTypeHeader)
	case s.Name == "" || len(s.Name) > 128 || !isToken(s.Name):
		return fmt.Errorf("name: %q is not a cookie or header name of 1 to 128 letters, digits and !#$%%&'*+-.^_`|~", s.Name)
	case s.Type == SessionTypeHeader && (s.Path != "" || s.Permanent):
		return fmt.Errorf("path, permanent: set with type %q: they are cookie attributes; remove them", s.Type)
	case s.Type == SessionTypeCookie && !strings.HasPrefix(s.Path, "/") || len(s.Path) > 1024 || strings.ContainsFunc(s.Path, func(c rune) bool { return c == ';' || c < 0x21 || c == 0x7f }):
		return fmt.Errorf("path: %q is not an absolute path of at most 1024 characters without ';', spaces or control characters", s.Path)
	case s.Scope == "" || len(s.Scope) > 512:
		return fmt.Errorf("scope: %q must have 1 to 512 characters", s.Scope)
	case s.AbsoluteTimeoutMs < 0 || s.AbsoluteTimeoutMs%1000 != 0:
		return fmt.Errorf("absoluteTimeoutMs: %d is not 0 or a whole number of seconds in milliseconds", s.AbsoluteTimeoutMs)
	case s.Permanent && s.AbsoluteTimeoutMs == 0:
		return fmt.Errorf("absoluteTimeoutMs: 0 with permanent: a permanent cookie needs a timeout, its Max-Age; set one or remove permanent")
	}
	return nil
}

// Match is a request match: a path plus optional method, headers and query
// parameters.
type Match struct {
	Path        PathMatch    `json:"path"`
	Method      string       `json:"method,omitempty"`
	Headers     []ValueMatch `json:"headers,omitempty"`
	QueryParams []ValueMatch `json:"queryParams,omitempty"`
}

// PathMatch types.
const (
	PathExact             = "Exact"
	PathPrefix            = "PathPrefix"
	PathRegularExpression = "RegularExpression"
)

// PathMatch matches the request path.
type PathMatch struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ValueMatch matches one header or query parameter. Type is "Exact" or
// "RegularExpression".
type ValueMatch struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Timeouts are in milliseconds; zero means absent.
type Timeouts struct {
	RequestMs        int64 `json:"requestMs,omitempty"`
	BackendRequestMs int64 `json:"backendRequestMs,omitempty"`
}

// Retry is a route's retry policy: ghost answers vcl_backend_response
// and vcl_backend_error with return (retry) when the backend answered one
// of Codes or the connection failed, at most Attempts times (and at most
// varnishd's max_retries), waiting BackoffMs before each retry and picking
// a backend again by weight.
type Retry struct {
	// Attempts is the number of retries after the first request, from 1
	// to MaxRetryAttempts.
	Attempts int `json:"attempts"`
	// BackoffMs is the wait before each retry in milliseconds; 0: none.
	BackoffMs int64 `json:"backoffMs,omitempty"`
	// Codes are the backend response statuses that are retried, from 400
	// to 599, without duplicates; empty: only connection failures and
	// timeouts are retried.
	Codes []int `json:"codes,omitempty"`
}

// Limits of a route's retry policy, which ghost enforces too.
const (
	MaxRetryAttempts = 100
	// MaxRetryBackoffMs bounds the wait before a retry, during which the
	// fetch holds one of varnishd's worker threads, shared by every route.
	MaxRetryBackoffMs = 2000
)

// Filter types.
const (
	FilterRequestHeaderModifier  = "RequestHeaderModifier"
	FilterResponseHeaderModifier = "ResponseHeaderModifier"
	FilterRequestRedirect        = "RequestRedirect"
	FilterURLRewrite             = "URLRewrite"
	FilterRequestMirror          = "RequestMirror"
	FilterCORS                   = "CORS"
)

// Filter is one filter; exactly the field named by Type is set.
type Filter struct {
	Type                   string          `json:"type"`
	RequestHeaderModifier  *HeaderModifier `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *HeaderModifier `json:"responseHeaderModifier,omitempty"`
	RequestRedirect        *Redirect       `json:"requestRedirect,omitempty"`
	URLRewrite             *Rewrite        `json:"urlRewrite,omitempty"`
	RequestMirror          *Mirror         `json:"requestMirror,omitempty"`
	CORS                   *CORS           `json:"cors,omitempty"`
}

// HeaderModifier sets, adds and removes headers.
type HeaderModifier struct {
	Set    []HeaderValue `json:"set,omitempty"`
	Add    []HeaderValue `json:"add,omitempty"`
	Remove []string      `json:"remove,omitempty"`
}

// HeaderValue is a header name and value.
type HeaderValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PathModifier types.
const (
	ReplaceFullPath    = "ReplaceFullPath"
	ReplacePrefixMatch = "ReplacePrefixMatch"
)

// PathModifier rewrites the path.
type PathModifier struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Redirect answers with a redirect.
type Redirect struct {
	Scheme     string        `json:"scheme,omitempty"`
	Hostname   string        `json:"hostname,omitempty"`
	Port       int32         `json:"port,omitempty"`
	Path       *PathModifier `json:"path,omitempty"`
	StatusCode int           `json:"statusCode,omitempty"`
}

// Rewrite rewrites the host and/or path before the request goes to a backend.
type Rewrite struct {
	Hostname string        `json:"hostname,omitempty"`
	Path     *PathModifier `json:"path,omitempty"`
}

// Mirror copies a percentage of requests to a backend of the table.
type Mirror struct {
	// Backend names a backend of the table, or only the reference when
	// Unresolved is set (no copies are sent then).
	Backend    string `json:"backend"`
	Unresolved string `json:"unresolved,omitempty"`
	Percent    *int32 `json:"percent,omitempty"`
}

// CORS is the Gateway API HTTPCORSFilter, normalised: ghost answers a
// preflight (OPTIONS with Origin and Access-Control-Request-Method) itself
// and adds the Access-Control-* headers to the responses of other requests
// whose Origin is allowed.
type CORS struct {
	// AllowOrigins are origins as scheme://host[:port], in lower case; a
	// host may start with "*." (any number of labels in its place), and
	// the single origin "*" allows every origin. Without a port an origin
	// means its scheme's default port (80, 443).
	AllowOrigins []string `json:"allowOrigins,omitempty"`
	// AllowMethods are method names, or the single "*" (every method).
	AllowMethods []string `json:"allowMethods,omitempty"`
	// AllowHeaders are request header names, or the single "*".
	AllowHeaders []string `json:"allowHeaders,omitempty"`
	// ExposeHeaders are response header names; "*" exposes all of them
	// (without credentials only: browsers read it literally otherwise).
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`
	// AllowCredentials sends Access-Control-Allow-Credentials: true.
	AllowCredentials bool `json:"allowCredentials,omitempty"`
	// MaxAge is Access-Control-Max-Age in seconds; 0 means the Gateway
	// API's default, 5.
	MaxAge int32 `json:"maxAge,omitempty"`
}

// Reasons a reference did not resolve (the Gateway API ResolvedRefs
// reasons), for BackendGroup.Unresolved and Mirror.Unresolved.
const (
	UnresolvedBackendNotFound = "BackendNotFound"
	UnresolvedInvalidKind     = "InvalidKind"
	UnresolvedRefNotPermitted = "RefNotPermitted"
	// UnresolvedUnsupportedProtocol: the Service port's appProtocol is one
	// Varnish cannot speak to a backend (kubernetes.io/h2c, kubernetes.io/wss).
	UnresolvedUnsupportedProtocol = "UnsupportedProtocol"
)

// BackendGroup is one weighted backendRef of a route. Backend names a
// backend of the table, whose endpoints serve the group's share of the
// traffic. When Unresolved is set the reference has no endpoints, whatever
// the table holds under that name, and Backend only names it for logs.
type BackendGroup struct {
	Backend    string `json:"backend"`
	Weight     int32  `json:"weight"`
	Unresolved string `json:"unresolved,omitempty"`
	// Filters are the backendRef's own filters, applied only to the
	// requests this group is picked for, after the route's filters. Only
	// a RequestHeaderModifier, at most once (Check); optional.
	Filters []Filter `json:"filters,omitempty"`
}

// Endpoint is an IP address literal (no brackets) and a port.
type Endpoint struct {
	Address string `json:"address"`
	Port    int32  `json:"port"`
}

// Marshal checks d (Check) and writes it as JSON in ghost.json's stable
// layout: the document, vhosts and their fields indented by two spaces,
// and each backend and each route as one compact line, so that diffs show
// one changed backend or route per line. Empty lists the schema requires
// are written as []. The same document always gives the same bytes.
func Marshal(d *Document) ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("ghostjson: marshal: nil document")
	}
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("ghostjson: marshal: %w", err)
	}
	e := newEncoder()
	e.document(d)
	if e.err != nil {
		return nil, fmt.Errorf("ghostjson: marshal: %w", e.err)
	}
	return e.bytes(), nil
}

// Encode checks d (Check) and writes it to w exactly as Marshal formats
// it, in chunks of about a megabyte, without holding the whole document in
// memory.
func Encode(w io.Writer, d *Document) error {
	if d == nil {
		return fmt.Errorf("ghostjson: encode: nil document")
	}
	if err := d.Check(); err != nil {
		return fmt.Errorf("ghostjson: encode: %w", err)
	}
	e := newEncoder()
	e.w = w
	e.document(d)
	if e.err == nil {
		_, e.err = w.Write(e.buf)
	}
	if e.err != nil {
		return fmt.Errorf("ghostjson: encode: %w", e.err)
	}
	return nil
}

// Unmarshal parses a ghost.json document and checks it (Check).
func Unmarshal(data []byte) (*Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("ghostjson: unmarshal: %w", err)
	}
	if err := d.Check(); err != nil {
		return nil, fmt.Errorf("ghostjson: unmarshal: %w", err)
	}
	return &d, nil
}

// Check reports the first violation of the rules the schema cannot express
// and ghost enforces: the version, unique socket names, unique listener
// names and hostnames within a socket, unique backend names, every
// reference without Unresolved naming a backend of the table, and the
// values of CORS filters (CORS.Check), the filters of backend groups
// (one RequestHeaderModifier at most), retry policies (attempts, backoff,
// codes; none on a route whose groups have filters), and session
// persistence (type Cookie or Header, a token name, an absolute cookie
// path, whole seconds). Errors name
// the field as ghost does (vhosts[0].routes[1].backends[0].backend).
func (d *Document) Check() error {
	if d.Version != Version {
		return fmt.Errorf("version is %d, this package writes and reads version %d: set Version to ghostjson.Version", d.Version, Version)
	}
	sockets := make(map[string]int, len(d.Sockets))
	for i, s := range d.Sockets {
		if j, dup := sockets[s.Name]; dup {
			return fmt.Errorf("sockets[%d].name: duplicate socket %q, already described by sockets[%d]: merge the two", i, s.Name, j)
		}
		sockets[s.Name] = i
		names := make(map[string]int, len(s.Listeners))
		hosts := make(map[string]int, len(s.Listeners))
		for j, l := range s.Listeners {
			if k, dup := names[l.Name]; dup {
				return fmt.Errorf("sockets[%d].listeners[%d].name: duplicate listener %q, already at sockets[%d].listeners[%d]: listener names are unique", i, j, l.Name, i, k)
			}
			names[l.Name] = j
			h := l.Hostname
			if h == "*" {
				h = ""
			}
			if k, dup := hosts[h]; dup {
				return fmt.Errorf("sockets[%d].listeners[%d].hostname: hostname %q is already the hostname of sockets[%d].listeners[%d]: one socket has one listener per hostname", i, j, l.Hostname, i, k)
			}
			hosts[h] = j
		}
	}
	names := make(map[string]int, len(d.Backends))
	for i, b := range d.Backends {
		if j, dup := names[b.Name]; dup {
			return fmt.Errorf("backends[%d].name: duplicate backend name %q, already defined by backends[%d]", i, b.Name, j)
		}
		names[b.Name] = i
	}
	policies := make(map[string]int, len(d.CachePolicies))
	for i := range d.CachePolicies {
		c := &d.CachePolicies[i]
		if j, dup := policies[c.Name]; dup {
			return fmt.Errorf("cachePolicies[%d].name: duplicate cache policy %q, already defined by cachePolicies[%d]", i, c.Name, j)
		}
		policies[c.Name] = i
		if err := c.check(); err != nil {
			return fmt.Errorf("cachePolicies[%d].%w", i, err)
		}
	}
	known := func(name, unresolved string) bool {
		_, ok := names[name]
		return ok || unresolved != ""
	}
	for i := range d.VHosts {
		for j := range d.VHosts[i].Routes {
			r := &d.VHosts[i].Routes[j]
			for k, f := range r.Filters {
				if c := f.CORS; c != nil {
					if err := c.Check(); err != nil {
						return fmt.Errorf("vhosts[%d].routes[%d].filters[%d].cors.%w", i, j, k, err)
					}
				}
				if m := f.RequestMirror; m != nil && !known(m.Backend, m.Unresolved) {
					return fmt.Errorf("vhosts[%d].routes[%d].filters[%d].requestMirror.backend: unknown backend %q: the backends table has no entry of that name", i, j, k, m.Backend)
				}
			}
			for k, g := range r.Backends {
				if !known(g.Backend, g.Unresolved) {
					return fmt.Errorf("vhosts[%d].routes[%d].backends[%d].backend: unknown backend %q: the backends table has no entry of that name", i, j, k, g.Backend)
				}
				if err := checkGroupFilters(g.Filters); err != nil {
					return fmt.Errorf("vhosts[%d].routes[%d].backends[%d].%w", i, j, k, err)
				}
			}
			if err := r.Retry.check(r.Backends); err != nil {
				return fmt.Errorf("vhosts[%d].routes[%d].retry%w", i, j, err)
			}
			if sp := r.Session; sp != nil {
				if err := sp.check(); err != nil {
					return fmt.Errorf("vhosts[%d].routes[%d].sessionPersistence.%w", i, j, err)
				}
			}
			if _, ok := policies[r.Cache]; r.Cache != "" && !ok {
				return fmt.Errorf("vhosts[%d].routes[%d].cache: unknown cache policy %q: the cachePolicies table has no entry of that name", i, j, r.Cache)
			}
		}
	}
	return nil
}

// check reports the first value of a retry policy ghost would reject, as
// ".field: problem" (nil: no policy, or a valid one).
func (r *Retry) check(groups []BackendGroup) error {
	if r == nil {
		return nil
	}
	if r.Attempts < 1 || r.Attempts > MaxRetryAttempts {
		return fmt.Errorf(".attempts: %d is not from 1 to %d retries", r.Attempts, MaxRetryAttempts)
	}
	if r.BackoffMs < 0 || r.BackoffMs > MaxRetryBackoffMs {
		return fmt.Errorf(".backoffMs: %d is not from 0 to %d milliseconds", r.BackoffMs, MaxRetryBackoffMs)
	}
	seen := make(map[int]bool, len(r.Codes))
	for k, c := range r.Codes {
		if c < 400 || c > 599 {
			return fmt.Errorf(".codes[%d]: status %d is not from 400 to 599", k, c)
		}
		if seen[c] {
			return fmt.Errorf(".codes[%d]: status %d is listed twice: list each status once", k, c)
		}
		seen[c] = true
	}
	for k, g := range groups {
		if len(g.Filters) > 0 {
			return fmt.Errorf(": backends[%d] has filters of its own, which ghost cannot apply again to a retry that picks another backend: remove the retry policy or the backend's filters", k)
		}
	}
	return nil
}

// checkGroupFilters reports the first filter of a backend group that ghost
// would reject, as "filters[n]...: problem": ghost applies only a
// RequestHeaderModifier on a backend, once.
func checkGroupFilters(fs []Filter) error {
	if len(fs) > 1 {
		return fmt.Errorf("filters[1]: a second filter on the same backend: ghost applies one RequestHeaderModifier per backend; merge them")
	}
	for n, f := range fs {
		if f.Type != FilterRequestHeaderModifier {
			return fmt.Errorf("filters[%d].type: filter type %q is not supported on a backend: use %s, or move the filter to the route", n, f.Type, FilterRequestHeaderModifier)
		}
		if f.RequestHeaderModifier == nil {
			return fmt.Errorf("filters[%d].requestHeaderModifier: missing for a %s filter: set it", n, f.Type)
		}
		if f.ResponseHeaderModifier != nil || f.RequestRedirect != nil || f.URLRewrite != nil || f.RequestMirror != nil || f.CORS != nil {
			return fmt.Errorf("filters[%d]: only requestHeaderModifier may be set when type is %s: remove the others", n, f.Type)
		}
	}
	return nil
}

// check reports the first field of c that ghost would reject, as
// "field: problem" (Check prefixes the policy's index).
func (c *CachePolicy) check() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("name: empty: every cache policy needs a name")
	case c.TTLMs < 0:
		return fmt.Errorf("ttlMs: %d is negative: use 0 or more", c.TTLMs)
	case c.GraceMs < 0:
		return fmt.Errorf("graceMs: %d is negative: use 0 or more", c.GraceMs)
	case c.KeepMs < 0:
		return fmt.Errorf("keepMs: %d is negative: use 0 or more", c.KeepMs)
	}
	switch c.QueryKey {
	case "", QueryKeyAll, QueryKeyNone:
		if len(c.QueryParams) > 0 {
			return fmt.Errorf("queryParams: set with queryKey %q: only %q and %q use parameter names", c.QueryKey, QueryKeyInclude, QueryKeyExclude)
		}
	case QueryKeyInclude, QueryKeyExclude:
	default:
		return fmt.Errorf("queryKey: %q is not one of %q, %q, %q, %q", c.QueryKey, QueryKeyAll, QueryKeyInclude, QueryKeyExclude, QueryKeyNone)
	}
	return nil
}

// corsOriginRE is the origin form ghost reads: a scheme, a lower-case host
// that may start with "*." or be "*", and an optional port.
var corsOriginRE = regexp.MustCompile(`^https?://(\*|(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(:[0-9]{1,5})?$`)

// Check reports the first field of c that ghost would reject, as
// "field: problem" (Document.Check prefixes the filter's path).
func (c *CORS) Check() error {
	for i, o := range c.AllowOrigins {
		if o == "*" {
			if len(c.AllowOrigins) > 1 {
				return fmt.Errorf("allowOrigins[%d]: \"*\" alongside other origins: \"*\" allows every origin, keep it alone or remove it", i)
			}
			continue
		}
		if !corsOriginRE.MatchString(o) {
			return fmt.Errorf("allowOrigins[%d]: %q is not scheme://host[:port] with scheme http or https and a lower-case host (\"*.\" allowed in front)", i, o)
		}
		if k := strings.LastIndexByte(o, ':'); k > len("https:") {
			if p, _ := strconv.Atoi(o[k+1:]); p < 1 || p > 65535 {
				return fmt.Errorf("allowOrigins[%d]: port %q is not from 1 to 65535", i, o[k+1:])
			}
		}
	}
	for _, l := range []struct {
		name  string
		items []string
		isOK  func(string) bool
		what  string
	}{
		{"allowMethods", c.AllowMethods, func(s string) bool { return slices.Contains(corsMethods, s) }, "a method of " + strings.Join(corsMethods, ", ")},
		{"allowHeaders", c.AllowHeaders, isToken, "a header name (letters, digits and !#$%&'*+-.^_`|~)"},
		{"exposeHeaders", c.ExposeHeaders, isToken, "a header name (letters, digits and !#$%&'*+-.^_`|~)"},
	} {
		for i, v := range l.items {
			if v == "*" && len(l.items) > 1 {
				return fmt.Errorf("%s[%d]: \"*\" alongside other values: keep it alone or remove it", l.name, i)
			}
			if v != "*" && !l.isOK(v) {
				return fmt.Errorf("%s[%d]: %q is not %s", l.name, i, v, l.what)
			}
		}
	}
	if c.MaxAge < 0 {
		return fmt.Errorf("maxAge: %d is negative: use 1 or more seconds (0 means 5)", c.MaxAge)
	}
	return nil
}

var corsMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// tokenRE is an HTTP token (RFC 9110), the form of header names.
var tokenRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$")

func isToken(s string) bool { return tokenRE.MatchString(s) }

// Table returns the backends by name, for readers that follow references.
func (d *Document) Table() map[string]*Backend {
	m := make(map[string]*Backend, len(d.Backends))
	for i := range d.Backends {
		m[d.Backends[i].Name] = &d.Backends[i]
	}
	return m
}

// Endpoints returns the endpoints a reference resolves to in table (from
// Table): none when it is unresolved or names no backend.
func Endpoints(table map[string]*Backend, backend, unresolved string) []Endpoint {
	if unresolved != "" {
		return nil
	}
	if b := table[backend]; b != nil {
		return b.Endpoints
	}
	return nil
}

// MarshalJSON writes a missing endpoint list as [], as the schema requires.
func (b Backend) MarshalJSON() ([]byte, error) {
	return json.Marshal(plainBackend(&b))
}
