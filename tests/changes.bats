# notifications/resources/list_changed on the local backend: what a client that listed the
# resources is told after each call, what it costs, and trees made to make it cost more.
# docker.bats runs the scenario in a container.
load lib/helpers
load lib/changes

setup() {
	common_setup
	WS="$BATS_TEST_TMPDIR/ws"
}

@test "list_changed after a call that adds, removes, rewrites or moves a file, or after a change from outside between calls; none after one that changes nothing" {
	changes_scenario "$WS"
}

@test "after a listing, a call that changes nothing walks no tree, even of 100,000 files; removing them is told" {
	mcp_session --log-level debug <<EOF
$INIT
$INITIALIZED
$(changes_call 1 'mkdir big && cd big && seq 100000 | sed "s/^/f/" | xargs touch')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
$(changes_call 3 'true')
$(changes_call 4 'true')
$(changes_call 5 'true')
$(changes_fence 100)
$(changes_snapshot "$BATS_TEST_TMPDIR/log")
$(changes_call 6 'rm -r big')
$(changes_call 7 'true')
$(changes_fence 101)
EOF
	# The listing's walk and none after it, until a call changed the tree.
	[ "$(changes_walks "$BATS_TEST_TMPDIR/log")" -eq 1 ]
	jqe "$(response 2)" '(.result.resources | length) == 100 and (.result | has("nextCursor"))'
	[ "$(changes_order)" = "1 2 3 4 5 6 changed 7 " ]
}
