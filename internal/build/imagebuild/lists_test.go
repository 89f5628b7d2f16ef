package imagebuild

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestReadPackages(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
		err        string
	}{
		{"list", "# head\nvarnish\n\nlibjansson4  # json\nlibstdc++6\n", []string{"varnish", "libjansson4", "libstdc++6"}, ""},
		{"two on a line", "varnish hitch\n", nil, `"varnish hitch" is not one Debian package name`},
		{"version", "varnish=7.7\n", nil, `"varnish=7.7"`},
		{"empty", "# nothing\n", nil, "lists no package"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "p.txt")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadPackages(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestReadPins(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(p, []byte("# c\nvarnish 7.7.0-3 exact\nlibc6 2.41\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPins(p)
	if err != nil || !reflect.DeepEqual(got, map[string]string{"varnish": "7.7.0-3"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("varnish\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPins(p); err == nil || !strings.Contains(err.Error(), "p.txt:1") {
		t.Fatalf("error %v, want one naming the line", err)
	}
}

// The repository's own lists parse, and the gateway's includes varnish.
func TestRepositoryLists(t *testing.T) {
	for _, f := range []string{GatewayPackagesFile, GhostBuildPackagesFile} {
		pkgs, err := ReadPackages(filepath.Join("../../..", f))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pkgs, "varnish") {
			t.Errorf("%s does not list varnish", f)
		}
	}
	pins, err := ReadPins(filepath.Join("../../..", Varnish77PackagesFile))
	if err != nil {
		t.Fatal(err)
	}
	if pins["varnish"] == "" || pins["libvarnishapi-dev"] != pins["varnish"] {
		t.Errorf("pins %v: want varnish and libvarnishapi-dev pinned to one version", pins)
	}
}
