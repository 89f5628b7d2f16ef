#!/usr/bin/env bash
# release.sh: the provider's release with GoReleaser (.goreleaser.yml), built
# into dist/ by bin/goreleaser (make setup builds it from tools/goreleaser).
#
#   scripts/release.sh check   goreleaser check, then a snapshot release build
#                              without publishing or signing, and a check of
#                              the archives and SHA256SUMS it made (make
#                              release-check, in CI). Only linux/amd64 is
#                              built unless VARNISHGW_RELEASE_TARGETS=all.
#   scripts/release.sh         the release of the tag at HEAD: every platform,
#                              published as a draft (GITHUB_TOKEN); SHA256SUMS
#                              is signed with the GPG key GPG_FINGERPRINT
#                              names, or not signed (said) when it is empty.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
goreleaser=bin/goreleaser
[ -x "$goreleaser" ] || { echo "release: $goreleaser is missing: run make setup" >&2; exit 1; }

if [ "${1:-}" != check ]; then
	skip=()
	if [ -z "${GPG_FINGERPRINT:-}" ]; then
		echo "release: GPG_FINGERPRINT is empty: SHA256SUMS is not signed (the Terraform Registry needs the signature)" >&2
		skip=(--skip=sign)
	fi
	exec "$goreleaser" release --clean "${skip[@]}"
fi

"$goreleaser" check
export VARNISHGW_RELEASE_TARGETS=${VARNISHGW_RELEASE_TARGETS:-host}
"$goreleaser" release --snapshot --clean --skip=publish,sign

# The archives as the Terraform Registry reads them.
name=terraform-provider-varnishgw
sums=$(ls dist/${name}_*_SHA256SUMS)
version=${sums#dist/${name}_}
version=${version%_SHA256SUMS}
fail() { echo "release-check: $*" >&2; exit 1; }
zips=(dist/${name}_"${version}"_*.zip)
[ -e "${zips[0]}" ] || fail "no archives dist/${name}_${version}_OS_ARCH.zip"
for zip in "${zips[@]}"; do
	platform=${zip#dist/${name}_"${version}"_}
	platform=${platform%.zip}
	exe=${name}_v${version}
	case $platform in windows_*) exe+=.exe ;; esac
	unzip -Z1 "$zip" | grep -qx "$exe" || fail "$zip does not hold $exe: $(unzip -Z1 "$zip" | tr '\n' ' ')"
	(cd dist && grep -q "  ${zip#dist/}\$" "${sums#dist/}") || fail "$sums does not list $zip"
done
(cd dist && sha256sum --check --ignore-missing --quiet "${sums#dist/}") || fail "$sums does not match the archives"
manifest_sum=$(sha256sum terraform-registry-manifest.json | cut -d' ' -f1)
grep -qx "$manifest_sum  ${name}_${version}_manifest.json" "$sums" ||
	fail "$sums does not list terraform-registry-manifest.json as ${name}_${version}_manifest.json"
# The host's binary is a Go program for this platform with the version stamped in.
host_zip=dist/${name}_${version}_$(go env GOOS)_$(go env GOARCH).zip
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unzip -q "$host_zip" -d "$tmp"
bin=$tmp/${name}_v${version}
go version -m "$bin" | grep -q "path[[:space:]]*github.com/varnishgw/terraform-provider-varnishgw$" ||
	fail "the binary in $host_zip is not the provider's main package"
grep -qaF "$version" "$bin" || fail "the binary in $host_zip does not carry its version $version (internal/version.Version)"
echo "release-check: ${#zips[@]} archive(s) of version $version, SHA256SUMS and the manifest are correct (dist/)"
