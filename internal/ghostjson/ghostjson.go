// Package ghostjson defines ghost.json, version 1: the routing state the
// chaperone writes and the ghost VMOD reads on reload. The types mirror
// ghost/ghost.schema.json field for field; Marshal writes them
// deterministically, so the same document always gives the same bytes.
package ghostjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Version is the only schema version this package writes.
const Version = 1

// Document is a complete ghost.json file.
type Document struct {
	Version int     `json:"version"`
	VHosts  []VHost `json:"vhosts"`
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
	PrecedenceGroup int            `json:"precedenceGroup,omitempty"`
	Match           Match          `json:"match"`
	Filters         []Filter       `json:"filters,omitempty"`
	Timeouts        *Timeouts      `json:"timeouts,omitempty"`
	Backends        []BackendGroup `json:"backends,omitempty"`
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

// Filter types.
const (
	FilterRequestHeaderModifier  = "RequestHeaderModifier"
	FilterResponseHeaderModifier = "ResponseHeaderModifier"
	FilterRequestRedirect        = "RequestRedirect"
	FilterURLRewrite             = "URLRewrite"
	FilterRequestMirror          = "RequestMirror"
)

// Filter is one filter; exactly the field named by Type is set.
type Filter struct {
	Type                   string          `json:"type"`
	RequestHeaderModifier  *HeaderModifier `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *HeaderModifier `json:"responseHeaderModifier,omitempty"`
	RequestRedirect        *Redirect       `json:"requestRedirect,omitempty"`
	URLRewrite             *Rewrite        `json:"urlRewrite,omitempty"`
	RequestMirror          *Mirror         `json:"requestMirror,omitempty"`
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

// Mirror copies a percentage of requests to a backend group.
type Mirror struct {
	Backend BackendGroup `json:"backend"`
	Percent *int32       `json:"percent,omitempty"`
}

// BackendGroup is one weighted backendRef resolved to endpoints. An empty
// Endpoints list answers its share of the traffic with 500.
type BackendGroup struct {
	Name      string     `json:"name,omitempty"`
	Weight    int32      `json:"weight"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is an IP address literal (no brackets) and a port.
type Endpoint struct {
	Address string `json:"address"`
	Port    int32  `json:"port"`
}

// Marshal writes d as JSON in ghost.json's stable layout: the document,
// vhosts and their fields indented by two spaces, and each route as one
// compact line, so that diffs show one changed route per line. Empty lists
// the schema requires are written as []. The same document always gives the
// same bytes. Encoded endpoint lists and filter lists shared between routes
// (as Resolve shares them) are encoded once.
func Marshal(d *Document) ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("ghostjson: marshal: nil document")
	}
	if d.Version != Version {
		return nil, fmt.Errorf("ghostjson: marshal: version is %d, want %d", d.Version, Version)
	}
	e := newEncoder()
	if err := e.document(d); err != nil {
		return nil, fmt.Errorf("ghostjson: marshal: %w", err)
	}
	return e.bytes(), nil
}

// Encode writes d to w exactly as Marshal formats it, in chunks of about a
// megabyte, without holding the whole document in memory.
func Encode(w io.Writer, d *Document) error {
	if d == nil {
		return fmt.Errorf("ghostjson: encode: nil document")
	}
	if d.Version != Version {
		return fmt.Errorf("ghostjson: encode: version is %d, want %d", d.Version, Version)
	}
	e := newEncoder()
	e.w = w
	if err := e.document(d); err != nil {
		return fmt.Errorf("ghostjson: encode: %w", err)
	}
	if e.err == nil {
		_, e.err = w.Write(e.buf)
	}
	if e.err != nil {
		return fmt.Errorf("ghostjson: encode: %w", e.err)
	}
	return nil
}

// Unmarshal parses a ghost.json document and checks its version.
func Unmarshal(data []byte) (*Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("ghostjson: unmarshal: %w", err)
	}
	if d.Version != Version {
		return nil, fmt.Errorf("ghostjson: unmarshal: version is %d, want %d", d.Version, Version)
	}
	return &d, nil
}

// MarshalJSON writes a missing endpoint list as [], as the schema requires.
func (g BackendGroup) MarshalJSON() ([]byte, error) {
	type plain BackendGroup
	if g.Endpoints == nil {
		g.Endpoints = []Endpoint{}
	}
	return json.Marshal(plain(g))
}
