# The inputs scenario (files, env, args, and files back), run the same way on every backend: load after
# lib/helpers. inputs_run leaves the results in $inputs_res (sorted by id, without where they
# ran and how long they took); inputs_assert checks that they say what they should.

# Every byte value, and its SHA-256 as sha256sum prints it.
INPUTS_BIN_B64=$(python3 -c 'import base64; print(base64.b64encode(bytes(range(256))).decode())')
INPUTS_BIN_SHA=$(python3 -c 'import hashlib; print(hashlib.sha256(bytes(range(256))).hexdigest())')

inputs_scenario() {
	echo "$INIT"
	echo "$INITIALIZED"
	local calls=(
		# 1: files (bytes and UTF-8, in a new folder), args and env reach the script.
		"$(jq -cn --arg b "$INPUTS_BIN_B64" '{name: "execute_python", arguments: {
			script: "import sys, os, hashlib\nprint(sys.argv[1:])\nprint(repr(os.environ[\"GREETING\"]), repr(os.environ[\"EMPTY\"]))\nprint(hashlib.sha256(open(\"in/data.bin\", \"rb\").read()).hexdigest())\nprint(open(\"in/deeper/t.txt\", encoding=\"utf-8\").read())",
			args: ["a b", "--flag", "", "ünï"], env: {GREETING: "hello world", EMPTY: ""},
			files: {"in/data.bin": {base64: $b}, "in/deeper/t.txt": "héllo\n✓"}}}')"
		# 2: the files are there for the shell too, byte-exact; plant a symlink, a FIFO, a hard link.
		'{"name": "execute_bash_commands", "arguments": {"code": "sha256sum in/data.bin | cut -d\" \" -f1; mkdir -p /tmp/target; ln -s /tmp/target evil; mkfifo fifo; echo original > orig; ln orig hl; ls -l in/deeper/t.txt | cut -c1-10"}}'
		# 3: a path through the planted symlink is refused; nothing lands where it points.
		'{"name": "execute_bash_commands", "arguments": {"code": "echo ran", "files": {"evil/x": "pwn"}}}'
		'{"name": "execute_bash_commands", "arguments": {"code": "ls -A /tmp/target; echo \"[$?]\""}}'
		# 4: the FIFO and the hard link are replaced, not written through; nothing blocks.
		'{"name": "execute_bash_commands", "arguments": {"code": "test -p fifo || cat fifo; echo; cat hl orig", "files": {"fifo": "fresh", "hl": "new\n"}, "timeout_s": 5}}'
		# 5: env reaches bash code, and does not outlive its call.
		'{"name": "execute_bash_commands", "arguments": {"code": "echo \"$GREETING|${PATH%%:*}\"", "env": {"GREETING": "hi"}}}'
		'{"name": "execute_bash_commands", "arguments": {"code": "echo \"[${GREETING-unset}]\""}}'
		# 6: refused before running: an escaping path, the server folder, a reserved variable.
		'{"name": "execute_bash_commands", "arguments": {"code": "true", "files": {"a/../../etc/x": "x"}}}'
		'{"name": "execute_python", "arguments": {"script": "pass", "files": {".sandbox/task.py": "x"}}}'
		'{"name": "execute_bash_commands", "arguments": {"code": "true", "env": {"HTTP_PROXY": "http://evil"}}}'
		# 7: files back: an image and a note written to outputs/, and what collect names (the
		# bytes of call 1, the planted symlink, the FIFO that call 4 replaced by a file).
		"$(jq -cn '{name: "execute_python", arguments: {collect: ["in/data.bin", "evil", "fifo"], script: ([
			"import os, struct, zlib",
			"def chunk(t, d): return struct.pack(\">I\", len(d)) + t + d + struct.pack(\">I\", zlib.crc32(t + d))",
			"os.makedirs(\"outputs\", exist_ok=True)",
			"open(\"outputs/dot.png\", \"wb\").write(b\"\\x89PNG\\r\\n\\x1a\\n\" + chunk(b\"IHDR\", struct.pack(\">IIBBBBB\", 1, 1, 8, 0, 0, 0, 0)) + chunk(b\"IDAT\", zlib.compress(b\"\\x00\\x80\")) + chunk(b\"IEND\", b\"\"))",
			"open(\"outputs/note.txt\", \"w\").write(\"done\\n\")"] | join("\n"))}}')"
	)
	local i=0 c
	for c in "${calls[@]}"; do
		i=$((i + 1))
		jq -cn --argjson id "$i" --argjson c "$c" '{jsonrpc: "2.0", id: $id, method: "tools/call", params: $c}'
		echo "{\"wait\": $i}"
	done
}

# inputs_run BACKEND [SERVER ARGS...]
inputs_run() {
	local backend=$1
	shift
	SANDBOX_BACKEND=$backend SESSION_TIMEOUT=300 mcp_session "$@" < <(inputs_scenario)
	inputs_res=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and (.id | type) == "number")
		| {id, sc: (.result.structuredContent | if . then del(.backend, .sandbox_id, .duration_ms) else . end),
		   text: .result.content[0].text, isError: .result.isError,
		   more: [.result.content[1:][] | if .type == "image" then {type, mimeType, data} else . end]}' | jq -sc 'sort_by(.id)')
}

inputs_assert() {
	jqe "$inputs_res" 'length == 11'
	jqe "$inputs_res" '.[0].sc | .exit_code == 0 and .stdout ==
		"[\u0027a b\u0027, \u0027--flag\u0027, \u0027\u0027, \u0027ünï\u0027]\n\u0027hello world\u0027 \u0027\u0027\n'"$INPUTS_BIN_SHA"'\nhéllo\n✓\n"'
	jqe "$inputs_res" '.[1].sc | .exit_code == 0 and .stdout == "'"$INPUTS_BIN_SHA"'\n-rw-r--r--\n"'
	jqe "$inputs_res" '.[2] | .isError and .sc.exit_code != 0 and .sc.stdout == "" and
		(.text | test("evil/x: a name on its way is a symlink, which is not followed"))'
	jqe "$inputs_res" '.[3].sc.stdout == "[0]\n"'
	jqe "$inputs_res" '.[4].sc | .exit_code == 0 and .stdout == "fresh\nnew\noriginal\n"'
	# (The Daytona test server maps /workspace into a folder of its own, in the variables too.)
	jqe "$inputs_res" '(.[5].sc.stdout | test("^hi[|](/.*)?/workspace/[.]sandbox/packages/bin\n$")) and .[6].sc.stdout == "[unset]\n"'
	jqe "$inputs_res" '.[7] | .isError and (.text | contains("files[\"a/../../etc/x\"]: the path must not contain \".\" or \"..\""))'
	jqe "$inputs_res" '.[8] | .isError and (.text | test("the path is in .sandbox, the server.s own folder"))'
	jqe "$inputs_res" '.[9] | .isError and (.text | contains("env[\"HTTP_PROXY\"]: is a proxy variable, which a call may not set"))'
	jqe "$inputs_res" '.[10] | .sc.exit_code == 0 and ([.sc.artifacts[] | [.path, .shown, .note]] == [
		["evil", "none", "a symlink (at the path or on its way): not followed"], ["fifo", "text", null],
		["in/data.bin", "base64", null], ["outputs/dot.png", "image", null], ["outputs/note.txt", "text", null]])
		and (.sc.artifacts[2].base64 == "'"$INPUTS_BIN_B64"'") and .sc.artifacts[1].text == "fresh"
		and ([.more[] | .type] == ["image"]) and (.more[0].data | startswith("iVBORw0KGgo"))
		and (.text | test("\n--- files ---\nevil: a symlink"))'
}
