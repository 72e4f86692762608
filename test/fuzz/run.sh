#!/usr/bin/env bash
# run.sh - build and run the libripc fuzz targets (libFuzzer, clang).
#
# Usage: test/fuzz/run.sh [seconds] [target] [-- libFuzzer options...]
#   seconds  time per target (default 30; 0 = only build and replay)
#   target   wire | resolver | dirrec | all (default all)
#   Options after -- go to every libFuzzer run, e.g. -- -runs=10000000.
#
# Environment:
#   CC                clang to use (default clang-14, else clang)
#   RIPC_FUZZ_DIR     build/work directory (default: a new /tmp directory,
#                     removed afterwards unless something crashed); the
#                     source tree is never written to
#   RIPC_FUZZ_JOBS    parallel compile jobs (default 2)
#   RIPC_FUZZ_COV=1   afterwards, replay each corpus through a build with
#                     source-based coverage and print the line and branch
#                     coverage of the decoders (llvm-cov)
#
# Targets (sources in test/fuzz/):
#   wire      ripc__wire_decode, checked against ripc_protocol(7) and the
#             encoder (fuzz_wire.c)
#   resolver  ripc__res_decode, likewise (fuzz_resolver.c)
#   dirrec    ripc__dir_rec_decode, the records of service directory nodes
#             (fuzz_dirrec.c)
#
# Each target starts from a seed corpus of valid messages that
# gen_corpus.c writes with the library's encoders; inputs found in
# test/fuzz/crashes/ are replayed first as regression tests.  The script
# prints executions, executions per second and coverage per target and
# exits non-zero if any target crashed (the reproducer is kept in the work
# directory, whose path is printed).
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
secs=30
which=all
extra=()
while [ $# -gt 0 ]; do
	case $1 in
	--) shift; extra=("$@"); break ;;
	-h|--help) sed -n '2,31p' "$0"; exit 0 ;;
	[0-9]*) secs=$1 ;;
	wire|resolver|dirrec|all) which=$1 ;;
	*) echo "run.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
	shift
done
case $which in
all) targets=(wire resolver dirrec) ;;
*) targets=("$which") ;;
esac

if [ -z "${CC:-}" ]; then
	CC=clang-14
	command -v "$CC" >/dev/null || CC=clang
fi
command -v "$CC" >/dev/null || { echo "run.sh: no clang found" >&2; exit 1; }

if [ -n "${RIPC_FUZZ_DIR:-}" ]; then
	work=$RIPC_FUZZ_DIR
	keep=1
	mkdir -p "$work" || exit 1
else
	work=$(mktemp -d /tmp/ripc-fuzz.XXXXXX) || exit 1
	keep=0
fi
case $work/ in "$top"/*)
	echo "run.sh: refusing to build inside the source tree" >&2; exit 2 ;;
esac
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- build --------------------------------------------------------------
# The decoders and the harnesses get libFuzzer's coverage instrumentation;
# the rest of the core (needed only because resolver.c refers to it) gets
# the sanitizers but no coverage, so that the coverage figures describe
# the code under test.
cppflags=(-D_GNU_SOURCE -I"$top/include" -I"$top/ripc" -I"$top/prov/util")
read -r -a fab_cflags <<<"$(pkg-config --cflags libfabric hwloc)"
read -r -a libs <<<"$(pkg-config --libs libfabric hwloc) -lpthread"
san=(-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
	-fno-sanitize-recover=undefined)
cov=(-fsanitize=fuzzer-no-link)
cflags=(-std=gnu11 -Wall -Wextra -Wno-unused-parameter)
obj=$work/obj
mkdir -p "$obj" "$work/bin"

compile() { # <out.o> <src> [extra flags...]
	local out=$1 src=$2
	shift 2
	"$CC" "${cflags[@]}" "${cppflags[@]}" "${fab_cflags[@]}" "${san[@]}" \
		"$@" -c "$src" -o "$out"
}

build() {
	local core=() pids=() src o fail=0 n=0
	for src in "$top"/ripc/*.c "$top"/prov/*.c "$top"/prov/*/*.c; do
		o=$obj/$(echo "${src#"$top"/}" | tr / _).o
		case $src in
		# The ZooKeeper engine needs the client library and is not
		# under test; without RIPC_HAVE_ZOOKEEPER nothing refers to it.
		*/ripc/dir_zk.c) continue ;;
		*/ripc/wire.c|*/ripc/resolver.c|*/ripc/dir_record.c)
			compile "$o" "$src" "${cov[@]}" & ;;
		*)
			compile "$o" "$src" & ;;
		esac
		pids+=($!)
		core+=("$o")
		n=$((n + 1))
		if [ $((n % ${RIPC_FUZZ_JOBS:-2})) = 0 ]; then
			for p in "${pids[@]}"; do wait "$p" || fail=1; done
			pids=()
		fi
	done
	for p in "${pids[@]}"; do wait "$p" || fail=1; done
	[ "$fail" = 0 ] || return 1
	rm -f "$obj/libcore.a"
	ar rcs "$obj/libcore.a" "${core[@]}" || return 1
	for t in wire resolver dirrec; do
		"$CC" "${cflags[@]}" "${cppflags[@]}" "${san[@]}" \
			-fsanitize=fuzzer "$top/test/fuzz/fuzz_$t.c" \
			"$obj/libcore.a" "${libs[@]}" -o "$work/bin/fuzz_$t" ||
			return 1
	done
	"$CC" "${cflags[@]}" "${cppflags[@]}" "${san[@]}" "${cov[@]}" \
		"$top/test/fuzz/gen_corpus.c" "$obj/libcore.a" "${libs[@]}" \
		-o "$work/bin/gen_corpus"
}

echo "# fuzz: building with $CC in $work"
if ! build >"$work/build.log" 2>&1; then
	cat "$work/build.log"
	echo "run.sh: build failed" >&2
	exit 1
fi
# The corpus directories hold the seeds plus whatever the fuzzer finds; a
# reused RIPC_FUZZ_DIR keeps them between runs.
"$work/bin/gen_corpus" "$work/seeds" || exit 1

# ---- run ------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
	bin=$work/bin/fuzz_$t
	corpus=$work/corpus/$t
	art=$work/artifacts/$t/
	log=$work/$t.log
	mkdir -p "$corpus" "$art"
	case $t in
	# A receive slot is 69632 bytes: the decoder never sees more.
	wire) maxlen=69632 ;;
	# Datagrams are read into RES_MAX_DGRAM + 1 = 383 bytes; allow more
	# so that oversized ones are tried too.
	resolver) maxlen=512 ;;
	# A record is at most 382 bytes; ZooKeeper nodes hold up to 1 MB,
	# and the engine refuses more than 382 before decoding.
	dirrec) maxlen=1024 ;;
	esac

	# Known crashers first: they must not crash any more.
	regress=()
	for f in "$top"/test/fuzz/crashes/"$t"-* "$top"/test/fuzz/crashes/"$t"/*; do
		[ -f "$f" ] && regress+=("$f")
	done
	if [ ${#regress[@]} -gt 0 ]; then
		if ! "$bin" "${regress[@]}" >"$work/$t.regress.log" 2>&1; then
			tail -n 30 "$work/$t.regress.log"
			echo "fuzz $t: a saved crash input still crashes"
			status=1 keep=1
			continue
		fi
		echo "fuzz $t: ${#regress[@]} saved crash inputs replayed"
	fi
	[ "$secs" = 0 ] && continue

	"$bin" -max_total_time="$secs" -max_len="$maxlen" \
		-artifact_prefix="$art" -print_final_stats=1 \
		"${extra[@]}" "$corpus" "$work/seeds/$t" >"$log" 2>&1
	rc=$?
	runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -n 1)
	eps=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$log" | tail -n 1)
	last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
	cov=$(echo "$last" | sed -nE 's/.* cov: ([0-9]+).*/\1/p')
	ft=$(echo "$last" | sed -nE 's/.* ft: ([0-9]+).*/\1/p')
	units=$(echo "$last" | sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p')
	if [ "$rc" -ne 0 ]; then
		status=1 keep=1
		grep -E 'ERROR|fuzz_|SUMMARY|Test unit written' "$log" | head -n 20
		echo "fuzz $t: CRASH (exit $rc) after ${runs:-?} executions; log $log, input in $art"
	else
		echo "fuzz $t: ${runs:-?} executions in ${secs}s, ${eps:-?} exec/s, cov ${cov:-?} ft ${ft:-?}, corpus ${units:-?}, no crash"
	fi
done
# ---- coverage of the code under test (optional) ---------------------------
# libFuzzer's "cov" counts edges; this says which lines and branches of the
# decoders the corpus reaches.
coverage() { # <target>
	local t=$1 src bin prof v=${CC#clang}
	case $t in
	wire) src=ripc/wire.c ;;
	resolver) src=ripc/resolver.c ;;
	dirrec) src=ripc/dir_record.c ;;
	esac
	bin=$work/bin/cov_$t
	prof=$work/cov_$t
	"$CC" "${cflags[@]}" "${cppflags[@]}" "${fab_cflags[@]}" "${san[@]}" \
		-fprofile-instr-generate -fcoverage-mapping -fsanitize=fuzzer \
		"$top/test/fuzz/fuzz_$t.c" "$top/$src" "$obj/libcore.a" \
		"${libs[@]}" -o "$bin" >>"$work/build.log" 2>&1 || return 1
	LLVM_PROFILE_FILE=$prof.profraw "$bin" -runs=0 \
		"$work/corpus/$t" "$work/seeds/$t" >/dev/null 2>&1 || return 1
	"llvm-profdata$v" merge -sparse "$prof.profraw" -o "$prof.profdata" ||
		return 1
	echo "# coverage of $src by the $t corpus:"
	if [ "$t" = wire ] || [ "$t" = dirrec ]; then
		"llvm-cov$v" report -show-functions "$bin" \
			-instr-profile="$prof.profdata" "$top/$src"
	else
		# resolver.c is mostly sockets and cache; the codec is what
		# the target exercises.
		"llvm-cov$v" report -show-functions "$bin" \
			-instr-profile="$prof.profdata" "$top/$src" |
			grep -E '^(Name|-+$|ripc__res_|put|get)'
	fi
}
if [ "${RIPC_FUZZ_COV:-0}" = 1 ] && [ "$status" = 0 ]; then
	for t in "${targets[@]}"; do
		coverage "$t" || echo "fuzz $t: coverage report failed"
	done
fi

[ "$status" = 0 ] || echo "fuzz: work directory kept: $work"
exit "$status"
