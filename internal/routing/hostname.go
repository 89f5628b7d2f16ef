package routing

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"k8s.io/apimachinery/pkg/util/validation"
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

// hostnameProblem says what is wrong with h as a hostname (an exact DNS name
// or, when wildcard is true, also *.suffix) and how to fix it, or returns ""
// when h is valid. It accepts exactly what apimachinery's
// IsDNS1123Subdomain (IsWildcardDNS1123Subdomain for *.suffix) accepts,
// minus IP addresses, but its messages name the fix instead of printing
// the regular expression.
func hostnameProblem(h string, wildcard bool) string {
	if _, err := netip.ParseAddr(h); err == nil {
		return "must be a DNS name, not an IP address"
	}
	var apimachinery []string
	if wildcard && strings.HasPrefix(h, "*") {
		apimachinery = validation.IsWildcardDNS1123Subdomain(h)
	} else {
		apimachinery = validation.IsDNS1123Subdomain(h)
	}
	if len(apimachinery) == 0 {
		return ""
	}
	if msg := hostnameFix(h, wildcard); msg != "" {
		return msg
	}
	return strings.Join(apimachinery, "; ")
}

// hostnameFix finds the first problem of an invalid hostname, in the order
// a person would fix them.
func hostnameFix(h string, wildcard bool) string {
	if h == "" {
		return "must not be empty"
	}
	if scheme, rest, ok := strings.Cut(h, "://"); ok {
		return fmt.Sprintf("must be a hostname, not a URL: remove %q and use %q", scheme+"://", strings.SplitN(rest, "/", 2)[0])
	}
	if i := strings.IndexAny(h, "/?#"); i >= 0 {
		return fmt.Sprintf("must be a hostname without a path: use %q", h[:i])
	}
	if host, port, ok := strings.Cut(h, ":"); ok {
		return fmt.Sprintf("must not contain a port (%q): use %q; the port belongs to the listener", port, host)
	}
	for i, r := range h {
		if r >= utf8.RuneSelf {
			star, name := "", h
			if wildcard && strings.HasPrefix(h, "*.") {
				star, name = "*.", h[2:]
			}
			if ascii, err := idna.Lookup.ToASCII(name); err == nil && ascii != name {
				return fmt.Sprintf("is a Unicode (internationalised) name: use its punycode (xn--...) form %q", star+ascii)
			}
			return fmt.Sprintf("has the non-ASCII character %q at offset %d: write internationalised names in punycode (xn--...)", r, i)
		}
	}
	if lower := strings.ToLower(h); lower != h {
		if hostnameProblem(lower, wildcard) == "" {
			return fmt.Sprintf("must be lower case: use %q", lower)
		}
		return "must be lower case, and " + hostnameFix(lower, wildcard)
	}
	if strings.HasSuffix(h, ".") && len(h) > 1 {
		return fmt.Sprintf("must not end with a dot: use %q", strings.TrimSuffix(h, "."))
	}
	rest := h
	if strings.Contains(h, "*") {
		switch {
		case !wildcard:
			return "must be an exact hostname such as www.example.com: a wildcard is not allowed here"
		case h == "*":
			return `must not be "*" alone: leave the hostname unset to match every host, or use a wildcard such as *.example.com`
		case !strings.HasPrefix(h, "*.") || strings.Count(h, "*") > 1:
			return "may have a wildcard only as its whole first label, as in *.example.com"
		}
		rest = h[2:]
	}
	if len(h) > validation.DNS1123SubdomainMaxLength {
		return fmt.Sprintf("is %d characters long: a hostname has at most %d", len(h), validation.DNS1123SubdomainMaxLength)
	}
	return labelsFix(rest, "hostnames")
}

// labelsFix finds the first problem of the dot-separated DNS labels of s;
// plural names what s is in the message ("hostnames", "Service names").
func labelsFix(s, plural string) string {
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return `has an empty label (a leading or trailing dot, or ".."): remove the extra dot`
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
				continue
			}
			if c == '_' {
				return fmt.Sprintf("has an underscore in %q: %s have lower-case letters, digits, '-' and '.'; use '-'", label, plural)
			}
			return fmt.Sprintf("has the character %q in %q: %s have lower-case letters, digits, '-' and '.'", string(c), label, plural)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Sprintf("has the label %q, which starts or ends with '-': a label starts and ends with a letter or digit", label)
		}
	}
	return ""
}

// objectNameProblem says what is wrong with a Kubernetes object name (a
// DNS subdomain, or a DNS label when label is true, such as a namespace)
// and how to fix it, or returns "" when it is valid. what names it in the
// messages ("Service names", "namespace names").
func objectNameProblem(name string, label bool, plural string) string {
	var apimachinery []string
	if label {
		apimachinery = validation.IsDNS1123Label(name)
	} else {
		apimachinery = validation.IsDNS1123Subdomain(name)
	}
	if len(apimachinery) == 0 {
		return ""
	}
	max := validation.DNS1123SubdomainMaxLength
	if label {
		max = validation.DNS1123LabelMaxLength
	}
	msg := ""
	switch lower := strings.ToLower(name); {
	case lower != name && objectNameProblem(lower, label, plural) == "":
		msg = fmt.Sprintf("must be lower case: use %q", lower)
	case lower != name:
		msg = "must be lower case, and " + objectNameProblem(lower, label, plural)
	case len(name) > max:
		msg = fmt.Sprintf("is %d characters long: %s have at most %d", len(name), plural, max)
	case label && strings.Contains(name, "."):
		msg = fmt.Sprintf("must not contain '.': %s are DNS labels (lower-case letters, digits and '-')", plural)
	default:
		msg = labelsFix(name, plural)
	}
	if msg == "" {
		return strings.Join(apimachinery, "; ")
	}
	return msg
}
