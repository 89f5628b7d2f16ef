package vclregex

import (
	"strings"
	"testing"
)

// TestValidateBan: ban regular expressions whose PCRE2 matching can
// hit varnishd's match or depth limit (which panics the cache child) are
// refused with an error saying why and what to write instead; ordinary
// path expressions pass.
func TestValidateBan(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want string // "" accepted, else a substring of the error
	}{
		{`^/v/[0-9]+$`, ""},
		{`^/(foo|bar|baz)/.*\.(png|jpg)$`, ""},
		{`^/img/[^/]*/[a-z0-9-]+\.(?:png|jpg)$`, ""},
		{`^/sp(%20| )ace/`, ""},
		{`^/(?:ab){0,10}$`, ""},
		{`^/(ab)?c(de)?$`, ""},
		{`^/(a|b)?(?:c+)?$`, ""},                // ? is not a repetition
		{`^/a{2,1000}$`, ""},                    // a single character's count
		{`^/\x{41}{3}[[:alpha:]]{2}\(*\)$`, ""}, // escapes, classes, escaped parens
		{`(?i)^/ABC[a-z]*$`, ""},
		{`^/x\{2,3\}$`, ""},
		{`^/\Q(a|b)*\E$`, ""}, // quoted
		{`^/[(|*]+$`, ""},     // in a class

		// nested: star height above one
		{`^/(a|a)*b$`, `the group (a|a) is repeated and holds a quantifier or "|"`},
		{`^/(?:a|b)+$`, `the group (?:a|b) is repeated`},
		{`^/(a+)+$`, `the group (a+) is repeated`},
		{`^/(?:a?)*$`, `the group (?:a?) is repeated`},
		{`^/(?:x(?:a|b))*$`, `the group (?:x(?:a|b)) is repeated`},
		{`^/(?:[a-z]{2}){3}$`, `the group (?:[a-z]{2}) is repeated`},
		{`^/(?i:a*){2,}?$`, `the group (?i:a*) is repeated`},
		// a group repeated without bound or often: PCRE2's depth
		{`^/(?:ab)*$`, `the group (?:ab) is repeated 0 or more times`},
		{`^/(?:[^/]+/)*index\.html$`, `the group (?:[^/]+/) is repeated and holds`},
		{`^/(?P<dir>[^/]/)*x$`, `the group (?P<dir>[^/]/) is repeated 0 or more times`},
		{`^/(ab){0,25}$`, `the group (ab) is repeated up to 25 times`},
		{`^/(a)+$`, `the group (a) is repeated 1 or more times`},
		// counts
		{`^/a{1,1001}$`, `invalid repeat count`}, // Go's own bound
		{`^/a{5000}$`, `invalid repeat count`},
		// too many backtracking points in all
		{`^/` + strings.Repeat(`(a)`, 13), `13 groups, "|" and quantifiers in all, the limit is 12`},
		{`^/` + strings.Repeat(`a?`, 13), `13 groups, "|" and quantifiers in all`},
		// Validate's refusals stay
		{`^/(a)\1`, `backreference`},
	} {
		err := ValidateBan(tc.expr)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateBan(%q) = %v, want accepted", tc.expr, err)
		case tc.want != "" && err == nil:
			t.Errorf("ValidateBan(%q) accepted it, want an error with %q", tc.expr, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("ValidateBan(%q) = %v, want an error with %q", tc.expr, err, tc.want)
		case err != nil && tc.want != "backreference" && tc.want != "invalid repeat count" && !strings.Contains(err.Error(), "or use pathPrefix"):
			t.Errorf("ValidateBan(%q) = %v, want it to say what to write instead", tc.expr, err)
		}
	}
}
