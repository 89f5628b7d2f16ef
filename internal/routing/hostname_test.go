package routing

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestIntersectHostnames(t *testing.T) {
	tests := []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", nil, []string{"*"}},
		{"foo.example.com", nil, []string{"foo.example.com"}},
		{"", []string{"b.example.com", "a.example.com"}, []string{"a.example.com", "b.example.com"}},
		{"foo.example.com", []string{"foo.example.com"}, []string{"foo.example.com"}},
		{"foo.example.com", []string{"bar.example.com"}, nil},
		{"*.example.com", []string{"foo.example.com", "example.com", "a.b.example.com"}, []string{"a.b.example.com", "foo.example.com"}},
		{"foo.example.com", []string{"*.example.com"}, []string{"foo.example.com"}},
		{"*.example.com", []string{"*.example.com"}, []string{"*.example.com"}},
		{"*.example.com", []string{"*.foo.example.com"}, []string{"*.foo.example.com"}},
		{"*.foo.example.com", []string{"*.example.com"}, []string{"*.foo.example.com"}},
		{"*.example.com", []string{"*.example.org"}, nil},
		{"example.com", []string{"*.example.com"}, nil},
	}
	for _, tt := range tests {
		if got := intersectHostnames(tt.listener, tt.route); !slices.Equal(got, tt.want) {
			t.Errorf("intersectHostnames(%q, %q) = %q, want %q", tt.listener, tt.route, got, tt.want)
		}
	}
}

func TestCoveringPatterns(t *testing.T) {
	tests := map[string][]string{
		"a.b.c": {"a.b.c", "*.b.c", "*.c", "*"},
		"*.b.c": {"*.b.c", "*.c", "*"},
		"*":     {"*"},
		"local": {"local", "*"},
	}
	for in, want := range tests {
		if got := coveringPatterns(in); !slices.Equal(got, want) {
			t.Errorf("coveringPatterns(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostnameProblem: an invalid hostname's message says how to fix it,
// never the regular expression apimachinery prints.
func TestHostnameProblem(t *testing.T) {
	for _, tt := range []struct {
		host     string
		wildcard bool
		want     string
	}{
		{"www.example.com", false, ""},
		{"*.example.com", true, ""},
		{"xn--bcher-kva.example", false, ""},
		{"a-b.c", false, ""},
		{"", false, "must not be empty"},
		{"10.0.0.1", false, "must be a DNS name, not an IP address"},
		{"::1", true, "must be a DNS name, not an IP address"},
		{"WWW.Example.com", false, `must be lower case: use "www.example.com"`},
		{"My_Host.example.com", false, `must be lower case, and has an underscore in "my_host": hostnames have lower-case letters, digits, '-' and '.'; use '-'`},
		{"Bücher.example", false, `is a Unicode (internationalised) name: use its punycode (xn--...) form "xn--bcher-kva.example"`},
		{"bücher.example", true, `is a Unicode (internationalised) name: use its punycode (xn--...) form "xn--bcher-kva.example"`},
		{"*.bücher.example", true, `is a Unicode (internationalised) name: use its punycode (xn--...) form "*.xn--bcher-kva.example"`},
		{"a\u00a0b.example", false, `has the non-ASCII character '\u00a0' at offset 1: write internationalised names in punycode (xn--...)`},
		{"https://www.example.com/shop", false, `must be a hostname, not a URL: remove "https://" and use "www.example.com"`},
		{"www.example.com/shop", false, `must be a hostname without a path: use "www.example.com"`},
		{"www.example.com:8080", false, `must not contain a port ("8080"): use "www.example.com"; the port belongs to the listener`},
		{"www.example.com.", false, `must not end with a dot: use "www.example.com"`},
		{"*.example.com", false, "must be an exact hostname such as www.example.com: a wildcard is not allowed here"},
		{"*", true, `must not be "*" alone: leave the hostname unset to match every host, or use a wildcard such as *.example.com`},
		{"www.*.example.com", true, "may have a wildcard only as its whole first label, as in *.example.com"},
		{"*a.example.com", true, "may have a wildcard only as its whole first label, as in *.example.com"},
		{"a..example.com", false, `has an empty label (a leading or trailing dot, or ".."): remove the extra dot`},
		{".example.com", false, `has an empty label (a leading or trailing dot, or ".."): remove the extra dot`},
		{"my_host.example.com", false, `has an underscore in "my_host": hostnames have lower-case letters, digits, '-' and '.'; use '-'`},
		{"a b.example.com", false, `has the character " " in "a b": hostnames have lower-case letters, digits, '-' and '.'`},
		{"-www.example.com", false, `has the label "-www", which starts or ends with '-': a label starts and ends with a letter or digit`},
		{strings.Repeat("abcdefghi.", 26), false, `must not end with a dot: use "` + strings.TrimSuffix(strings.Repeat("abcdefghi.", 26), ".") + `"`},
		{strings.Repeat("abcdefghi.", 25) + "abcd", false, "is 254 characters long: a hostname has at most 253"},
	} {
		if got := hostnameProblem(tt.host, tt.wildcard); got != tt.want {
			t.Errorf("hostnameProblem(%q, %v) = %q, want %q", tt.host, tt.wildcard, got, tt.want)
		}
	}
}

// TestObjectNameProblem: the messages of invalid Service and namespace names.
func TestObjectNameProblem(t *testing.T) {
	for _, tt := range []struct {
		name  string
		label bool
		want  string
	}{
		{"web", false, ""},
		{"web.v2", false, ""},
		{"Web", false, `must be lower case: use "web"`},
		{"Web_V2", false, `must be lower case, and has an underscore in "web_v2": Service names have lower-case letters, digits, '-' and '.'; use '-'`},
		{"web_v2", false, `has an underscore in "web_v2": Service names have lower-case letters, digits, '-' and '.'; use '-'`},
		{"web.v2", true, "must not contain '.': Service names are DNS labels (lower-case letters, digits and '-')"},
		{"-web", true, `has the label "-web", which starts or ends with '-': a label starts and ends with a letter or digit`},
		{strings.Repeat("a", 64), true, "is 64 characters long: Service names have at most 63"},
	} {
		if got := objectNameProblem(tt.name, tt.label, "Service names"); got != tt.want {
			t.Errorf("objectNameProblem(%q, %v) = %q, want %q", tt.name, tt.label, got, tt.want)
		}
	}
}

// TestHostnameProblemAcceptsWhatApimachineryAccepts: the fix messages do not
// change which hostnames are valid.
func TestHostnameProblemAcceptsWhatApimachineryAccepts(t *testing.T) {
	for _, h := range []string{"a", "a.b", "*.a", "*", "A", "a-", "a_b", "*.*.a", "a.*", "0.0", "1.2.3.4", "xn--a", "a..b", "é", "a:1", "a/b", "a.b."} {
		for _, wildcard := range []bool{false, true} {
			want := validation.IsDNS1123Subdomain(h)
			if wildcard && strings.HasPrefix(h, "*") {
				want = validation.IsWildcardDNS1123Subdomain(h)
			}
			_, ipErr := netip.ParseAddr(h)
			valid := len(want) == 0 && ipErr != nil
			got := hostnameProblem(h, wildcard)
			if (got == "") != valid {
				t.Errorf("hostnameProblem(%q, %v) = %q; apimachinery says valid = %v", h, wildcard, got, valid)
			}
			if strings.Contains(got, "regex") {
				t.Errorf("hostnameProblem(%q, %v) = %q prints a regular expression", h, wildcard, got)
			}
		}
	}
}
