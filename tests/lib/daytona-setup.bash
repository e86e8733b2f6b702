# For bats files that run cases on the Daytona backend too, against the loopback test server
# (tests/daytona/server.py): load after lib/helpers.
#   daytona_setup_file / daytona_teardown_file   in setup_file / teardown_file
#   with_daytona                                 points the server under test at it
#   daytona_control JSON                         sets its failure mode (see server.py)

DT_KEY="dt-secret-key-5f1c9a7e"

daytona_setup_file() {
	export DAYTONA_TEST_KEY="$DT_KEY"
	local pf="$BATS_FILE_TMPDIR/daytona.port"
	python3 "$TESTS_DIR/daytona/server.py" --port-file "$pf" 2>"$BATS_FILE_TMPDIR/daytona.log" &
	echo $! >"$BATS_FILE_TMPDIR/daytona.pid"
	for _ in $(seq 100); do [ -s "$pf" ] && break; sleep 0.1; done
	[ -s "$pf" ]
}

daytona_teardown_file() {
	[ -f "$BATS_FILE_TMPDIR/daytona.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/daytona.pid")" 2>/dev/null
	return 0
}

with_daytona() {
	DT_URL="http://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/daytona.port")"
	export DAYTONA_API_URL="$DT_URL/api" DAYTONA_API_KEY="$DT_KEY" SANDBOX_BACKEND=daytona
	unset DAYTONA_TARGET SANDBOX_DAYTONA_SNAPSHOT SANDBOX_DAYTONA_IMAGE SANDBOX_DAYTONA_START_TIMEOUT
	# DT_MEMORY (bytes): sandboxes get a memory cgroup of that limit (see server.py).
	daytona_control "{\"clear_log\": true, \"memory\": ${DT_MEMORY:-0}}" >/dev/null
}

daytona_control() {
	python3 - "$DT_URL/_control" "$1" <<'PYEOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method='POST',
                             headers={'Content-Type': 'application/json'})
print(urllib.request.urlopen(req, timeout=10).read().decode())
PYEOF
}
