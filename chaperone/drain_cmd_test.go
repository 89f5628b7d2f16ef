package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestDrainCommandArguments(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		wantCode int
		wantErr  string
	}{
		{"relative socket", []string{"--socket=drain.sock"}, nil, 2, `--socket="drain.sock": not an absolute path`},
		{"argument", []string{"now"}, nil, 2, `unexpected argument "now"`},
		{"negative delay", []string{"--delay=-1s"}, nil, 2, "want 0 or more"},
		{"unknown flag", []string{"--force"}, nil, 2, "flag provided but not defined: -force"},
		{"no chaperone", []string{"--socket=" + missing}, nil, 1, "chaperone drain: no drain socket at " + missing},
		{"socket from the environment", nil, []string{"VARNISHGW_DRAIN_SOCKET=" + missing}, 1, "no drain socket at " + missing},
		{"a flag wins over the environment", []string{"--socket=" + missing}, []string{"VARNISHGW_DRAIN_SOCKET=/elsewhere.sock"}, 1, "no drain socket at " + missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := drainCommand(tc.args, tc.env, &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.wantCode, tc.wantErr)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}
