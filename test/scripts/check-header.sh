#!/bin/sh
# check-header.sh - include/ripc.h compiles on its own in C and C++, and
# defines nothing outside the ripc_/RIPC_ namespace except libRIPC's two
# compatibility constants (RECV_BUF_SIZE, NUM_RECV_BUFFERS).
#
# Macros: those ripc.h adds on top of the system headers it includes.
# Other names (functions, types, enum constants, struct tags): every
# identifier declared at file scope, from the preprocessed header.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${RIPC_SRCDIR:-$here/../..}
hdr=$src/include/ripc.h
cc=${CC:-cc}
cxx=${CXX:-c++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "check-header: $*"; fail=1; }

printf '#include <ripc.h>\nint main(void) { return 0; }\n' >"$tmp/alone.c"
$cc -std=c99 -Wall -Wextra -pedantic -Werror -I"$src/include" -c "$tmp/alone.c" \
	-o "$tmp/a.o" 2>"$tmp/err" || { bad "does not compile alone as C99:"; cat "$tmp/err"; }
cp "$tmp/alone.c" "$tmp/alone.cc"
$cxx -Wall -Wextra -Werror -I"$src/include" -c "$tmp/alone.cc" -o "$tmp/b.o" \
	2>"$tmp/err" || { bad "does not compile alone as C++:"; cat "$tmp/err"; }

# Macros ripc.h defines beyond its system headers.
sys=$(sed -n 's/^#include <\(.*\)>.*/\1/p' "$hdr")
: >"$tmp/sys.c"
for h in $sys; do echo "#include <$h>" >>"$tmp/sys.c"; done
$cc -dM -E "$tmp/sys.c" | sed -n 's/^#define \([A-Za-z_0-9]*\).*/\1/p' | sort -u >"$tmp/m0"
printf '#include <ripc.h>\n' >"$tmp/with.c"
$cc -dM -E -I"$src/include" "$tmp/with.c" |
	sed -n 's/^#define \([A-Za-z_0-9]*\).*/\1/p' | sort -u >"$tmp/m1"
for m in $(comm -13 "$tmp/m0" "$tmp/m1"); do
	case $m in
	RIPC_* | RECV_BUF_SIZE | NUM_RECV_BUFFERS) ;;
	*) bad "defines macro $m outside the RIPC_ namespace" ;;
	esac
done

# File-scope names declared by ripc.h (functions, types, tags, enum
# constants, variables), from clang's AST: every declaration after the
# first one located in ripc.h, up to the end (ripc.h is included last).
if command -v clang >/dev/null 2>&1; then
	clang -Xclang -ast-dump -fsyntax-only -fno-color-diagnostics \
		-I"$src/include" "$tmp/with.c" 2>/dev/null >"$tmp/ast"
	awk '/include\/ripc\.h:/ { on = 1 } on' "$tmp/ast" |
		grep -E '^(\|-|`-)(FunctionDecl|TypedefDecl|EnumDecl|RecordDecl|VarDecl)|EnumConstantDecl' |
		grep -v ' implicit ' |
		awk '{ l = $0; sub(/ \x27.*$/, "", l); sub(/ definition$/, "", l);
			n = split(l, w, " "); print w[n] }' |
		sort -u >"$tmp/names"
	[ -s "$tmp/names" ] || bad "found no declarations (clang output changed?)"
	for n in $(cat "$tmp/names"); do
		case $n in
		ripc_* | RIPC_*) ;;
		*) bad "declares $n outside the ripc_ namespace" ;;
		esac
	done
else
	echo "check-header: clang not found: declarations not checked"
fi

# Names programs commonly define must still be free after the include.
cat >"$tmp/common.c" <<'EOC'
#include <ripc.h>
#define ERROR 1
#define DEBUG 2
#define PACKET_SIZE 3
#define panic(x) (x)
typedef int bool;
static int init(void) { return ERROR + DEBUG + PACKET_SIZE + panic(0); }
int main(void) { bool b = init(); return b; }
EOC
$cc -std=gnu11 -Wall -Werror -I"$src/include" -c "$tmp/common.c" -o "$tmp/c.o" \
	2>"$tmp/err" || { bad "clashes with names programs commonly define:"; cat "$tmp/err"; }

[ "$fail" = 0 ] && echo "check-header: ripc.h is self-contained and stays in its namespace"
exit $fail
