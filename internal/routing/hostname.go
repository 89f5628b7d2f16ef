package routing

import (
	"slices"
	"strings"
)

// anyHost is the vhost hostname that matches every request host.
const anyHost = "*"

// isWildcard reports whether h is a wildcard hostname such as *.example.com.
func isWildcard(h string) bool { return strings.HasPrefix(h, "*.") }

// hostMatches reports whether pattern (exact, *.suffix or *) matches host,
// which may itself be a wildcard: *.example.com matches a.example.com and
// *.a.example.com but not example.com.
func hostMatches(pattern, host string) bool {
	switch {
	case pattern == anyHost:
		return true
	case isWildcard(pattern):
		suffix := pattern[1:] // ".example.com"
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	default:
		return pattern == host
	}
}

// intersectHostnames returns the hostnames a route with routeHosts accepts on
// a listener with listenerHost ("" for none), following the Gateway API
// rules: a route without hostnames takes the listener's; otherwise each route
// hostname that the listener hostname matches, or that matches it, yields the
// more specific of the two. The result is sorted and free of duplicates; an
// empty result means no intersection.
func intersectHostnames(listenerHost string, routeHosts []string) []string {
	if listenerHost == "" {
		listenerHost = anyHost
	}
	if len(routeHosts) == 0 {
		return []string{listenerHost}
	}
	var out []string
	for _, rh := range routeHosts {
		switch {
		case hostMatches(listenerHost, rh) || listenerHost == rh:
			out = append(out, rh)
		case hostMatches(rh, listenerHost):
			out = append(out, listenerHost)
		}
	}
	return sortedUnique(out)
}

// hostSpecificity ranks hostnames for the Gateway API hostname precedence:
// exact names first (longer first), then wildcards by suffix length, then *.
// A larger value is more specific.
func hostSpecificity(h string) int {
	switch {
	case h == anyHost:
		return 0
	case isWildcard(h):
		return 1 + len(h)
	default:
		return 1<<20 + len(h)
	}
}

// coveringPatterns returns h and every pattern that matches h, most specific
// first: a.b.c gives a.b.c, *.b.c, *.c, *; *.b.c gives *.b.c, *.c, *.
func coveringPatterns(h string) []string {
	out := []string{h}
	rest := h
	if isWildcard(h) {
		rest = h[2:]
	} else if h == anyHost {
		return out
	}
	for {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		out = append(out, "*."+rest)
	}
	return append(out, anyHost)
}

func sortedUnique(s []string) []string {
	if len(s) < 2 {
		return s
	}
	slices.Sort(s)
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
