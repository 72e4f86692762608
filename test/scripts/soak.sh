#!/bin/bash
# soak.sh - one long-lived service, clients that come and go (issue 12).
# Public API only (test/functional/ripc_soak).
#
#   test/scripts/soak.sh [-t SEC] [-m MAX] [-i SEC] [-b BUILD_DIR] [-g PNG] [-o DIR]
#     -t sec     how long clients keep coming [600]; the run then waits
#                (60 s at most) for the clients still alive
#     -m max     clients alive at once, at most [6]
#     -i sec     sampling interval [10]
#     -b dir     build directory [build, next to test/]
#     -g png     gnuplot plot of RSS, fds and CPU over time
#                [docs/perf/soak.png; "" = none; needs gnuplot]
#     -o dir     keep the logs and the series here [a temporary directory,
#                removed at the end]; a run before's files there are
#                removed first
#
# One server (ripc_soak, every transport it finds) serves the whole run.
# Clients start at random moments (up to -m alive), each over shm or tcp
# (RIPC_PROVIDER, a coin toss), makes 1-40 requests (short ones of up to
# 48 KiB and one in four long ones of 64 KiB-1 MiB, pulled by the server),
# thinks 0-T ms after each reply (T drawn per client from 0-50 ms), checks
# every reply byte for byte and exits.  Every -i seconds the script
# records the server's RSS (VmRSS) and open fds (/proc/PID/fd), the CPU %
# of the server and of an idle process (ripc_soak -x idle: library up, one
# service, sleeping) over the interval (utime + stime from /proc), and
# the server's malloc heap in use (it writes it to $SOAK_HEAP_FILE).
#
# At the end it prints requests sent and answered, the series, and
#     N passed, N failed
# over five checks: every request answered correctly (a client that dies
# or times out counts as failed); the heap not grown (last sample at most
# 1 MiB above the one at 20 s: a leak of a few hundred bytes a request or
# a few kB a client); RSS not grown (last sample at most 10 % plus 8 MiB
# above the one at 20 s, the 8 MiB being what the library's cache of
# freed long buffers may come to hold of this run's items; a drop
# passes, see the check); fds flat (last within +-4 of the one at 20 s);
# the server alive to the end.  A failure is reported with the first
# error, when, and over which transport.  In a sanitizer build (-b of
# ./configure --enable-sanitizers) the heap and RSS checks are skipped
# (SKIP, counted in neither number): the sanitizer's allocator replaces
# malloc's, so mallinfo2 reads 0, and ASan's quarantine holds freed memory
# (256 MiB by default), so the RSS climbs to it whatever the library does;
# the series still shows both.
#
# The server runs with FI_UNIVERSE_SIZE=16 unless the caller set it:
# over tcp, rxm opens its connections' completion queue with room for
# (receives + sends) x FI_UNIVERSE_SIZE completions (1024 when unset in
# libfabric 1.17: one 12 MiB ring), which the provider writes in turn, so
# a busy process's RSS grows by the ring's pages as completions first land
# in them, up to the whole ring (an 80-minute soak: 24 -> 37-40 MB, then
# flat; life_notes.md).  That growth is libfabric's and bounded; at 16 the
# ring is 192 KiB and the RSS check sees the library's own memory.  Give
# FI_UNIVERSE_SIZE=1024 to soak libfabric's default (an empty value is
# not unset: libfabric reads it as 0, a small ring).
#
# SOAK_SERVER_WRAP (word-split) goes before the server's command line
# only, e.g. to trace its heap: "env LD_PRELOAD=... ": it must exec the
# server, which keeps its pid and its program's name, by which the script
# knows it when it stops it (see test/benchmarks/life_notes.md).
#
# Every process is started by this script and stopped by pid (TERM, then
# KILL); each client runs under `timeout`; the registry (private) and
# /dev/shm files of our processes are removed at the end.  Set
# RIPC_RESOLVER_PORT to run next to other people's libripc programs (a
# private one is chosen otherwise).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pids.sh"
SRC=$(cd "$HERE/../.." && pwd)
DUR=600 MAXC=6 IVL=10 BUILD=$SRC/build PNG=$SRC/docs/perf/soak.png KEEP=""

usage() {
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}
while getopts "t:m:i:b:g:o:h" o; do
	case $o in
	t) DUR=$OPTARG ;;
	m) MAXC=$OPTARG ;;
	i) IVL=$OPTARG ;;
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	g) PNG=$OPTARG ;;
	o) KEEP=$OPTARG ;;
	*) usage ;;
	esac
done
case "$DUR$MAXC$IVL" in *[!0-9]*) usage ;; esac
[ "$IVL" -ge 1 ] && [ "$MAXC" -ge 1 ] || usage
SOAK=$BUILD/test/functional/ripc_soak
[ -x "$SOAK" ] || { echo "soak: $SOAK missing: make -C $BUILD test/functional/ripc_soak" >&2; exit 2; }
# A sanitizer build: its binary (libtool's, under .libs, in a shared build)
# carries the sanitizer's runtime.
SAN=""
for f in "$BUILD/test/functional/.libs/ripc_soak" "$SOAK"; do
	[ -f "$f" ] || continue
	case $(grep -aoE -m1 '__(asan|tsan|msan)_init' "$f" 2> /dev/null | head -1) in
	__asan_init) SAN=ASan ;;
	__tsan_init) SAN=TSan ;;
	__msan_init) SAN=MSan ;;
	esac
	break
done

if [ -n "$KEEP" ]; then
	mkdir -p "$KEEP" || exit 2
	WORK=$(cd "$KEEP" && pwd)
	# A run before left its files here: its `ready` and pid files would
	# pass for this run's server (which the end would then not stop),
	# its registry for this run's.  Only the names this script writes.
	rm -rf "$WORK/c" "$WORK"/{failed,gnuplot.err,heap,pids,ready,registry,series} \
		"$WORK"/{srv,idle}.{pid,err,out}
else
	WORK=$(mktemp -d /tmp/ripc-soak.XXXXXX)
fi
mkdir -p "$WORK/c"
export FI_TCP_IFACE=lo RIPC_TCP_ADDR=127.0.0.1
export RIPC_REGISTRY=$WORK/registry
export RIPC_RESOLVER_PORT=${RIPC_RESOLVER_PORT:-$((48000 + $$ % 1000))}
HZ=$(getconf CLK_TCK)
SRV_PID="" IDLE_PID=""
CLIENTS=() # pids of the `timeout` wrappers of live clients
PASS=0 FAIL=0 SKIP=0

log() { echo "soak $(date +%H:%M:%S): $*"; }
check() { # OK(0/1/skip) TEXT
	if [ "$1" = skip ]; then
		SKIP=$((SKIP + 1))
		echo "SKIP: $2"
	elif [ "$1" = 1 ]; then
		PASS=$((PASS + 1))
		echo "PASS: $2"
	else
		FAIL=$((FAIL + 1))
		echo "FAIL: $2"
	fi
}
alive() { [ -n "$1" ] && kill -0 "$1" 2> /dev/null; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' /proc/"$1"/status 2> /dev/null || echo 0; }
heap_kb() { awk '{ printf "%d", $1 / 1024 }' "$WORK/heap" 2> /dev/null || echo 0; }
nfds() { ls /proc/"$1"/fd 2> /dev/null | wc -l; }
ticks() { # utime + stime of PID (all threads), clock ticks
	local s
	s=$(cat /proc/"$1"/stat 2> /dev/null) || { echo 0; return; }
	s=${s##*) }
	set -- $s
	echo $((${12} + ${13}))
}
# ours PID: alive and still one of our programs (the pid of one that
# ended may be anybody's by now: a run records ~1 500 client pids; pids.sh)
OURS=(ripc_soak lt-ripc_soak timeout)
ours() { pid_runs "$1" "${OURS[@]}"; }
# stop_pid PID: TERM, 3 s grace, KILL, only while it runs our program
stop_pid() { pid_stop "$1" "${OURS[@]}"; }
cleanup() {
	local p f
	for p in "${CLIENTS[@]}"; do
		ours "$p" && kill -TERM "$p" 2> /dev/null
	done
	# The clients' own pids (timeout passes TERM on; KILL what is left).
	for f in "$WORK"/c/*.pid; do
		[ -s "$f" ] && cat "$f" >> "$WORK/pids"
	done
	sleep 0.5
	if [ -s "$WORK/pids" ]; then
		while read -r p; do
			ours "$p" && kill -KILL "$p" 2> /dev/null
		done < "$WORK/pids"
	fi
	[ -n "$IDLE_PID" ] && stop_pid "$IDLE_PID"
	[ -n "$SRV_PID" ] && stop_pid "$SRV_PID"
	wait 2> /dev/null
	echo "$SRV_PID" >> "$WORK/pids"
	echo "$IDLE_PID" >> "$WORK/pids"
	while read -r p; do
		[ -n "$p" ] && ! alive "$p" && rm -f /dev/shm/"$p":* 2> /dev/null
	done < "$WORK/pids"
	rm -f "$RIPC_REGISTRY" "$RIPC_REGISTRY".* 2> /dev/null
	[ -n "$KEEP" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT TERM

# start NAME CMD...: in the background under timeout, the program's own
# pid in $WORK/NAME.pid (sh execs it; libtool's wrapper execs the binary).
start() {
	local name=$1 limit=$2
	shift 2
	timeout -k 3 "$limit" sh -c 'echo $$ > "$0"; exec "$@"' "$WORK/$name.pid" "$@" &
}
pid_of() { # NAME: the program's pid, waiting up to 2 s for the file
	local i
	for ((i = 0; i < 20; i++)); do
		[ -s "$WORK/$1.pid" ] && { cat "$WORK/$1.pid"; return; }
		sleep 0.1
	done
}

# ---- server and idle probe ------------------------------------------------

LIMIT=$((DUR + 300))
# shellcheck disable=SC2086
SOAK_HEAP_FILE=$WORK/heap FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-16} start srv "$LIMIT" ${SOAK_SERVER_WRAP:-} "$SOAK" -r "$WORK/ready" \
	> "$WORK/srv.out" 2> "$WORK/srv.err"
SRV_PID=$(pid_of srv)
for ((i = 0; i < 100; i++)); do
	[ -s "$WORK/ready" ] && break
	sleep 0.1
done
if [ ! -s "$WORK/ready" ]; then
	log "server did not start: $(tail -3 "$WORK/srv.err")"
	echo "0 passed, 1 failed"
	exit 1
fi
ID=$(cat "$WORK/ready")
start idle "$LIMIT" "$SOAK" -x idle > "$WORK/idle.out" 2> "$WORK/idle.err"
IDLE_PID=$(pid_of idle)
log "server pid $SRV_PID (service $ID, FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-16}), idle probe pid $IDLE_PID; clients for $DUR s, at most $MAXC alive"
[ -n "$SAN" ] && log "$SAN build: the heap and RSS checks will be skipped (SKIP)"

# ---- the run ----------------------------------------------------------------

echo "# t_s rss_kB fds server_cpu_pct idle_cpu_pct clients_started clients_alive heap_kB" > "$WORK/series"
T0=$(date +%s)
NEXT=$((T0 + IVL))
STARTED=0
prev_t=$(date +%s.%N) prev_s=$(ticks "$SRV_PID") prev_i=$(ticks "$IDLE_PID")
sample() {
	local now t s i
	now=$(date +%s.%N)
	s=$(ticks "$SRV_PID")
	i=$(ticks "$IDLE_PID")
	t=$(awk -v a="$prev_t" -v b="$now" 'BEGIN { print b - a }')
	printf '%d %s %s %s %s %d %d %s\n' "$(($(date +%s) - T0))" "$(rss_kb "$SRV_PID")" \
		"$(nfds "$SRV_PID")" \
		"$(awk -v d=$((s - prev_s)) -v t="$t" -v hz="$HZ" 'BEGIN { printf "%.2f", 100 * d / hz / t }')" \
		"$(awk -v d=$((i - prev_i)) -v t="$t" -v hz="$HZ" 'BEGIN { printf "%.2f", 100 * d / hz / t }')" \
		"$STARTED" "${#CLIENTS[@]}" "$(heap_kb)" >> "$WORK/series"
	prev_t=$now prev_s=$s prev_i=$i
}
reap_clients() {
	local p keep=()
	for p in "${CLIENTS[@]}"; do
		alive "$p" && keep+=("$p")
	done
	CLIENTS=("${keep[@]}")
}

while [ $(($(date +%s) - T0)) -lt "$DUR" ]; do
	alive "$SRV_PID" || { log "the server died"; break; }
	reap_clients
	# A new client now and then: more likely the fewer are alive.
	if [ "${#CLIENTS[@]}" -lt "$MAXC" ] && [ $((RANDOM % MAXC)) -ge "${#CLIENTS[@]}" ]; then
		STARTED=$((STARTED + 1))
		prov=shm
		[ $((RANDOM % 2)) = 1 ] && prov=tcp
		n=$((1 + RANDOM % 40))
		th=$((RANDOM % 51))
		k=$STARTED
		(
			RIPC_PROVIDER=$prov timeout -k 3 120 sh -c 'echo $$ > "$0"; exec "$@"' \
				"$WORK/c/$k.pid" "$SOAK" -p "$prov" -I "$n" -x "$th" "$ID" \
				> "$WORK/c/$k.out" 2> "$WORK/c/$k.err"
			echo "$? $prov $(date +%s)" > "$WORK/c/$k.rc"
		) &
		CLIENTS+=($!)
	fi
	sleep "0.$((RANDOM % 5 + 1))"
	if [ "$(date +%s)" -ge "$NEXT" ]; then
		sample
		NEXT=$((NEXT + IVL))
	fi
done
log "no new clients; waiting (60 s at most) for ${#CLIENTS[@]} still alive"
WAIT_END=$(($(date +%s) + 60))
while [ "$(date +%s)" -lt "$WAIT_END" ]; do
	reap_clients
	[ "${#CLIENTS[@]}" -eq 0 ] && break
	if [ "$(date +%s)" -ge "$NEXT" ]; then
		sample
		NEXT=$((NEXT + IVL))
	fi
	sleep 0.1
done
[ "${#CLIENTS[@]}" -gt 0 ] && log "${#CLIENTS[@]} clients still alive after 60 s: stopped by pid"
sample
SRV_ALIVE=0
alive "$SRV_PID" && SRV_ALIVE=1
END=$(date +%s)
# The server prints its counts when it leaves (SIGTERM).
stop_pid "$SRV_PID"
stop_pid "$IDLE_PID"
for p in "${CLIENTS[@]}"; do
	stop_pid "$p"
	wait "$p" 2> /dev/null
done
CLIENTS=()

# ---- report ---------------------------------------------------------------

sent=0 answered=0 cfail=0 nores=0
for f in "$WORK"/c/*.rc; do
	[ -e "$f" ] || continue
	k=$(basename "$f" .rc)
	read -r rc prov t < "$f"
	line=$(grep '^soak-client ' "$WORK/c/$k.out" 2> /dev/null | tail -1)
	if [ -n "$line" ]; then
		set -- $line
		sent=$((sent + $7))
		answered=$((answered + $9))
	else
		nores=$((nores + 1))
	fi
	if [ "$rc" != 0 ]; then
		cfail=$((cfail + 1))
		echo "$k $prov $((t - T0)) $rc $(head -1 "$WORK/c/$k.err" 2> /dev/null)" >> "$WORK/failed"
	fi
done
echo
echo "soak: $((END - T0)) s, $STARTED clients ($(cat "$WORK"/c/*.rc 2> /dev/null | awk '$2 == "shm"' | wc -l) shm," \
	"$(cat "$WORK"/c/*.rc 2> /dev/null | awk '$2 == "tcp"' | wc -l) tcp), requests sent $sent, answered $answered"
if [ -s "$WORK/failed" ]; then
	echo "failed clients: $cfail ($nores without a result line); by transport:" \
		"$(awk '{ n[$2]++ } END { for (p in n) printf "%s %d ", p, n[p] }' "$WORK/failed")"
	echo "first failure (client, transport, s into the run, status, first error):"
	sort -n "$WORK/failed" | head -3 | sed 's/^/  /'
fi
echo "series (every $IVL s):"
sed 's/^/  /' "$WORK/series"
tail -1 "$WORK/srv.out" 2> /dev/null | sed 's/^/server: /'

# Flat: the last sample against the one at 20 s (or the first one).
ref=$(awk '!/^#/ && $1 >= 20 { print; exit }' "$WORK/series")
[ -z "$ref" ] && ref=$(awk '!/^#/ { print; exit }' "$WORK/series")
last=$(awk '!/^#/ { l = $0 } END { print l }' "$WORK/series")
read -r rt rrss rfd _ _ _ _ rheap <<< "$ref"
read -r lt lrss lfd _ _ _ _ lheap <<< "$last"
idle_avg=$(awk '!/^#/ && $1 > 0 { s += $5; n++ } END { printf "%.2f", n ? s / n : 0 }' "$WORK/series")
srv_avg=$(awk '!/^#/ && $1 > 0 { s += $4; n++ } END { printf "%.2f", n ? s / n : 0 }' "$WORK/series")
echo "idle process CPU: $idle_avg % on average; server CPU: $srv_avg % on average"
check "$([ "$cfail" -eq 0 ] && [ "$sent" -eq "$answered" ] && [ "$STARTED" -gt 0 ] && echo 1 || echo 0)" \
	"every request answered ($answered of $sent, $cfail of $STARTED clients failed)"
# What malloc has handed out and not had back: where a leak of the
# library's own structures (per request, per client) shows, in kB, apart
# from the caches that move the RSS.  The bound is absolute: 1 MiB is a
# few hundred bytes for each of a 60 s run's ~3 000 requests, or a few kB
# for each of its ~150 clients (live allocations grew ~70 bytes a client
# in a 900 s soak under heaptrack, life_notes.md).
if [ -n "$SAN" ]; then
	check skip "server heap: not measurable under $SAN (its allocator replaces malloc's; mallinfo2 reads $lheap kB)"
else
	check "$(awk -v a="$rheap" -v b="$lheap" 'BEGIN { print (a > 0 && b > 0 && b <= a + 1024) ? 1 : 0 }')" \
		"server heap not grown: $lheap kB at $lt s against $rheap kB at $rt s (at most +1024 kB)"
fi
# A leak makes the RSS grow; a drop is not one.  The server's cache of
# freed library buffers (RIPC_LIBBUF_CACHE, 8, ripc/buffers.c) holds some
# of the long items (64 KiB-1 MiB, so up to 8 MiB) at any time, and
# swings the RSS by megabytes: the CI run of 2a31c03 failed a two-sided
# bound with 26 452 kB at 20 s and 23 752 at 60 s (23.3-26.5 MB
# throughout), the clean-clone run of 14b5c39 a one-sided +10 % with
# 24 412 at 20 s and 28 772 at 60 s (a build without the cache stayed
# within 20.2-22.2 MB beside it, one with it 22.4-25.6).
if [ -n "$SAN" ]; then
	check skip "server RSS: not measurable under $SAN (its allocator holds freed memory back; $lrss kB at $lt s against $rrss kB at $rt s)"
else
	check "$(awk -v a="$rrss" -v b="$lrss" 'BEGIN { print (a > 0 && b <= a * 1.10 + 8192) ? 1 : 0 }')" \
		"server RSS not grown: $lrss kB at $lt s against $rrss kB at $rt s (at most +10 % + 8 MiB, the buffer cache)"
fi
check "$([ $((lfd - rfd)) -le 4 ] && [ $((rfd - lfd)) -le 4 ] && echo 1 || echo 0)" \
	"server fds flat: $lfd at $lt s against $rfd at $rt s (within +-4)"
check "$SRV_ALIVE" "server alive to the end"

if [ -n "$PNG" ] && command -v gnuplot > /dev/null && [ "$(grep -vc '^#' "$WORK/series")" -ge 2 ]; then
	mkdir -p "$(dirname "$PNG")"
	gnuplot <<EOF 2> "$WORK/gnuplot.err" || log "gnuplot failed: $(head -2 "$WORK/gnuplot.err")"
set terminal pngcairo size 900,700 font ',10' noenhanced
set output '$PNG'
set multiplot layout 3,1 title 'soak: $((END - T0)) s, $STARTED clients, $answered of $sent requests answered, $(date -u '+%Y-%m-%d %H:%M UTC')'
set grid; set key top left; set xlabel 's'
set ylabel 'server RSS, MB'
plot '$WORK/series' using 1:(\$2/1024) with linespoints title 'server RSS'
set ylabel 'open fds'
plot '$WORK/series' using 1:3 with linespoints title 'server fds', '' using 1:7 with steps title 'clients alive'
set ylabel 'CPU %'
plot '$WORK/series' using 1:4 with linespoints title 'server', '' using 1:5 with linespoints title 'idle process'
unset multiplot
EOF
	[ -s "$PNG" ] && echo "plot: $PNG"
fi
[ "$SKIP" -gt 0 ] && echo "$SKIP skipped (a $SAN build)"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
