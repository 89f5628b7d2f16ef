package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "dev"},
		{"devel", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev"},
		{"empty", &debug.BuildInfo{}, true, "dev"},
		{"tag", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, true, "v0.1.0"},
		{"pseudo", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.1-0.20261202100000-0123456789ab+dirty"}}, true, "v0.1.1-0.20261202100000-0123456789ab+dirty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(tt.bi, tt.ok); got != tt.want {
				t.Errorf("fromBuildInfo = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStringLinkerValue: a Version set by the linker wins.
func TestStringLinkerValue(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = "v9.9.9"
	if got := String(); got != "v9.9.9" {
		t.Errorf("String = %q, want the linker's v9.9.9", got)
	}
}
