#!/usr/bin/env bash
# pingpong.sh - where the time of one tcp ping-pong message goes, one way,
# phase by phase: libripc's ripc_pingpong, the raw fi_rma_bench -M and the
# raw program with a CQ wait fd (as libripc's CQ has one), each pair run
# pinned (server CPU 0, client CPU 1) under the LD_PRELOAD shim of
# timeline.sh (shim.c), which timestamps both processes' socket calls and
# libripc's send and receive calls.  pingpong.py lines the two processes
# up and prints, per one-way trip, the median (p25, p75, mean) of: the
# sender's send system call, from its end to the receiver's first read,
# the receiver's reads of the message, and from the last read to the
# receiver's own send (its library's work, libripc's gather copy
# included); for libripc also that last phase's parts (the receive's
# return, the application, the send call up to its system call).  The
# shim costs two clock reads a call, so compare the systems with each
# other, not with run_bench.sh.  Side experiment of perf_notes.md ("tcp
# 64 KiB latency, phase by phase").
#
#   test/benchmarks/timeline/pingpong.sh [-S bytes] [-n round_trips] [-r rounds] [ripc|raw|rawfd]...
#
# Environment: BUILD_DIR (default build-bench), CC; extra VAR=VALUE pairs
# in RIPC_ENV go to libripc's processes (RIPC_RX_DEPTH=2, ...).
# -n: libripc's round trips; the raw program makes a quarter of them from
# 64 KiB up (its own rule), plus a tenth of warm-up.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
B=${BUILD_DIR:-$src/build-bench}
size=65536 iters=5000 rounds=1
while getopts "S:n:r:" o; do
	case $o in
	S) size=$OPTARG ;;
	n) iters=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) sed -n '2,23p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
systems=${*:-ripc raw rawfd}
. "$here/setup.sh"
timeline_setup pptimeline \
	"$B/test/benchmarks/.libs/ripc_pingpong" "$B/test/benchmarks/raw/fi_rma_bench"

run_pair() { # SYSTEM OUTDIR
	local sys=$1 o=$2 s k id port wfd=
	mkdir -p "$o"
	if [ "$sys" = ripc ]; then
		rm -f "$work/ready"
		env ${RIPC_ENV:-} LD_PRELOAD="$shim" TIMELINE_OUT="$o/srv" taskset -c 0 \
			"$B/test/benchmarks/.libs/ripc_pingpong" -s -p tcp -r "$work/ready" -T 60 > /dev/null &
		s=$!
		pids+=("$s")
		for k in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.05; done
		id=$(cat "$work/ready" 2> /dev/null) || return 1
		env ${RIPC_ENV:-} LD_PRELOAD="$shim" TIMELINE_OUT="$o/cli" taskset -c 1 \
			"$B/test/benchmarks/.libs/ripc_pingpong" -p tcp -S "$size" -n "$iters" \
			-w 500 -t 10 -T 60 "$id" | grep lat_us
	else
		[ "$sys" = rawfd ] && wfd=1
		port=$((40000 + RANDOM % 20000))
		FI_RMA_BENCH_WAIT_FD=$wfd LD_PRELOAD="$shim" TIMELINE_OUT="$o/srv" taskset -c 0 \
			"$B/test/benchmarks/raw/fi_rma_bench" -p tcp -s -P "$port" -T 60 \
			-R "" -U "" > /dev/null &
		s=$!
		pids+=("$s")
		sleep 0.3
		FI_RMA_BENCH_WAIT_FD=$wfd LD_PRELOAD="$shim" TIMELINE_OUT="$o/cli" taskset -c 1 \
			"$B/test/benchmarks/raw/fi_rma_bench" -p tcp -P "$port" -T 60 -M \
			-n "$iters" -t 10 -L "$size" -R "" -U "" | grep lat_us
	fi
	# Both servers end when their client does and then write their file.
	for k in $(seq 50); do kill -0 "$s" 2>/dev/null || break; sleep 0.1; done
	kill "$s" 2>/dev/null
	wait "$s" 2>/dev/null
}

for r in $(seq "$rounds"); do
	for sys in $systems; do
		o=$work/$sys-$r
		run_pair "$sys" "$o" || { echo "$sys: the pair did not run" >&2; continue; }
		cf=$(ls "$o"/cli.* 2>/dev/null) sf=$(ls "$o"/srv.* 2>/dev/null)
		[ -n "$cf" ] && [ -n "$sf" ] || { echo "$sys: no timeline written" >&2; continue; }
		echo "$sys, round $r ($size bytes, one way; client CPU 1, server CPU 0):"
		python3 "$here/pingpong.py" "$cf" "$sf" "$size"
	done
done
