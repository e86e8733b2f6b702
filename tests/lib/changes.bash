# What a client that listed the resources is told after each call (list_changed), shared by
# changes.bats (local) and docker.bats. Needs helpers.bash.

# changes_call ID CODE: an execute_bash_commands call.
changes_call() {
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" '{code: $c}')"
}

# changes_fence ID: a resources/read (ids from 100 on) queued behind the calls before it, and a
# wait for its answer: once it came, what the calls before it were to tell has been told.
changes_fence() {
	printf '%s\n{"wait": %s}\n' "$(jq -cn --argjson id "$1" '{jsonrpc: "2.0", id: $id, method: "resources/read", params: {uri: "sandbox://workspace/no-such-file"}}')" "$1"
}

# changes_order: the ids of the answers below 100 and "changed" for each list_changed, in the
# order they came.
changes_order() {
	printf '%s\n' "$output" | jq -r 'if type != "object" then empty elif .method == "notifications/resources/list_changed" then "changed" elif (.id | type) == "number" and .id < 100 then "\(.id)" else empty end' | tr '\n' ' '
}

# changes_walks [LOG]: how many walks of a tree the server asked of the sandbox agent (AG_LIST 10
# and AG_WATCH 17, agent/proto.h), from its debug log (default $SERVER_LOG).
changes_walks() {
	grep -cE 'sandbox agent request (10|17)$' "${1:-$SERVER_LOG}" || true
}

# changes_snapshot FILE: a session step that copies the server's log so far to FILE.
changes_snapshot() {
	jq -cn --arg c "cp '$SERVER_LOG' '$1'" '{sh: $c}'
}

# changes_scenario WS [SERVER ARGS...]: with --workspace WS, calls that add, remove, rewrite
# (same size) and move, one that changes nothing, one that only makes and removes a file, and
# changes made from the host between calls (as a background process's would be), each checked
# for its list_changed.
changes_scenario() {
	local ws=$1
	shift
	mcp_session --workspace "$ws" "$@" <<EOF
$INIT
$INITIALIZED
$(changes_call 1 'mkdir -p d/e "$(printf "n%.0s/" $(seq 30))"; echo a > d/e/a.txt; echo b > b.txt')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
{"wait": 2}
$(changes_call 3 'true')
$(changes_call 4 'echo x > new.txt')
$(changes_call 5 'rm b.txt')
$(changes_call 6 'echo z > d/e/a.txt')
$(changes_call 7 'mv d dd')
$(changes_call 8 'touch tmp && rm tmp && cat dd/e/a.txt >/dev/null')
$(changes_call 9 'touch "$(printf "n%.0s/" $(seq 30))deep.txt"')
$(changes_fence 100)
{"sh": "echo host > '$ws/host.txt'"}
$(changes_call 10 'true')
$(changes_fence 101)
{"sh": "rm '$ws/host.txt'"}
$(changes_call 11 'true')
$(changes_call 12 'true')
EOF
	order=$(changes_order)
	[ "$order" = "1 2 3 4 changed 5 changed 6 changed 7 changed 8 9 changed 10 changed 11 changed 12 " ] || {
		echo "order: $order" >&2
		return 1
	}
}
