#!/usr/bin/env bash
# setup.sh - install what is missing, build, and run the demo.
#
#   scripts/setup.sh            everything (deps, build, demo)
#   scripts/setup.sh --deps     only install missing Debian packages
#   scripts/setup.sh --build    only (re)build in ./build
#   scripts/setup.sh --demo     only run the demo
#
# Debian 12 packages only; installing needs root (or sudo).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

# Build and test dependencies (Debian package names).
PKGS=(gcc g++ make autoconf automake libtool pkg-config
      libfabric-dev libfabric-bin libhwloc-dev libcriterion-dev
      groff-base man-db iproute2 procps gnuplot-nox valgrind
      clang libclang-rt-14-dev
      libzmq3-dev libnng-dev ucx-utils)

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
	if [ ! -f build/Makefile ] || [ configure -nt build/Makefile ]; then
		(cd build && ../configure --enable-silent-rules)
	fi
	make -C build -j"$(nproc)"
}

do_demo() {
	export FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
	# A private registry, removed afterwards.
	export RIPC_REGISTRY
	RIPC_REGISTRY=$(mktemp -u /tmp/ripc-demo.XXXXXX.reg)
	trap 'rm -f "$RIPC_REGISTRY"' RETURN
	./build/examples/ripc_demo -p shm
	echo
	./build/examples/ripc_demo -p tcp
}

case "${1:-all}" in
--deps) do_deps ;;
--build) do_build ;;
--demo) do_demo ;;
all) do_deps; do_build; do_demo ;;
*) sed -n '2,9p' "$0"; exit 2 ;;
esac
