#!/bin/sh
# check-env.sh - check the RIPC_* environment variables (run by `make check`).
#
# The rule (DESIGN.md section 7, ripc/env.h): every RIPC_* variable the
# library reads is declared once, in the table of ripc/env.c, with a
# default and a help text, is read through that table, and is listed by
# `ripc_info -e`.  Fails, printing every problem, when
#  (a) the table and enum ripc_env_id of ripc/env.h disagree: an enum
#      constant RIPC_ENV_<X> without the entry [RIPC_ENV_<X>] = { "RIPC_<X>",
#      or the other way round;
#  (b) the library, its tools or its examples (ripc/, prov/, include/,
#      tools/, examples/) name a RIPC_* variable in a string (getenv,
#      setenv, a message) that is not declared, unless the name is a C
#      identifier of the library's headers (an error code, a limit);
#  (c) code of the library (ripc/, prov/) reads a RIPC_* variable with
#      getenv() itself instead of through ripc__env_str() and friends;
#  (d) tests and scripts (test/, scripts/) pass a RIPC_* variable to the
#      library (shell: NAME=value, export NAME, unset NAME; C: setenv,
#      unsetenv, putenv, getenv) that is not declared; a misspelt variable
#      would silently do nothing.  Variables of the test harness itself are
#      exempt when their names start with one of HARNESS_PREFIXES;
#  (e) `ripc_info -e` does not list every declared variable with its
#      declared default, or lists one that is not declared.
#
# The sources are found from this script's location (or $RIPC_SRCDIR);
# ripc_info is ./tools/ripc_info of the current (build) directory, or
# $RIPC_INFO.  Exit status: 0 ok, 1 problems.
set -u
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
top=${RIPC_SRCDIR:-$here/../..}
if [ ! -f "$top/ripc/env.c" ] && [ -n "${srcdir:-}" ]; then
	top=$srcdir
fi
top=$(cd "$top" && pwd)
envc=$top/ripc/env.c
envh=$top/ripc/env.h
info=${RIPC_INFO:-./tools/ripc_info}

# Variables of the test harness (never read by the library).
HARNESS_PREFIXES="RIPC_TEST_ RIPC_FUZZ_ RIPC_VG_ RIPC_BENCH_ RIPC_SRCDIR
RIPC_INFO"

if [ ! -f "$envc" ] || [ ! -f "$envh" ]; then
	echo "check-env: cannot find ripc/env.c and ripc/env.h under $top" >&2
	exit 1
fi

problems=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-env.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

fail() {
	echo "check-env: $*"
	problems=$((problems + 1))
}

in_list() { # in_list <word> <file with one word a line>
	grep -qxF "$1" "$2"
}

# String literals of C files (one a line), with character constants such
# as '"' removed first so they do not open a string.
c_strings() {
	sed -e "s/'\\\\.'//g" -e "s/'[^'\\\\]'//g" "$@" |
		grep -oE '"([^"\\]|\\.)*"'
}

# ---- the declarations ------------------------------------------------------
# Entries of the table: "RIPC_ENV_X RIPC_X default" (default may be empty).
id='\(RIPC_ENV_[A-Z0-9_]*\)'
name='"\(RIPC_[A-Z0-9_]*\)"'
def='"\([^"]*\)"'
sed -n "s/^[ \t]*\\[$id\\][ \t]*=[ \t]*{[ \t]*$name,[ \t]*$def.*/\\1 \\2 \\3/p" \
	"$envc" >"$tmp/table"
cut -d' ' -f2 "$tmp/table" | sort >"$tmp/declared"
# Every "RIPC_..." name given as a string anywhere in env.c: an entry the
# pattern above did not understand would show up here.
c_strings "$envc" | grep -oE '^"RIPC_[A-Z0-9_]+"$' | tr -d '"' | sort -u \
	>"$tmp/envc_names"
ndecl=$(grep -c . "$tmp/declared")
[ "$ndecl" -gt 0 ] || fail "no variables found in the table of ripc/env.c"
sort "$tmp/declared" | uniq -d | while read -r v; do
	echo "check-env: $v is declared twice in ripc/env.c"
done | grep . && problems=$((problems + 1))
comm -13 "$tmp/declared" "$tmp/envc_names" | while read -r v; do
	echo "check-env: ripc/env.c: cannot read the entry of $v (write it" \
		"as [RIPC_ENV_<X>] = { \"RIPC_<X>\", \"default\", on one line)"
done | grep . && problems=$((problems + 1))

# ---- (a) enum and table agree -----------------------------------------------
sed -n '/enum ripc_env_id/,/}/p' "$envh" | grep -oE 'RIPC_ENV_[A-Z0-9_]+' |
	grep -vx RIPC_ENV_COUNT | sort -u >"$tmp/enum"
while read -r id name def; do
	[ "RIPC_ENV_${name#RIPC_}" = "$id" ] ||
		fail "ripc/env.c: entry [$id] declares $name" \
			"(want RIPC_${id#RIPC_ENV_})"
	in_list "$id" "$tmp/enum" ||
		fail "ripc/env.c: $id is not in enum ripc_env_id (ripc/env.h)"
done <"$tmp/table"
cut -d' ' -f1 "$tmp/table" | sort -u >"$tmp/table_ids"
for id in $(comm -23 "$tmp/enum" "$tmp/table_ids"); do
	fail "ripc/env.h: $id has no entry in the table of ripc/env.c"
done

# ---- (b) (c) the library, tools and examples --------------------------------
# C identifiers named RIPC_* in the headers (error codes, limits, ...).
cat "$top"/include/*.h "$top"/ripc/*.h "$top"/prov/*/*.h 2>/dev/null |
	grep -oE 'RIPC_[A-Z0-9_]+' | sort -u >"$tmp/identifiers"
nfiles=0
for f in $(find "$top/ripc" "$top/prov" "$top/include" "$top/tools" \
	"$top/examples" -name '*.[ch]' 2>/dev/null | sort); do
	rel=${f#"$top"/}
	nfiles=$((nfiles + 1))
	[ "$rel" = ripc/env.c ] && continue
	for v in $(c_strings "$f" | grep -oE 'RIPC_[A-Z0-9_]+' | sort -u); do
		in_list "$v" "$tmp/declared" && continue
		in_list "$v" "$tmp/identifiers" && continue
		fail "$rel: names $v, which is not declared in ripc/env.c"
	done
	case $rel in
	ripc/* | prov/*)
		if grep -nE '(secure_)?getenv[ \t]*\([ \t]*"RIPC_' "$f" \
			>"$tmp/direct"; then
			fail "$rel: reads RIPC_* variables with getenv();" \
				"use ripc__env_str() (ripc/env.h):"
			sed 's/^/    line /' "$tmp/direct"
		fi
		;;
	esac
done

# ---- (d) tests and scripts ------------------------------------------------
harness() { # is $1 a variable of the test harness?
	for p in $HARNESS_PREFIXES; do
		case $1 in "$p"*) return 0 ;; esac
	done
	return 1
}
check_used() { # check_used <file> <names...>
	file=$1
	shift
	for v in $(printf '%s\n' "$@" | sort -u); do
		in_list "$v" "$tmp/declared" && continue
		harness "$v" && continue
		fail "${file#"$top"/}: passes $v to the library, but it is not" \
			"declared in ripc/env.c (a harness variable needs a" \
			"prefix of HARNESS_PREFIXES in check-env.sh)"
	done
}
# Shell: NAME=..., export NAME, unset NAME.  C: the *env() functions.
sh_use='(^|[^A-Za-z0-9_$]|export[ \t]+|unset[ \t]+)RIPC_[A-Z0-9_]+(=|[ \t]|$)'
c_use='(set|unset|get|secure_get|put)env[ \t]*\([ \t]*"RIPC_[A-Z0-9_]+'
for f in $(find "$top/test" "$top/scripts" -type f \
	\( -name '*.sh' -o -name '*.c' -o -name '*.h' \) 2>/dev/null | sort); do
	nfiles=$((nfiles + 1))
	case $f in
	*.sh)
		names=$(grep -v '^[ \t]*#' "$f" | grep -oE "$sh_use" |
			grep -E '(=|export|unset)' | grep -v '==' |
			grep -oE 'RIPC_[A-Z0-9_]+')
		;;
	*)
		names=$(grep -oE "$c_use" "$f" | grep -oE 'RIPC_[A-Z0-9_]+')
		;;
	esac
	[ -n "$names" ] && check_used "$f" $names
done

# ---- (e) ripc_info -e -----------------------------------------------------
if [ ! -x "$info" ]; then
	fail "$info not found or not executable (build it, or set RIPC_INFO)"
elif ! "$info" -e >"$tmp/info" 2>"$tmp/info.err"; then
	fail "$info -e failed:"
	sed 's/^/    /' "$tmp/info.err"
else
	sed -n 's/^env\.\(RIPC_[A-Z0-9_]*\)\.default:.*/\1/p' "$tmp/info" |
		sort >"$tmp/listed"
	for v in $(comm -23 "$tmp/declared" "$tmp/listed"); do
		fail "ripc_info -e does not list $v (declared in ripc/env.c)"
	done
	for v in $(comm -13 "$tmp/declared" "$tmp/listed"); do
		fail "ripc_info -e lists $v, which is not declared in" \
			"ripc/env.c"
	done
	while read -r id name def; do
		line=$(grep -m 1 "^env\\.$name\\.default:" "$tmp/info") ||
			continue
		got=${line#*:}
		got=${got# }
		[ "$got" = "$def" ] ||
			fail "ripc_info -e: $name default '$got', declared '$def'"
		grep -q "^env\\.$name\\.help: ..........*" "$tmp/info" ||
			fail "ripc_info -e: $name has no help text"
	done <"$tmp/table"
fi

# ---- (f) a value set in the environment reaches what ripc_info shows ----
# (transport.NAME.rma_chunk comes from RIPC_READ_CHUNK when it is set.)
if [ -x "$info" ]; then
	RIPC_READ_CHUNK=1m "$info" >"$tmp/info.rc" 2>/dev/null
	grep -q '^transport\.[a-z]*\.rma_chunk: ' "$tmp/info.rc" ||
		fail "ripc_info shows no transport.NAME.rma_chunk"
	for line in $(sed -n 's/^transport\.\([a-z]*\)\.rma_chunk: \(.*\)/\1=\2/p' \
		"$tmp/info.rc"); do
		[ "${line#*=}" = 1048576 ] ||
			fail "ripc_info with RIPC_READ_CHUNK=1m: ${line%%=*}'s" \
				"rma_chunk is ${line#*=}, not 1048576"
	done
fi

echo "check-env: $ndecl variables, $nfiles files, $problems problem(s)"
[ "$problems" -eq 0 ]
