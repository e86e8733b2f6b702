# What the sandbox's code can make of the listing and small files that come with a call's end
# (AG_OUTPUTS; on Daytona the runner's "out"): nothing outside the workspace is read, nothing
# blocks, what the server answers is what a request would say now, and the server keeps serving.
# suite: uses docker
load lib/helpers
load lib/docker-setup
load lib/daytona-setup

setup_file() {
	docker_setup_file
	daytona_setup_file
}
teardown_file() {
	docker_teardown_file
	daytona_teardown_file
}
teardown() { unprivileged_teardown; }

bash_call() { # ID CODE [TIMEOUT_S]
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" --argjson t "${3:-null}" '{code: $c} + (if $t then {timeout_s: $t} else {} end)')"
}

read_json() { # ID PATH-IN-WORKSPACE
	jq -cn --argjson id "$1" --arg u "sandbox://workspace/$2" '{jsonrpc: "2.0", id: $id, method: "resources/read", params: {uri: $u}}'
}

# A call that times out with a tree of many folders in outputs/: the walk that makes the
# listing which comes with its end must not take the sandbox for one that does not stop.
timeout_tree_case() {
	with_backend "$1"
	mcp_session <<EOF
$INIT
$(bash_call 1 'mkdir -p outputs; cd outputs; python3 -c "
import os
for i in range(300):
    d = \"d%03d\" % i
    os.mkdir(d)
    for j in range(330):
        os.mkdir(\"%s/%03d\" % (d, j))
"; echo made' 100)
{"wait": 1}
$(bash_call 2 'sleep 100' 2)
{"wait": 2}
$(bash_call 3 'sleep 1.5; echo ended' 2)
{"wait": 3}
$(bash_call 4 'echo alive; ls outputs | wc -l')
{"wait": 4}
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "made\n"'
	res 2
	sc '.exit_code == 124 and .error == null'
	# Ended by itself just before its deadline, the walk past it: killed or not, the sandbox stays.
	res 3
	sc '(.exit_code == 0 or .exit_code == 124) and .error == null'
	res 4
	sc '.stdout == "alive\n300\n"'
}

@test "local: a call timed out with 100k folders in outputs/ keeps its sandbox" { timeout_tree_case local; }
@test "docker: a call timed out with 100k folders in outputs/ keeps its sandbox" { timeout_tree_case docker; }
