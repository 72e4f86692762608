#!/usr/bin/env bash
# zk-ensemble.sh - a real ZooKeeper ensemble on this host, for tests.
#
# As a library (source it; bash):
#   zk_available              0 if java and the ZooKeeper jars are here,
#                             else 1 with the reason in $ZK_WHY
#   zk_setup <dir> [n] [addr...]
#                             n servers (default 3) with private data
#                             directories under <dir>; server i listens on
#                             addr i (default 127.0.0.1 for all), client
#                             port ZK_PORT[i]; sets ZK_CONNECT
#                             ("a:p,a:p,a:p").  Ports: $ZK_BASE_PORT
#                             (default: derived from the pid, checked free)
#   ZK_EXEC=(ip netns exec ns)  prefix to run servers (and probes) with,
#                             e.g. in another network namespace
#   zk_start <i> | zk_start_all
#   zk_wait_ready [seconds]   wait (bounded, default 60 s) until every
#                             running server answers "srvr" as leader or
#                             follower; 1 on timeout
#   zk_wait_serving <i> [s]   until server i is leader or follower
#   zk_mode <i>               leader, follower, or nothing
#   zk_stop <i>               SIGTERM, SIGKILL after 5 s; by pid
#   zk_kill <i>               SIGKILL at once; by pid
#   zk_stop_all; zk_cleanup   stop every server; remove <dir>
#   zk_4lw <addr> <port> <word>  a four-letter-word command's answer
#
# As a command (for programs that drive an outage themselves):
#   zk-ensemble.sh start <dir> [n]   start, wait, print ZK_CONNECT and
#                                    the pids, leave it running
#   zk-ensemble.sh stop <dir>        stop what start left running
#   zk-ensemble.sh kill <dir> <i|all>     SIGKILL server i, or all
#   zk-ensemble.sh restart <dir> <i|all>  start the stopped ones again,
#                                    wait until they serve (60 s at most)
# The servers run in the foreground of their JVMs from the Debian package
# (zookeeper, /usr/share/java/zookeeper.jar with its Class-Path), logging
# warnings to <dir>/zk<i>.log.  tickTime is 500 ms, so sessions may last
# 1 to 10 s.

ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
ZK_LOGJAR=${ZK_LOGJAR:-/usr/share/java/slf4j-simple.jar}
ZK_DIR=
ZK_N=0
ZK_CONNECT=
ZK_ADDR=()
ZK_PORT=()
ZK_PID=()
ZK_WHY=
[ -n "${ZK_EXEC+x}" ] || ZK_EXEC=()

zk_available() {
	if ! command -v java >/dev/null 2>&1; then
		ZK_WHY="ZooKeeper not installed (no java; apt-get install zookeeper)"
		return 1
	fi
	if [ ! -f "$ZK_JAR" ]; then
		ZK_WHY="ZooKeeper not installed ($ZK_JAR missing; apt-get install zookeeper)"
		return 1
	fi
	return 0
}

# zk_4lw <addr> <port> <word>: bash's /dev/tcp, bounded by timeout(1).
zk_4lw() {
	"${ZK_EXEC[@]}" timeout 2 bash -c \
		'exec 3<>/dev/tcp/$0/$1 && printf %s "$2" >&3 && cat <&3' \
		"$1" "$2" "$3" 2>/dev/null
}

_zk_port_free() {
	! "${ZK_EXEC[@]}" ss -Htan "sport = :$1" 2>/dev/null | grep -q .
}

zk_setup() {
	local dir=$1 n=${2:-3} i base tries=0
	shift 2 2>/dev/null || shift $#
	ZK_DIR=$dir
	ZK_N=$n
	mkdir -p "$dir" || return 1
	base=${ZK_BASE_PORT:-$((42000 + ($$ % 300) * 40))}
	# Client ports base+i, quorum base+10+i, election base+20+i.
	while :; do
		local ok=1
		for i in $(seq 1 "$n"); do
			for p in $((base + i)) $((base + 10 + i)) $((base + 20 + i)); do
				_zk_port_free "$p" || ok=0
			done
		done
		[ $ok = 1 ] && break
		tries=$((tries + 1))
		[ $tries -gt 20 ] && { echo "zk_setup: no free ports" >&2; return 1; }
		base=$((base + 40))
	done
	ZK_CONNECT=
	for i in $(seq 1 "$n"); do
		ZK_ADDR[$i]=${1:-${ZK_ADDR[$i]:-127.0.0.1}}
		[ $# -gt 0 ] && shift
		ZK_PORT[$i]=$((base + i))
		ZK_CONNECT=${ZK_CONNECT:+$ZK_CONNECT,}${ZK_ADDR[$i]}:${ZK_PORT[$i]}
	done
	for i in $(seq 1 "$n"); do
		mkdir -p "$dir/data$i"
		echo "$i" >"$dir/data$i/myid"
		{
			echo "tickTime=500"
			echo "initLimit=20"
			echo "syncLimit=10"
			echo "dataDir=$dir/data$i"
			echo "clientPort=${ZK_PORT[$i]}"
			echo "clientPortAddress=${ZK_ADDR[$i]}"
			echo "maxClientCnxns=0"
			echo "minSessionTimeout=1000"
			echo "maxSessionTimeout=10000"
			echo "4lw.commands.whitelist=*"
			echo "admin.enableServer=false"
			echo "autopurge.purgeInterval=0"
			for k in $(seq 1 "$n"); do
				echo "server.$k=${ZK_ADDR[$k]}:$((base + 10 + k)):$((base + 20 + k))"
			done
		} >"$dir/zk$i.cfg"
	done
	echo "$ZK_CONNECT" >"$dir/connect"
	{
		echo "ZK_N=$n"
		echo "ZK_CONNECT=$ZK_CONNECT"
		for i in $(seq 1 "$n"); do
			echo "ZK_ADDR[$i]=${ZK_ADDR[$i]}"
			echo "ZK_PORT[$i]=${ZK_PORT[$i]}"
		done
	} >"$dir/state"
}

# zk_load <dir>: the ensemble zk_setup made in <dir> (another shell's).
zk_load() {
	local i
	ZK_DIR=$1
	[ -f "$1/state" ] || return 1
	. "$1/state"
	for i in $(seq 1 "$ZK_N"); do
		ZK_PID[$i]=$(cat "$1/pid$i" 2>/dev/null)
	done
	return 0
}

zk_start() {
	local i=$1
	# Small heaps and a simple collector: three servers share two cores
	# with the tests.
	"${ZK_EXEC[@]}" java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
		-Dzookeeper.jmx.log4j.disable=true \
		-cp "$ZK_JAR:$ZK_LOGJAR" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain \
		"$ZK_DIR/zk$i.cfg" >>"$ZK_DIR/zk$i.log" 2>&1 &
	ZK_PID[$i]=$!
	# Stopped by pid; no job-control chatter when it is killed.
	disown "${ZK_PID[$i]}" 2>/dev/null
	echo "${ZK_PID[$i]}" >"$ZK_DIR/pid$i"
}

zk_start_all() {
	local i
	for i in $(seq 1 "$ZK_N"); do zk_start "$i"; done
}

zk_mode() {
	zk_4lw "${ZK_ADDR[$1]}" "${ZK_PORT[$1]}" srvr |
		sed -n 's/^Mode: \(leader\|follower\|standalone\).*/\1/p'
}

_zk_running() {
	[ -n "${ZK_PID[$1]:-}" ] && kill -0 "${ZK_PID[$1]}" 2>/dev/null
}

zk_wait_serving() { # <i> [seconds]
	local i=$1 t=${2:-60} k=0
	while [ -z "$(zk_mode "$i")" ]; do
		_zk_running "$i" || return 1
		k=$((k + 1))
		[ $k -gt $((t * 5)) ] && return 1
		sleep 0.2
	done
}

zk_wait_ready() { # [seconds]: every running server serves
	local t=${1:-60} i end=$((SECONDS + ${1:-60}))
	for i in $(seq 1 "$ZK_N"); do
		_zk_running "$i" || continue
		zk_wait_serving "$i" $((end - SECONDS > 0 ? end - SECONDS : 1)) || return 1
	done
}

# Wait (bounded) for a process that may not be our child.
_zk_gone() { # <pid> <tenths of a second>
	local k=0
	while kill -0 "$1" 2>/dev/null; do
		k=$((k + 1))
		[ $k -gt "$2" ] && return 1
		sleep 0.1
	done
	wait "$1" 2>/dev/null
	return 0
}

zk_stop() {
	local i=$1 p=${ZK_PID[$1]:-}
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	_zk_gone "$p" 50 || { kill -KILL "$p" 2>/dev/null; _zk_gone "$p" 50; }
	ZK_PID[$i]=
	rm -f "$ZK_DIR/pid$i"
}

zk_kill() {
	local i=$1 p=${ZK_PID[$1]:-}
	[ -n "$p" ] || return 0
	kill -KILL "$p" 2>/dev/null
	_zk_gone "$p" 50
	ZK_PID[$i]=
	rm -f "$ZK_DIR/pid$i"
}

zk_stop_all() {
	local i
	# SIGKILL: a stopped ensemble must not hand sessions over cleanly;
	# what is tested is an outage.  All at once, then reaped.
	for i in $(seq 1 "$ZK_N"); do
		[ -n "${ZK_PID[$i]:-}" ] && kill -KILL "${ZK_PID[$i]}" 2>/dev/null
	done
	for i in $(seq 1 "$ZK_N"); do zk_kill "$i"; done
}

zk_cleanup() {
	zk_stop_all
	[ -n "$ZK_DIR" ] && rm -rf "$ZK_DIR"
	ZK_DIR=
}

# ---- as a command ----------------------------------------------------------
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -u
	case ${1:-} in
	start)
		[ $# -ge 2 ] || { sed -n '2,40p' "$0"; exit 2; }
		zk_available || { echo "Notrun: $ZK_WHY"; exit 77; }
		zk_setup "$2" "${3:-3}" || exit 1
		zk_start_all
		if ! zk_wait_ready 90; then
			echo "zk-ensemble: not ready; logs in $2" >&2
			for i in $(seq 1 "$ZK_N"); do
				[ -n "${ZK_PID[$i]:-}" ] && kill -KILL "${ZK_PID[$i]}"
			done
			exit 1
		fi
		echo "ZK_CONNECT=$ZK_CONNECT"
		for i in $(seq 1 "$ZK_N"); do
			echo "server.$i pid=${ZK_PID[$i]} port=${ZK_PORT[$i]} mode=$(zk_mode "$i")"
		done
		;;
	stop)
		[ $# -ge 2 ] || { sed -n '2,40p' "$0"; exit 2; }
		zk_load "$2" || exit 1
		zk_stop_all
		;;
	kill | restart)
		[ $# -ge 3 ] || { sed -n '2,40p' "$0"; exit 2; }
		zk_load "$2" || exit 1
		which=$3
		[ "$which" = all ] && which=$(seq 1 "$ZK_N")
		for i in $which; do
			if [ "$1" = kill ]; then
				zk_kill "$i"
			elif ! _zk_running "$i"; then
				zk_start "$i"
			fi
		done
		if [ "$1" = restart ]; then
			zk_wait_ready 60 || { echo "zk-ensemble: not ready" >&2; exit 1; }
		fi
		;;
	*) sed -n '2,40p' "$0"; exit 2 ;;
	esac
fi
