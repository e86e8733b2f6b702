# --gpu: refused at start-up where there is no GPU to give, with the reason; --check lists what
# it sees; the local sandbox's /dev holds nothing of a GPU without it; Docker asks its engine
# for the nvidia driver (DeviceRequests), and an engine without it refuses, which the call says.
# With a GPU (none on this machine), scripts/gpu-check.sh runs nvidia-smi and a torch matrix
# multiply inside the sandbox.
# suite: uses docker
load lib/helpers
bats_require_minimum_version 1.5.0

teardown() {
	unprivileged_cleanup
}

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

# gpu_standins: after unprivileged_server, the server runs in a mount namespace of its own whose
# /dev is a tmpfs holding the host's null, zero, full, random, urandom and tty, and stand-ins for
# a GPU's nodes (/dev/nvidiactl, nvidia0 and nvidia-uvm, each a copy of /dev/null's numbers).
gpu_standins() {
	cat >"$UNPRIV_DIR/gpurun" <<-'EOF'
		#!/bin/sh
		exec unshare -m --propagation private sh -c '
		set -e
		d=$(mktemp -d)
		mount --bind /dev "$d"
		mount -t tmpfs -o mode=755 gpudev /dev
		for n in null zero full random urandom tty; do cp -a "$d/$n" /dev/; done
		mkdir -m 1777 /dev/shm
		for n in nvidiactl nvidia0 nvidia-uvm; do mknod -m 666 "/dev/$n" c 1 3; done
		umount "$d" && rmdir "$d"
		exec "$0" "$@"' "${0%/*}/run" "$@"
	EOF
	chmod a+rx "$UNPRIV_DIR/gpurun"
	export SANDBOX_MCP="$UNPRIV_DIR/gpurun"
}

@test "gpu: local --gpu gives the GPU's nodes (stand-ins here) and no more of /dev; without a memory cgroup it sets no RLIMIT_AS, under which CUDA fails, and --check says memory is NOT enforced" {
	no_gpu_or_skip
	[ "$(id -u)" -eq 0 ] || skip_or_fail "standing in a GPU's device nodes needs root"
	unprivileged_server
	gpu_standins
	run "$SANDBOX_MCP" --check --backend local --gpu
	[[ "$output" == *$'gpus (what --gpu gives the local backend):\n  the driver\'s device nodes are there (3), but /proc/driver/nvidia lists no GPU'* ]]
	[[ "$output" == *"memory      512 MiB    NOT enforced: no cgroup memory controller here, and --gpu rules out the per-process RLIMIT_AS"* ]]
	tool execute_bash_commands '{"code":"ls /dev | tr \"\\n\" \" \"; echo; ulimit -v; [ -c /dev/nvidiactl ] && echo chr"}' --gpu --backend local
	sc '.stdout == "fd full null nvidia-uvm nvidia0 nvidiactl random shm stderr stdin stdout urandom zero \nunlimited\nchr\n" and .exit_code == 0'
	# The same server without --gpu keeps the per-process limit.
	run "$SANDBOX_MCP" --check --backend local
	[[ "$output" == *"memory      512 MiB    per process only (RLIMIT_AS): no cgroup memory controller here"* ]]
	tool execute_bash_commands '{"code":"ls /dev | grep -c nvidia; ulimit -v"}' --backend local
	sc '.stdout == "0\n524288\n"'
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
