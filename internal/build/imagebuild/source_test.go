package imagebuild

import (
	"regexp"
	"testing"
	"time"
)

func TestVersion(t *testing.T) {
	at := time.Date(2026, 11, 24, 11, 18, 28, 0, time.FixedZone("x", 3600))
	rev := "9da7807abcdef0123456789abcdef0123456789a"
	for _, tc := range []struct {
		describe string
		dirty    bool
		want     string
	}{
		{"", false, "v0.0.0-20261124101828-9da7807abcde"},
		{"", true, "v0.0.0-20261124101828-9da7807abcde-dirty"},
		{"v0.3.0", false, "v0.3.0"},
		{"v0.3.0-5-g9da7807abcde", true, "v0.3.0-5-g9da7807abcde-dirty"},
	} {
		got := version(tc.describe, at, rev, tc.dirty)
		if got != tc.want {
			t.Errorf("version(%q, dirty %v) = %q, want %q", tc.describe, tc.dirty, got, tc.want)
		}
		// The OCI distribution spec's tag grammar.
		if !regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`).MatchString(got) {
			t.Errorf("%q is not a valid tag", got)
		}
	}
}

func TestReadSource(t *testing.T) {
	s, err := ReadSource(t.Context(), "../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Revision) != 40 || s.Time.IsZero() || s.Version == "" {
		t.Errorf("source %+v", s)
	}
}
