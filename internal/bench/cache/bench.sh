#!/bin/bash
# Cache benchmark (make bench-cache; results in docs/performance.md): the
# same small request (GET /p7, Host v999.example.com) to the same origin, on
# loopback, in one run, through:
#   hit-SET     a 10,000-route gateway answering from its cache
#   pass-SET    the same gateway passing (main.vcl's default)
#   static-SET  varnishd with a static backend and "return (pass)", no ghost
#   nginx       nginx proxying without a cache (upstream keep-alive, one
#               worker per core)
#   haproxy     HAProxy proxying (http-reuse always, one thread per core)
# SET names the varnishd parameters: "old" is what the chaperone passed
# before the gateway had defaults of its own (-s malloc,256m and varnishd's
# defaults), "new" the gateway's defaults now (varnishd.DefaultParams,
# printed by internal/bench/cache/gatewayfiles -params), and any other
# name the arguments in BENCH_SET_<name> (e.g. BENCH_SET_tp1="-p
# thread_pools=1"). Rounds interleave the cases; the table gives each
# case's median of req/s and of CPU per request.
#
# The gateway is varnishd with the real ghost VMOD and main.vcl rendered by
# internal/mainvcl, ghost.json of 1,000 vhosts x 10 routes written with
# internal/ghostjson (internal/bench/cache/gatewayfiles), every route to the
# origin; the listen socket is port-80 as in a gateway. The hit case caches
# by the route's cache policy (ghost.json cachePolicies, main.vcl's
# router.cacheable()) when the rendered main.vcl and the loaded ghost
# support it, and otherwise as users cache by hand: Gateway VCL "sub
# vcl_recv { return (hash); }". The results say which ("hit path").
# The origin is nginx (one worker) answering 200 with a 100-byte body from
# "return 200"; its responses say nothing about caching, so the hit case's
# objects live for the default TTL (builtin VCL) or the policy's 2m.
#
# Client: wrk, BENCH_THREADS threads and BENCH_CONNS connections, a warm-up
# run before each measured run. CPU per request is the user+system time of
# the proxy's processes (/proc/PID/stat of varnishd's manager and child,
# nginx's master and workers, HAProxy) over the measured run divided by its
# requests; the origin's and the client's are reported beside it.
#
# Usage: bench.sh GHOSTDIR. Environment: BENCH_DURATION (s, default 10),
# BENCH_WARMUP (s, 2), BENCH_ROUNDS (5), BENCH_THREADS (2), BENCH_CONNS
# (32), BENCH_SETS (old new), BENCH_SET_<name>, BENCH_CASES (the cases, in
# order; default hit and pass of every set, static-old, nginx, haproxy),
# BENCH_HIT_PATH (uservcl: the user VCL way even when the policy way is
# supported), NGINX_WORKERS and HAPROXY_THREADS (default nproc),
# BENCH_PROFILE (cases: a perf profile of each case's proxy after the
# rounds; needs perf, Debian's linux-perf, which setup does not install), BENCH_VERBOSE,
# BENCH_KEEP (keep the work directory).
set -eu
GHOST=$(cd "$1" && pwd)
SO=$GHOST/libvmod_ghost.so
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
REPO=$(cd "$HERE/../../.." && pwd)
DUR=${BENCH_DURATION:-10}
WARM=${BENCH_WARMUP:-2}
ROUNDS=${BENCH_ROUNDS:-5}
THREADS=${BENCH_THREADS:-2}
CONNS=${BENCH_CONNS:-32}
SETS=${BENCH_SETS:-old new}
NGINX_WORKERS=${NGINX_WORKERS:-$(nproc)}
HAPROXY_THREADS=${HAPROXY_THREADS:-$(nproc)}
HOST=v999.example.com
URL_PATH=/p7
LIMIT=$((DUR + 30))	# seconds a client may run before it is stopped
TICK=$(getconf CLK_TCK)

for tool in varnishd varnishadm varnishstat nginx haproxy wrk curl go bc python3; do
	command -v "$tool" > /dev/null || { echo "bench-cache: $tool not found (make setup installs it)" >&2; exit 1; }
done
if [ -n "${BENCH_PROFILE:-}" ] && ! command -v perf > /dev/null; then
	echo "bench-cache: BENCH_PROFILE needs perf (apt-get install linux-perf)" >&2; exit 1
fi
[ -f "$SO" ] || { echo "bench-cache: no $SO (make -C ghost)" >&2; exit 1; }

bench_workdir cache

# The parameters of each set.
(cd "$REPO" && go build -o "$W/gatewayfiles" ./internal/bench/cache/gatewayfiles)
declare -A SETPARAMS
for s in $SETS; do
	case $s in
	old) SETPARAMS[$s]="" ;;
	new) SETPARAMS[$s]=$("$W/gatewayfiles" -params | sed 's/^/-p /' | tr '\n' ' ') ;;
	*)
		v="BENCH_SET_$s"
		[ -n "${!v+x}" ] || { echo "bench-cache: set $s: no $v (e.g. $v=\"-p thread_pools=1\")" >&2; exit 1; }
		SETPARAMS[$s]=${!v}
		;;
	esac
done
if [ -z "${BENCH_CASES:-}" ]; then
	BENCH_CASES=""
	for s in $SETS; do BENCH_CASES="$BENCH_CASES hit-$s pass-$s"; done
	BENCH_CASES="$BENCH_CASES static-old nginx haproxy"
fi
CASES=$(echo $BENCH_CASES)
for c in $CASES; do
	case $c in
	hit-* | pass-* | static-*) [ -n "${SETPARAMS[${c#*-}]+x}" ] || { echo "bench-cache: case $c: set ${c#*-} is not in BENCH_SETS ($SETS)" >&2; exit 1; } ;;
	nginx | haproxy) ;;
	*) echo "bench-cache: unknown case $c (hit-SET, pass-SET, static-SET, nginx, haproxy)" >&2; exit 1 ;;
	esac
done

read -r OPORT <<< "$(free_ports 1)"
# The origin: 200 with a 100-byte body.
BODY=$(printf 'hello from the origin %077d' 0)
start_origin origin "$OPORT" "$BODY"

CONFS=$("$W/gatewayfiles" -dir "$W/conf" -origin "127.0.0.1:$OPORT" -vmod "$SO")
HITPATH=uservcl
case " $CONFS " in *" policy "*) [ "${BENCH_HIT_PATH:-}" = uservcl ] || HITPATH=policy ;; esac
HITNOTE=""

declare -A PORT PROCS HITVCL
# varnishd NAME CONF PARAMS...: a varnishd in $W/NAME; CONF is a gatewayfiles
# directory, or "static" for the static backend. Fails when it does not
# start (e.g. main.vcl's vcl_init fails: ghost rejects ghost.json).
start_varnishd() {
	local name=$1 conf=$2 port vcl
	shift 2
	read -r port <<< "$(free_ports 1)"
	mkdir -p "$W/$name"
	if [ "$conf" = static ]; then
		vcl=$W/$name/static.vcl
		cat > "$vcl" <<V
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$OPORT"; }
sub vcl_recv { return (pass); }
V
	else
		vcl=$W/conf/$conf/main.vcl
	fi
	# shellcheck disable=SC2068
	if ! varnishd -j none -n "$W/$name" -P "$W/$name/varnishd.pid" -f "$vcl" \
	    -a "port-80=127.0.0.1:$port" -a ghost-admin=127.0.0.1:0 -s malloc,256m $@ > "$W/$name.log" 2>&1; then
		return 1
	fi
	PIDS+=("$(cat "$W/$name/varnishd.pid")")
	PORT[$name]=$port
}
for c in $CASES; do
	set_=${c#*-}
	case $c in
	hit-*)
		# Started with the user VCL way, then switched to the policy way
		# when that loads (ghost accepts the ghost.json with cachePolicies).
		start_varnishd "$c" uservcl ${SETPARAMS[$set_]} || { cat "$W/$c.log" >&2; exit 1; }
		if [ "$HITPATH" = policy ]; then
			if varnishadm -n "$W/$c" vcl.load policy "$W/conf/policy/main.vcl" > "$W/$c.policy.log" 2>&1 &&
			    varnishadm -n "$W/$c" vcl.use policy >> "$W/$c.policy.log" 2>&1; then
				HITVCL[$c]=policy
			else
				HITNOTE="the rendered main.vcl consults cache policies, but this ghost did not load the ghost.json with cachePolicies ($(grep -v '^$' "$W/$c.policy.log" | grep -i -m2 'ghost\|fail\|error' | tr '\n' ' ')): the user VCL way instead"
				HITPATH=uservcl
			fi
		fi
		;;
	pass-*) start_varnishd "$c" pass ${SETPARAMS[$set_]} || { cat "$W/$c.log" >&2; exit 1; } ;;
	static-*) start_varnishd "$c" static ${SETPARAMS[$set_]} || { cat "$W/$c.log" >&2; exit 1; } ;;
	esac
done
# Every hit case runs the same way (a policy load that failed for one hit
# case is not tried for the next, so only the first can differ).
for c in $CASES; do
	case $c in hit-*)
		if [ "${HITVCL[$c]:-uservcl}" != "$HITPATH" ]; then
			varnishadm -n "$W/$c" vcl.use boot > /dev/null && varnishadm -n "$W/$c" vcl.discard policy > /dev/null ||
			    { echo "bench-cache: $c: could not go back to the user VCL way" >&2; exit 1; }
		fi
		;;
	esac
done

# nginx proxying to the origin without a cache.
if [[ " $CASES " == *" nginx "* ]]; then
	read -r PORT[nginx] <<< "$(free_ports 1)"
	mkdir -p "$W/nginx"
	cat > "$W/nginx/nginx.conf" <<N
worker_processes $NGINX_WORKERS;
daemon off;
pid $W/nginx/nginx.pid;
error_log $W/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	upstream origin { server 127.0.0.1:$OPORT; keepalive 64; }
	server {
		listen 127.0.0.1:${PORT[nginx]} backlog=4096;
		location / {
			proxy_pass http://origin;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host \$host;
			proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
		}
	}
}
N
	nginx -c "$W/nginx/nginx.conf" -e "$W/nginx/error.log" > "$W/nginx/out.log" 2>&1 &
	PIDS+=($!)
	PROCS[nginx]=$!
fi
# HAProxy proxying to the origin, reusing server connections across clients.
if [[ " $CASES " == *" haproxy "* ]]; then
	read -r PORT[haproxy] <<< "$(free_ports 1)"
	mkdir -p "$W/haproxy"
	cat > "$W/haproxy/haproxy.cfg" <<H
global
	nbthread $HAPROXY_THREADS
	maxconn 4096
defaults
	mode http
	timeout connect 5s
	timeout client 30s
	timeout server 30s
	http-reuse always
	option forwardfor
frontend front
	bind 127.0.0.1:${PORT[haproxy]}
	default_backend origin
backend origin
	server origin 127.0.0.1:$OPORT
H
	haproxy -db -f "$W/haproxy/haproxy.cfg" > "$W/haproxy/out.log" 2>&1 &
	PIDS+=($!)
	PROCS[haproxy]=$!
fi

# Every path answers 200 with the origin's body; hit cases answer from the
# cache (X-Varnish with two transaction ids), pass and static cases never.
check_case() {	# case
	local c=$1 code hdr ok=""
	for _ in $(seq 1 100); do
		code=$(curl -s -o "$W/body.$c" -w '%{http_code}' -H "Host: $HOST" "http://127.0.0.1:${PORT[$c]}$URL_PATH" || true)
		[ "$code" = 200 ] && { ok=1; break; }
		sleep 0.2
	done
	if [ -z "$ok" ] || [ "$(cat "$W/body.$c")" != "$BODY" ]; then
		echo "bench-cache: $c does not answer 200 with the origin's body (last: $code)" >&2
		tail -n 20 "$W"/*.log "$W"/*/error.log "$W"/*/out.log >&2 2>/dev/null || true
		exit 1
	fi
	hdr=$(curl -s -D - -o /dev/null -H "Host: $HOST" "http://127.0.0.1:${PORT[$c]}$URL_PATH")
	case $c in
	hit-*) grep -qiE '^x-varnish: [0-9]+ [0-9]+' <<< "$hdr" || { echo "bench-cache: $c is not a cache hit: $hdr" >&2; exit 1; } ;;
	pass-* | static-*) grep -qiE '^x-varnish: [0-9]+\s*$' <<< "$hdr" || { echo "bench-cache: $c is not a pass: $hdr" >&2; exit 1; } ;;
	esac
}
for c in $CASES; do check_case "$c"; done

for c in $CASES; do
	case $c in
	hit-* | pass-* | static-*) PROCS[$c]=$(tree "$(cat "$W/$c/varnishd.pid")") ;;
	*) PROCS[$c]=$(tree "${PROCS[$c]}") ;;
	esac
done
ORIGIN_PROCS=$(tree "$ORIGIN_PID")
ctxsw() {	# pids...: voluntary and involuntary context switches of their threads
	local p
	for p in "$@"; do cat /proc/"$p"/task/*/status 2>/dev/null || true; done | awk '/voluntary_ctxt_switches/ {s += $2} END {print s + 0}'
}
stat_of() {	# case counter
	varnishstat -n "$W/$1" -1 -f "$2" 2>/dev/null | awk '{print $2}'
}

run_case() {	# case, round: prints the rate; CPU into $W/us.CASE.ROUND
	local c=$1 r=$2 out=$W/out.$1.$2 url p0 o0 s0 p1 o1 s1 t0 t1 rate secs
	url="http://127.0.0.1:${PORT[$c]}$URL_PATH"
	timeout "$LIMIT" wrk -t"$THREADS" -c"$CONNS" -d"${WARM}s" -H "Host: $HOST" "$url" > /dev/null 2>&1 || true
	# shellcheck disable=SC2086
	p0=$(ticks ${PROCS[$c]}); o0=$(ticks $ORIGIN_PROCS); s0=$(ctxsw ${PROCS[$c]})
	t0=$(date +%s.%N)
	local TIMEFORMAT="%U %S"
	{ time timeout "$LIMIT" wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" -H "Host: $HOST" "$url" > "$out" 2>&1; } 2> "$W/time.$c.$r" || true
	t1=$(date +%s.%N)
	# shellcheck disable=SC2086
	p1=$(ticks ${PROCS[$c]}); o1=$(ticks $ORIGIN_PROCS); s1=$(ctxsw ${PROCS[$c]})
	if grep -qE 'Non-2xx|Socket errors' "$out"; then
		echo "bench-cache: $c round $r: errors:" >&2; grep -E 'Non-2xx|Socket errors' "$out" >&2
	fi
	rate=$(awk '/^Requests\/sec/ {print $2}' "$out")
	secs=$(echo "$t1 - $t0" | bc -l)
	# CPU µs per request of the proxy, the origin and the client; the
	# proxy's cores.
	if [ "$(echo "${rate:-0} > 0" | bc -l)" = 1 ]; then
		awk -v p=$((p1 - p0)) -v o=$((o1 - o0)) -v s=$((s1 - s0)) -v tick="$TICK" -v rate="$rate" -v secs="$secs" '{
			reqs = rate * secs
			printf "%.1f %.1f %.1f %.2f %.2f\n", p / tick / reqs * 1e6, o / tick / reqs * 1e6, ($1 + $2) / reqs * 1e6, p / tick / secs, s / reqs
		}' "$W/time.$c.$r" > "$W/us.$c.$r"
	else
		echo "0 0 0 0 0" > "$W/us.$c.$r"
	fi
	echo "${rate:-0}"
}

declare -A RATE
LOADS=("$(cut -d' ' -f1-3 /proc/loadavg)")
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
declare -A HIT0 REQ0
for c in $CASES; do
	case $c in hit-*) HIT0[$c]=$(stat_of "$c" MAIN.cache_hit); REQ0[$c]=$(stat_of "$c" MAIN.client_req) ;; esac
done
for r in $(seq 1 "$ROUNDS"); do
	for c in $CASES; do
		RATE[$c.$r]=$(run_case "$c" "$r")
		[ -z "${BENCH_VERBOSE:-}" ] || echo "round $r $c ${RATE[$c.$r]} $(cat "$W/us.$c.$r")" >&2
	done
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
done
END=$(date -u +%H:%M:%SZ)

declare -A MED MUS
for c in $CASES; do
	vals=() us=()
	for r in $(seq 1 "$ROUNDS"); do
		vals+=("${RATE[$c.$r]}")
		us+=("$(cut -d' ' -f1 "$W/us.$c.$r")")
	done
	MED[$c]=$(median "${vals[@]}")
	MUS[$c]=$(median "${us[@]}")
done
ratio() {	# array a b: A[a] / A[b] to 2 decimals, or "-" when either is missing
	local -n arr=$1
	[ -n "${arr[$2]:-}" ] && [ -n "${arr[$3]:-}" ] || { echo -; return 0; }
	echo "${arr[$2]} / ${arr[$3]}" | bc -l | xargs printf '%.2f'
}

echo
echo "## results ($START to $END)"
echo "machine: nproc=$(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), varnish $(varnishd -V 2>&1 | head -1 | grep -o '[0-9]\.[0-9]\.[0-9]'), nginx $(nginx -v 2>&1 | cut -d/ -f2), haproxy $(haproxy -v | head -1 | cut -d' ' -f3), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "load average (1, 5, 15 min) at the start and after each round: $(IFS=';'; echo "${LOADS[*]}" | sed 's/;/; /g')"
echo "wrk -t$THREADS -c$CONNS, ${DUR} s per case after a ${WARM} s warm-up, $ROUNDS rounds interleaved ($CASES); nginx workers $NGINX_WORKERS, HAProxy threads $HAPROXY_THREADS; GET $URL_PATH Host $HOST, 100-byte body"
echo "hit path: $HITPATH ($( [ "$HITPATH" = policy ] && echo "ghost.json cachePolicies, main.vcl's router.cacheable()" || echo "Gateway VCL 'sub vcl_recv { return (hash); }'"))${HITNOTE:+; $HITNOTE}"
for s in $SETS; do echo "set $s: -s malloc,256m ${SETPARAMS[$s]}"; done
echo
echo "| case | median req/s | rounds | proxy CPU µs/request (median) | rounds | origin µs/req | client µs/req | proxy context switches/req | proxy cores (round 1) |"
echo "|---|---:|---|---:|---|---:|---:|---:|---:|"
for c in $CASES; do
	all="" ua="" ou=() cu=() xu=()
	for r in $(seq 1 "$ROUNDS"); do
		read -r a b d e x < "$W/us.$c.$r"
		all="$all $(printf '%.0f' "${RATE[$c.$r]}")"
		ua="$ua $a"
		ou+=("$b"); cu+=("$d"); xu+=("$x")
	done
	printf "| %s | %.0f |%s | %.1f |%s | %.1f | %.1f | %.2f | %s |\n" "$c" "${MED[$c]}" "$all" "${MUS[$c]}" "$ua" \
	    "$(median "${ou[@]}")" "$(median "${cu[@]}")" "$(median "${xu[@]}")" "$(cut -d' ' -f4 "$W/us.$c.1")"
done
for c in $CASES; do
	case $c in hit-*)
		h=$(( $(stat_of "$c" MAIN.cache_hit) - HIT0[$c] )); q=$(( $(stat_of "$c" MAIN.client_req) - REQ0[$c] ))
		echo "$c: $h cache hits of $q requests during the rounds"
		;;
	esac
done
# Profiles, after the measured rounds: where the proxy's CPU goes
# (cpu-clock samples by binary and by function) and where its threads go
# to sleep (sched_switch events, counted by the first function of
# varnishd, a VMOD or nginx/HAProxy in the call chain; varnishd's own
# static functions have no symbol in Debian's build and are skipped).
profile() {	# case
	local c=$1 url pids n client
	url="http://127.0.0.1:${PORT[$c]}$URL_PATH"
	pids=$(echo ${PROCS[$c]} | tr ' ' ,)
	timeout "$LIMIT" wrk -t"$THREADS" -c"$CONNS" -d"$((DUR + 2))s" -H "Host: $HOST" "$url" > "$W/prof.$c.wrk" 2>&1 &
	client=$!
	sleep 1
	perf record -q -e cpu-clock -F 999 -g -o "$W/perf.$c.data" -p "$pids" -- sleep "$DUR" > "$W/perf.$c.log" 2>&1 || true
	wait "$client" || true
	timeout "$LIMIT" wrk -t"$THREADS" -c"$CONNS" -d3s -H "Host: $HOST" "$url" > "$W/sched.$c.wrk" 2>&1 &
	client=$!
	sleep 1
	perf record -q -e sched:sched_switch --call-graph dwarf,16384 -o "$W/sched.$c.data" -p "$pids" -- sleep 0.5 > "$W/sched.$c.log" 2>&1 || true
	wait "$client" || true
	echo
	echo "profile of $c (perf record -e cpu-clock -g of the proxy's processes, $DUR s under the same load; share of samples, self):"
	perf report -i "$W/perf.$c.data" --no-children --sort dso -g none --stdio 2> /dev/null | grep '%' | grep -v '^#' | head -8 | sed 's/^ */    /'
	echo "  top functions:"
	perf report -i "$W/perf.$c.data" --no-children --sort dso,sym -g none --stdio 2> /dev/null | grep '%' | grep -v '^#' | head -25 | sed 's/^ */    /'
	n=$(perf script -i "$W/sched.$c.data" -F event 2> /dev/null | grep -c sched_switch || true)
	echo "  where its threads sleep: $n context switches in 0.5 s, by the first three named functions of the proxy in the call chain (callee < caller):"
	perf script -i "$W/sched.$c.data" -F ip,sym,dso 2> /dev/null | awk -v n="$n" '
		function flush() { if (inchain) k[names == "" ? "(no named function)" : names]++; inchain = 0; names = ""; depth = 0 }
		/^[[:space:]]*$/ { flush(); next }
		{ inchain = 1
		  if (depth < 3 && $2 != "[unknown]" && $NF !~ /kernel|libc|libpthread|vdso|inlined/) { names = names (depth ? " < " : "") $2; depth++ } }
		END { flush(); for (f in k) printf "%6.1f%%  %s\n", 100 * k[f] / n, f }' | sort -rn | head -12 | sed 's/^/    /'
}
for c in ${BENCH_PROFILE:-}; do
	[ -n "${PROCS[$c]:-}" ] || { echo "bench-cache: BENCH_PROFILE: $c is not a case of this run" >&2; continue; }
	profile "$c"
done
echo
echo "ratios of the medians (targets: hit/nginx req/s >= 1.3, hit/nginx CPU <= 0.8, pass-new/pass-old CPU <= 0.75):"
for s in $SETS; do
	echo "  set $s: hit/nginx req/s $(ratio MED "hit-$s" nginx), CPU $(ratio MUS "hit-$s" nginx); pass/nginx req/s $(ratio MED "pass-$s" nginx), CPU $(ratio MUS "pass-$s" nginx); hit/haproxy req/s $(ratio MED "hit-$s" haproxy)"
done
echo "  pass-new/pass-old CPU $(ratio MUS pass-new pass-old), req/s $(ratio MED pass-new pass-old); hit-new/hit-old CPU $(ratio MUS hit-new hit-old), req/s $(ratio MED hit-new hit-old)"
echo "  static-old/nginx CPU $(ratio MUS static-old nginx); haproxy/nginx req/s $(ratio MED haproxy nginx), CPU $(ratio MUS haproxy nginx)"
