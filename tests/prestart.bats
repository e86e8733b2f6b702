# execute_python in an interpreter started ahead of the call (--python-prestart, the default on
# the local and Docker backends): each call still gets an interpreter of its own that sees what a
# new one would, case by case the same results as a plain start; calls that cannot use one start
# plainly; a started interpreter that code kills or stops costs a plain start, never the server;
# code cannot read or write it while it waits; --check says which start is in use.
# suite: uses docker
load lib/helpers
load lib/prestart
load lib/docker-setup
bats_require_minimum_version 1.5.0

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }
teardown() { [ -z "${UNPRIV_DIR:-}" ] || unprivileged_teardown; }

@test "prestart: a call sees nothing of the call before, not even its hash seed" {
	fresh_case
}

# The cases of lib/prestart-cases.py as calls 2..N+1 of one session (call 1 starts the first
# interpreter ahead), with the server's arguments; their results, addresses masked, in $cases_res.
cases_run() {
	local i=1 c
	{
		echo "$INIT"
		echo "$INITIALIZED"
		py_call 1 pass
		echo '{"wait": 1}'
		while IFS= read -r c; do
			i=$((i + 1))
			call_json "$i" execute_python "$(jq -cn --argjson s "$c" '{script: $s}')"
			echo "{\"wait\": $i}"
		done < <(python3 "$TESTS_DIR/lib/prestart-cases.py")
	} >"$BATS_TEST_TMPDIR/cases.script"
	: >"$SERVER_LOG"
	SESSION_TIMEOUT=300 mcp_session --log-level debug --no-sandbox-ahead "$@" <"$BATS_TEST_TMPDIR/cases.script"
	cases_res=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and (.id | type) == "number" and .id > 1)
		| {id, sc: (.result.structuredContent | del(.sandbox_id, .duration_ms)), isError: .result.isError}' |
		sed -E 's/0x[0-9a-f]+/0xADDR/g' | jq -sc 'sort_by(.id)')
	ncases=$(python3 "$TESTS_DIR/lib/prestart-cases.py" | wc -l)
	jqe "$cases_res" "length == $ncases"
}

@test "prestart: each call runs as a plain python3 task.py would: process, __main__, tracebacks, exits, signals, finalizers" {
	cases_run --no-python-prestart
	[ -z "$(prestarted)" ]
	local plain=$cases_res
	cases_run
	# Every case but the first ran in an interpreter started ahead... (the first: see below)
	[ "$(prestarted | wc -l)" -eq "$ncases" ]
	# ... the first of them compiling its starter, and every later one loading it as compiled.
	[ "$(kept | wc -l)" -eq $((ncases - 1)) ] || { echo "kept: $(kept | wc -l) of $ncases"; false; }
	[ "$(kept | head -1)" = 3 ]
	[ "$cases_res" = "$plain" ] || {
		diff <(jq . <<<"$plain") <(jq . <<<"$cases_res") >&2
		false
	}
	# ... and they say what Python says.
	jqe "$cases_res" '.[] | select(.id == 15).sc | .exit_code == 1 and (.stderr | contains("ZeroDivisionError")) and (.stderr | contains("/proc/") | not)'
	jqe "$cases_res" '.[] | select(.id == 24).sc | .exit_code == 130'
	jqe "$cases_res" '.[] | select(.id == 45).sc | .stdout == "from C\nfrom py\n" or .stdout == "from py\nfrom C\n"'
	# Finalizers run for a cycle that reached the oldest generation during the call.
	jqe "$cases_res" '.[] | select(.id == 57).sc | .stdout == "True\nold del 6\n"'
	jqe "$cases_res" '.[] | select(.id == 58).sc | .stdout == "end\ndel after collect 1\n"'
	jqe "$cases_res" '.[] | select(.id == 59).sc | .stdout == "builtins cycle del\n"'
	jqe "$cases_res" '.[] | select(.id == 60).sc | .stdout == "math cycle del\n"'
	jqe "$cases_res" '.[] | select(.id == 61).sc | .stdout == "gc cycle del\n"'
	jqe "$cases_res" '.[] | select(.id == 62).sc | .stdout == "b\na\n"'
	jqe "$cases_res" '.[] | select(.id == 63).sc | .stdout == "start\nstop\n"'
	# The environment: in order everywhere, and a change reaches a child's.
	jqe "$cases_res" '.[] | select(.id == 64).sc | .exit_code == 0 and (.stdout | split("\n") | .[1] == "True" and (.[3] | contains("NEW=1") and (contains("LANG=") | not)) and (.[2] | contains("LANG=C.UTF-8")))'
}

@test "prestart: the one difference is a frame of the starter below the script's own" {
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$(py_call 1 pass)
		{"wait": 1}
		$(py_call 2 'import inspect; print(len(inspect.stack()), inspect.stack()[-1].filename)')
	EOF
	[ "$(prestarted)" = 2 ]
	res 2
	sc '.stdout | test("^2 /proc/self/+fd/(\\./)+4\n$")'
}

@test "prestart: a call whose env changes how Python starts, or with args, starts plainly and gets both" {
	local seeded
	seeded=$(PYTHONHASHSEED=0 python3 -c 'print(hash("abc"))')
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$(py_call 1 pass)
		{"wait": 1}
		$(py_call 2 'import os; print(os.environ["FOO"])' '{"env": {"FOO": "bar"}}')
		{"wait": 2}
		$(py_call 3 'print(hash("abc"))' '{"env": {"PYTHONHASHSEED": "0"}}')
		{"wait": 3}
		$(py_call 4 'import sys; print(sys.argv[1:])' '{"args": ["a", "b c"]}')
		{"wait": 4}
		$(py_call 5 'print("after")')
	EOF
	# A variable of its own that Python does not read at start: prestarted all the same.
	[ "$(prestarted | tr '\n' ' ')" = "2 5 " ]
	res 2
	sc '.stdout == "bar\n"'
	res 3
	sc ".stdout == \"$seeded\n\""
	res 4
	sc '.stdout == "[\u0027a\u0027, \u0027b c\u0027]\n"'
	res 5
	sc '.stdout == "after\n"'
}

@test "prestart: preloaded modules are imported ahead from the system's folders alone; the workspace's wait for the call" {
	local pkgs=/workspace/.sandbox/packages
	# Calls with args start plainly, once the interpreter waiting ahead is ready.
	local plain='{"args": ["plain"]}'
	mcp_session --log-level debug --no-sandbox-ahead --python-preload decimal,wsmod <<-EOF
		$INIT
		$(py_call 1 'import sys; print("decimal" in sys.modules)')
		{"wait": 1}
		$(py_call 2 "import os; os.makedirs('$pkgs'); open('$pkgs/wsmod.py', 'w').write('open(\"/workspace/imported\", \"a\").write(\"x\\\\n\")\nVALUE=1\n')" "$plain")
		{"wait": 2}
		$(py_call 3 'import os, sys; print(os.path.exists("/workspace/imported"), "decimal" in sys.modules, "wsmod" in sys.modules)
import wsmod; print(wsmod.VALUE, open("/workspace/imported").read().count("x"))')
		{"wait": 3}
		$(py_call 4 "open('$pkgs/decimal.py', 'w').write('print(\"the workspace decimal\")\n')" "$plain")
		{"wait": 4}
		$(py_call 5 'import decimal; print(decimal.__file__)')
	EOF
	# 1: plain (none started yet). 3: in one started ahead after 2, which did not import the
	# workspace's wsmod: the call did, once. 5: a module of the workspace's would be imported in
	# place of the preloaded decimal: plain, as the workspace's is what a plain start imports.
	[ "$(prestarted | tr '\n' ' ')" = "3 " ]
	res 1
	sc '.stdout == "False\n"'
	res 3
	sc '.stdout == "False True False\n1 1\n"'
	res 5
	sc '.stdout == "the workspace decimal\n/workspace/.sandbox/packages/decimal.py\n"'
}

@test "prestart: with a user site folder (.pth files) calls start plainly, and see what it says as it changes" {
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$(py_call 1 'import os, site
d = site.getusersitepackages()
os.makedirs(d)
for n in "ab":
    os.makedirs("/workspace/" + n)
    open("/workspace/%s/m1.py" % n, "w").write("V = %r\n" % n)
open(d + "/x.pth", "w").write("/workspace/a\n")')
		{"wait": 1}
		$(py_call 2 'import m1; print(m1.V)')
		{"wait": 2}
		$(py_call 3 'import site; p = site.getusersitepackages() + "/x.pth"; open(p, "w").write("/workspace/b\n"); print(open(p).read(), end="")')
		{"wait": 3}
		$(py_call 4 'import m1; print(m1.V)')
		{"wait": 4}
		$(call_json 5 execute_bash_commands '{"code": "rm -r /workspace/.local"}')
		{"wait": 5}
		$(py_call 6 'import sys; print([p for p in sys.path if "/workspace/" in p])')
	EOF
	# The interpreter ahead reads no user site folder: with one there, a plain start; without,
	# one ahead again.
	[ "$(prestarted | tr '\n' ' ')" = "6 " ]
	res 2
	sc '.stdout == "a\n"'
	res 3
	sc '.stdout == "/workspace/b\n"'
	res 4
	sc '.stdout == "b\n"'
	res 6
	sc '.stdout == "[\u0027/workspace/.sandbox\u0027, \u0027/workspace/.sandbox/packages\u0027]\n"'
}

@test "prestart: --check says whether calls start in an interpreter started ahead, and why not" {
	run "$SANDBOX_MCP" --check --backend local
	[ "$status" -eq 0 ]
	[[ "$output" =~ "python      each call in a python3 started ahead of it (ready "[0-9]+" ms after the call before)" ]]
	run "$SANDBOX_MCP" --check --backend local --no-python-prestart
	[[ "$output" == *"python      a new interpreter started for each call (--no-python-prestart)"* ]]
	run "$SANDBOX_MCP" --check --backend local --python /bin/echo
	[[ "$output" == *"python      a new interpreter started for each call: none can be started ahead here (the prestarted interpreter ended while it started: it exited with 0)"* ]]
	run "$SANDBOX_MCP" --check --backend local --python-preload json,nosuchmod
	[[ "$output" == *"preloading json,nosuchmod"* ]]
	[[ "$output" == *"not preloaded: nosuchmod (ModuleNotFoundError: No module named 'nosuchmod')"* ]]
}


@test "prestart: an interpreter waiting ahead that code kills or stops is replaced, and the server serves on" {
	local kill stop
	kill=$(jq -cn '{code: "pkill -KILL -f \"fd/[.]/\" && echo killed"}')
	stop=$(jq -cn '{code: "pkill -STOP -f \"fd/[.]/\" && echo stopped"}')
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$(py_call 1 pass)
		{"wait": 1}
		$(waited)
		$(call_json 2 execute_bash_commands "$kill")
		{"wait": 2}
		$(py_call 3 'print(3)')
		{"wait": 3}
		$(py_call 4 'print(4)')
		{"wait": 4}
		$(waited)
		$(call_json 5 execute_bash_commands "$stop")
		{"wait": 5}
		$(py_call 6 'print(6)')
		{"wait": 6}
		$(py_call 7 'print(7)')
	EOF
	# Found dead, or not answering within a second, at the end of the call: replaced at once.
	[ "$(prestarted | tr '\n' ' ')" = "3 4 6 7 " ]
	res 2
	sc '.exit_code == 0 and .stdout == "killed\n"'
	res 5
	sc '.exit_code == 0 and .stdout == "stopped\n"'
	for id in 3 4 6 7; do
		res $id
		sc ".exit_code == 0 and .stdout == \"$id\n\""
	done
}

# early: the numbers of the calls answered as their interpreter exited, one per line.
early() {
	sed -n 's/.*debug: call \([0-9]*\) was answered as its interpreter exited$/\1/p' "$SERVER_LOG"
}

@test "prestart: a call is answered as its interpreter exits, before its memory is freed, with its exact status" {
	local i
	{
		echo "$INIT"
		echo "$INITIALIZED"
		py_call 1 pass
		echo '{"wait": 1}'
		for i in 2 3 4 5 6 7 8 9; do
			case $i in
			3) py_call $i 'import sys; print("three"); sys.exit(3)' ;;
			4) py_call $i 'raise SystemExit("four")' ;;
			5) py_call $i 'import atexit; atexit.register(print, "at exit")' ;;
			*) py_call $i "print($i)" ;;
			esac
			echo "{\"wait\": $i}"
		done
	} >"$BATS_TEST_TMPDIR/early.script"
	mcp_session --log-level debug --no-sandbox-ahead <"$BATS_TEST_TMPDIR/early.script"
	[ "$(prestarted | wc -l)" -eq 8 ]
	# The agent looks for a moment only: under load a call may end the old way, as it is
	# reaped; not all of them.
	[ "$(early | wc -l)" -ge 1 ]
	res 3
	sc '.exit_code == 3 and .stdout == "three\n"'
	res 4
	sc '.exit_code == 1 and .stderr == "four\n"'
	res 5
	sc '.exit_code == 0 and .stdout == "at exit\n"'
	for i in 2 6 7 8 9; do
		res $i
		sc ".exit_code == 0 and .stdout == \"$i\n\""
	done
}

@test "prestart: code that says its interpreter exits before it does gains nothing; nothing of a call outlives its answer" {
	local liar count
	liar=$(
		cat <<-'EOF'
			import os, signal, sys, time
			os.kill(1, signal.SIGUSR1)
			time.sleep(0.3)
			print("after")
			sys.stdout.flush()
			os.kill(1, signal.SIGUSR1)
			time.sleep(0.1)
			print("still")
			raise SystemExit(4)
		EOF
	)
	# Every process but the agent, this shell and the interpreter waiting ahead (or one still
	# starting, a fork of the agent not yet exec'd), as tests/docker.bats counts them.
	count=$(jq -cn --arg c 'n=0; mapfile -d "" -t one </proc/1/cmdline; for p in /proc/[0-9]*; do c=(); mapfile -d "" -t c <$p/cmdline 2>/dev/null || continue; case ${c[1]:-} in /proc/self/fd/*) continue ;; esac; [ "$p" != /proc/1 ] && [ "${c[*]}" = "${one[*]}" ] && continue; n=$((n + 1)); done; echo $n' '{code: $c}')
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$INITIALIZED
		$(py_call 1 pass)
		{"wait": 1}
		$(py_call 2 "$liar")
		{"wait": 2}
		$(py_call 3 $'import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint("parent")')
		{"wait": 3}
		$(call_json 4 execute_bash_commands "$count")
		{"wait": 4}
		$(py_call 5 'print(5)')
		{"wait": 5}
		$(call_json 6 execute_bash_commands "$count")
		{"wait": 6}
		$(py_call 7 'import threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start()')
		{"wait": 7}
		$(call_json 8 execute_bash_commands "$count")
	EOF
	[ "$(prestarted | tr '\n' ' ')" = "2 3 5 7 " ]
	# Said early, and again: the status and the output are the ones it ends with.
	res 2
	sc '.exit_code == 4 and .stdout == "after\nstill\n"'
	# A child left: not answered early, and ended with the call; a thread left ends with its
	# process, early or not.
	res 3
	sc '.exit_code == 0 and .stdout == "parent\n"'
	for i in 4 6 8; do
		res $i
		sc '.exit_code == 0 and .stdout == "2\n"'
	done
	run ! grep -qx -e 2 -e 3 <(early)
}

@test "prestart: code cannot hand the agent a starter of its own for the interpreters after it" {
	# The call's code writes, on every descriptor it has and can open of the agent's and of
	# the interpreter starting ahead, the frames a first interpreter sends: its functions'
	# code ('C', here a code object that marks the workspace), and 'R'. Later interpreters
	# load only what the sandbox's first compiled: the mark is never made.
	local forge
	forge=$(
		cat <<-'EOF'
			import glob, marshal, os
			def frame(k, p=b""):
			    return len(p + b"x").to_bytes(4, "little") + k + p
			bad = frame(b"C", marshal.dumps(compile("open('/workspace/forged', 'w')", "x", "exec"))) + frame(b"R")
			fds = [int(f) for f in os.listdir("/proc/self/fd")]
			for p in glob.glob("/proc/[0-9]*/fd/*"):
			    try:
			        fds.append(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
			    except OSError:
			        pass
			for fd in fds:
			    try:
			        os.write(fd, bad)
			    except OSError:
			        pass
			print("sent")
		EOF
	)
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$(py_call 1 pass)
		{"wait": 1}
		$(py_call 2 "$forge")
		{"wait": 2}
		$(py_call 3 "$forge")
		{"wait": 3}
		$(call_json 4 execute_bash_commands "$(jq -cn --arg c "python3 -c '$forge'" '{code: $c}')")
		{"wait": 4}
		$(py_call 5 'import os; print(os.path.exists("/workspace/forged"))')
		{"wait": 5}
		$(py_call 6 'import os; print(os.path.exists("/workspace/forged"))')
	EOF
	res 5
	sc '.exit_code == 0 and .stdout == "False\n"'
	res 6
	sc '.exit_code == 0 and .stdout == "False\n"'
	# The later calls still ran in interpreters started ahead, from the first one's code.
	[ "$(prestarted | tr '\n' ' ')" = "2 3 5 6 " ]
	[ "$(kept | tr '\n' ' ')" = "3 5 6 " ]
}

@test "prestart: code cannot read or write an interpreter waiting ahead" {
	local probe
	probe=$(
		cat <<-'EOF'
			pid=$(pgrep -f 'fd/[.]/')
			[ -n "$pid" ] || { echo "none waits"; exit 1; }
			for f in mem environ maps; do cat /proc/$pid/$f >/dev/null 2>&1 && echo "read $f"; done
			python3 -c '
			import ctypes, sys
			libc = ctypes.CDLL(None, use_errno=True)
			print("ptrace", libc.ptrace(16, int(sys.argv[1]), 0, 0), ctypes.get_errno() != 0)' "$pid"
			echo done
		EOF
	)
	mcp_session <<-EOF
		$INIT
		$(py_call 1 pass)
		{"wait": 1}
		$(waited)
		$(call_json 2 execute_bash_commands "$(jq -cn --arg c "$probe" '{code: $c}')")
	EOF
	res 2
	sc '.exit_code == 0 and .stdout == "ptrace -1 True\ndone\n"'
}

@test "prestart: a --python that cannot be started ahead leaves every call to a plain start" {
	# echo exits at once whatever it is given: never ready ahead; as a plain start, it echoes.
	mcp_session --log-level debug --no-sandbox-ahead --python /bin/echo <<-EOF
		$INIT
		$(for i in 1 2 3 4 5; do py_call $i pass; echo "{\"wait\": $i}"; done)
		$(call_json 6 execute_bash_commands '{"code": "echo bash"}')
	EOF
	[ -z "$(prestarted)" ]
	for id in 1 2 3 4 5; do
		res $id
		sc '.exit_code == 0 and .stdout == "/workspace/.sandbox/task.py\n"'
	done
	res 6
	sc '.stdout == "bash\n"'
	run "$SANDBOX_MCP" --check --backend local --python /bin/echo
	[[ "$output" == *"none can be started ahead here (the prestarted interpreter ended while it started: it exited with 0)"* ]]
}

# planted_case: call 1 plants code wherever `site` could find it (lib/prestart-plant.py); calls 2
# (with args: a plain start, once the interpreter started after 1 is ready) and 3 (as any call)
# say what of it ran and what runs in the sandbox (lib/prestart-look.py). Run with
# --python-prestart and without, the results in $planted_on and $planted_off.
planted_case() {
	local plant look opt
	plant=$(jq -cn --rawfile s "$TESTS_DIR/lib/prestart-plant.py" '{script: $s}')
	look=$(jq -cn --rawfile s "$TESTS_DIR/lib/prestart-look.py" '{script: $s}')
	for opt in --python-prestart --no-python-prestart; do
		: >"$SERVER_LOG"
		mcp_session --log-level debug --no-sandbox-ahead "$opt" <<-EOF
			$INIT
			$(call_json 1 execute_python "$plant")
			{"wait": 1}
			$(call_json 2 execute_python "$(jq -c '. + {args: ["look"]}' <<<"$look")")
			{"wait": 2}
			$(call_json 3 execute_python "$look")
		EOF
		res 1
		# Planted in the workspace's folders; nowhere else could be written.
		sc '.exit_code == 0 and (.stdout | endswith("writable outside the workspace: []\n"))'
		local out
		out=$(for i in 2 3; do response $i | jq -c '.result.structuredContent | {exit_code, stdout, stderr}'; done)
		if [ "$opt" = --python-prestart ]; then planted_on=$out; else planted_off=$out; fi
	done
	# Nothing planted ran anywhere but in a call's own start, and nothing of it runs beside.
	jqe "$(jq -sc . <<<"$planted_on")" 'all(.exit_code == 0 and .stderr == "" and (.stdout | endswith("others: []\n")))'
	# Each call ran what a plain `python3 task.py` runs: the same as with no interpreter ahead.
	[ "$planted_on" = "$planted_off" ] || {
		diff <(echo "$planted_off") <(echo "$planted_on") >&2
		return 1
	}
	jqe "$(jq -sc . <<<"$planted_on")" 'all(.stdout | contains("/workspace/.sandbox/packages/sitecustomize.py"))'
}

@test "prestart: code planted where site looks runs only in a call's own start, as in a plain start (local)" {
	planted_case
}

@test "prestart: code planted where site looks runs only in a call's own start, as in a plain start (Docker)" {
	with_backend docker
	planted_case
}

# wrapped_session MODE [ID SCRIPT]...: a session whose --python is lib/prestart-wrap.py in the
# workspace, in MODE; call 1 puts it there, call 2 (pass) starts the first interpreter ahead, and
# the calls given follow.
wrapped_session() {
	local mode=$1 files
	shift
	files=$(jq -cn --rawfile w "$TESTS_DIR/lib/prestart-wrap.py" --arg m "$mode" '{code: "chmod +x py", files: {py: $w, "wrap-mode": $m}}')
	{
		echo "$INIT"
		call_json 1 execute_bash_commands "$files"
		echo '{"wait": 1}'
		py_call 2 pass
		echo '{"wait": 2}'
		while [ $# -gt 0 ]; do
			py_call "$1" "$2"
			echo "{\"wait\": $1}"
			shift 2
		done
	} >"$BATS_TEST_TMPDIR/wrapped.script"
	mcp_session --log-level debug --no-sandbox-ahead --python /workspace/py <"$BATS_TEST_TMPDIR/wrapped.script"
}

runs_once_case() {
	wrapped_session mute 3 'open("/workspace/lines", "a").write("once\n")' \
		4 'print(open("/workspace/lines").read(), end=""); print(open("/workspace/wrapped").read(), end="")'
	res 3
	sc '.exit_code == 0'
	res 4
	# The call was handed to a muted one (wrapped), which never ran it: it started plainly, once.
	sc '.exit_code == 0 and (.stdout | startswith("once\nmute\n")) and (.stdout | split("\n") | map(select(. == "once")) | length == 1)'
	[ -z "$(prestarted)" ]
}

not_alone_case() {
	local look='import os
print(open("/workspace/wrapped").read().split()[0])
print(sorted(open("/proc/%s/comm" % p).read().strip() for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()))'
	for mode in child thread; do
		: >"$SERVER_LOG"
		wrapped_session "$mode" 3 "$look"
		[ -z "$(prestarted)" ]
		res 3
		# Plain, and nothing the discarded one started runs beside it.
		sc ".exit_code == 0 and (.stdout | startswith(\"$mode\n\")) and (.stdout | contains(\"sleep\") | not)"
	done
}

@test "prestart: a call handed to the interpreter ahead runs once, even when its answer is not heard in time (local)" {
	runs_once_case
}

@test "prestart: a call handed to the interpreter ahead runs once, even when its answer is not heard in time (Docker)" {
	with_backend docker
	runs_once_case
}

@test "prestart: an interpreter ahead that is not alone (a child, a thread) serves no call; what it started is gone (local)" {
	not_alone_case
}

@test "prestart: an interpreter ahead that is not alone (a child, a thread) serves no call; what it started is gone (Docker)" {
	with_backend docker
	not_alone_case
}

@test "prestart: a module planted beside the script over a preloaded one is imported as a plain start imports it" {
	# A plain `python3 /workspace/.sandbox/task.py` has the script's folder first in sys.path:
	# a json.py there is the json the script imports, even when json was preloaded ahead.
	local plant='open("/workspace/.sandbox/json.py", "w").write("WHO = \"planted\"\n")'
	local look='import json; print(getattr(json, "WHO", "stdlib"), json.__file__)'
	local opt out_on out_off
	for opt in --python-prestart --no-python-prestart; do
		: >"$SERVER_LOG"
		mcp_session --log-level debug --no-sandbox-ahead --python-preload json "$opt" <<-EOF
			$INIT
			$(py_call 1 "$plant")
			{"wait": 1}
			$(py_call 2 "$look")
			{"wait": 2}
			$(py_call 3 "$look")
		EOF
		for id in 2 3; do
			res $id
			sc '.exit_code == 0'
		done
		if [ "$opt" = --python-prestart ]; then
			out_on=$(for id in 2 3; do response $id | jq -r .result.structuredContent.stdout; done)
		else
			out_off=$(for id in 2 3; do response $id | jq -r .result.structuredContent.stdout; done)
		fi
	done
	[ "$out_off" = "$(printf 'planted /workspace/.sandbox/json.py\n\nplanted /workspace/.sandbox/json.py')" ]
	[ "$out_on" = "$out_off" ] || {
		echo "with prestart: $out_on" >&2
		false
	}
}

@test "prestart: a signal sent to an interpreter waiting ahead reaches no later call" {
	# Every signal but KILL and STOP is blocked while it waits: one sent then stays pending,
	# and must not be delivered to the call it would become. Before each bash call, a call with
	# args (a plain start, which leaves the interpreter ahead for the next call), then a wait
	# until that interpreter has made itself non-dumpable, make sure the bash call runs beside
	# one that is ready, which the next call would be handed to. (One not ready is ended before
	# a bash call's code runs.)
	local sig id=1 script="$INIT"$'\n'"$(py_call 1 pass)"$'\n{"wait": 1}'
	for sig in TERM INT USR1 HUP; do
		id=$((id + 1))
		script+=$'\n'"$(py_call $id pass '{"args": ["x"]}')"$'\n'"{\"wait\": $id}"$'\n'"$(waited)"
		id=$((id + 1))
		script+=$'\n'"$(call_json $id execute_bash_commands "$(jq -cn --arg s "$sig" '{code: ("pkill -" + $s + " -f \"fd/[.]/\" && echo sent")}')")"
		script+=$'\n'"{\"wait\": $id}"
		id=$((id + 1))
		script+=$'\n'"$(py_call $id "print($id)")"$'\n'"{\"wait\": $id}"
	done
	mcp_session --log-level debug --no-sandbox-ahead <<<"$script"
	for id in 3 6 9 12; do
		res $id
		sc '.exit_code == 0 and .stdout == "sent\n"'
	done
	for id in 4 7 10 13; do
		res $id
		sc ".exit_code == 0 and .stdout == \"$id\n\" and .stderr == \"\""
	done
}

@test "prestart: limits set on an interpreter waiting ahead (prlimit) reach no later call" {
	# The filter refuses setting another process's limits; were it let through, the interpreter's
	# limits would differ from the agent's and it would serve no call: either way, no call
	# inherits them.
	local probe='import os, resource
pid = int(os.popen("pgrep -f \"fd/[.]/\"").read().split()[0])
try:
    resource.prlimit(pid, resource.RLIMIT_STACK, (1 << 20, 1 << 20))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (8, 8))
    print("set")
except PermissionError:
    print("refused")'
	local look='import resource
print(resource.getrlimit(resource.RLIMIT_STACK) == resource.getrlimit(resource.RLIMIT_STACK) and resource.getrlimit(resource.RLIMIT_STACK)[0] != 1 << 20, resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 8)'
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$(py_call 1 pass)
		{"wait": 1}
		$(py_call 2 pass '{"args": ["x"]}')
		{"wait": 2}
		$(call_json 3 execute_bash_commands "$(jq -cn --arg p "$probe" '{code: ("python3 -c " + ($p | @sh))}')")
		{"wait": 3}
		$(py_call 4 "$look")
	EOF
	res 3
	sc '.exit_code == 0 and .stdout == "refused\n"'
	res 4
	sc '.exit_code == 0 and .stdout == "True True\n"'
}

@test "prestart: the priority or CPUs set on an interpreter waiting ahead reach no later call" {
	# Code may pin a process of its uid to CPUs (renicing another is refused by the filter): a
	# call gets what a plain start gets (call 2, with args, is one).
	local probe='pid=$(pgrep -f "fd/[.]/") && { renice -n 15 -p "$pid" >/dev/null 2>&1 && echo reniced; taskset -p 1 "$pid" >/dev/null && echo pinned; }'
	local look='import os
print(os.nice(0), sorted(os.sched_getaffinity(0)))'
	mcp_session --log-level debug --no-sandbox-ahead <<-EOF
		$INIT
		$(py_call 1 pass)
		{"wait": 1}
		$(py_call 2 "$look" '{"args": ["x"]}')
		{"wait": 2}
		$(call_json 3 execute_bash_commands "$(jq -cn --arg p "$probe" '{code: $p}')")
		{"wait": 3}
		$(py_call 4 "$look")
	EOF
	res 3
	sc '.exit_code == 0 and .stdout == "pinned\n"'
	local plain
	plain=$(response 2 | jq -r .result.structuredContent.stdout)
	[[ "$plain" == "0 "* ]]
	res 4
	sc ".exit_code == 0 and .stdout == $(jq -n --arg s "$plain" '$s + "\n"')"
}

# bash_beside_start_case: bash calls sent right after a Python call, each as soon as the Python
# call's answer came, so that most begin while the interpreter the agent starts after it is not
# ready. Such a call neither waits for that interpreter nor shares the CPU with its start: the
# agent ends it before the call's code runs, so the code finds none (no process of it, not even
# a fork of the agent not yet exec'd: every process of the sandbox but the agent and the code's
# own is listed). One the agent heard ready before the call is kept: then the code finds it, and
# the next Python call runs in it (its pid). Either way the next Python call runs in an
# interpreter started ahead.
bash_beside_start_case() {
	local probe lines='' i pid early=0
	probe=$(
		cat <<-'EOF'
			others=
			for d in /proc/[0-9]*; do
				p=${d#/proc/}
				[ "$p" != 1 ] && [ "$p" != "$PPID" ] && [ "$p" != "$$" ] && [ "$p" != "$BASHPID" ] || continue
				mapfile -d '' -t a < "$d/cmdline" 2>/dev/null || continue
				[ "${a[0]:-}" != "ls" ] || continue
				case "${a[1]:-}" in
				*/fd/./*) others+=" py$p" ;;
				*) others+=" other$p:${a[0]:-}" ;;
				esac
			done
			echo "seen${others}"
		EOF
	)
	for i in $(seq 1 12); do
		lines+="$(py_call $((2 * i)) 'import os; print(os.getpid())')"$'\n'"{\"wait\": $((2 * i))}"$'\n'
		lines+="$(call_json $((2 * i + 1)) execute_bash_commands "$(jq -cn --arg c "$probe" '{code: $c}')")"$'\n'
		lines+="{\"wait\": $((2 * i + 1))}"$'\n'
	done
	mcp_session --log-level debug "$@" <<-EOF
		$INIT
		$INITIALIZED
		$(py_call 1 pass)
		{"wait": 1}
		${lines}$(py_call 26 'import os; print(os.getpid())')
		{"wait": 26}
		$(py_call 27 'print(27)')
	EOF
	for i in $(seq 1 12); do
		res $((2 * i + 1))
		# Nothing but the code's own processes and, at most, one interpreter ahead.
		sc '.exit_code == 0 and (.stdout | test("^seen( py[0-9]+)?\n$"))'
		pid=$(jq -r '.structuredContent.stdout | capture("^seen py(?<p>[0-9]+)").p // empty' <<<"$result")
		if [ -z "$pid" ]; then
			early=$((early + 1))
			continue
		fi
		# One ready before the call: kept, the next Python call runs in it.
		res $((2 * i + 2))
		sc '.exit_code == 0'
		[ "$(jq -r .structuredContent.stdout <<<"$result")" = "$pid" ]
	done
	res 27
	sc '.exit_code == 0 and .stdout == "27\n"'
	# Every Python call after the first ran in an interpreter ahead.
	for i in $(seq 2 2 26) 27; do
		prestarted | grep -qx "$i"
	done
	[ "$early" -ge 1 ]
}

@test "prestart: a bash call right after a Python call waits for no interpreter starting ahead, which is ended before its code runs (local)" {
	bash_beside_start_case
}

@test "prestart: a bash call right after a Python call waits for no interpreter starting ahead, which is ended before its code runs (Docker)" {
	with_backend docker
	bash_beside_start_case
}

@test "prestart: a bash call right after a Python call waits for no interpreter starting ahead, which is ended before its code runs (local, not root)" {
	unprivileged_server
	with_backend local
	bash_beside_start_case
}

@test "prestart: a bash call right after a Python call waits for no interpreter starting ahead, which is ended before its code runs (Docker, not root)" {
	unprivileged_server
	unprivileged_docker
	with_backend docker
	bash_beside_start_case
}
