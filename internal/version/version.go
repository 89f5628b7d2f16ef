// Package version is the one place the varnishgw binaries (the provider and
// the chaperone) get the version they report.
//
// Release builds set Version with the linker:
//
//	-ldflags "-X github.com/varnishgw/terraform-provider-varnishgw/internal/version.Version=v0.1.0"
//
// goreleaser does so for the provider, and the image build for the
// chaperone, with the same git description the image is tagged with. A plain
// `go build` leaves it empty, and String reports what Go stamped from git
// instead.
package version

import "runtime/debug"

// Version is the release version, set by the linker; empty in a plain build.
var Version string

// String is Version, or else the main module's version that the Go
// toolchain derived from the git tags (a pseudo-version between releases),
// or "dev" when the build has no version control information.
func String() string {
	if Version != "" {
		return Version
	}
	return fromBuildInfo(debug.ReadBuildInfo())
}

// fromBuildInfo is the main module's version in bi, or "dev".
func fromBuildInfo(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "dev"
	}
	return bi.Main.Version
}
