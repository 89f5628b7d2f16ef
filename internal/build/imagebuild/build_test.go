package imagebuild

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestPin(t *testing.T) {
	got := pin([]string{"varnish", "libjansson4", "libvarnishapi-dev"}, map[string]string{"varnish": "7.7.0-3", "libvarnishapi-dev": "7.7.0-3", "libvarnishapi3": "7.7.0-3"})
	want := []string{"varnish=7.7.0-3", "libjansson4", "libvarnishapi-dev=7.7.0-3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pin: %v, want %v", got, want)
	}
}

func TestCheckVarnish(t *testing.T) {
	pkgs := func(kv ...string) []Package {
		var out []Package
		for i := 0; i < len(kv); i += 2 {
			out = append(out, Package{Name: kv[i], Version: kv[i+1]})
		}
		return out
	}
	pins := map[string]string{"varnish": "7.7.0-3", "libvarnishapi3": "7.7.0-3", "libvarnishapi-dev": "7.7.0-3"}
	for _, tc := range []struct {
		name         string
		image, build []Package
		want, err    string
	}{
		{"same and pinned", pkgs("varnish", "7.7.0-3", "libvarnishapi3", "7.7.0-3"), pkgs("varnish", "7.7.0-3", "libvarnishapi-dev", "7.7.0-3"), "7.7.0-3", ""},
		{"no varnish", pkgs("libc6", "2.41"), pkgs("varnish", "7.7.0-3"), "", "has no varnish package"},
		{"roots differ", pkgs("varnish", "7.7.0-3"), pkgs("varnish", "7.7.0-4"), "", `ghost's build root has varnish "7.7.0-4", the gateway root "7.7.0-3"`},
		{"library off the pin", pkgs("varnish", "7.7.0-3", "libvarnishapi3", "7.7.0-4"), pkgs("varnish", "7.7.0-3"), "", "libvarnishapi3 7.7.0-4 is in the image's roots, but scripts/varnish77-packages.txt pins 7.7.0-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkVarnish(tc.image, tc.build, pins)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// The roots are built without apt in them, with the dpkg excludes, the
// build-time dpkg speed-up removed again, and nothing of the build machine.
func TestMmdebstrapArgs(t *testing.T) {
	args := mmdebstrapArgs(rootSpec{name: "x", include: []string{"varnish=7.7", "make"}, customize: []string{"echo hi"}},
		DefaultArchive(), "/r/image/dpkg-excludes.cfg", "/c/debs", "/c/roots/x")
	for _, want := range []string{
		"--variant=essential", "--mode=root", "--format=directory", "--include=varnish=7.7,make",
		"--dpkgopt=/r/image/dpkg-excludes.cfg", "--customize-hook=echo hi",
		`--customize-hook=rm -f "$1"/etc/resolv.conf "$1"/etc/hostname "$1"/etc/dpkg/dpkg.cfg.d/00varnishgw-build`,
	} {
		if !slices.Contains(args, want) {
			t.Errorf("mmdebstrap arguments lack %q: %q", want, args)
		}
	}
	tail := args[len(args)-5:]
	if tail[0] != "trixie" || tail[1] != "/c/roots/x" || !strings.Contains(tail[4], "-security main") {
		t.Errorf("suite, target and sources: %q", tail)
	}
}
