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
#      installed program;
#  (i) the return conventions disagree: man/return-conventions.txt (the one
#      authoritative table) must list every function of include/ripc.h and
#      libripc.map once, with a convention it defines; the table in RETURN
#      CONVENTIONS of ripc(7) must have one row per convention, its phrase
#      and exactly its functions; and the RETURN VALUE section of each
#      function's page must have a sentence that names the function, as
#      "f()", and holds the phrase of its convention.
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

# Plain text of roff source on stdin, line by line: comments dropped, macro
# names, font changes and escapes removed.
plain_lines() {
	sed -e '/^[.'"'"']\\"/d' \
	    -e 's/\\f\[[^]]*\]//g' -e 's/\\f(..//g' -e 's/\\f.//g' \
	    -e 's/\\(..//g' -e 's/\\\[[^]]*\]//g' -e 's/\\[&%|^]//g' \
	    -e 's/\\-/-/g' -e 's/\\e/\\/g' \
	    -e 's/^[.'"'"'][A-Za-z]*[ \t]*//' -e 's/"//g'
}

# The same, everything on one line.
plain() {
	plain_lines | tr '\n' ' '
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

# ---- (i): return conventions ----------------------------------------------
conv=$man/return-conventions.txt
nconv=0
if [ ! -f "$conv" ]; then
	fail "man/return-conventions.txt missing: cannot check return conventions"
else
	# "name<TAB>phrase" and "function<TAB>name", comments and blanks gone.
	sed -e 's/#.*//' -e 's/[ \t]*$//' "$conv" | grep -v '^[ \t]*$' |
		grep '^=' | sed -E 's/^=[ \t]+([a-z0-9_]+)[ \t]+/\1	/' \
		>"$tmp/conv.defs"
	sed -e 's/#.*//' -e 's/[ \t]*$//' "$conv" | grep -v '^[ \t]*$' |
		grep -v '^=' | sed -E 's/^([^ \t]+)[ \t]+/\1	/' \
		>"$tmp/conv.funcs"
	nconv=$(wc -l <"$tmp/conv.defs")
	phrase_of() { # <convention>
		awk -F'\t' -v c="$1" '$1 == c { print $2 }' "$tmp/conv.defs"
	}
	cut -f1 "$tmp/conv.defs" | sort | uniq -d | while read -r c; do
		echo "$c"
	done >"$tmp/conv.dup"
	while read -r c; do
		fail "return-conventions.txt: convention $c defined twice"
	done <"$tmp/conv.dup"
	cut -f1 "$tmp/conv.funcs" | sort | uniq -d >"$tmp/conv.dup"
	while read -r f; do
		fail "return-conventions.txt: $f listed twice"
	done <"$tmp/conv.dup"
	while IFS='	' read -r f c; do
		[ -n "$(phrase_of "$c")" ] ||
			fail "return-conventions.txt: $f has convention '$c'," \
				"which is not defined (no line '= $c ...')"
	done <"$tmp/conv.funcs"
	while IFS='	' read -r c p; do
		grep -q "	$c\$" "$tmp/conv.funcs" ||
			fail "return-conventions.txt: no function has" \
				"convention $c"
	done <"$tmp/conv.defs"

	# Every exported function is listed, and only those.
	cut -f1 "$tmp/conv.funcs" | sort -u >"$tmp/conv.names"
	echo "$functions" | tr ' ' '\n' | grep . | sort -u >"$tmp/hdr.names"
	comm -23 "$tmp/hdr.names" "$tmp/conv.names" | while read -r f; do
		echo "check-man: return-conventions.txt: $f (include/ripc.h)" \
			"is not listed"
	done >"$tmp/conv.out"
	comm -13 "$tmp/hdr.names" "$tmp/conv.names" | while read -r f; do
		echo "check-man: return-conventions.txt: $f is not declared" \
			"in include/ripc.h"
	done >>"$tmp/conv.out"
	if [ -f "$top/libripc.map" ]; then
		sed -n '/global:/,/local:/p' "$top/libripc.map" |
			grep -oE 'ripc_[a-z0-9_]+' | sort -u >"$tmp/map.names"
		comm -23 "$tmp/map.names" "$tmp/conv.names" | while read -r f; do
			echo "check-man: return-conventions.txt: $f" \
				"(exported by libripc.map) is not listed"
		done >>"$tmp/conv.out"
	fi
	if [ -s "$tmp/conv.out" ]; then
		cat "$tmp/conv.out"
		problems=$((problems + $(wc -l <"$tmp/conv.out")))
	fi

	# The table of ripc(7): rows of tab-separated cells between .TS and
	# .TE, a cell being either text or a T{ ... T} block.  Printed as
	# "phrase<TAB>functions" in plain text; the header, rules and empty
	# rows are left out.
	section "$man/man7/ripc.7" "RETURN CONVENTIONS" | awk '
		function flush(  i, out, empty) {
			empty = 1
			for (i = 1; i <= nc; i++)
				if (cells[i] != "" && cells[i] != "_")
					empty = 0
			if (!empty) {
				out = cells[1]
				for (i = 2; i <= nc; i++)
					out = out "\t" cells[i]
				print out
			}
			nc = 0
		}
		/^\.TS/ { tbl = 1; fmt = 1; nc = 0; next }
		/^\.TE/ { tbl = 0; next }
		!tbl { next }
		fmt { if ($0 ~ /\.[ \t]*$/) fmt = 0; next }
		{
			line = $0
			if (block) {
				if (line !~ /^T}/) {
					text = text (text == "" ? "" : " ") line
					next
				}
				cells[++nc] = text
				block = 0
				line = substr(line, 3)
				if (line == "") { flush(); next }
				sub(/^\t/, "", line)
			}
			n = split(line, f, "\t")
			for (i = 1; i <= n; i++) {
				if (f[i] == "T{" && i == n) {
					block = 1
					text = ""
					next
				}
				cells[++nc] = f[i]
			}
			flush()
		}' | plain_lines | sed -e 's/  */ /g' -e 's/^ //' -e 's/ *	 */	/g' |
		grep -v '^Returns	' >"$tmp/conv.table"
	[ -s "$tmp/conv.table" ] ||
		fail "man7/ripc.7: no table (.TS/.TE) in RETURN CONVENTIONS"
	cut -f1 "$tmp/conv.table" | sort | uniq -d >"$tmp/conv.dup"
	while read -r p; do
		fail "man7/ripc.7: RETURN CONVENTIONS has two rows '$p'"
	done <"$tmp/conv.dup"
	while IFS='	' read -r c p; do
		row=$(awk -F'\t' -v p="$p" '$1 == p { print $2 }' \
			"$tmp/conv.table")
		want=$(awk -F'\t' -v c="$c" '$2 == c { print $1 }' \
			"$tmp/conv.funcs" | sort -u | tr '\n' ' ')
		if [ -z "$row" ]; then
			fail "man7/ripc.7: RETURN CONVENTIONS has no row '$p'" \
				"(convention $c: $want)"
			continue
		fi
		have=$(echo "$row" | grep -oE 'ripc_[a-z0-9_]+' | sort -u |
			tr '\n' ' ')
		for f in $want; do
			case " $have" in
			*" $f "*) ;;
			*) fail "man7/ripc.7: RETURN CONVENTIONS row '$p'" \
				"lacks $f (return-conventions.txt)" ;;
			esac
		done
		for f in $have; do
			case " $want" in
			*" $f "*) ;;
			*) fail "man7/ripc.7: RETURN CONVENTIONS row '$p'" \
				"names $f, whose convention is not $c" \
				"(return-conventions.txt)" ;;
			esac
		done
	done <"$tmp/conv.defs"
	cut -f1 "$tmp/conv.table" | while read -r p; do
		cut -f2 "$tmp/conv.defs" | grep -qxF "$p" ||
			echo "check-man: man7/ripc.7: RETURN CONVENTIONS row" \
				"'$p' is not a convention of return-conventions.txt"
	done >"$tmp/conv.out"
	if [ -s "$tmp/conv.out" ]; then
		cat "$tmp/conv.out"
		problems=$((problems + $(wc -l <"$tmp/conv.out")))
	fi

	# Each function's page: a sentence of RETURN VALUE that names f() and
	# holds the phrase.
	while IFS='	' read -r f c; do
		p=$(phrase_of "$c")
		[ -n "$p" ] || continue # reported above
		page=$man/man3/$f.3
		[ -f "$page" ] || continue # reported by (a)
		target=$(alias_target "$page")
		[ -n "$target" ] && page=$man/$target
		[ -f "$page" ] || continue
		section "$page" "RETURN VALUE" | plain |
			sed -e 's/  */ /g' -e 's/ ()/()/g' -e 's/\. /.\n/g' |
			grep -F "$f()" >"$tmp/rv"
		grep -qF "$p" "$tmp/rv" ||
			fail "${page#"$man"/}: RETURN VALUE has no sentence" \
				"saying '$f() return(s) $p' (convention $c of" \
				"man/return-conventions.txt)"
	done <"$tmp/conv.funcs"
fi

if [ $have_groff = no ]; then
	echo "check-man: groff not found: warnings (b) not checked"
fi
ncodes=$(echo ${codes:-} | wc -w)
echo "check-man: $npages pages, $nfunc functions, $nprog programs," \
	"$nvars variables, $ncodes error codes, $nconv return conventions," \
	"$problems problem(s)"
if [ "$problems" -gt 0 ]; then
	exit 1
fi
[ $have_groff = yes ] || exit 77
exit 0
