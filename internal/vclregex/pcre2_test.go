//go:build pcre2 && cgo

// This file cross-checks Validate against the real PCRE2 library that
// Varnish uses (through internal/pcre2). It needs Debian's libpcre2-dev
// (debian-packages.txt) and runs only with -tags pcre2.
//
//	go test -tags pcre2 -run PCRE2 ./internal/vclregex
//	go test -tags pcre2 -run '^$' -fuzz FuzzPCRE2 -fuzztime 20s ./internal/vclregex

package vclregex

import (
	"regexp"
	"testing"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/vclregex/internal/pcre2"
)

var pcre2Subjects = []string{
	"", "/", "/a", "/api/v1/users", "/API/V2/x", "/static/app.css", "/old/page", "a", "ab", "abc", "aaa",
	"K", "k", "s", "S", "x", "{,3}", "a{,3}", "12", "123abc", "foo bar", "a\tb", "/x/../y", "a.b", "_-~",
	"/foo/bar/baz", "0", "99999", "Q", "\\", "[]", "-", "a-z", "/p?q=1",
}

// checkAgainstPCRE2 fails when Validate accepts expr but PCRE2 rejects
// it or the two engines disagree on a subject.
func checkAgainstPCRE2(t *testing.T, expr string, subjects []string) {
	t.Helper()
	if Validate(expr) != nil {
		return
	}
	re, err := pcre2.Compile(expr)
	if err != nil {
		t.Fatalf("Validate accepts %q but PCRE2 rejects it", expr)
	}
	defer re.Free()
	gre := regexp.MustCompile(expr)
	for _, s := range subjects {
		got, ok := re.Match(s)
		if !ok {
			continue // PCRE2 resource limit: not a semantic difference
		}
		if want := gre.MatchString(s); got != want {
			t.Fatalf("%q on %q: PCRE2 says %v, Go says %v", expr, s, got, want)
		}
	}
}

func TestPCRE2AgreesWithValidate(t *testing.T) {
	exprs := []string{
		`^/api/v[0-9]+/.*$`, `/foo(/.*)?`, `(?i)^/static/[a-z]+\.(css|js)$`, `^/(?P<id>[0-9]{1,8})$`,
		`[^k]`, `(?i)[^ks]x`, `(?i)k`, `\Q.*\E`, `\x41\t\d\w\s\b\A\z`, `[[:alpha:]]+`, `^a{2,3}$`, `a*?b`,
		`(?s).`, `(?m)^x$`, `(?U)a+`, `\Ba\b`, `[\d-]`, `^[^/]*$`, `\x{7f}`, `\0`, `\01`, `[[:^digit:]]+`,
	}
	for _, e := range exprs {
		if err := Validate(e); err != nil {
			t.Errorf("Validate(%q) = %v", e, err)
			continue
		}
		checkAgainstPCRE2(t, e, pcre2Subjects)
	}
}

// FuzzPCRE2 is a differential fuzz target: whatever Validate accepts
// must compile in PCRE2 and match the same subjects in both engines.
func FuzzPCRE2(f *testing.F) {
	for _, s := range []string{`^/api/v[0-9]+/.*$`, `(?i)[^ks]x`, `\Q.*\E`, `a{2,3}`, `[[:alpha:]]+`, `(?U)a+b`} {
		f.Add(s, "/api/v1/x")
	}
	f.Fuzz(func(t *testing.T, expr, subject string) {
		checkAgainstPCRE2(t, expr, append([]string{subject}, pcre2Subjects...))
	})
}
