#!/usr/bin/env bash
# check-readme.sh - does README.md work as written, for a newcomer?
#
#   test/scripts/check-readme.sh [-k] [-h]
#     -k    keep the temporary directory (its path is printed)
#     -h    this help
#
# In a temporary directory:
#   1. `git clone` this tree and check out its HEAD commit: what is tested
#      is what is committed (uncommitted changes are reported, not tested);
#   2. run the README's first command (the first indented line that starts
#      with ./scripts/setup.sh) with the option the README documents,
#      --prefix <tmp>/prefix, so that nothing goes into /usr/local: it
#      installs missing packages (none, usually), builds, installs and runs
#      the demo, which must end well and print its next steps;
#   3. take the README's first program from its first ```c block and run
#      the commands of the indented block that follows it, as written:
#      compile with its pkg-config line (PKG_CONFIG_PATH, LD_LIBRARY_PATH
#      and PATH set as the exports setup.sh prints for --prefix), start the
#      server it names in the background, run the program, stop the server
#      by its pid, as `kill %1` would;
#   4. compare the program's output and exit status with the README's: the
#      next indented block (with the server), and the one after it (run
#      again with no server).
# Prints PASS/FAIL per check and last "N passed, N failed"; exits 1 if
# anything failed, 77 if this is not a git work tree.
#
# Environment: RIPC_REGISTRY, RIPC_RESOLVER_PORT (unless set) and
# FI_TCP_IFACE=lo are set to private values so that other libripc runs on
# this host are neither seen nor disturbed; RIPC_RESOLVE_TIMEOUT_MS=500 for
# the run without a server, which only shortens the wait.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
keep=no
while getopts kh opt; do
	case $opt in
	k) keep=yes ;;
	h) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done

if ! git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "check-readme: $top is not a git work tree: skipped"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ripc-readme.XXXXXX") || exit 1
server_pid=
cleanup() {
	# The server, if still running: by its pid, then its registry.
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$server_pid" 2>/dev/null
	fi
	if [ $keep = yes ]; then
		echo "check-readme: kept $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

src=$tmp/src
prefix=$tmp/prefix
work=$tmp/work
log=$tmp/log
mkdir -p "$work" "$log"
export RIPC_REGISTRY=$tmp/registry.reg
export RIPC_RESOLVER_PORT=${RIPC_RESOLVER_PORT:-$((40000 + $$ % 20000))}
export FI_TCP_IFACE=lo
npass=0
nfail=0

pass() {
	npass=$((npass + 1))
	echo "PASS: $*"
}
fail() {
	nfail=$((nfail + 1))
	echo "FAIL: $*"
}
# show <file>: the end of a log, indented, after a FAIL line.
show() {
	tail -n 30 "$1" | sed 's/^/    /'
}
finish() {
	echo "$npass passed, $nfail failed"
	[ $nfail -eq 0 ]
	exit $?
}

# ---- 1. a fresh clone of what is committed -----------------------------------
head=$(git -C "$top" rev-parse HEAD)
if [ -n "$(git -C "$top" status --porcelain --untracked-files=no)" ]; then
	echo "check-readme: note: $top has uncommitted changes; testing" \
		"commit ${head:0:12} without them"
fi
if git clone -q --no-hardlinks "$top" "$src" >"$log/clone" 2>&1 &&
	git -C "$src" checkout -q --detach "$head" >>"$log/clone" 2>&1; then
	pass "git clone, checkout ${head:0:12}"
else
	fail "git clone, checkout ${head:0:12}"
	show "$log/clone"
	finish
fi
readme=$src/README.md

# ---- 2. the README's first command ------------------------------------------
# Indented code lines of the README, comments after the command removed.
first=$(sed -n 's/^    \(\.\/scripts\/setup\.sh[^#]*\).*/\1/p' "$readme" |
	head -n 1 | sed 's/[ \t]*$//')
if [ "$first" != ./scripts/setup.sh ]; then
	fail "the README's first command is ./scripts/setup.sh (found:" \
		"'${first:-nothing}')"
	finish
fi
if grep -q -- '--prefix DIR' "$readme"; then
	pass "the README documents setup.sh --prefix DIR"
else
	fail "the README documents setup.sh --prefix DIR (this test uses it)"
fi
cmd="$first --prefix $prefix"
echo "check-readme: running '$cmd' in the clone (build, install, demo)"
if (cd "$src" && timeout 3600 $cmd) >"$log/setup" 2>&1; then
	pass "$first --prefix <tmp>/prefix"
else
	fail "$first --prefix <tmp>/prefix (exit status $?)"
	show "$log/setup"
	finish
fi
ndone=$(grep -c '^demo finished: everything arrived intact$' "$log/setup")
if [ "$ndone" -eq 2 ] && grep -q 'best of 5: [0-9]* MB/s (transfer only' \
	"$log/setup"; then
	pass "the demo ran over shm and tcp, printing the transfer rate"
else
	fail "the demo ran over shm and tcp, printing the transfer rate"
	show "$log/setup"
fi
if [ "$(grep -c '^Next steps:$' "$log/setup")" -eq 1 ]; then
	pass "the demo printed its next steps once"
else
	fail "the demo printed its next steps once"
fi
# The exports setup.sh prints for a prefix outside the search paths: one
# each for pkg-config, the loader and the shell.
for v in PKG_CONFIG_PATH LD_LIBRARY_PATH PATH; do
	if grep -q "^    export $v=$prefix/" "$log/setup"; then
		pass "setup.sh prints the export of $v for --prefix"
	else
		fail "setup.sh prints the export of $v for --prefix"
	fi
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export LD_LIBRARY_PATH=$prefix/lib
export PATH=$prefix/bin:$PATH
version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' \
	"$src/configure.ac")
got=$(pkg-config --modversion libripc 2>&1)
if [ "$got" = "$version" ]; then
	pass "pkg-config --modversion libripc is $version"
else
	fail "pkg-config --modversion libripc is $version (got: $got)"
fi
if MANPATH=$prefix/share/man man -w 1 ripc_echo >/dev/null 2>&1 &&
	MANPATH=$prefix/share/man man -w 7 ripc >/dev/null 2>&1; then
	pass "man finds ripc_echo(1) and ripc(7), which the README names"
else
	fail "man finds ripc_echo(1) and ripc(7), which the README names"
fi

# ---- 3. the first program, built and run as the README says ---------------
# The first ```c block, then the indented blocks after it, one file each:
# block.1 the commands, block.2 the output with the server, block.3 the
# output without one.
awk -v dir="$tmp" '
	state == 0 && /^```c[ \t]*$/ { state = 1; next }
	state == 1 && /^```[ \t]*$/ { state = 2; next }
	state == 1 { print > (dir "/program.c"); next }
	state == 2 && /^    / {
		if (!inblock) { n++; inblock = 1 }
		if (n <= 3) print substr($0, 5) > (dir "/block." n)
		next
	}
	state == 2 && /^```/ { exit }
	{ inblock = 0 }
' "$readme"
# The file name the README tells the reader to save the program as.
name=$(sed -n 's/.*[Ss]ave it as `\([A-Za-z0-9_.-]*\.c\)`.*/\1/p' "$readme" |
	head -n 1)
if [ -s "$tmp/program.c" ] && [ -n "$name" ] && [ -s "$tmp/block.1" ] &&
	[ -s "$tmp/block.2" ] && [ -s "$tmp/block.3" ]; then
	pass "the README has a first program ($name), its commands and" \
		"its outputs"
else
	fail "the README has a first program (a \`\`\`c block, \"Save it as" \
		"\`<name>.c\`\"), then indented blocks: the commands, the" \
		"output, the output without a server"
	finish
fi
cp "$tmp/program.c" "$work/$name"

# The commands, comments removed: compile, start the server (ends in &),
# run, stop (kill %1).
strip() { sed -e 's/[ \t]*#.*//' -e 's/[ \t]*$//'; }
cc_line=$(strip <"$tmp/block.1" | grep -m 1 '^cc ')
server_line=$(strip <"$tmp/block.1" | grep -m 1 '&$')
run_line=$(strip <"$tmp/block.1" | grep -m 1 '^\./')
stop_line=$(strip <"$tmp/block.1" | grep -m 1 '^kill ')
other=$(strip <"$tmp/block.1" | grep -v -e '^cc ' -e '&$' -e '^\./' \
	-e '^kill ' -e '^$')
if [ -n "$cc_line" ] && [ -n "$server_line" ] && [ -n "$run_line" ] &&
	[ "$stop_line" = "kill %1" ] && [ -z "$other" ]; then
	pass "the commands: '$cc_line', '$server_line', '$run_line'," \
		"'$stop_line'"
else
	fail "the commands after the first program are a cc line, a server" \
		"started with &, ./<program> and kill %1 (found:" \
		"$(tr '\n' ';' <"$tmp/block.1"))"
	finish
fi
case $cc_line in
*'$(pkg-config --cflags --libs libripc)'*)
	pass "the compile line uses \$(pkg-config --cflags --libs libripc)" ;;
*) fail "the compile line uses \$(pkg-config --cflags --libs libripc)" ;;
esac
if (cd "$work" && bash -c "$cc_line") >"$log/cc" 2>&1; then
	pass "compile: $cc_line"
else
	fail "compile: $cc_line"
	show "$log/cc"
	finish
fi

# The server, in the background as the README starts it; exec so that its
# pid is the one kill %1 would signal.  It prints its ready line once it is
# registered.
server_cmd=${server_line%&}
(cd "$work" && exec bash -c "exec $server_cmd") >"$log/server" 2>&1 &
server_pid=$!
ready=no
for _ in $(seq 100); do
	grep -q '^server: serving' "$log/server" && { ready=yes; break; }
	kill -0 "$server_pid" 2>/dev/null || break
	sleep 0.1
done
if [ $ready = yes ]; then
	pass "the server started: $server_line"
else
	fail "the server started: $server_line (no ready line in 10 s)"
	show "$log/server"
	finish
fi

(cd "$work" && timeout 60 bash -c "$run_line") >"$log/run" 2>&1
status=$?
if [ $status -eq 0 ] && cmp -s "$log/run" "$tmp/block.2"; then
	pass "$run_line prints what the README says: $(head -n 1 "$log/run")"
else
	fail "$run_line: exit status $status, output differs from the" \
		"README's (- README, + program):"
	diff "$tmp/block.2" "$log/run" | sed 's/^/    /'
fi

# kill %1: SIGTERM to the server, which then exits by itself.
kill -TERM "$server_pid"
stopped=no
for _ in $(seq 100); do
	kill -0 "$server_pid" 2>/dev/null || { stopped=yes; break; }
	sleep 0.1
done
if [ $stopped = yes ] && wait "$server_pid"; then
	pass "kill %1 stops the server cleanly"
else
	fail "kill %1 stops the server cleanly (still running, or exit" \
		"status not 0)"
	show "$log/server"
fi
server_pid=

# ---- 4. the program without a server ------------------------------------------
(cd "$work" && RIPC_RESOLVE_TIMEOUT_MS=500 timeout 60 bash -c "$run_line") \
	>"$log/run2" 2>&1
status=$?
# The library's own warning (where it looked) comes first; the README
# describes it in words, since its pid and paths vary.
grep -v '^libripc\[[0-9]*\] ' "$log/run2" >"$log/run2.prog"
if [ $status -ne 0 ] && [ $status -ne 124 ] &&
	grep -q '^libripc\[[0-9]*\] warn: service 4100 not found within' \
		"$log/run2" &&
	cmp -s "$log/run2.prog" "$tmp/block.3"; then
	pass "without a server, $run_line fails (status $status) and says" \
		"what the README says: $(head -n 1 "$log/run2")"
else
	fail "without a server, $run_line: exit status $status, output" \
		"differs from the README's (- README, + program):"
	diff "$tmp/block.3" "$log/run2" | sed 's/^/    /'
	echo "    (the library's warning line is expected before these)"
fi
rm -f "$RIPC_REGISTRY"
finish
