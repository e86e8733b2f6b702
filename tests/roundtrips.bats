# How many requests a call costs the sandbox's agent: the files a call leaves in outputs/ come
# back with the run's end, not one request each. Each case runs on local and on Docker.
# suite: uses docker
load lib/helpers
load lib/docker-setup

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }

bash_call() { # ID CODE
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" '{code: $c}')"
}

# agent_requests FROM TO: the agent requests the server logged between two line counts of its log.
agent_requests() {
	sed -n "$(($1 + 1)),$2p" "$SERVER_LOG" | grep -c "sandbox agent request" || true
}

twenty_files_case() {
	with_backend "$1"
	mcp_session --log-level debug <<EOF
$INIT
$(bash_call 1 'true')
{"wait": 1}
{"sh": "wc -l < $SERVER_LOG > $BATS_TEST_TMPDIR/l1"}
$(bash_call 2 'mkdir -p outputs; for i in $(seq -w 1 20); do echo "file $i" > outputs/f$i.txt; done')
{"wait": 2}
{"sh": "wc -l < $SERVER_LOG > $BATS_TEST_TMPDIR/l2"}
$(bash_call 3 'true')
{"wait": 3}
{"sh": "wc -l < $SERVER_LOG > $BATS_TEST_TMPDIR/l3"}
$(bash_call 4 'echo changed > outputs/f07.txt; rm outputs/f08.txt outputs/f09.txt; ln -s /etc/passwd outputs/f08.txt; mkfifo outputs/f09.txt')
{"wait": 4}
{"sh": "wc -l < $SERVER_LOG > $BATS_TEST_TMPDIR/l4"}
EOF
	res 2
	sc '(.artifacts | length) == 20 and all(.artifacts[]; .shown == "text")'
	sc '[.artifacts[].text] == [range(1; 21) | "file \(if . < 10 then "0" else "" end)\(.)\n"]'
	local l1 l2 l3 l4
	l1=$(cat "$BATS_TEST_TMPDIR/l1") l2=$(cat "$BATS_TEST_TMPDIR/l2") l3=$(cat "$BATS_TEST_TMPDIR/l3")
	l4=$(cat "$BATS_TEST_TMPDIR/l4")
	# The run alone: the listing of outputs/ and the 20 files came with its end.
	[ "$(agent_requests "$l1" "$l2")" -eq 1 ]
	# A call that changes nothing costs its run too, and returns nothing.
	res 3
	sc '.artifacts == null or (.artifacts | length) == 0'
	[ "$(agent_requests "$l2" "$l3")" -eq 1 ]
	# What came with a run's end is what a request would have said: a file rewritten, a
	# symlink never followed, a FIFO never opened.
	res 4
	sc '[.artifacts[] | [.path, .shown]] == [["outputs/f07.txt", "text"], ["outputs/f08.txt", "none"], ["outputs/f09.txt", "none"]]'
	sc '.artifacts[0].text == "changed\n"'
	sc '.artifacts[1].note | test("symlink")'
	sc '.artifacts[2].note | test("FIFO")'
	[ "$(agent_requests "$l3" "$l4")" -eq 1 ]
}

@test "local: a call returning 20 small files costs the agent one request, its run" { twenty_files_case local; }
@test "docker: a call returning 20 small files costs the agent one request, its run" { twenty_files_case docker; }
