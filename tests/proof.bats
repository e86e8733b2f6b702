# Proof under faults and load, in short forms CI can afford: a libFuzzer run over the message
# path, a soak of mixed calls on one server, and valgrind's memcheck on a session. The long
# forms are make targets (make fuzz FUZZ_SECONDS=0, make soak, make valgrind; see doc/testing.md).
# The fuzz run executes 1,000 inputs however busy the machine is (its time is only a bound), and
# the soak and valgrind want a CPU: the file runs alone (tests/lib/run.py).
# suite: serial
# suite: uses docker
load lib/helpers
load lib/docker-setup

setup_file() {
	docker_setup_file
}

teardown_file() {
	docker_teardown_file
}

@test "fuzz: libFuzzer over the message path finds nothing in 1,000 inputs (make fuzz)" {
	command -v clang >/dev/null || skip_or_fail "clang is not installed (scripts/deps.sh test installs it)"
	run make -C "$REPO_DIR" -s fuzz FUZZ_RUNS=1000 FUZZ_SECONDS=600
	echo "$output" | grep -vE '^#[0-9]+' | tail -20
	[ "$status" -eq 0 ]
	# It really ran: libFuzzer's closing statistics, with inputs executed.
	[[ "$output" =~ stat::number_of_executed_units:\ +([0-9]+) ]]
	[ "${BASH_REMATCH[1]}" -ge 1000 ]
	[ -z "$(ls "$REPO_DIR"/build/fuzz/crash-* "$REPO_DIR"/build/fuzz/leak-* 2>/dev/null)" ]
}

@test "soak: 300 mixed calls on one server of the release build: RSS growth under 1 MiB, fds constant, nothing left (make soak)" {
	run make -C "$REPO_DIR" -s soak SOAK_CALLS=300
	echo "$output"
	[ "$status" -eq 0 ]
	jqe "${lines[-1]}" '.calls == 300 and .rss_growth_kb < 1024 and .fds_warm == .fds_end and .left == [] and .bad == []'
}

@test "memory: an idle server of the release build gives back what its megabyte results used: its RSS falls to where it was" {
	local t=$BATS_TEST_TMPDIR/mem call
	# The release build, as the soak's: ASan's quarantine keeps what is freed by design. The
	# baseline is taken after a first small call, once the server holds what any call needs.
	run make -C "$REPO_DIR" -s proof-build
	[ "$status" -eq 0 ]
	# sh $t FIELD: that field of the server's /proc status, in KiB.
	printf 'awk -v f="$1:" '\''$1 == f {print $2}'\'' /proc/$(cat %s)/status\n' "$BATS_TEST_TMPDIR/pid" >"$t"
	call=$(jq -cn '{code: "head -c 1000000 /dev/zero | tr \"\\0\" a"}')
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 60 --pidfile "$BATS_TEST_TMPDIR/pid" -- "$REPO_DIR/build/proof/sandbox-mcp" \
		--output-cap 2M --result-max 3M <<EOF
$INIT
$INITIALIZED
$(call_json 0 execute_bash_commands '{"code":"true"}')
{"wait": 0}
{"sh": "sh $t VmRSS > $t.before"}
$(call_json 1 execute_bash_commands "$call")
{"wait": 1}
$(call_json 2 execute_bash_commands "$call")
{"wait": 2}
$(call_json 3 execute_bash_commands "$call")
{"wait": 3}
{"sh": "sh $t VmHWM > $t.peak"}
{"until": "[ \$(sh $t VmRSS) -le \$((\$(cat $t.before) + 1024)) ]"}
EOF
	[ "$status" -eq 0 ]
	res 3
	sc '(.stdout | length) == 1000000'
	# The answers did take memory: the peak is megabytes above where it was before them.
	echo "before: $(cat "$t.before") KiB, peak: $(cat "$t.peak") KiB"
	[ "$(cat "$t.peak")" -ge $(($(cat "$t.before") + 4096)) ]
}

# valgrind_session BACKEND: 60 calls under memcheck; every answer right, nothing left, and the
# server's log names no error and no definite leak.
valgrind_session() {
	command -v valgrind >/dev/null || skip_or_fail "valgrind is not installed (scripts/deps.sh test installs it)"
	run make -C "$REPO_DIR" -s valgrind VALGRIND_BACKEND="$1" VALGRIND_CALLS=60 VALGRIND_LOG="$BATS_TEST_TMPDIR/vg.log"
	echo "$output"
	cat "$BATS_TEST_TMPDIR/vg.log"
	[ "$status" -eq 0 ]
	jqe "${lines[-1]}" '.calls == 60 and .bad == [] and .left == []'
	# memcheck ran the server to its end and counted nothing; definite leaks count as errors.
	grep -q 'ERROR SUMMARY: 0 errors' "$BATS_TEST_TMPDIR/vg.log"
	grep -qE 'definitely lost: 0 bytes|All heap blocks were freed' "$BATS_TEST_TMPDIR/vg.log"
	run grep -E 'Invalid (read|write|free)|uninitialised|Mismatched|overlap' "$BATS_TEST_TMPDIR/vg.log"
	[ "$status" -eq 1 ]
}

@test "valgrind: a session of calls on the local backend has no memory error and no definite leak (make valgrind)" {
	valgrind_session local
}

@test "valgrind: a session of calls on the Docker backend has no memory error and no definite leak (make valgrind)" {
	with_backend docker
	valgrind_session docker
}
