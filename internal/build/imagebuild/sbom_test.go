package imagebuild

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func TestSBOM(t *testing.T) {
	b := &builder{src: Source{Revision: "abc", Version: "v0.0.0-x", Time: time.Unix(1700000000, 0)}}
	// A binary with modules in its build information (test binaries have none).
	self := filepath.Join(t.TempDir(), "image")
	if out, err := exec.Command("go", "build", "-o", self, "./cmd/image").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pkgs := []Package{
		{Name: "libvarnishapi3", Version: "7.7.0-3+deb13u2", Architecture: "amd64", Source: "varnish"},
		{Name: "varnish", Version: "7.7.0-3+deb13u2", Architecture: "amd64", Source: "varnish"},
	}
	data, err := b.sbom("localhost/varnishgw/gateway:v0.0.0-x", pkgs, map[string]string{ChaperonePath: self}, "7.7.0-3+deb13u2")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := b.sbom("localhost/varnishgw/gateway:v0.0.0-x", pkgs, map[string]string{ChaperonePath: self}, "7.7.0-3+deb13u2")
	if !bytes.Equal(data, again) {
		t.Error("two SBOMs of the same inputs differ")
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if bom.Metadata.Timestamp != "2023-11-14T22:13:20Z" || bom.Metadata.Component.Name != "localhost/varnishgw/gateway" || bom.Metadata.Component.Version != "v0.0.0-x" {
		t.Errorf("metadata %+v %+v", bom.Metadata, bom.Metadata.Component)
	}
	purls := map[string]bool{}
	var bin *cdx.Component
	for i, c := range *bom.Components {
		purls[c.PackageURL] = true
		if c.Name == "chaperone" {
			bin = &(*bom.Components)[i]
		}
	}
	for _, want := range []string{
		"pkg:deb/debian/varnish@7.7.0-3%2Bdeb13u2?arch=amd64&distro=debian-13",
		"pkg:deb/debian/libvarnishapi3@7.7.0-3%2Bdeb13u2?arch=amd64&distro=debian-13&upstream=varnish",
	} {
		if !purls[want] {
			t.Errorf("no component %s in %v", want, purls)
		}
	}
	if bin == nil || bin.Components == nil || len(*bin.Components) == 0 {
		t.Fatalf("no chaperone component with its Go modules: %+v", bin)
	}
	if !strings.HasPrefix((*bin.Components)[0].PackageURL, "pkg:golang/") {
		t.Errorf("module purl %q", (*bin.Components)[0].PackageURL)
	}
}
