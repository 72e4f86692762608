#!/usr/bin/env bash
# setup.sh - install what is missing, build, install libripc, run the demo.
#
#   scripts/setup.sh [--prefix DIR] [--no-install]
#                             everything: Debian packages, build, install,
#                             demo
#   scripts/setup.sh --deps     only install missing Debian packages
#   scripts/setup.sh --build    only (re)build in ./build
#   scripts/setup.sh --install  only build and install
#   scripts/setup.sh --demo     only run the demo
#
#   --prefix DIR  install into DIR (default /usr/local; PREFIX=DIR in the
#                 environment does the same).  Outside the directories the
#                 loader and pkg-config search, the last lines say what to
#                 export to use it.
#   --no-install  build and run the demo, install nothing
#
# Installing into /usr/local puts the library where pkg-config, the loader
# (after ldconfig, which this runs) and $PATH find it, so the first program
# of README.md builds with `pkg-config --cflags --libs libripc` at once.
# Debian 12 packages only; installing needs root (or sudo).
set -euo pipefail
here=$PWD
top=$(cd "$(dirname "$0")/.." && pwd)

usage() {
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
	exit "${1:-2}"
}

mode=all
install=yes
prefix=${PREFIX:-}
while [ $# -gt 0 ]; do
	case $1 in
	--deps | --build | --install | --demo) mode=${1#--} ;;
	--no-install) install=no ;;
	--prefix) [ $# -ge 2 ] || usage; prefix=$2; shift ;;
	--prefix=*) prefix=${1#--prefix=} ;;
	-h | --help) usage 0 ;;
	*) echo "setup: unknown argument '$1'" >&2; usage ;;
	esac
	shift
done
[ "$mode" = install ] && [ $install = no ] &&
	{ echo "setup: --install and --no-install contradict" >&2; exit 2; }
# configure wants an absolute prefix; a relative one is taken from where
# the script was started.
case $prefix in
"" | /*) ;;
*) prefix=$here/$prefix ;;
esac
cd "$top"

# The prefix ./build was configured with, if any.
configured_prefix() {
	[ -f build/Makefile ] && sed -n 's/^prefix = //p' build/Makefile
}
# Without --prefix, a rebuild keeps the prefix of an existing build (so
# that scripts/test.sh, which runs --build, does not undo --prefix); what
# installs uses /usr/local.
if [ -z "$prefix" ] && { [ "$mode" = build ] || [ "$mode" = demo ]; }; then
	prefix=$(configured_prefix || true)
fi
prefix=${prefix:-/usr/local}

# Build and test dependencies (Debian package names).
PKGS=(gcc g++ make autoconf automake libtool pkg-config
      libfabric-dev libfabric-bin libhwloc-dev libcriterion-dev
      groff-base man-db iproute2 procps gnuplot-nox valgrind
      clang libclang-rt-14-dev zookeeper libzookeeper-mt-dev
      libzmq3-dev libnng-dev ucx-utils gdb)

do_deps() {
	local missing=()
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && { echo "setup: all packages present"; return; }
	echo "setup: installing ${missing[*]}"
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -q || true
	$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

do_build() {
	[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] ||
		./autogen.sh
	mkdir -p build
	if [ ! -f build/Makefile ] || [ configure -nt build/Makefile ] ||
		[ "$(configured_prefix)" != "$prefix" ]; then
		(cd build && ../configure --enable-silent-rules --prefix="$prefix")
	fi
	make -C build -j"$(nproc)"
}

# Is directory $1 one the loader searches (ld.so.conf and the built-in
# ones)?  Compared by real path: /lib and /usr/lib are one on Debian 12.
# ldconfig is in /sbin, which a user's $PATH may lack.
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
in_loader_path() {
	local want d
	want=$(readlink -f "$1")
	for d in $("$LDCONFIG" -N -v 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p'); do
		[ "$(readlink -f "$d")" = "$want" ] && return 0
	done
	return 1
}

# The lines a user must run to use an install in a prefix that pkg-config,
# the loader or $PATH do not search; nothing for /usr/local.
exports=()
find_exports() {
	local libdir=$prefix/lib
	exports=()
	[ "$(pkg-config --variable=libdir libripc 2>/dev/null)" = "$libdir" ] ||
		exports+=("export PKG_CONFIG_PATH=$libdir/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}")
	in_loader_path "$libdir" ||
		exports+=("export LD_LIBRARY_PATH=$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}")
	[ "$(command -v ripc_echo || true)" = "$prefix/bin/ripc_echo" ] ||
		exports+=("export PATH=$prefix/bin:\$PATH")
}

do_install() {
	local sudo="" d=$prefix log=build/install.log libdir=$prefix/lib
	# The nearest existing directory decides whether we can write there.
	while [ ! -d "$d" ]; do d=$(dirname "$d"); done
	[ -w "$d" ] || { [ "$(id -u)" -ne 0 ] && sudo=sudo; }
	echo "setup: installing into $prefix (make install; log in $log)"
	if ! $sudo make -C build install >"$log" 2>&1; then
		tail -n 30 "$log"
		echo "setup: make install failed" >&2
		return 1
	fi
	# The loader finds a new shared library in its directories only
	# through its cache.
	if in_loader_path "$libdir"; then
		$sudo "$LDCONFIG"
	fi
	find_exports
	echo "setup: installed libripc $(sed -n 's/^Version: //p' "$libdir/pkgconfig/libripc.pc")" \
		"(library, ripc.h, libripc.pc, ripc_info, ripc_echo, man pages)"
}

# After everything else: how to use the install from this shell.
say_exports() {
	if [ ${#exports[@]} -eq 0 ]; then
		echo "setup: pkg-config, the loader and \$PATH find libripc in $prefix"
		return
	fi
	echo "setup: $prefix is not searched by default; to use libripc from"
	echo "this shell (README.md, \"A first program\"), run:"
	printf '    %s\n' "${exports[@]}"
}

do_demo() {
	export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
	# A private registry, removed afterwards.
	export RIPC_REGISTRY
	RIPC_REGISTRY=$(mktemp -u /tmp/ripc-demo.XXXXXX.reg)
	trap 'rm -f "$RIPC_REGISTRY"' RETURN
	# The first run leaves out the demo's closing "next steps", which
	# the second prints.
	./build/examples/ripc_demo -p shm -q
	echo
	./build/examples/ripc_demo -p tcp
}

case $mode in
deps) do_deps ;;
build) do_build ;;
install) do_build; do_install; say_exports ;;
demo) do_demo ;;
all)
	do_deps
	do_build
	if [ $install = yes ]; then
		do_install
		echo
		do_demo
		echo
		say_exports
	else
		echo "setup: --no-install: nothing installed"
		do_demo
	fi
	;;
esac
