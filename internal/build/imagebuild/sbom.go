package imagebuild

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/package-url/packageurl-go"
)

// sbom is a CycloneDX (JSON) bill of materials of an image: its Debian
// packages (pkg:deb purls), ghost, and each Go binary with the modules
// compiled into it (from the binary's build information). binaries maps
// the path in the image to the file on disk.
func (b *builder) sbom(name string, pkgs []Package, binaries map[string]string, varnish string) ([]byte, error) {
	repo, tag, _ := strings.Cut(name, ":")
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: b.src.Time.UTC().Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "varnishgw imagebuild", Version: b.src.Version,
		}}},
		Component: &cdx.Component{
			BOMRef: "image", Type: cdx.ComponentTypeContainer, Name: repo, Version: tag,
			Properties: &[]cdx.Property{{Name: "org.opencontainers.image.revision", Value: b.src.Revision}},
		},
	}
	var comps []cdx.Component
	for _, p := range pkgs {
		q := map[string]string{"arch": p.Architecture, "distro": "debian-13"}
		if p.Source != "" && p.Source != p.Name {
			q["upstream"] = p.Source
		}
		purl := packageurl.NewPackageURL(packageurl.TypeDebian, "debian", p.Name, p.Version,
			packageurl.QualifiersFromMap(q), "").ToString()
		comps = append(comps, cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: p.Name, Version: p.Version, PackageURL: purl})
	}
	if varnish != "" {
		comps = append(comps, cdx.Component{
			BOMRef: "ghost", Type: cdx.ComponentTypeLibrary, Name: "ghost", Version: b.src.Version,
			Description: "varnishgw's VMOD, built from this repository against libvarnishapi-dev " + varnish,
			Properties:  &[]cdx.Property{{Name: "path", Value: GhostPath}},
		})
	}
	paths := make([]string, 0, len(binaries))
	for p := range binaries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		bi, err := buildinfo.ReadFile(binaries[p])
		if err != nil {
			return nil, fmt.Errorf("build information of %s: %w", binaries[p], err)
		}
		var mods []cdx.Component
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			purl := packageurl.NewPackageURL(packageurl.TypeGolang, path.Dir(d.Path), path.Base(d.Path), d.Version, nil, "").ToString()
			mods = append(mods, cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: d.Version, PackageURL: purl})
		}
		sort.Slice(mods, func(i, j int) bool { return mods[i].BOMRef < mods[j].BOMRef })
		props := []cdx.Property{{Name: "path", Value: p}, {Name: "go", Value: bi.GoVersion}}
		for _, s := range bi.Settings {
			if strings.HasPrefix(s.Key, "vcs.") || s.Key == "CGO_ENABLED" || s.Key == "-trimpath" {
				props = append(props, cdx.Property{Name: s.Key, Value: s.Value})
			}
		}
		comps = append(comps, cdx.Component{
			BOMRef: "bin:" + p, Type: cdx.ComponentTypeApplication, Name: path.Base(p), Version: b.src.Version,
			Description: "Go binary built from " + bi.Path, Properties: &props, Components: &mods,
		})
	}
	bom.Components = &comps
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		return nil, fmt.Errorf("encode the SBOM of %s: %w", name, err)
	}
	return buf.Bytes(), nil
}
