# Python calls in interpreters started ahead of them (--python-prestart): shared by
# tests/prestart.bats (local) and the Docker suite. Load after lib/helpers.

# prestarted: the numbers of the calls that ran in an interpreter started ahead, one per line,
# from the server's debug log.
prestarted() {
	sed -n 's/.*debug: call \([0-9]*\) ran in an interpreter started ahead$/\1/p' "$SERVER_LOG"
}

# kept: the numbers of the calls whose interpreter loaded its starter (prestart.py's functions)
# as the code object an interpreter before it compiled, one per line, from the debug log.
kept() {
	sed -n 's/.*debug: call \([0-9]*\): its interpreter loaded its starter as compiled by one before$/\1/p' "$SERVER_LOG"
}

# py_call ID SCRIPT [EXTRA_ARGS_JSON]: an execute_python request line.
py_call() {
	call_json "$1" execute_python "$(jq -cn --arg s "$2" --argjson x "${3:-{\}}" '{script: $s} + $x')"
}

# fresh_case [SERVER ARGS...]: call 2 changes everything a script can change in its interpreter;
# call 3, also in an interpreter started ahead, sees none of it.
fresh_case() {
	local change check
	change=$(
		cat <<-'EOF'
			import builtins, decimal, json, os, signal, sys, threading, time, warnings
			G = 1
			json.dumps = lambda *a, **k: "patched"
			sys.path.append("/tmp/added")
			os.environ["LEAK"] = "1"
			os.chdir("/tmp")
			os.umask(0o077)
			signal.signal(signal.SIGUSR1, lambda *a: None)
			signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
			threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
			leaked = open("/workspace/leak.txt", "w")
			sys.setrecursionlimit(123)
			builtins.LEAKED = 1
			warnings.simplefilter("error")
			sys.modules["fake_mod"] = type(sys)("fake_mod")
			decimal.getcontext().prec = 3
			print(hash("abc"))
		EOF
	)
	check=$(
		cat <<-'EOF'
			import builtins, decimal, json, os, signal, sys, threading, warnings
			print("G" in globals(), json.dumps([1]), "/tmp/added" in sys.path, "LEAK" in os.environ,
			      os.getcwd(), oct(os.umask(0o022)), signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
			      signal.pthread_sigmask(signal.SIG_BLOCK, []), threading.active_count(),
			      sorted(os.listdir("/proc/self/fd")), sys.getrecursionlimit(), hasattr(builtins, "LEAKED"),
			      any(f[0] == "error" for f in warnings.filters), "fake_mod" in sys.modules,
			      decimal.getcontext().prec)
			print(hash("abc"))
		EOF
	)
	mcp_session --log-level debug --no-sandbox-ahead "$@" <<-EOF
		$INIT
		$INITIALIZED
		$(py_call 1 pass)
		{"wait": 1}
		$(py_call 2 "$change")
		{"wait": 2}
		$(py_call 3 "$check")
	EOF
	[ "$(prestarted | tr '\n' ' ')" = "2 3 " ]
	result=$(response 2 | jq -c .result)
	sc '.exit_code == 0'
	local h2 h3
	h2=$(jq -r .structuredContent.stdout <<<"$result")
	result=$(response 3 | jq -c .result)
	sc '.exit_code == 0 and .stderr == ""'
	sc '(.stdout | split("\n")[0]) == "False [1] False False /workspace 0o22 True set() 1 [\u00270\u0027, \u00271\u0027, \u00272\u0027, \u00273\u0027] 1000 False False False 28"'
	h3=$(jq -r '.structuredContent.stdout | split("\n")[1]' <<<"$result")
	# Not even the hash seed is shared.
	[ -n "$h2" ] && [ -n "$h3" ] && [ "$h2" != "$h3" ]
}

# waited: a session step that waits until the interpreter started ahead, a descendant of the
# server under test, is ready: non-dumpable (it closes its source's pipe, fd 4, right after),
# every signal blocked (just before it says it is ready) and asleep (waiting for a call, after
# it said so). A call that begins after that runs beside it, and can kill or stop it; one that
# begins before ends it first (the agent keeps only one it heard ready).
waited() {
	local py
	py=$(
		cat <<-'EOF'
			import os, sys
			server = os.environ["SERVER_PID"]
			def ours(p):
			    for _ in range(64):
			        if p == server:
			            return True
			        try:
			            p = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1]
			        except OSError:
			            return False
			    return False
			for p in filter(str.isdigit, os.listdir("/proc")):
			    try:
			        c = open("/proc/%s/cmdline" % p, "rb").read()
			    except OSError:
			        continue
			    if b"/fd/./" in c and ours(p) and not os.path.lexists("/proc/%s/fd/4" % p):
			        try:
			            st = dict(l.split(":\t", 1) for l in open("/proc/%s/status" % p).read().splitlines())
			        except (OSError, ValueError):
			            continue
			        if int(st["SigBlk"], 16) and st["State"].startswith("S"):
			            sys.exit(0)
			sys.exit(1)
		EOF
	)
	jq -cn --arg p "$py" '{until: ("python3 -c " + ($p | @sh))}'
}
