#!/usr/bin/env bash
# pullgap.sh - over shm, one long message in flight: how long each pull's
# copy takes (the CMA read) and how long the reader waits between the end
# of one pull and the start of the next, for libripc (ripc_long_bw, the
# server answers) and the raw pull (fi_rma_bench -U), each in fresh pinned
# pairs with an LD_PRELOAD shim on the reader (pullgap.c).  Prints each
# pair's summary, a histogram of the gaps (percent of pulls per 1 us,
# the last bin 30 us and more) and how the slow ones (over twice the
# median) are spaced.  Side experiment of perf_notes.md ("the
# leave timer on the tick's grid").  "settime" instead times
# timerfd_settime one interval ahead, relative and on the 4 ms grid
# (settime.c), on CPU 0.
#
#   test/benchmarks/pullgap/pullgap.sh [-S bytes] [-r rounds] [ripc|raw|settime]...
#
# Environment: BUILD_DIR (default build-bench), LIB_DIR (libripc to load,
# default BUILD_DIR/.libs: another build's library against the same
# programs), CC; extra VAR=VALUE pairs in RIPC_ENV go to libripc's side.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
B=${BUILD_DIR:-$src/build-bench}
L=${LIB_DIR:-$B/.libs}
size=65536 rounds=1
while getopts "S:r:" o; do
	case $o in
	S) size=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) sed -n '2,18p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
systems=${*:-ripc raw}
for f in "$B/test/benchmarks/.libs/ripc_long_bw" "$B/test/benchmarks/raw/fi_rma_bench"; do
	[ -x "$f" ] || { echo "missing $f: build $B first" >&2; exit 1; }
done
work=$(mktemp -d /tmp/ripc-pullgap.XXXXXX)
sp=
cleanup() {
	[ -n "$sp" ] && kill "$sp" 2>/dev/null
	rm -rf "$work" /dev/shm/ripc-pullgap-$$*
}
trap cleanup EXIT
${CC:-cc} -O2 -shared -fPIC -o "$work/pullgap.so" "$here/pullgap.c" -ldl || exit 1
export FI_TCP_IFACE=lo RIPC_TCP_ADDR=127.0.0.1 RIPC_RESOLVER=0
export RIPC_REGISTRY=/dev/shm/ripc-pullgap-$$

histogram() {
	awk '{ b = int($2); if (b > 30) b = 30; h[b]++; n++ }
	     END { printf "  gaps:"; for (i = 0; i <= 30; i++)
		if (h[i] >= 0.005 * n) printf " %s%d:%.1f", i == 30 ? ">=" : "", i, 100 * h[i] / n
		print "" }' "$1"
}

# Slow cycles: gaps over twice the run's median.  Are they independent
# (spacing in pulls geometric: "indep" is what independence would give)
# or periodic, and how far apart in time (median us between the starts
# of two slow gaps in a row)?
spacing() {
	local med apart
	med=$(sort -n -k2 "$1" | awk '{ g[NR] = $2 } END { print g[int((NR + 1) / 2)] }')
	apart=$(awk -v med="$med" '$2 > 2 * med { if (t) print $3 - t; t = $3 }' "$1" |
		sort -n | awk '{ d[NR] = $1 } END { print NR ? d[int((NR + 1) / 2)] : 0 }')
	awk -v med="$med" -v apart="$apart" '
	{ n++
	  if ($2 > 2 * med) { ns++; if (last) { d = n - last; sp[d > 8 ? 8 : d]++ }; last = n } }
	END { if (ns < 2) { print "  slow cycles: " ns; exit }
	      p = ns / n; printf "  slow (gap > %.2f us): %.1f %%; spacing in pulls, %% seen/indep:", 2 * med, 100 * p
	      for (i = 1; i <= 8; i++)
		printf " %s%d:%.0f/%.0f", i == 8 ? ">=" : "", i, 100 * sp[i] / (ns - 1),
			100 * (i < 8 ? p * (1 - p) ^ (i - 1) : (1 - p) ^ 7)
	      printf "; median %.1f us apart\n", apart }' "$1"
}

stop_server() { # wait for it to leave (it writes the shim's file at exit)
	for ((i = 0; i < 50; i++)); do
		kill -0 "$sp" 2>/dev/null || break
		sleep 0.1
	done
	kill "$sp" 2>/dev/null
	wait "$sp" 2>/dev/null
	sp=
}

for ((r = 1; r <= rounds; r++)); do
	for sys in $systems; do
		out=$work/gaps.$sys.$r
		if [ "$sys" = ripc ]; then
			rm -f "$work/ready"
			env ${RIPC_ENV:-} LD_LIBRARY_PATH="$L" PULLGAP_OUT="$out" \
				LD_PRELOAD="$work/pullgap.so" taskset -c 0 \
				"$B/test/benchmarks/.libs/ripc_long_bw" -s -p shm \
				-r "$work/ready" -T 60 2> "$work/srv.log" > /dev/null &
			sp=$!
			for ((i = 0; i < 100; i++)); do
				[ -s "$work/ready" ] && break
				sleep 0.05
			done
			line=$(env ${RIPC_ENV:-} LD_LIBRARY_PATH="$L" taskset -c 1 \
				"$B/test/benchmarks/.libs/ripc_long_bw" -p shm \
				-S "$size" -W 1 -n 30000 -t 1 -T 60 \
				"$(cat "$work/ready")" | grep bw_MBps)
		elif [ "$sys" = raw ]; then
			port=$((20000 + RANDOM % 20000))
			PULLGAP_OUT="$out" LD_PRELOAD="$work/pullgap.so" taskset -c 0 \
				"$B/test/benchmarks/raw/fi_rma_bench" -p shm -s -P "$port" \
				-T 60 -R "" -U "$size" 2> "$work/srv.log" > /dev/null &
			sp=$!
			sleep 0.3
			line=$(taskset -c 1 "$B/test/benchmarks/raw/fi_rma_bench" \
				-p shm -P "$port" -T 60 -t 1 -X shm -L "" -R "" \
				-U "$size" | grep bw_MBps)
		elif [ "$sys" = settime ]; then
			${CC:-cc} -O2 -o "$work/settime" "$here/settime.c" || exit 1
			for g in "0 0" "4000000 0" "4000000 -1000" "1000000 0"; do
				taskset -c 0 "$work/settime" $g 600
			done
			continue
		else
			echo "unknown system $sys" >&2
			exit 2
		fi
		stop_server
		echo "round $r $sys: $(echo "$line" | awk '{print $5, $6}'); $(grep -h pullgap "$work/srv.log")"
		[ -s "$out" ] && histogram "$out" && spacing "$out"
	done
done
