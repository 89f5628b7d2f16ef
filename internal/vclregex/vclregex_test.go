package vclregex

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		expr    string
		wantErr string // substring; "" means valid
	}{
		{`^/api/v[0-9]+/.*$`, ""},
		{`/foo(/.*)?`, ""},
		{`(?i)^/Static/[a-z]+\.(css|js)$`, ""},
		{`^/(?P<id>[0-9]{1,8})$`, ""},
		{`[^k]`, ""},
		{`(?i)[^ks]x`, ""},
		{`\Q.*\E`, ""},
		{`\x41\t\d\w\s\b\A\z`, ""},
		{`[[:alpha:]]+`, ""},
		{``, "empty"},
		{`(a)\1`, "backreference"},
		{`\12`, "backreference"},
		{`a\vb`, "vertical"},
		{`\p{Greek}`, "Unicode"},
		{`a{,3}`, `"{,"`},
		{`(?=a)`, "subset"},
		{`(?<!a)b`, "subset"},
		{`a++`, "subset"},
		{`(?>a)`, "subset"},
		{`\Z`, "subset"},
		{`\C`, "subset"},
		{`\K`, "subset"},
		{`é`, "non-ASCII"},
		{`\x{e9}`, "outside ASCII"},
		{`[\x{100}-\x{200}]`, "outside ASCII"},
		{"a\nb", "control character"},
		{`(`, "subset"},
		{`a\`, "trailing backslash"},
		{`[::]`, "POSIX class"},
		{`$*`, "quantifier on an assertion"},
		{strings.Repeat("a{1000}", 11), "expands to more than"},
		{`[a-z]{1,1000}`, ""},
		{`x\b+`, "quantifier on an assertion"},
		{`[a[.b.]]`, "not a POSIX class"},
		{`[]a]`, ""},
		{`[^]a]`, ""},
		{`[\[:]`, ""},
		{`[x{,2}]`, ""},
		{strings.Repeat("a", 1025), "limit"},
	}
	for _, tt := range tests {
		err := Validate(tt.expr)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Validate(%q) = %v, want nil", tt.expr, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("Validate(%q) = %v, want error containing %q", tt.expr, err, tt.wantErr)
		}
	}
}
