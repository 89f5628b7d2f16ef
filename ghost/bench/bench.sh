#!/bin/bash
# ghost benchmark: wrk on loopback against one varnishd in pass mode.
#   (a) static backend, no ghost        (b) ghost, 10 routes
#   (c) ghost, 10,000 routes / 1,000 vhosts
#   (d) the same 10,000 routes as a generated VCL if/elsif chain
# plus (c) with reloads of the 10,000-route file during the run, the
# reload time and the child's memory per 1,000 routes.
# Bounded: about 2-4 minutes. Usage: bench.sh GHOSTDIR
set -eu
GHOST=$1
SO=$GHOST/libvmod_ghost.so
DUR=${BENCH_DURATION:-8}
CONNS=${BENCH_CONNS:-16}
ROUNDS=${BENCH_ROUNDS:-2}
W=$(mktemp -d /tmp/ghost-bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	rm -rf "$W"
}
trap cleanup EXIT

adm() { varnishadm -t 900 -n "$W/$1" "${@:2}"; }
port_of() { adm "$1" debug.listen_address | awk -v n="$2" '$1 == n {print $3}'; }

start_varnishd() {	# name, -a args...
	local n=$1; shift
	varnishd -j none -n "$W/$n" -P "$W/$n.pid" -f "" -p thread_pool_min=50 \
	    -p vsl_space=1M "$@" > "$W/$n.log" 2>&1
	PIDS+=("$(cat "$W/$n.pid")")
}

# origin: a second varnishd answering 200 from vcl_synth
cat > "$W/origin.vcl" <<'V'
vcl 4.1;
backend default none;
sub vcl_recv { return (synth(200)); }
sub vcl_synth { set resp.body = "hello from the origin"; return (deliver); }
V
start_varnishd origin -a o=127.0.0.1:0
adm origin vcl.load o "$W/origin.vcl" >/dev/null && adm origin vcl.use o >/dev/null
adm origin start >/dev/null
sleep 1
OPORT=$(port_of origin o)

python3 "$GHOST/bench/gen.py" --vhosts 1 --routes 10 --backend 127.0.0.1:$OPORT > "$W/b.json"
python3 "$GHOST/bench/gen.py" --vhosts 1000 --routes 10 --backend 127.0.0.1:$OPORT > "$W/big.json"
python3 "$GHOST/bench/gen.py" --vhosts 1000 --routes 10 --backend 127.0.0.1:$OPORT --vcl > "$W/d.vcl"
cp "$W/b.json" "$W/c.json"		# (c) starts small, for the memory figure

cat > "$W/a.vcl" <<V
vcl 4.1;
backend be { .host = "127.0.0.1"; .port = "$OPORT"; }
sub vcl_recv { return (pass); }
V
for x in b c; do
	cat > "$W/$x.vcl" <<V
vcl 4.1;
import ghost from "$SO";
backend default none;
sub vcl_init { new router = ghost.router("$W/$x.json"); }
sub vcl_recv {
	if (router.recv()) { return (pass); }
	return (synth(router.status()));
}
sub vcl_synth { router.synth(); return (deliver); }
sub vcl_deliver { router.deliver(); }
V
done

start_varnishd front -p cli_timeout=900 -a http=127.0.0.1:0 -a ghost-admin=127.0.0.1:0
adm front vcl.load a "$W/a.vcl" >/dev/null
adm front vcl.use a >/dev/null
adm front start >/dev/null
sleep 1
FPORT=$(port_of front http)
APORT=$(port_of front ghost-admin)
CHILD=$(ps -o pid= --ppid "$(cat "$W/front.pid")" | head -1 | tr -d ' ')
rss() { awk '/^VmRSS/ {print $2}' "/proc/$CHILD/status"; }
reload() { curl -s -X POST "http://127.0.0.1:$APORT/.varnish-ghost/reload"; }

t0=$(date +%s.%N)
adm front vcl.load b "$W/b.vcl" >/dev/null
adm front vcl.load c "$W/c.vcl" >/dev/null
rss_c_small=$(rss)
adm front vcl.use c >/dev/null
cp "$W/big.json" "$W/c.json"
reload > "$W/first_reload.json"
sleep 2
rss_c_big=$(rss)
t1=$(date +%s.%N)
adm front vcl.load d "$W/d.vcl" >/dev/null
t2=$(date +%s.%N)

# reload time of the 10,000-route file: 5 reloads
: > "$W/reloads.txt"
for i in 1 2 3 4 5; do
	s=$(date +%s.%N)
	reload > "$W/r.json"
	e=$(date +%s.%N)
	ms=$(grep -o '"duration_ms":[0-9.]*' "$W/r.json" | cut -d: -f2)
	echo "$ms $(echo "($e - $s) * 1000" | bc -l)" >> "$W/reloads.txt"
done

declare -A HOST URL
HOST[a]=v999.example.com; URL[a]=/p7
HOST[b]=v0.example.com;   URL[b]=/p7
HOST[c]=v999.example.com; URL[c]=/p7
HOST[d]=v999.example.com; URL[d]=/p7
HOST[dfirst]=v0.example.com; URL[dfirst]=/p1

run_wrk() {	# vcl, case label
	adm front vcl.use "$1" >/dev/null
	sleep 0.5
	wrk -t2 -c"$CONNS" -d"${DUR}s" -H "Host: ${HOST[$2]}" \
	    "http://127.0.0.1:$FPORT${URL[$2]}" > "$W/wrk.$2.$3" 2>&1
	awk '/^Requests\/sec/ {print $2}' "$W/wrk.$2.$3"
}
declare -A RPS
for r in $(seq 1 "$ROUNDS"); do
	for x in a b c d dfirst; do
		v=$x; [ "$x" = dfirst ] && v=d
		RPS[$x.$r]=$(run_wrk "$v" "$x" "$r")
		# every answer must be 200
		if grep -q "Non-2xx\|Socket errors" "$W/wrk.$x.$r"; then
			echo "bench: errors in case $x:"; cat "$W/wrk.$x.$r"
		fi
	done
done

# (c) again, with a reload of the 10,000-route file every 0.5 s
adm front vcl.use c >/dev/null
( for i in $(seq 1 $((DUR * 2))); do reload > /dev/null; sleep 0.5; done ) &
RL=$!
wrk -t2 -c"$CONNS" -d"${DUR}s" -H "Host: v999.example.com" \
    "http://127.0.0.1:$FPORT/p7" > "$W/wrk.creload" 2>&1
wait $RL
rps_creload=$(awk '/^Requests\/sec/ {print $2}' "$W/wrk.creload")
req_creload=$(awk '/requests in/ {print $1}' "$W/wrk.creload")
err_creload=$(grep -E "Non-2xx|Socket errors" "$W/wrk.creload" || echo "none")
gen_after=$(curl -s "http://127.0.0.1:$APORT/.varnish-ghost/stats" | grep -o '"generation":[0-9]*' | head -1)

best() {	# case: the best of the rounds
	local m=0 r v
	for r in $(seq 1 "$ROUNDS"); do
		v=${RPS[$1.$r]}
		m=$(echo "if ($v > $m) $v else $m" | bc -l)
	done
	echo "$m"
}
A=$(best a)
echo
echo "## results ($(date -u +%Y-%m-%dT%H:%MZ))"
echo "machine: nproc=$(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), varnish $(varnishd -V 2>&1 | head -1 | grep -o '[0-9]\.[0-9]\.[0-9]')"
echo "wrk -t2 -c$CONNS -d${DUR}s, best of $ROUNDS rounds, rounds interleaved a b c d d-first"
echo
echo "| case | req/s (best) | all rounds | ratio to (a) |"
echo "|---|---|---|---|"
for x in a b c d dfirst; do
	all=""
	for r in $(seq 1 "$ROUNDS"); do all="$all ${RPS[$x.$r]}"; done
	b=$(best $x)
	printf "| %s | %.0f |%s | %.3f |\n" "$x" "$b" "$all" "$(echo "$b / $A" | bc -l)"
done
echo
echo "(c) during reloads of the 10,000-route file every 0.5 s: $rps_creload req/s, $req_creload requests, errors: $err_creload, $gen_after"
echo "reload of 10,000 routes / 1,000 vhosts (duration_ms in the answer, curl wall ms):"
sed 's/^/    /' "$W/reloads.txt"
echo "first load of the 10,000-route file (new backends and 1,000 counter segments): $(grep -o '"duration_ms":[0-9.]*' "$W/first_reload.json")"
echo "vcl.load of the 10,000-route VCL chain (d): $(echo "$t2 - $t1" | bc -l | cut -c1-6) s"
echo "child RSS: $rss_c_small kB with 10 routes, $rss_c_big kB with 10,000 routes: $(( (rss_c_big - rss_c_small) / 10 )) kB per 1,000 routes"
