#!/bin/bash
# TLS benchmark (make bench-tls; results in docs/performance.md): what TLS
# termination costs a gateway, on loopback, in one run, for one small
# request passed to one origin:
#   hs-hitch   new TLS handshakes/s through hitch + varnishd + ghost
#   hs-nginx   the same through nginx terminating TLS and proxying
#   ka-hitch   requests/s over keep-alive TLS connections, hitch + varnishd + ghost
#   ka-nginx   the same through nginx
#   plain      requests/s over keep-alive plain HTTP, varnishd + ghost
#   h2-hitch, h2-nginx   keep-alive over HTTP/2 (one stream at a time per connection)
#   origin     the origin alone, plain HTTP keep-alive (every path ends there)
# Rounds interleave the cases; the table gives each case's median.
#
# The hitch setup is the gateway's (issue #14's design for HTTPS listeners): hitch's
# backend is varnishd's Unix socket port-443 (-a port-443=DIR/port-443.sock,
# PROXY,mode=0600, as varnishd.TLSListener renders it), write-proxy-v2 and
# proxy-tlv on, ALPN h2 and http/1.1; varnishd runs the ghost preamble of
# main.vcl (internal/mainvcl) with the real VMOD, and ghost routes the
# vhost on both sockets port-80 and port-443 to the origin. With no user
# VCL, main.vcl passes every request: the request is a pass to the origin.
# nginx terminates TLS with the same certificate and proxies to the same
# origin over kept-alive connections; the origin is a second nginx
# answering a 22-byte body from "return 200".
#
# Clients: new handshakes with internal/bench/tls/handshakes (Go, full
# handshakes, never a resumption, "Connection: close"); keep-alive with
# h2load (--h1 for HTTP/1.1), one client thread.
#
# Usage: bench.sh GHOSTDIR. Environment: BENCH_DURATION (s, default 8),
# BENCH_WARMUP (s, 2), BENCH_CONNS (16), BENCH_ROUNDS (3), HITCH_WORKERS (2),
# BENCH_KEY (ec: ECDSA P-256, or rsa: RSA 2048), BENCH_CASES (the cases, in
# order), BENCH_CIPHERSUITES (hitch's and nginx's TLSv1.3 suites, e.g.
# TLS_AES_128_GCM_SHA256; default OpenSSL's), NGINX_WORKERS (= HITCH_WORKERS),
# HITCH_ALT_WORKERS (a second hitch with this many workers, on the same
# varnishd socket: the cases hs-hitchalt and ka-hitchalt, also h2-hitchalt),
# BENCH_PROFILE (a case: a perf profile of the servers in its first round;
# needs perf, Debian's linux-perf, which setup does not install).
set -eu
GHOST=$(cd "$1" && pwd)
SO=$GHOST/libvmod_ghost.so
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
DUR=${BENCH_DURATION:-8}
WARM=${BENCH_WARMUP:-2}
CONNS=${BENCH_CONNS:-16}
ROUNDS=${BENCH_ROUNDS:-3}
HITCH_WORKERS=${HITCH_WORKERS:-2}
NGINX_WORKERS=${NGINX_WORKERS:-$HITCH_WORKERS}
KEY=${BENCH_KEY:-ec}
CASES=${BENCH_CASES:-hs-hitch hs-nginx ka-hitch ka-nginx plain h2-hitch h2-nginx origin}
SUITES=${BENCH_CIPHERSUITES:-}
VARNISHD_PARAMS=${BENCH_VARNISHD_PARAMS:-}	# more varnishd arguments, e.g. "-p thread_pools=1"
HOST=bench.example.com
LIMIT=$((DUR + WARM + 30))	# seconds a client may run before it is stopped
TICK=$(getconf CLK_TCK)

for tool in varnishd varnishadm hitch nginx h2load openssl go python3; do
	command -v "$tool" > /dev/null || { echo "bench-tls: $tool not found (make setup installs it)" >&2; exit 1; }
done
if [ -n "${BENCH_PROFILE:-}" ] && ! command -v perf > /dev/null; then
	echo "bench-tls: BENCH_PROFILE needs perf (apt-get install linux-perf)" >&2; exit 1
fi
[ -f "$SO" ] || { echo "bench-tls: no $SO (make -C ghost)" >&2; exit 1; }

bench_workdir tls
# hitch refuses to run its workers as root, and varnishd's socket is mode
# 0600: as in the gateway's pod, both run as one user (as root: nobody).
mkdir -p "$W/tls" "$W/varnish"
as_user=()
if [ "$(id -u)" = 0 ]; then
	as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
	chown nobody:nogroup "$W/tls" "$W/varnish"
fi
read -r OPORT HPORT NPORT VPORT APORT <<< "$(free_ports 5)"

# The certificate, one for hitch and nginx.
case $KEY in
ec) keyopt=(-newkey ec -pkeyopt ec_paramgen_curve:P-256) ;;
rsa) keyopt=(-newkey rsa:2048) ;;
*) echo "bench-tls: BENCH_KEY=$KEY: want ec or rsa" >&2; exit 1 ;;
esac
openssl req -x509 "${keyopt[@]}" -nodes -days 2 -subj "/CN=$HOST" -addext "subjectAltName=DNS:$HOST" \
    -keyout "$W/key.pem" -out "$W/cert.pem" 2> "$W/openssl.log"
cat "$W/key.pem" "$W/cert.pem" > "$W/tls/cert.pem"
chmod 0600 "$W/tls/cert.pem"
[ ${#as_user[@]} = 0 ] || chown nobody:nogroup "$W/tls/cert.pem"

# The origin.
start_origin origin "$OPORT" 'hello from the origin\n'
mkdir -p "$W/nginx"

# nginx terminating TLS, proxying to the origin.
ngx_suites=""
[ -z "$SUITES" ] || ngx_suites="ssl_conf_command Ciphersuites $SUITES;"
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
		listen 127.0.0.1:$NPORT ssl http2 backlog=4096;
		ssl_certificate $W/cert.pem;
		ssl_certificate_key $W/key.pem;
		ssl_protocols TLSv1.2 TLSv1.3;	# hitch's default tls-protos
		$ngx_suites
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
NGINX_PID=$!

# varnishd with ghost: port-80 plain, port-443 the TLS socket hitch writes to.
cat > "$W/ghost.json" <<J
{"version": 2,
 "backends": [{"name": "origin", "endpoints": [{"address": "127.0.0.1", "port": $OPORT}]}],
 "vhosts": [{"hostname": "$HOST", "listeners": ["port-80", "port-443"],
   "routes": [{"name": "all", "match": {"path": {"type": "PathPrefix", "value": "/"}},
     "backends": [{"backend": "origin"}]}]}]}
J
# The ghost preamble of internal/mainvcl's main.vcl, and its default: pass.
cat > "$W/main.vcl" <<V
vcl 4.1;
import ghost from "$SO";
backend default none;
sub vcl_init { new router = ghost.router("$W/ghost.json", admin_socket = "ghost-admin"); }
sub vcl_recv {
	if (!router.recv()) { return (synth(router.status())); }
}
sub vcl_synth { router.synth(); }
sub vcl_deliver { router.deliver(); }
sub vcl_recv { return (pass); }
sub vcl_synth { return (deliver); }
V
TLS_SOCK=$W/tls/port-443.sock
"${as_user[@]}" varnishd -j none -n "$W/varnish" -P "$W/varnish/varnishd.pid" -f "$W/main.vcl" \
    -a "port-80=127.0.0.1:$VPORT" \
    -a "port-443=$TLS_SOCK,PROXY,mode=0600" \
    -a ghost-admin=127.0.0.1:0 \
    -p feature=+http2 -p vsl_space=1M -s malloc,64m $VARNISHD_PARAMS > "$W/varnishd.log" 2>&1
PIDS+=("$(cat "$W/varnish/varnishd.pid")")

# hitch, as the chaperone runs it; with HITCH_ALT_WORKERS, a second hitch
# with that many workers on the same varnishd socket (the *-hitchalt cases).
hitch_suites=""
[ -z "$SUITES" ] || hitch_suites="ciphersuites = \"$SUITES\""
start_hitch() {	# name, port, workers: sets HITCH_PID
	cat > "$W/tls/$1.conf" <<H
frontend = "[127.0.0.1]:$2"
backend = "$TLS_SOCK"
pem-file = "$W/tls/cert.pem"
workers = $3
backlog = 4096
write-proxy-v2 = on
proxy-tlv = on
alpn-protos = "h2, http/1.1"
daemon = off
log-level = 1
$hitch_suites
H
	"${as_user[@]}" hitch --config="$W/tls/$1.conf" > "$W/$1.log" 2>&1 &
	PIDS+=($!)
	HITCH_PID=$!
}
ALT_PID=""
if [ -n "${HITCH_ALT_WORKERS:-}" ]; then
	start_hitch hitch-alt "$APORT" "$HITCH_ALT_WORKERS"
	ALT_PID=$HITCH_PID
	case " $CASES " in *-hitchalt*) ;; *) CASES="$CASES hs-hitchalt ka-hitchalt" ;; esac
fi
start_hitch hitch "$HPORT" "$HITCH_WORKERS"

go build -o "$W/handshakes" "$HERE/handshakes"

# Wait until every path answers 200.
url_of() {	# case
	case $1 in
	*-hitch) echo "https://127.0.0.1:$HPORT/" ;;
	*-hitchalt) echo "https://127.0.0.1:$APORT/" ;;
	*-nginx) echo "https://127.0.0.1:$NPORT/" ;;
	plain) echo "http://127.0.0.1:$VPORT/" ;;
	origin) echo "http://127.0.0.1:$OPORT/" ;;
	esac
}
for c in ka-hitch ka-nginx plain origin ${ALT_PID:+ka-hitchalt}; do
	ok=""
	for _ in $(seq 1 50); do
		code=$(curl -sk -o /dev/null -w '%{http_code}' -H "Host: $HOST" "$(url_of $c)" || true)
		[ "$code" = 200 ] && { ok=1; break; }
		sleep 0.2
	done
	if [ -z "$ok" ]; then
		echo "bench-tls: $c ($(url_of $c)) does not answer 200 (last: $code)" >&2
		tail -n 20 "$W"/*.log "$W"/*/error.log >&2 || true
		exit 1
	fi
done
# The TLS path really goes through varnishd's PROXY socket: X-Varnish and
# the SNI hitch passed on (proxy.authority is not checked here: ghost routes
# by Host).
hdr=$(curl -sk -D - -o /dev/null --resolve "$HOST:$HPORT:127.0.0.1" "https://$HOST:$HPORT/")
grep -qi '^x-varnish:' <<< "$hdr" || { echo "bench-tls: hitch's answer did not come from varnishd: $hdr" >&2; exit 1; }
h2=$(curl -sk --http2 -o /dev/null -w '%{http_version}' --resolve "$HOST:$HPORT:127.0.0.1" "https://$HOST:$HPORT/")
[ "$h2" = 2 ] || { echo "bench-tls: hitch + varnishd did not speak HTTP/2 (curl: $h2)" >&2; exit 1; }

VCHILD=$(ps -o pid= --ppid "$(cat "$W/varnish/varnishd.pid")" | head -1 | tr -d ' ')
declare -A GROUP
GROUP[hitch]="$(tree "$HITCH_PID") ${ALT_PID:+$(tree "$ALT_PID")}"
GROUP[varnishd]=$VCHILD
GROUP[nginx]=$(tree "$NGINX_PID")
GROUP[origin]=$(tree "$ORIGIN_PID")
GROUPS_ORDER="hitch varnishd nginx origin"

run_case() {	# case, round: prints the rate; CPU use into $W/cpu.CASE.ROUND
	local c=$1 r=$2 out=$W/out.$1.$2 g before=() after t0 t1 rate
	for g in $GROUPS_ORDER; do
		# shellcheck disable=SC2086
		before+=("$(ticks ${GROUP[$g]})")
	done
	t0=$(date +%s.%N)
	local TIMEFORMAT="%U %S" perf=""
	if [ "$c" = "${BENCH_PROFILE:-}" ] && [ "$r" = 1 ]; then
		# shellcheck disable=SC2086
		perf record -q -e cpu-clock -F 999 -o "$W/perf.data" \
		    -p "$(echo ${GROUP[hitch]} ${GROUP[varnishd]} ${GROUP[nginx]} | tr ' ' ,)" -- sleep "$DUR" > "$W/perf.log" 2>&1 &
		perf=$!
	fi
	{ time client "$c" "$out"; } 2> "$W/time.$c.$r"
	[ -z "$perf" ] || wait "$perf" || true
	case $c in
	hs-*)
		rate=$(grep -o 'handshakes_per_s=[0-9.]*' "$out" | cut -d= -f2)
		if ! grep -q ' errors=0 resumed=0 ' "$out"; then echo "bench-tls: $c round $r: errors or resumed sessions:" >&2; cat "$out" >&2; fi
		;;
	*)
		rate=$(awk '/^finished in/ {print $4}' "$out")
		if ! grep -q ' 0 failed, 0 errored, 0 timeout' "$out" || ! grep -q 'status codes: [0-9]* 2xx, 0 3xx, 0 4xx, 0 5xx' "$out"; then
			echo "bench-tls: $c round $r: failed requests:" >&2; grep -E 'requests:|status codes' "$out" >&2
		fi
		;;
	esac
	t1=$(date +%s.%N)
	local i=0 line="" cores total=0 client_cores
	for g in $GROUPS_ORDER; do
		# shellcheck disable=SC2086
		after=$(ticks ${GROUP[$g]})
		cores=$(echo "($after - ${before[$i]}) / $TICK / ($t1 - $t0)" | bc -l)
		total=$(echo "$total + $cores" | bc -l)
		line="$line $g=$(printf '%.2f' "$cores")"
		i=$((i + 1))
	done
	client_cores=$(awk -v t="$(echo "$t1 - $t0" | bc -l)" '{printf "%.2f", ($1 + $2) / t}' "$W/time.$c.$r")
	line="$line client=$client_cores"
	echo "$line" > "$W/cpu.$c.$r"
	# CPU time per request (µs) of the servers together and of the client:
	# less sensitive to the machine's other load than the rates.
	if [ "$(echo "${rate:-0} > 0" | bc -l)" = 1 ]; then
		printf '%.0f %.0f\n' "$(echo "$total / $rate * 1000000" | bc -l)" "$(echo "$client_cores / $rate * 1000000" | bc -l)" > "$W/us.$c.$r"
	else
		echo "0 0" > "$W/us.$c.$r"
	fi
	echo "${rate:-0}"
}
client() {	# case, output file
	local c=$1 out=$2
	case $c in
	hs-*)
		timeout "$LIMIT" "$W/handshakes" -addr "${HOSTPORT[$c]}" -host "$HOST" -ca "$W/cert.pem" \
		    -c "$CONNS" -d "${DUR}s" -warmup "${WARM}s" > "$out" 2>&1 || true
		;;
	*)
		local proto=(--h1)
		case $c in h2-*) proto=() ;; esac
		timeout "$LIMIT" h2load "${proto[@]}" -t1 -c "$CONNS" -m1 -D "$DUR" --warm-up-time="$WARM" \
		    -H ":authority: $HOST" "$(url_of "$c")" > "$out" 2>&1 || true
		;;
	esac
}
declare -A HOSTPORT
HOSTPORT[hs-hitch]=127.0.0.1:$HPORT
HOSTPORT[hs-hitchalt]=127.0.0.1:$APORT
HOSTPORT[hs-nginx]=127.0.0.1:$NPORT

declare -A RATE
LOADS=("$(cut -d' ' -f1-3 /proc/loadavg)")
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for r in $(seq 1 "$ROUNDS"); do
	for c in $CASES; do
		RATE[$c.$r]=$(run_case "$c" "$r")
		[ -z "${BENCH_VERBOSE:-}" ] || echo "round $r $c ${RATE[$c.$r]} $(cat "$W/cpu.$c.$r")" >&2
	done
	LOADS+=("$(cut -d' ' -f1-3 /proc/loadavg)")
done
END=$(date -u +%H:%M:%SZ)

declare -A MED
for c in $CASES; do
	vals=()
	for r in $(seq 1 "$ROUNDS"); do vals+=("${RATE[$c.$r]}"); done
	MED[$c]=$(median "${vals[@]}")
done
ratio() {	# a, b: MED[a] / MED[b], or "" when either is missing
	[ -n "${MED[$1]:-}" ] && [ -n "${MED[$2]:-}" ] || return 0
	echo "${MED[$1]} / ${MED[$2]}" | bc -l | xargs printf '%.2f'
}
hs_proto=$(grep -ho 'version=[^ ]* cipher=[^ ]* curve=[^ ]*' "$W"/out.hs-hitch.1 2>/dev/null | head -1 || true)

echo
echo "## results ($START to $END)"
echo "machine: nproc=$(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), varnish $(varnishd -V 2>&1 | head -1 | grep -o '[0-9]\.[0-9]\.[0-9]'), $(hitch --version 2>&1 | head -1), $(nginx -v 2>&1 | cut -d' ' -f3), $(h2load --version | head -1), $(openssl version | cut -d' ' -f1-2)"
echo "load average (1, 5, 15 min) at the start and after each round: $(IFS=';'; echo "${LOADS[*]}" | sed 's/;/; /g')"
echo "key $KEY, hitch workers $HITCH_WORKERS${ALT_PID:+ (hitchalt: $HITCH_ALT_WORKERS)}, nginx workers $NGINX_WORKERS, $CONNS connections, ${DUR} s per case after ${WARM} s warm-up, $ROUNDS rounds interleaved ($CASES); handshakes: $hs_proto${SUITES:+; TLSv1.3 suites $SUITES}"
echo
echo "| case | median /s | rounds | servers' CPU µs per request (median) | client's | CPU (cores) of hitch, varnishd, nginx, origin, the client in round 1 |"
echo "|---|---:|---|---:|---:|---|"
for c in $CASES; do
	all="" su=() cu=()
	for r in $(seq 1 "$ROUNDS"); do
		all="$all ${RATE[$c.$r]}"
		read -r a b < "$W/us.$c.$r"
		su+=("$a"); cu+=("$b")
	done
	printf "| %s | %.0f |%s | %.0f | %.0f |%s |\n" "$c" "${MED[$c]}" "$all" "$(median "${su[@]}")" "$(median "${cu[@]}")" "$(cat "$W/cpu.$c.1")"
done
if [ -s "$W/perf.data" ]; then
	echo
	echo "profile of $BENCH_PROFILE in round 1 (perf record -e cpu-clock of hitch, varnishd's child, nginx; share of samples):"
	perf report -i "$W/perf.data" --no-children --sort comm,dso --stdio 2> /dev/null | grep -v '^#' | grep -v '^$' | head -12 | sed 's/^/    /'
	echo "  top symbols:"
	perf report -i "$W/perf.data" --no-children --sort comm,sym --stdio 2> /dev/null | grep -v '^#' | grep -v '^$' | head -12 | sed 's/^/    /'
fi
echo
echo "ratios of the medians:"
echo "  ka-hitch / plain (target >= 0.8): $(ratio ka-hitch plain)"
echo "  ka-nginx / plain: $(ratio ka-nginx plain)"
echo "  ka-hitch / ka-nginx: $(ratio ka-hitch ka-nginx)"
echo "  hs-hitch / hs-nginx: $(ratio hs-hitch hs-nginx)"
if [ -n "$ALT_PID" ]; then
	echo "  ka-hitchalt / plain (hitch with $HITCH_ALT_WORKERS workers): $(ratio ka-hitchalt plain)"
	echo "  ka-hitchalt / ka-hitch: $(ratio ka-hitchalt ka-hitch)"
	echo "  hs-hitchalt / hs-hitch: $(ratio hs-hitchalt hs-hitch)"
fi
echo "  h2-hitch / h2-nginx: $(ratio h2-hitch h2-nginx)"
echo "  h2-hitch / plain: $(ratio h2-hitch plain)"
echo "  plain / origin: $(ratio plain origin)"
