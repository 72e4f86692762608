#!/usr/bin/env bash
# stamps.sh - where the time of a short-message round trip goes, step by
# step: libripc's ripc_pingpong and the raw fi_rma_bench -M ping-pong (over
# tcp also the raw program with a CQ wait fd, as libripc's CQ has one),
# each built with TSC stamps at fixed points (stamps.patch, stamps.h) in a
# scratch copy of HEAD, run in fresh pinned pairs (server CPU 0, client
# CPU 1), alternating, and summarised by stamps.py (medians per step, per
# process).  Side experiment of perf_notes.md ("Short messages").
#
#   test/benchmarks/stamps/stamps.sh [-p shm|tcp] [-S bytes] [-r rounds] [-t seconds]
#
# -S: a size both programs send with fi_inject (8 by default; only that
# path carries stamps 2 and 3).
# The scratch build is kept in build-stamps/ (rebuilt when HEAD, the patch
# or stamps.h change).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/pids.sh"
src=$(cd "$here/../../.." && pwd)
prov=shm size=8 rounds=2 secs=5
while getopts "p:S:r:t:" o; do
	case $o in
	p) prov=$OPTARG ;;
	S) size=$OPTARG ;;
	r) rounds=$OPTARG ;;
	t) secs=$OPTARG ;;
	*) sed -n '2,15p' "$0"; exit 2 ;;
	esac
done
B=$src/build-stamps
head=$(git -C "$src" rev-parse HEAD 2>/dev/null) ||
	{ echo "stamps.sh builds a copy of HEAD: run it in a git checkout" >&2; exit 1; }
head="$head $(cat "$here/stamps.patch" "$here/stamps.h" | sha1sum | cut -c1-12)"
if [ "$(cat "$B/.stamps-head" 2>/dev/null)" != "$head" ]; then
	echo "building HEAD ${head:0:7} with stamps in $B ..." >&2
	rm -rf "$B" && mkdir -p "$B/src" || exit 1
	git -C "$src" archive HEAD | tar -x -C "$B/src" || exit 1
	mkdir -p "$B/src/test/benchmarks/stamps" &&
		cp "$here/stamps.h" "$B/src/test/benchmarks/stamps/" || exit 1
	(cd "$B/src" && patch -s -p1 < "$here/stamps.patch" && ./autogen.sh &&
		mkdir build && cd build && ../configure -q &&
		make -j2 && make -j2 test/benchmarks/ripc_pingpong \
			test/benchmarks/raw/fi_rma_bench) > "$B/build.log" 2>&1 ||
		{ echo "build failed: $B/build.log" >&2; exit 1; }
	echo "$head" > "$B/.stamps-head"
fi
bin=$B/src/build/test/benchmarks
work=$(mktemp -d /tmp/ripc-stamps.XXXXXX)
pids=()
cleanup() {
	# Only those still ours: a pid that ended may be anybody's by now
	# (test/scripts/pids.sh).
	pid_kill_children TERM "${pids[@]}"
	rm -rf "$work"
}
trap cleanup EXIT
export FI_TCP_IFACE=lo RIPC_RESOLVER=0 RIPC_TCP_ADDR=127.0.0.1

ripc_pair() { # DIR
	local rf=$1/ready s i
	mkdir -p "$1/ripc-srv" "$1/ripc-cli"
	STAMPS_DIR=$1/ripc-srv taskset -c 0 "$bin/ripc_pingpong" -s -p "$prov" \
		-r "$rf" -T $((secs * 4 + 30)) > /dev/null 2>&1 &
	s=$!; pids+=("$s")
	for i in $(seq 100); do [ -s "$rf" ] && break; sleep 0.1; done
	STAMPS_DIR=$1/ripc-cli taskset -c 1 "$bin/ripc_pingpong" -p "$prov" \
		-S "$size" -n 300000 -w 1000 -t "$secs" "$(cat "$rf")"
	kill "$s" 2>/dev/null; wait "$s" 2>/dev/null
}

raw_pair() { # DIR NAME [WAIT_FD]
	local port=$((20000 + RANDOM % 10000)) s
	mkdir -p "$1/$2-srv" "$1/$2-cli"
	FI_RMA_BENCH_WAIT_FD=${3:-0} STAMPS_DIR=$1/$2-srv taskset -c 0 \
		"$bin/raw/fi_rma_bench" -p "$prov" -s -P "$port" \
		-T $((secs * 4 + 30)) -R '' -U '' > /dev/null 2>&1 &
	s=$!; pids+=("$s")
	sleep 0.5
	FI_RMA_BENCH_WAIT_FD=${3:-0} STAMPS_DIR=$1/$2-cli taskset -c 1 \
		"$bin/raw/fi_rma_bench" -p "$prov" -P "$port" \
		-T $((secs * 4 + 30)) -M -n 300000 -t "$secs" -L "$size" \
		-R '' -U '' | sed "s/^fi_rdm_msg/$2/"
	kill "$s" 2>/dev/null; wait "$s" 2>/dev/null
}

for r in $(seq "$rounds"); do
	d=$work/$r
	echo "== round $r"
	raw_pair "$d" raw
	dirs="$d/raw-cli $d/raw-srv"
	if [ "$prov" = tcp ]; then
		# libripc's tcp CQ has a wait fd (the progress thread sleeps
		# on it); the raw program with one too (perf_notes.md).
		raw_pair "$d" rawfd 1
		dirs="$dirs $d/rawfd-cli $d/rawfd-srv"
	fi
	ripc_pair "$d"
	python3 "$here/stamps.py" $dirs "$d/ripc-cli" "$d/ripc-srv"
done
