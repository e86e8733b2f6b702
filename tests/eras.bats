#!/usr/bin/env bats
# Both protocol eras from a real client: the MCP Inspector CLI 2.x (from npm), with its
# protocolEra set to legacy (initialize first), auto (a server/discover probe, then modern when
# the server answers it) and modern (2026-07-28 only: never initialize). Each lists the tools
# and runs a call; what went over the wire is recorded and checked to be the era asked for.
# The golden cases of the modern revision are in protocol.bats (fixtures modern-*).

load lib/helpers
load lib/inspector
bats_require_minimum_version 1.5.0

setup() {
	common_setup
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
