#!/usr/bin/env bash
# valgrind-suite.sh - the conformance suite under valgrind memcheck.
#
# Usage: test/scripts/valgrind-suite.sh [-b bindir] [-T seconds] [-s scale]
#                                        [-e regex] [-k] [provider ...]
#   -b  functional test programs (default: build-vg/test/functional, which
#       is configured with --disable-shared and built first if missing, so
#       that valgrind runs the programs and not libtool's wrapper scripts)
#   -T  client timeout per test in seconds (default 300: valgrind makes the
#       programs 20-50 times slower; the slowest test takes ~40 s)
#   -s  divide every iteration count (-I) by this (default 10, at least 3
#       iterations are kept): the tests keep their coverage, not their
#       repetitions
#   -e  exclude tests matching the regex (as runripctests.sh -e)
#   -k  keep the valgrind logs even when everything passed
#   providers default to "shm tcp".
#   RIPC_VG_ARGS adds valgrind options (e.g. --gen-suppressions=all).
#
# Every server and client that test/scripts/runripctests.sh starts runs as
#   valgrind --tool=memcheck --leak-check=full
#            --errors-for-leak-kinds=definite --error-exitcode=99
#            --suppressions=test/valgrind.supp
# so a memory error or a definite leak makes that process exit 99 and the
# test fail.  Each process writes its own log (test, provider, role, pid);
# logs with errors are printed at the end.  Output: the runner's lines, the
# valgrind summary, and a last line "N passed, N failed".
set -u

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
here=$(dirname "$self")
top=$(cd "$here/../.." && pwd)

# ---- wrapper mode: valgrind-suite.sh --exec <program> <args...> ----------
# The runner starts "<wrapper> <program> <args>"; this turns that into a
# valgrind command line.  It exec()s, so the pid the runner watches and
# kills is the valgrind process itself (which is also the pid libfabric shm
# names its /dev/shm files after).
if [ "${1:-}" = --exec ]; then
	shift
	prog=$1
	shift
	name=$(basename "$prog") prov=x role=client extra=
	args=()
	while [ $# -gt 0 ]; do
		case $1 in
		-I)
			n=$(($2 / ${RIPC_VG_SCALE:-10}))
			[ "$n" -lt 3 ] && n=$((${2} < 3 ? ${2} : 3))
			args+=(-I "$n")
			shift 2
			continue ;;
		-p) prov=$2 ;;
		-r) role=server ;;
		-x) extra=-$2 ;;
		esac
		args+=("$1")
		shift
	done
	vg=(valgrind --tool=memcheck --leak-check=full
		--errors-for-leak-kinds=definite --error-exitcode=99
		--num-callers=40 --track-origins=yes
		# valgrind runs one thread at a time; without fair scheduling
		# an application thread that spins (as ripc_long's sender does
		# on purpose) starves the library's progress thread for long
		# stretches, and timeouts fire that never fire natively.
		--fair-sched=yes
		--suppressions="$top/test/valgrind.supp"
		--log-file="${RIPC_VG_LOGDIR:-/tmp}/$name$extra-$prov-$role.%p.log")
	# shellcheck disable=SC2206
	vg+=(${RIPC_VG_ARGS:-}) # e.g. --gen-suppressions=all
	# A libtool wrapper script: let libtool run the real binary.
	if head -c 2 "$prog" | grep -q '#!'; then
		exec "$(dirname "$prog")/../../libtool" --mode=execute \
			"${vg[@]}" "$prog" "${args[@]}"
	fi
	exec "${vg[@]}" "$prog" "${args[@]}"
fi

# ---- suite mode -----------------------------------------------------------
bindir=
timeout=300
scale=10
# The 1 GiB item would take minutes under memcheck and adds no coverage
# over 256 MiB.
exclude='-S 1073741824'
keep=0
while getopts "b:T:s:e:kh" o; do
	case $o in
	b) bindir=$OPTARG ;;
	T) timeout=$OPTARG ;;
	s) scale=$OPTARG ;;
	e) exclude="$exclude|$OPTARG" ;;
	k) keep=1 ;;
	*) sed -n '2,28p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
providers=${*:-shm tcp}

command -v valgrind >/dev/null || { echo "valgrind not installed"; exit 1; }
if [ -z "$bindir" ]; then
	bindir=$top/build-vg/test/functional
	if [ ! -x "$bindir/ripc_hostile" ] || [ ! -x "$bindir/ripc_lifecycle" ]; then
		echo "# building $top/build-vg (--disable-shared)"
		mkdir -p "$top/build-vg"
		(cd "$top/build-vg" &&
			{ [ -f Makefile ] || ../configure -q --disable-shared; } &&
			make -j"$(nproc)" check TESTS=) >/dev/null 2>&1 ||
			{ echo "build of build-vg failed"; exit 1; }
	fi
fi

logdir=$(mktemp -d /tmp/ripc-vg.XXXXXX) || exit 1
export RIPC_VG_LOGDIR=$logdir RIPC_VG_SCALE=$scale
out=$logdir/suite.out

echo "# valgrind memcheck suite: $bindir, iterations / $scale, logs in $logdir"
# The providers at once (-j): memcheck runs a process's threads one at a
# time and a test's two processes mostly take turns, so one provider keeps
# about one core busy; two fill this machine's two (584 s -> ~300 s).
"$here/runripctests.sh" -j -b "$bindir" -T "$timeout" \
	${exclude:+-e "$exclude"} -w "$self --exec" $providers | tee "$out"
last=$(tail -n 1 "$out")
pass=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
fail=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
[ -z "$pass" ] && { pass=0; fail=1; }

# The lifecycle case whose teardown paths matter most for leaks: finalize
# racing other threads, then init again.  (Not fork: in a child forked
# from a multi-threaded process, memory that only the parent's other
# threads referenced looks lost to any leak checker.)
echo "# lifecycle under valgrind: finalize"
LC_SLOW=10 "$here/lifecycle.sh" -b "$bindir" -n 3 -c finalize \
	-w "$self --exec" $providers | tee "$out.lc"
last=$(tail -n 1 "$out.lc")
p=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
f=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
[ -z "$p" ] && { p=0; f=1; }
pass=$((pass + p)) fail=$((fail + f))

# Processes with errors or definite leaks.  A process that valgrind saw
# fail exits 99 and its test already failed; a log is still the only place
# that says what went wrong.  A process killed on timeout writes no
# summary: it is counted by the runner.
bad=0 nlogs=0
for f in "$logdir"/*.log; do
	[ -f "$f" ] || continue
	nlogs=$((nlogs + 1))
	if grep -qE 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]' "$f"; then
		bad=$((bad + 1))
		echo "# ---- valgrind: $(basename "$f")"
		# The command, the errors (before HEAP SUMMARY) and the
		# definite leak records (after it), without the banner.
		sed 's/^==[0-9]*== //' "$f" | awk '
			/^Command:/ { print; next }
			/^(Memcheck|Copyright|Using|Parent)/ { next }
			/^HEAP SUMMARY/ { heap = 1; next }
			!heap && !/^$/ { print; next }
			!heap { print; next }
			/definitely lost in loss record/ { leak = 1 }
			leak && /^$/ { leak = 0; print; next }
			leak { print }
			/^ *definitely lost:|^ERROR SUMMARY/ { print }' |
			head -n 300
	fi
done
echo "# valgrind: $nlogs process logs, $bad with errors or definite leaks"
if [ "$bad" -gt 0 ] && [ "$fail" -eq 0 ]; then
	fail=1 # errors in a process whose exit status did not show them
fi
if [ "$fail" -eq 0 ] && [ "$keep" = 0 ]; then
	rm -rf "$logdir"
else
	echo "# logs kept in $logdir"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
