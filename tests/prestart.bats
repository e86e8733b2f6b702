# execute_python in an interpreter started ahead of the call (--python-prestart, the default on
# the local and Docker backends): each call still gets an interpreter of its own that sees what a
# new one would, case by case the same results as a plain start; calls that cannot use one start
# plainly; a started interpreter that code kills or stops costs a plain start, never the server;
# code cannot read or write it while it waits; --check says which start is in use.
load lib/helpers
load lib/prestart
bats_require_minimum_version 1.5.0

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

@test "prestart: preloaded modules are imported ahead; a changed module file or package folder means a plain start" {
	local pkgs=/workspace/.sandbox/packages
	# 2 and 5 change the package folder from a call with args, which starts plainly but only
	# once the interpreter waiting ahead is ready (a bash call would not wait, and would end one
	# still importing with its processes): it is the one that must see the change.
	local plain='{"args": ["plain"]}'
	mcp_session --log-level debug --no-sandbox-ahead --python-preload decimal,wsmod <<-EOF
		$INIT
		$(py_call 1 'import sys; print("decimal" in sys.modules)')
		{"wait": 1}
		$(py_call 2 "import os; os.makedirs('$pkgs'); open('$pkgs/wsmod.py', 'w').write('VALUE=1\\n')" "$plain")
		{"wait": 2}
		$(py_call 3 'import sys, wsmod; print("decimal" in sys.modules, wsmod.VALUE)')
		{"wait": 3}
		$(py_call 4 'import sys; print("wsmod" in sys.modules)')
		{"wait": 4}
		$(py_call 5 "open('$pkgs/wsmod.py', 'w').write('VALUE=22\\n')" "$plain")
		{"wait": 5}
		$(py_call 6 'import wsmod; print(wsmod.VALUE)')
		{"wait": 6}
		$(py_call 7 'import sys, wsmod; print("wsmod" in sys.modules, wsmod.VALUE)')
	EOF
	# 1: plain (none started yet). 3: the package folder changed since the interpreter started
	# (its preload of wsmod failed then): plain. 4: preloaded both. 6: wsmod.py changed: plain.
	# 7: the new wsmod, preloaded.
	[ "$(prestarted | tr '\n' ' ')" = "4 7 " ]
	res 1
	sc '.stdout == "False\n"'
	res 3
	sc '.stdout == "False 1\n"'
	res 4
	sc '.stdout == "True\n"'
	res 6
	sc '.stdout == "22\n"'
	res 7
	sc '.stdout == "True 22\n"'
}

@test "prestart: a .pth file that changes between calls means a plain start" {
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
		$(py_call 3 'import m1; print(m1.V)')
		{"wait": 3}
		$(py_call 4 'import site; p = site.getusersitepackages() + "/x.pth"; open(p, "w").write("/workspace/b\n"); print(open(p).read(), end="")' '{"args": ["plain"]}')
		{"wait": 4}
		$(py_call 5 'import m1; print(m1.V)')
	EOF
	# 2 and 3: started ahead, after call 1, with x.pth read. 4 (with args) starts plainly, once
	# the one waiting ahead is ready. 5: x.pth says another folder now (same name and size):
	# plain.
	[ "$(prestarted | tr '\n' ' ')" = "2 3 " ]
	for i in 2 3; do
		res $i
		sc '.stdout == "a\n"'
	done
	res 4
	sc '.stdout == "/workspace/b\n"'
	res 5
	sc '.stdout == "b\n"'
}

@test "prestart: an interpreter that became ready while a bash call changed its folders serves no call" {
	# slowmod, preloaded, waits for the bash call to have written a .pth file, then tells it
	# so; the call then stays a while, so that the interpreter is ready before the call ends.
	# It must not serve call 3: its site ran before x.pth was there.
	local pkgs=/workspace/.sandbox/packages
	local slow="import os, time\nwhile not os.path.exists('/workspace/go'):\n    time.sleep(0.01)\nopen('/workspace/imported', 'w').close()\n"
	mcp_session --log-level debug --no-sandbox-ahead --python-preload slowmod <<-EOF
		$INIT
		$(py_call 1 "import os, site
os.makedirs('$pkgs'); os.makedirs('/workspace/lib'); os.makedirs(site.getusersitepackages())
open('/workspace/usersite', 'w').write(site.getusersitepackages())
open('/workspace/lib/m1.py', 'w').write('V = 1\\n')
open('$pkgs/slowmod.py', 'w').write(\"$slow\")" '{"args": ["plain"]}')
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code":"echo /workspace/lib > \"$(cat /workspace/usersite)/x.pth\"; touch /workspace/go; until [ -e /workspace/imported ]; do sleep 0.01; done; sleep 0.5; echo written"}')
		{"wait": 2}
		$(py_call 3 'import m1; print(m1.V)')
	EOF
	res 1
	sc '.exit_code == 0'
	res 2
	sc '.stdout == "written\n"'
	res 3
	sc '.exit_code == 0 and .stdout == "1\n"'
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
		$(call_json 2 execute_bash_commands "$kill")
		{"wait": 2}
		$(py_call 3 'print(3)')
		{"wait": 3}
		$(py_call 4 'print(4)')
		{"wait": 4}
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
