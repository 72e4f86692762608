#!/bin/bash
# run_bench.sh - libripc against raw libfabric (and kernel TCP), one run.
#
#   test/benchmarks/run_bench.sh            # from anywhere; ~30-35 min
#   REPS=7 LAT_SEC=1 test/benchmarks/run_bench.sh
#   STEPS="reqrep msgrate fetch" REPS=3 OUT_DIR=/tmp/b DOC=/tmp/b/P.md \
#       test/benchmarks/run_bench.sh        # only some steps, elsewhere
#
# Builds the benchmarks (in $BUILD_DIR, configuring it if needed), then
# runs REPS interleaved rounds of, for each provider (shm, tcp), libripc
# before raw libfabric in odd rounds and after it in even ones:
#
#   libripc         ripc_pingpong: short-message ping-pong, median one-way
#                   ripc_long_bw: long send, 1 in flight, receive windows
#   libripc_rel     ripc_long_bw -x release: 1 in flight, no answer from
#                   the server: the client waits for the release
#                   (ripc_wait_released, the receiver library's DONE), the
#                   same protocol as fi_rdm_pull
#   libripc_w<N>    ripc_long_bw, N long sends in flight
#   libripc_libbuf  ripc_long_bw, 1 in flight, library buffers (no window)
#   libripc_spin    ripc_long_bw as libripc, both sides with RIPC_SPIN_US=1 s:
#                   receives never sleep, so the progress thread's sleep and
#                   wake-up path is out of the picture
#   fi_rdm_msg      raw/fi_rma_bench -M: FI_EP_RDM send/recv ping-pong,
#                   median one-way (the floor of libripc's short send)
#   fi_rdm_waitfd_msg  (tcp) fi_rdm_msg with the CQ opened with a wait fd
#                   (FI_RMA_BENCH_WAIT_FD=1), still busy-polled: what being
#                   able to sleep on the CQ costs, as libripc must on tcp
#   fi_rdm_gather_msg  the same with -G: the payload is copied into the send
#                   buffer before every send, as libripc's short send does
#   fi_rdm_pull     raw/fi_rma_bench -U: libripc's long-send protocol on raw
#                   libfabric (descriptor message, fi_read, DONE), 1 in
#                   flight (the floor of libripc's long send)
#   fi_rdm_pullreg  the same, registering the sender's buffer per message
#                   as libripc must (fresh key per long send)
#   fi_rdm_pullhuge fi_rdm_pull from a sender's buffer on huge pages
#                   (raw/fi_rma_bench -H), as ripc_buf_alloc gives from 1 MiB
#   fi_rdm_read     raw/fi_rma_bench: READ_WINDOW fi_reads in flight
#                   (the provider's RDMA-read ceiling)
# then (issues 3 and 6), for each provider:
#   libripc_reqrep_retbuf  ripc_reqrep -x retbuf: short request, long reply
#                   RDMA-written into a return buffer the request offered;
#                   median request-to-reply time (lat_us) and reply MB/s
#   libripc_reqrep_pull    ripc_reqrep -x pull: the same without a return
#                   buffer, the reply pulled into a receive window
#   libripc, libripc_<N>senders  ripc_msgrate: 64-byte short sends per
#                   second (msg_rate, kmsg_s) from 1 and N sender processes
#                   to one service, under a credit window
#   fi_rdm_msgrate, fi_rdm_msgrate_<N>senders  raw/fi_msgrate: the same on
#                   raw FI_EP_RDM endpoints (fi_inject), same credits
#   fi_rdm_wire_msgrate    raw/fi_msgrate -m 120, one sender: raw messages
#                   as large as libripc's on the wire (48-byte header, item
#                   table, 64-byte item)
#   libripc_fetch_long, libripc_fetch_retbuf  ripc_filefetch: fetch an
#                   in-memory file by name (short request), by long send
#                   into a receive window or into a return buffer
# then (issue 12, STEPS "life"), for each provider:
#   libripc_think<T>ms  ripc_sparse: 64-byte request/reply, the client
#                   sleeps T ms (SPARSE_THINK) between requests, the server
#                   blocks in ripc_receive; median (lat_us) and p99
#                   (lat_p99_us), one-way; T >= 50 is the wake-up latency
#                   of a server idle that long
#   libripc_unpinned_think<T>ms  the same with server and client free to
#                   run on every CPU (no taskset to one CPU each)
#   libripc_first, libripc_first_noresolver  ripc_firstcontact: FIRST_PROCS
#                   fresh processes, start to first reply (first_us, from
#                   fork; first_init_us, from just before ripc_init;
#                   first_send_us, from just before the first send), with
#                   the default resolver and with RIPC_RESOLVER=0; only in
#                   the first LIFE_ROUNDS rounds
# for tcp also the raw libfabric counterpart, fi_rdm_think<T>ms
# (raw/fi_rma_bench -Z: tcp through rxm's passthrough, both sides asleep on
# the CQ's wait fd whenever they wait, pinned),
# and once per round the kernel-TCP counterpart (tcp_socket_think<T>ms,
# raw/tcp_bench -Z, and tcp_socket_unpinned_think<T>ms), in the first LIFE_ROUNDS rounds tcp_socket_first
# (raw/tcp_bench -F) and the idle cost (ripc_idle, IDLE_SEC seconds, all
# idle processes side by side): libripc_recv (blocked in ripc_receive),
# libripc_sleep (in sleep() after ripc_init) on shm, tcp and all
# transports, and tcp_socket (blocked in recv) as reference;
# and, once per round, the peers on kernel TCP and libfabric's own tool:
#   fi_pingpong tcp-msg       fi_pingpong -p tcp -e msg (mean, not median)
#   tcp_socket tcp            raw/tcp_bench -M, blocking sockets
#   tcp_socket tcp_busypoll   raw/tcp_bench -M -b, both ends spin
#   tcp_fetch tcp             raw/tcp_filefetch: the file fetch over kernel
#                             TCP sockets (the file-fetch baseline)
# and what a user would pick instead (issue 14, test/benchmarks/peers),
# at the same LAT_SIZES and BW_SIZES, each over its transport that pairs
# with libripc shm (first) and tcp:
#   zmq_reqrep ipc|tcp, zmq_pushpull ipc|tcp   peers/zmq_bench (ZeroMQ
#                             REQ/REP median; PUSH/PULL streaming)
#   nng_reqrep ipc|tcp, nng_pushpull ipc|tcp   peers/nng_bench (NNG)
#   ucx_tag sm|tcp, ucx_get sm|tcp  peers/ucx_bench.sh (ucx_perftest:
#                             tag_lat 50th percentile, tag_bw, ucp_get)
#
# Servers run on CPU $SRV_CPU, clients on CPU $CLI_CPU (taskset, threads
# included), everything on 127.0.0.1 / lo (FI_TCP_IFACE=lo) or shared
# memory, with a private RIPC_REGISTRY.  Every process runs under
# `timeout`; every server is ended by pid if it has not left by itself;
# /dev/shm files left by our processes (shm endpoints are named
# "<pid>:...") and the registry are removed at the end.
#
# Writes (OUT_DIR defaults to docs/perf, DOC to docs/PERFORMANCE.md):
#   $OUT_DIR/results-<date>.txt   every result line, "# round N" between
#   $OUT_DIR/summary-<date>.txt   system transport size metric median unit min max n
#   $OUT_DIR/log-<date>.txt       stderr of every program, foreign load per step
#   $OUT_DIR/latency.png, bandwidth.png, reqrep.png, msgrate.png,
#       filefetch.png
#   $DOC                          tables and plots, generated
#
# Knobs (environment), defaults in brackets:
#   REPS [5]  PROVIDERS ["shm tcp"]; net: libripc's tcp transport with
#       RIPC_TCP_NATIVE=1 (the benchmarks' -p net) against the raw
#       programs on libfabric 1.17's net provider, e.g. PROVIDERS="tcp net"
#       STEPS="core msgrate" for the two protocols in the same rounds
#   PEERS ["fi_pingpong tcp_socket zmq nng ucx"]
#   LAT_SIZES ["8 64 256 1024 4096 16384 65536"]  LAT_ITERS [20000]
#   LAT_WARMUP [1000]  LAT_SEC [0.5]: time budget per size and program
#   BW_SIZES ["65536 262144 1048576 4194304 16777216 67108864"]
#   BW_SEC [0.5]  BW_ITERS [100000]  BW_WINDOW [4]  READ_WINDOW [8]
#   REQ_SIZES ["4096 16384 65536 262144 1048576 4194304 16777216 67108864"]
#   REQ_SEC [0.2]  REQ_ITERS [20000]: request/reply, per size and mode
#   RATE_SENDERS ["1 4"]  RATE_SEC [0.5]: message rate, per sender count
#   RATE_WIRE [120]: bytes of the raw run at libripc's wire size ("" skips)
#   FETCH_SIZES ["1024 16384 65536 1048576 4194304 16777216 67108864"]
#   FETCH_SEC [0.2]  FETCH_ITERS [10000]: file fetch, per size and mode
#   SPARSE_THINK ["1 10 50"]  SPARSE_SIZE [64]  SPARSE_ITERS [1000]
#   SPARSE_SEC [2]: sparse request/reply, per think time (ms)
#   FIRST_PROCS [200]: fresh processes per first-contact variant
#   IDLE_SEC [20]: idle time measured   LIFE_ROUNDS [1]: rounds with the
#       first-contact and idle steps (they take FIRST_PROCS processes and
#       IDLE_SEC seconds each; their samples are many already)
#   PEER_BW_BYTES [268435456]: bytes per size of the peers' streams
#   STEPS ["core reqrep msgrate fetch life peers"]: which groups run
#       (core = ping-pong, long send and their raw floors; reqrep, msgrate
#       and fetch with their raw floors, fetch including tcp_fetch; life =
#       sparse, first contact, idle; peers = PEERS)
#   SRV_CPU [0]  CLI_CPU [1]  PROC_LIMIT [120]: timeout of one process, s
#   TOTAL_LIMIT [4500]: start no new step after this many s
#   QUIET_PCT [15] QUIET_WAIT [10] QUIET_BUDGET [60]: before each step,
#       wait (bounded) while other processes keep the CPUs busier than this
#   QUIET_MAX [25]: summaries leave out samples whose step ran under more
#       foreign load than this (%), when quieter samples exist
#   BUILD [1]  BUILD_DIR [build-bench]  OUT_DIR  DOC  NOTES  PLOTS [1]
#   LIFE_NOTES [test/benchmarks/life_notes.md]: included verbatim after the
#       service-life tables (soak and churn figures, which run_bench.sh
#       does not measure)
#   PEERS_BASELINE [../shared/bench/peers/baseline/summary.txt]: shown
#       as a table of its own (another day's run), if readable
#   RESULTS_FROM=docs/perf/results-<date>.txt: measure nothing, only
#       regenerate that run's summary, plots and $DOC (e.g. after editing
#       NOTES, test/benchmarks/perf_notes.md, which is included verbatim)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

REPS=${REPS:-5}
PROVIDERS=${PROVIDERS:-"shm tcp"}
PEERS=${PEERS:-"fi_pingpong tcp_socket zmq nng ucx"}
LAT_SIZES=${LAT_SIZES:-"8 64 256 1024 4096 16384 65536"}
LAT_ITERS=${LAT_ITERS:-20000}
LAT_WARMUP=${LAT_WARMUP:-1000}
LAT_SEC=${LAT_SEC:-0.5}
BW_SIZES=${BW_SIZES:-"65536 262144 1048576 4194304 16777216 67108864"}
BW_SEC=${BW_SEC:-0.5}
BW_ITERS=${BW_ITERS:-100000}
BW_WINDOW=${BW_WINDOW:-4}
READ_WINDOW=${READ_WINDOW:-8}
REQ_SIZES=${REQ_SIZES:-"4096 16384 65536 262144 1048576 4194304 16777216 67108864"}
REQ_SEC=${REQ_SEC:-0.2}
REQ_ITERS=${REQ_ITERS:-20000}
RATE_SENDERS=${RATE_SENDERS:-"1 4"}
RATE_SEC=${RATE_SEC:-0.5}
RATE_WIRE=${RATE_WIRE-120}
FETCH_SIZES=${FETCH_SIZES:-"1024 16384 65536 1048576 4194304 16777216 67108864"}
FETCH_SEC=${FETCH_SEC:-0.2}
FETCH_ITERS=${FETCH_ITERS:-10000}
SPARSE_THINK=${SPARSE_THINK:-"1 10 50"}
SPARSE_SIZE=${SPARSE_SIZE:-64}
SPARSE_ITERS=${SPARSE_ITERS:-1000}
SPARSE_SEC=${SPARSE_SEC:-2}
FIRST_PROCS=${FIRST_PROCS:-200}
IDLE_SEC=${IDLE_SEC:-20}
LIFE_ROUNDS=${LIFE_ROUNDS:-1}
PEER_BW_BYTES=${PEER_BW_BYTES:-268435456}
STEPS=${STEPS:-"core reqrep msgrate fetch life peers"}
SRV_CPU=${SRV_CPU:-0}
CLI_CPU=${CLI_CPU:-1}
ALL_CPUS=0-$(($(nproc) - 1)) # the unpinned sparse steps
PROC_LIMIT=${PROC_LIMIT:-120}
TOTAL_LIMIT=${TOTAL_LIMIT:-4500}
QUIET_PCT=${QUIET_PCT:-15}
QUIET_MAX=${QUIET_MAX:-25}
QUIET_WAIT=${QUIET_WAIT:-10}
QUIET_BUDGET=${QUIET_BUDGET:-60}
BUILD=${BUILD:-1}
BUILD_DIR=${BUILD_DIR:-$SRC/build-bench}
OUT_DIR=${OUT_DIR:-$SRC/docs/perf}
DOC=${DOC:-$SRC/docs/PERFORMANCE.md}
NOTES=${NOTES:-$HERE/perf_notes.md}
LIFE_NOTES=${LIFE_NOTES:-$HERE/life_notes.md}
PLOTS=${PLOTS:-1}
# The peers' baseline (../shared/bench/peers), shown for orientation.
PEERS_BASELINE=${PEERS_BASELINE:-$SRC/../shared/bench/peers/baseline/summary.txt}

RESULTS_FROM=${RESULTS_FROM:-}
STAMP=$(date -u +%Y%m%d-%H%M%S)
if [ -n "$RESULTS_FROM" ]; then
	[ -f "$RESULTS_FROM" ] || { echo "no such file: $RESULTS_FROM" >&2; exit 1; }
	RESULTS_FROM=$(cd "$(dirname "$RESULTS_FROM")" && pwd)/$(basename "$RESULTS_FROM")
	STAMP=$(basename "$RESULTS_FROM" .txt)
	STAMP=${STAMP#results-}
	# The run's own settings, for the text of the document.
	SETTINGS=$(sed -n 's/^# settings: //p' "$RESULTS_FROM")
	for k in REPS PROVIDERS PEERS LAT_SIZES LAT_ITERS LAT_WARMUP LAT_SEC BW_SIZES \
		BW_SEC BW_ITERS BW_WINDOW READ_WINDOW SRV_CPU CLI_CPU REQ_SIZES REQ_SEC \
		REQ_ITERS RATE_SENDERS RATE_SEC RATE_WIRE FETCH_SIZES FETCH_SEC FETCH_ITERS \
		SPARSE_THINK SPARSE_SIZE SPARSE_ITERS SPARSE_SEC FIRST_PROCS IDLE_SEC LIFE_ROUNDS \
		PEER_BW_BYTES STEPS; do
		v=$(echo " $SETTINGS" | grep -oE " $k=(\"[^\"]*\"|[^ ]*)" | head -1)
		v=${v#* $k=}
		v=${v#\"}
		v=${v%\"}
		[ -n "$v" ] && printf -v "$k" '%s' "$v"
	done
fi
START=$(date +%s)
WORK=$(mktemp -d /tmp/ripc-bench.XXXXXX)
RESULTS=${RESULTS_FROM:-$OUT_DIR/results-$STAMP.txt}
SUMMARY=$OUT_DIR/summary-$STAMP.txt
LOG=$OUT_DIR/log-$STAMP.txt

export FI_TCP_IFACE=lo                 # libfabric tcp: loopback only
export RIPC_TCP_ADDR=127.0.0.1         # libripc tcp: the same
export RIPC_REGISTRY=/dev/shm/ripc-bench-$$-registry
export RIPC_RESOLVER=0                 # no multicast resolver: one host
# rxm's passthrough, which libripc sets for itself (prov/tcp/tcp.c), for
# the raw tcp programs too: the floor under libripc's own path.
export FI_OFI_RXM_ENABLE_PASSTHRU=${FI_OFI_RXM_ENABLE_PASSTHRU:-1}
# First contact also runs with the resolver on: a port of our own, so that
# other people's libripc programs on this host do not answer ours.
export RIPC_RESOLVER_PORT=${RIPC_RESOLVER_PORT:-$((46000 + $$ % 1000))}

log() { echo "[run_bench $(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }
die() { log "error: $*"; exit 1; }
csv() { echo "$*" | tr -s ' ' ','; }
elapsed() { echo $(($(date +%s) - START)); }
# tcpish PROV: a transport over TCP (tcp, or net: tcp on libfabric 1.17's
# native provider), which has the wait-fd floor and pairs with the peers'
# tcp and kernel TCP
tcpish() { case $1 in tcp | net) return 0 ;; esac; return 1; }

# ---- processes: started pinned, under timeout, recorded by pid ----------

PIDS=() # `timeout` processes of the servers we started
# The programs' own pids go to $WORK/pids (a file, so that clients run in
# command substitutions are recorded too): for /dev/shm and final kills.
OUR_COMMS=" ripc_pingpong ripc_long_bw fi_rma_bench tcp_bench fi_pingpong ripc_reqrep \
ripc_msgrate ripc_filefetch fi_msgrate tcp_filefetch ripc_sparse ripc_firstconta \
ripc_idle zmq_bench nng_bench ucx_perftest "
# Senders that ripc_msgrate and fi_msgrate fork note their pids here.
export BENCH_PIDS=$WORK/pids

# run_pinned CPU NAME CMD...: exec CMD pinned to CPU under timeout; the
# program's own pid lands in $WORK/NAME.pid (sh execs it, and libtool's
# wrapper scripts exec the real binary, so the pid stays the same).
run_pinned() {
	local cpu=$1 name=$2
	shift 2
	taskset -c "$cpu" timeout -k 3 "$PROC_LIMIT" \
		sh -c 'echo $$ > "$0"; exec "$@"' "$WORK/$name.pid" "$@"
}

# srv NAME CMD...: start a server on SRV_CPU; its timeout pid in SRV_PID
srv() {
	local name=$1
	shift
	run_pinned "$SRV_CPU" "$name" "$@" >> "$WORK/$name.out" 2>> "$WORK/stderr" &
	SRV_PID=$!
	SRV_NAME=$name
	PIDS+=("$SRV_PID")
}

# cli NAME CMD...: run a client on CLI_CPU, result lines on stdout
cli() {
	local name=$1 rc
	shift
	run_pinned "$CLI_CPU" "$name" "$@" 2>> "$WORK/stderr"
	rc=$?
	remember_pid "$name"
	[ $rc -eq 0 ] || log "$name exited with status $rc"
	return $rc
}

remember_pid() {
	[ -s "$WORK/$1.pid" ] && cat "$WORK/$1.pid" >> "$WORK/pids"
	rm -f "$WORK/$1.pid"
}

# is_ours PID: alive and running one of our programs (not a reused pid)
is_ours() {
	local c
	c=$(cat /proc/"$1"/comm 2>/dev/null) || return 1
	case "$OUR_COMMS" in *" $c "*) return 0 ;; esac
	return 1
}

# stop_srv [GRACE]: let the server leave by itself for GRACE tenths of a
# second (it does after the client's BYE), then end it by pid.
stop_srv() {
	local grace=${1:-50} i real=""
	[ -n "${SRV_PID:-}" ] || return 0
	[ -s "$WORK/$SRV_NAME.pid" ] && real=$(cat "$WORK/$SRV_NAME.pid")
	for ((i = 0; i < grace; i++)); do
		kill -0 "$SRV_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$SRV_PID" 2>/dev/null; then
		[ "$grace" -gt 0 ] && log "server $SRV_NAME (pid ${real:-?}) still running: ending it"
		[ -n "$real" ] && is_ours "$real" && kill -TERM "$real" 2>/dev/null
		kill -TERM "$SRV_PID" 2>/dev/null
		sleep 0.5
		[ -n "$real" ] && is_ours "$real" && kill -KILL "$real" 2>/dev/null
		kill -KILL "$SRV_PID" 2>/dev/null
	fi
	wait "$SRV_PID" 2>/dev/null
	remember_pid "$SRV_NAME"
	clean_shm
	SRV_PID=
}

# Remove /dev/shm files of our programs that have exited.
clean_shm() {
	local p
	[ -s "$WORK/pids" ] || return 0
	while read -r p; do
		kill -0 "$p" 2>/dev/null && continue
		rm -f /dev/shm/"$p":* 2>/dev/null
	done < "$WORK/pids"
}

cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null || continue
		kill -TERM "$p" 2>/dev/null
	done
	for f in "$WORK"/*.pid; do
		[ -s "$f" ] && cat "$f" >> "$WORK/pids"
	done
	sleep 0.3
	if [ -s "$WORK/pids" ]; then
		while read -r p; do
			is_ours "$p" && kill -KILL "$p" 2>/dev/null
		done < "$WORK/pids"
	fi
	for p in "${PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	clean_shm
	rm -f "$RIPC_REGISTRY" "$RIPC_REGISTRY".* 2>/dev/null
	[ -f "$WORK/stderr" ] && cat "$WORK/stderr" >> "$LOG"
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# free_port: a random TCP port that no socket in /proc/net/tcp{,6} uses
free_port() {
	local used p try
	used=" $(awk 'FNR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		while read -r h; do printf '%d ' "$((16#$h))"; done) "
	for try in $(seq 50); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		case "$used" in *" $p "*) continue ;; esac
		echo "$p"
		return 0
	done
	echo 47999
}

# wait_listen PORT: until a socket listens on PORT (5 s at most)
wait_listen() {
	local hex i
	hex=$(printf '%04X' "$1")
	for ((i = 0; i < 50; i++)); do
		awk -v h="$hex" 'FNR > 1 && $4 == "0A" { split($2, a, ":"); if (a[2] == h) f = 1 } END { exit !f }' \
			/proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
		kill -0 "$SRV_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# wait_ready FILE: the service ID a libripc server wrote (5 s at most)
wait_ready() {
	local i
	for ((i = 0; i < 100; i++)); do
		if [ -s "$1" ]; then
			cat "$1"
			return 0
		fi
		kill -0 "$SRV_PID" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

# ---- foreign load: CPU taken by processes other than ours ---------------

# Niced processes (a fuzzer at nice 19) are not counted as busy: the
# scheduler gives them ~1.5 % of a CPU next to our nice-0 programs.
ticks() { # "total busy ours" in clock ticks
	local a s
	read -r -a a < /proc/stat
	s=$(cat /proc/$$/stat)
	s=${s##*) }
	read -r -a s <<< "$s"
	echo "$((a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7] + a[8])) $((a[1] + a[3] + a[6] + a[7] + a[8])) $((s[13] + s[14]))"
}
busy_pct() { # busy % of the machine over half a second
	local t1 b1 t2 b2
	read -r t1 b1 _ <<< "$(ticks)"
	sleep 0.5
	read -r t2 b2 _ <<< "$(ticks)"
	echo $((100 * (b2 - b1) / (t2 - t1 > 0 ? t2 - t1 : 1)))
}
QUIET_USED=0
wait_quiet() {
	local b w=0
	b=$(busy_pct)
	while [ "$b" -ge "$QUIET_PCT" ] && [ "$w" -lt "$QUIET_WAIT" ] &&
		[ "$QUIET_USED" -lt "$QUIET_BUDGET" ]; do
		sleep 1.5
		w=$((w + 2))
		QUIET_USED=$((QUIET_USED + 2))
		b=$(busy_pct)
	done
	[ "$b" -ge "$QUIET_PCT" ] && log "machine still ${b}% busy before this step (waited ${w} s)"
}

# ---- steps: each prints result lines on stdout ---------------------------

step_ripc_lat() { # PROV
	local p=$1 id
	rm -f "$WORK/ready"
	srv ripc_pp "$BIN/ripc_pingpong" -s -p "$p" -r "$WORK/ready" -T "$PROC_LIMIT"
	if id=$(wait_ready "$WORK/ready"); then
		cli ripc_ppc "$BIN/ripc_pingpong" -p "$p" -S "$(csv $LAT_SIZES)" \
			-n "$LAT_ITERS" -w "$LAT_WARMUP" -t "$LAT_SEC" -T "$PROC_LIMIT" "$id"
	else
		log "ripc_pingpong server ($p) did not start"
	fi
	stop_srv
}

step_ripc_bw() { # PROV NAME WINDOW MODE [VAR=VALUE...]: environment of both sides
	local p=$1 name=$2 w=$3 mode=$4 id
	shift 4
	rm -f "$WORK/ready"
	srv ripc_bw env "$@" "$BIN/ripc_long_bw" -s -p "$p" -r "$WORK/ready" -S "$(csv $BW_SIZES)" \
		-W "$w" -x "$mode" -T "$PROC_LIMIT"
	if id=$(wait_ready "$WORK/ready"); then
		# The client takes -x release only (it waits for the release
		# instead of the answer); where the data lands is the server's.
		cli ripc_bwc env "$@" "$BIN/ripc_long_bw" -p "$p" -S "$(csv $BW_SIZES)" -W "$w" \
			$([ "$mode" = release ] && echo "-x release") \
			-N "$name" -n "$BW_ITERS" -t "$BW_SEC" -T "$PROC_LIMIT" "$id"
	else
		log "ripc_long_bw server ($p) did not start"
	fi
	stop_srv
}

step_raw() { # PROV: latency, read bandwidth and pull protocol, pullreg, pullhuge
	local p=$1 port
	port=$(free_port)
	srv raw "$RAW/fi_rma_bench" -p "$p" -s -P "$port" -T "$PROC_LIMIT" \
		-R "$(csv $BW_SIZES)" -U ""
	cli rawc "$RAW/fi_rma_bench" -p "$p" -P "$port" -T "$PROC_LIMIT" -M \
		-n "$LAT_ITERS" -t "$LAT_SEC" -W "$READ_WINDOW" -X "$p" \
		-L "$(csv $LAT_SIZES)" -R "$(csv $BW_SIZES)" -U ""
	stop_srv
	# The pulls in fresh processes each, as libripc's steps run, so that
	# the three raw pulls are measured alike.  "": fi_rdm_pull, -K:
	# fi_rdm_pullreg, -H: fi_rdm_pullhuge.
	for v in "" -K -H; do
		port=$(free_port)
		srv raw "$RAW/fi_rma_bench" -p "$p" -s -P "$port" \
			-T "$PROC_LIMIT" -R "" -U "$(csv $BW_SIZES)"
		cli rawc "$RAW/fi_rma_bench" -p "$p" -P "$port" \
			-T "$PROC_LIMIT" $v -t "$BW_SEC" -X "$p" -L "" -R "" \
			-U "$(csv $BW_SIZES)"
		stop_srv
	done
	if tcpish "$p"; then
		port=$(free_port)
		srv raw env FI_RMA_BENCH_WAIT_FD=1 "$RAW/fi_rma_bench" -p "$p" -s \
			-P "$port" -T "$PROC_LIMIT" -R ""
		cli rawc env FI_RMA_BENCH_WAIT_FD=1 "$RAW/fi_rma_bench" -p "$p" \
			-P "$port" -T "$PROC_LIMIT" -M -n "$LAT_ITERS" -t "$LAT_SEC" \
			-X "$p" -S fi_rdm_waitfd -L "$(csv $LAT_SIZES)" -R ""
		stop_srv
	fi
	port=$(free_port)
	srv raw "$RAW/fi_rma_bench" -p "$p" -s -P "$port" -T "$PROC_LIMIT" -R "" -G
	cli rawc "$RAW/fi_rma_bench" -p "$p" -P "$port" -T "$PROC_LIMIT" -M -G \
		-n "$LAT_ITERS" -t "$LAT_SEC" -X "$p" -S fi_rdm_gather \
		-L "$(csv $LAT_SIZES)" -R ""
	stop_srv
}

# fi_pingpong: one pair per size; its usec/xfer column is the mean
# one-way time.  -d lo keeps the tcp provider on loopback.
step_fi_pingpong() {
	local size iters port out line
	for size in $LAT_SIZES; do
		iters=10000
		[ "$size" -gt 1024 ] && iters=2000
		port=$(free_port)
		srv fipp fi_pingpong -p tcp -e msg -d lo -B "$port" -I "$iters" -S "$size"
		out=""
		if wait_listen "$port"; then
			out=$(cli fippc fi_pingpong -p tcp -e msg -d lo -P "$port" -I "$iters" \
				-S "$size" 127.0.0.1)
		fi
		stop_srv
		line=$(echo "$out" | awk '$1 ~ /^[0-9]/ && NF >= 8' | tail -1)
		if [ -z "$line" ]; then
			log "fi_pingpong size $size failed: $(echo "$out" | tail -1)"
			continue
		fi
		set -- $line
		echo "fi_pingpong tcp-msg $size lat_us $7 us"
	done
}

step_tcp_socket() {
	local port
	port=$(free_port)
	srv tcpb "$RAW/tcp_bench" -s -P "$port" -T "$PROC_LIMIT"
	cli tcpbc "$RAW/tcp_bench" -P "$port" -M -t "$LAT_SEC" -n "$LAT_ITERS" \
		-L "$(csv $LAT_SIZES)" -B "$(csv $BW_SIZES)"
	cli tcpbc "$RAW/tcp_bench" -P "$port" -M -t "$LAT_SEC" -n "$LAT_ITERS" \
		-L "$(csv $LAT_SIZES)" -B "" -b -q
	stop_srv
}

# ---- steps of issues 3 and 6 ---------------------------------------------

step_ripc_reqrep() { # PROV MODE (retbuf or pull)
	local p=$1 mode=$2 id
	rm -f "$WORK/ready"
	srv ripc_rr "$BIN/ripc_reqrep" -s -p "$p" -r "$WORK/ready" -T "$PROC_LIMIT"
	if id=$(wait_ready "$WORK/ready"); then
		cli ripc_rrc "$BIN/ripc_reqrep" -p "$p" -x "$mode" -S "$(csv $REQ_SIZES)" \
			-n "$REQ_ITERS" -t "$REQ_SEC" -T "$PROC_LIMIT" "$id"
	else
		log "ripc_reqrep server ($p) did not start"
	fi
	stop_srv
}

step_ripc_msgrate() { # PROV
	local p=$1 id
	rm -f "$WORK/ready"
	srv ripc_mr "$BIN/ripc_msgrate" -s -p "$p" -r "$WORK/ready" -T "$PROC_LIMIT"
	if id=$(wait_ready "$WORK/ready"); then
		cli ripc_mrc "$BIN/ripc_msgrate" -p "$p" -c "$(csv $RATE_SENDERS)" \
			-t "$RATE_SEC" -T "$PROC_LIMIT" "$id"
	else
		log "ripc_msgrate server ($p) did not start"
	fi
	stop_srv
}

step_raw_msgrate() { # PROV: the same senders, then one at libripc's wire size
	local p=$1 port
	port=$(free_port)
	srv rawmr "$RAW/fi_msgrate" -p "$p" -s -P "$port" -T "$PROC_LIMIT" \
		-c "$(csv $RATE_SENDERS)"
	cli rawmrc "$RAW/fi_msgrate" -p "$p" -P "$port" -T "$PROC_LIMIT" -X "$p" \
		-c "$(csv $RATE_SENDERS)" -t "$RATE_SEC"
	stop_srv
	[ -n "$RATE_WIRE" ] || return 0
	port=$(free_port)
	srv rawmr "$RAW/fi_msgrate" -p "$p" -s -P "$port" -T "$PROC_LIMIT" -c 1
	cli rawmrc "$RAW/fi_msgrate" -p "$p" -P "$port" -T "$PROC_LIMIT" -X "$p" \
		-c 1 -t "$RATE_SEC" -m "$RATE_WIRE" -S fi_rdm_wire
	stop_srv
}

step_ripc_fetch() { # PROV MODE (long or retbuf)
	local p=$1 mode=$2 id
	rm -f "$WORK/ready"
	srv ripc_ff "$BIN/ripc_filefetch" -s -p "$p" -r "$WORK/ready" \
		-S "$(csv $FETCH_SIZES)" -T "$PROC_LIMIT"
	if id=$(wait_ready "$WORK/ready"); then
		cli ripc_ffc "$BIN/ripc_filefetch" -p "$p" -x "$mode" -S "$(csv $FETCH_SIZES)" \
			-n "$FETCH_ITERS" -t "$FETCH_SEC" -T "$PROC_LIMIT" "$id"
	else
		log "ripc_filefetch server ($p) did not start"
	fi
	stop_srv
}

step_tcp_fetch() {
	local port
	port=$(free_port)
	srv tcpff "$RAW/tcp_filefetch" -s -P "$port" -S "$(csv $FETCH_SIZES)" -T "$PROC_LIMIT"
	if wait_listen "$port"; then
		cli tcpffc "$RAW/tcp_filefetch" -P "$port" -S "$(csv $FETCH_SIZES)" \
			-n "$FETCH_ITERS" -t "$FETCH_SEC" -T "$PROC_LIMIT" -q
	else
		log "tcp_filefetch server did not start"
	fi
	stop_srv
}

# ---- steps of issue 12: service life ------------------------------------

# Sparse steps: pinned like every step (server and client on CPUs of
# their own), or with "unpinned" on every CPU, as services run: there a
# peer woken by a loopback send may be queued on the waker's CPU, which
# pinning hides (perf_notes.md, "a spinning receive kept a same-host peer
# off the CPU").  Unpinned lines are named *_unpinned_think<T>ms.
step_ripc_sparse() { # PROV [unpinned]
	local p=$1 id name=libripc
	if [ "${2:-}" = unpinned ]; then
		local SRV_CPU=$ALL_CPUS CLI_CPU=$ALL_CPUS
		name=libripc_unpinned
	fi
	rm -f "$WORK/ready"
	srv ripc_sp "$BIN/ripc_sparse" -s -p "$p" -r "$WORK/ready" -T "$PROC_LIMIT"
	if id=$(wait_ready "$WORK/ready"); then
		cli ripc_spc "$BIN/ripc_sparse" -N "$name" -p "$p" -x "$(csv $SPARSE_THINK)" -S "$SPARSE_SIZE" \
			-n "$SPARSE_ITERS" -t "$SPARSE_SEC" -T "$PROC_LIMIT" "$id"
	else
		log "ripc_sparse server ($p) did not start"
	fi
	stop_srv
}

# Raw libfabric's sparse request/reply (tcp): the floor of libripc's,
# as a process must sleep on its CQ's wait fd to be idle.
step_raw_sparse() {
	local port t
	for t in $SPARSE_THINK; do
		port=$(free_port)
		srv rawsp "$RAW/fi_rma_bench" -p tcp -s -P "$port" -Z "$t" -R "" \
			-T "$PROC_LIMIT"
		cli rawspc "$RAW/fi_rma_bench" -p tcp -P "$port" -Z "$t" \
			-L "$SPARSE_SIZE" -n "$SPARSE_ITERS" -t "$SPARSE_SEC" -R "" \
			-T "$PROC_LIMIT"
		stop_srv
	done
}

step_tcp_sparse() { # [unpinned]
	local port name=tcp_socket
	if [ "${1:-}" = unpinned ]; then
		local SRV_CPU=$ALL_CPUS CLI_CPU=$ALL_CPUS
		name=tcp_socket_unpinned
	fi
	port=$(free_port)
	srv tcpsp "$RAW/tcp_bench" -s -P "$port" -T "$PROC_LIMIT"
	if wait_listen "$port"; then
		cli tcpspc "$RAW/tcp_bench" -P "$port" -L "$SPARSE_SIZE" -Z "$(csv $SPARSE_THINK)" \
			-n "$SPARSE_ITERS" -t "$SPARSE_SEC" -q | sed "s/^tcp_socket_think/${name}_think/"
	else
		log "tcp_bench server did not start"
	fi
	stop_srv
}

# First contact: the echo server of ripc_sparse; the driver spawns
# FIRST_PROCS processes one after another.  RES = 1 (default resolver)
# or 0 (RIPC_RESOLVER=0), on both sides.
step_ripc_first() { # PROV RES
	local p=$1 res=$2 id name=libripc_first limit
	[ "$res" = 0 ] && name=libripc_first_noresolver
	limit=$((FIRST_PROCS * 3 + 60))
	rm -f "$WORK/ready"
	srv ripc_fcs env RIPC_RESOLVER="$res" "$BIN/ripc_sparse" -s -p "$p" -r "$WORK/ready" \
		-T "$limit"
	if id=$(wait_ready "$WORK/ready"); then
		PROC_LIMIT=$limit cli ripc_fc env RIPC_RESOLVER="$res" "$BIN/ripc_firstcontact" \
			-p "$p" -n "$FIRST_PROCS" -S "$SPARSE_SIZE" -N "$name" -T "$limit" "$id"
		# ripc_sparse's client ends the server (BYE) after one request.
		cli ripc_fcb "$BIN/ripc_sparse" -p "$p" -x 0 -n 1 -w 0 -t 0.1 -S "$SPARSE_SIZE" \
			-T 20 "$id" > /dev/null
	else
		log "ripc_sparse server ($p, resolver $res) did not start"
	fi
	stop_srv
}

step_tcp_first() {
	local port limit=$((FIRST_PROCS * 3 + 60))
	port=$(free_port)
	srv tcpfc "$RAW/tcp_bench" -s -P "$port" -T "$limit"
	if wait_listen "$port"; then
		PROC_LIMIT=$limit cli tcpfcc "$RAW/tcp_bench" -P "$port" -L "$SPARSE_SIZE" \
			-F "$FIRST_PROCS" -T "$limit" -q
	else
		log "tcp_bench server did not start"
	fi
	stop_srv
}

# Idle cost: every idle process side by side (they are idle: they do not
# disturb each other), each measured by its own ripc_idle from outside.
step_idle() {
	local i=0 args pids=() limit=$((IDLE_SEC + 60))
	for args in "-x recv -p shm" "-x recv -p tcp" "-x recv" "-x sleep -p shm" \
		"-x sleep -p tcp" "-x sleep" "-x tcp"; do
		i=$((i + 1))
		# shellcheck disable=SC2086
		timeout -k 3 "$limit" sh -c 'echo $$ > "$0"; exec "$@"' "$WORK/idle$i.pid" \
			"$BIN/ripc_idle" $args -t "$IDLE_SEC" -T "$limit" \
			> "$WORK/idle$i.out" 2>> "$WORK/stderr" &
		pids+=($!)
	done
	for ((i = 0; i < ${#pids[@]}; i++)); do
		wait "${pids[$i]}" || log "ripc_idle $((i + 1)) exited with status $?"
		remember_pid "idle$((i + 1))"
		cat "$WORK/idle$((i + 1)).out"
	done
	clean_shm
}

# ---- steps of issue 14: the peers ---------------------------------------

peer_ep() { # TRANSPORT NAME: a ZeroMQ/NNG endpoint on loopback or a unix socket
	if [ "$1" = tcp ]; then echo "tcp://127.0.0.1:$(free_port)"; else echo "ipc://$WORK/$2.ipc"; fi
}
peer_count() { # SIZE: messages of a stream, PEER_BW_BYTES / SIZE, 8 at least
	local c=$((PEER_BW_BYTES / $1))
	[ "$c" -lt 8 ] && c=8
	echo "$c"
}

step_zmq() {
	local tr ep z c
	[ -x "$PEER/zmq_bench" ] || { log "peers/zmq_bench not built (libzmq3-dev): skipped"; return 0; }
	for tr in ipc tcp; do
		ep=$(peer_ep "$tr" zmqlat)
		srv zmq "$PEER/zmq_bench" lat-server "$ep" "$PROC_LIMIT"
		sleep 0.2 # REQ connects asynchronously and retries by itself
		cli zmqc "$PEER/zmq_bench" lat-client "$ep" "$tr" "$(csv $LAT_SIZES)" \
			"$LAT_ITERS" "$LAT_SEC" "$LAT_WARMUP"
		stop_srv
		for z in $BW_SIZES; do
			c=$(peer_count "$z")
			ep=$(peer_ep "$tr" "zmqthr$z")
			: > "$WORK/zmqthr.out"
			srv zmqthr "$PEER/zmq_bench" thr-server "$ep" "$tr" "$z" "$c" "$PROC_LIMIT"
			sleep 0.2
			cli zmqthrc "$PEER/zmq_bench" thr-client "$ep" "$z" "$c" "$PROC_LIMIT"
			stop_srv
			cat "$WORK/zmqthr.out" # the receiver prints the line
		done
	done
	rm -f "$WORK"/*.ipc
}

step_nng() {
	local tr ep z c
	[ -x "$PEER/nng_bench" ] || { log "peers/nng_bench not built (libnng-dev): skipped"; return 0; }
	for tr in ipc tcp; do
		ep=$(peer_ep "$tr" nnglat)
		srv nng "$PEER/nng_bench" server "$ep" "$PROC_LIMIT"
		cli nngc "$PEER/nng_bench" client "$ep" "$tr" "$(csv $LAT_SIZES)" \
			"$LAT_ITERS" "$LAT_SEC" "$LAT_WARMUP" # dial retries 5 s
		stop_srv
		for z in $BW_SIZES; do
			c=$(peer_count "$z")
			ep=$(peer_ep "$tr" "nngthr$z")
			: > "$WORK/nngthr.out"
			srv nngthr "$PEER/nng_bench" thr-server "$ep" "$tr" "$z" "$c" "$PROC_LIMIT"
			cli nngthrc "$PEER/nng_bench" thr-client "$ep" "$z" "$c" "$PROC_LIMIT"
			stop_srv
			cat "$WORK/nngthr.out"
		done
	done
	rm -f "$WORK"/*.ipc
}

step_ucx() {
	local tls
	command -v ucx_perftest > /dev/null || { log "ucx_perftest not installed (ucx-utils): skipped"; return 0; }
	for tls in sm tcp; do
		"$PEER_SRC/ucx_bench.sh" -x "$tls" -L "$(csv $LAT_SIZES)" -B "$(csv $BW_SIZES)" \
			-n "$LAT_ITERS" -M "$PEER_BW_BYTES" -P "$(free_port)" -s "$SRV_CPU" \
			-c "$CLI_CPU" -T "$PROC_LIMIT" -k "$WORK/pids" 2>> "$WORK/stderr"
	done
	clean_shm
}

# run_step ROUND NAME CMD...: one step, its lines into the results file,
# its duration and the foreign load it ran under into the log.
run_step() {
	local round=$1 name=$2 t0 T0 B0 O0 T1 B1 O1 f
	shift 2
	if [ "$(elapsed)" -ge "$TOTAL_LIMIT" ]; then
		log "round $round: $name skipped (past TOTAL_LIMIT=$TOTAL_LIMIT s)"
		return
	fi
	wait_quiet
	t0=$(date +%s)
	read -r T0 B0 O0 <<< "$(ticks)"
	"$@" > "$WORK/step.out"
	read -r T1 B1 O1 <<< "$(ticks)"
	grep -E '^[A-Za-z0-9_]+ [A-Za-z0-9_-]+ [0-9]+ [A-Za-z0-9_]+ [0-9.]+ [A-Za-z_/]+$' \
		"$WORK/step.out" | tee -a "$RESULTS" >&2
	f=$((100 * ((B1 - B0) - (O1 - O0)) / (T1 - T0 > 0 ? T1 - T0 : 1)))
	[ "$f" -lt 0 ] && f=0
	echo "# load $round $name $(($(date +%s) - t0)) $f" >> "$RESULTS"
	log "round $round: $name done in $(($(date +%s) - t0)) s, foreign load $f%"
}

# ---- build ----------------------------------------------------------------

mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
[ -n "$RESULTS_FROM" ] || : > "$LOG"
[ -n "$RESULTS_FROM" ] && BUILD=0
if [ "$BUILD" = 1 ]; then
	[ -x "$SRC/configure" ] || die "no configure script: run ./autogen.sh in $SRC first"
	mkdir -p "$BUILD_DIR"
	if [ ! -f "$BUILD_DIR/Makefile" ]; then
		log "configuring $BUILD_DIR"
		(cd "$BUILD_DIR" && "$SRC/configure" -q) >> "$LOG" 2>&1 || die "configure failed (see $LOG)"
	fi
	log "building in $BUILD_DIR"
	make -C "$BUILD_DIR" -j2 test/benchmarks/ripc_pingpong test/benchmarks/ripc_long_bw \
		test/benchmarks/raw/fi_rma_bench test/benchmarks/raw/tcp_bench \
		test/benchmarks/ripc_reqrep test/benchmarks/ripc_msgrate \
		test/benchmarks/ripc_filefetch test/benchmarks/raw/fi_msgrate \
		test/benchmarks/raw/tcp_filefetch test/benchmarks/ripc_sparse \
		test/benchmarks/ripc_firstcontact test/benchmarks/ripc_idle >> "$LOG" 2>&1 ||
		die "build failed (see $LOG)"
	# The peers are built when configure found their libraries.
	for t in zmq_bench:ZMQ nng_bench:NNG; do
		c=${t#*:}
		t=${t%:*}
		# Automake's HAVE_X_TRUE is empty when configure found X.
		if grep -q "^S\[\"HAVE_${c}_TRUE\"\]=\"\"" "$BUILD_DIR/config.status" 2> /dev/null; then
			make -C "$BUILD_DIR" "test/benchmarks/peers/$t" >> "$LOG" 2>&1 ||
				log "building peers/$t failed (see $LOG)"
		else
			log "peers/$t: library not found by configure (re-run configure after installing it)"
		fi
	done
fi
BIN=$BUILD_DIR/test/benchmarks
RAW=$BIN/raw
PEER=$BIN/peers
PEER_SRC=$HERE/peers
for b in "$BIN/ripc_pingpong" "$BIN/ripc_long_bw" "$RAW/fi_rma_bench" "$RAW/tcp_bench" \
	"$BIN/ripc_reqrep" "$BIN/ripc_msgrate" "$BIN/ripc_filefetch" "$RAW/fi_msgrate" \
	"$RAW/tcp_filefetch" "$BIN/ripc_sparse" "$BIN/ripc_firstcontact" "$BIN/ripc_idle"; do
	[ -x "$b" ] || [ -n "$RESULTS_FROM" ] || die "missing $b (BUILD=1 builds it)"
done
command -v fi_pingpong > /dev/null || { log "fi_pingpong not installed: skipped"; PEERS=${PEERS/fi_pingpong/}; }
[ "$(nproc)" -ge 2 ] || log "only $(nproc) CPU: server and client share it"

LIBFABRIC_VERSION=$(fi_info --version 2>/dev/null | awk '/^libfabric:/ { print $2 }')
CPU_MODEL=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
GIT_REV=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
GIT_DIRTY=$(git -C "$SRC" status --porcelain -- ripc prov include 2>/dev/null | wc -l)
[ -n "$RESULTS_FROM" ] || {
	echo "# libripc benchmarks, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "# host: $(uname -r), $(nproc) CPUs, $CPU_MODEL; libfabric $LIBFABRIC_VERSION"
	echo "# source: git $GIT_REV ($GIT_DIRTY uncommitted files in ripc/ prov/ include/)"
	echo "# settings: REPS=$REPS PROVIDERS=\"$PROVIDERS\" PEERS=\"$PEERS\"" \
		"LAT_SIZES=\"$LAT_SIZES\" LAT_ITERS=$LAT_ITERS LAT_WARMUP=$LAT_WARMUP LAT_SEC=$LAT_SEC" \
		"BW_SIZES=\"$BW_SIZES\" BW_ITERS=$BW_ITERS BW_SEC=$BW_SEC BW_WINDOW=$BW_WINDOW" \
		"READ_WINDOW=$READ_WINDOW SRV_CPU=$SRV_CPU CLI_CPU=$CLI_CPU" \
		"REQ_SIZES=\"$REQ_SIZES\" REQ_SEC=$REQ_SEC REQ_ITERS=$REQ_ITERS" \
		"RATE_SENDERS=\"$RATE_SENDERS\" RATE_SEC=$RATE_SEC RATE_WIRE=$RATE_WIRE" \
		"FETCH_SIZES=\"$FETCH_SIZES\" FETCH_SEC=$FETCH_SEC FETCH_ITERS=$FETCH_ITERS" \
		"SPARSE_THINK=\"$SPARSE_THINK\" SPARSE_SIZE=$SPARSE_SIZE SPARSE_ITERS=$SPARSE_ITERS" \
		"SPARSE_SEC=$SPARSE_SEC FIRST_PROCS=$FIRST_PROCS IDLE_SEC=$IDLE_SEC LIFE_ROUNDS=$LIFE_ROUNDS" \
		"PEER_BW_BYTES=$PEER_BW_BYTES STEPS=\"$STEPS\""
	echo "# format: system transport size_bytes metric value unit"
} > "$RESULTS"

# ---- rounds, interleaved ------------------------------------------------

want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

core_bw() { # ROUND PROV: libripc's long-send bandwidth steps
	run_step "$1" "libripc-bw-$2" step_ripc_bw "$2" libripc 1 window
	run_step "$1" "libripc-bw-rel-$2" step_ripc_bw "$2" libripc_rel 1 release
	run_step "$1" "libripc-bw-w$BW_WINDOW-$2" step_ripc_bw "$2" "libripc_w$BW_WINDOW" "$BW_WINDOW" window
	run_step "$1" "libripc-bw-libbuf-$2" step_ripc_bw "$2" libripc_libbuf 1 lib
	run_step "$1" "libripc-bw-spin-$2" step_ripc_bw "$2" libripc_spin 1 window RIPC_SPIN_US=1000000
}

for ((r = 1; r <= REPS; r++)); do
	[ -n "$RESULTS_FROM" ] && break
	echo "# round $r" >> "$RESULTS"
	for p in $PROVIDERS; do
		# Odd rounds run libripc's latency before the raw step and its
		# bandwidth after it, even rounds the other way round: an A/B
		# of tcp long sends (perf_notes.md, 11-27) found whichever ran
		# first in a round faster, which a fixed order turns into a
		# bias of every ratio.
		if want core; then
			[ $((r % 2)) = 1 ] &&
				run_step "$r" "libripc-lat-$p" step_ripc_lat "$p"
			[ $((r % 2)) = 0 ] && core_bw "$r" "$p"
			run_step "$r" "raw-$p" step_raw "$p"
			[ $((r % 2)) = 1 ] && core_bw "$r" "$p"
			[ $((r % 2)) = 0 ] &&
				run_step "$r" "libripc-lat-$p" step_ripc_lat "$p"
		fi
		if want reqrep; then
			run_step "$r" "libripc-reqrep-retbuf-$p" step_ripc_reqrep "$p" retbuf
			run_step "$r" "libripc-reqrep-pull-$p" step_ripc_reqrep "$p" pull
		fi
		if want msgrate; then
			[ $((r % 2)) = 1 ] &&
				run_step "$r" "raw-msgrate-$p" step_raw_msgrate "$p"
			run_step "$r" "libripc-msgrate-$p" step_ripc_msgrate "$p"
			[ $((r % 2)) = 0 ] &&
				run_step "$r" "raw-msgrate-$p" step_raw_msgrate "$p"
		fi
		if want fetch; then
			run_step "$r" "libripc-fetch-long-$p" step_ripc_fetch "$p" long
			run_step "$r" "libripc-fetch-retbuf-$p" step_ripc_fetch "$p" retbuf
		fi
		if want life; then
			run_step "$r" "libripc-sparse-$p" step_ripc_sparse "$p"
			run_step "$r" "libripc-sparse-unpinned-$p" step_ripc_sparse "$p" unpinned
			[ "$p" = tcp ] && run_step "$r" raw-sparse-tcp step_raw_sparse
			if [ "$r" -le "$LIFE_ROUNDS" ]; then
				run_step "$r" "libripc-first-$p" step_ripc_first "$p" 1
				run_step "$r" "libripc-first-noresolver-$p" step_ripc_first "$p" 0
			fi
		fi
	done
	if want life; then
		run_step "$r" tcp-sparse step_tcp_sparse
		run_step "$r" tcp-sparse-unpinned step_tcp_sparse unpinned
		if [ "$r" -le "$LIFE_ROUNDS" ]; then
			run_step "$r" tcp-first step_tcp_first
			run_step "$r" idle step_idle
		fi
	fi
	if want peers; then
		for peer in $PEERS; do
			run_step "$r" "$peer" "step_$peer"
		done
	fi
	# The file-fetch baseline runs with the fetch steps of its round.
	if want fetch; then
		run_step "$r" tcp_fetch step_tcp_fetch
	fi
done
if [ -z "$RESULTS_FROM" ]; then
	log "measurements done in $(elapsed) s"
	echo "# duration $(elapsed) s" >> "$RESULTS"
else
	GIT_REV=$(sed -n 's/^# source: git \([^ ]*\) .*/\1/p' "$RESULTS")
	GIT_DIRTY=$(sed -n 's/^# source: git [^ ]* (\([0-9]*\) .*/\1/p' "$RESULTS")
fi
DURATION=$(sed -n 's/^# duration \([0-9]*\) s/\1/p' "$RESULTS" | tail -1)
RUN_DATE=$(sed -n 's/^# libripc benchmarks, //p' "$RESULTS")
# The kernel the run had (a document regenerated later names it, not ours).
RUN_KERNEL=$(sed -n 's/^# host: \([^,]*\),.*/\1/p' "$RESULTS" | head -1)
# And its CPUs, as the run saw them (a regeneration may be on another
# machine: RESULTS_FROM).
RUN_CPUS=$(sed -n 's/^# host: [^,]*, \([0-9]*\) CPUs, \([^;]*\);.*/\1 (\2)/p' "$RESULTS" | head -1)
grep '^# load ' "$RESULTS" | cut -d' ' -f3- > "$WORK/load"

# ---- summary: median (min, max) across rounds ----------------------------
#
# Each step's lines are followed by "# load ROUND STEP SECONDS PCT" in the
# results file.  A sample whose step ran while other processes took more
# than QUIET_MAX % of the machine is noise: it is left out whenever the
# same measurement has at least one quieter sample; if it has none, all
# samples are used and the summary line is flagged (last field 1).
# Summary fields: system transport size metric median unit min max
# n_used n_all noisy.

awk -v qmax="$QUIET_MAX" '
function flush(load,   j) {
	for (j = 1; j <= nb; j++) {
		k = bk[j]
		v[k, ++n[k]] = bv[j]
		ld[k, n[k]] = load
	}
	nb = 0
}
/^# load / { flush($6 + 0); next }
/^#/ { next }
NF == 6 {
	k = $1 " " $2 " " $3 " " $4
	if (!(k in n)) { order[++nk] = k; unit[k] = $6; n[k] = 0 }
	bk[++nb] = k; bv[nb] = $5 + 0
}
END {
	flush(0)        # lines without a load record (an interrupted run)
	for (i = 1; i <= nk; i++) {
		k = order[i]; m = 0
		for (a = 1; a <= n[k]; a++)
			if (ld[k, a] <= qmax) w[++m] = v[k, a]
		noisy = m == 0
		if (noisy)
			for (a = 1; a <= n[k]; a++) w[++m] = v[k, a]
		for (a = 2; a <= m; a++) {          # insertion sort (mawk)
			x = w[a]
			for (b = a - 1; b >= 1 && w[b] > x; b--) w[b + 1] = w[b]
			w[b + 1] = x
		}
		med = m % 2 ? w[(m + 1) / 2] : (w[m / 2] + w[m / 2 + 1]) / 2
		printf "%s %.2f %s %.2f %.2f %d %d %d\n", k, med, unit[k], w[1], w[m], m, n[k], noisy
	}
}' "$RESULTS" | sort -k1,1 -k2,2 -k4,4 -k3,3n > "$SUMMARY"

declare -A MED LO HI NUSED NALL NOISY
while read -r s t z m med u lo hi n nall noisy; do
	MED["$s $t $z $m"]=$med
	LO["$s $t $z $m"]=$lo
	HI["$s $t $z $m"]=$hi
	NUSED["$s $t $z $m"]=$n
	NALL["$s $t $z $m"]=$nall
	NOISY["$s $t $z $m"]=$noisy
done < "$SUMMARY"

# fmt VALUE: three significant digits or so
fmt() {
	awk -v x="$1" 'BEGIN {
		if (x == "") { print "-"; exit }
		if (x >= 100) printf "%.0f\n", x
		else if (x >= 10) printf "%.1f\n", x
		else printf "%.2f\n", x }'
}
cell() { # KEY: "median" or "-"; "*" = no sample was taken on a quiet machine
	local k="$1"
	[ -n "${MED[$k]:-}" ] || { echo "-"; return; }
	echo "$(fmt "${MED[$k]}")$([ "${NOISY[$k]}" = 1 ] && echo '*')"
}
spread() { # KEY: "median (min-max)"
	local k="$1"
	[ -n "${MED[$k]:-}" ] || { echo ""; return; }
	echo "$(fmt "${MED[$k]}") ($(fmt "${LO[$k]}")-$(fmt "${HI[$k]}"))"
}
ratio() { # A B: A / B with two decimals, "x" suffix
	local a=${MED[$1]:-} b=${MED[$2]:-}
	[ -n "$a" ] && [ -n "$b" ] || { echo "-"; return; }
	awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2fx\n", a / b; else print "-" }'
}
paired() { # A B: A / B in each round that measured both: "median (min-max) over N rounds"
	awk -v a="$1" -v b="$2" '
		/^# round / { r = $3; next }
		/^#/ || NF < 6 { next }
		{ k = $1 " " $2 " " $3 " " $4
		  if (k == a) va[r] = $5; else if (k == b) vb[r] = $5 }
		END {
			n = 0
			for (r in va) if ((r in vb) && vb[r] > 0) x[++n] = va[r] / vb[r]
			if (n == 0) { print "-"; exit }
			for (i = 2; i <= n; i++)  # insertion sort: a handful of rounds
				for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
			m = (n % 2) ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
			printf "%.2fx (%.2f-%.2f) over %d rounds\n", m, x[1], x[n], n
		}' "$RESULTS"
}
best_ratio() { # A B hi MIN | A B lo MAX: best round of A / best round of B
	# (highest bandwidth, lowest latency), "meets" when >= MIN or <= MAX;
	# the figure is cut towards "misses" (0.899 is 0.89x, 1.101 is 1.11x)
	local a b
	if [ "$3" = hi ]; then a=${HI[$1]:-} b=${HI[$2]:-}; else a=${LO[$1]:-} b=${LO[$2]:-}; fi
	[ -n "$a" ] && [ -n "$b" ] || { echo "-"; return; }
	awk -v a="$a" -v b="$b" -v d="$3" -v m="$4" 'BEGIN {
		if (d == "hi") { r = int(a / b * 100) / 100; ok = r >= m }
		else { r = int(a / b * 100 + 0.999) / 100; ok = r <= m }
		printf "%.2fx (%s)\n", r, ok ? "meets" : "misses" }'
}
verdict() { # A B MIN: "meets" when A / B >= MIN, else "misses"
	awk -v a="${MED[$1]}" -v b="${MED[$2]}" -v m="$3" \
		'BEGIN { print (b > 0 && a / b >= m) ? "meets" : "misses" }'
}
delta() { # A B: A - B in us
	local a=${MED[$1]:-} b=${MED[$2]:-}
	[ -n "$a" ] && [ -n "$b" ] || { echo "-"; return; }
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.2f\n", a - b }'
}
# Issues 12 and 14: each target against this run's medians, "meets" or
# "misses" (goals for the benchmark, never assertions in the test command).
le() { # A B MAX: "meets" when A / B <= MAX
	awk -v a="${MED[$1]}" -v b="${MED[$2]}" -v m="$3" \
		'BEGIN { print (b > 0 && a / b <= m) ? "meets" : "misses" }'
}
# sparse_rows PROV LIBRIPC_NAME TCP_NAME: one table row per think time
# (median and p99 of both, their ratios), z = the sparse message size
sparse_rows() {
	local p=$1 t a b
	for t in $SPARSE_THINK; do
		a="$2_think${t}ms $p $z"
		b="$3_think${t}ms tcp $z"
		echo "| $p | $t ms | $(cell "$a lat_us") | $(cell "$a lat_p99_us") | $(cell "$b lat_us") | $(cell "$b lat_p99_us") | $(ratio "$a lat_us" "$b lat_us") | $(ratio "$a lat_p99_us" "$b lat_p99_us") |"
	done
}
targets_12_14() {
	local p t z a b lines=() pi
	z=$SPARSE_SIZE
	for p in $PROVIDERS; do
		for t in $SPARSE_THINK; do
			[ "$t" -le 10 ] || continue
			a="libripc_think${t}ms $p $z" b="tcp_socket_think${t}ms tcp $z"
			[ -n "${MED[$a lat_us]:-}" ] && [ -n "${MED[$b lat_us]:-}" ] || continue
			if [ "$p" = tcp ]; then
				local rw="fi_rdm_think${t}ms tcp $z"
				lines+=("* sparse $t ms, tcp: median $(ratio "$a lat_us" "$b lat_us") of kernel TCP ($(le "$a lat_us" "$b lat_us" 1.2) the 1.2x target)$([ -n "${MED[$rw lat_us]:-}" ] && echo "; $(ratio "$a lat_us" "$rw lat_us") of raw libfabric asleep on its CQ's wait fd (fi_rdm_think), which is itself $(ratio "$rw lat_us" "$b lat_us") of kernel TCP")")
			else
				lines+=("* sparse $t ms, $p: median $(ratio "$a lat_us" "$b lat_us") of kernel TCP ($(le "$a lat_us" "$b lat_us" 1.0) the 1.0x target), p99 $(ratio "$a lat_p99_us" "$b lat_p99_us") ($(le "$a lat_p99_us" "$b lat_p99_us" 2.0) the 2x target)")
			fi
		done
	done
	a="libripc_first_noresolver shm $z first_send_us"
	[ -n "${MED[$a]:-}" ] && lines+=("* first contact, shm, no resolver, from the first send: median $(fmt "${MED[$a]}") us, p99 $(fmt "${MED[libripc_first_noresolver shm $z first_send_p99_us]:-0}") us ($(awk -v a="${MED[$a]}" 'BEGIN { print (a <= 300) ? "meets" : "misses" }') the 300 us target)")
	for t in all shm tcp; do
		a="libripc_sleep $t 0 idle_cpu_pct"
		[ -n "${MED[$a]:-}" ] && lines+=("* idle after ripc_init, transports $t, one service registered: $(fmt "${MED[$a]}") % CPU ($(awk -v a="${MED[$a]}" 'BEGIN { print (a <= 0.2) ? "meets" : "misses" }') the 0.2 % target)")
	done
	for p in $PROVIDERS; do
		a="libripc $p 8 lat_us" b="fi_rdm_msg $p 8 lat_us"
		[ -n "${MED[$a]:-}" ] && [ -n "${MED[$b]:-}" ] &&
			lines+=("* $p 8 B latency: $(ratio "$a" "$b") of raw fi_rdm_msg ($(le "$a" "$b" 1.10) the 1.10x target)$([ -n "${MED[fi_rdm_waitfd_msg $p 8 lat_us]:-}" ] && echo "; $(ratio "$a" "fi_rdm_waitfd_msg $p 8 lat_us") of raw with its CQ opened with a wait fd, as libripc's must be to sleep"); best round against best round (the raw program has a slow mode on this VM): $(best_ratio "$a" "$b" lo 1.10); round by round: $(paired "$a" "$b")")
		for z in 65536 1048576 4194304 16777216; do
			a="libripc $p $z bw_MBps" b="fi_rdm_pull $p $z bw_MBps"
			[ -n "${MED[$a]:-}" ] && [ -n "${MED[$b]:-}" ] &&
				lines+=("* $p long send $(hsize "$z"): $(ratio "$a" "$b") of raw fi_rdm_pull ($(verdict "$a" "$b" 0.90) the 0.90x target)$([ -n "${MED[fi_rdm_pullhuge $p $z bw_MBps]:-}" ] && echo "; $(ratio "$a" "fi_rdm_pullhuge $p $z bw_MBps") of the raw pull from huge pages")$([ -n "${MED[libripc_rel $p $z bw_MBps]:-}" ] && echo "; waiting for the release (libripc_rel, the raw pull's protocol): $(ratio "libripc_rel $p $z bw_MBps" "$b") ($(verdict "libripc_rel $p $z bw_MBps" "$b" 0.90))"); best round against best round: $(best_ratio "$a" "$b" hi 0.90); round by round: $(paired "$a" "$b")")
		done
		pi=ipc
		tcpish "$p" && pi=tcp
		# Issue 14's goal: faster than ZeroMQ and NNG at every size.
		# Each line names the sizes where libripc is not, with the
		# ratio, so that no summary can say "every size" when it is not.
		for b in zmq_reqrep nng_reqrep zmq_pushpull nng_pushpull; do
			local behind="" n=0 nb=0 m=lat_us what=latency sizes=$LAT_SIZES
			case $b in *_pushpull)
				m=bw_MBps what="bandwidth (libripc one long send in flight, the peer streaming)"
				sizes=$BW_SIZES ;;
			esac
			for z in $sizes; do
				a="libripc $p $z $m"
				[ -n "${MED[$a]:-}" ] && [ -n "${MED[$b $pi $z $m]:-}" ] || continue
				n=$((n + 1))
				if [ $m = lat_us ]; then
					[ "$(le "$a" "$b $pi $z $m" 1.0)" = meets ] && continue
				else
					[ "$(verdict "$a" "$b $pi $z $m" 1.0)" = meets ] && continue
				fi
				nb=$((nb + 1))
				behind+="${behind:+, }$(hsize "$z") $(ratio "$a" "$b $pi $z $m")"
			done
			# The streams keep many messages in flight: say also
			# where libripc with BW_WINDOW long sends in flight is
			# behind.
			local wl=""
			if [ $m = bw_MBps ]; then
				local wb="" wn=0 w
				for z in $sizes; do
					w="libripc_w$BW_WINDOW $p $z $m"
					[ -n "${MED[$w]:-}" ] && [ -n "${MED[$b $pi $z $m]:-}" ] || continue
					wn=$((wn + 1))
					[ "$(verdict "$w" "$b $pi $z $m" 1.0)" = meets ] && continue
					wb+="${wb:+, }$(hsize "$z") $(ratio "$w" "$b $pi $z $m")"
				done
				[ "$wn" -gt 0 ] && wl="; with $BW_WINDOW in flight (libripc_w$BW_WINDOW): $([ -n "$wb" ] && echo "behind at $wb" || echo "not behind at any of $wn sizes")"
			fi
			[ "$n" -gt 0 ] && lines+=("* $p $what against ${b%_*} $pi: libripc not behind at $((n - nb)) of $n sizes$([ -n "$behind" ] && echo "; behind at $behind")$wl")
		done
	done
	[ ${#lines[@]} -gt 0 ] || return 0
	echo "### Issue 12 and 14 targets in this run (goals, not assertions)"
	echo
	printf '%s\n' "${lines[@]}"
	echo
}
hsize() {
	local s=$1
	if [ "$s" -ge 1048576 ] && [ $((s % 1048576)) -eq 0 ]; then echo "$((s / 1048576)) MiB"
	elif [ "$s" -ge 1024 ] && [ $((s % 1024)) -eq 0 ]; then echo "$((s / 1024)) KiB"
	else echo "$s B"; fi
}

# ---- plots ----------------------------------------------------------------

if [ "$PLOTS" = 1 ] && command -v gnuplot > /dev/null; then
	mkdir -p "$WORK/plot"
	# series SYSTEM TRANSPORT METRIC STYLE: a plot clause for one line of
	# the summary ("size median min max" data file), nothing if empty.
	series() {
		local f="$WORK/plot/$1.$2.$3.dat"
		awk -v s="$1" -v t="$2" -v m="$3" '$1 == s && $2 == t && $4 == m { print $3, $5, $7, $8 }' \
			"$SUMMARY" > "$f"
		[ -s "$f" ] || return 0
		if [ "$4" = err ]; then
			printf "'%s' using 1:2:3:4 with yerrorlines title '%s %s', " "$f" "$1" "$2"
		else
			printf "'%s' using 1:2 with linespoints dt 2 title '%s %s', " "$f" "$1" "$2"
		fi
	}
	lat_plot() { # PROV: the plot clauses of one panel
		local p=$1 cmd
		cmd=$(series libripc "$p" lat_us err; series fi_rdm_msg "$p" lat_us err
			series fi_rdm_gather_msg "$p" lat_us err)
		if tcpish "$p"; then
			cmd+=$(series fi_rdm_waitfd_msg "$p" lat_us err
				series fi_pingpong tcp-msg lat_us line
				series tcp_socket tcp lat_us line
				series tcp_socket tcp_busypoll lat_us line)
		fi
		echo "${cmd%, }"
	}
	bw_plot() {
		local p=$1 cmd="" s
		for s in libripc libripc_rel libripc_spin "libripc_w$BW_WINDOW" libripc_libbuf fi_rdm_pull fi_rdm_pullreg fi_rdm_pullhuge fi_rdm_read; do
			cmd+=$(series "$s" "$p" bw_MBps err)
		done
		tcpish "$p" && cmd+=$(series tcp_socket tcp bw_MBps line)
		echo "${cmd%, }"
	}
	np=$(echo $PROVIDERS | wc -w)
	xtics() { # SIZES: explicit tick labels, and an x range around them
		local z t="" lo hi
		for z in "$@"; do t+="\"$(hsize "$z" | tr -d ' ')\" $z, "; done
		lo=$(echo "$@" | tr ' ' '\n' | sort -n | head -1)
		hi=$(echo "$@" | tr ' ' '\n' | sort -n | tail -1)
		echo "set xtics (${t%, }); set xrange [$lo / 1.4 : $hi * 1.4]"
	}
	{
		echo "set terminal pngcairo size $((620 * np)),480 font ',10' noenhanced"
		echo "set output '$OUT_DIR/latency.png'"
		echo "set multiplot layout 1,$np title 'One-way latency, median of $REPS rounds (bars: min-max), $STAMP'"
		echo "set logscale xy; set grid; set key top left"
		echo "set xlabel 'message size, bytes'; set ylabel 'us'"
		xtics $LAT_SIZES
		for p in $PROVIDERS; do
			c=$(lat_plot "$p")
			[ -n "$c" ] && echo "set title '$p'" && echo "plot $c"
		done
		echo "unset multiplot"
		echo "set output '$OUT_DIR/bandwidth.png'"
		echo "set multiplot layout 1,$np title 'Bandwidth (MB/s = 10^6 B/s), median of $REPS rounds (bars: min-max), $STAMP'"
		echo "set ylabel 'MB/s'; set key bottom right"
		xtics $BW_SIZES
		for p in $PROVIDERS; do
			c=$(bw_plot "$p")
			[ -n "$c" ] && echo "set title '$p'" && echo "plot $c"
		done
		echo "unset multiplot"
	} > "$WORK/plot.gp"
	gnuplot "$WORK/plot.gp" >> "$LOG" 2>&1 || log "gnuplot failed (see $LOG)"

	# Issues 3 and 6: request/reply and file fetch (latency above,
	# bandwidth below, one column per provider), message rate.
	rm -f "$OUT_DIR/reqrep.png" "$OUT_DIR/filefetch.png" "$OUT_DIR/msgrate.png"
	pair_plot() { # FILE TITLE SIZES SERIES_FN: 2 x np panels
		local f=$1 title=$2 sizes=$3 fn=$4 p m c
		echo "set output '$f'"
		echo "set multiplot layout 2,$np title '$title, median of $REPS rounds (bars: min-max), $STAMP'"
		echo "set logscale xy; set grid; set key top left"
		xtics $sizes
		for m in lat_us bw_MBps; do
			if [ $m = lat_us ]; then
				echo "set ylabel 'us per request'; set key top left"
			else
				echo "set ylabel 'MB/s'; set key bottom right"
			fi
			for p in $PROVIDERS; do
				c=$($fn "$p" "$m")
				c=${c%, }
				[ -n "$c" ] && echo "set title '$p'" && echo "plot $c"
			done
		done
		echo "unset multiplot"
	}
	reqrep_series() { series libripc_reqrep_retbuf "$1" "$2" err; series libripc_reqrep_pull "$1" "$2" err; }
	fetch_series() {
		series libripc_fetch_long "$1" "$2" err; series libripc_fetch_retbuf "$1" "$2" err
		series tcp_fetch tcp "$2" err
	}
	{
		echo "set terminal pngcairo size $((620 * np)),860 font ',10' noenhanced"
		if grep -q '^libripc_reqrep_' "$SUMMARY"; then
			echo "set xlabel 'reply size, bytes'"
			pair_plot "$OUT_DIR/reqrep.png" 'Request/reply: return buffer vs pull' \
				"$REQ_SIZES" reqrep_series
		fi
		if grep -q '^libripc_fetch_' "$SUMMARY"; then
			echo "set xlabel 'file size, bytes'"
			pair_plot "$OUT_DIR/filefetch.png" 'File fetch: libripc vs kernel TCP sockets' \
				"$FETCH_SIZES" fetch_series
		fi
	} > "$WORK/plot2.gp"
	gnuplot "$WORK/plot2.gp" >> "$LOG" 2>&1 || log "gnuplot failed (see $LOG)"

	# Message rate against the number of senders: "<family>_<N>senders"
	# is N senders, the family's own name one.
	if grep -q ' msg_rate ' "$SUMMARY"; then
		awk -v d="$WORK/plot" '$4 == "msg_rate" && $1 !~ /_wire_/ {
			n = 1; fam = $1
			if (match($1, /_[0-9]+senders$/)) {
				n = substr($1, RSTART + 1, RLENGTH - 8) + 0
				fam = substr($1, 1, RSTART - 1)
			}
			f = d "/rate." fam "." $2 ".dat"
			print n, $5, $7, $8 > f
			files[f] = fam " " $2
		}
		END { for (f in files) print f, files[f] > (d "/rate.list") }' "$SUMMARY"
		{
			echo "set terminal pngcairo size 860,480 font ',10' noenhanced"
			echo "set output '$OUT_DIR/msgrate.png'"
			echo "set title '64-byte messages/s, median of $REPS rounds (bars: min-max), $STAMP'"
			echo "set grid; set key outside right; set logscale y"
			echo "set xlabel 'sender processes'; set ylabel 'thousand messages/s'"
			echo "set xtics ($(echo $RATE_SENDERS | sed 's/ /, /g')); set xrange [0.5:$(echo $RATE_SENDERS | tr ' ' '\n' | sort -n | tail -1).5]"
			c=""
			while read -r f fam tr; do
				sort -n "$f" -o "$f"
				c+="'$f' using 1:2:3:4 with yerrorlines title '$fam $tr', "
			done < <(sort -k2 "$WORK/plot/rate.list")
			echo "plot ${c%, }"
		} > "$WORK/plot3.gp"
		gnuplot "$WORK/plot3.gp" >> "$LOG" 2>&1 || log "gnuplot failed (see $LOG)"
	fi

	# Issue 14: libripc, raw and the peers; latency above, bandwidth
	# below, one column per provider (peers on the paired transport).
	rm -f "$OUT_DIR/peers.png" "$OUT_DIR/sparse.png"
	if grep -q -e '^zmq_' -e '^nng_' -e '^ucx_' "$SUMMARY"; then
		{
			echo "set terminal pngcairo size $((620 * np)),860 font ',10' noenhanced"
			echo "set output '$OUT_DIR/peers.png'"
			echo "set multiplot layout 2,$np title 'libripc, raw libfabric and the peers, median of $REPS rounds (bars: min-max), $STAMP'"
			echo "set logscale xy; set grid; set xlabel 'message size, bytes'"
			xtics $LAT_SIZES
			echo "set ylabel 'us, one-way'; set key top left"
			for p in $PROVIDERS; do
				pi=ipc ps=sm
				tcpish "$p" && pi=tcp ps=tcp
				c=$(series libripc "$p" lat_us err; series fi_rdm_msg "$p" lat_us err
					series zmq_reqrep "$pi" lat_us err; series nng_reqrep "$pi" lat_us err
					series ucx_tag "$ps" lat_us err)
				[ -n "$c" ] && echo "set title '$p (peers: $pi, UCX $ps)'" && echo "plot ${c%, }"
			done
			xtics $BW_SIZES
			echo "set ylabel 'MB/s'; set key bottom right"
			for p in $PROVIDERS; do
				pi=ipc ps=sm
				tcpish "$p" && pi=tcp ps=tcp
				c=$(series libripc "$p" bw_MBps err; series fi_rdm_pull "$p" bw_MBps err
					series zmq_pushpull "$pi" bw_MBps err; series nng_pushpull "$pi" bw_MBps err
					series ucx_tag "$ps" bw_MBps err; series ucx_get "$ps" bw_MBps err)
				[ -n "$c" ] && echo "set title '$p (peers: $pi, UCX $ps)'" && echo "plot ${c%, }"
			done
			echo "unset multiplot"
		} > "$WORK/plot4.gp"
		gnuplot "$WORK/plot4.gp" >> "$LOG" 2>&1 || log "gnuplot failed (see $LOG)"
	fi

	# Issue 12: sparse request/reply against the think time, median and
	# p99: "<system>_think<T>ms transport size metric ..." lines.
	if grep -q '_think[0-9]*ms ' "$SUMMARY"; then
		awk -v d="$WORK/plot" '$1 ~ /_think[0-9]+ms$/ && ($4 == "lat_us" || $4 == "lat_p99_us") {
			match($1, /_think[0-9]+ms$/)
			t = substr($1, RSTART + 6, RLENGTH - 8) + 0
			fam = substr($1, 1, RSTART - 1)
			f = d "/sparse." fam "." $2 "." $4 ".dat"
			print t, $5, $7, $8 > f
			files[f] = fam " " $2 " " ($4 == "lat_us" ? "median" : "p99")
		}
		END { for (f in files) print f, files[f] > (d "/sparse.list") }' "$SUMMARY"
		{
			echo "set terminal pngcairo size 860,480 font ',10' noenhanced"
			echo "set output '$OUT_DIR/sparse.png'"
			echo "set title 'Sparse request/reply, $(hsize "$SPARSE_SIZE"): one-way us, median of $REPS rounds (bars: min-max), $STAMP'"
			echo "set grid; set key outside right; set logscale xy"
			echo "set xlabel 'think time between requests, ms'; set ylabel 'us, one-way'"
			echo "set xtics ($(echo $SPARSE_THINK | sed 's/ /, /g'))"
			c=""
			while read -r f fam tr m; do
				sort -n "$f" -o "$f"
				dt=1
				[ "$m" = p99 ] && dt=2
				c+="'$f' using 1:2:3:4 with yerrorlines dt $dt title '$fam $tr $m', "
			done < <(sort -k2 "$WORK/plot/sparse.list")
			echo "plot ${c%, }"
		} > "$WORK/plot5.gp"
		gnuplot "$WORK/plot5.gp" >> "$LOG" 2>&1 || log "gnuplot failed (see $LOG)"
	fi
fi

# ---- the document -----------------------------------------------------------

WIRE_TEXT=""
[ -n "$RATE_WIRE" ] && WIRE_TEXT="  \`fi_rdm_wire_msgrate\`: raw with $RATE_WIRE-byte
  messages, the size of libripc's 64-byte message on the wire (48-byte
  header, item lengths, item), one sender."
LOAD_RANGE=$(awk '{ if (min == "" || $4 < min) min = $4; if ($4 > max) max = $4 } END { printf "%s-%s %%", min, max }' "$WORK/load" 2>/dev/null)
# The settings this run had that the defaults do not give.
RERUN_ENV=""
[ "$PROVIDERS" = "shm tcp" ] || RERUN_ENV="PROVIDERS=\"$PROVIDERS\" "
[ "$STEPS" = "core reqrep msgrate fetch life peers" ] || RERUN_ENV+="STEPS=\"$STEPS\" "
SRC_REL=${SUMMARY#$SRC/}
RES_REL=${RESULTS#$SRC/}
LOG_REL=${LOG#$SRC/}
{
	cat <<EOF
# libripc performance

Generated by \`test/benchmarks/run_bench.sh\` from the run of $RUN_DATE;
do not edit by hand, re-run:

    ${RERUN_ENV}test/benchmarks/run_bench.sh      # from the source tree; ~$(( (${DURATION:-0} + 59) / 60 )) min
    REPS=7 LAT_SEC=1 BW_SEC=1 ${RERUN_ENV}test/benchmarks/run_bench.sh   # longer, steadier

It builds the benchmarks in \`build-bench/\`, runs libripc, the raw libfabric
floor on the same provider and the kernel-TCP peers in the same run ($REPS
interleaved rounds), and writes \`$RES_REL\` (every measurement),
\`$SRC_REL\` (median, min, max across rounds), \`$LOG_REL\` and this
file.  Source: git $GIT_REV, $GIT_DIRTY uncommitted file(s) in ripc/ prov/ include/.

## Machine

| | |
|---|---|
| CPUs | ${RUN_CPUS:-$(nproc) ($CPU_MODEL)} |
| kernel | ${RUN_KERNEL:-$(uname -r)} |
| OS | $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}") |
| libfabric | $LIBFABRIC_VERSION (providers shm and tcp;ofi_rxm, the latter with rxm's passthrough: FI_OFI_RXM_ENABLE_PASSTHRU=$FI_OFI_RXM_ENABLE_PASSTHRU$(case " $PROVIDERS " in *" net "*) echo "; and net, libfabric 1.17's native RDM over TCP, under the transport name net: libripc's tcp transport with RIPC_TCP_NATIVE=1" ;; esac)) |
| peers | $(for k in libzmq5:ZeroMQ libnng1:NNG libucx0:UCX; do v=$(dpkg-query -W -f='${Version}' "${k%%:*}" 2>/dev/null); echo -n "${k#*:} ${v:-absent}, "; done | sed 's/, $//') (Debian packages) |
| compiler | $(cc --version 2>/dev/null | head -1), \`-g -O2\` |
| pinning | servers on CPU $SRV_CPU, clients on CPU $CLI_CPU (\`taskset\`, all threads) |
| foreign load | $LOAD_RANGE of both CPUs taken by other (not niced) processes and the hypervisor (steal) during the steps |

## What is measured

* **Latency** (\`lat_us\`): one-way = half a round trip of a ping-pong, the
  **median** over up to $LAT_ITERS individually timed round trips per size
  (at most $LAT_SEC s, after $LAT_WARMUP warm-up round trips for libripc, 10 %
  for the raw programs).  \`libripc\`: \`ripc_pingpong\`, one short-send item,
  echoed by the server from the library's receive buffer; the client's loop
  includes \`ripc_buf_free\` of the echo.  \`fi_rdm_msg\`: the same ping-pong
  with \`fi_inject\`/\`fi_send\` and \`fi_recv\` on an FI_EP_RDM endpoint of the
  same provider (\`raw/fi_rma_bench -M\`): the floor under libripc's short send.
  "raw, CQ with a wait fd" (tcp, \`fi_rdm_waitfd_msg\`): \`fi_rdm_msg\` with
  its CQ opened with \`FI_WAIT_FD\` (and still busy-polled), as libripc's
  tcp CQ is so that an idle process can sleep on it: what the wait object
  costs rxm/tcp per message.
  "raw + gather copy" (\`fi_rdm_gather_msg\`, \`-G\`): the same, but both sides
  copy the payload into their send buffer before each send, as libripc's
  short send gathers its items into a bounce buffer (and as any sender that
  writes fresh data has to pay for: without it the raw send buffer is never
  written and its cache lines stay clean in both cores' caches).
* **Bandwidth** (\`bw_MBps\`, MB = 10^6 B): message size x messages / time,
  at most $BW_SEC s per size.  \`libripc\`: \`ripc_long_bw\`; the client
  long-sends one item (from \`ripc_buf_alloc\` memory), the server's library
  pulls it with RDMA reads (of at most 512 KiB over tcp, 8 MiB over shm, in
  flight together: RIPC_READ_CHUNK unset) into a
  receive window registered in advance, the server answers a short "done";
  one message in flight.  \`libripc_rel\`: the same without the server's
  answer: the client waits with \`ripc_wait_released\` until the
  server's library has said DONE, which makes it the protocol of
  \`fi_rdm_pull\` below (\`libripc\` sends as many messages per transfer:
  the library's DONE rides in the application's answer, RIPC_DONE_DELAY_US;
  before that change, 11-26, it was one message more); the server still checks every item's ends
  and reports damaged ones at the end.  \`libripc_w$BW_WINDOW\`: $BW_WINDOW in flight.
  \`libripc_libbuf\`: no windows, the library allocates a buffer per message
  (libRIPC's default path) and the server frees it.  \`libripc_spin\`: as
  \`libripc\` with RIPC_SPIN_US=1000000 on both sides, so no receive ever
  sleeps: the difference to \`libripc\` is the cost of the library's
  sleep/wake-up path (progress thread) during a pull.  \`fi_rdm_pull\`: the same
  protocol on raw libfabric (descriptor message, \`fi_read\` in 8 MiB chunks,
  8-byte DONE; one in flight) — the floor of libripc's long send.
  \`fi_rdm_pullreg\`: that, plus registering the sender's buffer with a fresh
  key per message as libripc's security rule requires.
  \`fi_rdm_pullhuge\`: \`fi_rdm_pull\` from a sender's buffer on transparent
  huge pages (2 MiB-aligned, MADV_HUGEPAGE), which is what
  \`ripc_buf_alloc\` gives from 1 MiB (libripc's benchmark buffers come
  from it; from 2 MiB before git 64bbeb5); over shm the pull is a
  process_vm_readv of the sender's memory, faster from huge pages.  \`fi_rdm_read\`:
  $READ_WINDOW \`fi_read\`s in flight on one registered buffer — the provider's
  RDMA-read ceiling, not a protocol.
* Peers (tcp tables): \`fi_pingpong tcp-msg\` = libfabric's tool on a tcp
  FI_EP_MSG endpoint (its usec/xfer, a **mean**); \`tcp_socket\` = kernel TCP
  sockets, blocking or busy-polling (\`raw/tcp_bench -M\`, median), stream
  bandwidth for the bandwidth table.

* **Request/reply** (issue 3, \`ripc_reqrep\`): the client short-sends a
  24-byte request, the server answers with a long send of the requested
  size from one buffer of its own; one request outstanding.  \`lat_us\` here
  is the median **whole request-to-reply time** (not half of it), \`bw_MBps\`
  reply bytes per second; at most $REQ_SEC s or $REQ_ITERS requests per size.
  \`retbuf\`: each request offers one return buffer of exactly the reply size
  and the server's library RDMA-writes the reply into it.  \`pull\`: no
  return buffer; the client's library pulls the reply into a receive window
  the client registers again after every reply.  The client's buffer, in
  both modes, comes from \`ripc_buf_alloc\` (huge pages from 1 MiB), as
  ripc_send_short(3) advises for return buffers: over shm the server's
  write into plain pages took 2-2.5x as long from 1 MiB up (since git
  4f60743, 11-29 22:37; runs of earlier commits landed in plain pages).
* **Message rate** (issue 6, \`ripc_msgrate\`, \`msg_rate\` in thousands of
  messages per second): 64-byte short sends from 1 or N sender processes
  (each its own library instance and service, all on CPU $CLI_CPU) to one
  receiving service (CPU $SRV_CPU), $RATE_SEC s per count.  Credits: the
  senders together never have more than RIPC_QUEUE_MAX (1024) messages
  unacknowledged, so the receiver's queue cannot overflow; the receiver acks
  every (1024/N/4)-th message (256 with one sender).  The rate counts
  messages the receiver confirmed, from the first sender's start to the last
  sender's final confirmation.  \`fi_rdm_msgrate\`: the same messages and
  credits on raw FI_EP_RDM endpoints (\`raw/fi_msgrate\`: \`fi_inject\`,
  receives posted for the whole window, busy polling; a sender out of
  credits yields its CPU to the other senders).$WIRE_TEXT
* **File fetch** (issue 6, the libRIPC paper's web-server experiment,
  \`ripc_filefetch\`): the server holds one in-memory file per size; the
  client asks for one by name in a short message and gets it by long send
  (\`libripc_fetch_long\`: pulled into a receive window) or written into a
  return buffer offered with the request (\`libripc_fetch_retbuf\`); the
  client's window or return buffer is as large as the largest file, from
  \`ripc_buf_alloc\` (since git 4f60743, as for request/reply).
  \`tcp_fetch\`: the same over one kernel TCP connection (\`raw/tcp_filefetch\`:
  request line, 8-byte length and the file, blocking sockets, TCP_NODELAY).
  Up to $FETCH_ITERS fetches or $FETCH_SEC s per size; \`lat_us\` is the median
  time of one fetch, \`bw_MBps\` file bytes per second.
* **Peers** (issue 14, \`test/benchmarks/peers/\`): what a user would pick
  instead, in the same rounds, at the same sizes.  Transports are paired
  by what they cross: libripc **shm** against ZeroMQ and NNG over
  **ipc://** (a unix domain socket: same host, through the kernel) and UCX
  over **sm** (its shared-memory transports posix, sysv and cma, UCX's
  pick per operation); libripc **tcp** against all three over **tcp** on
  127.0.0.1.  Latency: \`zmq_reqrep\` (ZeroMQ REQ/REP) and \`nng_reqrep\`
  (NNG req0/rep0), one message echoed, the median of individually timed
  round trips halved, as ours ($LAT_ITERS at most, $LAT_SEC s per size, after
  $LAT_WARMUP warm-up round trips); \`ucx_tag\` = \`ucx_perftest -t tag_lat\`,
  its "typical" latency (50th percentile, already halved).  Bandwidth:
  \`zmq_pushpull\` and \`nng_pushpull\` stream $(hsize "$PEER_BW_BYTES") per size
  (8 messages at least) PUSH to PULL, timed at the receiver; \`ucx_tag\`
  bw = \`tag_bw\` (streaming tagged sends), \`ucx_get\` = \`ucp_get\` (the
  reader pulls, like libripc's long send, but with several gets in
  flight).  ZeroMQ and NNG copy each message and move it on an I/O thread
  of their own; UCX, like the raw programs, busy-polls; the streams keep
  many messages in flight while libripc's \`bw_MBps\` has one: the
  bandwidth ratios compare what a user gets, not equal protocols.  The
  peers' bandwidth tables also give libripc with $BW_WINDOW long sends in
  flight (\`libripc_w$BW_WINDOW\`), against ZeroMQ and NNG.
* **Service life** (issue 12).  *Sparse request/reply* (\`ripc_sparse\`): a
  $SPARSE_SIZE-byte request echoed by a server that blocks in \`ripc_receive\`;
  the client sleeps (nanosleep) $(echo $SPARSE_THINK | sed 's/ /, /g') ms between requests, so
  both ends are asleep when a request leaves; per think time up to
  $SPARSE_ITERS requests or $SPARSE_SEC s; one-way median (\`lat_us\`) and 99th
  percentile (\`lat_p99_us\`, nearest rank: with n requests the
  ceil(0.99 n)-th smallest).  With a think time of 50 ms and more each
  request measures the wake-up of a server that has been idle that long.
  \`tcp_socket_think<T>ms\`: the same on kernel TCP, blocking
  \`recv()\` on both ends (\`raw/tcp_bench -Z\`).  \`*_unpinned_think<T>ms\`:
  both of these again with server and client free to run on any CPU (every
  other step pins them to one CPU each), where a peer woken by a loopback
  send can be queued on the waker's CPU.  *First contact*
  (\`ripc_firstcontact\`): $FIRST_PROCS fresh processes, one after another
  (fork and exec of the binary itself), each initialises the library,
  registers a random service ID, sends one request and waits for the
  echo; \`first_us\` = from the driver's \`fork()\` (process start,
  dynamic loading included) to the reply, \`first_init_us\` = from just
  before \`ripc_init()\`, \`first_send_us\` = from just before the
  first \`ripc_send_short()\` (the first exchange itself: route look-up,
  connection set-up and the reply; issue 12's 300 us target); with the multicast resolver on (default) and
  off (\`RIPC_RESOLVER=0\`); \`tcp_socket_first\`: a fresh process that
  connects to a kernel TCP server (\`raw/tcp_bench -F\`; from just before
  \`socket()\`).  *Idle cost* (\`ripc_idle\`): a process with the library
  initialised and one service registered, idle for $IDLE_SEC s, blocked in
  \`ripc_receive\` (\`libripc_recv\`) or in \`sleep()\` (\`libripc_sleep\`), on
  shm, tcp or every transport (\`all\`); CPU time (utime + stime of all
  threads, from /proc) per wall time, and context switches of all
  threads per second; \`tcp_socket\`: a process blocked in \`recv()\` on a
  connected loopback socket.  First contact and idle run in the first
  $LIFE_ROUNDS round(s) only; sparse request/reply in every round.

Cells are the median across the rounds; ratios are libripc / raw of those
medians (latency: above 1 is slower; bandwidth: below 1 is slower).  A
round's sample is left out when other processes took more than $QUIET_MAX % of
the machine while its step ran (see the foreign load list at the end),
unless no sample of that measurement was quieter: such cells carry a \`*\`
and are noise, not data.  The spread (min-max across the rounds used) and
the number of rounds used are in the last section and in the plots.

EOF
	for p in $PROVIDERS; do
		echo "## $p: short-message latency, us (one-way, median)"
		echo
		if tcpish "$p"; then
			echo "| size | libripc | raw fi_rdm_msg | ratio | overhead us | raw + gather copy | raw, CQ with a wait fd | ratio | fi_pingpong tcp-msg (mean) | tcp_socket | tcp_socket busy-poll |"
			echo "|---|---|---|---|---|---|---|---|---|---|---|"
		else
			echo "| size | libripc | raw fi_rdm_msg | ratio | overhead us | raw + gather copy |"
			echo "|---|---|---|---|---|---|"
		fi
		for z in $LAT_SIZES; do
			a="libripc $p $z lat_us"
			b="fi_rdm_msg $p $z lat_us"
			row="| $(hsize "$z") | $(cell "$a") | $(cell "$b") | $(ratio "$a" "$b") | $(delta "$a" "$b") | $(cell "fi_rdm_gather_msg $p $z lat_us") |"
			if tcpish "$p"; then
				row+=" $(cell "fi_rdm_waitfd_msg $p $z lat_us") | $(ratio "$a" "fi_rdm_waitfd_msg $p $z lat_us") |"
				row+=" $(cell "fi_pingpong tcp-msg $z lat_us") | $(cell "tcp_socket tcp $z lat_us") | $(cell "tcp_socket tcp_busypoll $z lat_us") |"
			fi
			echo "$row"
		done
		echo
		echo "## $p: long-send bandwidth, MB/s"
		echo
		hdr="| size | libripc | raw fi_rdm_pull | ratio | libripc_rel | ratio | raw fi_rdm_pullreg | ratio | raw fi_rdm_pullhuge | ratio | libripc_spin | libripc_w$BW_WINDOW | libripc_libbuf | raw fi_rdm_read (W=$READ_WINDOW) |"
		sep="|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
		if tcpish "$p"; then
			hdr+=" tcp_socket stream |"
			sep+="---|"
		fi
		echo "$hdr"
		echo "$sep"
		for z in $BW_SIZES; do
			a="libripc $p $z bw_MBps"
			row="| $(hsize "$z") | $(cell "$a") | $(cell "fi_rdm_pull $p $z bw_MBps") | $(ratio "$a" "fi_rdm_pull $p $z bw_MBps")"
			row+=" | $(cell "libripc_rel $p $z bw_MBps") | $(ratio "libripc_rel $p $z bw_MBps" "fi_rdm_pull $p $z bw_MBps")"
			row+=" | $(cell "fi_rdm_pullreg $p $z bw_MBps") | $(ratio "$a" "fi_rdm_pullreg $p $z bw_MBps")"
			row+=" | $(cell "fi_rdm_pullhuge $p $z bw_MBps") | $(ratio "$a" "fi_rdm_pullhuge $p $z bw_MBps")"
			row+=" | $(cell "libripc_spin $p $z bw_MBps") | $(cell "libripc_w$BW_WINDOW $p $z bw_MBps") | $(cell "libripc_libbuf $p $z bw_MBps") | $(cell "fi_rdm_read $p $z bw_MBps") |"
			tcpish "$p" && row+=" $(cell "tcp_socket tcp $z bw_MBps") |"
			echo "$row"
		done
		echo
	done
	# ---- issues 3 and 6: only what this run measured ----
	if grep -q '^libripc_reqrep_' "$SUMMARY"; then
		for p in $PROVIDERS; do
			grep -q "^libripc_reqrep_[a-z]* $p " "$SUMMARY" || continue
			echo "## $p: request/reply with and without a return buffer"
			echo
			echo "Per request: request-to-reply time (us, median) and reply bandwidth (MB/s)."
			echo "Ratios retbuf / pull: latency below 1 and bandwidth above 1 mean the"
			echo "return buffer is faster."
			echo
			echo "| reply size | retbuf us | pull us | ratio | retbuf MB/s | pull MB/s | ratio |"
			echo "|---|---|---|---|---|---|---|"
			for z in $REQ_SIZES; do
				a="libripc_reqrep_retbuf $p $z"
				b="libripc_reqrep_pull $p $z"
				echo "| $(hsize "$z") | $(cell "$a lat_us") | $(cell "$b lat_us") | $(ratio "$a lat_us" "$b lat_us") | $(cell "$a bw_MBps") | $(cell "$b bw_MBps") | $(ratio "$a bw_MBps" "$b bw_MBps") |"
			done
			echo
		done
	fi
	if grep -q ' msg_rate ' "$SUMMARY"; then
		echo "## Message rate, 64-byte short messages (thousand messages/s)"
		echo
		echo "Ratio = libripc / raw libfabric on the same provider (issue 6's target:"
		echo "at least 0.90x).  Senders are processes on one CPU, the receiver on the other."
		echo
		echo "| transport | senders | libripc | raw fi_rdm_msgrate | ratio |$( [ -n "$RATE_WIRE" ] && echo " raw, $RATE_WIRE-byte messages | ratio |")"
		echo "|---|---|---|---|---|$( [ -n "$RATE_WIRE" ] && echo "---|---|")"
		for p in $PROVIDERS; do
			for n in $RATE_SENDERS; do
				if [ "$n" = 1 ]; then
					a="libripc $p 64 msg_rate"
					b="fi_rdm_msgrate $p 64 msg_rate"
				else
					a="libripc_${n}senders $p 64 msg_rate"
					b="fi_rdm_msgrate_${n}senders $p 64 msg_rate"
				fi
				row="| $p | $n | $(cell "$a") | $(cell "$b") | $(ratio "$a" "$b") |"
				if [ -n "$RATE_WIRE" ]; then
					w="fi_rdm_wire_msgrate $p $RATE_WIRE msg_rate"
					if [ "$n" = 1 ]; then
						row+=" $(cell "$w") | $(ratio "$a" "$w") |"
					else
						row+=" | |"
					fi
				fi
				echo "$row"
			done
		done
		echo
	fi
	if grep -q '^libripc_fetch_' "$SUMMARY"; then
		for p in $PROVIDERS; do
			grep -q "^libripc_fetch_[a-z]* $p " "$SUMMARY" || continue
			echo "## $p: file fetch against kernel TCP sockets"
			echo
			echo "Per fetch: time (us, median) and file bandwidth (MB/s).  \"x TCP\" = how many"
			echo "times faster than \`tcp_fetch\` (TCP time / libripc time; issue 6's target for"
			echo "shm: at least 1.5x from 1 MiB up)."
			echo
			echo "| file size | long us | retbuf us | tcp_fetch us | long x TCP | retbuf x TCP | long MB/s | retbuf MB/s | tcp_fetch MB/s |"
			echo "|---|---|---|---|---|---|---|---|---|"
			for z in $FETCH_SIZES; do
				a="libripc_fetch_long $p $z"
				b="libripc_fetch_retbuf $p $z"
				c="tcp_fetch tcp $z"
				echo "| $(hsize "$z") | $(cell "$a lat_us") | $(cell "$b lat_us") | $(cell "$c lat_us") | $(ratio "$c lat_us" "$a lat_us") | $(ratio "$c lat_us" "$b lat_us") | $(cell "$a bw_MBps") | $(cell "$b bw_MBps") | $(cell "$c bw_MBps") |"
			done
			echo
		done
	fi
	if grep -q -e ' msg_rate ' -e '^libripc_fetch_' "$SUMMARY"; then
		echo "## Issue 6 targets in this run (goals, not assertions)"
		echo
		for p in $PROVIDERS; do
			for n in $RATE_SENDERS; do
				a="libripc $p 64 msg_rate"
				b="fi_rdm_msgrate $p 64 msg_rate"
				if [ "$n" != 1 ]; then
					a="libripc_${n}senders $p 64 msg_rate"
					b="fi_rdm_msgrate_${n}senders $p 64 msg_rate"
				fi
				[ -n "${MED[$a]:-}" ] && [ -n "${MED[$b]:-}" ] || continue
				echo "* 64 B message rate, $p, $n sender$([ "$n" = 1 ] || echo s): libripc $(ratio "$a" "$b") of raw" \
					"($(verdict "$a" "$b" 0.90) the 0.90x target)"
			done
		done
		for z in $FETCH_SIZES; do
			[ "$z" -ge 1048576 ] || continue
			for m in long retbuf; do
				a="tcp_fetch tcp $z lat_us"
				b="libripc_fetch_$m shm $z lat_us"
				[ -n "${MED[$a]:-}" ] && [ -n "${MED[$b]:-}" ] || continue
				echo "* file fetch over shm, $(hsize "$z"), $m: TCP time / libripc time $(ratio "$a" "$b")" \
					"($(verdict "$a" "$b" 1.5) the 1.5x target)"
			done
		done
		echo
	fi
	# ---- issue 14: the peers, same run ----
	if grep -q -e '^zmq_' -e '^nng_' -e '^ucx_' "$SUMMARY"; then
		for p in $PROVIDERS; do
			pi=ipc ps=sm
			tcpish "$p" && pi=tcp ps=tcp
			echo "## $p: libripc against the peers, latency (us, one-way, median)"
			echo
			echo "Ratio = libripc / the other (above 1: libripc is slower).  Peers over"
			echo "\`$pi\` (ZeroMQ, NNG) and \`$ps\` (UCX): see \"What is measured\"."
			echo
			echo "| size | libripc | raw fi_rdm_msg | ratio | ZeroMQ $pi | ratio | NNG $pi | ratio | UCX $ps | ratio |"
			echo "|---|---|---|---|---|---|---|---|---|---|"
			for z in $LAT_SIZES; do
				a="libripc $p $z lat_us"
				row="| $(hsize "$z") | $(cell "$a")"
				for b in "fi_rdm_msg $p" "zmq_reqrep $pi" "nng_reqrep $pi" "ucx_tag $ps"; do
					row+=" | $(cell "$b $z lat_us") | $(ratio "$a" "$b $z lat_us")"
				done
				echo "$row |"
			done
			echo
			echo "## $p: libripc against the peers, bandwidth (MB/s)"
			echo
			echo "Ratio = libripc / the other (below 1: libripc is slower).  libripc and"
			echo "fi_rdm_pull: one long send in flight; the peers stream (see above)."
			echo "The last three columns: libripc with $BW_WINDOW long sends in flight"
			echo "(\`libripc_w$BW_WINDOW\`), nearer the streams' many, against ZeroMQ and NNG."
			echo
			echo "| size | libripc | raw fi_rdm_pull | ratio | ZeroMQ $pi push/pull | ratio | NNG $pi push/pull | ratio | UCX $ps tag_bw | ratio | UCX $ps get | ratio | libripc, $BW_WINDOW in flight | ratio to ZeroMQ | ratio to NNG |"
			echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
			for z in $BW_SIZES; do
				a="libripc $p $z bw_MBps"
				w="libripc_w$BW_WINDOW $p $z bw_MBps"
				row="| $(hsize "$z") | $(cell "$a")"
				for b in "fi_rdm_pull $p" "zmq_pushpull $pi" "nng_pushpull $pi" "ucx_tag $ps" "ucx_get $ps"; do
					row+=" | $(cell "$b $z bw_MBps") | $(ratio "$a" "$b $z bw_MBps")"
				done
				row+=" | $(cell "$w") | $(ratio "$w" "zmq_pushpull $pi $z bw_MBps") | $(ratio "$w" "nng_pushpull $pi $z bw_MBps")"
				echo "$row |"
			done
			echo
		done
	fi
	# ---- issue 12: service life ----
	if grep -q -e '_think[0-9]*ms ' -e '_first' -e ' idle_cpu_pct ' "$SUMMARY" || [ -f "$LIFE_NOTES" ]; then
		echo "## Service life: sparse traffic, first contact, idle cost, churn, soak"
		echo
	fi
	if grep -q '_think[0-9]*ms ' "$SUMMARY"; then
		z=$SPARSE_SIZE
		echo "### Sparse request/reply, $(hsize "$z") (us, one-way: median and p99)"
		echo
		echo "Think 0 = back to back (\`ripc_pingpong\` and \`tcp_socket\` blocking, medians"
		echo "only).  Ratio = libripc / kernel TCP (blocking sockets, same think time)."
		echo
		echo "| transport | think | libripc median | libripc p99 | tcp_socket median | tcp_socket p99 | ratio median | ratio p99 |"
		echo "|---|---|---|---|---|---|---|---|"
		for p in $PROVIDERS; do
			a="libripc $p $z lat_us"
			b="tcp_socket tcp $z lat_us"
			echo "| $p | 0 | $(cell "$a") | | $(cell "$b") | | $(ratio "$a" "$b") | |"
			sparse_rows "$p" libripc tcp_socket
		done
		echo
		if grep -q '_unpinned_think[0-9]*ms ' "$SUMMARY"; then
			echo "Unpinned (server and client free to run on any CPU, as services do;"
			echo "the rows above pin each to a CPU of its own):"
			echo
			echo "| transport | think | libripc median | libripc p99 | tcp_socket median | tcp_socket p99 | ratio median | ratio p99 |"
			echo "|---|---|---|---|---|---|---|---|"
			for p in $PROVIDERS; do
				sparse_rows "$p" libripc_unpinned tcp_socket_unpinned
			done
			echo
		fi
	fi
	if grep -q '_first' "$SUMMARY"; then
		z=$SPARSE_SIZE
		echo "### First contact: a fresh process to its first reply (us)"
		echo
		echo "| transport | resolver | from fork, median | p99 | from ripc_init, median | p99 | from the first send, median | p99 |"
		echo "|---|---|---|---|---|---|---|---|"
		for p in $PROVIDERS; do
			for v in "libripc_first:on (default)" "libripc_first_noresolver:off (RIPC_RESOLVER=0)"; do
				a="${v%%:*} $p $z"
				echo "| $p | ${v#*:} | $(cell "$a first_us") | $(cell "$a first_p99_us") | $(cell "$a first_init_us") | $(cell "$a first_init_p99_us") | $(cell "$a first_send_us") | $(cell "$a first_send_p99_us") |"
			done
		done
		a="tcp_socket_first tcp $z"
		echo "| kernel TCP | - | $(cell "$a first_us") | $(cell "$a first_p99_us") | $(cell "$a first_init_us") (from socket()) | $(cell "$a first_init_p99_us") | (connect and reply: the column before) | |"
		echo
	fi
	if grep -q ' idle_cpu_pct ' "$SUMMARY"; then
		echo "### Idle cost over $IDLE_SEC s"
		echo
		echo "| process | transports | CPU % of one CPU | context switches/s |"
		echo "|---|---|---|---|"
		for v in libripc_recv:"blocked in ripc_receive" libripc_sleep:"in sleep() after ripc_init"; do
			for t in shm tcp all; do
				a="${v%%:*} $t 0"
				echo "| libripc, ${v#*:} | $t | $(cell "$a idle_cpu_pct") | $(cell "$a idle_wakeups") |"
			done
		done
		echo "| kernel TCP, blocked in recv() | tcp | $(cell "tcp_socket tcp 0 idle_cpu_pct") | $(cell "tcp_socket tcp 0 idle_wakeups") |"
		echo
	fi
	targets_12_14
	if [ -f "$LIFE_NOTES" ]; then # ### sections of their own
		cat "$LIFE_NOTES"
		echo
	fi
	if [ -r "$PEERS_BASELINE" ]; then
		echo "## Peers measured on another day (orientation only)"
		echo
		echo "From \`${PEERS_BASELINE#$SRC/}\` (median of its rounds;"
		echo "its latencies are means inside each run): what a user could pick"
		echo "instead of libripc.  Not the same run: no ratios."
		echo
		echo "| system | transport | lat 8 B, us | lat 1 KiB, us | lat 64 KiB, us | bw 1 MiB, MB/s | bw 4 MiB, MB/s |"
		echo "|---|---|---|---|---|---|---|"
		awk '{ k = $1 " " $2; if (!(k in seen)) { seen[k] = 1; o[++n] = k }
			v[k, $3, $4] = $5 }
		END { for (i = 1; i <= n; i++) { k = o[i]; split(k, a, " ")
			printf "| %s | %s | %s | %s | %s | %s | %s |\n", a[1], a[2],
				c(v[k, 8, "lat_us"]), c(v[k, 1024, "lat_us"]), c(v[k, 65536, "lat_us"]),
				c(v[k, 1048576, "bw_MBps"]), c(v[k, 4194304, "bw_MBps"]) } }
		function c(x) { return x == "" ? "" : x }' "$PEERS_BASELINE"
		echo
	fi
	if [ -f "$OUT_DIR/latency.png" ] && [ "$PLOTS" = 1 ]; then
		echo "## Plots"
		echo
		echo "![latency vs size](${OUT_DIR#$(dirname "$DOC")/}/latency.png)"
		echo
		echo "![bandwidth vs size](${OUT_DIR#$(dirname "$DOC")/}/bandwidth.png)"
		echo
	fi
	for f in reqrep:"request/reply, return buffer vs pull" msgrate:"message rate vs senders" \
		filefetch:"file fetch vs kernel TCP" peers:"libripc against the peers" \
		sparse:"sparse request/reply vs think time"; do
		[ "$PLOTS" = 1 ] && [ -f "$OUT_DIR/${f%%:*}.png" ] || continue
		echo "![${f#*:}](${OUT_DIR#$(dirname "$DOC")/}/${f%%:*}.png)"
		echo
	done
	cat <<EOF
## Caveats

* **Shared, noisy machine.**  $(nproc) vCPUs shared with other work; client,
  server, both libraries' progress threads and the kernel's softirq work
  share them.  Compare rows of one run only; run-to-run drift of 10-30 % is
  normal here.  Rounds are interleaved so that a burst of noise hits one
  sample of many programs; the foreign load line above says how loud the
  machine was.  Within a round, odd rounds run libripc's latency before
  the raw programs and its bandwidth and message rate after them, even
  rounds the other way round: whichever of two programs ran first in a
  round was the faster in an A/B of tcp long sends (perf_notes.md, 11-27),
  and a fixed order would have made that a bias of the ratios.  The peers' baseline (../shared/bench/peers/BASELINE.md) was
  taken on another day: use its numbers for orientation, not for ratios.
* **Medians here, means elsewhere.**  Our latencies and the raw ones are
  medians of individually timed round trips; fi_pingpong (and the peers'
  baseline) report means, which a few scheduler hiccups inflate.
* **Progress threads and pinning.**  libripc runs a progress thread per
  process; it is pinned to the same CPU as its application thread.  While a
  receive spins (RIPC_SPIN_US, default 200 us) the thread stays away; after
  that the application sleeps (waking the thread as it does) and the thread
  drives transfers, polling shm (no wait fd in 1.17) every RIPC_BUSY_POLL_US
  (default 20 us) while a transfer is under way, every
  RIPC_POLL_INTERVAL_US (default 1 ms) when idle.
  The raw programs busy-poll on one thread and never sleep.
* **shm uses CMA** (process_vm_readv/writev) for RMA here (no Yama, same
  user); where CMA is refused shm falls back to bounce buffers and large
  transfers get slower for libripc and raw alike.
* **tcp is tcp;ofi_rxm** (libfabric $LIBFABRIC_VERSION) with rxm's
  passthrough (\`FI_OFI_RXM_ENABLE_PASSTHRU=1\`, which libripc sets for
  itself and run_bench exports for the raw programs too): rxm connects, and
  every send and RMA goes straight to the tcp provider's connection, with no
  rxm eager limit, segmentation or rendezvous.  The raw programs ask for
  manual progress, as libripc does, so rxm runs no thread beside them.
  This is libripc's default; with \`RIPC_TCP_NATIVE=1\` it runs on
  libfabric 1.17's native \`net\` instead, measured against raw \`net\`
  by \`test/benchmarks/ab/ab.sh -R\` and \`ab/bw_rate.sh\`, not here
  (perf_notes.md, 12-02 late morning, in the notes below).
* **16 MiB and above** do not fit in the L2 cache: all RMA figures drop
  toward memory bandwidth; the receive buffer of libripc_libbuf is fresh
  memory each time (page faults and registration included).
* **Loopback only**: FI_TCP_IFACE=lo, RIPC_TCP_ADDR=127.0.0.1.
* **Request/reply and file fetch are whole request-to-reply times**, not
  half round trips like the ping-pong's \`lat_us\`; their \`bw_MBps\` divides by
  the mean time per request, so a few slow requests lower it while the
  median latency does not move.
* **Several senders share one CPU.**  With $(nproc) CPUs the N sender
  processes of the message rate all run on CPU $CLI_CPU: the N-sender
  figure shows the receiver serving N peers and the senders' scheduling,
  not N times the sending power.  Raw senders spin (and yield when out of
  credits), libripc's sleep in their receive while they wait for an ack.
* **Message rates swing with the VM's placement** of the two vCPUs (raw
  shm, one sender, has given 1.2 and 2-4 million messages/s within minutes
  of each other); look at the spread in the last section before reading
  much into one ratio.

EOF
	if [ -f "$NOTES" ]; then
		cat "$NOTES"
		echo
	fi
	echo "## All measurements: median (min-max) across $REPS rounds"
	echo
	echo "| system | transport | size | metric | median (min-max) | rounds used |"
	echo "|---|---|---|---|---|---|"
	while read -r s t z m med u lo hi n nall noisy; do
		echo "| $s | $t | $(hsize "$z") | $m | $(spread "$s $t $z $m") $u$([ "$noisy" = 1 ] && echo ' *') | $n of $nall |"
	done < "$SUMMARY"
	echo
	echo "Foreign load per step (round, step, seconds, % of both CPUs taken by other processes):"
	echo
	echo '```'
	cat "$WORK/load" 2>/dev/null
	echo '```'
} > "$DOC"
log "wrote $DOC, $RESULTS, $SUMMARY in $(elapsed) s"
