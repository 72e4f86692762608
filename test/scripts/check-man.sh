#!/bin/sh
# check-man.sh - check the libripc man pages (run by `make check`).
#
# Fails, printing every problem, when
#  (a) a function declared in include/ripc.h has no page man/man3/<f>.3
#      (a real page or a one-line ".so" alias to one), an alias points to a
#      missing page, or the page does not name the function in NAME;
#  (b) groff -man -ww (all warnings) warns about any page;
#  (c) a reference in SEE ALSO does not resolve to a page under man/ (or to
#      one of the external pages listed in EXTERNAL_PAGES below), or a
#      reference to a ripc* page anywhere in a page does not resolve;
#  (d) a variable of the table in ripc/env.c is missing from the
#      ENVIRONMENT section of ripc(7);
#  (e) an error code of enum ripc_error is missing from ripc_strerror(3),
#      or the number or the quoted text given there for a code differs from
#      include/ripc.h and the library's table in ripc/errors.c (what
#      ripc_strerror() really returns), the fallback text included;
#  (f) a page is not listed in any Makefile.am / Makefile.inc (so it would
#      not be installed), or contains characters other than ASCII;
#  (g) a real page lacks .TH with its own name and section, or a required
#      section (NAME, DESCRIPTION, SEE ALSO; in man3 also SYNOPSIS and
#      RETURN VALUE; in man1 also SYNOPSIS and OPTIONS);
#  (h) an installed program (bin_PROGRAMS in a Makefile.am / Makefile.inc)
#      has no page man/man1/<program>.1, or a page in man1 documents no
#      installed program.
#
# The sources are found from this script's location (or $RIPC_SRCDIR), so it
# works from a separate build directory.  Exit status: 0 ok, 1 problems,
# 77 (skipped) when groff is missing and nothing else failed.
set -u
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
top=${RIPC_SRCDIR:-$here/../..}
if [ ! -f "$top/include/ripc.h" ] && [ -n "${srcdir:-}" ]; then
	top=$srcdir
fi
top=$(cd "$top" && pwd)
man=$top/man
header=$top/include/ripc.h

if [ ! -f "$header" ] || [ ! -d "$man" ]; then
	echo "check-man: cannot find include/ripc.h and man/ under $top" >&2
	exit 1
fi

# Pages of other projects that SEE ALSO sections may name.  Add a page here
# only when it is referenced on purpose.
EXTERNAL_PAGES="fi_info.1 lstopo.1 fabric.7 fi_shm.7 fi_tcp.7 fi_verbs.7 fi_rxm.7 fi_mr.3
fi_rma.3 fi_msg.3 fi_getinfo.3 fi_cm.3 process_vm_readv.2 process_vm_writev.2
ptrace.2 poll.2 select.2 epoll.7 eventfd.2 getrandom.2 flock.2 fork.2 _exit.2
atexit.3 malloc.3 free.3 rand.3 signal.7 pthreads.7"

problems=0
npages=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

fail() {
	echo "check-man: $*"
	problems=$((problems + 1))
}

# Lines of section $2 (as written after .SH, quotes removed) of page $1.
section() {
	awk -v want="$2" '
		/^\.SH([ \t]|$)/ {
			s = $0
			sub(/^\.SH[ \t]*/, "", s)
			gsub(/"/, "", s)
			insec = (s == want)
			next
		}
		insec { print }
	' "$1"
}

# Plain text of roff source on stdin: comments dropped, macro names, font
# changes and escapes removed, everything on one line.
plain() {
	sed -e '/^[.'"'"']\\"/d' \
	    -e 's/\\f\[[^]]*\]//g' -e 's/\\f(..//g' -e 's/\\f.//g' \
	    -e 's/\\(..//g' -e 's/\\\[[^]]*\]//g' -e 's/\\[&%|^]//g' \
	    -e 's/\\-/-/g' -e 's/\\e/\\/g' \
	    -e 's/^[.'"'"'][A-Za-z]*[ \t]*//' -e 's/"//g' |
		tr '\n' ' '
}

# Name(section) references in plain text on stdin, one "name section" a line.
refs() {
	grep -oE '[A-Za-z_][A-Za-z0-9_.:+-]* *\([1-9][a-z]*\)' |
		sed -e 's/ *(/ /' -e 's/)$//'
}

# The page file a reference resolves to under man/, or nothing.
resolve() {
	f=$man/man$(echo "$2" | sed 's/[a-z]*$//')/$1.$2
	[ -f "$f" ] && echo "$f"
}

# Target of a ".so" alias page, relative to man/; nothing for a real page.
alias_target() {
	sed -n -e '/^[.'"'"']\\"/d' -e 's/^\.so[ \t]*//p' "$1" | head -n 1
}

pages=$(ls "$man"/man[1-9]/*.[1-9]* 2>/dev/null)
makefiles=$(ls "$top"/Makefile.am "$top"/*/Makefile.inc \
	"$top"/*/*/Makefile.inc 2>/dev/null)

# ---- (b) (f) (g): every page -------------------------------------------
have_groff=yes
command -v groff >/dev/null 2>&1 || have_groff=no

for page in $pages; do
	npages=$((npages + 1))
	rel=${page#"$man"/}
	base=$(basename "$page")
	name=${base%.*}
	sec=${base##*.}

	if ! grep -qF "man/$rel" $makefiles /dev/null; then
		fail "$rel: not listed in any Makefile.am or Makefile.inc" \
			"(it would not be installed)"
	fi
	if grep -n "$(printf '[^\t -~]')" "$page" >"$tmp/nonascii"; then
		fail "$rel: characters other than ASCII (use groff escapes):"
		sed 's/^/    line /' "$tmp/nonascii"
	fi

	target=$(alias_target "$page")
	if [ -n "$target" ]; then
		other=$(grep -v -e '^\.so[ \t]' -e '^[.'"'"']\\"' "$page" |
			grep -c .)
		[ "$other" -eq 0 ] ||
			fail "$rel: an alias page must hold only its .so line"
		[ -f "$man/$target" ] ||
			fail "$rel: .so target $target does not exist"
	else
		th=$(grep -m 1 '^\.TH' "$page" | tr -d '"')
		set -- $th
		if [ $# -lt 3 ]; then
			fail "$rel: no .TH line"
		else
			[ "$(echo "$2" | tr 'A-Z' 'a-z')" = "$name" ] ||
				fail "$rel: .TH names '$2', not '$name'"
			[ "$3" = "$sec" ] ||
				fail "$rel: .TH section '$3', not '$sec'"
		fi
		required="NAME|DESCRIPTION|SEE ALSO"
		case $sec in
		1*) required="NAME|SYNOPSIS|DESCRIPTION|OPTIONS|SEE ALSO" ;;
		3*) required="NAME|SYNOPSIS|DESCRIPTION|RETURN VALUE|SEE ALSO" ;;
		esac
		echo "$required" | tr '|' '\n' >"$tmp/required"
		while read -r s; do
			grep -qE "^\.SH[ \t]+\"?$s\"?[ \t]*$" "$page" ||
				fail "$rel: no section $s"
		done <"$tmp/required"
	fi

	# An alias is formatted as its target, which is checked on its own.
	if [ $have_groff = yes ] && [ -z "$target" ]; then
		pre=
		first=$(head -n 1 "$page")
		case $first in
		"'\\\" "*)
			case $first in *t*) pre="$pre -t" ;; esac
			case $first in *e*) pre="$pre -e" ;; esac
			case $first in *p*) pre="$pre -p" ;; esac
			;;
		esac
		(cd "$man" && groff $pre -man -ww -z -Tutf8 "$rel") \
			>"$tmp/groff" 2>&1
		if [ -s "$tmp/groff" ]; then
			fail "$rel: groff -man -ww warns:"
			sed 's/^/    /' "$tmp/groff"
		fi
	fi
done

# ---- (a): a page for every function -------------------------------------
# Declarations of include/ripc.h with comments and preprocessor lines
# removed, as one line.
awk '
	{
		line = $0; out = ""
		while (length(line)) {
			if (incomment) {
				i = index(line, "*/")
				if (!i) { line = ""; break }
				line = substr(line, i + 2); incomment = 0
			} else {
				i = index(line, "/*")
				if (!i) { out = out line; line = ""; break }
				out = out substr(line, 1, i - 1) " "
				line = substr(line, i + 2); incomment = 1
			}
		}
		print out
	}' "$header" | grep -v '^[ \t]*#' | tr '\n' ' ' >"$tmp/decls"

functions=$(grep -oE '[A-Za-z0-9_]+[ \t]*\(' "$tmp/decls" |
	sed 's/[ \t]*($//' | grep '^ripc_' | sort -u)
nfunc=0
for f in $functions; do
	nfunc=$((nfunc + 1))
	page=$man/man3/$f.3
	if [ ! -f "$page" ]; then
		fail "man3/$f.3: missing: $f is declared in include/ripc.h" \
			"(add a page, or an alias '.so man3/<page>.3')"
		continue
	fi
	target=$(alias_target "$page")
	if [ -n "$target" ]; then
		page=$man/$target
		[ -f "$page" ] || continue # reported above
	fi
	section "$page" NAME | plain | tr -c 'A-Za-z0-9_' '\n' |
		grep -qx "$f" ||
		fail "${page#"$man"/}: NAME does not list $f"
done
[ "$nfunc" -gt 0 ] || fail "no functions found in include/ripc.h"

# ---- (h): a page for every installed program -----------------------------
# Names in bin_PROGRAMS assignments (continuation lines included), without
# their directory.
programs=$(awk '
	/^[ \t]*bin_PROGRAMS[ \t]*\+?=/ { sub(/^[^=]*=/, ""); on = 1 }
	on {
		cont = sub(/\\[ \t]*$/, "")
		print
		on = cont
	}' $makefiles /dev/null | tr ' \t' '\n\n' | grep -v '^$' |
	grep -v '^\$' | sed 's|.*/||' | sort -u)
nprog=0
for p in $programs; do
	nprog=$((nprog + 1))
	[ -f "$man/man1/$p.1" ] ||
		fail "man1/$p.1: missing: $p is an installed program" \
			"(bin_PROGRAMS)"
done
for page in $(ls "$man"/man1/*.1 2>/dev/null); do
	p=$(basename "$page" .1)
	case " $(echo $programs) " in
	*" $p "*) ;;
	*) fail "man1/$p.1: no installed program $p (bin_PROGRAMS)" ;;
	esac
done

# ---- (c): references ------------------------------------------------------
for page in $pages; do
	rel=${page#"$man"/}
	[ -n "$(alias_target "$page")" ] && continue
	section "$page" "SEE ALSO" | plain | refs | sort -u >"$tmp/seealso"
	while read -r name sec; do
		[ -n "$(resolve "$name" "$sec")" ] && continue
		case " $(echo $EXTERNAL_PAGES) " in
		*" $name.$sec "*) continue ;;
		esac
		fail "$rel: SEE ALSO $name($sec) is not a page in man/" \
			"(nor listed in EXTERNAL_PAGES of check-man.sh)"
	done <"$tmp/seealso"
	awk '
		/^\.SH([ \t]|$)/ { skip = ($0 ~ /SEE ALSO/) }
		!skip { print }
	' "$page" | plain | refs | grep '^ripc' | sort -u >"$tmp/refs"
	while read -r name sec; do
		[ -n "$(resolve "$name" "$sec")" ] ||
			fail "$rel: reference $name($sec) is not a page in man/"
	done <"$tmp/refs"
done

# ---- (d): environment variables in ripc(7) --------------------------------
envc=$top/ripc/env.c
nvars=0
if [ -f "$envc" ] && [ -f "$man/man7/ripc.7" ]; then
	section "$man/man7/ripc.7" ENVIRONMENT | plain |
		tr -c 'A-Za-z0-9_' '\n' >"$tmp/envdoc"
	for v in $(grep -oE '"RIPC_[A-Z0-9_]+"' "$envc" | tr -d '"' |
		sort -u); do
		nvars=$((nvars + 1))
		grep -qx "$v" "$tmp/envdoc" ||
			fail "man7/ripc.7: ENVIRONMENT does not describe $v" \
				"(declared in ripc/env.c)"
	done
else
	fail "ripc/env.c or man7/ripc.7 missing: cannot check the variables"
fi

# ---- (e): error codes in ripc_strerror(3) ---------------------------------
if [ -f "$man/man3/ripc_strerror.3" ]; then
	plain <"$man/man3/ripc_strerror.3" >"$tmp/errdoc.plain"
	tr -c 'A-Za-z0-9_' '\n' <"$tmp/errdoc.plain" >"$tmp/errdoc"
	codes=$(sed -n '/enum ripc_error/,/}/p' "$tmp/decls" |
		grep -oE 'enum ripc_error[ \t]*\{[^}]*\}' |
		grep -oE 'RIPC_(OK|E[A-Z0-9_]*)' | grep -v '^RIPC_ERROR_MAX$')
	[ -n "$codes" ] || fail "no error codes found in include/ripc.h"
	for c in $codes; do
		grep -qx "$c" "$tmp/errdoc" ||
			fail "man3/ripc_strerror.3: error code $c is not listed"
	done

	# The page quotes the library's texts: they must be the strings of
	# ripc/errors.c, byte for byte, so that what a user greps for in the
	# manual is what the program printed.  Entries of the page look like
	#   .BR RIPC_EINVAL " (1)"
	#   \(lqInvalid argument\(rq
	errc=$top/ripc/errors.c
	if [ -f "$errc" ]; then
		sed -n 's/^[ \t]*\[\(RIPC_[A-Z0-9_]*\)\][ \t]*=[ \t]*"\(.*\)",[ \t]*$/\1 \2/p' \
			"$errc" >"$tmp/errlib"
		awk '
			/^\.BR? RIPC_[A-Z0-9_]+ " \([0-9]+\)"/ {
				code = $2
				num = $0
				sub(/^[^(]*\(/, "", num); sub(/\).*$/, "", num)
				want = 1
				next
			}
			want && /^\\\(lq.*\\\(rq$/ {
				t = $0
				sub(/^\\\(lq/, "", t); sub(/\\\(rq$/, "", t)
				print code, num, t
			}
			{ want = 0 }
		' "$man/man3/ripc_strerror.3" >"$tmp/errman.roff"
		# Roff escapes (\- and the like) in the quoted texts.
		: >"$tmp/errman"
		while read -r c n t; do
			printf '%s %s %s\n' "$c" "$n" "$(echo "$t" | plain |
				sed 's/ *$//')" >>"$tmp/errman"
		done <"$tmp/errman.roff"
		for c in $codes; do
			lib=$(sed -n "s/^$c //p" "$tmp/errlib")
			num=$(grep -oE "$c[ \t]*=[ \t]*[0-9]+" "$tmp/decls" |
				grep -oE '[0-9]+$')
			line=$(grep "^$c " "$tmp/errman")
			if [ -z "$lib" ]; then
				fail "ripc/errors.c: no text for $c" \
					"(expected a line [$c] = \"...\",)"
			elif [ -z "$line" ]; then
				fail "man3/ripc_strerror.3: $c has no entry" \
					".BR $c \" ($num)\" followed by" \
					"\\(lq<text>\\(rq"
			else
				mnum=$(echo "$line" | cut -d' ' -f2)
				mtext=$(echo "$line" | cut -d' ' -f3-)
				[ "$mnum" = "$num" ] ||
					fail "man3/ripc_strerror.3: $c is" \
						"($mnum) there, $num in" \
						"include/ripc.h"
				[ "$mtext" = "$lib" ] ||
					fail "man3/ripc_strerror.3: text of $c" \
						"is \"$mtext\", the library's" \
						"(ripc/errors.c) is \"$lib\""
			fi
		done
		unknown=$(sed -n '/ripc_strerror(int/,/^}/s/.*return "\(.*\)";.*/\1/p' \
			"$errc")
		[ -n "$unknown" ] && ! grep -qF "$unknown" "$tmp/errdoc.plain" &&
			fail "man3/ripc_strerror.3: does not quote the text" \
				"\"$unknown\" for an unknown code (ripc/errors.c)"
	else
		fail "ripc/errors.c missing: cannot check the error texts"
	fi
fi

if [ $have_groff = no ]; then
	echo "check-man: groff not found: warnings (b) not checked"
fi
ncodes=$(echo ${codes:-} | wc -w)
echo "check-man: $npages pages, $nfunc functions, $nprog programs," \
	"$nvars variables, $ncodes error codes, $problems problem(s)"
if [ "$problems" -gt 0 ]; then
	exit 1
fi
[ $have_groff = yes ] || exit 77
exit 0
