#!/bin/bash
# Reload benchmark: the reload time of the 10,000-route / 1,000-vhost file
# of bench.sh, for one or more builds of the VMOD in the same run (rounds
# alternate between the builds, so a busy machine affects them alike).
# For each build: one varnishd, the router starts with 10 routes, then
# the first reload to 10,000 routes and RELOADS further reloads, one
# every 0.2 s. Prints duration_ms of every answer and the child's RSS.
# Usage: reload.sh GHOSTDIR [LIBVMOD_GHOST.SO ...]   (default: GHOSTDIR's)
# Environment: RELOADS, ROUNDS; GEN, more gen.py arguments
# for the 10,000-route file (e.g. "--services 20 --endpoints 20": routes
# spread over 20 backends of 20 endpoints).
set -eu
GHOST=$1; shift
SOS=("$@")
[ ${#SOS[@]} -gt 0 ] || SOS=("$GHOST/libvmod_ghost.so")
RELOADS=${RELOADS:-20}
ROUNDS=${ROUNDS:-2}
W=$(mktemp -d /tmp/ghost-reload.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	rm -rf "$W"
}
trap cleanup EXIT
adm() { varnishadm -t 300 -n "$W/$1" "${@:2}"; }

# the endpoint needs no server: reloads create backends, never connect
python3 "$GHOST/bench/gen.py" --vhosts 1 --routes 10 \
    --backend 127.0.0.1:9 > "$W/small.json"
# shellcheck disable=SC2086
python3 "$GHOST/bench/gen.py" --vhosts 1000 --routes 10 \
    --backend 127.0.0.1:9 ${GEN:-} > "$W/big.json"

run() {	# index of the build, round
	local i=$1 n=v$1r$2 so=${SOS[$1]} aport child r
	cp "$W/small.json" "$W/$n.json"
	cat > "$W/$n.vcl" <<V
vcl 4.1;
import ghost from "$so";
backend default none;
sub vcl_init { new router = ghost.router("$W/$n.json", admin_socket = "ghost-admin"); }
sub vcl_recv {
	if (router.recv()) { return (pass); }
	return (synth(router.status()));
}
sub vcl_synth { router.synth(); return (deliver); }
V
	varnishd -j none -n "$W/$n" -P "$W/$n.pid" -f "$W/$n.vcl" \
	    -p thread_pool_min=50 -p vsl_space=8M -p vsl_mask=+Debug \
	    -a http=127.0.0.1:0 \
	    -a ghost-admin=127.0.0.1:0 > "$W/$n.log" 2>&1
	PIDS+=("$(cat "$W/$n.pid")")
	sleep 1
	aport=$(adm "$n" debug.listen_address | awk '$1 == "ghost-admin" {print $3}')
	child=$(ps -o pid= --ppid "$(cat "$W/$n.pid")" | head -1 | tr -d ' ')
	cp "$W/big.json" "$W/$n.json"
	local out="" first
	first=$(curl -s -X POST "http://127.0.0.1:$aport/.varnish-ghost/reload" | grep -o '"duration_ms":[0-9.]*' | cut -d: -f2)
	for r in $(seq 1 "$RELOADS"); do
		sleep 0.2
		out="$out $(curl -s -X POST "http://127.0.0.1:$aport/.varnish-ghost/reload" | grep -o '"duration_ms":[0-9.]*' | cut -d: -f2 | cut -d. -f1)"
	done
	if [ -n "${PHASES:-}" ]; then
		varnishlog -n "$W/$n" -d -g raw -I 'Debug:^ghost: .* reload' | sed 's/^ */    /'
	fi
	local rss
	rss=$(awk '/^VmRSS/ {print $2}' "/proc/$child/status")
	local sorted max over
	sorted=$(echo $out | tr ' ' '\n' | sort -n)
	max=$(echo "$sorted" | tail -1)
	over=$(echo "$sorted" | awk '$1 >= 100' | wc -l)
	echo "build $i ($so, ghost.json $(stat -c %s "$W/big.json") bytes) round $2: first reload $first ms; reloads (ms):$out; median $(echo "$sorted" | sed -n "$(( (RELOADS + 1) / 2 ))p"), max $max, >= 100 ms: $over of $RELOADS; child RSS $rss kB; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	kill "$(cat "$W/$n.pid")"
	sleep 1
}
echo "machine: nproc=$(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), varnish $(varnishd -V 2>&1 | head -1 | grep -o '[0-9]\.[0-9]\.[0-9]'), $(date -u +%Y-%m-%dT%H:%MZ)"
for r in $(seq 1 "$ROUNDS"); do
	for i in "${!SOS[@]}"; do
		run "$i" "$r"
	done
done
