#!/usr/bin/env bash
# ab.sh - two builds of libripc, pair against pair, alternating: the A/B of
# a change to the message path, in one sitting, so that both builds see
# the same machine (on this shared host a figure is only comparable with
# one taken minutes from it).  Side experiment of perf_notes.md.
#
#   test/benchmarks/ab/ab.sh [-p shm|tcp] [-S sizes] [-r rounds] [-x args] \
#       [-R provs] BUILD_A BUILD_B
#
# BUILD_A, BUILD_B: build trees (configured and built, e.g. one of
# `git worktree add /tmp/base HEAD~1`); each pair runs that tree's
# ripc_pingpong with that tree's library, the server pinned to CPU 0 and
# the client to CPU 1 (as run_bench.sh).  -S the client's sizes (8,16384),
# -r rounds (6), -x more client options.  Prints every pair's lines with
# the build and round in front, then per build and size the median of
# the rounds and their range.  The environment reaches both sides (e.g.
# RIPC_FRAG_MAX), so one tree twice with a variable set for one of them is
# `A_ENV=... B_ENV=...`.  -R adds, to every round, a pair of the raw
# libfabric program (BUILD_A's raw/fi_rma_bench -M, pinned alike) per
# provider named, comma separated, e.g. -R 'tcp,net,net@wfd' (a provider
# name with a ';' works too); its label is raw:<provider>.  With @wfd its
# CQ has a wait fd as libripc's does (FI_RMA_BENCH_WAIT_FD=1).  rxm's
# passthrough is on for it, as libripc and run_bench.sh have it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/pids.sh"
prov=shm sizes=8,16384 rounds=6 extra="" raws=""
while getopts "p:S:r:x:R:" o; do
	case $o in
	R) raws=$OPTARG ;;
	p) prov=$OPTARG ;;
	S) sizes=$OPTARG ;;
	r) rounds=$OPTARG ;;
	x) extra=$OPTARG ;;
	*) sed -n '2,23p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { sed -n '2,23p' "$0"; exit 2; }
A=$(cd "$1" && pwd) && B=$(cd "$2" && pwd) || exit 2
for t in "$A" "$B"; do
	[ -x "$t/test/benchmarks/.libs/ripc_pingpong" ] || {
		echo "$t: build test/benchmarks/ripc_pingpong there first" >&2
		exit 1
	}
done
work=$(mktemp -d /tmp/ripc-ab.XXXXXX)
pids=()
cleanup() {
	pid_kill_children TERM "${pids[@]}"
	pid_shm_cleanup "${pids[@]}"
	rm -rf "$work"
}
trap cleanup EXIT
export FI_TCP_IFACE=lo RIPC_RESOLVER=0 RIPC_TCP_ADDR=127.0.0.1

pair() { # LABEL TREE ENV: one server/client pair, lines to stdout and all
	local label=$1 tree=$2 env=$3 rf=$work/ready sp i
	local prog=(env $env LD_LIBRARY_PATH="$tree/.libs"
		    RIPC_REGISTRY="$work/reg.$label"
		    "$tree/test/benchmarks/.libs/ripc_pingpong")
	rm -f "$rf"
	taskset -c 0 "${prog[@]}" -s -p "$prov" -r "$rf" -T 120 \
		> "$work/srv.log" 2>&1 &
	sp=$!
	pids+=("$sp")
	for ((i = 0; i < 200; i++)); do
		[ -s "$rf" ] && break
		kill -0 "$sp" 2>/dev/null || break
		sleep 0.05
	done
	[ -s "$rf" ] || { echo "$label: server did not start" >&2; return 1; }
	# shellcheck disable=SC2086 # -x: options, word-split on purpose
	taskset -c 1 "${prog[@]}" -p "$prov" -S "$sizes" -n 20000 -w 1000 \
		-t 0.5 -T 120 $extra "$(cat "$rf")" 2>> "$work/cli.log" |
		sed "s/^/$label r$r /" | tee -a "$work/all"
	pid_leave_or_term "$sp"
	return 0
}

raw_pair() { # PROVIDER[@wfd]: the raw program's pair, labelled raw:...
	local p=${1%@wfd} port sp rb=$A/test/benchmarks/raw/fi_rma_bench
	local label=raw:${1%%;*} renv=(FI_OFI_RXM_ENABLE_PASSTHRU=1)
	[ "$p" != "$1" ] && renv+=(FI_RMA_BENCH_WAIT_FD=1)
	port=$((20000 + RANDOM % 20000))
	taskset -c 0 env "${renv[@]}" "$rb" -p "$p" -s -P "$port" -T 120 -R "" \
		> "$work/rsrv.log" 2>&1 &
	sp=$!
	pids+=("$sp")
	sleep 0.3
	taskset -c 1 env "${renv[@]}" "$rb" -p "$p" -P "$port" -T 120 -M \
		-n 20000 -t 0.5 -L "$sizes" -R "" 2>> "$work/cli.log" |
		sed "s/^/$label r$r /" | tee -a "$work/all"
	pid_leave_or_term "$sp"
}

for ((r = 1; r <= rounds; r++)); do
	pair A "$A" "${A_ENV:-}"
	pair B "$B" "${B_ENV:-}"
	IFS=, read -r -a rp <<< "$raws"
	for p in "${rp[@]}"; do
		raw_pair "$p"
	done
done
echo "# medians over $rounds rounds (range), one-way us"
awk '$6 == "lat_us" { k = $1 " " $5; v[k] = v[k] " " $7 }
     END { for (k in v) print k, v[k] }' "$work/all" | sort -k2n -k1 |
	while read -r label size rest; do
		echo "$rest" | tr ' ' '\n' | sort -n |
			awk -v l="$label" -v s="$size" '{ x[NR] = $1 }
			END { m = NR % 2 ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
			      printf "%s %s B: median %.2f (%.2f-%.2f)\n", l, s, m, x[1], x[NR] }'
	done
