# The Docker backend, on a real engine: the same scenario on local and docker compared result by
# result, mcp-check, isolation, faults (engine down, container killed, engine restarted, image
# missing), lifetime (idle, cleanup, reaping) and, last, that nothing of ours is left.
#
# setup_file uses the engine that answers (DOCKER_HOST, /var/run/docker.sock) or starts Debian's
# dockerd in a temp folder (tests/lib/docker-engine.sh), and builds the test image without a
# registry (backends/docker/test-image.sh: debootstrap, cached). Where no engine can run, every
# test is skipped with the reason (a failure under CI / SANDBOX_TEST_NO_SKIP).
# Its servers sweep what gone servers left on the engine, and it checks that nothing of its
# own is left: no other file uses the engine meanwhile (tests/lib/run.py).
# suite: owns docker
load lib/helpers
bats_require_minimum_version 1.5.0
load lib/inputs
load lib/prestart
load lib/changes
load lib/background
load lib/session

IMAGE=sandbox-mcp-test:latest

setup_file() {
	export DK_ENV="$BATS_FILE_TMPDIR/engine.env"
	local out
	if ! out=$("$TESTS_DIR/lib/docker-engine.sh" up "$DK_ENV" 2>&1); then
		export DK_SKIP="no Docker engine here: $out"
		return 0
	fi
	# shellcheck disable=SC1090
	. "$DK_ENV"
	export DOCKER_HOST OWN_DIR="${OWN_DIR:-}"
	if ! out=$("$REPO_DIR/backends/docker/test-image.sh" "$IMAGE" 2>&1); then
		export DK_SKIP="the test image could not be built: $out"
		return 0
	fi
	# Volumes that were there before, so that the last test can tell ours apart.
	docker volume ls -q | sort >"$BATS_FILE_TMPDIR/volumes.before"
	{ python3 "$TESTS_DIR/lib/ours.py" foreign-volumes; echo none; } >"$BATS_FILE_TMPDIR/volumes.foreign"
}

teardown_file() {
	[ -n "${DK_ENV:-}" ] && [ -f "$DK_ENV" ] && "$TESTS_DIR/lib/docker-engine.sh" down "$DK_ENV"
	return 0
}

setup() {
	common_setup
	[ -z "${DK_SKIP:-}" ] || skip_or_fail "$DK_SKIP"
	export SANDBOX_BACKEND=docker SANDBOX_IMAGE="$IMAGE"
}

teardown() {
	unprivileged_teardown
}

# The test's sandbox folders on the host.
docker_dirs() {
	find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1 -name 'docker-*' 2>/dev/null
}

bash_call() { # ID CODE [TIMEOUT]
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" --argjson t "${3:-null}" '{code: $c} + (if $t then {timeout_s: $t} else {} end)')"
}

py_call() { # ID SCRIPT [REQUIREMENTS_JSON]
	call_json "$1" execute_python "$(jq -cn --arg s "$2" --argjson r "${3:-null}" '{script: $s} + (if $r then {requirements: $r} else {} end)')"
}

# The parity scenario: stdout/stderr/exit codes, environment, limits, persistence, output cap and
# spill file, timeout, processes gone after a call, install failure, cleanup.
scenario() {
	echo "$INIT"
	echo "$INITIALIZED"
	local i=0 c
	while IFS= read -r c; do
		i=$((i + 1))
		case $c in
		py:*) py_call "$i" "$(printf '%b' "${c#py:}")" ;;
		req:*) py_call "$i" 'print(1)' "${c#req:}" ;;
		t1:*) bash_call "$i" "${c#t1:}" 1 ;;
		cleanup) call_json "$i" cleanup_sandbox '{}' ;;
		*) bash_call "$i" "$c" ;;
		esac
		echo "{\"wait\": $i}"
	done <<'EOF'
echo out; echo err >&2; exit 3
py:import sys\nprint("py", sys.version_info[:2])\nprint("e", file=sys.stderr)\nsys.exit(4)
pwd; echo "$HOME"; env | sort; umask; ulimit -n; ulimit -f; uname -n
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
touch /x /usr/x /etc/x 2>&1; echo t > /tmp/t && cat /tmp/t; ls /sys/class/net
printf 'data\n' > keep.txt; mkdir -p d && echo x > d/y
py:import os\nprint(open("keep.txt").read(), end="")\nprint(*sorted(os.listdir("d")), *sorted(os.listdir(".")))
head -c 5000 /dev/zero | tr '\0' a; echo; seq 1 400 >&2
wc -c < .sandbox/output/call-8.stdout; wc -c < .sandbox/output/call-8.stderr
t1:echo start; sleep 30
(sleep 300 &) ; setsid sleep 300 & nohup sleep 300 >/dev/null 2>&1 & echo started
n=0; mapfile -d '' -t one </proc/1/cmdline; for p in /proc/[0-9]*; do c=(); mapfile -d '' -t c <$p/cmdline 2>/dev/null || continue; case ${c[1]:-} in /proc/self/fd/*) continue ;; esac; [ "$p" != /proc/1 ] && [ "${c[*]}" = "${one[*]}" ] && continue; n=$((n + 1)); done; echo $n
py:import socket\nsocket.create_connection(("192.0.2.1", 80), timeout=2)
req:["nosuchpkg-xyz"]
printf '\xff\xfeok\n'; kill -9 $$
nosuchcommand
cleanup
ls -A; echo "[$?]"
EOF
}

# run_scenario BACKEND: the scenario's results, minus where they ran and how long they took.
# run_scenario_bin BACKEND ARG: the same, with ARG first on the server's command line.
run_scenario() {
	SANDBOX_BACKEND=$1 SESSION_TIMEOUT=300 mcp_session --network none --output-cap 1K < <(scenario)
	scenario_results
}
run_scenario_bin() {
	SANDBOX_BACKEND=$1 SESSION_TIMEOUT=300 mcp_session "$2" --network none --output-cap 1K < <(scenario)
	scenario_results
}
scenario_results() {
	printf '%s\n' "$output" | jq -c 'select(type == "object" and (.id | type) == "number")
		| {id, sc: (.result.structuredContent | del(.backend, .sandbox_id, .duration_ms)), isError: .result.isError}' |
		jq -sc 'sort_by(.id)'
}

@test "parity: the same scenario gives the same results on the local and the docker backend" {
	local_res=$(run_scenario local)
	docker_res=$(run_scenario docker)
	n=$(jq length <<<"$docker_res")
	[ "$n" -eq 18 ]
	if [ "$local_res" != "$docker_res" ]; then
		diff <(jq . <<<"$local_res") <(jq . <<<"$docker_res") >&2 || true
		return 1
	fi
	# And the scenario says what it should (so that parity is not two equal failures).
	jqe "$docker_res" '.[0].sc.exit_code == 3 and .[0].sc.stdout == "out\n" and .[0].sc.stderr == "err\n"'
	jqe "$docker_res" '.[1].sc.exit_code == 4 and .[1].sc.stdout == "py (3, 11)\n"'
	jqe "$docker_res" '.[3].sc.stdout | test("CapEff:\t0+\n") and test("NoNewPrivs:\t1") and test("Seccomp:\t2")'
	jqe "$docker_res" '.[4].sc | (.stdout | test("Read-only file system") and endswith("\nt\n")) and (.stderr | test("/sys/class/net"))'
	jqe "$docker_res" '.[6].sc.stdout == "data\ny .sandbox d keep.txt\n"'
	jqe "$docker_res" '.[7].sc.truncated | .stdout and .stderr and .stdout_bytes == 5001 and .stdout_file == "/workspace/.sandbox/output/call-8.stdout"'
	jqe "$docker_res" '.[8].sc.stdout == "5001\n1492\n"'
	jqe "$docker_res" '.[9].sc | .timed_out and .exit_code == 124 and .stdout == "start\n"'
	# The agent and this shell: the prestarted interpreter (argv[1] /proc/self/fd/...) is not
	# counted, nor one still starting, a fork of the agent not yet exec'd (its command line the
	# agent's: a bash call runs beside it), nor a process that ended while the shell looked. (Counted by the shell itself: an ls | grep pipeline raced, ls reading /proc before
	# grep ran.)
	jqe "$docker_res" '.[11].sc.stdout == "2\n"'
	jqe "$docker_res" '.[12].sc.stderr | test("Network is unreachable")'
	jqe "$docker_res" '.[13].sc | .exit_code == 1 and (.stderr | startswith("Failed to install requirements: ") and test("nosuchpkg-xyz"))'
	jqe "$docker_res" '.[14].sc.exit_code == 137 and .[15].sc.exit_code == 127'
	# cleanup, then the workspace is empty.
	jqe "$docker_res" '.[16].sc.removed == true and .[17].sc.stdout == "[0]\n"'
	[ -z "$(our_containers)" ]
}

@test "inputs: files, env and args give the same results on the docker backend as on local" {
	inputs_run local
	local_res=$inputs_res
	inputs_run docker
	inputs_assert
	# The same, but for where each ran.
	strip() { jq -c 'map(.text |= (if . then sub(" \\([0-9]+ ms, [a-z]+ sandbox [a-z0-9-]+\\)"; "") else . end))' <<<"$1"; }
	[ "$(strip "$local_res")" = "$(strip "$inputs_res")" ] || {
		diff <(strip "$local_res" | jq .) <(strip "$inputs_res" | jq .) >&2
		return 1
	}
}

@test "prestart: in the container too, a call in an interpreter started ahead sees nothing of the call before" {
	fresh_case
}

mcp_check_case() {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	run env SANDBOX_BACKEND=docker SANDBOX_IMAGE="$IMAGE" MCP_CHECK_SECRET=leak-me "$MCP_CHECK" "$SANDBOX_MCP"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "npm could not install the MCP SDK"
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')([0-9]+)\ passed,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[2]}" -ge 13 ]
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
}

@test "mcp-check (official SDK client) passes every check on the docker backend" {
	mcp_check_case
}

# Not root, the workspace is a tmpfs volume of the engine's (sandbox.bats, quota).
@test "not root: mcp-check (official SDK client) passes every check on the docker backend" {
	unprivileged_server
	unprivileged_docker
	mcp_check_case
	run "$SANDBOX_MCP" --check
	[[ "$output" == *"the workspace is a tmpfs volume of its own"* ]]
	no_sandbox_processes "$UNPRIV_UID"
	unprivileged_cleanup
}

@test "files out and resources on the docker backend, from the official SDK client (tests/sdk-files)" {
	sdk_files "$SANDBOX_MCP" --backend docker --image "$IMAGE"
	[ -z "$(our_containers)" ]
}

@test "--check: the docker backend works here and reports its limits" {
	run "$SANDBOX_MCP" --backend docker --check
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"docker   ok"* ]]
	[[ "$output" == *"container memory limit"* && "$output" == *"image       $IMAGE"* ]]
	[ -z "$(our_containers)" ]
}

@test "--check pulls no image: it says the first call would pull a missing one" {
	run --separate-stderr "$SANDBOX_MCP" --backend docker --check --image sandbox-mcp-no-such-image:0
	printf '%s\n' "$output" "$stderr"
	[ "$status" -eq 0 ]
	[[ "$output" == *"docker   not tried: the image sandbox-mcp-no-such-image:0 is not on this engine: the first call would pull it (--check pulls nothing"* ]]
	[[ "$stderr" != *"pulling the image"* ]]
	[ -z "$(docker_dirs)" ]
}

@test "--check: a --python the image does not have makes the docker backend unavailable, and names it" {
	run "$SANDBOX_MCP" --backend docker --check --python sandbox-no-such-python
	printf '%s\n' "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"docker   unavailable: --python sandbox-no-such-python does not run in the sandbox (exit code 127: sandbox: cannot run sandbox-no-such-python: No such file or directory)"* ]]
	[ -z "$(docker_dirs)" ]
}

@test "isolation: unprivileged user, no capabilities, read-only root, no network, limits and labels from the configuration" {
	local ins="$BATS_TEST_TMPDIR/inspect.json"
	mcp_session --memory 300M --pids 77 --cpus 0.5 --tmp-size 20M <<EOF
$INIT
$(bash_call 1 'id -u; id -g; grep CapEff /proc/self/status; cat /proc/1/cmdline | tr "\0" " "; echo; df -k /tmp | tail -1 | awk "{print \$2}"; awk -F: "NR > 2 {gsub(/ /, \"\", \$1); print \$1}" /proc/net/dev; (echo > /dev/tcp/192.0.2.1/80) 2>&1 | tail -1; touch /bin/x 2>&1')
{"wait": 1}
{"sh": "docker inspect \$(docker ps -q --filter label=sandbox-mcp.pid=\$SERVER_PID) > '$ins'"}
EOF
	res 1
	sc '.exit_code == 1'
	sc '.stdout | startswith("65534\n65534\nCapEff:\t0000000000000000\n/.sandbox-agent --connect /run/sandbox-agent/agent.sock \n20480\nlo\n")'
	sc '.stdout | test("Network is unreachable") and test("Read-only file system")'
	jqe "$(cat "$ins")" 'length == 1 and (.[0] |
		.Config.User == "65534:65534" and .HostConfig.ReadonlyRootfs and .HostConfig.CapDrop == ["ALL"]
		and (.HostConfig.SecurityOpt | index("no-new-privileges") != null) and .HostConfig.NetworkMode == "none"
		and .HostConfig.Memory == 314572800 and .HostConfig.MemorySwap == 314572800 and .HostConfig.PidsLimit == 77
		and .HostConfig.NanoCpus == 500000000 and .HostConfig.Privileged == false
		and .Config.Labels["sandbox-mcp"] == "1" and (.Config.Labels["sandbox-mcp.pid"] | test("^[0-9]+$"))
		and (.Config.Labels["sandbox-mcp.sandbox"] | startswith("docker-"))
		and ([.Mounts[] | select(.Destination == "/.sandbox-agent")][0].RW == false))'
	[ -z "$(our_containers)" ]
}

@test "timeout and cancellation kill every process of the call inside the container" {
	# The container is made by a first call: a call's timeout counts the making of its
	# sandbox, which a loaded machine can stretch past the 1 s this test gives.
	mcp_session <<EOF
$INIT
$(bash_call 10 'true')
{"wait": 10}
$(bash_call 1 'setsid sleep 300 & (sleep 300 &); echo bg; sleep 300' 1)
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"setsid sleep 300 & echo started; sleep 300"}' '{"progressToken":"p2"}')
{"wait_line": "\"message\":\"started"}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}
$(bash_call 3 'set -- /proc/[0-9]*; echo $#')
{"wait": 3}
EOF
	res 1
	sc '.timed_out and .exit_code == 124 and .stdout == "bg\n"'
	[ -z "$(response 2)" ]
	res 3
	sc '.stdout == "2\n"' # the agent and this shell, which counts them itself
}

@test "--network install: the install step runs in its own short-lived container; paths are refused" {
	mcp_session --log-level info <<EOF
$INIT
$(py_call 1 'print(1)' '["./sbxdemo-1.0-py3-none-any.whl"]')
{"wait": 1}
$(call_json 2 execute_python '{"script":"print(1)","requirements":["sbxdemo>=1.0"],"timeout_s":5}')
{"wait": 2}
{"sh": "docker ps -aq --filter label=sandbox-mcp.role=install --filter label=sandbox-mcp.pid=\$SERVER_PID > '$BATS_TEST_TMPDIR/install.ids'"}
$(bash_call 3 'echo still here')
{"wait": 3}
EOF
	res 1
	sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: ") and test("is not allowed"))'
	# A plain name reaches pip, in the install container (no index is reachable here).
	res 2
	sc '.stderr | startswith("Failed to install requirements: ") and (test("is not allowed") | not)'
	res 3
	sc '.stdout == "still here\n"'
	grep -q 'the install step runs in its own container' "$SERVER_LOG"
	[ ! -s "$BATS_TEST_TMPDIR/install.ids" ]
}

@test "--wheelhouse: installs come from the read-only /wheelhouse, offline" {
	local wheels="$BATS_TEST_TMPDIR/wheels"
	mkdir -p "$wheels"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$wheels" sbxdemo 2.0
	chmod -R a+rX "$wheels"
	tool execute_python '{"script":"import sbxdemo, os\nprint(sbxdemo.VALUE)\nprint(os.access(\"/wheelhouse\", os.W_OK))","requirements":["sbxdemo"]}' --wheelhouse "$wheels"
	sc '.exit_code == 0 and .stdout == "sbxdemo 2.0\nFalse\n"'
	! grep -q 'the install step runs in its own container' "$SERVER_LOG"
}

@test "a container removed from outside between calls: the next call runs in a fresh sandbox, with a notice" {
	mcp_session <<EOF
$INIT
$(bash_call 1 'echo x > f; echo ok')
{"wait": 1}
{"sh": "docker rm -f \$(docker ps -q --filter label=sandbox-mcp.pid=\$SERVER_PID) >/dev/null"}
$(bash_call 2 'ls; echo done')
{"wait": 2}
EOF
	res 2
	sc '.exit_code == 0 and .stdout == "done\n" and .error == null'
	# What happened, and that the workspace is a fresh one.
	sc '.notice | test("^The previous sandbox [(]docker-[0-9a-f]+[)] stopped unexpectedly [(]its container was removed from the engine by something other than this server, such as docker rm or a prune[)]; this call ran in a new sandbox with a fresh, empty workspace [(]earlier files and packages are gone[)][.]$")'
	[ "$(response 1 | jq -r .result.structuredContent.sandbox_id)" != "$(response 2 | jq -r .result.structuredContent.sandbox_id)" ]
	# This server's containers alone (others may share the engine).
	for id in $( (response 1; response 2) | jq -r .result.structuredContent.sandbox_id); do
		[ -z "$(docker ps -aq --filter "label=sandbox-mcp.sandbox=$id")" ]
	done
	[ -z "$(docker_dirs)" ]
}

@test "a container killed during a call: the call says the sandbox stopped, the next one gets a fresh sandbox" {
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo x > f; echo code-started; sleep 300","timeout_s":20}' '{"progressToken":"p1"}')
{"wait_line": "\"message\":\"code-started"}
{"sh": "docker kill \$(docker ps -q --filter label=sandbox-mcp.pid=\$SERVER_PID) >/dev/null"}
{"wait": 1}
$(bash_call 2 'ls; echo done')
{"wait": 2}
EOF
	res 1
	sc '.exit_code == 1 and (.error | test("stopped unexpectedly"))'
	res 2
	sc '.exit_code == 0 and .stdout == "done\n"'
	# The notice that the workspace is new comes with one of the two results.
	[ "$( (response 1; response 2) | jq -r '.result.structuredContent.notice // empty' | grep -c 'stopped unexpectedly')" -ge 1 ]
	[ "$(response 1 | jq -r .result.structuredContent.sandbox_id)" != "$(response 2 | jq -r .result.structuredContent.sandbox_id)" ]
	[ -z "$(our_containers)" ]
}

@test "the engine restarted mid-session: BACKEND_LOST, then a fresh sandbox with a notice" {
	[ -n "${OWN_DIR:-}" ] || skip_or_fail "the engine here was not started by the tests; not restarting it"
	mcp_session <<EOF
$INIT
$(bash_call 1 'echo x > f; echo ok')
{"wait": 1}
{"sh": "'$TESTS_DIR/lib/docker-engine.sh' restart '$DK_ENV'"}
$(bash_call 2 'ls; echo done')
{"wait": 2}
EOF
	res 2
	sc '.exit_code == 0 and .stdout == "done\n" and (.notice | test("stopped unexpectedly"))'
	# The server has 2 s to shut down; an engine just restarted on a loaded machine may take
	# longer to remove the fresh sandbox, and then the next server on the same state folder
	# removes what is left, before any call.
	mcp_session <<<"$INIT"
	[ -z "$(our_containers)" ]
	[ -z "$(find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1 -name 'docker-*')" ]
}

@test "the engine's HTTP runs in a helper that ends when idle: the server never maps libcurl; the next request starts another" {
	hh="'$TESTS_DIR/lib/http-helper.sh' \$PPID"
	mcp_session <<EOF
$INIT
$(bash_call 1 'echo one')
{"wait": 1}
{"sh": "$hh nocurl"}
{"until": "$hh none"}
$(call_json 2 cleanup_sandbox '{}')
{"wait": 2}
$(bash_call 3 'echo two')
{"wait": 3}
{"sh": "$hh nocurl"}
{"until": "$hh none"}
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "one\n"'
	res 2
	sc '.removed == true'
	res 3
	sc '.exit_code == 0 and .stdout == "two\n"'
	[ "$(response 1 | jq -r .result.structuredContent.sandbox_id)" != "$(response 3 | jq -r .result.structuredContent.sandbox_id)" ]
}

@test "no engine: the docker backend says why; auto falls through to local" {
	export DOCKER_HOST="unix://$BATS_TEST_TMPDIR/no-such.sock"
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.exit_code == 1 and .backend == null'
	sc '.error | test("^Failed to initialize sandbox engine: docker: no Docker engine socket at .*no-such.sock")'
	SANDBOX_BACKEND=auto tool execute_bash_commands '{"code":"echo hi"}'
	sc '.exit_code == 0 and .backend == "local"'
	grep -q 'backend docker.*: no Docker engine socket' "$SERVER_LOG"
	# A socket nobody listens on.
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$BATS_TEST_TMPDIR/dead.sock"
	DOCKER_HOST="unix://$BATS_TEST_TMPDIR/dead.sock" tool execute_bash_commands '{"code":"echo hi"}'
	sc '.error | test("docker: the Docker engine at unix://.*dead.sock is not running")'
	DOCKER_HOST=tcp://127.0.0.1:2375 tool execute_bash_commands '{"code":"echo hi"}'
	sc '.error | test("docker: DOCKER_HOST=tcp://127.0.0.1:2375 is not supported")'
}

@test "an image that is missing and cannot be pulled: a clear error naming it and the fix" {
	SANDBOX_IMAGE=sandbox-mcp-test-missing:nope tool execute_bash_commands '{"code":"echo hi"}'
	sc '.exit_code == 1 and .backend == null'
	sc '.error | test("the image sandbox-mcp-test-missing:nope is not on this engine and pulling it failed") and test("SANDBOX_IMAGE")'
	[ -z "$(our_containers)" ]
	[ -z "$(docker_dirs)" ]
}

@test "auto passes over an engine whose image cannot be pulled, and the call says that it ran locally and why" {
	SANDBOX_BACKEND=auto DAYTONA_API_KEY= SANDBOX_IMAGE=sandbox-mcp-test-missing:nope tool execute_bash_commands '{"code":"echo hi"}'
	sc '.exit_code == 0 and .stdout == "hi\n" and .backend == "local"'
	sc '.notice | test("^--backend auto passed over what is set up here [(]docker: the image sandbox-mcp-test-missing:nope is not on this engine and pulling it failed.*; this call ran on the local backend instead[.]$")'
	grep -q 'warning: backend auto: passed over docker: the image sandbox-mcp-test-missing:nope' "$SERVER_LOG"
	[ -z "$(docker_dirs)" ]
}

@test "idle timeout and cleanup_sandbox remove the container and its folder; --keep keeps the workspace only" {
	mcp_session --idle-timeout 1 <<EOF
$INIT
$(bash_call 1 'echo x > f')
{"wait": 1}
{"sh": "test -n \"\$(docker ps -q --filter label=sandbox-mcp.pid=\$SERVER_PID)\""}
{"until": "test -z \"\$(docker ps -aq --filter label=sandbox-mcp.pid=\$SERVER_PID)\""}
$(bash_call 2 'ls')
{"wait": 2}
{"sh": "docker ps -q --filter label=sandbox-mcp.pid=\$SERVER_PID >'$BATS_TEST_TMPDIR/used' && test -s '$BATS_TEST_TMPDIR/used'"}
$(call_json 3 cleanup_sandbox '{}')
{"wait": 3}
{"sh": "! docker ps -aq --no-trunc --filter label=sandbox-mcp.pid=\$SERVER_PID | grep -Ff '$BATS_TEST_TMPDIR/used'"}
EOF
	res 2
	sc '.stdout == "" and (.notice | test("removed after 1 s"))'
	res 3
	sc '.removed == true and .backend == "docker"'
	[ -z "$(docker_dirs)" ]
	tool execute_bash_commands '{"code":"echo kept > k.txt"}' --keep
	[ -z "$(our_containers)" ]
	[ "$(cat "$(docker_dirs)"/workspace/k.txt)" = kept ]
	rm -rf "$(docker_dirs)"
}

@test "--workspace keeps the workspace in a host folder across a SIGKILL; --mount binds a host folder, read-only unless :rw" {
	ws="$BATS_TEST_TMPDIR/ws" proj="$BATS_TEST_TMPDIR/proj" out="$BATS_TEST_TMPDIR/out"
	mkdir -p "$proj" && printf 'project file\n' >"$proj/readme.txt"
	mkdir -m 777 "$out"
	chmod 755 "$BATS_TEST_TMPDIR" "$proj"
	mcp_session --workspace "$ws" --mount "$proj:/mnt/project" --mount "$out:/mnt/out:rw" <<EOF
$INIT
$(bash_call 1 'echo one > a.txt; cat /mnt/project/readme.txt; touch /mnt/project/x 2>&1 | grep -o "Read-only file system"; echo w > /mnt/out/w.txt')
{"wait": 1}
{"signal": "KILL"}
{"expect_exit": 5}
EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "project file\nRead-only file system\n"'
	[ "$(cat "$ws/a.txt")" = one ]
	[ "$(cat "$out/w.txt")" = w ]
	[ ! -e "$proj/x" ]
	mcp_session --workspace "$ws" <<EOF
$INIT
$(bash_call 1 'cat a.txt')
$(call_json 2 cleanup_sandbox '{}')
EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "one\n"'
	[ -d "$ws" ]
	[ ! -e "$ws/a.txt" ]
	# The killed server's container and folder went with the next server's start.
	[ -z "$(our_containers)" ]
	[ -z "$(docker_dirs)" ]
}

@test "leftovers of a server killed with SIGKILL are removed by the next server" {
	mcp_session <<EOF
$INIT
$(bash_call 1 'echo x > f')
{"wait": 1}
{"signal": "KILL"}
{"expect_exit": 5}
EOF
	[ -n "$(our_containers)" ]
	[ -n "$(docker_dirs)" ]
	tool execute_bash_commands '{"code":"echo fresh"}' --backend local
	[ -z "$(our_containers)" ]
	[ -z "$(docker_dirs)" ]
	grep -q 'left by a server that is gone' "$SERVER_LOG"
}

# A server that is not root keeps each workspace in a volume (sandbox.bats, quota). A volume of a
# server of this host and PID namespace that is gone goes at the next server's start: its pid is
# gone, or names a process of another start time. A live server's stays; so does one of another
# PID namespace (its pid means nothing here: a server in a container or a CI job's namespace),
# and one an earlier build labelled without its namespace, whatever its pid.
@test "leftover workspace volumes of a server that is gone are removed by the next server; a live one's, another PID namespace's stay" {
	local dead start left ns
	sh -c 'exit 0' &
	dead=$!
	wait "$dead"
	start=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$$/stat")
	ns=$(readlink /proc/self/ns/pid)
	mkvol() { # NAME PID STARTLABEL=VALUE [PIDNS]
		docker volume create --label sandbox-mcp=1 --label "sandbox-mcp.pid=$2" --label "sandbox-mcp.$3" \
			${4:+--label "sandbox-mcp.pidns=$4"} \
			--label "sandbox-mcp.host=$(hostname)" --label sandbox-mcp.sandbox=docker-00000000 "$1" >/dev/null
	}
	mkvol sbx-test-dead "$dead" "starttime=$start" "$ns"
	mkvol sbx-test-reused "$$" "starttime=$((start + 1))" "$ns"
	mkvol sbx-test-live "$$" "starttime=$start" "$ns"
	mkvol sbx-test-otherns-dead "$dead" "starttime=$start" "pid:[1]"
	mkvol sbx-test-earlier-live "$$" "start=123456"
	mkvol sbx-test-earlier-dead "$dead" "starttime=$start"
	tool execute_bash_commands '{"code":"echo fresh"}'
	left=$(docker volume ls -q --filter name=sbx-test- | sort | tr '\n' ' ')
	docker volume rm -f sbx-test-dead sbx-test-reused sbx-test-live sbx-test-otherns-dead sbx-test-earlier-live \
		sbx-test-earlier-dead
	sc '.stdout == "fresh\n"'
	[ "$left" = "sbx-test-earlier-dead sbx-test-earlier-live sbx-test-live sbx-test-otherns-dead " ]
	for v in dead reused; do
		grep -qF "removed volume sbx-test-$v, left by a server that is gone" "$SERVER_LOG"
	done
}

@test "a --mount that holds the engine's socket is refused: no sandbox reaches the engine by a bind" {
	local sock=${DOCKER_HOST#unix://}
	mkdir -p "$BATS_TEST_TMPDIR/m/a/b"
	tool execute_bash_commands '{"code":"echo ran"}' --mount "$BATS_TEST_TMPDIR/m:/mnt/m" --mount "$(dirname "$sock"):/mnt/run"
	sc '.exit_code == 1 and .stdout == ""'
	sc '.stderr | test("--mount /[^ ]* holds the container engine.s socket")'
	[ -z "$(our_containers)" ]
}

@test "a --mount too large to walk, on another file system than the engine's socket, is bound without a walk" {
	local big="$BATS_TEST_TMPDIR/big"
	[ "$(id -u)" -eq 0 ] || skip_or_fail "mounting a tmpfs needs root"
	mkdir "$big"
	mount -t tmpfs -o size=64m sbx-test-big "$big"
	(cd "$big" && seq 100001 | xargs touch)
	local rc=0
	tool execute_bash_commands '{"code":"ls /mnt/big | wc -l"}' --mount "$big:/mnt/big" || rc=$?
	umount "$big"
	[ "$rc" -eq 0 ]
	[ -n "$result" ]
	sc '.exit_code == 0 and .stdout == "100001\n"'
}

# A server that does not see the engine's file system (in a container of its own, the engine's
# socket bound in), made here by lib/apart.sh: its folders do not exist on the engine's side.
apart_or_skip() {
	[ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null || skip_or_fail "unshare -m needs root"
}

@test "apart from the engine's file system: the parity scenario gives the same results, through a volume and the attached stdio" {
	apart_or_skip
	docker_res=$(run_scenario docker)
	apart_res=$(SANDBOX_MCP="$TESTS_DIR/lib/apart.sh" run_scenario_bin docker "$SANDBOX_MCP")
	[ "$(jq length <<<"$apart_res")" -eq 18 ]
	if [ "$docker_res" != "$apart_res" ]; then
		diff <(jq . <<<"$docker_res") <(jq . <<<"$apart_res") >&2 || true
		return 1
	fi
	grep -q 'sandboxes get the agent from a volume and talk on their attached stdio' "$SERVER_LOG"
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
}

@test "apart: the code cannot write the agent's volume nor reach the agent's stdio; nothing of the server's folders is bound" {
	apart_or_skip
	local code
	code=$(cat <<'SH'
touch /.sandbox-mcp/x 2>&1; : > /.sandbox-mcp/sandbox-agent 2>&1
ls /proc/1/fd 2>&1; echo hi 2>&1 > /proc/1/fd/1; echo hi 2>&1 > /proc/1/fd/4
grep -c ' /workspace \| /.sandbox-mcp ' /proc/self/mountinfo
grep -c "$STATE\|/dev/shm/" /proc/self/mountinfo
SH
)
	SANDBOX_MCP="$TESTS_DIR/lib/apart.sh" tool execute_bash_commands \
		"$(jq -cn --arg c "STATE='$SANDBOX_STATE_DIR'; $code" '{code: $c}')" "$SANDBOX_MCP"
	sc '.stdout | test("touch: cannot touch .*Read-only file system")'
	sc '.stderr | test("sandbox-agent: Read-only file system")'
	sc '.stdout | test("cannot open directory .*/proc/1/fd.*Permission denied")'
	sc '[.stdout | scan("/proc/1/fd/[14]: Permission denied")] | length == 2'
	sc '.stdout | endswith("\n2\n0\n")'
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
}

# The install step's way out is the server's proxy, a socket that cannot reach a sandbox of a
# server apart from the engine; a way out of its own would be the engine's whole network, its
# address included. So it gets none, and the call says why.
@test "apart: the install step gets no network, and a failed install says so" {
	apart_or_skip
	SANDBOX_MCP="$TESTS_DIR/lib/apart.sh" tool execute_python \
		'{"script": "print(1)", "requirements": ["okpkg==1.0"], "timeout_s": 60}' "$SANDBOX_MCP"
	sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: the package index could not be reached (a server in a container gives the install step no network: only --wheelhouse is searched)"))'
	[ -z "$(our_containers)" ]
}

# apart_server: the server under test from now on runs apart (lib/apart.sh), for helpers that
# start "$SANDBOX_MCP" ARGS....
apart_server() {
	local w="$BATS_TEST_TMPDIR/apart-server"
	printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$TESTS_DIR/lib/apart.sh" "$SANDBOX_MCP" >"$w"
	chmod +x "$w"
	SANDBOX_MCP=$w
}

# No descriptor reaches an agent on its container's attached stdio: the process tool's channel
# is a stream within it (agent/proto.h's AG_MUX), so background processes and sessions run as
# on a socket of its own.
@test "apart: background processes and Python sessions run, their channel in band on the attached stdio" {
	apart_or_skip
	apart_server
	life
	grep -q 'sandboxes get the agent from a volume and talk on their attached stdio' "$SERVER_LOG"
	answered_while_a_call_runs
	cells
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
}

# The server's descriptors and threads, for a session step: after one sandbox with a background
# process, and after five more made and removed in a row, the same.
apart_count='echo $(ls /proc/$SERVER_PID/fd | wc -l) $(ls /proc/$SERVER_PID/task | wc -l)'

@test "apart: sandboxes with background processes made and removed in a row leave the server no more descriptors or threads than one did" {
	apart_or_skip
	apart_server
	local steps="" i
	for i in 2 3 4 5 6; do
		steps+="$(call_json $((i + 10)) cleanup_sandbox '{}')"$'\n'"{\"wait\": $((i + 10))}"$'\n'
		steps+="$(bg "$i" 'echo up; sleep 60')"$'\n'"{\"wait\": $i}"$'\n'
		steps+="$(proc $((i + 20)) '{"process_id": "bg-1"}')"$'\n'"{\"wait\": $((i + 20))}"$'\n'
	done
	session_of "$(bg 1 'echo up; sleep 60')" '{"wait": 1}' \
		"$(proc 21 '{"process_id": "bg-1"}')" '{"wait": 21}' \
		"{\"sh\": \"$apart_count > $BATS_TEST_TMPDIR/before\"}" \
		"$steps" \
		"{\"sh\": \"$apart_count > $BATS_TEST_TMPDIR/after\"}"
	for i in 1 2 3 4 5 6; do res "$i"; sc '.running == true and .stdout == "up\n"'; done
	for i in 21 22 23 24 25 26; do res "$i"; sc '.running == true'; done
	local fd0 th0 fd1 th1
	read -r fd0 th0 <"$BATS_TEST_TMPDIR/before"
	read -r fd1 th1 <"$BATS_TEST_TMPDIR/after"
	echo "fds $fd0 -> $fd1, threads $th0 -> $th1"
	[ "$fd0" -gt 3 ]
	[ "$fd1" -le "$fd0" ]
	[ "$th1" -le "$th0" ]
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
}

@test "apart: idle removal with a background process running removes its container and leaves no descriptor or thread behind" {
	apart_or_skip
	apart_server
	SERVER_ARGS="--idle-timeout 2" session_of "$(bg 1 'echo up; sleep 60')" '{"wait": 1}' \
		"{\"sh\": \"$apart_count > $BATS_TEST_TMPDIR/before\"}" \
		"$(jq -cn --arg c "grep -q 'removed after 2 s unused' '$SERVER_LOG'" '{until: $c}')" \
		'{"until": "[ -z \"$(docker ps -q --filter label=sandbox-mcp.pid=$SERVER_PID)\" ]"}' \
		"$(call_json 2 execute_bash_commands '{"code": "echo new"}')" '{"wait": 2}' \
		"$(bg 3 'echo up; sleep 60')" '{"wait": 3}' \
		"{\"sh\": \"$apart_count > $BATS_TEST_TMPDIR/after\"}"
	res 2
	sc '.stdout == "new\n" and (.notice | test("1 background process of sandbox"))'
	res 3
	sc '.running == true and .stdout == "up\n"'
	local fd0 th0 fd1 th1
	read -r fd0 th0 <"$BATS_TEST_TMPDIR/before"
	read -r fd1 th1 <"$BATS_TEST_TMPDIR/after"
	echo "fds $fd0 -> $fd1, threads $th0 -> $th1"
	[ "$fd1" -le "$fd0" ]
	[ "$th1" -le "$th0" ]
	[ -z "$(our_containers)" ]
}

# The container killed under a process call that waits on its background process: the call
# says the sandbox was lost, within its wait, and the next call gets a fresh sandbox.
@test "apart: a container killed while a process call waits is told to that call and the next, then replaced" {
	apart_or_skip
	apart_server
	session_of "$(bg 1 'echo up; sleep 60')" '{"wait": 1}' \
		"$(proc 2 '{"process_id": "bg-1", "wait_s": 30}')" \
		'{"sh": "docker kill $(docker ps -q --filter label=sandbox-mcp.pid=$SERVER_PID) >/dev/null"}' \
		'{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(call_json 4 execute_bash_commands '{"code": "echo fresh"}')" '{"wait": 4}'
	res 1
	sc '.running == true'
	res 2
	sc '.error | test("sandbox ended unexpectedly")'
	res 3
	sc '.error | test("channel for background processes was lost")'
	res 4
	sc '.stdout == "fresh\n"'
	[ -z "$(our_containers)" ]
}

@test "apart: a container killed while a call and a process call are in flight is told to both; the next call gets a fresh sandbox" {
	apart_or_skip
	apart_server
	session_of "$(bg 1 'echo up; sleep 60')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "sleep 40.0123; echo late"}')" \
		"$(until_running 'sleep 40.0123')" \
		"$(proc 3 '{"process_id": "bg-1", "wait_s": 30}')" \
		'{"sh": "docker kill $(docker ps -q --filter label=sandbox-mcp.pid=$SERVER_PID) >/dev/null"}' \
		'{"wait": 2}' '{"wait": 3}' \
		"$(call_json 4 execute_bash_commands '{"code": "echo fresh"}')" '{"wait": 4}' \
		"$(proc 5 '{}')" '{"wait": 5}'
	res 2
	sc '.stdout != "late\n" and .exit_code != 0'
	res 3
	jqe "$result" '.isError == true'
	grep -q 'docker: lost the agent of .* (its stream: the stream ended)' "$SERVER_LOG"
	res 4
	sc '.stdout == "fresh\n"'
	res 5
	sc '.processes | length == 0'
	[ -z "$(our_containers)" ]
}

@test "apart: a server killed with SIGKILL while background processes run leaves nothing on the engine after the next server" {
	apart_or_skip
	SANDBOX_MCP="$TESTS_DIR/lib/apart.sh" mcp_session "$SANDBOX_MCP" --no-sandbox-ahead <<EOF
$INIT
$(bg 1 'echo up; trap "" HUP TERM; sleep 600')
{"wait": 1}
$(call_json 2 process '{"process_id": "bg-1"}')
{"wait": 2}
{"signal": "KILL"}
{"expect_exit": 5}
EOF
	res 1
	sc '.running == true'
	none_running() { [ -z "$(our_containers --filter status=running)" ]; }
	eventually 30 none_running
	tool execute_bash_commands '{"code":"echo fresh"}' --backend local
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
}

# The calls' stream and the channel share the attached stdio: a call that prints without pause
# does not hold up a process call, nor a 1 MiB input, behind its output.
@test "apart: process calls and a 1 MiB input are answered while a call prints without pause" {
	apart_or_skip
	apart_server
	local feed
	feed=$(head -c 1048576 /dev/zero | tr '\0' i | jq -cRs '{jsonrpc: "2.0", id: 3, method: "tools/call",
		params: {name: "process", arguments: {process_id: "bg-1", input: .}}}')
	SESSION_TIMEOUT=200 session_of "$(bg 1 'cat > /dev/null')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "end=$((SECONDS + 15)); while [ $SECONDS -lt $end ]; do head -c 1000000 /dev/zero | tr \"\\0\" z; done; echo; echo in-4712", "timeout_s": 120}')" \
		"$(until_running 'in-4712')" \
		"$feed" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1"}')" '{"wait": 4}' '{"wait": 2}'
	res 3
	sc '.input_written > 0 and .input_written <= 1048576'
	res 4
	sc '.running == true'
	res 2
	sc '.exit_code == 0 and (.stdout | endswith("zzz\nin-4712\n"))'
	[ "$(answer_order 2 3 4)" = "3 4 2" ]
}

# A background process that prints without pause fills only its own buffer: calls and reads of
# it go on, each answer bounded.
@test "apart: a background process that prints without pause holds up neither calls nor reads of it" {
	apart_or_skip
	apart_server
	session_of "$(bg 1 'yes flood')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "echo hi"}')" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1"}')" '{"wait": 4}' \
		"$(call_json 5 execute_bash_commands '{"code": "echo again"}')" '{"wait": 5}' \
		"$(proc 6 '{"process_id": "bg-1", "signal": "KILL", "wait_s": 10}')" '{"wait": 6}'
	res 2
	sc '.stdout == "hi\n"'
	res 3
	sc '.running == true and (.stdout | startswith("flood\nflood\n"))'
	res 4
	sc '.running == true and .stdout_bytes > 0'
	res 5
	sc '.stdout == "again\n"'
	res 6
	sc '.error == null'
	[ -z "$(our_containers)" ]
}

@test "apart: what the agent sends on its stdout (output, files) stays out of the engine's log" {
	apart_or_skip
	SANDBOX_MCP="$TESTS_DIR/lib/apart.sh" mcp_session "$SANDBOX_MCP" <<EOF
$INIT
$(bash_call 1 'echo secret-output-1234')
{"wait": 1}
{"sh": "for c in \$(docker ps -q --filter label=sandbox-mcp.pid=\$SERVER_PID); do docker inspect -f '{{.HostConfig.LogConfig.Type}}' \$c; ! docker logs \$c 2>/dev/null | grep -a secret-output; done > $BATS_TEST_TMPDIR/logs"}
EOF
	res 1
	sc '.stdout == "secret-output-1234\n"'
	[ "$(sort -u "$BATS_TEST_TMPDIR/logs")" = none ]
}

@test "apart: a server killed with SIGKILL leaves a container whose agent ends with its stdin; the next server removes it and its volumes" {
	apart_or_skip
	SANDBOX_MCP="$TESTS_DIR/lib/apart.sh" mcp_session "$SANDBOX_MCP" <<EOF
$INIT
$(bash_call 1 'echo x > f')
{"wait": 1}
{"signal": "KILL"}
{"expect_exit": 5}
EOF
	# Its stdin ended with the server's attach: the agent ended, and the container with it
	# (another server on this machine may sweep it first: then it is gone, which is fine too).
	none_running() { [ -z "$(our_containers --filter status=running)" ]; }
	eventually 20 none_running
	tool execute_bash_commands '{"code":"echo fresh"}' --backend local
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
}

@test "list_changed in a container: told after each kind of change, none after a call that changes nothing, which walks no tree" {
	ws="$BATS_TEST_TMPDIR/ws"
	changes_scenario "$ws" --log-level debug
	# The listing's walk, and one after each call that changed something (4 to 11), none after
	# calls 3 and 12.
	[ "$(changes_walks)" -eq 9 ]
}

@test "after the suite: no container, volume, agent process or folder of ours is left" {
	# A server has 2 s to shut down; on a loaded machine it may leave its sandbox's folder (and
	# what the engine had not removed yet) for the next server on the same state folder, which
	# removes it before any call: that is the contract, applied first to every folder left.
	local left d
	left=$(find "$BATS_RUN_TMPDIR" "${TMPDIR:-/tmp}/sandbox-mcp-$(id -u)" -type d -name 'docker-????????' 2>/dev/null |
		grep -vE -f <(python3 "$TESTS_DIR/lib/ours.py" foreign-sandboxes | sed 's,.*,/&$,'; echo '^$') || true)
	for d in $left; do
		echo "# left by a server out of shutdown time: $d; the next server on its state folder removes it" >&3
		SANDBOX_STATE_DIR=$(dirname "$d") mcp_session <<<"$INIT"
		[ ! -e "$d" ]
	done
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
	# Unlabelled volumes too (a container's anonymous ones), none made and none removed, leaving
	# out another server's (lib/ours.py), which may come and go meanwhile.
	docker volume ls -q | sort >"$BATS_TEST_TMPDIR/volumes.now"
	[ -z "$(comm -13 "$BATS_FILE_TMPDIR/volumes.before" "$BATS_TEST_TMPDIR/volumes.now" |
		grep -vxF -f <(python3 "$TESTS_DIR/lib/ours.py" foreign-volumes; echo none))" ]
	[ -z "$(comm -23 "$BATS_FILE_TMPDIR/volumes.before" "$BATS_TEST_TMPDIR/volumes.now" |
		grep -vxF -f "$BATS_FILE_TMPDIR/volumes.foreign")" ]
	# Agents and sandbox folders of another server's running containers are not ours.
	[ -z "$(pgrep -f '^/\.sandbox-agent --connect' | grep -vxF -f <(python3 "$TESTS_DIR/lib/ours.py" foreign-pids; echo none))" ]
	[ -z "$(find "$BATS_RUN_TMPDIR" "${TMPDIR:-/tmp}/sandbox-mcp-$(id -u)" -type d -name 'docker-????????' 2>/dev/null |
		grep -vE -f <(python3 "$TESTS_DIR/lib/ours.py" foreign-sandboxes | sed 's,.*,/&$,'; echo '^$'))" ]
}

@test "once the server is connected, the agent's socket is gone: code cannot reach the agent" {
	tool execute_bash_commands '{"code":"ls -A /run/sandbox-agent; python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect(\\\"/run/sandbox-agent/agent.sock\\\")\" 2>&1 | tail -1"}'
	sc '.stdout | test("FileNotFoundError|ConnectionRefusedError")'
}
