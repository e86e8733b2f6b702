# The build (warnings, hardening, rebuilds when the flags change), make install, and the man
# page (a real manual page that documents exactly what --help prints).
bats_require_minimum_version 1.5.0
load lib/helpers

MAN_SRC="$REPO_DIR/doc/sandbox-mcp.1"

# clean_env [VAR=VALUE...] COMMAND...: COMMAND with none of the caller's build settings (the
# suite may run under `make SANITIZE=... test`, whose variables reach sub-makes in MAKEFLAGS).
clean_env() {
	env -u SANITIZE -u CFLAGS -u CPPFLAGS -u LDFLAGS -u HARDEN -u CC -u WERROR -u CI -u BUILD \
		-u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PREFIX -u DESTDIR -u BINDIR -u MANDIR "$@"
}

# mk ARGS...: make in this checkout, with none of the caller's build settings.
mk() {
	clean_env make -C "$REPO_DIR" --no-print-directory "$@"
}

need() {
	command -v "$1" >/dev/null 2>&1 || skip_or_fail "$1 is not installed (scripts/deps.sh test installs it)"
}

# build NAME [MAKE VARIABLES...]: a fresh build of this checkout into $BATS_FILE_TMPDIR/NAME,
# made once per file; its directory in $dir. Fails with the compiler's output.
build() {
	local name=$1
	shift
	dir="$BATS_FILE_TMPDIR/$name"
	[ -f "$dir/.built" ] && return 0
	run mk -s BUILD="$dir" "$@"
	if [ "$status" -ne 0 ] || [ -n "$output" ]; then
		echo "make BUILD=$dir $* (status $status) said:" >&2
		printf '%s\n' "$output" >&2
		return 1
	fi
	touch "$dir/.built"
}

# imports FILE: the undefined symbols FILE needs (dynamic ones for an executable).
imports() {
	case $1 in
	*.o) nm --undefined-only "$1" ;;
	*) nm -D --undefined-only "$1" ;;
	esac | awk '{print $NF}' | sed 's/@.*//' | sort -u
}

# hardened_elf FILE: a position-independent executable with full RELRO (read-only relocations,
# every symbol bound at start-up).
hardened_elf() {
	local h l d
	h=$(readelf -h "$1") l=$(readelf -l "$1") d=$(readelf -d "$1")
	grep -Eq 'Type: +DYN ' <<<"$h" || { echo "$1 is not PIE:" >&2; grep Type <<<"$h" >&2; return 1; }
	grep -q 'GNU_RELRO' <<<"$l" || { echo "$1 has no GNU_RELRO segment" >&2; return 1; }
	grep -Eq '\(FLAGS\) +.*BIND_NOW|\(FLAGS_1\) +Flags: .*NOW' <<<"$d" ||
		{ echo "$1 is not bound now:" >&2; grep FLAGS <<<"$d" >&2; return 1; }
}

# protected FILE: its code calls the stack protector and fortify's checked functions.
protected() {
	local imp
	imp=$(imports "$1")
	grep -qx '__stack_chk_fail' <<<"$imp" || { echo "$1: no stack protector (__stack_chk_fail)" >&2; return 1; }
	grep -Eqx '__[a-z0-9_]+_chk' <<<"$(grep -vx '__stack_chk_fail' <<<"$imp")" ||
		{ echo "$1: no fortified call (__*_chk)" >&2; return 1; }
}

# hardened DIR: the server and the static agent of the build in DIR, both hardened.
hardened() {
	hardened_elf "$1/sandbox-mcp"
	protected "$1/sandbox-mcp"
	readelf -l "$1/sandbox-mcp" | grep -q 'INTERP'
	# The agent is static (no interpreter) and stripped; its object shows what its code calls.
	hardened_elf "$1/sandbox-agent"
	run ! grep -q INTERP <<<"$(readelf -l "$1/sandbox-agent")"
	protected "$1/agent/sandbox-agent.o"
	"$1/sandbox-mcp" --version
}

@test "build: gcc builds the server and the agent warning-free with -Werror, hardened by default" {
	need gcc
	build gcc CC=gcc WERROR=1
	hardened "$dir"
}

@test "build: clang builds the server and the agent warning-free with -Werror, hardened by default" {
	need clang
	build clang CC=clang WERROR=1
	hardened "$dir"
}

@test "build: HARDEN=0 leaves the hardening flags out" {
	need gcc
	build harden0 CC=gcc WERROR=1 HARDEN=0
	# Not one of the flags in any command (what the compiler does by default is its own).
	run mk -n BUILD="$BATS_TEST_TMPDIR/harden0" CC=gcc WERROR=1 HARDEN=0
	[ "$status" -eq 0 ]
	[[ "$output" == *" -c -o "* ]]
	run ! grep -E -- '-fstack-protector|_FORTIFY_SOURCE|-fPIE|-pie|-z,now|-static-pie' <<<"$output"
	# The agent is a plain static executable, which the checks above refuse.
	grep -Eq 'Type: +EXEC ' <<<"$(readelf -h "$dir/sandbox-agent")"
	run ! hardened_elf "$dir/sandbox-agent"
	"$dir/sandbox-mcp" --version
}

@test "build: CFLAGS=-O0 builds without fortify, which needs optimisation, and keeps the rest" {
	need gcc
	need clang
	build o0-clang CC=clang WERROR=1 CFLAGS="-O0 -g"
	local imp
	imp=$(imports "$dir/sandbox-mcp")
	run ! grep -Eq '^__[a-z0-9_]+_chk$' <<<"$(grep -vx '__stack_chk_fail' <<<"$imp")"
	grep -qx "__stack_chk_fail" <<<"$imp"
	hardened_elf "$dir/sandbox-mcp"
	# The agent is always optimised for size, so it keeps fortify.
	protected "$dir/agent/sandbox-agent.o"
	# gcc, without -Werror (its -O0 format-truncation analysis is not the point here): no
	# "_FORTIFY_SOURCE requires compiling with optimization" warning.
	run mk -s BUILD="$BATS_TEST_TMPDIR/o0-gcc" CC=gcc CFLAGS=-O0
	[ "$status" -eq 0 ]
	[[ "$output" != *_FORTIFY_SOURCE* ]]
	"$BATS_TEST_TMPDIR/o0-gcc/sandbox-mcp" --version
}

@test "build: a sanitizer build works with the hardening, without fortify" {
	need gcc
	build san CC=gcc WERROR=1 SANITIZE=address,undefined
	local imp
	imp=$(imports "$dir/sandbox-mcp")
	grep -q '^__asan_' <<<"$imp"
	run ! grep -Eq '^__[a-z0-9_]+_chk$' <<<"$(grep -vx '__stack_chk_fail' <<<"$imp")"
	hardened_elf "$dir/sandbox-mcp"
	hardened_elf "$dir/sandbox-agent"
	run "$dir/sandbox-mcp" --version
	[ "$status" -eq 0 ]
	[[ "$output" == "sandbox-mcp "* ]]
}

@test "build: changing CC, CPPFLAGS, CFLAGS, LDFLAGS, SANITIZE, HARDEN or WERROR rebuilds everything" {
	need gcc
	build gcc CC=gcc WERROR=1
	# Nothing changed: nothing to do.
	mk -q BUILD="$dir" CC=gcc WERROR=1
	local srcs change src n
	srcs=$(cd "$REPO_DIR" && ls src/*.c src/*/*.c backends/*.c backends/*/*.c agent/*.c)
	n=$(wc -l <<<"$srcs")
	[ "$n" -ge 20 ]
	for change in CC=clang CPPFLAGS=-DSANDBOX_X=1 CFLAGS=-O1 LDFLAGS=-Wl,-O1 SANITIZE=undefined HARDEN=0 WERROR=; do
		run mk -q BUILD="$dir" CC=gcc WERROR=1 "$change"
		[ "$status" -eq 1 ] || { echo "$change: make -q says up to date ($status)" >&2; return 1; }
		run mk -n BUILD="$dir" CC=gcc WERROR=1 "$change"
		[ "$status" -eq 0 ]
		for src in $srcs; do
			grep -qF -- "-o $dir/${src%.c}.o $src" <<<"$output" ||
				{ echo "$change does not recompile $src:" >&2; printf '%s\n' "$output" >&2; return 1; }
		done
		grep -qF -- "-o $dir/sandbox-mcp " <<<"$output"
	done
	# The same through the environment.
	run clean_env CFLAGS=-O1 make -C "$REPO_DIR" -q BUILD="$dir" CC=gcc WERROR=1
	[ "$status" -eq 1 ]
}

@test "install: DESTDIR and PREFIX place the binary and the man page; uninstall removes both" {
	need gcc
	build gcc CC=gcc WERROR=1
	local d="$BATS_TEST_TMPDIR/root"
	mk -s BUILD="$dir" CC=gcc WERROR=1 install DESTDIR="$d" PREFIX=/opt/sbx
	[ "$(cd "$d" && find . -type f -printf '%P %m\n' | sort)" = "opt/sbx/bin/sandbox-mcp 755
opt/sbx/share/man/man1/sandbox-mcp.1 644" ]
	cmp "$d/opt/sbx/share/man/man1/sandbox-mcp.1" "$MAN_SRC"
	cmp "$d/opt/sbx/bin/sandbox-mcp" "$dir/sandbox-mcp"
	mk -s BUILD="$dir" CC=gcc WERROR=1 uninstall DESTDIR="$d" PREFIX=/opt/sbx
	[ -z "$(find "$d" -type f)" ]
	# The default prefix.
	mk -s BUILD="$dir" CC=gcc WERROR=1 install DESTDIR="$d"
	[ -x "$d/usr/local/bin/sandbox-mcp" ]
	[ -f "$d/usr/local/share/man/man1/sandbox-mcp.1" ]
	"$d/usr/local/bin/sandbox-mcp" --version
}

@test "install-apparmor: writes the profile under DESTDIR naming the installed path, and loads nothing there" {
	need gcc
	build gcc CC=gcc WERROR=1
	local d="$BATS_TEST_TMPDIR/root" fake="$BATS_TEST_TMPDIR/fakebin"
	# An apparmor_parser that only records that it ran: with DESTDIR it must not.
	mkdir -p "$fake"
	printf '#!/bin/sh\necho "$@" >> "%s/parser-ran"\n' "$BATS_TEST_TMPDIR" > "$fake/apparmor_parser"
	chmod +x "$fake/apparmor_parser"
	PATH="$fake:$PATH" mk -s BUILD="$dir" CC=gcc WERROR=1 install-apparmor DESTDIR="$d" PREFIX=/opt/sbx
	[ ! -e "$BATS_TEST_TMPDIR/parser-ran" ]
	local p="$d/etc/apparmor.d/sandbox-mcp"
	[ "$(stat -c %a "$p")" = 644 ]
	grep -qx 'profile sandbox-mcp /opt/sbx/bin/sandbox-mcp flags=(unconfined) {' "$p"
	run ! grep -q '@BIN@' "$p"
	[ -x "$d/opt/sbx/bin/sandbox-mcp" ]
	[ -f "$d/opt/sbx/share/man/man1/sandbox-mcp.1" ]
	PATH="$fake:$PATH" mk -s BUILD="$dir" CC=gcc WERROR=1 uninstall DESTDIR="$d" PREFIX=/opt/sbx
	[ -z "$(find "$d" -type f)" ]
	[ ! -e "$BATS_TEST_TMPDIR/parser-ran" ]
}

# man_text: the man page rendered as plain text, with lines long enough not to wrap.
man_text() {
	groff -man -Tascii -P-cbou -rLL=300n "$MAN_SRC"
}

# man_section NAME: the rendered text of one section.
man_section() {
	man_text | awk -v s="$1" '/^[A-Z]/ {on = ($0 == s); next} on'
}

@test "man page: renders with groff without a warning" {
	need groff
	run groff -man -Tutf8 -ww -z "$MAN_SRC"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	if command -v man >/dev/null 2>&1; then
			# Its warnings go to stderr; the page to stdout.
		run bash -c 'man --warnings -l "$1" 2>&1 >/dev/null' _ "$MAN_SRC"
		[ "$status" -eq 0 ]
		[ -z "$output" ]
	fi
}

@test "man page: has the sections of a manual page, in order, and names the installed version" {
	need groff
	local heads
	heads=$(man_text | grep -E '^[A-Z][A-Z ]+$' | tr '\n' '|')
	[ "$heads" = "NAME|SYNOPSIS|DESCRIPTION|OPTIONS|ENVIRONMENT|FILES|EXIT STATUS|EXAMPLES|SEE ALSO|" ]
	[[ "$(man_section NAME)" =~ ^\ +sandbox-mcp\ -\ [a-zA-Z] ]]
	grep -qE '^\.TH SANDBOX-MCP 1 [0-9]{4}-[0-9]{2}-[0-9]{2} "'"$("$SANDBOX_MCP" --version)"'"' "$MAN_SRC"
}

@test "man page: documents every option --help prints, with its variable and default, and no other" {
	need groff
	local help opts entries flag env def block header_flags
	help=$("$SANDBOX_MCP" --help)
	opts=$(man_section OPTIONS)
	# Each entry: its header line (indent 7) and its text (indent 14), joined on one line.
	entries=$(awk '/^       -/ {if (e) print e; e = $0; next} /^              / && e {sub(/^ +/, ""); e = e " " $0; next} /^$/ {next} {if (e) print e; e = ""} END {if (e) print e}' <<<"$opts")
	[ "$(wc -l <<<"$entries")" -ge 28 ]
	# Every flag and short flag --help prints, in an entry's header.
	header_flags=$(sed -E 's/^ +//; s/^((-[a-zA-Z], )?--[a-z-]+(, --[a-z-]+)?).*/\1/' <<<"$entries" | grep -oE -- '--?[a-zA-Z][a-z-]*' | sort -u)
	for flag in $(grep -oE -- '^ +(-[a-zA-Z], )?--[a-z-]+' <<<"$help" | grep -oE -- '--?[a-zA-Z][a-z-]*' | sort -u); do
		grep -qx -- "$flag" <<<"$header_flags" || { echo "the man page has no entry for $flag" >&2; return 1; }
	done
	# ... and none that --help does not know (--no-X is the negation of a boolean --X).
	for flag in $header_flags; do
		grep -qE -- "(^| )${flag/#--no-/--}( |,|$)" <<<"$help" || { echo "--help does not know $flag" >&2; return 1; }
	done
	# Each option's variable and default, as --help gives them.
	local n=0
	while read -r flag env def; do
		n=$((n + 1))
		block=$(grep -E -- "^ +$flag( |,|$)" <<<"$entries")
		[ -n "$block" ] || { echo "no entry for $flag" >&2; return 1; }
		if [ "$def" = "(none)" ]; then
			[[ "$block" == *"Variable: $env; default: "?* ]]
		else
			[[ "$block" == *"Variable: $env; default: $def." ]] ||
				{ echo "$flag: expected 'Variable: $env; default: $def.' in: $block" >&2; return 1; }
		fi
	done < <(awk '/^ +--[a-z-]+/ {f = $1} /^ +env SANDBOX_[A-Z_]+, default / {d = $0; sub(/.*, default /, "", d); v = $2; sub(/,$/, "", v); print f, v, d}' <<<"$help")
	[ "$n" -eq "$(grep -c 'env SANDBOX_' <<<"$help")" ]
}

@test "man page and --help: name every variable besides the options that the server reads" {
	need groff
	local help envsec vars v
	help=$("$SANDBOX_MCP" --help)
	envsec=$(man_section ENVIRONMENT)
	# What the sources read (the options' SANDBOX_* variables are checked above).
	vars=$(cd "$REPO_DIR" && grep -ohE 'getenv\("[A-Z_]+"\)' src/*.c src/*/*.c backends/*.c backends/*/*.c |
		sed -E 's/getenv\("(.*)"\)/\1/' | grep -v '^SANDBOX_' | sort -u)
	for v in DAYTONA_API_KEY DAYTONA_API_URL DAYTONA_TARGET DOCKER_HOST TMPDIR; do
		grep -qx "$v" <<<"$vars"
	done
	for v in $vars; do
		grep -qw -- "$v" <<<"$help" || { echo "--help does not name $v" >&2; return 1; }
		grep -qw -- "$v" <<<"$envsec" || { echo "the man page's ENVIRONMENT does not name $v" >&2; return 1; }
	done
	# The default Daytona URL both give is the client's.
	local url
	url=$(sed -n 's/^#define DT_DEFAULT_API_URL "\(.*\)"$/\1/p' "$REPO_DIR/backends/daytona/rest.h")
	[[ "$url" == https://* ]]
	grep -qF "default $url" <<<"$help"
	grep -qF "default $url" <<<"$envsec"
	# Each of those has a line of its own in --help's environment section.
	for v in DAYTONA_API_KEY DAYTONA_API_URL DAYTONA_TARGET DOCKER_HOST TMPDIR; do
		grep -qE "^  $v +[a-zA-Z]" <<<"$help" || { echo "--help has no line for $v" >&2; return 1; }
	done
}

@test "man page: its hand-run example answers the tool call" {
	need groff
	local script
	script=$(man_section EXAMPLES | awk '/^ +\{ echo/ {on = 1} on {print} on && /\| sandbox-mcp/ {exit}')
	[[ "$script" == *'"tools/call"'* ]]
	run env PATH="$(dirname "$SANDBOX_MCP"):$PATH" bash -c "$script"
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | jq -c 'select(.id == 2) | .result.structuredContent.exit_code')" = 0 ]
	[[ "$(printf '%s\n' "$output" | jq -r 'select(.id == 2) | .result.structuredContent.stdout')" == Linux\ * ]]
}

@test "man page: its Claude Code example is the README's command" {
	need groff
	local cmd
	cmd=$(man_section EXAMPLES | awk '/^ +claude mcp add / {on = 1} on {print} on && !/\\$/ {exit}' |
		sed -E 's/^ +//; s/ *\\$//' | tr '\n' ' ' | sed 's/ $//')
	[[ "$cmd" == "claude mcp add "* ]]
	[ "$cmd" = "$(grep -E '^claude mcp add ' "$REPO_DIR/README.md")" ]
}

@test "the Daytona API key's copies are wiped by calls the compiler keeps" {
	# A memset of memory about to be freed is a dead store the compiler may drop; the wipe must
	# be a real call (explicit_bzero), in the functions that hold the key: opening and closing
	# the client and each request (which copies the headers). wipe_free is the helper that calls
	# it, when the compiler keeps it a function of its own; helper_start, which sends the
	# headers to the HTTP helper at a request's start, likewise.
	command -v objdump >/dev/null || skip_or_fail "needs objdump (binutils)"
	calls() { objdump -d --disassemble="$1" "$SANDBOX_MCP" | grep -cE "call.*<($2)" || true; }
	for f in rest_open http_close http_call; do
		[ "$(calls "$f" 'explicit_bzero|__explicit_bzero_chk|wipe_free|attempt|helper_start')" -ge 1 ] || { echo "$f: no wipe"; false; }
	done
	if objdump -d --disassemble=helper_start "$SANDBOX_MCP" | grep -q "<helper_start>:"; then
		[ "$(calls helper_start 'explicit_bzero|__explicit_bzero_chk')" -ge 1 ]
	fi
	if objdump -d --disassemble=wipe_free "$SANDBOX_MCP" | grep -q "<wipe_free>:"; then
		[ "$(calls wipe_free 'explicit_bzero|__explicit_bzero_chk')" -ge 1 ]
	fi
	if objdump -d --disassemble=attempt "$SANDBOX_MCP" | grep -q "<attempt>:"; then
		[ "$(calls attempt 'explicit_bzero|__explicit_bzero_chk|wipe_free')" -ge 1 ]
	fi
}
