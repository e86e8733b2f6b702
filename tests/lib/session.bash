# Shared by session.bats and kubernetes-background.bats.

# py ID SESSION SCRIPT [MORE ARGS JSON]: an execute_python call line in that session.
py() {
	call_json "$1" execute_python "$(jq -cn --arg s "$3" --arg n "$2" --argjson m "${4:-{\}}" '{script: $s, session: $n} + $m')"
}

session_of() {
	mcp_session --no-sandbox-ahead ${SERVER_ARGS:-} <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$@")"
}

cells() {
	session_of "$(py 1 a 'import os
x = 1
x')" '{"wait": 1}' \
		"$(py 2 a 'x += 1
print("hi")
x')" '{"wait": 2}' \
		"$(py 3 b 'x = 100')" '{"wait": 3}' \
		"$(py 4 a '1/0')" '{"wait": 4}' \
		"$(py 5 a 'x, os.getenv("FOO"), open("f.txt").read(), __import__("sys").argv[1:]' \
			'{"env": {"FOO": "bar"}, "args": ["q"], "files": {"f.txt": "data"}}')" '{"wait": 5}' \
		"$(py 6 a 'os.getenv("FOO")')" '{"wait": 6}' \
		"$(call_json 7 execute_python '{"script": "print(\"x\" in dir())"}')" '{"wait": 7}' \
		"$(call_json 8 process '{}')"
	res 1
	sc '.exit_code == 0 and .value == "1" and .session == "a" and .stdout == ""'
	res 2
	sc '.value == "2" and .stdout == "hi\n"'
	res 3
	sc '.value == null and .exit_code == 0'
	res 4
	sc '.exit_code == 1 and (.stderr | test("ZeroDivisionError")) and (.stderr | test("session.py") | not)'
	jqe "$result" '.isError == true'
	res 5
	sc '.value == "(2, '"'"'bar'"'"', '"'"'data'"'"', ['"'"'q'"'"'])"'
	# env is the call's alone.
	res 6
	sc '.value == null'
	# A call without session still starts fresh.
	res 7
	sc '.stdout == "False\n"'
	res 8
	sc '[.processes[] | select(.session)] | map(.session) | sort == ["a", "b"]'
}
