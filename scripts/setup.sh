#!/usr/bin/env bash
# setup.sh: make this machine able to build and test varnishgw. Idempotent.
#
#   1. Debian packages: scripts/debian-packages.txt and every other
#      debian-packages.txt in the tree (apt-get, as root).
#   2. kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#      kube-proxy and kubectl, built with one `go build` from the k8s.io/kubernetes module
#      (tools/kubernetes) and cached in $VARNISHGW_CACHE (default
#      ~/.cache/varnishgw), and the test node's pause image, built from the
#      module's build/pause/linux/pause.c.
#   3. A Terraform CLI: terraform or tofu from PATH; when neither is there (or when
#      VARNISHGW_TOFU=1), OpenTofu built from its module (tools/tofu) into bin/.
#      With VARNISHGW_TERRAFORM_NEW=1 also Terraform 1.14 (terraform_new_version),
#      built from its module (cached), for the resource identity and terraform query
#      tests (make testacc-identity); the rest of the suite keeps the CLI above.
#   3c. GoReleaser, golangci-lint and h2spec, built from their modules
#      (tools/goreleaser, tools/golangci-lint, tools/h2spec) into the cache once
#      per version, linked into bin/.
#   4. The Gateway API CRDs: located in the module cache at the version in go.mod.
#   5. Varnish 7.7 from Debian 13, the gateway image's, unpacked beside this machine's
#      7.1 by scripts/varnish77.sh (cached; see there) for ghost's and the Go tests'
#      second run.
#
# It writes bin/tools.env (KEY=value lines), which the GNUmakefile exports to
# tests and the tests read themselves (internal/testing/toolsenv); it names
# bin/images too, where make image writes the images.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${VARNISHGW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/varnishgw}
mkdir -p "$cache" bin

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# 1. Debian packages.
mapfile -t wanted < <(git ls-files -co --exclude-standard -- '*debian-packages.txt' 2>/dev/null \
	| xargs -r cat | sed -e 's/#.*//' -e 's/[[:space:]]//g' | grep -v '^$' | sort -u)
missing=()
for p in "${wanted[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		die "missing Debian packages: ${missing[*]}. Run as root: sudo sh -c '$cmd'"
	fi
	log "installing Debian packages: ${missing[*]}"
	sh -c "$cmd" >"$cache/apt.log" 2>&1 || { tail -n 20 "$cache/apt.log" >&2; die "apt-get failed (full log: $cache/apt.log)"; }
fi

command -v go >/dev/null || die "go not found on PATH; install Go 1.26 (https://go.dev/dl) and retry"

# 2. The Kubernetes binaries and the pause image. One build at a time per
# cache (flock): a second setup waits for the first instead of building
# again.
kube_version=$(go list -C tools/kubernetes -m -f '{{.Version}}' k8s.io/kubernetes)
kube_time=$(go list -C tools/kubernetes -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
kube_dir="$cache/kubernetes-$kube_version"
kube_bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
exec 9>"$cache/kubernetes.lock"
flock 9
kube_missing=0
for b in "${kube_bins[@]}"; do [ -x "$kube_dir/$b" ] || kube_missing=1; done
if [ "$kube_missing" = 1 ]; then
	log "building ${kube_bins[*]} $kube_version (first time only: 5 to 15 minutes on 2 cores)"
	# Honest versions (`kubelet --version`, the Node's kubeletVersion, /version),
	# as the release build sets them; the build date is the release's.
	major_minor=${kube_version#v}
	ldflags=""
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=${major_minor%%.*}"
		ldflags+=" -X $pkg.gitMinor=$(echo "$major_minor" | cut -d. -f2) -X $pkg.buildDate=$kube_time"
	done
	rm -rf "$kube_dir.tmp"
	mkdir -p "$kube_dir.tmp"
	start=$(date +%s)
	go build -C tools/kubernetes -ldflags "$ldflags" -o "$kube_dir.tmp/" \
		$(printf 'k8s.io/kubernetes/cmd/%s ' "${kube_bins[@]}")
	rm -rf "$kube_dir"
	mv "$kube_dir.tmp" "$kube_dir"
	log "built in $(( $(date +%s) - start )) s"
fi
go mod download -C tools/kubernetes k8s.io/kubernetes
kube_src=$(go list -C tools/kubernetes -m -f '{{.Dir}}' k8s.io/kubernetes)
pause_tag=$(sed -n 's/^TAG ?= *//p' "$kube_src/build/pause/Makefile")
pause_image="$cache/pause-$pause_tag-$kube_version.tar"
if [ ! -f "$pause_image" ]; then
	log "building the pause image $pause_tag from $kube_src/build/pause/linux/pause.c"
	tmp=$(mktemp -d)
	gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-$kube_version" -o "$tmp/pause" "$kube_src/build/pause/linux/pause.c"
	go run ./internal/testing/testenv/cmd/pauseimage -binary "$tmp/pause" -name "localhost/varnishgw/pause:$pause_tag" \
		-created "$kube_time" -version "$kube_version" -o "$pause_image" >&2
	rm -rf "$tmp"
fi
exec 9>&-

# 3. Terraform CLI.
tofu_version=$(go list -C tools/tofu -m -f '{{.Version}}' github.com/opentofu/opentofu)
terraform_new_version=v1.14.8
build_tofu() {
	local out="$cache/tofu-$tofu_version"
	if [ ! -x "$out" ]; then
		log "building OpenTofu $tofu_version (first time only: a few minutes)"
		go build -C tools/tofu -o "$out.tmp" github.com/opentofu/opentofu/cmd/tofu
		mv "$out.tmp" "$out"
	fi
	ln -sf "$out" bin/tofu
}
tofu_path=""
if [ "${VARNISHGW_TOFU:-0}" = 1 ]; then
	build_tofu
	tofu_path="$root/bin/tofu"
fi
terraform_path=$(command -v terraform || command -v tofu || true)
if [ -z "$terraform_path" ]; then
	[ -n "$tofu_path" ] || { build_tofu; tofu_path="$root/bin/tofu"; }
	terraform_path=$tofu_path
fi

# 3b. Terraform 1.14 (resource identity needs 1.12, terraform query 1.14),
# built from the github.com/hashicorp/terraform module. The module's go.mod
# replaces ten modules nested in its tree with their directories, which a
# module zip leaves out and which are not published on their own: the build
# drops those requirements and the remote state backends that import them
# (azurerm, consul, cos, gcs, kubernetes, oci, oss, pg, s3), so this CLI has
# the local, http, inmem, remote and cloud backends only. The tests use the
# local one.
build_terraform_new() {
	local out="$cache/terraform-$terraform_new_version"
	[ -x "$out" ] && return
	log "building Terraform $terraform_new_version without its nested-module backends (first time only: 5 to 15 minutes on 2 cores)"
	local dir tmp start
	tmp=$(mktemp -d)
	# Outside this module, so that its go.sum stays as it is.
	dir=$(cd "$tmp" && go mod download -json "github.com/hashicorp/terraform@$terraform_new_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] || die "go mod download github.com/hashicorp/terraform@$terraform_new_version gave no directory"
	cp -r "$dir/." "$tmp"
	chmod -R u+w "$tmp"
	local mod rel file alias
	file="$tmp/internal/backend/init/init.go"
	while read -r mod rel; do
		[ -d "$tmp/$rel" ] && continue
		go mod edit -C "$tmp" -dropreplace="$mod" -droprequire="$mod"
		alias=$(sed -n "s|^[[:space:]]*\([A-Za-z0-9_]*\) \"$mod\"\$|\1|p" "$file")
		if [ -n "$alias" ]; then
			sed -i -e "\|\"$mod\"\$|d" -e "/[[:space:]]$alias\./d" "$file"
		fi
	done < <(go mod edit -C "$tmp" -json | sed -n 's/.*"Path": "\(github.com\/hashicorp\/terraform\/[^"]*\)".*/\1/p' | sort -u |
		while read -r m; do echo "$m ${m#github.com/hashicorp/terraform/}"; done)
	start=$(date +%s)
	# dev=no: the release's version, v1.14.8, not v1.14.8-dev.
	if ! go build -C "$tmp" -trimpath -ldflags "-X github.com/hashicorp/terraform/version.dev=no" -o "$out.tmp" . \
		>"$cache/terraform-new.log" 2>&1; then
		tail -n 20 "$cache/terraform-new.log" >&2
		rm -rf "$tmp" "$out.tmp"
		die "building Terraform $terraform_new_version failed (full log: $cache/terraform-new.log); unset VARNISHGW_TERRAFORM_NEW to go on without it"
	fi
	rm -rf "$tmp"
	mv "$out.tmp" "$out"
	log "built Terraform $terraform_new_version in $(( $(date +%s) - start )) s"
}
terraform_new_path=""
if [ "${VARNISHGW_TERRAFORM_NEW:-0}" = 1 ]; then
	build_terraform_new
	terraform_new_path="$cache/terraform-$terraform_new_version"
fi

# 3c. The release, lint and test tools, each built once per version from its
# module in tools/ (pinned there) into the cache, and linked into bin/:
# GoReleaser for make release-check and make release, golangci-lint for make
# lint, h2spec for the HTTP/2 conformance test (internal/mainvcl).
build_tool() { # build_tool NAME MODULE PACKAGE
	local name=$1 module=$2 pkg=$3 version out
	version=$(go list -C "tools/$name" -m -f '{{.Version}}' "$module")
	out="$cache/$name-$version"
	if [ ! -x "$out" ]; then
		log "building $name $version (first time only: a few minutes)"
		go build -C "tools/$name" -o "$out.tmp" "$pkg"
		mv "$out.tmp" "$out"
	fi
	ln -sf "$out" "bin/$name"
}
build_tool goreleaser github.com/goreleaser/goreleaser/v2 github.com/goreleaser/goreleaser/v2
build_tool golangci-lint github.com/golangci/golangci-lint/v2 github.com/golangci/golangci-lint/v2/cmd/golangci-lint
build_tool h2spec github.com/summerwind/h2spec github.com/summerwind/h2spec/cmd/h2spec

# 4. Gateway API CRDs from the module cache (never copied into the repository).
go mod download sigs.k8s.io/gateway-api
gwapi_dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)
crds="$gwapi_dir/config/crd/standard"
ls "$crds"/*.yaml >/dev/null 2>&1 || die "no Gateway API CRDs in $crds"

etcd_path=$(command -v etcd || true)
[ -n "$etcd_path" ] || die "etcd not found after installing etcd-server"

# 5. Varnish 7.7 (Debian 13) beside the machine's 7.1.
varnish77=$("$root/scripts/varnish77.sh") || die "Varnish 7.7 from Debian 13: scripts/varnish77.sh failed (above)"

cat >bin/tools.env <<ENV
VARNISHGW_KUBE_APISERVER=$kube_dir/kube-apiserver
VARNISHGW_KUBE_BIN_DIR=$kube_dir
VARNISHGW_PAUSE_IMAGE=$pause_image
VARNISHGW_ETCD=$etcd_path
VARNISHGW_GATEWAY_API_CRDS=$crds
VARNISHGW_TERRAFORM=$terraform_path
VARNISHGW_TOFU_PATH=$tofu_path
VARNISHGW_TERRAFORM_NEW_PATH=$terraform_new_path
TF_ACC_TERRAFORM_PATH=$terraform_path
VARNISHGW_VARNISH77_BIN=$varnish77/bin
VARNISHGW_VARNISH77_ROOT=$varnish77/root
VARNISHGW_IMAGES=$root/bin/images
VARNISHGW_H2SPEC=$root/bin/h2spec
ENV
log "ready: kube-apiserver $kube_version, $("$etcd_path" --version | head -n1), $("$terraform_path" version 2>/dev/null | head -n1) and Varnish 7.7 in $varnish77"
