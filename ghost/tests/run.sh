#!/bin/bash
# Run VTC files with varnishtest, at most 2 at a time.
# usage: run.sh VMOD.so PRELOAD TIMEOUT file.vtc...
# Prints the failing logs, then a final line "N passed, N failed".
set -u
so=$1; preload=$2; tmo=$3; shift 3
tdir=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/ghost-test.XXXXXX)
trap 'rm -rf "$out"' EXIT
# varnishd loads the VMOD as its unprivileged user (vcache): run a copy in a
# world-readable directory, wherever the checkout is and whatever its modes.
chmod 755 "$out"
cp "$so" "$out/libvmod_ghost.so"
chmod 644 "$out/libvmod_ghost.so"
so=$out/libvmod_ghost.so
if [ -n "$preload" ]; then
	# only varnishd gets the sanitizer runtime, not the shells of the tests
	mkdir -p "$out/bin"
	cat > "$out/bin/varnishd" <<-EOF
	#!/bin/sh
	LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=\$GHOST_ASAN_LOG" exec $(command -v varnishd) "\$@"
	EOF
	chmod +x "$out/bin/varnishd"
	export PATH="$out/bin:$PATH"
fi
echo "varnishtest runs $(command -v varnishd): $(varnishd -V 2>&1 | head -n1)"
export GHOST_SO=$so GHOST_TDIR=$tdir GHOST_OUT=$out GHOST_TMO=$tmo \
    GHOST_PRELOAD=$preload
run_one() {
	local f=$1 name
	name=$(basename "$f" .vtc)
	local args=(-t "$GHOST_TMO" -b 64M -Dvmod_ghost="$GHOST_SO" -Dvmod_dir="$(dirname "$GHOST_SO")"
	    -Dghost_tests="$GHOST_TDIR" -Dvarnish_vmod_dir="${GHOST_VARNISH_VMODDIR:-}")
	if [ -n "$GHOST_PRELOAD" ]; then
		args+=(-p thread_pool_stack=1M)
		if GHOST_ASAN_LOG="$GHOST_OUT/$name.asan" \
		    varnishtest "${args[@]}" "$f" > "$GHOST_OUT/$name.log" 2>&1 &&
		    ! ls "$GHOST_OUT/$name.asan".* >/dev/null 2>&1; then
			echo "PASS $name" > "$GHOST_OUT/$name.res"
		else
			echo "FAIL $name" > "$GHOST_OUT/$name.res"
		fi
	elif varnishtest "${args[@]}" "$f" > "$GHOST_OUT/$name.log" 2>&1; then
		echo "PASS $name" > "$GHOST_OUT/$name.res"
	else
		echo "FAIL $name" > "$GHOST_OUT/$name.res"
	fi
	cat "$GHOST_OUT/$name.res"
}
export -f run_one
printf '%s\n' "$@" | xargs -P 2 -I{} bash -c 'run_one "$1"' _ {}
pass=0; fail=0
for f in "$@"; do
	name=$(basename "$f" .vtc)
	if grep -q '^PASS' "$out/$name.res" 2>/dev/null; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "---- $name failed:"
		tail -40 "$out/$name.log" 2>/dev/null
		cat "$out/$name.asan".* 2>/dev/null | head -60
	fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
