#!/usr/bin/env bash
# varnish77.sh: Varnish 7.7 from Debian 13 (trixie), the Varnish of the gateway
# image, runnable on this Debian 12 machine without a chroot. Idempotent; called
# by scripts/setup.sh. Prints the installation directory D:
#
#   D/root          the packages of scripts/varnish77-packages.txt, unpacked with
#                   dpkg -x (binaries, libraries, vmods, headers, vmodtool.py,
#                   vsctool.py and varnishapi.pc for building ghost)
#   D/bin           varnishd, varnishadm, varnishstat, varnishtest, varnishlog, ...:
#                   wrappers that run the trixie binaries through trixie's own
#                   loader with trixie's libraries (the binaries need glibc 2.38;
#                   Debian 12 has 2.36)
#   D/loader        symlinks to that loader named like the programs
#   D/packages.txt  the package versions in D/root
#
# The packages come from the Debian archive through a private apt configuration
# (APT_CONFIG: its own sources list, lists, cache, status and no apt.conf.d), so
# the machine's apt setup and state are never read or changed. Release files are
# verified with /usr/share/keyrings/debian-archive-keyring.gpg, which on Debian 12
# holds the trixie keys.
#
# D is <dir>/varnish-<version>-<hash of the package list and this script>, <dir> being
# $VARNISHGW_CACHE/varnish77 (default ~/.cache/varnishgw/varnish77). varnishd
# started as root runs its VCL compiler and cache process as the users varnish
# and vcache, which must read D/root: when they cannot reach the tool cache (root's
# home is private) <dir> is /var/cache/varnishgw/varnish77 instead.
# VARNISHGW_VARNISH77_DIR sets <dir>; VARNISHGW_DEBIAN_MIRROR and
# VARNISHGW_DEBIAN_SECURITY_MIRROR the archive (http_proxy is honoured).
set -euo pipefail
umask 022 # the jail users read the tree

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
list=$root/scripts/varnish77-packages.txt
cache=${VARNISHGW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/varnishgw}
mirror=${VARNISHGW_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${VARNISHGW_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
suite=trixie

log() { printf 'varnish77: %s\n' "$*" >&2; }
die() { printf 'varnish77: error: %s\n' "$*" >&2; exit 1; }

arch=$(dpkg --print-architecture)
[ "$arch" = amd64 ] || die "only amd64 is supported (this machine is $arch): the wrappers use x86_64-linux-gnu/ld-linux-x86-64.so.2"
triplet=x86_64-linux-gnu
loader=ld-linux-x86-64.so.2

# The package list: name, version, exact.
names=() versions=() exacts=()
while read -r name version flag rest; do
	[ -n "$name" ] || continue
	[ -n "$version" ] && [ -z "$rest" ] && { [ -z "$flag" ] || [ "$flag" = exact ]; } ||
		die "$list: bad line \"$name $version $flag $rest\": want \"package version [exact]\""
	names+=("$name") versions+=("$version") exacts+=("$flag")
done < <(sed -e 's/#.*//' "$list")
varnish_version=
for i in "${!names[@]}"; do
	[ "${names[$i]}" = varnish ] && varnish_version=${versions[$i]}
done
[ -n "$varnish_version" ] || die "$list names no varnish package"

# Where: a directory the varnishd jail users can read when varnishd runs as root.
reachable_by_others() {
	local d=$1
	while [ "$d" != / ]; do
		if [ -e "$d" ]; then
			[ "$(( $(stat -L -c '%#a' "$d") & 01 ))" -eq 1 ] || return 1
		fi
		d=$(dirname "$d")
	done
}
parent=${VARNISHGW_VARNISH77_DIR:-}
if [ -z "$parent" ]; then
	parent=$cache/varnish77
	if [ "$(id -u)" -eq 0 ] && ! reachable_by_others "$parent"; then
		parent=/var/cache/varnishgw/varnish77
	fi
fi
key=varnish-$varnish_version-$(cat "$list" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
dest=$parent/$key
if [ -f "$dest/ok" ]; then
	echo "$dest"
	exit 0
fi

mkdir -p "$parent"
exec 9>"$parent/.lock"
flock 9
if [ -f "$dest/ok" ]; then # another setup made it while this one waited
	echo "$dest"
	exit 0
fi
rm -rf "$dest"
work=$(mktemp -d "$parent/.$key.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

# A private apt: nothing of /etc/apt (apt.conf.d hooks included) and no machine state.
a=$work/apt
mkdir -p "$a/conf.d" "$a/sources.list.d" "$a/preferences.d" "$a/trusted.gpg.d" \
	"$a/state/lists/partial" "$a/cache/archives/partial" "$a/log" "$work/debs"
: >"$a/status"
cat >"$a/sources.list" <<EOF
deb [signed-by=$keyring] $mirror $suite main
deb [signed-by=$keyring] $mirror $suite-updates main
deb [signed-by=$keyring] $security $suite-security main
EOF
cat >"$a/apt.conf" <<EOF
Dir::Etc::main "/dev/null";
Dir::Etc::parts "$a/conf.d";
Dir::Etc::sourcelist "$a/sources.list";
Dir::Etc::sourceparts "$a/sources.list.d";
Dir::Etc::preferences "$a/preferences";
Dir::Etc::preferencesparts "$a/preferences.d";
Dir::Etc::trusted "$a/trusted.gpg";
Dir::Etc::trustedparts "$a/trusted.gpg.d";
Dir::State "$a/state";
Dir::State::lists "$a/state/lists";
Dir::State::status "$a/status";
Dir::Cache "$a/cache";
Dir::Log "$a/log";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
APT::Sandbox::User "$(id -un)";
Acquire::Languages "none";
Acquire::AllowInsecureRepositories "false";
EOF
export APT_CONFIG=$a/apt.conf
[ -f "$keyring" ] || die "$keyring not found: install debian-archive-keyring"
log "downloading the Debian $suite package lists ($mirror, $security)"
apt-get -q update >"$work/apt.log" 2>&1 || {
	tail -n 20 "$work/apt.log" >&2
	die "apt-get update of the private $suite sources failed (see above; is $mirror reachable, does $keyring hold the $suite keys?)"
}
if grep -E '^(W|E):' "$work/apt.log" >&2; then
	die "apt-get update of the private $suite sources warned (above): refusing packages that may be unverified"
fi

# Versions: exact ones must be there; the others may have moved on.
want=()
for i in "${!names[@]}"; do
	n=${names[$i]} v=${versions[$i]}
	avail=$(apt-cache madison "$n" | awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -u)
	[ -n "$avail" ] || die "package $n is not in Debian $suite: fix $list"
	if ! grep -qxF -- "$v" <<<"$avail"; then
		if [ "${exacts[$i]}" = exact ]; then
			die "Debian $suite no longer has $n $v (it has: $(echo $avail)). The archive changed: \
update $n and the other Varnish packages in $list to the new version, then run make setup and \
make test (ghost is built for this exact Varnish, and the gateway image must ship the same one)"
		fi
		cand=$(apt-cache policy "$n" | sed -n 's/^ *Candidate: //p')
		log "warning: Debian $suite has $n $cand, not $v as listed in $list: using $cand (update the list)"
		v=$cand
	fi
	want+=("$n=$v")
done

log "downloading ${want[*]}"
(cd "$work/debs" && apt-get -q download "${want[@]}") >>"$work/apt.log" 2>&1 || {
	tail -n 20 "$work/apt.log" >&2
	die "apt-get download failed (see above)"
}
mkdir -p "$work/root" "$work/bin"
for deb in "$work"/debs/*.deb; do
	dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >>"$work/packages.txt"
	dpkg -x "$deb" "$work/root"
done
sort -o "$work/packages.txt" "$work/packages.txt"
rm -rf "$a" "$work/debs"

# Wrappers. Each runs trixie's loader through a symlink named like the program
# (D/loader/varnishd -> ld-linux-x86-64.so.2), so the process is called varnishd
# (/proc/PID/comm, ps, pgrep), not ld-linux-x86-64. varnishd and varnishtest get
# trixie's vmod directory (their built-in default is the Debian 12 package's),
# before the caller's own -p.
mkdir -p "$work/loader"
for path in "$work"/root/usr/sbin/varnish* "$work"/root/usr/bin/varnish*; do
	name=$(basename "$path")
	rel=${path#"$work"/root/}
	ln -s "../root/usr/lib/$triplet/$loader" "$work/loader/$name"
	case $name in
	varnishd) extra=' -p "vmod_path=$lib/varnish/vmods" -p "vcl_path=$r/etc/varnish:$r/usr/share/varnish/vcl"' ;;
	varnishtest) extra=' -p "vmod_path=$lib/varnish/vmods"' ;;
	*) extra= ;;
	esac
	run="\"\$d/loader/$name\" --library-path \"\$lib\" \"\$r/$rel\""
	{
		printf '#!/bin/sh\n'
		printf '# %s from Debian %s (%s), run by its own loader and libraries.\n' "$name" "$suite" "$varnish_version"
		printf '# Made by scripts/varnish77.sh.\n'
		printf 'd=%q\n' "$dest"
		printf 'r=$d/root\n'
		printf 'lib=$r/usr/lib/%s\n' "$triplet"
		if [ -n "$extra" ]; then
			printf 'case "$1" in -V|-x|-\\?) exec %s "$@" ;; esac # these must come first\n' "$run"
		fi
		printf 'exec %s%s "$@"\n' "$run" "$extra"
	} >"$work/bin/$name"
	chmod 755 "$work/bin/$name"
done

# Every library the binaries and ghost need must come from the tree: one missing
# from the list would otherwise be taken from Debian 12 without a word.
wlib=$work/root/usr/lib/$triplet
for f in "$work"/root/usr/sbin/varnish* "$work"/root/usr/bin/varnish* "$wlib"/libjansson.so.4 "$wlib"/varnish/vmods/*.so; do
	out=$("$wlib/$loader" --library-path "$wlib" --list "$f" 2>&1) || die "$f: $out"
	bad=$(grep -v -e '=> '"$work/root/" -e '^[[:space:]]*linux-vdso' -e '^[[:space:]]*statically linked$' -e "^[[:space:]]*$wlib/$loader" <<<"$out" || true)
	[ -z "$bad" ] || die "$f needs libraries that are not in $list: $bad"
done

mv "$work" "$dest"
trap - EXIT
if ! version=$("$dest/bin/varnishd" -V 2>&1) || ! grep -q "varnish-${varnish_version%%-*} " <<<"$version"; then
	rm -rf "$dest"
	die "the unpacked varnishd does not run: $version"
fi
touch "$dest/ok"
log "ready: $(head -n1 <<<"$version") in $dest"
echo "$dest"
