#!/usr/bin/env bash
# runripctests.sh - run the libripc conformance suite (fabtests style).
#
# Usage: runripctests.sh [-b bindir] [-T seconds] [-e regex] [-w wrapper] [-v]
#                        [-j] [provider ...]
#   providers default to "shm tcp verbs"; a provider absent here reports
#   Notrun (exit 77), not Pass.  tcp-native is tcp over libfabric 1.17's
#   native provider, net (both processes with RIPC_TCP_NATIVE=1, and with
#   LSAN_OPTIONS=$RIPC_TEST_NATIVE_LSAN when that is set: net leaks by
#   itself, test/lsan-net.supp).
#   -w "cmd args" prefixes every program the runner starts (word-split),
#   e.g. a valgrind command line (test/scripts/valgrind-suite.sh).
#   -j runs each provider's tests at the same time as the others' (one
#      runner per provider, each with its own resolver port,
#      RIPC_RESOLVER_PORT + 10 + its index, so their multicast resolvers do
#      not hear each other); the output is the same, provider by provider,
#      printed when all are done.  A test's pair mostly waits (startup,
#      timeouts, a peer's answer), so two providers on two cores take
#      little longer than one.
#
# Each test is a server/client pair of one program on this host.  The
# server is started first with -r <file> and announces readiness (its
# service ID) in that file; the client gets that ID as its positional
# argument.  Every process is started in the background, watched by pid,
# and killed by pid if it outlives the timeout.  Each test gets its own
# registry (RIPC_REGISTRY) and temporary directory, removed afterwards,
# along with any /dev/shm region a killed process left.
#
# Output: one line per test (Pass / Fail / Notrun), totals, and a last
# line "N passed, N failed".
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/pids.sh"
bindir=${RIPC_TEST_BINDIR:-$here/../functional}
timeout=${RIPC_TEST_TIMEOUT:-180}
verbose=0
exclude='^$'
wrapper=''
parallel=0
opts=() # the options again, for the runners of -j

while getopts "b:T:e:w:vjh" o; do
	case $o in
	b) bindir=$OPTARG; opts+=(-b "$OPTARG") ;;
	T) timeout=$OPTARG; opts+=(-T "$OPTARG") ;;
	e) exclude=$OPTARG; opts+=(-e "$OPTARG") ;;
	w) wrapper=$OPTARG; opts+=(-w "$OPTARG") ;;
	v) verbose=1; opts+=(-v) ;;
	j) parallel=1 ;;
	*) sed -n '2,30p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
providers=${*:-shm tcp verbs}

# The summary of a run: totals, failed tests, and "N passed, N failed"
# last; the exit status.
pass=0 fail=0 notrun=0
results=()
totals() {
	echo "# ------------------------------------------------------------------"
	echo "# Total Pass    $pass"
	echo "# Total Notrun  $notrun"
	echo "# Total Fail    $fail"
	for r in "${results[@]}"; do echo "# $r"; done
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}

# -j: one runner per provider, all at once; their lines, then the sums.
if [ "$parallel" = 1 ] && [ "$(echo $providers | wc -w)" -gt 1 ]; then
	jdir=$(mktemp -d /tmp/ripcsuite.XXXXXX)
	jpids=() i=0
	for prov in $providers; do
		RIPC_RESOLVER_PORT=$((${RIPC_RESOLVER_PORT:-47473} + 10 + i)) \
			"$0" "${opts[@]}" "$prov" >"$jdir/$i" 2>&1 &
		jpids+=($!)
		i=$((i + 1))
	done
	# Each runner bounds its own tests and kills what it started.
	trap 'pid_kill_children TERM "${jpids[@]}"; rm -rf "$jdir"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	wait "${jpids[@]}"
	echo "# libripc conformance suite: providers: $providers (at once)"
	for ((k = 0; k < i; k++)); do
		grep -v '^#' "$jdir/$k" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
		x=$(sed -nE 's/^# Total Pass +([0-9]+)$/\1/p' "$jdir/$k")
		pass=$((pass + ${x:-0}))
		x=$(sed -nE 's/^# Total Notrun +([0-9]+)$/\1/p' "$jdir/$k")
		notrun=$((notrun + ${x:-0}))
		x=$(sed -nE 's/^# Total Fail +([0-9]+)$/\1/p' "$jdir/$k")
		# A runner that did not get to its totals failed as a whole.
		if [ -z "$x" ]; then
			echo "# runner $((k + 1)) of $i ended without its totals:"
			tail -n 20 "$jdir/$k"
			x=1
			results+=("FAIL the runner of provider $((k + 1)) of $i")
		fi
		fail=$((fail + x))
		while IFS= read -r l; do results+=("$l"); done \
			< <(sed -n 's/^# \(FAIL .*\)$/\1/p' "$jdir/$k")
	done
	totals
	exit
fi

# test name | extra arguments (both sides)
tests=(
	"ripc_register|"
	"ripc_resolve|"
	"ripc_short|-I 300"
	"ripc_frag|-I 400"
	"ripc_long|-x lib -I 12"
	"ripc_long|-x lib -I 1 -S 1073741824"
	"ripc_long|-x window -I 6"
	"ripc_long|-x service -I 6"
	"ripc_threads|-I 400"
	"ripc_badargs|"
	"ripc_zerolen|"
	"ripc_done|"
	"ripc_done|-x now"
	"ripc_done|-x slow"
	"ripc_takeover|"
	"ripc_busycpu|-I 300"
	"ripc_wake|"
	"ripc_wake|-x checked"
	"ripc_wake|-x nodirect"
	"ripc_wake|-x evloop"
	"ripc_wake|-x spinedge"
	"ripc_retbuf|"
	"ripc_window|"
	"ripc_window|-x nolib"
	"ripc_mcast|"
	"ripc_hostile|"
)

export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
export RIPC_TCP_ADDR=${RIPC_TCP_ADDR:-127.0.0.1}

started_pids=()

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# wait_pid pid seconds -> exit status, 124 after killing it on timeout
wait_pid() {
	local pid=$1 limit=$(($2 * 20)) ticks=0
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$ticks" -ge "$limit" ]; then
			kill -TERM "$pid" 2>/dev/null; sleep 1
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
		sleep 0.05; ticks=$((ticks + 1))
	done
	wait "$pid"
}

# shm_cleanup, and the kills below, spare a stranger that has one of our
# old pids by now (pids.sh).
shm_cleanup() { pid_shm_cleanup "$@"; }

cleanup_all() {
	pid_kill_children KILL "${started_pids[@]}"
	shm_cleanup "${started_pids[@]}"
}
# Stopped from outside: clean up and stop (a trap that only cleaned up
# let the runner go on to its next test).
trap cleanup_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run_one() {
	local prov=$1 name=$2 args=$3
	local label="$name ${args:+$args }-p $prov"
	local tmp spid cpid src crc id t0 status p=$prov penv=()

	if [ "$prov" = tcp-native ]; then
		p=tcp penv=(RIPC_TCP_NATIVE=1)
		[ -n "${RIPC_TEST_NATIVE_LSAN:-}" ] &&
			penv+=("LSAN_OPTIONS=$RIPC_TEST_NATIVE_LSAN")
	fi

	if [[ $label =~ $exclude ]] && [ "$exclude" != '^$' ]; then
		printf '%-52s %s\n' "$label:" Excluded
		return
	fi
	if [ ! -x "$bindir/$name" ]; then
		printf '%-52s %s\n' "$label:" "Fail (no binary)"
		fail=$((fail + 1)); results+=("FAIL $label")
		return
	fi
	tmp=$(mktemp -d /tmp/ripctest.XXXXXX)
	t0=$(now_ms)
	# shellcheck disable=SC2086
	export RIPC_TEST_DIR=$tmp
	env "${penv[@]}" RIPC_REGISTRY="$tmp/registry" $wrapper "$bindir/$name" \
		-p "$p" -r "$tmp/ready" $args >"$tmp/server.log" 2>&1 &
	spid=$!
	started_pids+=("$spid")
	# Wait for readiness (bounded), or for the server to exit early.
	local waited=0
	while [ ! -s "$tmp/ready" ] && kill -0 "$spid" 2>/dev/null &&
		[ "$waited" -lt 400 ]; do
		sleep 0.05; waited=$((waited + 1))
	done
	if [ -s "$tmp/ready" ]; then
		id=$(cat "$tmp/ready")
		# shellcheck disable=SC2086
		env "${penv[@]}" RIPC_REGISTRY="$tmp/registry" $wrapper \
			"$bindir/$name" -p "$p" $args "$id" >"$tmp/client.log" 2>&1 &
		cpid=$!
		started_pids+=("$cpid")
		wait_pid "$cpid" "$timeout"; crc=$?
		wait_pid "$spid" 20; src=$?
	else
		wait_pid "$spid" 5; src=$?
		crc=$src
		[ "$src" -eq 0 ] && src=1 crc=1 # exited without being ready
	fi
	shm_cleanup "$spid" "${cpid:-}"
	local dt=$(($(now_ms) - t0))
	dt=$((dt / 1000)).$(((dt % 1000) / 100))
	if [ "$src" -eq 77 ] || [ "$crc" -eq 77 ]; then
		status=Notrun; notrun=$((notrun + 1))
	elif [ "$src" -eq 0 ] && [ "$crc" -eq 0 ]; then
		status=Pass; pass=$((pass + 1))
	else
		status="Fail (server $src, client $crc)"; fail=$((fail + 1))
		results+=("FAIL $label")
	fi
	printf '%-52s %-10s %6ss\n' "$label:" "$status" "$dt"
	if [ "$verbose" = 1 ] || [[ $status == Fail* ]]; then
		sed 's/^/    server: /' "$tmp/server.log" | tail -n 20
		[ -f "$tmp/client.log" ] && sed 's/^/    client: /' "$tmp/client.log" | tail -n 20
	fi
	rm -rf "$tmp"
}

echo "# libripc conformance suite: providers: $providers"
for prov in $providers; do
	for t in "${tests[@]}"; do
		run_one "$prov" "${t%%|*}" "${t#*|}"
	done
done
totals
