# --gpu: refused at start-up where there is no GPU to give, with the reason; --check lists what
# it sees; the local sandbox's /dev holds nothing of a GPU without it; Docker asks its engine
# for the nvidia driver (DeviceRequests), and an engine without it refuses, which the call says.
# With a GPU (none on this machine), scripts/gpu-check.sh runs nvidia-smi and a torch matrix
# multiply inside the sandbox.
# suite: uses docker
load lib/helpers
bats_require_minimum_version 1.5.0

no_gpu_or_skip() {
	[ ! -e /dev/nvidiactl ] || skip "this machine has an NVIDIA GPU: scripts/gpu-check.sh checks it"
}

@test "gpu: --gpu on the local backend where no GPU is: refused at start-up, exit 2, one line saying why" {
	no_gpu_or_skip
	run --separate-stderr "$SANDBOX_MCP" --gpu --backend local </dev/null
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sandbox-mcp: --gpu: no NVIDIA GPU here: /dev/nvidiactl is missing"* ]]
	run --separate-stderr env SANDBOX_GPU=1 "$SANDBOX_MCP" --backend local </dev/null
	[ "$status" -eq 2 ]
}

@test "gpu: --gpu on Daytona, or on auto with a Daytona key, is refused at start-up with the reason" {
	run --separate-stderr "$SANDBOX_MCP" --gpu --backend daytona </dev/null
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--gpu: the daytona backend gives no GPU"* ]]
	run --separate-stderr env DAYTONA_API_KEY=k "$SANDBOX_MCP" --gpu --backend auto </dev/null
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"choose --backend docker or local"* ]]
}

@test "gpu: --check lists the GPUs it sees, or says why it sees none" {
	no_gpu_or_skip
	run "$SANDBOX_MCP" --check --backend local
	[[ "$output" == *$'gpus (what --gpu gives the local backend):\n  no NVIDIA GPU here: /dev/nvidiactl is missing'* ]]
}

@test "gpu: without --gpu the local sandbox's /dev holds no device but null, zero, full, random and urandom" {
	tool execute_bash_commands '{"code":"cd /dev && ls -l | grep \"^[cb]\" | awk \"{print \\$NF}\" | tr \"\\n\" \" \"; echo; ls -d nvidia* dri 2>&1 | head -2"}'
	sc '.stdout | startswith("full null random urandom zero \n")'
	sc '.stdout | test("nvidia.*No such file")'
}

@test "gpu: docker --gpu asks the engine for its nvidia driver (DeviceRequests gpu); an engine without it refuses, and the call says so" {
	local out
	out=$("$TESTS_DIR/lib/docker-engine.sh" up "$BATS_FILE_TMPDIR/engine.env" 2>&1) || skip_or_fail "no Docker engine here: $out"
	# shellcheck disable=SC1090
	. "$BATS_FILE_TMPDIR/engine.env"
	export DOCKER_HOST
	"$REPO_DIR/backends/docker/test-image.sh" sandbox-mcp-test:latest >/dev/null 2>&1 || skip_or_fail "no test image"
	docker info --format '{{json .Runtimes}}' | grep -q nvidia && skip "this engine has the nvidia runtime"
	tool execute_bash_commands '{"code":"echo ran"}' --gpu --backend docker --image sandbox-mcp-test:latest
	"$TESTS_DIR/lib/docker-engine.sh" down "$BATS_FILE_TMPDIR/engine.env"
	sc '.exit_code == 1 and .stdout == ""'
	sc '.stderr | test("could not select device driver \"nvidia\" with capabilities: \\[\\[gpu\\]\\]")'
	[ -z "$(our_containers)" ]
}
