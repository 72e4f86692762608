#!/bin/bash
# churn.sh - many short-lived clients against one long-lived service
# (issue 12).  Public API only (test/functional/ripc_soak).
#
#   test/scripts/churn.sh [-p shm|tcp] [-n N] [-c C] [-b BUILD_DIR] [-T SEC]
#                         [-e] [-r LO-HI]
#     -p prov    transport of the clients [shm]; the server opens every
#                transport it finds
#     -n N       distinct client processes one after another [2000]; each
#                initialises the library, registers a random service ID,
#                makes one request/reply and exits
#     -c C       then C client processes alive at the same time [300]; each
#                holds its connection until all C have their reply.  With
#                -p shm they open shm and tcp: a process talks over shm to
#                at most RIPC_SHM_PEERS (160) others at once, the rest of
#                the clients reach the server over tcp
#     -b dir     build directory [build, next to test/]
#     -T sec     give up (and fail) after this long [3600]
#     -e         check that the server forgot peers to make room
#                (peers_evicted): for a peer table smaller than C
#                (RIPC_TEST_PEERS_MAX in the environment)
#     -r lo-hi   run in a network namespace of its own (root; skipped,
#                exit 77, otherwise) whose ephemeral ports are lo..hi
#                only, so that new tcp clients listen on ports ended
#                clients had: a new incarnation at the address of a peer
#                the server still knows, ~1 client in 10 with 256 ports
#                (~1 in 1000 with the default range).  With -e, forgetting
#                that peer to make room freed the handle the new one
#                shares: the server died of SIGSEGV (libinfinipath's
#                handler makes it exit status 1; its backtrace is shown)
#
# Reports the answered counts, the server's RSS and malloc heap after 100
# and after N clients (and its RSS after the C), its open fds, the time
# taken, and
#     N passed, N failed
# over these checks: all N answered; RSS after N within 10 % of RSS after
# 100; the heap after N at most 32 bytes a client above the heap after
# 100 (the server writes malloc's bytes in use to $SOAK_HEAP_FILE about
# once a second; a cached route kept for each client's random ID was
# ~100 bytes a client, ~6 MB once all 65 536 IDs had come, which the RSS
# check missed); at least N/2 such routes forgotten (the server's
# routes_freed); all C answered; the server still alive at the end.  The
# heap check needs N >= 1000 (the heap moves by +-10 kB between notes),
# the routes check N >= 200 and ripc_info.  The server's
# counters (ripc_info -c) show how it coped: peers_reaped (ended clients
# removed from its shm endpoint, which holds 256), routes_freed,
# shm_fallback_tcp, bell_wakeups, bell_msgs_recv (first messages that
# came through the doorbell while the shm pair was being set up).
#
# The server runs with FI_UNIVERSE_SIZE=16 unless the caller sets it, as
# in soak.sh (which says why): rxm's tcp completion ring, 12 MiB at
# libfabric's default, becomes resident entry after entry, ~70 bytes a
# client here (tcp, 10 000 clients: RSS +8.0 % with FI_UNIVERSE_SIZE=1024,
# +4.2 % with 16; life_notes.md), and would take most of the RSS check's
# 10 % in a long run.
#
# Every process is started by this script, recorded by pid and stopped by
# pid; the registry (RIPC_REGISTRY, private) and /dev/shm files of our
# processes are removed at the end.  Set RIPC_RESOLVER_PORT to run next to
# other people's libripc programs (a private one is chosen otherwise).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pids.sh"
SRC=$(cd "$HERE/../.." && pwd)
PROV=shm N=2000 C=300 BUILD=$SRC/build LIMIT=3600 EVICT=0 PORTS=""
ARGS=("$@")

usage() {
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}
while getopts "p:n:c:b:T:r:eh" o; do
	case $o in
	e) EVICT=1 ;;
	r) PORTS=$OPTARG ;;
	p) PROV=$OPTARG ;;
	n) N=$OPTARG ;;
	c) C=$OPTARG ;;
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	T) LIMIT=$OPTARG ;;
	*) usage ;;
	esac
done
SOAK=$BUILD/test/functional/ripc_soak
[ -x "$SOAK" ] || { echo "churn: $SOAK missing: make -C $BUILD test/functional/ripc_soak" >&2; exit 2; }
case "$N$C" in *[!0-9]*) usage ;; esac

# -r: the whole run again inside a namespace made for it, removed after.
if [ -n "$PORTS" ] && [ -z "${CHURN_NETNS:-}" ]; then
	case $PORTS in [0-9]*-[0-9]*) ;; *) usage ;; esac
	NS=ripc-churn-$$
	if [ "$(id -u)" -ne 0 ] || ! ip netns add "$NS" 2> "/tmp/$NS.err"; then
		echo "churn: skipped: cannot create a network namespace: $(head -c 200 "/tmp/$NS.err" 2> /dev/null)"
		rm -f "/tmp/$NS.err"
		echo "0 passed, 0 failed"
		exit 77
	fi
	rm -f "/tmp/$NS.err"
	INNER=""
	trap 'ip netns del "$NS" 2> /dev/null' EXIT
	# Passed on: the run inside stops its processes and cleans up.
	trap '[ -n "$INNER" ] && kill -TERM "$INNER" 2> /dev/null; wait "$INNER"; exit 130' INT TERM
	ip -n "$NS" link set lo up &&
		ip netns exec "$NS" sysctl -qw net.ipv4.ip_local_port_range="${PORTS%-*} ${PORTS#*-}" ||
		{ echo "churn: cannot set up namespace $NS"; echo "0 passed, 1 failed"; exit 1; }
	echo "churn: in network namespace $NS, ephemeral ports $PORTS"
	CHURN_NETNS=$NS ip netns exec "$NS" "$0" "${ARGS[@]}" &
	INNER=$!
	wait "$INNER"
	exit $?
fi

WORK=$(mktemp -d /tmp/ripc-churn.XXXXXX)
export FI_TCP_IFACE=lo RIPC_TCP_ADDR=127.0.0.1
export RIPC_REGISTRY=$WORK/registry
export SOAK_HEAP_FILE=$WORK/heap
export RIPC_RESOLVER_PORT=${RIPC_RESOLVER_PORT:-$((47000 + $$ % 1000))}
SRV_PID="" DRV_PID=""
PASS=0 FAIL=0

log() { echo "churn: $*"; }
check() { # OK(0/1) TEXT
	if [ "$1" = 1 ]; then
		PASS=$((PASS + 1))
		echo "PASS: $2"
	else
		FAIL=$((FAIL + 1))
		echo "FAIL: $2"
	fi
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' /proc/"$1"/status 2> /dev/null || echo 0; }
# The server's heap in bytes, as it wrote it last (about once a second):
# wait for a fresh note first.
heap_b() { sleep 1.2; cat "$SOAK_HEAP_FILE" 2> /dev/null || echo 0; }
nfds() { ls /proc/"$1"/fd 2> /dev/null | wc -l; }
alive() { [ -n "$1" ] && kill -0 "$1" 2> /dev/null; }

# ours PID: alive and still one of our programs (the pid of one that
# ended may be anybody's by now; pids.sh)
OURS=(ripc_soak lt-ripc_soak timeout)
ours() { pid_runs "$1" "${OURS[@]}"; }
# stop_pid PID: TERM, 3 s grace, KILL, only while it runs our program
stop_pid() { pid_stop "$1" "${OURS[@]}"; }
cleanup() {
	local p f
	[ -s "$WORK/drv.pid" ] && stop_pid "$(cat "$WORK/drv.pid")"
	[ -n "$DRV_PID" ] && stop_pid "$DRV_PID"
	[ -n "$SRV_PID" ] && stop_pid "$SRV_PID"
	wait 2> /dev/null
	# Children of the drivers note nothing: their /dev/shm files are
	# removed by the drivers; the server's and any strays here.
	for f in /dev/shm/*:*; do
		[ -e "$f" ] || continue
		p=${f#/dev/shm/}
		p=${p%%:*}
		grep -qx "$p" "$WORK/pids" 2> /dev/null && ! alive "$p" && rm -f "$f"
	done
	if [ -n "${CHURN_KEEP:-}" ]; then echo "churn: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT TERM

START=$(date +%s)
# The server: no ID argument; pid recorded before exec.  In $WORK, where
# libinfinipath writes its backtrace file if it crashes.
(cd "$WORK" && export FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-16} &&
	exec timeout -k 3 "$LIMIT" sh -c 'echo $$ > "$0"; exec "$@"' "$WORK/srv.pid" \
	"$SOAK" -r "$WORK/ready" > "$WORK/srv.out" 2> "$WORK/srv.err") &
SRV_WRAP=$!
for ((i = 0; i < 100; i++)); do
	[ -s "$WORK/ready" ] && break
	sleep 0.1
done
SRV_PID=$(cat "$WORK/srv.pid" 2> /dev/null)
echo "$SRV_PID" >> "$WORK/pids"
if [ ! -s "$WORK/ready" ]; then
	log "server did not start: $(tail -3 "$WORK/srv.err")"
	echo "0 passed, 1 failed"
	exit 1
fi
ID=$(cat "$WORK/ready")
log "server pid $SRV_PID, service $ID (FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-16}); clients over $PROV"
RSS0=$(rss_kb "$SRV_PID") FD0=$(nfds "$SRV_PID")

# Sequential clients: sample the server when the driver reports 100 done.
RSS100="" FD100="" HEAP100=""
T0=$(date +%s.%N)
# shellcheck disable=SC2094
while read -r line; do
	echo "$line" >> "$WORK/seq.out"
	case $line in
	"churn-seq done 100 "*)
		RSS100=$(rss_kb "$SRV_PID") FD100=$(nfds "$SRV_PID")
		HEAP100=$(heap_b) ;;
	"churn-seq done "*)
		k=${line#churn-seq done }
		k=${k%% *}
		[ $((k % 500)) -eq 0 ] && log "$line (server RSS $(rss_kb "$SRV_PID") kB, $(nfds "$SRV_PID") fds)" ;;
	esac
done < <(RIPC_PROVIDER=$PROV timeout -k 3 "$LIMIT" sh -c 'echo $$ > "$0"; exec "$@"' "$WORK/drv.pid" \
	"$SOAK" -p "$PROV" -x seq -I "$N" "$ID" 2> "$WORK/seq.err")
T1=$(date +%s.%N)
RSSN=$(rss_kb "$SRV_PID") FDN=$(nfds "$SRV_PID") HEAPN=$(heap_b)
[ -z "$RSS100" ] && RSS100=$RSS0 FD100=$FD0   # fewer than 100 clients
SEQ=$(grep '^churn-seq n ' "$WORK/seq.out" | tail -1)
SEQ_OK=$(echo "$SEQ" | awk '{ print $5 }')
SEQ_TRIED=$(echo "$SEQ" | awk '{ print $NF }')
case $SEQ_TRIED in '' | *[!0-9]*) SEQ_TRIED=$N ;; esac
log "sequential: ${SEQ:-no result line} ($(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.1f", b - a }') s)"
grep -E '^churn-seq (first failure|gave up)' "$WORK/seq.out" | sed 's/^/churn: /'
FIRST_BAD=$(grep -m1 -E 'no reply|register|ripc_init' "$WORK/seq.err")
[ -n "$FIRST_BAD" ] && log "first client error: $FIRST_BAD ($(grep -c -E 'no reply|register|ripc_init' "$WORK/seq.err") errors)"
FIRST_FAIL=$(sed -n 's/^churn-seq first failure at client //p' "$WORK/seq.out")

# Concurrent clients.  Each holds a whole library instance: measure one
# (an idle probe on the same transport), count half as much again for the
# request in flight, and do not start more than three quarters of the
# available memory holds (the machine is shared; the clients also offer
# themselves to the OOM killer first); the check then fails, saying why.
# (300 tcp clients of 27 MB: 12 GB counted, ~8 GB used, of 23 GB here.)
CRUN=$C PROBE_KB=0
RIPC_PROVIDER=$PROV timeout -k 3 60 sh -c 'echo $$ > "$0"; exec "$@"' "$WORK/probe.pid" \
	"$SOAK" -p "$PROV" -x idle > "$WORK/probe.out" 2>&1 &
for ((i = 0; i < 100; i++)); do
	grep -q '^soak-idle' "$WORK/probe.out" 2> /dev/null && break
	sleep 0.1
done
PROBE=$(cat "$WORK/probe.pid" 2> /dev/null)
if [ -n "$PROBE" ]; then
	echo "$PROBE" >> "$WORK/pids"
	PROBE_KB=$(rss_kb "$PROBE")
	stop_pid "$PROBE"
fi
AVAIL_KB=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
NEED_KB=$((PROBE_KB * 3 / 2))
if [ "$NEED_KB" -gt 0 ] && [ $((C * NEED_KB)) -gt $((AVAIL_KB * 3 / 4)) ]; then
	CRUN=$((AVAIL_KB * 3 / 4 / NEED_KB))
	log "one idle $PROV client holds ${PROBE_KB} kB RSS; $C of them would need ~$((C * NEED_KB / 1024)) MB" \
		"of $((AVAIL_KB / 1024)) MB available: running $CRUN"
fi
T2=$(date +%s.%N)
CPROV=$PROV
[ "$PROV" = shm ] && CPROV=shm,tcp
RIPC_PROVIDER=$CPROV timeout -k 3 "$LIMIT" sh -c 'echo $$ > "$0"; exec "$@"' "$WORK/drv.pid" \
	"$SOAK" -p "$CPROV" -x conc -I "$CRUN" "$ID" > "$WORK/conc.out" 2> "$WORK/conc.err" &
DRV_PID=$!
wait "$DRV_PID"
DRV_PID=""
T3=$(date +%s.%N)
RSSC=$(rss_kb "$SRV_PID") FDC=$(nfds "$SRV_PID")
CONC=$(grep '^churn-conc n ' "$WORK/conc.out" | tail -1)
CONC_OK=$(echo "$CONC" | awk '{ print $5 }')
log "concurrent: ${CONC:-no result line} ($(awk -v a="$T2" -v b="$T3" 'BEGIN { printf "%.1f", b - a }') s)"
FIRST_BAD=$(grep -m1 -E 'no reply|register|ripc_init' "$WORK/conc.err")
[ -n "$FIRST_BAD" ] && log "first client error: $FIRST_BAD ($(grep -c -E 'no reply|register|ripc_init' "$WORK/conc.err") errors)"

[ -s "$WORK/srv.err" ] && log "server's first error: $(head -1 "$WORK/srv.err") ($(wc -l < "$WORK/srv.err") lines)"
ALIVE=0
if alive "$SRV_PID"; then
	ALIVE=1
else
	wait "$SRV_WRAP"
	log "the server is gone: exit status $? (137 = SIGKILL, e.g. by the OOM killer)"
	SIG=$(sed -n 's/.* terminated with signal \([0-9]*\).*/\1/p' "$WORK/srv.err" | head -1)
	if [ -n "$SIG" ]; then
		# libinfinipath's handler: a backtrace, then exit(1) (ripc(7)).
		log "it died of signal $SIG (libinfinipath's handler made that exit status 1); its backtrace:"
		sed -n '/terminated with signal/,$p' "$WORK/srv.err" | head -40 | sed 's/^/churn: server: /'
	else
		# Its last words, whole.
		tail -n 8 "$WORK/srv.err" "$WORK/srv.out" 2> /dev/null | sed 's/^/churn: server: /'
	fi
fi
echo
echo "transport $PROV, server pid $SRV_PID, $(($(date +%s) - START)) s in all"
echo "server RSS kB: start $RSS0, after 100 clients $RSS100, after $SEQ_TRIED clients $RSSN, after $CRUN concurrent $RSSC"
echo "server fds:    start $FD0, after 100 clients $FD100, after $SEQ_TRIED clients $FDN, after $CRUN concurrent $FDC"
echo "server heap bytes: after 100 clients ${HEAP100:-?}, after $SEQ_TRIED clients $HEAPN"
echo "sequential: ${SEQ_OK:-0} of $N answered${FIRST_FAIL:+; the first without a reply was client $FIRST_FAIL}"
echo "concurrent: ${CONC_OK:-0} of $C answered$([ "$CRUN" != "$C" ] && echo " (only $CRUN started: memory, ${PROBE_KB} kB per client)")"
check "$([ "${SEQ_OK:-0}" = "$N" ] && echo 1 || echo 0)" "all $N sequential clients answered (${SEQ_OK:-0})"
check "$(awk -v a="$RSS100" -v b="$RSSN" 'BEGIN { print (a > 0 && b <= a * 1.10 && b >= a * 0.90) ? 1 : 0 }')" \
	"server RSS after $SEQ_TRIED clients within 10 % of RSS after 100 ($RSSN vs $RSS100 kB)$([ "$SEQ_TRIED" != "$N" ] && echo "; the driver gave up after $SEQ_TRIED of $N")"
check "$([ "${CONC_OK:-0}" = "$C" ] && echo 1 || echo 0)" "all $C concurrent clients answered (${CONC_OK:-0})"
check "$ALIVE" "server alive at the end"
# The server's counters, as it published them when it last went idle.
INFO=$BUILD/tools/ripc_info
COUNTERS=""
if [ -x "$INFO" ] && alive "$SRV_PID"; then
	sleep 1.2 # published at most every second while busy
	COUNTERS=$("$INFO" -c 2> /dev/null | grep "^stats\.$SRV_PID\." |
		grep -E '\.(peers_reaped|routes_freed|peers_evicted|shm_fallback_tcp|bell_rings|bell_wakeups|bell_msgs_recv|bell_msgs_sent|short_recv|drops_[a-z_]+): [1-9]' |
		sed "s/^stats\.$SRV_PID\./server counter /")
fi
if [ "$N" -ge 1000 ] && [ -n "$HEAP100" ]; then
	# Growth after the first 100 clients, per client (the note at "100"
	# is a second late: a few clients more, which only lowers this).
	# From 1000 clients: the heap moves by +-10 kB between notes, which
	# over fewer clients could pass for a leak.
	check "$(awk -v a="$HEAP100" -v b="$HEAPN" -v n="$SEQ_TRIED" 'BEGIN { print (a > 0 && b > 0 && (b - a) <= 32 * (n - 100)) ? 1 : 0 }')" \
		"server heap after $SEQ_TRIED clients at most 32 bytes a client above the heap after 100 ($HEAPN vs $HEAP100 bytes: $(awk -v a="$HEAP100" -v b="$HEAPN" -v n="$SEQ_TRIED" 'BEGIN { printf "%.1f", (b - a) / (n - 100) }') a client$([ "$HEAP100" = 0 ] || [ "$HEAPN" = 0 ] && echo "; 0: no note, or malloc's counters unavailable, as under ASan"))"
fi
if [ "$N" -ge 200 ]; then
	ROUTES=$(echo "$COUNTERS" | sed -n 's/.*routes_freed: //p')
	check "$([ "${ROUTES:-0}" -ge $((N / 2)) ] && echo 1 || echo 0)" \
		"the routes to ended clients forgotten (routes_freed ${ROUTES:-0}, at least $((N / 2)))"
fi
if [ "$EVICT" = 1 ]; then
	check "$(echo "$COUNTERS" | grep -q 'peers_evicted: [1-9]' && echo 1 || echo 0)" \
		"the server forgot peers to make room (peers_evicted: $(echo "$COUNTERS" | sed -n 's/.*peers_evicted: //p'))"
fi
[ -n "$COUNTERS" ] && echo "$COUNTERS"
# End the server by pid (it ignores nothing: SIGTERM makes it leave).
stop_pid "$SRV_PID"
wait 2> /dev/null
tail -1 "$WORK/srv.out" | sed 's/^/server: /'
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
