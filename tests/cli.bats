# The command line: --help, --version, --check, and how options and SANDBOX_* variables combine.
load lib/helpers
bats_require_minimum_version 1.5.0

@test "--help names every option with its environment variable and default" {
	run "$SANDBOX_MCP" --help
	[ "$status" -eq 0 ]
	for o in backend timeout max-timeout output-cap result-max spill-max memory cpus pids open-files file-size \
		tmp-size network wheelhouse index-url index-hosts allow-hosts idle-timeout queue max-message keep gpu shutdown-budget workspace mount state-dir sandbox-ahead python python-prestart python-preload log-level sandbox-uid max-background max-sessions background-timeout max-background-timeout \
		image daytona-snapshot daytona-image daytona-start-timeout kube-namespace kube-image kube-context kube-runtime-class kube-warm-pool; do
		[[ "$output" == *"--$o"* ]] || { echo "missing --$o"; false; }
	done
	[ "$(grep -c "env SANDBOX_" <<<"$output")" -eq 46 ]
	[[ "$output" == *"--check"* && "$output" == *"--version"* ]]
}

@test "--version prints the version the server reports in initialize" {
	run "$SANDBOX_MCP" --version
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^sandbox-mcp\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	v=${output#sandbox-mcp }
	mcp_session <<<"$INIT"
	jqe "$(response '"init"')" ".result.serverInfo.version == \"$v\""
}

@test "--check says which backends work and which limits are enforced, and how" {
	run "$SANDBOX_MCP" --check
	[ "$status" -eq 0 ]
	[[ "$output" == *"local    ok"* ]]
	for l in memory processes cpus "open files" "file size" "cpu time" /tmp disk isolation network; do
		[[ "$output" == *"$l"* ]] || { echo "missing $l"; false; }
	done
	[[ "$output" == *"seccomp filter"* && "$output" == *"ready"* ]]
	# --check leaves nothing behind.
	[ -z "$(find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1)" ]
}

@test "--check names a backend that cannot work here and exits 1" {
	run "$SANDBOX_MCP" --check --backend daytona
	[ "$status" -eq 1 ]
	[[ "$output" == *"unavailable"* && "$output" == *"no backend works here"* ]]
}

@test "usage errors exit 2 with a message on stderr and nothing on stdout" {
	for args in "--no-such-option" "--timeout" "--timeout abc" "--memory 12Q" "--network maybe" \
		"--backend nowhere" "--timeout 10 --max-timeout 5" "stray"; do
		run bash -c '"$0" $1 2>/dev/null' "$SANDBOX_MCP" "$args"
		[ "$status" -eq 2 ] || { echo "$args: status $status"; false; }
		[ -z "$output" ] || { echo "$args: stdout not empty"; false; }
		run bash -c '"$0" $1 2>&1 >/dev/null' "$SANDBOX_MCP" "$args"
		[[ "$output" == "sandbox-mcp: "* ]]
	done
}

@test "a numeric option below its minimum is named with its minimum and its value, each on its own" {
	for c in "--pids 1:--pids must be at least 8 (it is 1)" "--queue 0:--queue must be at least 1 (it is 0)" \
		"--max-message 10:--max-message must be at least 4K (it is 10)" "--open-files 2:--open-files must be at least 16 (it is 2)" \
		"--memory 1M:--memory must be at least 16M (it is 1M)" "--tmp-size 1K:--tmp-size must be at least 1M (it is 1K)" \
		"--output-cap 100:--output-cap must be between 1K and 64M (it is 100)" \
		"--result-max 1G:--result-max must be between 4K and 256M (it is 1G)"; do
		run --separate-stderr "$SANDBOX_MCP" ${c%%:*} </dev/null
		[ "$status" -eq 2 ] && [ "$stderr" = "sandbox-mcp: ${c#*:}" ] || { echo "${c%%:*}: $stderr"; false; }
	done
}

@test "--network all on local is said to share the host's loopback and abstract sockets, in --help and --check" {
	run "$SANDBOX_MCP" --help
	[[ "$output" == *"| all (the code uses the host's network; on local that is the host's own, with its loopback and abstract unix sockets)"* ]]
	run "$SANDBOX_MCP" --check --backend local --network all
	[[ "$output" == *"network     the host's own network, with its loopback and abstract unix sockets (--network all), package installs too"* ]]
}

@test "every option is also read from its SANDBOX_* variable, and flags win" {
	SANDBOX_OUTPUT_CAP=2K tool execute_bash_commands '{"code":"head -c 10000 /dev/zero | tr \"\\\\0\" a"}'
	sc '.truncated.stdout == true and (.stdout | length) < 2300'
	SANDBOX_OUTPUT_CAP=2K tool execute_bash_commands '{"code":"head -c 10000 /dev/zero | tr \"\\\\0\" a"}' --output-cap 64K
	sc '.truncated.stdout == false and (.stdout | length) == 10000'
	SANDBOX_MEMORY=12Q run "$SANDBOX_MCP" --check
	[ "$status" -eq 2 ] && [[ "$output" == *SANDBOX_MEMORY* ]]
}

@test "a lower --max-timeout lowers the default timeout too" {
	tool execute_bash_commands '{"code":"sleep 3"}' --max-timeout 1
	sc '.timed_out == true'
}

@test "--check says where package installs come from: the index alone through the proxy, or the wheelhouse with no network" {
	run "$SANDBOX_MCP" --check --backend local --index-url https://index.example/simple
	echo "$output"
	[[ "$output" == *"network     none (loopback only); the install step reaches only the package index https://index.example/simple, through the server's filtering proxy"* ]]
	mkdir -p "$BATS_TEST_TMPDIR/wh"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" okpkg 1.0
	chmod -R a+rX "$BATS_TEST_TMPDIR/wh"
	run "$SANDBOX_MCP" --check --backend local --wheelhouse "$BATS_TEST_TMPDIR/wh"
	echo "$output"
	[[ "$output" == *"network     none (loopback only); package installs from the wheelhouse alone, with no network"* ]]
	run "$SANDBOX_MCP" --check --backend local --network none
	[[ "$output" == *"network     none (loopback only); package installs refused"* ]]
}

@test "a state folder the server cannot safely use is refused at start-up, with the reason and what to do" {
	local d=$BATS_TEST_TMPDIR/sd
	mkdir -m 700 "$d-other" "$d-open" "$d-sticky" "$d-group"
	chown 65534 "$d-other"
	chmod 777 "$d-open"
	chmod 1777 "$d-sticky"
	chmod 770 "$d-group"
	for c in "other:is owned by uid 65534, not by this server's uid $(id -u)" "open:may be written by every user (mode 0777)" \
		"sticky:may be written by every user (mode 1777)" "group:may be written by its group (mode 0770)"; do
		run --separate-stderr "$SANDBOX_MCP" --state-dir "$d-${c%%:*}" </dev/null
		[ "$status" -eq 2 ] || { echo "${c%%:*}: status $status"; false; }
		[ -z "$output" ] && [ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" == "sandbox-mcp: --state-dir $d-${c%%:*} ${c#*:}"*"give --state-dir a folder of this user's"* ]]
	done
	# --check refuses it the same way.
	run "$SANDBOX_MCP" --check --backend local --state-dir "$d-open"
	[ "$status" -eq 2 ] && [[ "$output" == *"--state-dir $d-open may be written by every user"* ]]
}

@test "a state folder that is a symlink is refused however its path ends (/, /., ..)" {
	local d=$BATS_TEST_TMPDIR/sl
	mkdir -p -m 700 "$d/real/sub"
	ln -s "$d/real" "$d/lnk"
	ln -s "$d/real/sub" "$d/lnk2"
	local p
	for p in "$d/lnk" "$d/lnk/" "$d/lnk//" "$d/lnk/." "$d/lnk/./" "$d/lnk2/.."; do
		run --separate-stderr "$SANDBOX_MCP" --state-dir "$p" </dev/null
		[ "$status" -eq 2 ] || { echo "$p: status $status"; false; }
		[ -z "$output" ] && [ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" == "sandbox-mcp: --state-dir "*"give --state-dir a folder of this user's"* ]]
	done
	# The folder itself, named with a trailing slash, is still taken.
	run "$SANDBOX_MCP" --check --backend local --state-dir "$d/real/"
	[ "$status" -eq 0 ]
}

@test "a relative --state-dir names a folder of the folder the server started in, made when missing" {
	cd "$BATS_TEST_TMPDIR"
	run --separate-stderr "$SANDBOX_MCP" --check --backend local --state-dir rel-state
	[ "$status" -eq 0 ]
	[[ "$output" == *"local    ok"* ]]
	[ -d "$BATS_TEST_TMPDIR/rel-state" ]
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/rel-state")" ]
}

@test "a state folder the server's user cannot write is refused at start-up" {
	unprivileged_server
	chmod 500 "$SANDBOX_STATE_DIR"
	run --separate-stderr "$SANDBOX_MCP" </dev/null
	chmod 700 "$SANDBOX_STATE_DIR"
	unprivileged_teardown
	[ "$status" -eq 2 ]
	[[ "$stderr" == "sandbox-mcp: --state-dir $SANDBOX_STATE_DIR is not writable by this server (mode 0500)"* ]]
}

@test "--workspace on a folder of the user's is refused at start-up: cleanup_sandbox would empty it" {
	mkdir "$BATS_TEST_TMPDIR/mine"
	echo keep >"$BATS_TEST_TMPDIR/mine/notes.txt"
	run --separate-stderr "$SANDBOX_MCP" --workspace "$BATS_TEST_TMPDIR/mine" </dev/null
	[ "$status" -eq 2 ] && [ -z "$output" ] && [ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sandbox-mcp: --workspace $BATS_TEST_TMPDIR/mine holds files but is not a workspace (it has no .sandbox folder), and cleanup_sandbox would empty it: give a new or empty folder (--mount shows an existing folder to the code)" ]]
	[ "$(cat "$BATS_TEST_TMPDIR/mine/notes.txt")" = keep ] && [ ! -e "$BATS_TEST_TMPDIR/mine/.sandbox" ]
	run --separate-stderr "$SANDBOX_MCP" --workspace "$BATS_TEST_TMPDIR/no/such" </dev/null
	[ "$status" -eq 2 ] && [[ "$stderr" == *"its parent folder $BATS_TEST_TMPDIR/no does not exist"* ]]
}

@test "a --python that does not exist is refused at start-up on local, and --check names it on every backend" {
	run --separate-stderr "$SANDBOX_MCP" --backend local --python sandbox-no-such-python </dev/null
	[ "$status" -eq 2 ] && [ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sandbox-mcp: --python sandbox-no-such-python: no such program in the local sandbox's PATH"* ]]
	run "$SANDBOX_MCP" --check --backend local --python /nonexistent/python3
	[ "$status" -eq 2 ] && [[ "$output" == *"--python /nonexistent/python3: no such program"* ]]
}

# The Docker backend's start-up check of the folders (a server in the engine's container) asks
# the engine; one that takes connections and never answers delays start-up by seconds, not by
# the engine calls' usual timeouts, and leaves the folders to the first call.
@test "a Docker engine that does not answer at start-up delays the server by a few seconds at most" {
	local sock="$BATS_TEST_TMPDIR/silent.sock" t0 t1
	python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16); held = []
while True: held.append(s.accept()[0])
' "$sock" 3>&- &
	local listener=$!
	waited() { [ -S "$sock" ]; }
	eventually 10 waited
	mkdir -p "$BATS_TEST_TMPDIR/ws"
	t0=$(date +%s%N)
	DOCKER_HOST="unix://$sock" mcp_session --backend docker --workspace "$BATS_TEST_TMPDIR/ws" <<<"$INIT"
	t1=$(date +%s%N)
	kill "$listener"
	jqe "$(response '"init"')" '.result.serverInfo.name == "sandbox-mcp"'
	echo "took $(((t1 - t0) / 1000000)) ms"
	[ $(((t1 - t0) / 1000000)) -lt 12000 ]
}
