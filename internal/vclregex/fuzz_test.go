package vclregex

import (
	"regexp"
	"testing"
)

// FuzzValidate checks that the regex validators never panic and that
// whatever they accept compiles with Go's regexp.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{`^/api/v[0-9]+/.*$`, `(?i)[^ks]`, `\Q.*\E`, `(a)\1`, `a{,3}`, `\p{L}`, `[[:alpha:]]`, `(?P<x>a|b)*?`, `\x{7f}`, `(?i:a|b){2,}?`, `\x41{3}`, `[]()|*]+`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if err := Validate(expr); err != nil {
			return
		}
		if _, err := regexp.Compile(expr); err != nil {
			t.Fatalf("Validate accepted %q, which Go cannot compile: %v", expr, err)
		}
		_ = ValidateBan(expr) // must not panic on what Validate accepts
	})
}
