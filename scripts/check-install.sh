#!/bin/sh
# check-install.sh - is libripc installable like a real library?  (CI)
#
#   scripts/check-install.sh [-k] [-q] [-j N]
#     -k    keep the temporary directory (its path is printed)
#     -q    quick: skip `make distcheck`
#     -j N  parallel make jobs (default: number of CPUs)
#
# In a temporary directory, from this source tree:
#   1. configure a fresh build with --prefix in the temporary directory,
#      build, `make install`;
#   2. check that ripc.h, libripc.so with its soname, libripc.a, libripc.pc,
#      ripc_info, ripc_echo, every man page of man/ and the example sources
#      are in place, that the library exports only ripc_* symbols, and that the
#      installed header compiles on its own as C and C++;
#   3. build example programs from the *installed* sources against the
#      *installed* library with `pkg-config --cflags --libs libripc`
#      (PKG_CONFIG_PATH into the prefix), shared and static, and run them
#      (LD_LIBRARY_PATH into the prefix);
#   4. `make uninstall` leaves no file behind;
#   5. the tarball of `make dist` holds every file git tracks (but the
#      repository's plumbing), and `make distcheck` passes.
# Prints PASS/FAIL per check, the output of what failed, and last a line
# "N passed, N failed"; exits 1 if anything failed.
#
# Environment: CC (default cc), CXX (default c++).  RIPC_REGISTRY and
# FI_TCP_IFACE=lo are set to private values for the programs it runs.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
keep=no
quick=no
jobs=$(nproc 2>/dev/null || echo 2)
while getopts kqj: opt; do
	case $opt in
	k) keep=yes ;;
	q) quick=yes ;;
	j) jobs=$OPTARG ;;
	*) sed -n '2,6p' "$0"; exit 2 ;;
	esac
done
CC=${CC:-cc}
CXX=${CXX:-c++}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ripc-install.XXXXXX") || exit 1
cleanup() {
	if [ $keep = yes ]; then
		echo "check-install: kept $tmp"
	else
		# distcheck leaves its tree read-only.
		chmod -R u+w "$tmp" 2>/dev/null
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

prefix=$tmp/prefix
build=$tmp/build
log=$tmp/log
mkdir -p "$build" "$log"
export RIPC_REGISTRY=$tmp/registry.reg
export FI_TCP_IFACE=lo
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
unset PKG_CONFIG_SYSROOT_DIR
npass=0
nfail=0
step=0

pass() {
	npass=$((npass + 1))
	echo "PASS: $*"
}
fail() {
	nfail=$((nfail + 1))
	echo "FAIL: $*"
}

# run <description> <command...>: a check whose output goes to a log that
# is shown (its end) when it fails.
run() {
	desc=$1
	shift
	step=$((step + 1))
	out=$log/$step.log
	if "$@" >"$out" 2>&1; then
		pass "$desc"
		return 0
	fi
	fail "$desc"
	tail -n 40 "$out" | sed 's/^/    /'
	return 1
}

# expect <description> <test arguments...>: a check of a condition.
expect() {
	desc=$1
	shift
	if test "$@"; then
		pass "$desc"
	else
		fail "$desc"
	fi
}

finish() {
	if [ $nfail -eq 0 ]; then
		echo "check-install: PASS"
	else
		echo "check-install: FAIL"
	fi
	echo "$npass passed, $nfail failed"
	[ $nfail -eq 0 ]
	exit $?
}

# ---- 1. build and install ------------------------------------------------
if [ ! -x "$top/configure" ]; then
	run "bootstrap (autogen.sh)" sh -c "cd '$top' && ./autogen.sh" ||
		finish
fi
run "configure --prefix=<tmp>" sh -c "cd '$build' && '$top/configure' \
	--prefix='$prefix' --libdir='$prefix/lib' --enable-silent-rules" ||
	finish
run "make" make -C "$build" -j"$jobs" || finish
run "make install" make -C "$build" install || finish

# ---- 2. what is installed ---------------------------------------------------
lib=$prefix/lib
expect "include/ripc.h installed" -f "$prefix/include/ripc.h"
expect "lib/libripc.a installed" -f "$lib/libripc.a"
expect "lib/pkgconfig/libripc.pc installed" -f "$lib/pkgconfig/libripc.pc"
expect "lib/libripc.so installed" -e "$lib/libripc.so"

# The soname is what programs record; it must be a file of its own (the
# link the loader follows) and agree with libtool's -version-info.
soname=$(readelf -d "$lib/libripc.so" 2>/dev/null |
	sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
ltver=$(sed -n 's/.*RIPC_LT_VERSION\],[ \t]*\[\([0-9:]*\)\].*/\1/p' \
	"$top/configure.ac")
cur=$(echo "$ltver" | cut -d: -f1)
age=$(echo "$ltver" | cut -d: -f3)
want=libripc.so.$((cur - age))
expect "libripc.so has soname $want (-version-info $ltver)" "$soname" = "$want"
expect "lib/$soname installed" -e "$lib/$soname"
dlname=$(sed -n "s/^dlname='\(.*\)'/\1/p" "$lib/libripc.la" 2>/dev/null)
[ -f "$lib/libripc.la" ] &&
	expect "libripc.la names the soname" "$dlname" = "$soname"

others=$(nm -D --defined-only "$lib/libripc.so" 2>/dev/null |
	awk 'NF == 3 && $2 ~ /[TDBRVWiu]/ { print $3 }' |
	grep -v -e '^ripc_[a-z]' -e '^LIBRIPC_' | tr '\n' ' ')
expect "libripc.so exports only ripc_* symbols${others:+ (also: $others)}" \
	-z "$others"
inside=$(nm -D --defined-only "$lib/libripc.so" 2>/dev/null |
	grep -c ' ripc__')
expect "libripc.so exports no internal ripc__* symbols" "$inside" -eq 0
run "the installed ripc.h compiles alone (C)" sh -c \
	"echo '#include <ripc.h>' | $CC -std=c99 -Wall -Werror -fsyntax-only \
	-x c - \$(pkg-config --cflags libripc)"
if command -v "$CXX" >/dev/null 2>&1; then
	run "the installed ripc.h compiles alone (C++)" sh -c \
		"echo '#include <ripc.h>' | $CXX -Wall -Werror -fsyntax-only \
		-x c++ - \$(pkg-config --cflags libripc)"
fi

expect "bin/ripc_info installed" -x "$prefix/bin/ripc_info"
run "ripc_info runs and finds a transport" sh -c \
	"'$prefix/bin/ripc_info' | grep -q 'status: available'"
run "ripc_info -e lists the variables" sh -c \
	"'$prefix/bin/ripc_info' -e | grep -q '^env.RIPC_PROVIDER.default:'"
# The echo server that the first program of README.md talks to (the
# README itself is checked by test/scripts/check-readme.sh).
expect "bin/ripc_echo installed" -x "$prefix/bin/ripc_echo"
run "the installed ripc_echo runs (server and client)" \
	env LD_LIBRARY_PATH="$lib" timeout 120 "$prefix/bin/ripc_echo" -n 50

missing=
npages=0
for page in "$top"/man/man[1-9]/*.[1-9]*; do
	[ -f "$page" ] || continue
	npages=$((npages + 1))
	sec=$(basename "$(dirname "$page")")
	[ -f "$prefix/share/man/$sec/$(basename "$page")" ] ||
		missing="$missing $sec/$(basename "$page")"
done
expect "all $npages man pages installed${missing:+ (missing:$missing)}" \
	-z "$missing" -a "$npages" -gt 0
if command -v man >/dev/null 2>&1; then
	run "man finds ripc_info(1), ripc_send_short(3), ripc(7)" sh -c \
		"MANPATH='$prefix/share/man' man -w ripc_info &&
		 MANPATH='$prefix/share/man' man -w 3 ripc_send_short &&
		 MANPATH='$prefix/share/man' man -w 7 ripc"
fi
exdir=$prefix/share/doc/libripc/examples
expect "example sources installed" -f "$exdir/ripc_echo.c" -a \
	-f "$exdir/ripc_reqrep.c" -a -f "$exdir/ripc_bulk.c"

# ---- 3. programs built against the installed library -----------------------
version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' \
	"$top/configure.ac")
expect "pkg-config --modversion libripc is $version" \
	"$(pkg-config --modversion libripc 2>&1)" = "$version"
run "build ripc_echo (installed source) with pkg-config" sh -c \
	"$CC -o '$tmp/ripc_echo' '$exdir/ripc_echo.c' \
	\$(pkg-config --cflags --libs libripc)"
run "build ripc_reqrep with pkg-config" sh -c \
	"$CC -o '$tmp/ripc_reqrep' '$exdir/ripc_reqrep.c' \
	\$(pkg-config --cflags --libs libripc)"
# libripc.a, with the libraries libripc.pc names as private requirements
# linked as usual (shared): `pkg-config --static` would also want static
# copies of libfabric's own dependencies (psm2, efa, ...).
run "build ripc_bulk with libripc.a and Requires.private" sh -c \
	"$CC -o '$tmp/ripc_bulk' '$exdir/ripc_bulk.c' \
	\$(pkg-config --cflags libripc) '$lib/libripc.a' \
	\$(pkg-config --libs \$(pkg-config --print-requires-private libripc |
	  awk '{ print \$1 }')) \
	\$(sed -n 's/^Libs.private: //p' '$lib/pkgconfig/libripc.pc')"
run "the static program does not need libripc.so" sh -c \
	"! readelf -d '$tmp/ripc_bulk' | grep -q 'NEEDED.*libripc'"
run "ripc_echo loads libripc from the prefix" sh -c \
	"LD_LIBRARY_PATH='$lib' ldd '$tmp/ripc_echo' |
	 grep -q 'libripc.so.* => $lib/'"
run "run ripc_echo over shm" env LD_LIBRARY_PATH="$lib" \
	timeout 120 "$tmp/ripc_echo" -p shm -n 200
run "run ripc_reqrep over tcp" env LD_LIBRARY_PATH="$lib" \
	timeout 120 "$tmp/ripc_reqrep" -p tcp -n 20
run "run ripc_bulk (static)" timeout 120 "$tmp/ripc_bulk" -n 4
rm -f "$RIPC_REGISTRY"

# ---- 4. uninstall ---------------------------------------------------------
if run "make uninstall" make -C "$build" uninstall; then
	left=$(find "$prefix" -type f -o -type l 2>/dev/null |
		sed "s|$prefix/||" | tr '\n' ' ')
	expect "make uninstall leaves no file${left:+ (left: $left)}" -z "$left"
fi

# ---- 5. the tarball ---------------------------------------------------------
# distcheck proves the tarball builds and passes its tests; it does not
# notice a source, script or document that nothing needs at build time.
# So: every file git tracks is in the tarball, except the repository's own
# plumbing.
NOT_DISTRIBUTED='.gitignore .gitattributes .ci/* .github/*'
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
	run "make dist" make -C "$build" dist; then
	tarball=$(ls "$build"/libripc-*.tar.gz 2>/dev/null | head -n 1)
	tar tzf "$tarball" | sed -e 's|^[^/]*/||' -e '/\/$/d' | sort \
		>"$tmp/dist.list"
	missing=
	for f in $(git -C "$top" ls-files | sort); do
		skip=no
		for pat in $NOT_DISTRIBUTED; do
			case $f in $pat) skip=yes ;; esac
		done
		[ $skip = yes ] && continue
		grep -qxF "$f" "$tmp/dist.list" || missing="$missing $f"
	done
	[ -n "$missing" ] && missing=" (missing:$missing; add to EXTRA_DIST)"
	expect "the tarball holds every tracked file$missing" -z "$missing"
	rm -f "$tarball"
fi
if [ $quick = no ]; then
	run "make distcheck" make -C "$build" -j"$jobs" distcheck
fi
finish
