#!/bin/bash
# RequestMirror benchmark (make bench-mirror; results in docs/performance.md):
# the mirrored rate at which ghost starts dropping copies, for two builds of
# the VMOD in one run: "before" (main's ghost, built from `git show
# main:ghost`, or BENCH_BEFORE=path/libvmod_ghost.so) and "after" (this
# checkout's ghost/libvmod_ghost.so).
#
# Setup, on loopback: an origin and a mirror, each an nginx with one worker
# answering a 22-byte body from "return 200" over keep-alive; one varnishd
# per build (both started first, the one not measured idles), passing every
# request of one vhost to the origin with a RequestMirror filter (percent
# 100) to the mirror. Clients: h2load --h1 with BENCH_CONNS (10) keep-alive
# connections at a fixed rate (--rps), for each rate of BENCH_RATES
# (requests/s offered) for BENCH_DURATION s. Rounds interleave the builds
# and rates; each step reads ghost's GHOSTROUTER counters (mirrored,
# mirror_dropped) before and after (after a 1 s pause for the queue to
# drain), the achieved request rate, and varnishd's CPU time (its child,
# /proc) per request in µs.
#
# Per build the table gives, per offered rate, the medians over the rounds
# of the achieved rate, copies mirrored per second, the share of copies
# dropped and the CPU µs per request; "drops start" is the lowest offered
# rate whose median drop share is above 0.
#
# Usage: bench.sh GHOSTDIR. Environment: BENCH_RATES ("100 250 500 1000
# 2000 4000 8000"), BENCH_DURATION (s, 4), BENCH_CONNS (10), BENCH_ROUNDS (3),
# BENCH_BEFORE (a libvmod_ghost.so for "before"; default: built from
# main), BENCH_MAIN_REPO (the git repository whose main branch is "before";
# default: the checkout's own), BENCH_KEEP (keep the work directory).
set -eu
GHOST=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
REPO=${BENCH_MAIN_REPO:-$(git -C "$GHOST" rev-parse --show-toplevel)}
RATES=${BENCH_RATES:-100 250 500 1000 2000 4000 8000}
DUR=${BENCH_DURATION:-4}
CONNS=${BENCH_CONNS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
HOST=bench.example.com
TICK=$(getconf CLK_TCK)
BUILDS="before after"

for tool in varnishd varnishstat nginx h2load python3 git bc; do
	command -v "$tool" > /dev/null || { echo "bench-mirror: $tool not found (make setup installs it)" >&2; exit 1; }
done
[ -f "$GHOST/libvmod_ghost.so" ] || { echo "bench-mirror: no $GHOST/libvmod_ghost.so (make -C ghost)" >&2; exit 1; }

bench_workdir mirror

# the two builds, world-readable (varnishd's child loads them as its user)
if [ -n "${BENCH_BEFORE:-}" ]; then
	cp "$BENCH_BEFORE" "$W/before.so"
else
	mkdir -p "$W/src"
	git -C "$REPO" archive main ghost | tar -x -C "$W/src"
	make -C "$W/src/ghost" all > "$W/src/build.log" 2>&1 || { echo "bench-mirror: building main's ghost failed:" >&2; tail "$W/src/build.log" >&2; exit 1; }
	cp "$W/src/ghost/libvmod_ghost.so" "$W/before.so"
fi
cp "$GHOST/libvmod_ghost.so" "$W/after.so"
chmod 0644 "$W/before.so" "$W/after.so"
BEFORE_REV=$(git -C "$REPO" rev-parse --short main)
AFTER_REV=$(git -C "$GHOST" rev-parse --short HEAD)$(git -C "$GHOST" diff --quiet HEAD -- . || echo "+changes")

read -r OPORT MPORT P1 P2 <<< "$(free_ports 4)"
declare -A PORT=([before]=$P1 [after]=$P2)

start_origin origin "$OPORT" 'hello from the origin\n'
start_origin mirror "$MPORT" 'hello from the mirror\n'

cat > "$W/ghost.json" <<J
{"version": 2, "backends": [
  {"name": "origin", "endpoints": [{"address": "127.0.0.1", "port": $OPORT}]},
  {"name": "mirror", "endpoints": [{"address": "127.0.0.1", "port": $MPORT}]}
], "vhosts": [
  {"hostname": "$HOST", "routes": [
    {"name": "mirrored", "match": {"path": {"type": "PathPrefix", "value": "/"}},
     "filters": [{"type": "RequestMirror", "requestMirror": {"backend": "mirror"}}],
     "backends": [{"backend": "origin"}]}]}
]}
J
chmod 0644 "$W/ghost.json"

declare -A CHILD
for b in $BUILDS; do
	mkdir -p "$W/v-$b"
	cat > "$W/v-$b/main.vcl" <<V
vcl 4.1;
import ghost from "$W/$b.so";
backend default none;
sub vcl_init { new router = ghost.router("$W/ghost.json"); }
sub vcl_recv {
	if (router.recv()) {
		return (pass);
	}
	return (synth(router.status()));
}
sub vcl_synth { router.synth(); }
sub vcl_deliver { router.deliver(); }
V
	varnishd -j none -n "$W/v-$b" -P "$W/v-$b/varnishd.pid" -f "$W/v-$b/main.vcl" \
	    -a "http=127.0.0.1:${PORT[$b]}" -a ghost-admin=127.0.0.1:0 -s malloc,64m \
	    -p vsl_space=16m > "$W/v-$b/out.log" 2>&1
	PIDS+=("$(cat "$W/v-$b/varnishd.pid")")
done
for b in $BUILDS; do
	for _ in $(seq 1 50); do
		CHILD[$b]=$(pgrep -P "$(cat "$W/v-$b/varnishd.pid")" | head -1 || true)
		[ -n "${CHILD[$b]}" ] && curl -fs -o /dev/null -H "Host: $HOST" "http://127.0.0.1:${PORT[$b]}/" && break
		sleep 0.2
	done
	curl -fs -o /dev/null -H "Host: $HOST" "http://127.0.0.1:${PORT[$b]}/" || { echo "bench-mirror: varnishd ($b) does not answer" >&2; cat "$W/v-$b/out.log" >&2; exit 1; }
done

counter() {	# build, name: the GHOSTROUTER counter's value
	varnishstat -n "$W/v-$1" -1 -f "GHOSTROUTER.*.$2" | awk '{s += $2} END {print s + 0}'
}

run_step() {	# build, rate, round: "achieved mirrored/s drop% cpu_us"
	local b=$1 rate=$2 r=$3 out=$W/out.$1.$2.$3 m0 d0 m1 d1 c0 c1 t0 t1 done_ ach per
	per=$(( (rate + CONNS - 1) / CONNS ))
	m0=$(counter "$b" mirrored); d0=$(counter "$b" mirror_dropped); c0=$(ticks "${CHILD[$b]}")
	t0=$(date +%s.%N)
	timeout $((DUR + 30)) h2load --h1 -t1 -c "$CONNS" -m1 --rps="$per" -D "$DUR" \
	    -H ":authority: $HOST" "http://127.0.0.1:${PORT[$b]}/m" > "$out" 2>&1 || true
	t1=$(date +%s.%N)
	sleep 1	# the queue drains
	m1=$(counter "$b" mirrored); d1=$(counter "$b" mirror_dropped); c1=$(ticks "${CHILD[$b]}")
	if ! grep -q 'status codes: [0-9]* 2xx, 0 3xx, 0 4xx, 0 5xx' "$out"; then
		echo "bench-mirror: $b $rate/s round $r: failed requests:" >&2; grep -E 'requests:|status codes' "$out" >&2
	fi
	done_=$(awk '/^requests:/ {print $8}' "$out")
	ach=$(awk '/^finished in/ {print $4}' "$out")
	awk -v ach="${ach:-0}" -v m=$((m1 - m0)) -v d=$((d1 - d0)) -v t="$(echo "$t1 - $t0" | bc -l)" \
	    -v cpu=$((c1 - c0)) -v tick="$TICK" -v n="${done_:-0}" 'BEGIN {
		drop = (m + d) > 0 ? 100 * d / (m + d) : 0
		us = n > 0 ? cpu / tick * 1e6 / n : 0
		printf "%.0f %.0f %.2f %.0f %d %d\n", ach, m / t, drop, us, m, d
	}'
}

declare -A RES
LOADS=("$(cut -d' ' -f1-3 /proc/loadavg)")
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for r in $(seq 1 "$ROUNDS"); do
	for rate in $RATES; do
		for b in $BUILDS; do
			RES[$b.$rate.$r]=$(run_step "$b" "$rate" "$r")
			[ -z "${BENCH_VERBOSE:-}" ] || echo "round $r $b $rate/s: ${RES[$b.$rate.$r]}" >&2
		done
	done
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
done
END=$(date -u +%H:%M:%SZ)

col() {	# build, rate, field: the median over the rounds
	local vals=() r
	for r in $(seq 1 "$ROUNDS"); do vals+=("$(echo "${RES[$1.$2.$r]}" | cut -d' ' -f"$3")"); done
	median "${vals[@]}"
}

echo
echo "## results ($START to $END)"
echo "machine: nproc=$(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), varnish $(varnishd -V 2>&1 | head -1 | grep -o '[0-9]\.[0-9]\.[0-9]'), nginx $(nginx -v 2>&1 | cut -d/ -f2), $(h2load --version | head -1)"
echo "load average (1, 5, 15 min) at the start and after each round: $(IFS=';'; echo "${LOADS[*]}" | sed 's/;/; /g')"
echo "before: main $BEFORE_REV; after: $AFTER_REV; $CONNS connections, ${DUR} s per step, $ROUNDS rounds interleaved (rates $RATES, builds $BUILDS)"
echo
echo "| build | offered req/s | achieved req/s | mirrored copies/s | dropped % | varnishd CPU µs per request | rounds (mirrored/dropped) |"
echo "|---|---:|---:|---:|---:|---:|---|"
declare -A START_AT
for b in $BUILDS; do
	for rate in $RATES; do
		all=""
		for r in $(seq 1 "$ROUNDS"); do all="$all $(echo "${RES[$b.$rate.$r]}" | awk '{print $5 "/" $6}')"; done
		drop=$(col "$b" "$rate" 3)
		echo "| $b | $rate | $(col "$b" "$rate" 1) | $(col "$b" "$rate" 2) | $drop | $(col "$b" "$rate" 4) |$all |"
		if [ -z "${START_AT[$b]:-}" ] && [ "$(echo "$drop > 0" | bc -l)" = 1 ]; then START_AT[$b]=$rate; fi
	done
done
echo
for b in $BUILDS; do
	echo "$b: drops start at ${START_AT[$b]:-none up to $(echo "$RATES" | awk '{print $NF}')} req/s offered"
done
