# Shared by the benchmark scripts internal/bench/*/bench.sh (sourced, not
# run): their work directory, free ports, the origin nginx, CPU ticks of
# processes and medians.

# bench_workdir NAME: a fresh work directory $W (mode 0755, so that servers
# running as another user reach it), removed at exit unless BENCH_KEEP is
# set, when every process in the array PIDS is killed too. Messages start
# with "bench-NAME:".
bench_workdir() {
	BENCH_NAME=$1
	W=$(mktemp -d "/tmp/$1-bench.XXXXXX")
	PIDS=()
	trap bench_cleanup EXIT
	chmod 0755 "$W"
}
bench_cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	if [ -n "${BENCH_KEEP:-}" ]; then echo "bench-$BENCH_NAME: kept $W" >&2; else rm -rf "$W"; fi
}

free_ports() {	# n: n free loopback ports
	python3 - "$1" <<'P'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
P
}

# start_origin NAME PORT BODY [STATUS]: an nginx with one worker in $W/NAME
# that answers every request on 127.0.0.1:PORT with STATUS (200) and BODY (nginx string
# syntax: \n is a newline) over keep-alive connections; its pid goes into
# PIDS and ORIGIN_PID.
start_origin() {
	mkdir -p "$W/$1"
	cat > "$W/$1/nginx.conf" <<N
worker_processes 1;
daemon off;
pid $W/$1/nginx.pid;
error_log $W/$1/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$2 backlog=4096;
		location / { default_type text/plain; return ${4:-200} "$3"; }
	}
}
N
	nginx -c "$W/$1/nginx.conf" -e "$W/$1/error.log" > "$W/$1/out.log" 2>&1 &
	PIDS+=($!)
	ORIGIN_PID=$!
}

tree() { echo "$1 $(ps -o pid= --ppid "$1" | tr '\n' ' ')"; }	# pid: it and its children
ticks() {	# pids...: user+system CPU ticks of these processes
	local t=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
	done
	echo "$t"
}

median() {	# values...
	printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
