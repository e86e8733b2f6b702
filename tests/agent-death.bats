# An agent that dies between calls, the next request right behind its death: the server notices
# (before it sends, or on the reset of the connection), and every request gets its answer; the
# next call runs in a fresh sandbox whose result carries the notice. Local and Docker.
# suite: uses docker
load lib/helpers
load lib/docker-setup
bats_require_minimum_version 1.5.0

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }

# kill_agent_step PIDFILE: a session step that kills the agent of the sandbox of the server whose
# pid is in PIDFILE, and of no other server: locally its child sandbox-agent, on Docker the
# first process of the container labelled with that server's pid.
kill_agent_step() {
	local cmd
	if [ "$SANDBOX_BACKEND" = docker ]; then
		cmd="kill -KILL \$(docker inspect -f '{{.State.Pid}}' \$(docker ps -q --filter label=sandbox-mcp.pid=\$(cat $1) --filter label=sandbox-mcp.role=main))"
	else
		cmd="kill -KILL \$(pgrep -P \$(cat $1) -f '^sandbox-agent ')"
	fi
	jq -cn --arg c "$cmd" '{sh: $c}'
}

# deaths N: N rounds of a request, the agent killed, and the next request sent at once; round i
# is a call (id 1000+i) or a resources/read of f (id 2000+i) before the kill, then a call (id i),
# a resources/read (id 3000+i) or a resources/list (id 4000+i) after it, each followed by a call
# (id 5000+i) when it was not one. The server's answers in $output.
deaths() {
	local pidf="$BATS_TEST_TMPDIR/server.pid" i before after
	{
		echo "$INIT"
		echo "$INITIALIZED"
		for i in $(seq 1 "$1"); do
			before=$((i % 2)) after=$((i % 3))
			if [ "$before" = 0 ]; then
				call_json $((1000 + i)) execute_bash_commands '{"code":"echo f > f; echo before"}'
				echo "{\"wait\": $((1000 + i))}"
			else
				call_json $((900 + i)) execute_bash_commands '{"code":"echo f > f"}'
				echo "{\"wait\": $((900 + i))}"
				echo "{\"jsonrpc\":\"2.0\",\"id\":$((2000 + i)),\"method\":\"resources/read\",\"params\":{\"uri\":\"sandbox://workspace/f\"}}"
				echo "{\"wait\": $((2000 + i))}"
			fi
			kill_agent_step "$pidf"
			case $after in
			0) call_json "$i" execute_bash_commands '{"code":"echo after"}' ;;
			1) echo "{\"jsonrpc\":\"2.0\",\"id\":$((3000 + i)),\"method\":\"resources/read\",\"params\":{\"uri\":\"sandbox://workspace/f\"}}" ;;
			2) echo "{\"jsonrpc\":\"2.0\",\"id\":$((4000 + i)),\"method\":\"resources/list\"}" ;;
			esac
			if [ "$after" != 0 ]; then
				echo "{\"wait\": $((after == 1 ? 3000 + i : 4000 + i))}"
				call_json $((5000 + i)) execute_bash_commands '{"code":"echo after"}'
				echo "{\"wait\": $((5000 + i))}"
			else
				echo "{\"wait\": $i}"
			fi
		done
	} >"$BATS_TEST_TMPDIR/deaths.script"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 600 -- "$SANDBOX_MCP" --no-sandbox-ahead \
		<"$BATS_TEST_TMPDIR/deaths.script"
	[ "$status" -eq 0 ] || {
		printf '%s\n' "$output" | tail -5 >&2
		tail -20 "$SERVER_LOG" >&2
		return 1
	}
	local i n=$1 bad
	# Every request was answered without a JSON-RPC error...
	# (a read after a death may find f gone with its workspace: "not found" is its answer)
	bad=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and has("id") and .id != "init"
		and ((has("error") and (.id > 3000 and .id < 4000 and .error.code == -32002 | not)) or .result.isError == true))')
	[ -z "$bad" ] || {
		echo "failed: $bad" >&2
		return 1
	}
	# ... and the call after each death ran in a new sandbox, with the notice.
	for i in $(seq 1 "$n"); do
		local id=$i
		[ $((i % 3)) = 0 ] || id=$((5000 + i))
		jqe "$(response "$id")" '.result.structuredContent | .exit_code == 0 and .stdout == "after\n"
			and (.notice | test("stopped unexpectedly"))' || {
			echo "round $i: $(response "$id")" >&2
			return 1
		}
	done
}

@test "agent death: a request right behind an agent killed between calls is answered; the next call gets a fresh sandbox and the notice (local)" {
	with_backend local
	deaths 30
}

@test "agent death: a request right behind an agent killed between calls is answered; the next call gets a fresh sandbox and the notice (Docker)" {
	with_backend docker
	deaths 15
}
