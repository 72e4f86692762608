# setup.sh - what timeline.sh and pingpong.sh share, sourced by both:
# timeline_setup NAME BINARY... checks that the benchmark binaries are
# built, makes $work (removed at exit with /dev/shm/ripc-NAME-$$*, after
# the processes in $pids are stopped), builds the shim ($shim) and sets
# run_bench.sh's environment.  Needs $here (the timeline directory) and
# $B (the build directory).
timeline_setup() {
	local name=$1 f
	shift
	for f in "$@"; do
		[ -x "$f" ] || { echo "missing $f: build $B first" >&2; exit 1; }
	done
	work=$(mktemp -d "/tmp/ripc-$name.XXXXXX")
	pids=()
	timeline_name=$name
	trap timeline_cleanup EXIT
	shim=$work/shim.so
	${CC:-cc} -O2 -shared -fPIC -o "$shim" "$here/shim.c" -ldl || exit 1
	export FI_TCP_IFACE=lo RIPC_TCP_ADDR=127.0.0.1 RIPC_RESOLVER=0
	# As run_bench.sh: both systems through rxm's passthrough (libripc's
	# default, ripc(7) TRANSPORTS), unless the caller says otherwise.
	export FI_OFI_RXM_ENABLE_PASSTHRU=${FI_OFI_RXM_ENABLE_PASSTHRU:-1}
	export RIPC_REGISTRY=/dev/shm/ripc-$name-$$ LD_LIBRARY_PATH=$B/.libs
}

timeline_cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$work" /dev/shm/ripc-"$timeline_name"-$$*
}
