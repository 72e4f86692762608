#!/usr/bin/env bash
# timeline.sh - where the time of one long send goes, phase by phase, over
# tcp: libripc's ripc_long_bw (one in flight, the server answers) and the
# raw pull (fi_rma_bench -U), each pair run under an LD_PRELOAD shim that
# timestamps the socket, wait and timer calls of both processes (shim.c).
# Prints the median (p25-p75, p90, mean) of each phase in microseconds,
# within each process and across the two (a message's delivery and its
# discovery by the other side), and the timer and yield calls per
# request.  The shim slows every call a little (two clock reads), so
# compare the two systems with each other, not with run_bench.sh's
# figures.  Side experiment of perf_notes.md.  Both systems go through
# rxm's passthrough unless FI_OFI_RXM_ENABLE_PASSTHRU=0 is set, as in
# run_bench.sh.
#
#   test/benchmarks/timeline/timeline.sh [-S bytes] [-t seconds] [-r rounds] [ripc|raw]...
#
# Environment: BUILD_DIR (default build-bench, built by run_bench.sh or
# `make`), CC; extra VAR=VALUE pairs in RIPC_ENV go to libripc's processes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
B=${BUILD_DIR:-$src/build-bench}
size=65536 secs=1 rounds=1
while getopts "S:t:r:" o; do
	case $o in
	S) size=$OPTARG ;;
	t) secs=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) sed -n '2,16p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
systems=${*:-ripc raw}
. "$here/setup.sh"
timeline_setup timeline \
	"$B/test/benchmarks/.libs/ripc_long_bw" "$B/test/benchmarks/raw/fi_rma_bench"

run_pair() { # SYSTEM OUTDIR
	local sys=$1 o=$2 s c k id port
	mkdir -p "$o"
	if [ "$sys" = ripc ]; then
		rm -f "$work/ready"
		env ${RIPC_ENV:-} LD_PRELOAD="$shim" TIMELINE_OUT="$o/srv" taskset -c 0 \
			"$B/test/benchmarks/.libs/ripc_long_bw" -s -p tcp -r "$work/ready" \
			-S "$size" -W 1 -x window -T 60 > /dev/null &
		s=$!
		pids+=("$s")
		for k in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.05; done
		id=$(cat "$work/ready" 2> /dev/null) || return 1
		env ${RIPC_ENV:-} LD_PRELOAD="$shim" TIMELINE_OUT="$o/cli" taskset -c 1 \
			"$B/test/benchmarks/.libs/ripc_long_bw" -p tcp -S "$size" -W 1 \
			-n 1000000 -t "$secs" -T 60 "$id" | grep bw_MBps
		# The server ends on the client's BYE and writes its file.
		for k in $(seq 50); do kill -0 "$s" 2>/dev/null || break; sleep 0.1; done
	else
		port=$((40000 + RANDOM % 20000))
		LD_PRELOAD="$shim" TIMELINE_OUT="$o/srv" taskset -c 0 \
			"$B/test/benchmarks/raw/fi_rma_bench" -p tcp -s -P "$port" -T 60 \
			-R "" -U "$size" > /dev/null &
		s=$!
		pids+=("$s")
		sleep 0.3
		LD_PRELOAD="$shim" TIMELINE_OUT="$o/cli" taskset -c 1 \
			"$B/test/benchmarks/raw/fi_rma_bench" -p tcp -P "$port" -T 60 \
			-t "$secs" -L "" -R "" -U "$size" | grep bw_MBps
		for k in $(seq 50); do kill -0 "$s" 2>/dev/null || break; sleep 0.1; done
	fi
	kill "$s" 2>/dev/null
	wait "$s" 2>/dev/null
}

# Point events "time kind call ret" of one process, in time order.
points() {
	awk '{ print $1, "S", $4, $6; print $2, "E", $4, $6 }' "$@" | sort -n -k1,1
}

# The shim's names for a socket send and receive, for the awk programs
# below.
sockcalls='
	function issend(c) { return c == "send" || c == "sendto" || c == "sendmsg" }
	function isrecv(c) { return c == "recv" || c == "recvfrom" || c == "recvmsg" }
'

# The phases, one "phase value_us" line per transfer.  REQ and ANS are the
# sizes on the wire (tcp header, rxm header without the passthrough,
# message) of the sender's request and the reader's answer; 40 is tcp's
# read request.
phases_cli() { # REQ ANS SIZE
	awk -v req="$1" -v ans="$2" -v big="$3" "$sockcalls"'
	$2 == "E" && isrecv($3) && $4 == ans { a = $1; r = 0 }
	$2 == "E" && $3 == "ripc_receive_timeout" && a { print "C1\tanswer in -> receive returns\t" ($1 - a) / 1000; r = $1 }
	$2 == "S" && $3 == "ripc_send_long" && r { print "C2\treceive returns -> send call\t" ($1 - r) / 1000; l = $1; r = 0 }
	$2 == "S" && issend($3) && $4 == req {
		if (a) print "C0\tanswer in -> request out\t" ($1 - a) / 1000
		if (l) print "C3\tsend call -> request out\t" ($1 - l) / 1000
		if (p) print "A\tperiod (request to request)\t" ($1 - p) / 1000
		p = $1; a = 0; l = 0; rs = $1 }
	$2 == "E" && issend($3) && $4 == req && rs { print "D1\trequest send syscall\t" ($1 - rs) / 1000; rs = 0 }
	$2 == "E" && isrecv($3) && $4 == 40 { q = $1 }
	$2 == "S" && issend($3) && $4 >= big && q { print "C4\treadreq in -> data out\t" ($1 - q) / 1000; q = 0; ds = $1 }
	$2 == "E" && issend($3) && $4 >= big && ds { print "D2\tdata send syscall\t" ($1 - ds) / 1000; ds = 0 }
	'
}
phases_srv() { # REQ ANS
	awk -v req="$1" -v ans="$2" "$sockcalls"'
	$2 == "E" && isrecv($3) && $4 == req { g = $1; d = 0 }
	$2 == "S" && issend($3) && $4 == 40 && g { print "S1\trequest in -> readreq out\t" ($1 - g) / 1000; g = 0; w = 1 }
	$2 == "E" && isrecv($3) && $4 > 0 && w { d = $1 }
	$2 == "E" && $3 == "ripc_receive_timeout" && d { print "S2\tdata in -> receive returns\t" ($1 - d) / 1000 }
	$2 == "S" && issend($3) && $4 == ans && d { print "S3\tdata in -> answer out\t" ($1 - d) / 1000; d = 0; w = 0; as = $1 }
	$2 == "E" && issend($3) && $4 == ans && as { print "D3\tanswer send syscall\t" ($1 - as) / 1000; as = 0 }
	'
}
# Across the two processes (both clocks are CLOCK_MONOTONIC): from the end
# of one side's send to the end of the other side's receive of it - the
# kernel's delivery plus the time the receiving side takes to notice (its
# poll loop, its wait fd's epoll sets).  The data's is from the end of
# the sender's sendmsg to the end of the reader's last receive of it.
phases_cross() { # CLIFILE SRVFILE REQ ANS SIZE
	{ awk '{ print $1, $2, "C", $4, $6 }' "$1"
	  awk '{ print $1, $2, "S", $4, $6 }' "$2"; } | sort -n -k1,1 |
	awk -v req="$3" -v ans="$4" -v big="$5" "$sockcalls"'
	function out(k, v) { if (v > 0) print k "\t" v / 1000 }
	$3 == "C" && issend($4) && $5 == req { r = $2; st = 1 }
	$3 == "S" && isrecv($4) && $5 == req && st == 1 { out("X1\trequest out -> in (reader)", $2 - r); st = 2 }
	$3 == "S" && issend($4) && $5 == 40 && st == 2 { r = $2; st = 3 }
	$3 == "C" && isrecv($4) && $5 == 40 && st == 3 { out("X2\treadreq out -> in (sender)", $2 - r); st = 4 }
	$3 == "C" && issend($4) && $5 >= big && st == 4 { r = $2; d = 0; st = 5 }
	$3 == "S" && isrecv($4) && $5 > 0 && st == 5 { d = $2 }
	$3 == "S" && issend($4) && $5 == ans && st == 5 { if (d) out("X3\tdata out -> all in (reader)", d - r); r = $2; st = 6 }
	$3 == "C" && isrecv($4) && $5 == ans && st == 6 { out("X4\tanswer out -> in (sender)", $2 - r); st = 0 }
	'
}
quantiles() { # reads "key<TAB>phase<TAB>value" lines; median (p25-p75, p90, mean) per phase
	sort -t "$(printf '\t')" -k1,1 -k3,3g | awk -F '\t' '
	function flush() { if (n) printf "  %-32s %8.2f us  (p25 %.2f, p75 %.2f, p90 %.2f; mean %.2f; n=%d)\n", name, v[int(n / 2)], v[int(n / 4)], v[int(3 * n / 4)], v[int(9 * n / 10)], sum / n, n; n = 0; sum = 0 }
	{ if ($2 != name) { flush(); name = $2 } v[n++] = $3; sum += $3 }
	END { flush() }'
}
# Calls that may stall a step (a tail the medians above do not show): per
# process and thread, how many there were per request and how long they took.
stalls() { # FILE REQUESTS WHO
	awk -v n="$2" -v who="$3" '
	$4 == "timerfd_settime" || $4 == "sched_yield" { k = $4 " (thread " $3 ")"; c[k]++; t[k] += ($2 - $1) / 1000; if (($2 - $1) / 1000 > m[k]) m[k] = ($2 - $1) / 1000 }
	END { for (k in c) printf "  %s %-34s %6.3f per request, mean %.2f us, max %.1f\n", who, k, c[k] / (n ? n : 1), t[k] / c[k], m[k] }' "$1"
}

for r in $(seq "$rounds"); do
	for sys in $systems; do
		o=$work/$sys-$r
		run_pair "$sys" "$o" || { echo "$sys: the pair did not run" >&2; continue; }
		# The request's and the answer's sizes on the wire (tcp's
		# header and, without the passthrough, rxm's).
		if [ "$FI_OFI_RXM_ENABLE_PASSTHRU" = 0 ]; then
			if [ "$sys" = ripc ]; then req=176 ans=168; else req=112 ans=88; fi
		else
			if [ "$sys" = ripc ]; then req=112 ans=104; else req=48 ans=24; fi
		fi
		cf=$(ls "$o"/cli.* 2>/dev/null) sf=$(ls "$o"/srv.* 2>/dev/null)
		[ -n "$cf" ] && [ -n "$sf" ] || { echo "$sys: no timeline written" >&2; continue; }
		echo "$sys, round $r ($size bytes; sender = client on CPU 1, reader = server on CPU 0):"
		{ points "$cf" | phases_cli "$req" "$ans" "$size"
		  points "$sf" | phases_srv "$req" "$ans"
		  phases_cross "$cf" "$sf" "$req" "$ans" "$size"; } |
			quantiles
		nreq=$(awk -v req="$req" '($4 == "send" || $4 == "sendto" || $4 == "sendmsg") && $6 == req' "$cf" | wc -l)
		stalls "$cf" "$nreq" client
		stalls "$sf" "$nreq" server
	done
done
