# Unit tests below the binary: the server's pure parts, one at a time, through build/test-helper
# (tests/helper/test-helper.c): UTF-8 repair, the JSON writer, the output writer's order, one
# stream's capture, fitting a result into its budget, the schema validator, the requirement
# policy, the agent's frames, writing below a host folder and reading a multipart answer.
load lib/helpers
bats_require_minimum_version 1.5.0

HELPER="$REPO_DIR/build/test-helper"

setup() {
	common_setup
	[ -x "$HELPER" ] || skip_or_fail "build/test-helper is missing (make)"
}

hex() { od -An -tx1 -v | tr -d ' \n'; }

@test "writer: lines written by the thread that hands them over, whole or in part, and lines queued keep their order and are whole" {
	# A slow reader behind a small socket buffer or a one-page pipe: some lines go at once,
	# some in part with their rest queued (a socket), the rest through the queue. Every run
	# must read all 3000 lines whole and in order; runs go on until the socket has written a
	# line in part and the pipe one at once (timing decides it), at most five times each.
	local i out partial=0 pipe_direct=0
	for i in 1 2 3 4 5; do
		for how in socket pipe; do
			out=$("$HELPER" writer "$how" 3000)
			echo "$how: $out"
			[[ "$out" =~ ^read\ 3000\ direct\ ([0-9]+)\ partial\ ([0-9]+)$ ]]
			if [ "$how" = pipe ]; then
				[ "${BASH_REMATCH[2]}" -eq 0 ] # a pipe takes up to a page whole or not at all
				[ "${BASH_REMATCH[1]}" -eq 0 ] || pipe_direct=1
			elif [ "${BASH_REMATCH[2]}" -gt 0 ]; then
				partial=1
			fi
		done
		[ "$partial" -eq 0 ] || [ "$pipe_direct" -eq 0 ] || break
	done
	[ "$partial" -eq 1 ]
	[ "$pipe_direct" -eq 1 ]
}

@test "jsonw: writes every value byte for byte as jansson does, and knows the length without writing" {
	local values out
	values=$(python3 - <<-'EOF'
		import json, random
		r = random.Random(7)
		vals = [None, True, False, 0, -1, 2**62, 9, 10, -99, 1234567890123, 2**63 - 1, -2**63, 1.5, 0.1, -2.5e-300, 1e300, "", "a", "\"\\/",
		        "".join(chr(c) for c in range(0, 128)), "h\u00e9 \u20ac \U0001F600 \u2028\u2029\u007f",
		        [], {}, [[], {}], {"k\n\"": [1, {"": None}]}, {"a": 1, "b": [True, "x" * 70000]}]
		# Long clean runs with one byte to escape (or not ASCII) at every offset: the 16-byte
		# scan, the byte it finds in a block, and the tail after the last block.
		for k in range(0, 100):
		    for c in ['"', '\\', '\n', '\x01', '\x1f', '\u00e9', ' ', '~', '\x7f']:
		        vals.append("x" * k + c + "y" * (k % 37))
		for _ in range(200):
		    n = r.randrange(0, 40)
		    vals.append("".join(chr(r.choice([r.randrange(0, 32), r.randrange(32, 127), r.randrange(128, 0x3000),
		                                      r.randrange(0x10000, 0x10ffff)])) for _ in range(n)))
		for v in vals:
		    print(json.dumps(v))
	EOF
	)
	out=$("$HELPER" jsonw <<<"$values")
	[ "$(grep -c '^same ' <<<"$out")" -eq "$(wc -l <<<"$values")" ] || { grep -A2 differs <<<"$out" | head -20; false; }
}

@test "utf8: valid text stays as it is, every invalid sequence becomes one U+FFFD per bad byte" {
	[ "$(printf 'h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80' | "$HELPER" utf8 | hex)" = "$(printf 'h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80' | hex)" ]
	local fffd=efbfbd
	# A stray byte, an overlong NUL (C0 80), a surrogate (ED A0 80), past U+10FFFF (F4 90 80 80),
	# and a sequence cut off at the end.
	[ "$(printf 'a\xffb' | "$HELPER" utf8 | hex)" = "61${fffd}62" ]
	[ "$(printf '\xc0\x80' | "$HELPER" utf8 | hex)" = "${fffd}${fffd}" ]
	[ "$(printf '\xed\xa0\x80' | "$HELPER" utf8 | hex)" = "${fffd}${fffd}${fffd}" ]
	[ "$(printf '\xf4\x90\x80\x80' | "$HELPER" utf8 | hex)" = "${fffd}${fffd}${fffd}${fffd}" ]
	[ "$(printf 'x\xe2\x82' | "$HELPER" utf8 | hex)" = "78${fffd}${fffd}" ]
	# NUL is valid UTF-8 and stays.
	[ "$(printf 'a\0b' | "$HELPER" utf8 | hex)" = "610062" ]
	# A bad byte or a valid character after ASCII runs of every length up to 100 (the 32-byte
	# scan and its tail).
	for k in 0 1 7 8 31 32 33 63 64 65 99 100; do
		local run
		run=$(printf '%*s' "$k" '' | tr ' ' x)
		[ "$(printf '%s\xffz\xc3\xa9%s' "$run" "$run" | "$HELPER" utf8 | hex)" = "$(printf '%s' "$run" | hex)${fffd}7ac3a9$(printf '%s' "$run" | hex)" ]
	done
}

@test "capture: a stream within the cap is kept whole, in chunks of any size" {
	for chunk in 1 7 4096; do
		run "$HELPER" capture 1024 "$chunk" < <(seq 1 200)
		[ "$status" -eq 0 ]
		jqe "$output" '.total == 692 and (.cut | not) and .text == ([range(1; 201) | tostring] | join("\n") + "\n")'
	done
}

@test "capture: past the cap, the first and the last half cap are kept, with a marker counting the rest" {
	for chunk in 1 100 65536; do
		run "$HELPER" capture 1000 "$chunk" < <(seq 1 10000)
		[ "$status" -eq 0 ]
		jqe "$output" '.total == 48894 and .cut'
		jqe "$output" '.text | startswith("1\n2\n3\n") and endswith("9998\n9999\n10000\n")'
		jqe "$output" '.text | test("\\[\\.\\.\\. 47894 bytes left out here; the full output is in /workspace/full \\.\\.\\.\\]")'
	done
}

@test "capture: a stream just past the cap keeps exactly its last half cap, bytes kept before the cap passed included" {
	local in
	in=$(mktemp "$BATS_TEST_TMPDIR/in.XXXXXX")
	seq 1 300 >"$in" # 1,092 bytes: the last 500 are mostly bytes that came before the cap passed
	for chunk in 1 7 300 995 1092; do
		run "$HELPER" capture 1000 "$chunk" <"$in"
		[ "$status" -eq 0 ]
		printf '%s' "$output" | jq -e --rawfile s "$in" \
			'.total == 1092 and .cut and .text == $s[:500] + "\n[... 92 bytes left out here; the full output is in /workspace/full ...]\n" + $s[-500:]' >/dev/null
	done
}

@test "capture: a cut falls between characters: no U+FFFD appears where a character was split" {
	# 3-byte characters through a cap that splits them at both ends of the gap.
	run "$HELPER" capture 1001 13 < <(for _ in $(seq 2000); do printf '\xe2\x82\xac'; done)
	[ "$status" -eq 0 ]
	jqe "$output" '.cut and (.text | contains("\ufffd") | not)'
	jqe "$output" '.text | startswith("€€€") and endswith("€€€")'
}

@test "result: two big streams fit the budget, each keeps its head and tail, the split is fair" {
	# (At the smallest budget, 4 KiB, the fixed part leaves no room for either stream's text.)
	seq 1 200000 >"$BATS_TEST_TMPDIR/out"
	seq 1 100000 | sed 's/^/e/' >"$BATS_TEST_TMPDIR/err"
	for max in 8192 32768 131072; do
		run "$HELPER" result "$max" "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/err"
		[ "$status" -eq 0 ]
		[ "${lines[1]#size }" -le "$max" ]
		r=${lines[0]}
		jqe "$r" '.structuredContent | (.stdout | startswith("1\n2\n")) and (.stdout | endswith("199999\n200000\n"))'
		jqe "$r" '.structuredContent | (.stderr | startswith("e1\ne2\n")) and (.stderr | endswith("e100000\n"))'
		jqe "$r" '.structuredContent.truncated | .stdout and .stderr and .stdout_bytes == 1288895 and .stderr_bytes == 688895'
		# Fair: neither stream gets much less than the other.
		jqe "$r" '.structuredContent | (.stdout | length) as $o | (.stderr | length) as $e | $o < 2 * $e + 512 and $e < 2 * $o + 512'
		# The text block says the same as structuredContent.
		jqe "$r" '.content[0].text | contains("--- stdout ---") and contains("(stdout was cut: 1288895 bytes in all; full text in /workspace/.sandbox/output/call-1.stdout)")'
	done
}

@test "result: control bytes count as what they cost in JSON (six each), not as one byte" {
	head -c 20000 /dev/zero >"$BATS_TEST_TMPDIR/out"
	: >"$BATS_TEST_TMPDIR/err"
	run "$HELPER" result 8192 "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/err"
	[ "$status" -eq 0 ]
	[ "${lines[1]#size }" -le 8192 ]
	jqe "${lines[0]}" '.structuredContent.truncated.stdout and (.structuredContent.stdout | length) > 100'
}

@test "schema: the tools' input schemas take what they document and say what is wrong" {
	[ "$("$HELPER" schema execute_python.input.json <<<'{"script":"print(1)","timeout_s":5}')" = ok ]
	[ "$("$HELPER" schema execute_python.input.json <<<'{"timeout_s":5}')" = "script: is required" ]
	[ "$("$HELPER" schema execute_python.input.json <<<'{"script":7}')" = "script: must be a string" ]
	[ "$("$HELPER" schema execute_python.input.json <<<'{"script":"x","timeout_s":0}')" = "timeout_s: must be above 0" ]
	[ "$("$HELPER" schema execute_python.input.json <<<'{"script":"x","code":"y"}')" = "code: is not a known argument" ]
	[ "$("$HELPER" schema execute_python.input.json <<<'{"script":""}')" = "script: must not be empty" ]
	[[ "$("$HELPER" schema execute_python.input.json <<<'{"script":"x","requirements":[1]}')" == "requirements[0]: must be a string" ]]
	[ "$("$HELPER" schema execute_bash_commands.input.json <<<'{"code":"true","env":{"A":"1"}}')" = ok ]
	[[ "$("$HELPER" schema execute_bash_commands.input.json <<<'{"code":"true","env":{"1A":"1"}}')" == 'env["1A"]: '* ]]
	[ "$("$HELPER" schema cleanup_sandbox.input.json <<<'{}')" = ok ]
	# Lengths are in characters: 1024 two-byte ones fit a 1024-character limit, 1025 do not.
	local k
	k=$(printf '\xc3\xa9%.0s' $(seq 1024))
	[ "$("$HELPER" schema execute_bash_commands.input.json <<<"{\"code\":\"x\",\"files\":{\"$k\":\"v\"}}")" = ok ]
	[[ "$("$HELPER" schema execute_bash_commands.input.json <<<"{\"code\":\"x\",\"files\":{\"${k}a\":\"v\"}}")" == *"is longer than 1024 characters" ]]
}

@test "schema: minLength and maxLength count characters of 1 to 4 bytes at every boundary, mixed or not" {
	# collect's items: 1 to 1024 characters. Strings of 1, 2, 3 and 4-byte characters and
	# mixes of them, around both limits and where their bytes cross the limit while their
	# characters do not (and the other way); each against what Python counts.
	local line want s got bad=0 n=0
	while IFS=$'\t' read -r want s; do
		got=$("$HELPER" schema execute_bash_commands.input.json <<<"{\"code\":\"x\",\"collect\":[$s]}")
		n=$((n + 1))
		if [ "$want" = ok ]; then
			[ "$got" = ok ] || { echo "refused ${s:0:40}...: $got" >&2; bad=1; }
		else
			[ "$got" != ok ] || { echo "took ${s:0:40}..." >&2; bad=1; }
		fi
	done < <(python3 - <<-'EOF2'
		import json, random
		r = random.Random(3)
		chars = ["a", "\u00e9", "\u20ac", "\U0001F600", "\x00"]
		cases = []
		for c in chars:
		    for k in (0, 1, 2, 255, 256, 257, 341, 342, 1023, 1024, 1025, 1026):
		        cases.append(c * k)
		for k in (0, 1, 2, 3, 4, 255, 256, 257, 1023, 1024, 1025):
		    for total in (1023, 1024, 1025):
		        if k <= total:
		            cases.append("\U0001F600" * k + "a" * (total - k))
		            cases.append("a" * (total - k) + "\u00e9" * k)
		for _ in range(40):
		    total = r.choice([1, 2, 1022, 1023, 1024, 1025, 1026])
		    cases.append("".join(r.choice(chars[:4]) for _ in range(total)))
		for s in cases:
		    ok = 1 <= len(s) <= 1024
		    print("ok" if ok else "refused", json.dumps(s, ensure_ascii=False), sep="\t")
	EOF2
	)
	[ "$n" -gt 100 ]
	[ "$bad" = 0 ]
}

@test "requirement: plain PEP 508 requirements pass; options, separators, URLs and paths do not" {
	for r in numpy 'requests==2.32.3' 'requests[socks]>=2.31' 'pkg; python_version < "3.9"' 'a-b.c_d~=1.0'; do
		[ "$("$HELPER" requirement --online "$r")" = ok ] || { echo "refused: $r" >&2; false; }
	done
	for r in '-r x' '--index-url=http://x' 'pkg @ https://example.com/x.whl' './local' 'x.whl' 'x.tar.gz' \
		"$(printf 'pkg\v-r x')" "$(printf 'pkg\x1c')" "$(printf 'p\xc2\x85kg')" ''; do
		[[ "$("$HELPER" requirement --online "$r")" == refused:* ]] || { echo "passed: $r" >&2; false; }
	done
	# Without a network (a wheelhouse, --network none) a path or a URL may name a local wheel,
	# but never an option or a line separator.
	[ "$("$HELPER" requirement ./local)" = ok ]
	[[ "$("$HELPER" requirement '-r x')" == refused:* ]]
	[[ "$("$HELPER" requirement "$(printf 'pkg\f-r x')")" == refused:* ]]
}

@test "frames: what one side encodes the other decodes; a short or overlong frame is refused" {
	f=$("$HELPER" frame-encode ab "" "$(printf 'x%.0s' $(seq 300))")
	run "$HELPER" frame-decode "$f" 3
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = str:ab ]
	[ "${lines[1]}" = str: ]
	[ "${lines[2]}" = "str:$(printf 'x%.0s' $(seq 300))" ]
	# Reading past the payload: bad.
	run "$HELPER" frame-decode "$f" 4
	[ "${lines[3]}" = bad ]
	# A length that does not match what came, a zero length, one past AG_MAX_FRAME: bad.
	[ "$("$HELPER" frame-decode "${f%??}" 1)" = bad ]
	[ "$("$HELPER" frame-decode 0000000003 1)" = bad ]
	[ "$("$HELPER" frame-decode 0100000403 1)" = bad ]
	# A str whose length runs past the frame: bad.
	[ "$("$HELPER" frame-decode 090000000310000000616263 1)" = bad ]
}

@test "beneath: writes land below the folder, whole and byte-exact; planted links and FIFOs never lead out or block" {
	local d="$BATS_TEST_TMPDIR/d" out="$BATS_TEST_TMPDIR/outside"
	mkdir -p "$d" "$out"
	echo secret >"$out/secret"
	# Every byte value, in folders made on the way, with the mode asked for.
	python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 3)' >"$BATS_TEST_TMPDIR/all"
	[ "$("$HELPER" beneath write "$d" a/b/all.bin 755 <"$BATS_TEST_TMPDIR/all")" = ok ]
	cmp "$BATS_TEST_TMPDIR/all" "$d/a/b/all.bin"
	[ "$(stat -c %a "$d/a/b/all.bin")" = 755 ]
	# A symlink at the name is replaced, its target untouched; a FIFO is replaced, never opened.
	ln -s "$out/secret" "$d/link"
	mkfifo "$d/fifo"
	[ "$(echo new | timeout 5 "$HELPER" beneath write "$d" link)" = ok ]
	[ "$(echo new | timeout 5 "$HELPER" beneath write "$d" fifo)" = ok ]
	[ -f "$d/link" ]
	[ ! -L "$d/link" ]
	[ -f "$d/fifo" ]
	[ "$(cat "$d/fifo")" = new ]
	[ "$(cat "$out/secret")" = secret ]
	# A symlink on the way is never followed, for a write, a folder or a removal.
	ln -s "$out" "$d/up"
	[ "$(echo x | "$HELPER" beneath write "$d" up/secret)" = "$(python3 -c 'import os; print(os.strerror(40))')" ]
	run "$HELPER" beneath mkdir "$d" up/new
	[ "$status" -eq 1 ]
	run "$HELPER" beneath remove "$d" up/secret
	[ "$status" -eq 1 ]
	[ "$(cat "$out/secret")" = secret ]
	[ ! -e "$out/new" ]
	# Names that climb or are not plain are refused.
	for rel in ../x a/../../x /abs ./x a//b "" a/.; do
		run "$HELPER" beneath write "$d" "$rel" <<<x
		[ "$status" -eq 1 ] || { echo "accepted: $rel"; false; }
		[ "$output" = "Invalid argument" ]
	done
	# A folder: made, and an existing one is fine; a file in the way is not a folder.
	[ "$("$HELPER" beneath mkdir "$d" e/f 700)" = ok ]
	[ "$(stat -c %a "$d/e/f")" = 700 ]
	[ "$("$HELPER" beneath mkdir "$d" e/f)" = ok ]
	[ "$("$HELPER" beneath mkdir "$d" link)" = "File exists" ]
	# Removals: a file, a symlink (not its target), an empty folder; a full one stays.
	[ "$("$HELPER" beneath remove "$d" up)" = ok ]
	[ -d "$out" ]
	[ "$("$HELPER" beneath remove "$d" e/f)" = ok ]
	[ ! -e "$d/e/f" ]
	[ "$("$HELPER" beneath remove "$d" a/b)" = "Directory not empty" ]
	[ "$("$HELPER" beneath remove "$d" missing/x)" = ok ]
	# Nothing of a temporary name is left behind.
	[ -z "$(find "$d" -name '.sandbox-mcp-write-*')" ]
}

@test "multipart: a bulk download's parts, by Content-Length even when a file holds the boundary; a cut body is malformed" {
	mp="$BATS_TEST_TMPDIR/mp"
	python3 - "$mp" <<-'EOF'
		import sys
		B = b'DAYTONA-FILE-BOUNDARY'
		def part(name, fn, data, length=True):
		    h = b'Content-Disposition: form-data; name="%s"; filename="%s"\r\n' % (name, fn)
		    if length:
		        h += b'Content-Type: application/octet-stream\r\nContent-Length: %d\r\n' % len(data)
		    return b'--' + B + b'\r\n' + h + b'\r\n' + data + b'\r\n'
		tricky = bytes(range(256)) + b'\r\n--' + B + b'--\r\n'
		body = (part(b'file', b'/tmp/x/out/0', tricky) + part(b'file', b'/tmp/a\\"b', b'')
		        + part(b'error', b'/tmp/gone', b'{"statusCode":404}', length=False) + b'--' + B + b'--\r\n')
		open(sys.argv[1], 'wb').write(body)
		open(sys.argv[1] + '.cut', 'wb').write(body[:len(body) // 2])
		open(sys.argv[1] + '.hex', 'w').write(tricky.hex())
	EOF
	run "$HELPER" multipart <"$mp"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	[ "${lines[0]}" = "file /tmp/x/out/0 285 $(cat "$mp.hex")" ]
	[ "${lines[1]}" = 'file /tmp/a"b 0 ' ]
	[ "${lines[2]}" = "error /tmp/gone 18 $(printf '{"statusCode":404}' | od -An -tx1 -v | tr -d ' \n')" ]
	[ "${lines[3]}" = end ]
	run "$HELPER" multipart <"$mp.cut"
	[ "$status" -eq 1 ]
	[ "${lines[-1]}" = malformed ]
	run "$HELPER" multipart <<<'{"files": []}'
	[ "$status" -eq 1 ]
	[ "$output" = malformed ]
}

@test "b64-decode: every length mod 4, with and without padding, spaces and line breaks anywhere" {
	local cases
	cases=$(python3 - <<-'EOF2'
		import base64, random
		r = random.Random(11)
		for n in list(range(0, 70)) + [1000, 4095, 4096, 65537]:
		    b = bytes(r.randrange(256) for _ in range(n))
		    e = base64.b64encode(b).decode()
		    spaced = "".join(c + (r.choice([" ", "\n", "\r\n", "\t"]) if r.random() < 0.1 else "") for c in e)
		    wrapped = "\n".join(e[i:i + 76] for i in range(0, len(e), 76)) + "\n"
		    for text in (e, e.rstrip("="), spaced, wrapped):
		        print(text.encode().hex(), b.hex())
	EOF2
	)
	local bad=0 enc want got
	while read -r enc want; do
		got=$(printf '%s' "$enc" | xxd -r -p | "$HELPER" b64-decode)
		[ "$got" = "$want" ] || { echo "for $enc: $got, not $want" >&2; bad=1; }
	done <<<"$cases"
	[ "$bad" = 0 ]
}

@test "b64-decode: refuses a stray length, bad padding, data after padding and foreign characters" {
	for bad in 'Z' 'Zm9vY' 'Zh==' 'Zm9=' 'Zg===' 'Zg==Zg==' '=Zg' 'Zm9v!' 'Zm9v-_' 'Zm9v
Y'; do
		[ "$(printf '%s' "$bad" | "$HELPER" b64-decode)" = refused ] || { echo "took $bad" >&2; false; }
	done
	# A foreign character at any place of a long run (checked eight at a time when sizing).
	local i s
	for i in $(seq 0 23); do
		s=$(printf 'Zm9vYmFyYmF6cXV4cXV1eHh5' | sed -E "s/^(.{$i})./\1!/")
		[ "$(printf '%s' "$s" | "$HELPER" b64-decode)" = refused ] || { echo "took $s" >&2; false; }
	done
	# Padding is optional, and a group's spaces and line breaks are skipped.
	[ "$(printf 'Zg' | "$HELPER" b64-decode)" = 66 ]
	[ "$(printf 'Zm 9v\r\nYg==' | "$HELPER" b64-decode)" = 666f6f62 ]
	[ "$(printf '' | "$HELPER" b64-decode)" = "" ]
}

@test "b64-decode: sizing agrees with decoding, byte for byte, with '=', a space or a foreign byte at every offset" {
	# Every length of input up to 34 characters, each with one of '=', a space, a line break,
	# a tab, a carriage return or a foreign byte put at (or put in place of the character at)
	# every offset: an eight-character sizing block, a four-character decoding group, the tail
	# after the last block. The reference reads one character at a time. The helper decodes
	# into exactly as many bytes as sizing said (a sanitizer build sees a write past them).
	python3 - "$BATS_TEST_TMPDIR/in" "$BATS_TEST_TMPDIR/want" <<-'EOF2'
		import base64, random, sys
		r = random.Random(17)
		vals = {c: i for i, c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
		def ref(s):
		    acc = bits = pad = 0
		    o = bytearray()
		    for c in s:
		        if c in b" \t\r\n":
		            continue
		        if c == ord("="):
		            pad += 1
		            continue
		        if c not in vals or pad:
		            return "refused"
		        acc = (acc << 6 | vals[c]) & 0xfff
		        bits += 6
		        if bits >= 8:
		            bits -= 8
		            o.append(acc >> bits & 0xff)
		    if bits >= 6 or pad > 2 or acc & ((1 << bits) - 1):
		        return "refused"
		    return o.hex()
		specials = [b"=", b"==", b" ", b"\n", b"\r\n", b"\t", b"!", b"-", b"_", b".", b"\x00", b"\x80", b"\xff", b"A"]
		ins = []
		for n in range(0, 27):
		    e = base64.b64encode(bytes(r.randrange(256) for _ in range(n)))
		    for text in {e, e.rstrip(b"=")}:
		        ins.append(text)
		        for k in range(len(text) + 1):
		            for sp in specials:
		                ins.append(text[:k] + sp + text[k:])
		                if k < len(text):
		                    ins.append(text[:k] + sp + text[k + 1:])
		# Long runs (the eight-at-a-time sizing loop over many blocks) with one special near the end.
		for n in (48, 96, 3000):
		    e = base64.b64encode(bytes(r.randrange(256) for _ in range(n)))
		    for k in range(len(e) - 20, len(e) + 1):
		        for sp in specials:
		            ins.append(e[:k] + sp + e[k:])
		with open(sys.argv[1], "w") as f, open(sys.argv[2], "w") as g:
		    for s in ins:
		        f.write(s.hex() + "\n")
		        g.write(ref(s) + "\n")
	EOF2
	"$HELPER" b64-lines <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/got"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/got")" -gt 20000 ]
	run ! grep -m3 differs "$BATS_TEST_TMPDIR/got"
	cmp "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got" || {
		paste -d' ' "$BATS_TEST_TMPDIR/in" "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got" | awk '$2 != $3' | head -5 >&2
		false
	}
	# Each kind of input was seen both refused and taken.
	[ "$(grep -c '^refused$' "$BATS_TEST_TMPDIR/got")" -gt 5000 ]
	[ "$(grep -vc '^refused$' "$BATS_TEST_TMPDIR/got")" -gt 5000 ]
}

@test "cursor: names the path its page stopped at, and a cursor the server did not make is refused" {
	for p in f100 'a/b c/é.txt' "$(printf 'abcdefghi/%.0s' $(seq 102))xyzw" 'z'; do
		c=$("$HELPER" cursor make "$p")
		[[ "$c" =~ ^a[0-9a-f]{16}[A-Za-z0-9+/=]+$ ]]
		[ "$("$HELPER" cursor parse "$c")" = "$p" ]
	done
	c=$("$HELPER" cursor make f100)
	# Another path under the same check, a changed check, a cut cursor, spaces, an index, a
	# path resources/read refuses (its check made to match), and nothing at all.
	other=$("$HELPER" cursor make f101)
	dotdot=$("$HELPER" cursor make ../x)
	for bad in "${c:0:17}${other:17}" "${c:0:5}$([ "${c:5:1}" = 0 ] && echo 1 || echo 0)${c:6}" "${c:0:${#c}-4}" "${c:0:20} ${c:20}" 100 "$dotdot" "" a; do
		[ "$("$HELPER" cursor parse "$bad")" = refused ] || { echo "took $bad" >&2; false; }
	done
}

@test "loadb: a special byte at every offset mod 8 of a long string, at its end and at the buffer's, read as jansson reads it" {
	# A long string (past the 1024 bytes that the server decodes itself) of plain bytes with one
	# special piece: an escape, a quote, a control byte, a character of 2, 3 or 4 bytes, or
	# invalid UTF-8 (cut, overlong, a surrogate, split across two eight-byte blocks), put at
	# each offset mod 8 from the string's start, from its end and from the buffer's end, the
	# string closed or running to the end of the buffer. The helper gives the reader a buffer
	# of the line's exact size (a sanitizer build sees a read past it).
	python3 - "$BATS_TEST_TMPDIR/lines" <<-'EOF2'
		import sys
		specials = [b'\\"', b'\\\\', b'\\n', b'\\/', b'\\u00e9', b'\\ud83d\\ude00', b'"', b'\x00', b'\x01', b'\x1f',
		            b'\x7f', b' ', '\u00e9'.encode(), '\u20ac'.encode(), '\U0001F600'.encode(), b'\x80', b'\xc3',
		            b'\xc3A', b'\xe2\x82', b'\xe2\x82A', b'\xf0\x9f\x98', b'\xf0\x9f\x98A', b'\xc0\x80',
		            b'\xed\xa0\x80', b'\xf4\x90\x80\x80', b'\xf5\x80\x80\x80', b'\xff', b'\\', b'\\u12', b'\\ud83d']
		out = []
		for lead in (b'', b'[1,'):
		    close = b']' if lead else b''
		    for p in list(range(0, 9)) + list(range(1016, 1033)):
		        for sp in specials:
		            for t in list(range(0, 10)) + [15, 16, 17, 1030]:
		                if p + t < 1030:
		                    continue
		                body = b'x' * p + sp + b'y' * t
		                out.append(lead + b'"' + body + b'"' + close)
		                out.append(lead + b'"' + body)
		open(sys.argv[1], "wb").write(b"\n".join(out) + b"\n")
	EOF2
	out=$("$HELPER" loadb <"$BATS_TEST_TMPDIR/lines")
	[ "$(wc -l <<<"$out")" -gt 15000 ]
	[ "$(grep -c '^same$' <<<"$out")" -gt 3000 ]
	[ "$(grep -c '^same error$' <<<"$out")" -gt 10000 ]
	[ "$(grep -c '^same' <<<"$out")" -eq "$(wc -l <"$BATS_TEST_TMPDIR/lines")" ] || { grep -m5 differs <<<"$out" >&2; false; }
}

@test "loadb: a long string is read as jansson reads it, escapes, UTF-8 and every refusal alike" {
	python3 - "$BATS_TEST_TMPDIR/lines" <<-'EOF2'
		import random, sys
		r = random.Random(5)
		L = 1100
		pieces = [b'a', b'\\"', b'\\\\', b'\\/', b'\\b', b'\\f', b'\\n', b'\\r', b'\\t', b'\\u0000', b'\\u00e9',
		          b'\\u20AC', b'\\ud83d\\ude00', '\u00e9'.encode(), '\u20ac'.encode(), '\U0001F600'.encode(), b' ']
		bad = [b'\\ud83d', b'\\ude00', b'\\ud83dx', b'\\x', b'\\u12', b'\\u12G4', b'\x01', b'\x1f', b'\xff',
		       b'\xc0\x80', b'\xed\xa0\x80', b'\xf4\x90\x80\x80', b'\xe2\x82', b'\t']
		def body(n, extra=None):
		    s = b"".join(r.choice(pieces) for _ in range(n))
		    if extra is not None:
		        k = r.randrange(len(s) + 1)
		        while s[:k].endswith(b"\\") and not s[:k].endswith(b"\\\\"):
		            k -= 1
		        s = s[:k] + extra + s[k:]
		    return s
		out = []
		for _ in range(40):
		    out.append(b'{"a":"%s","k":[1,"%s",{"x":"%s"}]}' % (body(L), body(5), body(L)))
		    out.append(b'"%s"' % body(L))
		    out.append(b'{"%s":"v"}' % body(L))
		for b in bad:
		    out.append(b'{"a":"%s"}' % body(L, b))
		    out.append(b'["%s"' % body(L))
		    out.append(b'{"a":"%s"} x' % body(L))
		out.append(b'{"a":"%s\\' % (b"x" * L))
		out.append(b'{"a":"%s\\\\"}' % (b"x" * L))
		open(sys.argv[1], "wb").write(b"\n".join(out) + b"\n")
	EOF2
	out=$("$HELPER" loadb <"$BATS_TEST_TMPDIR/lines")
	[ "$(grep -c '^same$' <<<"$out")" -ge 80 ]
	[ "$(grep -c '^same error$' <<<"$out")" -ge 40 ]
	[ "$(grep -c '^same' <<<"$out")" -eq "$(wc -l <"$BATS_TEST_TMPDIR/lines")" ] || { grep -m5 differs <<<"$out" >&2; false; }
}
