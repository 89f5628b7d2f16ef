package toolsenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want [][2]string
		err  string
	}{
		{name: "setup's file", in: "A=/x/y\nB=\nC=a=b\n", want: [][2]string{{"A", "/x/y"}, {"B", ""}, {"C", "a=b"}}},
		{name: "comments and blank lines", in: "# tools\n\nA=1\n", want: [][2]string{{"A", "1"}}},
		{name: "no equals sign", in: "A=1\nnonsense\n", err: `line 2: "nonsense" is not KEY=value`},
		{name: "space in the key", in: "A B=1\n", err: "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "go.mod"), "module "+modulePath+"\n\ngo 1.26.0\n")
	// A nested module of another path (tools/*) is passed over.
	write(filepath.Join(root, "tools", "x", "go.mod"), "module "+modulePath+"/tools/x\n")
	pkg := filepath.Join(root, "tools", "x", "pkg")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := moduleRoot(pkg)
	if err != nil || got != root {
		t.Fatalf("moduleRoot(%s) = %q, %v, want %q", pkg, got, err, root)
	}
	if _, err := moduleRoot(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no go.mod of "+modulePath) {
		t.Fatalf("moduleRoot outside the module: err = %v", err)
	}
}

// TestLoad runs in this package's directory: it finds this checkout's
// bin/tools.env when make setup wrote one, keeps variables already set and
// names the fix for a missing one.
func TestLoad(t *testing.T) {
	t.Setenv("VARNISHGW_TERRAFORM", "/set/by/the/caller")
	path, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("VARNISHGW_TERRAFORM"); got != "/set/by/the/caller" {
		t.Errorf("VARNISHGW_TERRAFORM = %q: the file overrode the environment", got)
	}
	root, err := moduleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(filepath.Join(root, File))
	if (statErr == nil) != (path != "") {
		t.Errorf("Load() = %q, but %s exists: %v", path, File, statErr == nil)
	}
	err = Missing("VARNISHGW_TOOLSENV_TEST_UNSET")
	if err == nil || !strings.Contains(err.Error(), "VARNISHGW_TOOLSENV_TEST_UNSET not set") || !strings.Contains(err.Error(), "make setup") {
		t.Errorf("Missing = %v, want it to name the variable and make setup", err)
	}
}
