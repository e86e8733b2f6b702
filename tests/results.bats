# What a call's result says and how large it may be: the size budget, the text block, the
# texts of refusals and failures.
load lib/helpers

# result_size ID: bytes of the serialized result object of response ID.
result_size() {
	response "$1" | jq -c '.result' | tr -d '\n' | wc -c
}

@test "with default settings a result stays within 32 KB, with head and tail of both streams and the full text saved" {
	# Both streams far over the budget, one of them full of control bytes (six bytes each in JSON).
	code='head -c 300000 /dev/urandom | base64 -w 100; python3 -c "import sys; sys.stderr.write(chr(1) * 200000 + \"END\")"'
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$code" '{code:$c}')")
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"wc -c < .sandbox/output/call-1.stdout; wc -c < .sandbox/output/call-1.stderr"}')
EOF
	size=$(result_size 1)
	echo "result: $size bytes"
	[ "$size" -le 32768 ]
	res 1
	sc '.truncated.stdout and .truncated.stderr and .truncated.stdout_file == "/workspace/.sandbox/output/call-1.stdout"'
	sc '.truncated.stderr_file == "/workspace/.sandbox/output/call-1.stderr" and (.stderr | endswith("END"))'
	sc '(.stdout | test("bytes left out here; the full output is in /workspace/.sandbox/output/call-1.stdout"))'
	# Each stream got a fair share: neither was squeezed to nothing.
	sc '(.stdout | length) > 4000 and (.stderr | length) > 500'
	# The text block shows the same streams.
	jqe "$result" '. as $r | ($r.content[0].text | contains($r.structuredContent.stdout)) and ($r.content[0].text | contains($r.structuredContent.stderr))'
	result=$(response 2 | jq -c .result)
	out=$(( (300000 + 2) / 3 * 4 ))
	out=$(( out + (out + 99) / 100 ))
	sc ".stdout == \"$out\n200003\n\""
}

@test "a stream cut only for the result's size has its full text saved too" {
	# 20 KB per stream: under the capture cap (64K), over what a 32 KB result can show twice.
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"seq 1 5000 > s; head -c 20000 s; head -c 20000 s >&2"}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"cmp .sandbox/output/call-1.stdout <(head -c 20000 s) && cmp .sandbox/output/call-1.stderr <(head -c 20000 s) && echo same"}')
EOF
	[ "$(result_size 1)" -le 32768 ]
	res 1
	sc '.truncated.stdout and .truncated.stderr and .truncated.stdout_bytes == 20000'
	sc '.truncated.stdout_file == "/workspace/.sandbox/output/call-1.stdout" and .truncated.stderr_file == "/workspace/.sandbox/output/call-1.stderr"'
	res 2
	sc '.stdout == "same\n"'
}

@test "--result-max raises the budget: a megabyte comes back whole" {
	tool execute_bash_commands '{"code":"head -c 1000000 /dev/zero | tr \"\\\\0\" a"}' --output-cap 2M --result-max 3M
	sc '.truncated.stdout == false and (.stdout | length) == 1000000'
}

@test "a NUL byte does not cut the text block: it shows everything structuredContent has" {
	tool execute_bash_commands '{"code":"printf \"\\\\0abc\\\\n\"; printf \"x\\\\0y\" >&2"}'
	sc '.stdout == "\u0000abc\n" and .stderr == "x\u0000y"'
	jqe "$result" '(.content[0].text | split("\n")[1:]) == ["--- stdout ---", "\u0000abc", "--- stderr ---", "x\u0000y", ""]'
}

@test "execute_bash_commands code of any size the schema allows runs (here 1 MiB); so does an 8 MiB script" {
	# Too large for any command line, the requests are made from files.
	python3 -c 'print("x=1\n" * 262000 + "echo done-$x")' > "$BATS_TEST_TMPDIR/code"
	python3 -c 'print(("#" + "x" * 99 + "\n") * 90000 + "x = 1\nprint(\"ok\", x)")' > "$BATS_TEST_TMPDIR/script"
	{
		echo "$INIT"
		jq -cn --rawfile c "$BATS_TEST_TMPDIR/code" '{jsonrpc:"2.0", id:1, method:"tools/call", params:{name:"execute_bash_commands", arguments:{code:$c}}}'
		jq -cn --rawfile s "$BATS_TEST_TMPDIR/script" '{jsonrpc:"2.0", id:2, method:"tools/call", params:{name:"execute_python", arguments:{script:$s}}}'
	} > "$BATS_TEST_TMPDIR/session"
	[ "$(stat -c %s "$BATS_TEST_TMPDIR/script")" -gt $((8 << 20)) ]
	mcp_session < "$BATS_TEST_TMPDIR/session"
	res 1
	sc '.exit_code == 0 and .stdout == "done-1\n"'
	res 2
	sc '.exit_code == 0 and .stdout == "ok 1\n"'
}

@test "refusals name what is valid: tools, arguments, and where a program goes" {
	mcp_session <<EOF
$INIT
{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{}}}
$(call_json 2 execute_python '{"code":"print(1)"}')
$(call_json 3 execute_bash_commands '{"script":"ls"}')
$(call_json 4 execute_bash_commands '{"code":"ls","cwd":"/"}')
EOF
	jqe "$(response 1)" '.error.code == -32602 and (.error.message | contains("execute_python, execute_bash_commands, cleanup_sandbox"))'
	jqe "$(response 2)" '.result.isError and (.result.content[0].text | contains("execute_python takes script, requirements, args, files, env, collect, timeout_s") and contains("goes in `script`"))'
	jqe "$(response 3)" '.result.isError and (.result.content[0].text | contains("go in `code`"))'
	jqe "$(response 4)" '.result.isError and (.result.content[0].text | contains("cwd: is not a known argument") and contains("takes code, files, env, collect, timeout_s"))'
}

@test "the busy answer counts right: 1 call is waiting" {
	mcp_session --queue 1 <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"sleep 2"}' '{"progressToken":"t"}')
{"wait_line": "\"progressToken\":\"t\""}
$(call_json 2 execute_bash_commands '{"code":"true"}')
$(call_json 3 execute_bash_commands '{"code":"true"}')
EOF
	jqe "$(response 3)" '.result.isError and (.result.content[0].text | startswith("The server is busy: 1 call is already waiting"))'
}

@test "requirements cannot smuggle a line through any line separator pip knows" {
	mkdir -p "$BATS_TEST_TMPDIR/wh"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" okpkg 1.0
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	# U+0085, U+2028 and U+2029 as their UTF-8 bytes: bash's $'\u...' makes them only in a
	# UTF-8 locale, and leaves a plain backslash sequence in the C locale of a bare system.
	for sep in $'\v' $'\f' $'\x1c' $'\x1d' $'\x1e' "$(printf '\302\205')" "$(printf '\342\200\250')" \
		"$(printf '\342\200\251')" $'\r' $'\n'; do
		[ "${sep#*\\}" = "$sep" ] # no backslash: a separator, not an escape left as text
		req="okpkg; python_version < \"1\"${sep}-r /workspace/evil.txt"
		args=$(jq -cn --arg r "$req" '{script:"print(1)", requirements:[$r]}')
		tool execute_python "$args" --wheelhouse "$BATS_TEST_TMPDIR/wh"
		jqe "$result" '.isError == true and (.content[0].text | test("requirements\\[0\\]: must be one pip requirement"))'
	done
	# Past the schema, the policy itself refuses them too (for clients that skip validation there
	# is none: the server validates; this checks the second line of defence with a tab).
	args=$(jq -cn --arg r $'okpkg\t-r x' '{script:"print(1)", requirements:[$r]}')
	tool execute_python "$args" --wheelhouse "$BATS_TEST_TMPDIR/wh"
	jqe "$result" '.isError == true'
}

@test "requirements reach pip as arguments of their own, never through a file" {
	mkdir -p "$BATS_TEST_TMPDIR/wh"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" okpkg 1.0
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	tool execute_python '{"script":"import okpkg, os; print(okpkg.VALUE); print(os.path.exists(\"/workspace/.sandbox/requirements.txt\"))","requirements":["okpkg==1.0"]}' --wheelhouse "$BATS_TEST_TMPDIR/wh"
	sc '.exit_code == 0 and .stdout == "okpkg 1.0\nFalse\n"'
}

@test "a package of 20,000 files installs: pip's temporary files do not go to the small /tmp" {
	mkdir -p "$BATS_TEST_TMPDIR/wh"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" manyfiles 1.0 20000 4096
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	SESSION_TIMEOUT=300 tool execute_python '{"script":"import manyfiles, os; print(len(os.listdir(os.path.dirname(manyfiles.__file__) + \"/data/7\")))","requirements":["manyfiles"],"timeout_s":240}' --wheelhouse "$BATS_TEST_TMPDIR/wh" --max-timeout 300
	sc '.exit_code == 0 and .stdout == "1000\n"'
}

@test "with a wheelhouse the descriptions say where packages come from and list them" {
	mkdir -p "$BATS_TEST_TMPDIR/wh"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" alpha 1.0
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" beta 2.5
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	mcp_session --wheelhouse "$BATS_TEST_TMPDIR/wh" <<EOF
$INIT
{"jsonrpc":"2.0","id":1,"method":"tools/list"}
EOF
	d=$(response 1 | jq -r '.result.tools[0].description')
	echo "$d"
	[[ "$d" == *"install only from the server's wheelhouse, with no network (it has: alpha 1.0, beta 2.5)"* ]]
	[[ "$d" != *"install step"* ]]
}

@test "a missing or unreadable wheelhouse is refused at start-up with the reason" {
	run "$SANDBOX_MCP" --wheelhouse /nonexistent/wheels
	[ "$status" -eq 2 ]
	[[ "$output" == *"--wheelhouse /nonexistent/wheels: No such file or directory"* ]]
	mkdir -m 700 "$BATS_TEST_TMPDIR/private"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/private" alpha 1.0
	chmod 600 "$BATS_TEST_TMPDIR/private/"*.whl
	if [ "$(id -u)" -eq 0 ]; then
		run "$SANDBOX_MCP" --wheelhouse "$BATS_TEST_TMPDIR/private"
		[ "$status" -eq 2 ]
		[[ "$output" == *"the sandbox user (host uid 65534) cannot read"* ]]
	fi
	mkdir "$BATS_TEST_TMPDIR/empty"
	run "$SANDBOX_MCP" --wheelhouse "$BATS_TEST_TMPDIR/empty"
	[ "$status" -eq 2 ]
	[[ "$output" == *"holds no wheels"* ]]
}

@test "one file, one media type: a tool result's files, resources/list and resources/read name the same, told by the bytes" {
	# A PNG and a JPEG without their extensions, a PNG whose name says text, a text file with
	# no extension and a binary blob.
	local code='mkdir -p outputs; cd outputs
printf "\211PNG\r\n\032\n\0\0\0\rIHDR\0\0\0\1\0\0\0\1\10\2\0\0\0" > plot.dat
printf "\377\330\377\340\0\20JFIF\0" > photo
cp plot.dat fake.txt
printf "hello\n" > notes
printf "\0\1\2\377\376" > blob.bin'
	local want='{"outputs/blob.bin": "application/octet-stream", "outputs/fake.txt": "image/png",
		"outputs/notes": "text/plain", "outputs/photo": "image/jpeg", "outputs/plot.dat": "image/png"}'
	local script f i=10
	script=$(printf '%s\n' "$INIT" "$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$code" '{code: $c}')")" '{"wait": 1}' \
		'{"jsonrpc":"2.0","id":2,"method":"resources/list"}')
	for f in blob.bin fake.txt notes photo plot.dat; do
		i=$((i + 1))
		script+=$'\n'"{\"jsonrpc\":\"2.0\",\"id\":$i,\"method\":\"resources/read\",\"params\":{\"uri\":\"sandbox://workspace/outputs/$f\"}}"
	done
	mcp_session <<<"$script"
	# The tool result: each file's mime_type (the images also come back as image content).
	jqe "$(response 1 | jq -c '.result.structuredContent.artifacts | map({(.path): .mime_type}) | add')" ". == $want"
	jqe "$(response 1 | jq -c '[.result.content[] | select(.type == "image") | .mimeType] | sort')" '. == ["image/jpeg", "image/png", "image/png"]'
	# resources/list names the same type for each.
	jqe "$(response 2 | jq -c '.result.resources | map({(.name): .mimeType}) | add')" ". == $want"
	# resources/read too.
	jqe "$(for i in 11 12 13 14 15; do response $i; done | jq -c -s 'map(.result.contents[0] | {(.uri | ltrimstr("sandbox://workspace/")): .mimeType}) | add')" ". == $want"
}
