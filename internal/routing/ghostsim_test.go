package routing

import (
	"cmp"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// simRequest is a request for the reference model.
type simRequest struct {
	Host, Method, Path string // Path may carry a query string
	Headers            map[string]string
}

// ghostRoute is a reference model of how ghost picks a route, written from
// the ghost.json contract: on the request's socket, the most specific vhost
// for the host (exact, longest wildcard suffix, "*") and no fall-through;
// in it, the routes stable-sorted by precedenceGroup, then ComparePrecedence,
// first match wins.
// It returns nil for 404.
func ghostRoute(doc *ghostjson.Document, socket, host, path string) *ghostjson.Route {
	return ghostServe(doc, socket, simRequest{Host: host, Method: "GET", Path: path})
}

// ghostServe is ghostRoute for a full request: path, method, headers
// (names case-insensitive) and query parameters (names case-sensitive, the
// first value counts).
func ghostServe(doc *ghostjson.Document, socket string, req simRequest) *ghostjson.Route {
	host := strings.ToLower(req.Host)
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	path, rawQuery, _ := strings.Cut(req.Path, "?")
	query, _ := url.ParseQuery(rawQuery)
	var best *ghostjson.VHost
	for i := range doc.VHosts {
		v := &doc.VHosts[i]
		if len(v.Listeners) > 0 && !slices.Contains(v.Listeners, socket) {
			continue
		}
		if v.Hostname != host && !hostMatches(v.Hostname, host) {
			continue
		}
		if best == nil || hostSpecificity(v.Hostname) > hostSpecificity(best.Hostname) {
			best = v
		}
	}
	if best == nil {
		return nil
	}
	routes := slices.Clone(best.Routes)
	slices.SortStableFunc(routes, func(a, b ghostjson.Route) int {
		if a.PrecedenceGroup != b.PrecedenceGroup {
			return cmp.Compare(a.PrecedenceGroup, b.PrecedenceGroup)
		}
		return ComparePrecedence(&a.Match, &b.Match)
	})
	for i := range routes {
		m := &routes[i].Match
		if !pathMatches(m.Path, path) || (m.Method != "" && m.Method != req.Method) {
			continue
		}
		ok := true
		for _, h := range m.Headers {
			v, found := headerValue(req.Headers, h.Name)
			ok = ok && found && valueMatches(h, v)
		}
		for _, q := range m.QueryParams {
			vs, found := query[q.Name]
			ok = ok && found && valueMatches(q, vs[0])
		}
		if ok {
			return &routes[i]
		}
	}
	return nil
}

func headerValue(h map[string]string, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func valueMatches(m ghostjson.ValueMatch, v string) bool {
	if m.Type == ghostjson.PathExact {
		return v == m.Value
	}
	re, err := regexp.Compile(m.Value)
	return err == nil && re.MatchString(v)
}

// pathMatches implements the Gateway API path match types; PathPrefix
// matches whole path elements.
func pathMatches(m ghostjson.PathMatch, path string) bool {
	switch m.Type {
	case ghostjson.PathExact:
		return path == m.Value
	case ghostjson.PathPrefix:
		p := strings.TrimSuffix(m.Value, "/")
		return p == "" || path == p || strings.HasPrefix(path, p+"/")
	default:
		re, err := regexp.Compile(m.Value)
		return err == nil && re.MatchString(path)
	}
}
