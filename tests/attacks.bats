# The attack suite: every case of tests/attacks/cases (code an attacker runs in the sandbox,
# asserting its safe outcome) on each backend it applies to, from the one list. The server
# runs with small limits so the resource cases bite; it must answer every case and stay up.
# suite: uses docker
load lib/helpers
load lib/docker-setup
load lib/daytona-setup

CASES="$BATS_TEST_DIRNAME/attacks/cases"
LIMITS=(--memory 256M --pids 64 --tmp-size 32M --file-size 64M --open-files 256)

setup_file() {
	docker_setup_file
	daytona_setup_file
}

teardown_file() {
	daytona_teardown_file
	docker_teardown_file
}

run_cases() {
	with_backend "$1"
	run python3 "$BATS_TEST_DIRNAME/lib/attacks.py" "$CASES" "$1" --stderr "$SERVER_LOG" -- "$SANDBOX_MCP" "${LIMITS[@]}"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[-1]}" =~ ^([0-9]+)\ cases,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[1]}" -ge "$2" ]
}

@test "attacks: the case list holds at least 60 cases, each naming its tool and backends" {
	[ "$(grep -c '^=== ' "$CASES")" -ge 60 ]
	[ -z "$(grep '^=== ' "$CASES" | grep -vE '^=== .+ \| (bash|python) \| (local|docker|daytona)( (local|docker|daytona))*( \| expect: (timeout|capped))?$')" ]
	# No two cases share a name.
	[ -z "$(grep '^=== ' "$CASES" | cut -d'|' -f1 | sort | uniq -d)" ]
}

@test "attacks: every case on the local backend ends safe" {
	run_cases local 60
}

@test "attacks: every case on the Docker backend ends safe" {
	run_cases docker 60
}

@test "attacks: the cases about what the server controls end safe on the Daytona test server" {
	run_cases daytona 6
}
