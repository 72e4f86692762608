#!/bin/bash
# ucx_bench.sh - UCX (ucx_perftest from ucx-utils), what a user could pick
# instead of libripc, in the benchmarks' line format.  One server/client
# pair on this host; both read the same batch file (one test per line).
#
#   test/benchmarks/peers/ucx_bench.sh -x sm|tcp [options]
#     -x tls     UCX transports: sm (posix+sysv+cma, UCX's pick per
#                operation; pairs with libripc shm) or tcp (on lo; pairs
#                with libripc tcp)
#     -L sizes   latency sizes, comma separated ["8,64,1024,65536"]
#     -B sizes   bandwidth sizes ["1048576,4194304"] ("" = none)
#     -n iters   latency iterations per size [20000; 2000 from 64 KiB]
#     -M bytes   bytes moved per bandwidth size [134217728], 16 messages
#                at least
#     -P port    TCP port of ucx_perftest's bootstrap [random free port]
#     -s cpu     server CPU [0]     -c cpu   client CPU [1]
#     -T sec     hard limit of each process [120]
#     -k file    append the pids of the processes started to file
#
# Lines printed:
#   ucx_tag  sm|tcp SIZE lat_us   UCP tag_lat; ucx_perftest's "typical"
#                                 latency (its 50th percentile; it already
#                                 halves the round trip)
#   ucx_tag  sm|tcp SIZE bw_MBps  UCP tag_bw: streaming tagged sends
#   ucx_get  sm|tcp SIZE bw_MBps  UCP ucp_get: the reader pulls, like
#                                 libripc's long send (UCX keeps several
#                                 gets in flight)
# ucx_perftest's MB/s are MiB/s (2^20); converted to 1e6 B/s here.
# Adapted from ../shared/bench/peers/ucx.sh (which also runs UCT tests and
# the posix/sysv transports alone).
set -u

TLS="" LAT="8,64,1024,65536" BW="1048576,4194304" ITERS=20000
BYTES=$((128 << 20)) PORT="" SRV_CPU=0 CLI_CPU=1 LIMIT=120 PIDFILE=""

usage() {
	sed -n '2,/^# Adapted/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}
while getopts "x:L:B:n:M:P:s:c:T:k:h" o; do
	case $o in
	x) TLS=$OPTARG ;;
	L) LAT=$OPTARG ;;
	B) BW=$OPTARG ;;
	n) ITERS=$OPTARG ;;
	M) BYTES=$OPTARG ;;
	P) PORT=$OPTARG ;;
	s) SRV_CPU=$OPTARG ;;
	c) CLI_CPU=$OPTARG ;;
	T) LIMIT=$OPTARG ;;
	k) PIDFILE=$OPTARG ;;
	*) usage ;;
	esac
done
case $TLS in
sm) export UCX_TLS=sm ;;
tcp) export UCX_TLS=tcp UCX_NET_DEVICES=lo ;;
*) usage ;;
esac
if ! command -v ucx_perftest > /dev/null; then
	echo "ucx_bench: ucx_perftest not installed (Debian: ucx-utils): skipped" >&2
	exit 0
fi
if [ -z "$PORT" ]; then
	PORT=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
fi

WORK=$(mktemp -d /tmp/ucx_bench.XXXXXX)
SRV=""
cleanup() {
	if [ -n "$SRV" ] && kill -0 "$SRV" 2> /dev/null; then
		kill -TERM "$SRV" 2> /dev/null
		sleep 0.5
		kill -KILL "$SRV" 2> /dev/null
	fi
	[ -n "$SRV" ] && wait "$SRV" 2> /dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

{
	for s in ${LAT//,/ }; do
		n=$ITERS
		[ "$s" -ge 65536 ] && n=$((ITERS / 10 > 100 ? ITERS / 10 : 100))
		echo "lat_$s -t tag_lat -s $s -n $n -w $((n / 10))"
	done
	for kind in tag get; do
		t=tag_bw
		[ $kind = get ] && t=ucp_get
		for s in ${BW//,/ }; do
			n=$((BYTES / s))
			[ "$n" -lt 16 ] && n=16
			echo "${kind}_$s -t $t -s $s -n $n -w $((n / 10 > 2 ? n / 10 : 2))"
		done
	done
} > "$WORK/batch"

# Server in the background under timeout; its pid is the timeout's.
taskset -c "$SRV_CPU" timeout -k 3 "$LIMIT" \
	sh -c 'echo $$ >> "$0"; exec "$@"' "${PIDFILE:-/dev/null}" \
	ucx_perftest -p "$PORT" -b "$WORK/batch" > "$WORK/srv.log" 2>&1 &
SRV=$!
# The client retries its connection for a while; give the server a moment.
sleep 0.3
out=$(taskset -c "$CLI_CPU" timeout -k 3 "$LIMIT" \
	sh -c 'echo $$ >> "$0"; exec "$@"' "${PIDFILE:-/dev/null}" \
	ucx_perftest 127.0.0.1 -p "$PORT" -b "$WORK/batch" -f 2>&1)
rc=$?
[ $rc -eq 0 ] || echo "ucx_bench: client ($TLS) exited with $rc: $(echo "$out" | tail -2)" >&2
# Result rows: NAME iters typical avg overall bw_avg bw_overall mr_avg mr_overall
echo "$out" | awk -v tr="$TLS" '
	NF == 9 && $1 ~ /^[a-z]+_[0-9]+$/ {
		split($1, p, "_")
		if (p[1] == "lat") printf "ucx_tag %s %s lat_us %.2f us\n", tr, p[2], $3
		else printf "ucx_%s %s %s bw_MBps %.2f MBps\n", p[1], tr, p[2], $7 * 1.048576
	}'
# The server leaves by itself after the batch; wait for it (3 s at most).
for ((i = 0; i < 30; i++)); do
	kill -0 "$SRV" 2> /dev/null || break
	sleep 0.1
done
exit 0
