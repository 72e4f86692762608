#!/usr/bin/env bash
# bw_rate.sh - long-send bandwidth and 64 B message rate of one libripc
# build under two environments, with the raw libfabric programs, in
# alternating rounds: ab.sh's companion for the throughput side of a
# setting (perf_notes.md 12-02, RIPC_TCP_NATIVE).  Side experiment.
#
#   test/benchmarks/ab/bw_rate.sh [-p prov] [-S sizes] [-r rounds] \
#       [-R provs] BUILD
#
# Each round: ripc_long_bw (-W 1 -x window, sizes -S, default
# 65536,1048576,16777216) and ripc_msgrate (-c 1,4) with A_ENV, then with
# B_ENV (e.g. B_ENV=RIPC_TCP_NATIVE=1), then raw/fi_rma_bench -U (the
# pull) and raw/fi_msgrate over each libfabric provider of -R (default
# tcp,net), server pinned to CPU 0, client to CPU 1.  Prints every line
# with its label (A, B, raw:<prov>) and round in front, then per label,
# program and size the median of the rounds and their range.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/pids.sh"
prov=tcp sizes=65536,1048576,16777216 rounds=4 raws=tcp,net
while getopts "p:S:r:R:" o; do
	case $o in
	p) prov=$OPTARG ;;
	S) sizes=$OPTARG ;;
	r) rounds=$OPTARG ;;
	R) raws=$OPTARG ;;
	*) sed -n '2,16p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n '2,16p' "$0"; exit 2; }
T=$(cd "$1" && pwd) || exit 2
bin=$T/test/benchmarks/.libs raw=$T/test/benchmarks/raw
work=$(mktemp -d /tmp/ripc-bwrate.XXXXXX)
pids=()
cleanup() {
	pid_kill_children TERM "${pids[@]}"
	pid_shm_cleanup "${pids[@]}"
	rm -rf "$work"
}
trap cleanup EXIT
export LD_LIBRARY_PATH=$T/.libs FI_TCP_IFACE=lo RIPC_RESOLVER=0 \
	RIPC_TCP_ADDR=127.0.0.1 FI_OFI_RXM_ENABLE_PASSTHRU=1

lib() { # LABEL ENV PROGRAM SERVER_ARGS CLIENT_ARGS (args: words)
	local label=$1 env=$2 prog=$3 sa=$4 ca=$5 sp i
	rm -f "$work/ready"
	# shellcheck disable=SC2086 # ENV and ARGS: words
	taskset -c 0 env $env RIPC_REGISTRY="$work/reg" "$bin/$prog" -s \
		-p "$prov" -r "$work/ready" -T 120 $sa > "$work/srv.log" 2>&1 &
	sp=$!
	pids+=("$sp")
	for ((i = 0; i < 200; i++)); do
		[ -s "$work/ready" ] && break
		sleep 0.05
	done
	[ -s "$work/ready" ] || { echo "$label: $prog server did not start" >&2; return; }
	# shellcheck disable=SC2086
	taskset -c 1 env $env RIPC_REGISTRY="$work/reg" "$bin/$prog" \
		-p "$prov" -T 120 $ca "$(cat "$work/ready")" 2>> "$work/cli.log" |
		sed "s/^/$label r$r /" | tee -a "$work/all"
	pid_leave_or_term "$sp"
}

rawp() { # PROVIDER PROGRAM, then: -- SERVER_ARGS... -- CLIENT_ARGS...
	local p=$1 prog=$2 port sp sa=() ca=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do sa+=("$1"); shift; done
	shift
	ca=("$@")
	port=$((20000 + RANDOM % 20000))
	taskset -c 0 "$raw/$prog" -p "$p" -s -P "$port" -T 120 "${sa[@]}" \
		> "$work/rsrv.log" 2>&1 &
	sp=$!
	pids+=("$sp")
	sleep 0.3
	taskset -c 1 "$raw/$prog" -p "$p" -P "$port" -T 120 -X "$p" "${ca[@]}" \
		2>> "$work/cli.log" | sed "s/^/raw:${p%%;*} r$r /" | tee -a "$work/all"
	pid_leave_or_term "$sp"
}

for ((r = 1; r <= rounds; r++)); do
	for ab in A B; do
		[ $ab = A ] && env=${A_ENV:-} || env=${B_ENV:-}
		lib $ab "$env" ripc_long_bw "-S $sizes -W 1 -x window" \
			"-S $sizes -W 1 -n 100000 -t 0.5"
		lib $ab "$env" ripc_msgrate "" "-c 1,4 -t 0.5"
	done
	IFS=, read -r -a rp <<< "$raws"
	for p in "${rp[@]}"; do
		rawp "$p" fi_rma_bench -- -R "" -U "$sizes" -- -t 0.5 -L "" -R "" -U "$sizes"
		rawp "$p" fi_msgrate -- -c 1,4 -- -c 1,4 -t 0.5
	done
done
echo "# medians over $rounds rounds (range)"
awk '$5 ~ /^[0-9]+$/ { k = $1 " " $3 " " $5 " " $6; v[k] = v[k] " " $7 }
     END { for (k in v) print k, v[k] }' "$work/all" | sort -k3n -k2 -k1 |
	while read -r label sys size unit rest; do
		echo "$rest" | tr ' ' '\n' | sort -n |
			awk -v l="$label" -v s="$sys" -v z="$size" -v u="$unit" '{ x[NR] = $1 }
			END { m = NR % 2 ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
			      printf "%-8s %-26s %9s %s median %.1f (%.1f-%.1f)\n", l, s, z, u, m, x[1], x[NR] }'
	done
