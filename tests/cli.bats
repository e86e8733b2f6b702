# The command line: --help, --version, --check, and how options and SANDBOX_* variables combine.
load lib/helpers

@test "--help names every option with its environment variable and default" {
	run "$SANDBOX_MCP" --help
	[ "$status" -eq 0 ]
	for o in backend timeout max-timeout output-cap result-max spill-max memory cpus pids open-files file-size \
		tmp-size network wheelhouse index-url index-hosts idle-timeout queue max-message keep shutdown-budget workspace mount state-dir sandbox-ahead python python-prestart python-preload log-level sandbox-uid \
		image daytona-snapshot daytona-image daytona-start-timeout; do
		[[ "$output" == *"--$o"* ]] || { echo "missing --$o"; false; }
	done
	[ "$(grep -c "env SANDBOX_" <<<"$output")" -eq 35 ]
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
