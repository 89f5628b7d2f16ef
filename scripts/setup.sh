#!/usr/bin/env bash
# setup.sh: make this machine able to build and test varnishgw. Idempotent.
#
#   1. Debian packages: scripts/debian-packages.txt and every other
#      debian-packages.txt in the tree (apt-get, as root).
#   2. kube-apiserver, built from the k8s.io/kubernetes module (tools/kube-apiserver)
#      and cached in $VARNISHGW_CACHE (default ~/.cache/varnishgw).
#   3. A Terraform CLI: terraform or tofu from PATH; when neither is there (or when
#      VARNISHGW_TOFU=1), OpenTofu built from its module (tools/tofu) into bin/.
#   4. The Gateway API CRDs: located in the module cache at the version in go.mod.
#   5. Varnish 7.7 from Debian 13, the gateway image's, unpacked beside this machine's
#      7.1 by scripts/varnish77.sh (cached; see there) for ghost's and the Go tests'
#      second run.
#
# It writes bin/tools.env (KEY=value lines) that the GNUmakefile exports to tests.
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

# 2. kube-apiserver.
kube_version=$(go list -C tools/kube-apiserver -m -f '{{.Version}}' k8s.io/kubernetes)
kube_apiserver="$cache/kube-apiserver-$kube_version"
if [ ! -x "$kube_apiserver" ]; then
	log "building kube-apiserver $kube_version (first time only: about 7 minutes on 2 cores)"
	go build -C tools/kube-apiserver -o "$kube_apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
	mv "$kube_apiserver.tmp" "$kube_apiserver"
fi

# 3. Terraform CLI.
tofu_version=$(go list -C tools/tofu -m -f '{{.Version}}' github.com/opentofu/opentofu)
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
VARNISHGW_KUBE_APISERVER=$kube_apiserver
VARNISHGW_ETCD=$etcd_path
VARNISHGW_GATEWAY_API_CRDS=$crds
VARNISHGW_TERRAFORM=$terraform_path
VARNISHGW_TOFU_PATH=$tofu_path
TF_ACC_TERRAFORM_PATH=$terraform_path
VARNISHGW_VARNISH77_BIN=$varnish77/bin
VARNISHGW_VARNISH77_ROOT=$varnish77/root
ENV
log "ready: kube-apiserver $kube_version, $("$etcd_path" --version | head -n1), $("$terraform_path" version 2>/dev/null | head -n1) and Varnish 7.7 in $varnish77"
