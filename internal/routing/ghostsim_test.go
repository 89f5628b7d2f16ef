package routing

import (
	"regexp"
	"slices"
	"strings"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/ghostjson"
)

// ghostRoute is a reference model of how ghost picks a route, written from
// the ghost.json contract: on the request's socket, the most specific vhost
// for the host (exact, longest wildcard suffix, "*") and no fall-through;
// in it, the routes stable-sorted by ComparePrecedence, first match wins.
// Only paths are modelled (methods, headers and query parameters are not).
// It returns nil for 404.
func ghostRoute(doc *ghostjson.Document, socket, host, path string) *ghostjson.Route {
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
	slices.SortStableFunc(routes, func(a, b ghostjson.Route) int { return ComparePrecedence(&a.Match, &b.Match) })
	for i := range routes {
		if pathMatches(routes[i].Match.Path, path) {
			return &routes[i]
		}
	}
	return nil
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
