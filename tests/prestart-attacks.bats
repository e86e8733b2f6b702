#!/usr/bin/env bats
# Attacks on the starter code that a sandbox's first interpreter ahead compiles and hands the
# agent ('C', before its 'R'), and that every later one loads instead of compiling (agent/
# prestart.c, agent/prestart.py): frames of that code that are empty, too big, never ending,
# early, late or twice; code that cannot be loaded; what of fd 5 a call could see; code that
# forges the frame beside an interpreter still starting.
load lib/helpers
load lib/prestart
bats_require_minimum_version 1.5.0

teardown() { [ -z "${UNPRIV_DIR:-}" ] || unprivileged_teardown; }

# attack_session MODE N: a session whose --python is lib/prestart-attack-wrap.py in the
# workspace, in MODE; call 1 puts it there, call 2 (pass) starts the first interpreter ahead,
# calls 3..N print their number, and call N+1 prints /workspace/wrapped.
attack_session() {
	local mode=$1 n=$2 files i
	files=$(jq -cn --rawfile w "$TESTS_DIR/lib/prestart-attack-wrap.py" --arg m "$mode" '{code: "chmod +x py", files: {py: $w, "wrap-mode": $m}}')
	{
		echo "$INIT"
		call_json 1 execute_bash_commands "$files"
		echo '{"wait": 1}'
		for i in $(seq 2 "$n"); do
			py_call "$i" "print($i)"
			echo "{\"wait\": $i}"
		done
		py_call $((n + 1)) 'print(open("/workspace/wrapped").read(), end="")'
	} >"$BATS_TEST_TMPDIR/attack.script"
	: >"$SERVER_LOG"
	mcp_session --log-level debug --no-sandbox-ahead --python /workspace/py <"$BATS_TEST_TMPDIR/attack.script"
	for i in $(seq 2 "$n"); do
		res "$i"
		sc ".exit_code == 0 and .stdout == \"$i\n\""
	done
	res $((n + 1))
	sc '.exit_code == 0'
	wrapped=$(jq -r '.structuredContent.stdout' <<<"$result")
}

@test "prestart-attacks: a starter code frame that is empty, over 1 MiB, 4 GiB long, early, late or sent twice costs a plain start, never a call or the server" {
	# The control: the wrapper itself changes nothing, and later interpreters load the code.
	attack_session plain 4
	[ -n "$(kept)" ]
	local mode t0
	for mode in empty big huge early after; do
		t0=$SECONDS
		echo "# $mode" >&3
		attack_session "$mode" 3
		# The agent took no code from it: every later interpreter compiled the source again.
		[ -z "$(kept)" ] || { echo "$mode: kept $(kept | tr '\n' ' ')"; false; }
		run ! grep -q ' M$' <<<"$wrapped"
		grep -q "^$mode S$" <<<"$wrapped"
		# A stalled frame is given up on in bounded time.
		[ $((SECONDS - t0)) -lt 30 ] || { echo "$mode: $((SECONDS - t0)) s"; false; }
	done
	# A second 'C' is not taken over the first: later ones load the real code.
	attack_session two 4
	[ -n "$(kept)" ]
}

@test "prestart-attacks: code kept that no interpreter can load is forgotten at the first that fails, however its end is heard" {
	# Junk, and a real code object that raises as it is loaded: each is kept (its 'R' is
	# trusted), the next interpreter given it ends while it starts, and the one after compiles
	# the source again: never two in a row given the code.
	local mode
	for mode in ${ATTACK_MODES:-junk raises}; do
		attack_session "$mode" 7
		[ -z "$(kept)" ]
		grep -q "^$mode M$" <<<"$wrapped" || { echo "$mode: $wrapped"; false; }
		run grep -Pzq "$mode M\n$mode M\n" <<<"$wrapped"
		[ "$status" -eq 1 ] || { echo "$mode: two in a row given the code: $wrapped"; false; }
	done
	# 1 MiB of code, more than a pipe holds unprivileged: forgotten, not every later start
	# given up on (each compiles the source; calls still run in interpreters started ahead).
	attack_session mib 6
	[ "$(grep -c '^mib S$' <<<"$wrapped")" -ge 3 ] || { echo "mib: $wrapped"; false; }
	[ "$(prestarted | wc -l)" -ge 2 ]
}

@test "prestart-attacks: an interpreter that stalls in the middle of its starter code frame holds up one call at most, then none starts again" {
	# The first 100 bytes of its 'C', then nothing for 30 s: the agent waits no longer for it
	# than for one that never says it is ready (one call, up to 10 s), and starts none again in
	# this sandbox (each would hold up a call as long).
	attack_session slow 5
	[ -z "$(kept)" ]
	[ "$wrapped" = "slow S" ] || { echo "started: $wrapped"; false; }
	local ms
	ms=$(printf '%s\n' "$output" | jq -s '[.[] | select((.id | type) == "number" and .id >= 3) | .result.structuredContent.duration_ms]')
	jq -e 'length == 4 and .[0] < 15000 and (.[1:] | max) < 5000' <<<"$ms" || { echo "durations: $ms"; false; }
}

# fd5_look ARGS...: a probe of what a call could see of fd 5 and of loading the code, run in a
# plain start, in the first interpreter ahead (which compiled the source) and in the next ones
# (which loaded the code); $looks: the three stdouts, one per line.
fd5_look() {
	local probe='import gc, os, sys, types
print(sorted(os.listdir("/proc/self/fd")), "marshal" in sys.modules, sorted(sys.modules), sorted(globals()),
      sorted(k for k in vars(sys.modules["__main__"]) if k.startswith("_")),
      [o.co_name for o in gc.get_objects() if isinstance(o, types.CodeType) and o.co_name in ("_serve", "_nodump")],
      [type(o).__name__ for o in gc.get_objects() if isinstance(o, (bytes, bytearray)) and len(o) > 20000])'
	mcp_session --log-level debug --no-sandbox-ahead "$@" <<-EOF
		$INIT
		$(py_call 1 "$probe")
		{"wait": 1}
		$(py_call 2 "$probe")
		{"wait": 2}
		$(py_call 3 "$probe")
		{"wait": 3}
		$(py_call 4 "$probe")
	EOF
	[ "$(prestarted | tr '\n' ' ')" = "2 3 4 " ]
	[ "$(kept | tr '\n' ' ')" = "3 4 " ]
	[ "$(printf '%s\n' "$output" | jq -s '[.[] | select((.id | type) == "number" and .result.structuredContent.exit_code == 0)] | length')" = 4 ]
	looks=$(printf '%s\n' "$output" | jq -r 'select((.id | type) == "number") | .result.structuredContent | select(.exit_code == 0) | .stdout' | sed '/^$/d' | sort -u)
}

@test "prestart-attacks: nothing of fd 5 or of loading the starter code reaches a call: the same as a plain start, compiled or loaded" {
	fd5_look
	[ "$(wc -l <<<"$looks")" -eq 1 ] || { echo "$looks"; false; }
	[[ "$looks" == "['0', '1', '2', '3'] True "* ]]
}

@test "prestart-attacks: nothing of fd 5 or of loading the starter code reaches a call (not root)" {
	unprivileged_server
	fd5_look
	[ "$(wc -l <<<"$looks")" -eq 1 ] || { echo "$looks"; false; }
}
