#!/usr/bin/env bash
# instr.sh - instructions per message, function by function: one side of a
# libripc benchmark pair under callgrind, run twice (-n A and -n B
# messages), the other side native; the difference of the two runs over
# B - A leaves start-up, warm-up and exit out.  Deterministic where
# wall-clock A/Bs on this host are not: a change of a few hundred
# instructions is plain here and lost in the noise of a timed run.  Side
# experiment of perf_notes.md ("Where the overhead comes from").
#
#   test/benchmarks/instr/instr.sh [-p shm|tcp] [-S bytes] [-x mode] [-c] [-n A,B] [-k top] BENCH
#
# BENCH: long_bw (-x window|release|lib), reqrep (-x retbuf|pull),
# pingpong, msgrate (one sender; its server only).  The server is measured
# unless -c (the client).  Prints the instructions per message of the
# whole process, then the top functions by their own (self) and by
# inclusive count.  Spinning counts too: the measured side runs ~50x
# slower than native, so it seldom spins, while the native side waits for
# it, spinning (RIPC_SPIN_US=1 s: asleep, it would have the measured side
# ring its doorbell).  Another load on the machine makes the measured side
# spin more.  Needs valgrind and python3; BUILD_DIR (default build-bench)
# must hold the built benchmarks (another commit's build: the same tool,
# before and after).  KEEP=1 keeps the callgrind files (their directory
# is named on stderr) for callgrind_annotate --tree=caller.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/pids.sh"
src=$(cd "$here/../../.." && pwd)
B=$(cd "${BUILD_DIR:-$src/build-bench}" 2>/dev/null && pwd) ||
	{ echo "no build directory: build build-bench first" >&2; exit 1; }
prov=shm size=65536 mode="" side=s counts=2000,6000 top=25
while getopts "p:S:x:cn:k:" o; do
	case $o in
	p) prov=$OPTARG ;;
	S) size=$OPTARG ;;
	x) mode=$OPTARG ;;
	c) side=c ;;
	n) counts=$OPTARG ;;
	k) top=$OPTARG ;;
	*) sed -n '2,20p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
bench=${1:-}
n1=${counts%,*} n2=${counts#*,}
case $bench in
long_bw) prog=ripc_long_bw mode=${mode:-window}
	srv_args=(-S "$size" -W 1 -x "$mode")
	cli_args=(-S "$size" -W 1 $([ "$mode" = release ] && echo -x release)) ;;
reqrep) prog=ripc_reqrep mode=${mode:-retbuf}
	srv_args=() cli_args=(-x "$mode" -S "$size") ;;
pingpong) prog=ripc_pingpong srv_args=() cli_args=(-S "$size") ;;
msgrate) prog=ripc_msgrate srv_args=() cli_args=(-c 1)
	# Its client forks the sender: both would write one output file.
	[ $side = c ] && { echo "msgrate: the server only" >&2; exit 2; } ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
for t in valgrind callgrind_annotate python3; do
	command -v $t >/dev/null || { echo "instr.sh needs $t" >&2; exit 1; }
done
[ -x "$B/test/benchmarks/.libs/$prog" ] ||
	{ echo "missing $B/test/benchmarks/.libs/$prog: build it first" >&2; exit 1; }
work=$(mktemp -d /tmp/ripc-instr.XXXXXX)
pids=()
cleanup() {
	# Only those still ours: a pid that ended may be anybody's by now
	# (test/scripts/pids.sh).
	pid_kill_children TERM "${pids[@]}"
	[ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
export FI_TCP_IFACE=lo RIPC_RESOLVER=0 RIPC_TCP_ADDR=127.0.0.1 \
	RIPC_REGISTRY=$work/reg
# The native side spins up to 1 s before it sleeps: asleep, it would have
# the measured side ring its doorbell, whose cost depends on how much
# slower the measured side is (a build that executes more sleeps more).
native=(env LD_LIBRARY_PATH="$B/.libs" RIPC_SPIN_US=1000000
	"$B/test/benchmarks/.libs/$prog")
measured() { # OUT: the benchmark under callgrind (libtool sets the path)
	echo "$B/libtool" --mode=execute valgrind --tool=callgrind \
		--callgrind-out-file="$1" "$B/test/benchmarks/$prog"
}

run() { # N: one pair, the measured side writes $work/cg.N
	local n=$1 rf=$work/ready.$1 sp id i
	local srv=("${native[@]}") cli=("${native[@]}")
	if [ $side = s ]; then
		read -ra srv <<< "$(measured "$work/cg.$n")"
	else
		read -ra cli <<< "$(measured "$work/cg.$n")"
	fi
	"${srv[@]}" -s -p "$prov" -r "$rf" -T 300 "${srv_args[@]}" \
		> "$work/srv.$n.log" 2>&1 &
	sp=$!
	pids+=("$sp")
	for ((i = 0; i < 600; i++)); do
		[ -s "$rf" ] && break
		kill -0 "$sp" 2>/dev/null || break
		sleep 0.1
	done
	id=$(cat "$rf" 2>/dev/null) ||
		{ echo "server did not start: $(tail -3 "$work/srv.$n.log")" >&2; return 1; }
	"${cli[@]}" -p "$prov" "${cli_args[@]}" -n "$n" -w 10 -t 1000 -T 300 \
		"$id" > "$work/cli.$n.log" 2>&1 ||
		{ echo "client failed: $(tail -3 "$work/cli.$n.log")" >&2; return 1; }
	# The server leaves at the client's BYE; callgrind writes at exit.
	for ((i = 0; i < 600; i++)); do
		kill -0 "$sp" 2>/dev/null || break
		sleep 0.1
	done
	kill "$sp" 2>/dev/null
	wait "$sp" 2>/dev/null
	[ -s "$work/cg.$n" ] || { echo "no callgrind output for -n $n" >&2; return 1; }
}

echo "$prog -p $prov -S $size ${mode:+-x $mode} ($([ $side = s ] && echo server || echo client)" \
	"under callgrind, -n $n1 and $n2)"
run "$n1" && run "$n2" || exit 1
python3 - "$work/cg.$n1" "$work/cg.$n2" $((n2 - n1)) "$top" <<'EOF'
import collections, re, subprocess, sys

def load(path, inclusive):
    out = subprocess.run(["callgrind_annotate", "--threshold=100",
                          "--inclusive=" + ("yes" if inclusive else "no"),
                          path], capture_output=True, text=True).stdout
    d, total = collections.Counter(), 0
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(.*?\)\s+(\S+):(.*?)( \[.*\])?$", line)
        if m:
            name = m.group(2).split("/")[-1] + ":" + m.group(3)
            n = int(m.group(1).replace(",", ""))
            # A name listed twice (two objects, an inlined copy): self
            # counts add up, inclusive ones would count a caller twice.
            d[name] = max(d[name], n) if inclusive else d[name] + n
        m = re.match(r"\s*([\d,]+)\s+\(100.0%\)\s+PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
    return d, total

a, b, n, top = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
for inclusive in (False, True):
    da, ta = load(a, inclusive)
    db, tb = load(b, inclusive)
    if not inclusive:
        print("instructions per message: %.0f" % ((tb - ta) / n))
    print("\n%s, per message:" % ("inclusive" if inclusive else "self"))
    diff = {k: (db[k] - da[k]) / n for k in set(da) | set(db)}
    for k, v in sorted(diff.items(), key=lambda x: -x[1])[:top]:
        print("%8.0f  %s" % (v, k[-90:]))
EOF
