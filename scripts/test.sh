#!/usr/bin/env bash
# test.sh - run every libripc test and print "N passed, N failed" last.
#
# Installs missing packages and builds first (so it works on a clean
# clone), then runs, in order:
#   1. make check in ./build: unit tests (Criterion), header and man-page
#      checks;
#   2. the conformance suite (server/client pairs) over shm, tcp and verbs
#      (verbs reports Notrun where no RDMA device exists), and again over
#      shm and tcp with verbs' memory-registration rules emulated; tcp
#      also over libfabric 1.17's native provider (RIPC_TCP_NATIVE=1,
#      "tcp-native", and its faults and lifecycle cases); the
#      providers run at the same time (runripctests.sh -j), here and in
#      the sanitizer and valgrind passes;
#   2b. fault scenarios: restart, move, dead peers (test/scripts/faults.sh);
#      the lifecycle suite: finalize races, SIGTERM/SIGINT, stopped peers,
#      short timeouts, fork, a first sender that exits at once
#      (test/scripts/lifecycle.sh), again with shm's CMA refused (a
#      seccomp filter, FI_SHM_DISABLE_CMA) and shm and tcp open; client churn, 2,000 sequential and 300
#      concurrent clients over shm and tcp, and over a peer table of 16,
#      also with new clients on ended clients' ports (test/scripts/churn.sh
#      -r, a network namespace); a 60 s
#      soak (test/scripts/soak.sh); the event-loop example over shm and
#      tcp;
#      the ZooKeeper service directory and multicast duplicate detection
#      (test/scripts/directory.sh; Notrun without ZooKeeper);
#   2c. make install, a program built against the installed library with
#      pkg-config, make distcheck (scripts/check-install.sh);
#   2d. README.md as written, in a fresh clone of the committed tree:
#      setup.sh, the first program built with the README's pkg-config line
#      and run against the server it names (test/scripts/check-readme.sh);
#   3. make check, the conformance suite and the lifecycle suite under
#      AddressSanitizer + UndefinedBehaviorSanitizer in ./build-asan; the
#      unit tests and the lifecycle suite under ThreadSanitizer in
#      ./build-tsan; the fuzz targets for 30 s each; the conformance suite
#      under valgrind memcheck (./build-vg).
# Environment: RIPC_TEST_QUICK=1 skips the sanitizer pass.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

scripts/setup.sh --deps || exit 1
scripts/setup.sh --build || exit 1

export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
total_pass=0 total_fail=0
log=$(mktemp -d /tmp/ripc-test.XXXXXX)
trap 'rm -rf "$log"' EXIT

tally_t0=$(date +%s)
tally() { # tally <label> <passed> <failed>: one line, with the step's time
	local now
	now=$(date +%s)
	printf '== %-40s %4d passed, %d failed  (%d s)\n' "$1" "$2" "$3" \
		$((now - tally_t0))
	tally_t0=$now
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
}

# make check: count the automake test results.
run_make_check() { # <builddir> <label>
	local out=$log/$2.check
	make -C "$1" -j"$(nproc)" check >"$out" 2>&1
	local p f
	p=$(grep -E '^# (PASS|XFAIL):' "$out" | awk '{s+=$3} END {print s+0}')
	f=$(grep -E '^# (FAIL|XPASS|ERROR):' "$out" | awk '{s+=$3} END {print s+0}')
	if ! grep -q '^# PASS:' "$out"; then
		echo "make check in $1 did not run:"; tail -n 30 "$out"; f=$((f + 1))
	fi
	[ "$f" -gt 0 ] && { grep -E '^(FAIL|ERROR|XPASS):' "$out"; \
		find "$1" -name '*.log' -path '*test*' -newer "$out" -exec true {} \; ; \
		tail -n 40 "$1/test-suite.log" 2>/dev/null; }
	tally "$2: make check" "$p" "$f"
}

run_suite() { # <builddir> <label> <providers...>
	local b=$1 label=$2; shift 2
	local out=$log/$label.suite
	# A failure's line and the indented lines of its processes' output.
	# The providers at once (-j), each with its own resolver port: a
	# test's pair mostly waits, so two take little longer than one.
	test/scripts/runripctests.sh -j -b "$b/test/functional" "$@" | tee "$out" |
		awk '/ (Fail|Notrun) /{show=/ Fail /; print; next}
		     /^    /{if (show) print; next} {show=0}' || true
	local last p f
	last=$(tail -n 1 "$out")
	p=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(echo "$last" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	[ -z "$p" ] && { p=0; f=1; }
	tally "$label: conformance ($*)" "$p" "$f"
}

run_make_check build default
# tcp-native: tcp over libfabric 1.17's native provider, net
# (RIPC_TCP_NATIVE=1; what tcp is from libfabric 1.18 on): another wait
# and other faults (runripctests.sh).
run_suite build default shm tcp tcp-native verbs
# verbs cannot run here: exercise its memory-registration rules (every
# local buffer registered and described, keys chosen by the provider, 32
# bits) over shm and tcp instead.
RIPC_TEST_MR_BITS=local,prov_key,key32 run_suite build verbs-mr shm tcp

# Services that crash, restart and move; peers that die mid-transfer
# (network namespaces as hosts where they can be created).
run_faults() { # <builddir> <label> [scenario...]
	local out=$log/$2.faults p f b=$1 label=$2
	shift 2
	# A failure's line and the indented lines of its process's stderr.
	test/scripts/faults.sh -b "$b/test/functional" "$@" 2>/dev/null | tee "$out" |
		awk '/ (Fail|Notrun) /{show=1; print; next}
		     /^    /{if (show) print; next} {show=0}'
	p=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	[ -z "$p" ] && { p=0; f=1; }
	tally "$label: faults" "$p" "$f"
}
run_faults build default
# Over net, a killed peer's connection is refused for ever, not failed:
# restart and move, a peer killed mid-transfer.
RIPC_TCP_NATIVE=1 run_faults build tcp-native tcp longfault-tcp

# The output of a script that ends with "N passed, N failed": show its
# failures and set p and f (no such last line: its tail, one failure).
counted_out() { # <file>
	grep -E 'Fail|FAIL' "$1" | head -n 20 || true
	p=$(tail -n 1 "$1" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(tail -n 1 "$1" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	[ -z "$p" ] && { tail -n 20 "$1"; p=0; f=1; }
	# A failure's own account (its log lines: what a peer said, how the
	# server ended) is all that is left of it once $log is removed.
	[ "$f" != 0 ] && grep -v -E 'Fail|FAIL' "$1" | tail -n 25 |
		sed 's/^/    | /'
	return 0
}

# A script that ends with "N passed, N failed": tally it.
run_counted() { # <label> <command...>
	local label=$1 out=$log/counted.$RANDOM p f; shift
	"$@" >"$out" 2>&1
	counted_out "$out"
	tally "$label" "$p" "$f"
}

# The lifecycle suite once per transport, both at the same time (its cases
# mostly wait for stalls and timeouts to pass; each transport has its own
# registries and resolver port), counted together.
run_lifecycle() { # <label> <lifecycle.sh args...> (providers: shm, tcp)
	local label=$1 out=$log/lifecycle.$RANDOM p f sp=0 sf=0 pid_shm pid_tcp x
	shift
	RIPC_RESOLVER_PORT=$((${RIPC_RESOLVER_PORT:-47473} + 1)) \
		test/scripts/lifecycle.sh "$@" shm >"$out.shm" 2>&1 &
	pid_shm=$!
	test/scripts/lifecycle.sh "$@" tcp >"$out.tcp" 2>&1 &
	pid_tcp=$!
	wait "$pid_shm" "$pid_tcp"
	for x in shm tcp; do
		counted_out "$out.$x"
		sp=$((sp + p)) sf=$((sf + f))
	done
	tally "$label" "$sp" "$sf"
}

# Finalize racing other threads, SIGTERM/SIGINT, stopped peers with short
# timeouts, a sender that exits while its receiver is stopped, fork during
# traffic, a first sender that exits at once: every case 20 times over shm
# and tcp.
run_lifecycle "lifecycle (shm tcp, 20 runs a case)" \
	-b build/test/functional -n 20
# The same cases where shm has no CMA, with shm and tcp open: same-host
# peers must use tcp, or a finalizing client's exposed long send wedges
# the server's shm endpoint (docs/FAULTS.md).  Every process under a
# seccomp filter that refuses process_vm_readv/writev, as container
# runtimes do (ripc_nocma), and the finalize case again with libfabric's
# FI_SHM_DISABLE_CMA=1.
run_counted "lifecycle without CMA (seccomp, shm,tcp, 3 runs a case)" \
	env RIPC_RESOLVER_PORT=$((${RIPC_RESOLVER_PORT:-47473} + 2)) \
	test/scripts/lifecycle.sh -b build/test/functional -n 3 \
	-w "$top/build/test/functional/ripc_nocma" shm,tcp
run_counted "lifecycle finalize, FI_SHM_DISABLE_CMA=1 (shm,tcp, 5 runs)" \
	env FI_SHM_DISABLE_CMA=1 RIPC_RESOLVER_PORT=$((${RIPC_RESOLVER_PORT:-47473} + 2)) \
	test/scripts/lifecycle.sh -b build/test/functional -n 5 -c finalize shm,tcp
# Every case over tcp on libfabric 1.17's net (RIPC_TCP_NATIVE=1): its own
# wait set (ripc(7) TRANSPORTS) under finalize, signals and stopped peers.
run_counted "lifecycle tcp native (net, 3 runs a case)" \
	env RIPC_TCP_NATIVE=1 RIPC_RESOLVER_PORT=$((${RIPC_RESOLVER_PORT:-47473} + 3)) \
	test/scripts/lifecycle.sh -b build/test/functional -n 3 tcp

# Client churn (issue 12): 2,000 client processes one after another, then
# 300 alive at once (more than shm's 256 peers), against one service;
# every request answered, server memory flat.  And the 60 s soak: clients
# starting, sending short and long messages with think time and exiting at
# random; RSS, fds and idle CPU sampled every 10 s.
run_counted "churn shm (2000 sequential, 300 concurrent)" \
	test/scripts/churn.sh -p shm -n 2000 -c 300 -T 900
run_counted "churn tcp (2000 sequential, 300 concurrent)" \
	test/scripts/churn.sh -p tcp -n 2000 -c 300 -T 900
# A peer table of 16 (RIPC_TEST_PEERS_MAX) against 40 clients alive at
# once: the least recently used peers that only cached routes refer to
# are forgotten, and found again when next used.
run_counted "churn tcp, peer table of 16 (100 sequential, 40 concurrent)" \
	env RIPC_TEST_PEERS_MAX=16 test/scripts/churn.sh -p tcp -n 100 -c 40 -e -T 300
# The same where new clients take the ports of ended ones (a namespace
# with 256 ephemeral ports): a new incarnation at a known peer's address,
# which must not be the peer forgotten to make room for it.
run_counted "churn tcp, peer table of 16, ports reused (150 sequential, 20 concurrent)" \
	env RIPC_TEST_PEERS_MAX=16 test/scripts/churn.sh -p tcp -n 150 -c 20 -e -r 40000-40255 -T 300
# Over shm, whose peers go only once their process has ended (the sweep):
# a server with a peer table of 16 answered its first 16 clients only.
run_counted "churn shm, peer table of 16 (100 sequential, 10 concurrent)" \
	env RIPC_TEST_PEERS_MAX=16 test/scripts/churn.sh -p shm -n 100 -c 10 -T 300
run_counted "soak (60 s, clients come and go)" \
	test/scripts/soak.sh -t 60 -g ""

# The event-loop example (messages, release events, a timerfd) as a user
# would run it.
run_example() { # <prov>
	local out=$log/evloop.$1
	if RIPC_REGISTRY=$log/evloop.$1.reg timeout 120 \
		build/examples/ripc_evloop -p "$1" -n 40 >"$out" 2>&1; then
		tally "example ripc_evloop -p $1" 1 0
	else
		tail -n 5 "$out"
		tally "example ripc_evloop -p $1" 0 1
	fi
}
run_example shm
run_example tcp
# Resolution across hosts through a ZooKeeper ensemble, duplicate IDs
# (issue 13): a real ensemble, namespaces as hosts.
run_directory() { # <builddir> <label>
	local out=$log/$2.directory p f
	test/scripts/directory.sh -b "$1/test/functional" 2>/dev/null |
		tee "$out" |
		awk '/^[a-z].* (Fail|Notrun)/{show=/ Fail/; print; next}
		     /^    /{if (show) print; next} {show=0}' || true
	p=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	[ -z "$p" ] && { p=0; f=1; }
	tally "$2: directory" "$p" "$f"
}
run_directory build default

# make install, pkg-config against the installed library, make distcheck.
run_install() {
	local out=$log/install p f
	scripts/check-install.sh -j "$(nproc)" >"$out" 2>&1
	grep -E '^FAIL' "$out" || true
	p=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	[ -z "$p" ] && { tail -n 20 "$out"; p=0; f=1; }
	tally "install and distcheck" "$p" "$f"
}
run_install

# The README as a newcomer follows it: its first command in a fresh clone,
# its first program compiled and run as it says.
run_readme() {
	local out=$log/readme p f
	test/scripts/check-readme.sh >"$out" 2>&1
	grep -E '^(FAIL|check-readme: note)' "$out" || true
	p=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	[ -z "$p" ] && { tail -n 20 "$out"; p=0; f=1; }
	tally "README as written" "$p" "$f"
}
run_readme

# The decoders of untrusted input under libFuzzer (ASan+UBSan), 30 s each.
run_fuzz() {
	local out=$log/fuzz
	if test/fuzz/run.sh 30 all >"$out" 2>&1; then
		tally "fuzz (wire, resolver, directory record decoders)" 3 0
	else
		tail -n 30 "$out"
		tally "fuzz (wire, resolver, directory record decoders)" 0 1
	fi
}

if [ "${RIPC_TEST_QUICK:-0}" != 1 ]; then
	run_fuzz
	# The conformance suite under valgrind memcheck: no errors, no
	# definite leaks (its own build in build-vg).
	out=$log/valgrind
	test/scripts/valgrind-suite.sh >"$out" 2>&1
	p=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
	f=$(tail -n 1 "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
	[ -z "$p" ] && { p=0; f=1; }
	[ "$f" -gt 0 ] && grep -E 'Fail|ERROR SUMMARY: [1-9]|definitely lost: [1-9]' "$out" | head -20
	tally "valgrind: conformance (shm tcp)" "$p" "$f"

	mkdir -p build-asan
	if [ ! -f build-asan/Makefile ] || [ configure -nt build-asan/Makefile ]; then
		(cd build-asan && ../configure -q --enable-sanitizers --disable-shared) \
			>"$log/asan.configure" 2>&1 || { cat "$log/asan.configure"; exit 1; }
	fi
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$top/test/lsan.supp:print_suppressions=0}
	run_make_check build-asan asan
	# net leaks by itself (test/lsan-net.supp says what and why).
	RIPC_TEST_NATIVE_LSAN=suppressions=$top/test/lsan-net.supp:print_suppressions=0 \
		run_suite build-asan asan shm tcp tcp-native
	run_counted "asan: lifecycle (shm tcp, 5 runs a case)" \
		test/scripts/lifecycle.sh -b build-asan/test/functional -n 5 \
		shm tcp

	# ThreadSanitizer: the unit tests (built against test/unit/crshim,
	# since Criterion cannot run under TSan) and the lifecycle cases but
	# fork (TSan does not support threads in a child forked from a
	# multi-threaded process).  Suppressions, each with its reason, in
	# test/tsan.supp.
	mkdir -p build-tsan
	if [ ! -f build-tsan/Makefile ] || [ configure -nt build-tsan/Makefile ]; then
		(cd build-tsan && ../configure -q --enable-sanitizers=thread \
			--disable-shared) >"$log/tsan.configure" 2>&1 ||
			{ cat "$log/tsan.configure"; exit 1; }
	fi
	(
		unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
		export TSAN_OPTIONS="halt_on_error=0 exitcode=66 die_after_fork=0 report_signal_unsafe=0 suppressions=$top/test/tsan.supp"
		run_make_check build-tsan tsan
		LC_SLOW=3 run_counted "tsan: lifecycle (shm tcp, 5 runs a case)" \
			test/scripts/lifecycle.sh -b build-tsan/test/functional \
			-n 5 -c finalize,sigterm,sigint,stopserver,stopclient,sendexit \
			shm tcp
		LC_SLOW=3 run_counted "tsan: lifecycle tcp native (net, 2 runs a case)" \
			env RIPC_TCP_NATIVE=1 test/scripts/lifecycle.sh \
			-b build-tsan/test/functional -n 2 \
			-c finalize,sigterm,sigint,stopserver,stopclient,sendexit tcp
		echo "$total_pass $total_fail" >"$log/tsan.totals"
	)
	read -r total_pass total_fail <"$log/tsan.totals"
fi

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
