#!/bin/bash
# Retry backoff benchmark (make bench-retry; results in docs/performance.md):
# what a burst against one route whose backend fails does to another
# route's latency, for two builds of the VMOD in one run: "before" (main's
# ghost, built from `git show main:ghost`, or BENCH_BEFORE=path/libvmod_ghost.so)
# and "after" (this checkout's ghost/libvmod_ghost.so).
#
# Setup, on loopback: a failing origin (nginx answering 503) and a healthy
# one (nginx answering 200), one varnishd per build with one pool of
# BENCH_THREADS (50) worker threads and this checkout's ghost/main.vcl. The
# route /fail retries 503 three times after a 1 s backoff; /ok has no
# retries. Each step measures /ok with h2load --h1 (10 keep-alive
# connections, 200 requests/s, BENCH_DURATION s) alone, then again while a
# second h2load sends /fail 2 requests/s on each of BENCH_BURST (40)
# connections (80 requests/s: each one that backs off holds a client and
# a fetch thread for 3 s).
#
# Each build runs with its own ghost/main.vcl.
#
# Usage: bench.sh GHOSTDIR. Environment: BENCH_DURATION (s, 5),
# BENCH_ROUNDS (3), BENCH_THREADS (50), BENCH_BURST (40), BENCH_BEFORE,
# BENCH_MAIN_REPO (the repository whose main is "before"), BENCH_KEEP.
set -eu
GHOST=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
REPO=${BENCH_MAIN_REPO:-$(git -C "$GHOST" rev-parse --show-toplevel)}
DUR=${BENCH_DURATION:-5}
ROUNDS=${BENCH_ROUNDS:-3}
THREADS=${BENCH_THREADS:-50}
BURST=${BENCH_BURST:-40}
HOST=retry.example.com
BUILDS="before after"

for tool in varnishd varnishstat nginx h2load python3 git; do
	command -v "$tool" > /dev/null || { echo "bench-retry: $tool not found (make setup installs it)" >&2; exit 1; }
done
[ -f "$GHOST/libvmod_ghost.so" ] || { echo "bench-retry: no $GHOST/libvmod_ghost.so (make -C ghost)" >&2; exit 1; }

bench_workdir retry

if [ -n "${BENCH_BEFORE:-}" ]; then
	cp "$BENCH_BEFORE" "$W/before.so"
	BEFORE_REV=$BENCH_BEFORE
else
	mkdir -p "$W/src"
	git -C "$REPO" archive main ghost | tar -x -C "$W/src"
	make -C "$W/src/ghost" all > "$W/src/build.log" 2>&1 || { echo "bench-retry: building main's ghost failed:" >&2; tail "$W/src/build.log" >&2; exit 1; }
	cp "$W/src/ghost/libvmod_ghost.so" "$W/before.so"
	BEFORE_REV="main $(git -C "$REPO" rev-parse --short main)"
fi
cp "$GHOST/libvmod_ghost.so" "$W/after.so"
chmod 0644 "$W/before.so" "$W/after.so"
# each build with its own main.vcl (the preamble calls the build's methods)
declare -A MAINVCL=([before]=$GHOST/main.vcl [after]=$GHOST/main.vcl)
[ -f "$W/src/ghost/main.vcl" ] && MAINVCL[before]=$W/src/ghost/main.vcl
AFTER_REV=$(git -C "$GHOST" rev-parse --short HEAD)$(git -C "$GHOST" diff --quiet HEAD -- . || echo "+changes")

read -r FPORT OPORT P1 P2 <<< "$(free_ports 4)"
declare -A PORT=([before]=$P1 [after]=$P2)
start_origin fail "$FPORT" 'failing\n' 503
start_origin ok "$OPORT" 'ok\n'

cat > "$W/ghost.json" <<J
{"version": 2, "backends": [
  {"name": "fail", "endpoints": [{"address": "127.0.0.1", "port": $FPORT}]},
  {"name": "ok", "endpoints": [{"address": "127.0.0.1", "port": $OPORT}]}
], "vhosts": [
  {"hostname": "$HOST", "routes": [
    {"name": "ns/fail/0/0", "match": {"path": {"type": "PathPrefix", "value": "/fail"}},
     "retry": {"attempts": 3, "backoffMs": 1000, "codes": [503]},
     "backends": [{"backend": "fail"}]},
    {"name": "ns/ok/0/0", "match": {"path": {"type": "PathPrefix", "value": "/ok"}},
     "backends": [{"backend": "ok"}]}]}
]}
J
chmod 0644 "$W/ghost.json"

for b in $BUILDS; do
	mkdir -p "$W/v-$b"
	sed -e "s|/etc/varnish/ghost.json|$W/ghost.json|" -e "s|^import ghost;|import ghost from \"$W/$b.so\";|" \
	    "${MAINVCL[$b]}" > "$W/v-$b/main.vcl"
	varnishd -j none -n "$W/v-$b" -P "$W/v-$b/varnishd.pid" -f "$W/v-$b/main.vcl" \
	    -a "http=127.0.0.1:${PORT[$b]}" -a ghost-admin=127.0.0.1:0 -s malloc,64m \
	    -p thread_pools=1 -p "thread_pool_min=$THREADS" -p "thread_pool_max=$THREADS" \
	    -p max_retries=4 -p vsl_space=16m > "$W/v-$b/out.log" 2>&1
	PIDS+=("$(cat "$W/v-$b/varnishd.pid")")
done
for b in $BUILDS; do
	for _ in $(seq 1 50); do
		curl -fs -o /dev/null -H "Host: $HOST" "http://127.0.0.1:${PORT[$b]}/ok" && break
		sleep 0.2
	done
	curl -fs -o /dev/null -H "Host: $HOST" "http://127.0.0.1:${PORT[$b]}/ok" || { echo "bench-retry: varnishd ($b) does not answer" >&2; cat "$W/v-$b/out.log" >&2; exit 1; }
done

measure() {	# build, out: h2load against /ok; "mean_ms max_ms done/started failed"
	timeout $((DUR + 60)) h2load --h1 -t1 -c 10 -m1 --rps=20 -D "$DUR" \
	    -H ":authority: $HOST" "http://127.0.0.1:${PORT[$1]}/ok" > "$2" 2>&1 || true
	awk '
		function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
		/^time for request:/ { max = ms($5); mean = ms($6) }
		/^requests:/ { started = $4; done = $6; failed = $10 + $12 + $14 }
		/^status codes:/ { non2xx = $5 + $7 + $9 }
		END { printf "%.2f %.1f %d/%d %d\n", mean, max, done, started, failed + non2xx }' "$2"
}

run_step() {	# build, round: "alone_mean alone_max burst_mean burst_max done/started failed"
	local b=$1 r=$2 a bp o
	a=$(measure "$b" "$W/alone.$b.$r")
	timeout $((DUR + 60)) h2load --h1 -t1 -c "$BURST" -m1 --rps=2 -D $((DUR + 2)) \
	    -H ":authority: $HOST" "http://127.0.0.1:${PORT[$b]}/fail" > "$W/burst.$b.$r" 2>&1 &
	bp=$!
	sleep 1
	o=$(measure "$b" "$W/under.$b.$r")
	wait "$bp" || true
	echo "$(echo "$a" | cut -d' ' -f1-2) $o"
}

declare -A RES
LOADS=("$(cut -d' ' -f1-3 /proc/loadavg)")
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for r in $(seq 1 "$ROUNDS"); do
	for b in $BUILDS; do
		RES[$b.$r]=$(run_step "$b" "$r")
		[ -z "${BENCH_VERBOSE:-}" ] || echo "round $r $b: ${RES[$b.$r]}" >&2
		sleep 4	# the burst's backoffs end
	done
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
done
END=$(date -u +%H:%M:%SZ)

col() {	# build, field: the median over the rounds
	local vals=() r
	for r in $(seq 1 "$ROUNDS"); do vals+=("$(echo "${RES[$1.$r]}" | cut -d' ' -f"$2")"); done
	median "${vals[@]}"
}

echo
echo "## results ($START to $END)"
echo "machine: nproc=$(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), varnish $(varnishd -V 2>&1 | head -1 | grep -o '[0-9]\.[0-9]\.[0-9]'), nginx $(nginx -v 2>&1 | cut -d/ -f2), $(h2load --version | head -1)"
echo "load average (1, 5, 15 min) at the start and after each round: $(IFS=';'; echo "${LOADS[*]}" | sed 's/;/; /g')"
echo "before: $BEFORE_REV; after: $AFTER_REV; one pool of $THREADS threads; /ok at 200 req/s on 10 connections for $DUR s; burst: 2 requests/s on each of $BURST connections to /fail; $ROUNDS rounds interleaved"
echo
echo "| build | /ok mean ms, alone | /ok max ms, alone | /ok mean ms, under the burst | /ok max ms, under the burst | /ok requests done of started, under the burst (rounds) | /ok failed |"
echo "|---|---:|---:|---:|---:|---|---:|"
for b in $BUILDS; do
	all=""
	for r in $(seq 1 "$ROUNDS"); do all="$all $(echo "${RES[$b.$r]}" | cut -d' ' -f5)"; done
	echo "| $b | $(col "$b" 1) | $(col "$b" 2) | $(col "$b" 3) | $(col "$b" 4) |$all | $(col "$b" 6) |"
done
echo
echo "A mean of 0 with 0 requests done: no /ok request was answered within the step."
