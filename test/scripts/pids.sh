# pids.sh - sourced by the test scripts: is a pid they recorded still
# theirs?
#
# A script records the pid of every process it starts and, when it ends,
# stops them by pid and removes their /dev/shm files.  By then most have
# ended and been reaped, and the kernel may have given such a pid to any
# other process: pid_max is 32768 here, and one CI run starts tens of
# thousands of processes (churn alone 4 600).  Killing a stranger, or
# removing its shm region, is worse than leaving a stray (on 11-30 a
# `make` beside a CI run was killed, most likely by a runner of
# runripctests.sh that, on exit, killed every pid it had started).  So:
#
#   * a process a script started itself with `&` and has not reaped is its
#     child: its parent is this shell ($$, also inside functions), even
#     as a zombie, whose pid is not reused;
#   * a process a script started through a wrapper (`timeout`, `sh -c
#     exec`) is not its child: it is known by its program's name.

# pid_child PID -> 0 if PID is a child of this shell
pid_child() {
	[ -n "$1" ] &&
		[ "$(awk '/^PPid:/ { print $2 }' /proc/"$1"/status 2>/dev/null)" = "$$" ]
}

# pid_runs PID NAME... -> 0 if PID runs one of the programs NAME (its comm,
# as the kernel cuts it: 15 characters)
pid_runs() {
	local p=$1 c n
	shift
	[ -n "$p" ] && c=$(cat /proc/"$p"/comm 2>/dev/null) || return 1
	for n in "$@"; do
		[ "$c" = "${n:0:15}" ] && return 0
	done
	return 1
}

# pid_kill_children SIG PID...: signal those of PID... that are still our
# children
pid_kill_children() {
	local sig=$1 p
	shift
	for p in "$@"; do
		pid_child "$p" && kill "-$sig" "$p" 2>/dev/null
	done
	return 0
}

# pid_stop PID NAME...: TERM, 3 s grace, KILL, each only while PID still
# runs one of the programs NAME (pid_runs)
pid_stop() {
	local p=$1 i
	shift
	pid_runs "$p" "$@" || return 0
	kill -TERM "$p" 2>/dev/null
	for ((i = 0; i < 30; i++)); do
		pid_runs "$p" "$@" || return 0
		sleep 0.1
	done
	pid_runs "$p" "$@" && kill -KILL "$p" 2>/dev/null
	return 0
}

# pid_leave_or_term PID: a server that ends by itself at its client's
# end (the benchmarks' -s side): wait up to 5 s for it to leave, then TERM
# it if it is still our child, and reap it
pid_leave_or_term() {
	local i
	for ((i = 0; i < 50; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	pid_kill_children TERM "$1"
	wait "$1" 2>/dev/null
	return 0
}

# pid_shm_cleanup PID...: remove /dev/shm/PID:* (libfabric shm's regions,
# named after their process) for each PID that no process has now, or
# that is still our child; never the files of a stranger that has the pid
pid_shm_cleanup() {
	local p
	for p in "$@"; do
		[ -n "$p" ] || continue
		[ -d /proc/"$p" ] && ! pid_child "$p" && continue
		rm -f /dev/shm/"$p":* 2>/dev/null
	done
	return 0
}
