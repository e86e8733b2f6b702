# The files in examples/ (host configurations and the demo session) stay correct.
bats_require_minimum_version 1.5.0
load lib/helpers

EXAMPLES="$REPO_DIR/examples"

# env_of FILE: the KEY=VALUE pairs of every server entry's "env" in a host configuration.
env_of() {
	jq -r '(.mcpServers // .servers) | to_entries[] | .value.env // {} | to_entries[] | "\(.key)=\(.value)"' "$1"
}

INSTALLED=/usr/local/bin/sandbox-mcp

# launch FILE: how the host would start the one server of FILE, played on this machine with
# the build's binary in place of $INSTALLED. Sets $via (direct, wsl or ssh), $srv_env (the
# variables that reach the server, KEY=VALUE) and $srv_cmd (its command line, an array).
#   direct: the command with the env block.
#   wsl:    `wsl.exe [OPTIONS] --exec CMD...` runs CMD without a shell; of the env block, only
#           the variables WSLENV names reach it.
#   ssh:    `ssh [OPTIONS] HOST WORDS...` has the login shell on HOST run the words joined by
#           spaces (sh -c here); no variable of the env block reaches it.
launch() {
	local f=$1 cmd kv names a i
	local -a args
	[ "$(jq '(.mcpServers // .servers) | length' "$f")" -eq 1 ]
	cmd=$(jq -r '(.mcpServers // .servers)[] | .command' "$f")
	mapfile -t args < <(jq -r '(.mcpServers // .servers)[] | .args // [] | .[]' "$f")
	srv_env=() srv_cmd=()
	case $cmd in
	*/sandbox-mcp)
		via=direct
		[ "$cmd" = "$INSTALLED" ]
		mapfile -t srv_env < <(env_of "$f")
		srv_cmd=("$SANDBOX_MCP" "${args[@]}")
		;;
	wsl.exe)
		via=wsl
		for ((i = 0; i < ${#args[@]}; i++)); do
			[ "${args[i]}" = --exec ] || [ "${args[i]}" = -e ] && break
		done
		[ "$i" -lt "${#args[@]}" ] || { echo "$f: wsl.exe without --exec" >&2; return 1; }
		srv_cmd=("${args[@]:i+1}")
		[ "${srv_cmd[0]}" = "$INSTALLED" ] || { echo "$f: wsl.exe does not start $INSTALLED" >&2; return 1; }
		srv_cmd[0]=$SANDBOX_MCP
		names=$(env_of "$f" | sed -n 's/^WSLENV=//p' | tr ':' '\n' | sed 's#/.*##')
		while IFS= read -r kv; do
			if [ -n "$kv" ] && [ "${kv%%=*}" != WSLENV ] && grep -qx "${kv%%=*}" <<<"$names"; then
				srv_env+=("$kv")
			fi
		done < <(env_of "$f")
		;;
	ssh)
		via=ssh
		for ((i = 0; i < ${#args[@]}; i++)); do
			a=${args[i]}
			case $a in
			-[BbcDEeFIiJLlmOopQRSWw]) i=$((i + 1)) ;;
			-*) ;;
			*) break ;;
			esac
		done
		[ "$((i + 1))" -lt "${#args[@]}" ] || { echo "$f: ssh without a remote command" >&2; return 1; }
		local words="${args[*]:i+1}"
		[[ "$words" == *"$INSTALLED"* ]] || { echo "$f: ssh does not start $INSTALLED" >&2; return 1; }
		srv_cmd=(sh -c "${words//$INSTALLED/$(printf '%q' "$SANDBOX_MCP")}")
		;;
	*)
		echo "$f: unknown command $cmd" >&2
		return 1
		;;
	esac
}

# tools_via ENV_PAIRS_NAME CMD...: tools/list of the server CMD starts, with those variables.
tools_via() {
	local -n pairs=$1
	shift
	run env "${pairs[@]}" python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 60 -- "$@" <<<"$(printf '%s\n%s\n%s\n' \
		"$INIT" "$INITIALIZED" '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')"
	[ "$status" -eq 0 ] || { echo "session failed ($status): $output" >&2; tail -5 "$SERVER_LOG" >&2; return 1; }
	response 2 | jq -cS '.result.tools'
}

@test "examples: every host configuration is valid JSON that starts sandbox-mcp, directly or through wsl.exe or ssh" {
	local n=0 f
	for f in "$EXAMPLES"/*.json; do
		n=$((n + 1))
		jq -e . "$f" >/dev/null || { echo "$f is not valid JSON" >&2; return 1; }
		jq -e '(.mcpServers // .servers) | type == "object" and length > 0 and
			all(.[]; (.command | type == "string") and ((.args // []) | type == "array" and all(.[]; type == "string"))) and
			all(.[]; (.command | test("(^|/)sandbox-mcp$")) or
			          ((.command == "wsl.exe" or .command == "ssh") and any(.args[]; test("^/.*/sandbox-mcp$"))))' "$f" >/dev/null ||
			{ echo "$f does not start sandbox-mcp" >&2; cat "$f" >&2; return 1; }
		launch "$f"
	done
	[ "$n" -ge 4 ]
}

@test "examples: each host uses its own format (Claude Desktop and Cursor: mcpServers; VS Code: servers, type stdio)" {
	jqe "$(cat "$EXAMPLES/claude_desktop_config.json")" '.mcpServers | length > 0'
	jqe "$(cat "$EXAMPLES/claude_desktop_config.ssh.json")" '.mcpServers | length > 0'
	jqe "$(cat "$EXAMPLES/cursor-mcp.json")" '.mcpServers | length > 0'
	jqe "$(cat "$EXAMPLES/vscode-mcp.json")" '(.mcpServers == null) and (.servers | length > 0) and all(.servers[]; .type == "stdio")'
}

@test "examples: Claude Desktop, which runs on macOS and Windows only, starts the server through wsl.exe or ssh" {
	launch "$EXAMPLES/claude_desktop_config.json"
	[ "$via" = wsl ]
	launch "$EXAMPLES/claude_desktop_config.ssh.json"
	[ "$via" = ssh ]
	# ssh: no terminal (it would mangle the stream) and no password prompt nobody can answer.
	jqe "$(cat "$EXAMPLES/claude_desktop_config.ssh.json")" '.mcpServers.sandbox.args | index("-T") != null and index("BatchMode=yes") != null'
}

@test "examples: every variable a configuration sets reaches the server, or is WSLENV naming those that do" {
	local f kv names
	for f in "$EXAMPLES"/*.json; do
		launch "$f"
		names=$(env_of "$f" | sed -n 's/^WSLENV=//p' | tr ':' '\n' | sed 's#/.*##')
		while IFS= read -r kv; do
			[ -n "$kv" ] || continue
			[ "${kv%%=*}" = WSLENV ] && [ "$via" = wsl ] && continue
			[ "$via" != ssh ] || { echo "$f: ssh passes no variable of env on: ${kv%%=*}" >&2; return 1; }
			printf '%s\n' "${srv_env[@]}" | grep -qxF "$kv" ||
				{ echo "$f: ${kv%%=*} does not reach the server (WSLENV names: $names)" >&2; return 1; }
		done < <(env_of "$f")
	done
}

@test "examples: the options they give are real, and each configuration's server starts with them" {
	local f kv help expect default got
	local -a none=() with=(SANDBOX_TIMEOUT=120)
	help=$("$SANDBOX_MCP" --help)
	# Every example sets the timeout to 120 s, which tools/list describes.
	default=$(tools_via none "$SANDBOX_MCP")
	expect=$(tools_via with "$SANDBOX_MCP")
	[ -n "$expect" ]
	[ "$expect" != null ]
	[ "$expect" != "$default" ]
	for f in "$EXAMPLES"/*.json; do
		launch "$f"
		for kv in "${srv_env[@]}"; do
			grep -q "env ${kv%%=*}," <<<"$help" || { echo "$f: ${kv%%=*} is not in --help" >&2; return 1; }
		done
		# Played here as the host and its launcher would start it: a full handshake.
		got=$(tools_via srv_env "${srv_cmd[@]}")
		[ "$got" = "$expect" ] || { echo "$f ($via): the server did not get the examples' options" >&2; return 1; }
		# A bad value stops the server at start-up (exit 2), so the values are accepted ones.
		run env "${srv_env[@]}" "${srv_cmd[@]}" --log-level error < /dev/null
		[ "$status" -eq 0 ] || { echo "$f: the server refuses its options: $output" >&2; return 1; }
	done
}

@test "examples: claude-code.sh is valid sh and prints the README's claude mcp add command" {
	sh -n "$EXAMPLES/claude-code.sh"
	run sh "$EXAMPLES/claude-code.sh"
	[ "$status" -eq 0 ]
	[ "$output" = "$(readme_claude_command)" ]
	[[ "$output" == "claude mcp add "* ]]
	[[ "$output" == *"--transport stdio "* ]]
	[[ "$output" == *" -- $INSTALLED" ]]
	# Options that take several values (--env, --header) come after the server's name, which
	# they would otherwise swallow: the name is the first word that is neither an option nor
	# the value of --transport or --scope.
	local -a w
	read -ra w <<<"${output%% -- *}"
	local i name=
	for ((i = 3; i < ${#w[@]}; i++)); do
		case ${w[i]} in
		--transport | --scope | -t | -s) i=$((i + 1)) ;;
		-*) echo "option ${w[i]} before the server's name" >&2; return 1 ;;
		*) name=${w[i]}; break ;;
		esac
	done
	[ "$name" = sandbox ]
	local kv=${output#*--env }
	kv=${kv%% *}
	grep -q "env ${kv%%=*}," <<<"$("$SANDBOX_MCP" --help)"
	# A path with a space and a quote is printed so that a shell reads it back as one word.
	run env SANDBOX_MCP_BIN="$BATS_TEST_TMPDIR/a b/it's" sh "$EXAMPLES/claude-code.sh"
	[ "$status" -eq 0 ]
	run bash -c 'claude() { printf "%s\n" "$@"; }; eval "$1" | tail -1' _ "$output"
	[ "$output" = "$BATS_TEST_TMPDIR/a b/it's" ]
	run sh "$EXAMPLES/claude-code.sh" --bad
	[ "$status" -eq 2 ]
}

@test "examples: claude-code.sh --run says how to replace an entry that is there, and --replace does" {
	# A stand-in for the CLI that refuses to add a name it has, as the real one does.
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	cat >"$BATS_TEST_TMPDIR/bin/claude" <<-'STUB'
		#!/bin/sh
		echo "$*" >>"$STUB_DIR/calls"
		case "$1 $2" in
		"mcp add") [ ! -e "$STUB_DIR/has" ] || { echo "MCP server sandbox already exists in user config" >&2; exit 1; }
			touch "$STUB_DIR/has" ;;
		"mcp remove") [ -e "$STUB_DIR/has" ] || exit 1; rm "$STUB_DIR/has" ;;
		esac
	STUB
	chmod +x "$BATS_TEST_TMPDIR/bin/claude"
	export STUB_DIR=$BATS_TEST_TMPDIR PATH="$BATS_TEST_TMPDIR/bin:$PATH"
	run sh "$EXAMPLES/claude-code.sh" --replace
	[ "$status" -eq 0 ] && [ -e "$BATS_TEST_TMPDIR/has" ]
	run sh "$EXAMPLES/claude-code.sh" --run
	[ "$status" -eq 1 ]
	[[ "$output" == *"already exists"* && "$output" == *"sh examples/claude-code.sh --replace (it runs 'claude mcp remove --scope user sandbox' first)"* ]]
	: >"$BATS_TEST_TMPDIR/calls"
	run sh "$EXAMPLES/claude-code.sh" --replace
	[ "$status" -eq 0 ]
	[ "$(cut -d' ' -f1-2 "$BATS_TEST_TMPDIR/calls" | tr '\n' ,)" = "mcp remove,mcp add," ]
}

@test "examples: the README points at every example file" {
	local f
	for f in "$EXAMPLES"/*; do
		grep -qF "examples/$(basename "$f")" "$REPO_DIR/README.md" ||
			{ echo "README.md does not mention examples/$(basename "$f")" >&2; return 1; }
	done
}

@test "examples: demo.py runs its whole session through the real server and every step is as expected" {
	cd "$REPO_DIR"
	run python3 examples/demo.py --log "$BATS_TEST_TMPDIR/server.log" "$SANDBOX_MCP"
	printf '%s\n' "$output" | tail -40
	[ "$status" -eq 0 ]
	[[ "${lines[${#lines[@]} - 1]}" =~ ^summary:\ ([0-9]+)\ of\ ([0-9]+)\ steps\ as\ expected$ ]]
	[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
	[ "${BASH_REMATCH[1]}" -ge 12 ]
	[[ "$output" != *FAIL* ]]
	# What the session shows: persistence, a fresh interpreter, the timeout, the cleanup.
	[[ "$output" == *"wrote 60 rows to /workspace/data/temperatures.csv"* ]]
	[[ "$output" == *"NameError: name 'rows' is not defined"* ]]
	[[ "$output" == *"exit_code 124 | isError true"*"TIMED OUT"* ]]
	[[ "$output" == *"data/temperatures.csv is gone"* ]]
	# A file in and out, and a chart back as an image, saved beside the log.
	[[ "$output" == *"file notes/shout.txt (text/plain, 30 bytes): text"* ]]
	[[ "$output" == *"image content: image/png"* ]]
	[ "$(head -c 8 "$BATS_TEST_TMPDIR/sandbox-mcp-demo-chart.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]
	# A session keeps its frame between calls; a background job polled to its end.
	[[ "$output" == *"loaded 60 rows into the session"*"session frame, value: 60"* ]]
	[[ "$output" == *"still running as bg-"*"running False | exit_code 0"*"| step 5"*"| done"* ]]
}

@test "examples: demo.py exits non-zero and says what failed when the steps go wrong" {
	cd "$REPO_DIR"
	# An "interpreter" that fails whatever it is given (one that does not exist is refused at
	# start-up): the Python steps fail, and so does step 2, which reads the file step 1 should
	# have written, and the session steps 7 and 8; the rest still pass.
	run python3 examples/demo.py --log "$BATS_TEST_TMPDIR/server.log" "$SANDBOX_MCP" --python /bin/false
	[ "$status" -eq 1 ]
	[[ "${lines[${#lines[@]} - 1]}" == "summary: "*" steps as expected; FAILED: 1 execute_python, 2 execute_bash_commands, 3 execute_python, 6 execute_python, 7 execute_python, 8 execute_python" ]]
	[[ "$output" == *"FAIL: expected exit_code 0 and no isError"* ]]
}

# claude_cli: the real Claude Code CLI, from npm (@anthropic-ai/claude-code), installed once
# into a cache folder; its path in $CLAUDE. Then HOME is a fresh folder of this test, so that
# no configuration of the user's is read or touched. The latest release is asked for by name:
# left to choose, npm takes the newest whose "engines" accept this Node.js, which can be far
# older; the CLI itself is a native binary, and that it runs is checked here.
claude_cli() {
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
		skip_or_fail "node and npm are needed to install the Claude Code CLI (scripts/deps.sh test installs them)"
	local cache=${SANDBOX_TEST_CLAUDE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-mcp-claude-code} tmp
	if [ ! -f "$cache/node_modules/.installed" ]; then
		mkdir -p "$cache"
		tmp=$(mktemp -d "$cache/install.XXXXXX")
		echo '{"private": true}' > "$tmp/package.json"
		if ! (cd "$tmp" && npm install --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@latest) > "$tmp/npm.log" 2>&1; then
			cat "$tmp/npm.log" >&2
			rm -rf "$tmp"
			skip_or_fail "npm could not install @anthropic-ai/claude-code (its output is above)"
			return
		fi
		touch "$tmp/node_modules/.installed"
		rm -rf "$cache/node_modules" && mv "$tmp/node_modules" "$cache/node_modules"
		rm -rf "$tmp"
	fi
	CLAUDE="$cache/node_modules/.bin/claude"
	export HOME="$BATS_TEST_TMPDIR/home"
	mkdir -p "$HOME"
	unset CLAUDE_CONFIG_DIR XDG_CONFIG_HOME
	# No update checks, telemetry or other traffic: adding and listing servers needs none.
	export DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1
	run "$CLAUDE" --version
	[ "$status" -eq 0 ] && [[ "$output" == *"Claude Code"* ]] ||
		{ echo "the installed Claude Code CLI does not run ($status): $output" >&2; return 1; }
	echo "# $output" >&3
}

# claude_has_server: Claude Code's user configuration holds the server "sandbox" as the
# examples give it (the build's binary, SANDBOX_TIMEOUT=120), and `claude mcp list` reports
# it connected: it started the server and made the MCP handshake.
claude_has_server() {
	jq -e --arg bin "$SANDBOX_MCP" '.mcpServers.sandbox | .command == $bin and .args == [] and
		.env == {"SANDBOX_TIMEOUT": "120"} and (.type // "stdio") == "stdio"' "$HOME/.claude.json" >/dev/null ||
		{ echo "Claude Code's configuration:" >&2; jq . "$HOME/.claude.json" >&2; return 1; }
	run "$CLAUDE" mcp list
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	grep -E "^sandbox: .*Connected" <<<"$output"
	run ! grep -E "^sandbox: .*Failed" <<<"$output"
}

# readme_claude_command: the README's `claude mcp add` line.
readme_claude_command() {
	local cmd
	cmd=$(grep -E '^claude mcp add ' "$REPO_DIR/README.md")
	[ "$(wc -l <<<"$cmd")" -eq 1 ] || { echo "README.md has not one claude mcp add line: $cmd" >&2; return 1; }
	printf '%s\n' "$cmd"
}

@test "examples: the README's claude mcp add command works with the real Claude Code CLI" {
	claude_cli
	local cmd
	cmd=$(readme_claude_command)
	[[ "$cmd" == *" /usr/local/bin/sandbox-mcp" ]]
	# The build's binary in place of the installed one.
	cmd="${cmd% /usr/local/bin/sandbox-mcp} $(printf '%q' "$SANDBOX_MCP")"
	cd "$BATS_TEST_TMPDIR"
	run env PATH="$(dirname "$CLAUDE"):$PATH" bash -c "$cmd"
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	claude_has_server
}

@test "examples: claude-code.sh --run adds the server with the real Claude Code CLI" {
	claude_cli
	cd "$BATS_TEST_TMPDIR"
	run env PATH="$(dirname "$CLAUDE"):$PATH" SANDBOX_MCP_BIN="$SANDBOX_MCP" sh "$EXAMPLES/claude-code.sh" --run
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	claude_has_server
	# Once more: the CLI refuses a name it has, and the script says how to replace it; --replace does.
	run env PATH="$(dirname "$CLAUDE"):$PATH" SANDBOX_MCP_BIN="$SANDBOX_MCP" sh "$EXAMPLES/claude-code.sh" --run
	printf '%s\n' "$output"
	[ "$status" -ne 0 ] && [[ "$output" == *"sh examples/claude-code.sh --replace"* ]]
	run env PATH="$(dirname "$CLAUDE"):$PATH" SANDBOX_MCP_BIN="$SANDBOX_MCP" sh "$EXAMPLES/claude-code.sh" --replace
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	claude_has_server
}
