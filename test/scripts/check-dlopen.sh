#!/bin/sh
# check-dlopen.sh - the built libripc works when loaded with dlopen() (run
# by `make check`).
#
# The library registers an exit handler (on_exit) and runs threads of
# its own; unmapped by dlclose(), it crashed the process at exit, so it
# is linked with -z nodelete (Makefile.am).  Its thread-local variables
# use the initial-exec TLS model (RIPC_TLS, ripc/ripc_int.h): loaded with
# dlopen(), it takes them from the static TLS glibc keeps in reserve, and
# dlopen() fails ("cannot allocate memory in static TLS block") if they
# do not fit.
# Language bindings (Python's ctypes, JNI) load libripc so.  The program
# dlopen()s ./.libs/libripc.so.0 of the build directory, registers a
# service, sends itself a short message over shm, receives it (a thread
# that waits uses its thread-local waiter), reads the thread's last error,
# finalizes, dlclose()s and exits (where it crashed).  Exit 77 (skipped)
# where no shared library was built (the sanitizer builds are static).
set -u
lib=${1:-$PWD/.libs/libripc.so.0}
[ -f "$lib" ] || { echo "check-dlopen: no $lib (static build): skipped"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
src=${RIPC_SRCDIR:-$here/../..}
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/dl.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ripc.h>

#define SYM(name) typeof(&name) p_##name = (typeof(&name))dlsym(h, #name)

int main(int argc, char **argv)
{
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);

	(void)argc;
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	SYM(ripc_register_random_service_id);
	SYM(ripc_send_short);
	SYM(ripc_receive_timeout);
	SYM(ripc_buf_free);
	SYM(ripc_last_error);
	SYM(ripc_finalize);
	if (!p_ripc_register_random_service_id || !p_ripc_send_short ||
	    !p_ripc_receive_timeout || !p_ripc_buf_free ||
	    !p_ripc_last_error || !p_ripc_finalize) {
		printf("dlsym: a public function is missing\n");
		return 1;
	}
	uint16_t me = p_ripc_register_random_service_id(), ns = 0;
	void *b[1] = { "hello" }, **si = NULL;
	uint32_t l[1] = { 6 }, *ss = NULL;
	int r;

	if (me == RIPC_INVALID_SERVICE_ID) {
		printf("register: error %d\n", p_ripc_last_error());
		return 1;
	}
	r = p_ripc_send_short(me, me, b, l, 1, NULL, NULL, 0);
	if (!r)
		r = p_ripc_receive_timeout(me, NULL, &si, &ss, &ns, NULL, NULL,
					   NULL, 5000);
	if (r || ns != 1 || strcmp(si[0], "hello")) {
		printf("send to itself: error %d\n", r);
		return 1;
	}
	p_ripc_buf_free(si[0]);
	free(si);
	free(ss);
	/* The thread's last error: a receive on a service it does not hold. */
	p_ripc_receive_timeout((uint16_t)(me ^ 1), NULL, NULL, NULL, NULL, NULL,
			       NULL, NULL, 0);
	if (p_ripc_last_error() != RIPC_ENOTOWNER) {
		printf("last error %d, want RIPC_ENOTOWNER\n",
		       p_ripc_last_error());
		return 1;
	}
	p_ripc_finalize();
	if (dlclose(h)) {
		printf("dlclose: %s\n", dlerror());
		return 1;
	}
	printf("loaded with dlopen, sent and received, finalized\n");
	return 0;
}
EOF
$cc -std=gnu11 -Wall -Werror -I"$src/include" "$tmp/dl.c" -o "$tmp/dl" -ldl \
	2>"$tmp/err" || { echo "check-dlopen: does not compile:"; cat "$tmp/err"; exit 1; }
RIPC_PROVIDER=shm RIPC_RESOLVER=0 RIPC_REGISTRY="$tmp/reg" \
	timeout 60 "$tmp/dl" "$lib"
