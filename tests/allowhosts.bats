# Network access by name (--allow-hosts): the code's own processes reach the listed hosts
# through the server's filtering proxy and nothing else, on local and Docker. The allowed host
# is the test index's network (lib/test-index.bash, 198.51.100.2); names are given to the
# server alone by a private /etc/hosts (the server runs in a mount namespace of its own where
# one is bound), so every name below resolves -- only the policy refuses. A listener on the
# host's loopback stands for the host's services (a name "rebinds" to it).
# suite: uses docker
# suite: owns test-index
load lib/helpers
load lib/docker-setup
load lib/daytona-setup
load lib/test-index
load lib/background
bats_require_minimum_version 1.5.0

setup_file() {
	docker_setup_file
	daytona_setup_file
}
teardown_file() {
	docker_teardown_file
	daytona_teardown_file
}

setup() {
	common_setup
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make the test index's network and the server's /etc/hosts"
	command -v ip >/dev/null || skip_or_fail "needs ip (iproute2)"
	command -v unshare >/dev/null || skip_or_fail "needs unshare (util-linux)"
	IDX="$BATS_TEST_TMPDIR/index"
	mkdir -p "$IDX"
	echo "the allowed file" >"$IDX/ok.txt"
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	index_up "$IDX"
	ip netns exec "$IDX_NS" python3 "$TESTS_DIR/lib/echo-server.py" 198.51.100.2 443 8443 b2222 \
		2>"$BATS_TEST_TMPDIR/echo.log" &
	echo $! >"$BATS_TEST_TMPDIR/echo.pid"
	# The host's loopback service: it counts every connection that reaches it.
	python3 "$TESTS_DIR/lib/stall-server.py" "$BATS_TEST_TMPDIR/loop.port" &
	echo $! >"$BATS_TEST_TMPDIR/loop.pid"
	for _ in $(seq 100); do
		[ -s "$BATS_TEST_TMPDIR/loop.port" ] &&
			ip netns exec "$IDX_NS" python3 -c 'import socket; socket.create_connection(("198.51.100.2", 8443), 1).close()' 2>/dev/null && break
		sleep 0.1
	done
	LPORT=$(cat "$BATS_TEST_TMPDIR/loop.port")
	[ -n "$LPORT" ]
	local a=198.51.100.2
	printf '%s\n' "127.0.0.1 localhost rebind.test" "10.0.0.1 private.test" \
		"$a allowed.test a.wild.test wild.test evil.test allowed.test.evil.test evilallowed.test a.wild.test.evil.test xn--llowed-9ve.test" \
		>"$BATS_TEST_TMPDIR/hosts"
	# The server, with the test's /etc/hosts (its resolver's configuration) and nothing else changed.
	cat >"$BATS_TEST_TMPDIR/server" <<WRAP
#!/bin/sh
exec unshare -m sh -c 'mount --bind "\$0" /etc/hosts && exec "\$@"' "$BATS_TEST_TMPDIR/hosts" "$SANDBOX_MCP" "\$@"
WRAP
	chmod +x "$BATS_TEST_TMPDIR/server"
	REAL_MCP=$SANDBOX_MCP
}

teardown() {
	SANDBOX_MCP=${REAL_MCP:-$SANDBOX_MCP}
	index_down
	for p in echo loop; do
		[ -f "$BATS_TEST_TMPDIR/$p.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/$p.pid")" 2>/dev/null
	done
	return 0
}

# probe_case BACKEND HOST REBIND: the probe (lib/allowhosts-probe.py) in the sandbox, the index
# allowed as HOST (a name: the server runs with the test's /etc/hosts; an address: with the
# machine's, where the engine must see the server's mounts), REBIND a name for the loopback.
probe_case() {
	with_backend "$1"
	local script H=$2 R=$3
	local ALLOW="$H:8080,$H:8443,$H,$H:2222,*.wild.test:8080,$R:$LPORT,private.test:8080"
	[ "$H" = 198.51.100.2 ] || SANDBOX_MCP="$BATS_TEST_TMPDIR/server"
	script="import sys; sys.argv = ['probe', '$H', '8080', '8443', '$R:$LPORT']
$(cat "$TESTS_DIR/lib/allowhosts-probe.py")"
	tool execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 120}')" --allow-hosts "$ALLOW"
	printf '%s' "$result" | jq -c '.content' | cut -c1-2000 >&2
	sc '.exit_code == 0'
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | tail -1)
	echo "$P" | jq . >&2
	# The allowed paths work: plain HTTP, by the proxy variables, and tunnels whose hello names the host.
	jqe "$P" '.ok_http == "200" and .ok_upper == "200" and .ok_env_proxy == "200"'
	jqe "$P" '.ok_connect_sni == "echo" and .ok_connect_443 == "echo"'
	# Off 443, a server that speaks first (as SSH does) is not taken for a client without a hello.
	jqe "$P" '.ok_server_first == "echo"'
	# An allowed name's address, in any spelling, is not the name; an allowed address only as such.
	if [ "$H" = 198.51.100.2 ]; then
		jqe "$P" '.ip_v4 == "200" and .ipc_v4 == "echo"'
		jqe "$P" '[to_entries[] | select(.key | test("^ipc?_")) | select(.key | test("_v4$") | not) | .value] | all(. == "403")'
	else
		jqe "$P" '[to_entries[] | select(.key | test("^ipc?_")) | .value] | all(. == "403")'
		jqe "$P" '.wild_sub == "200"'
	fi
	jqe "$P" '[.userinfo, .userinfo_host, .connect_userinfo, .trailing_dot, .punycode, .suffix, .prefix,
		.wild_bare, .wild_suffix, .host_header, .host_header_port, .host_header_two] | all(. == "403")'
	jqe "$P" '.idn_raw == "400"'
	# A name that resolves to a private address is refused (where the server resolves it).
	[ "$H" = 198.51.100.2 ] || jqe "$P" '.rebind_private == "403"'
	jqe "$P" '[.proxy_itself, .loopback, .metadata, .metadata_connect, .private, .rebind, .port, .port_http, .ip_v6_other,
		.long_name, .connect_80, .chunked, .folded, .bare_lf, .not_absolute] | all(. == "403")'
	jqe "$P" '.long_head == "431" or .long_head == "ConnectionResetError" or .long_head == "BrokenPipeError"'
	# Tunnels whose first bytes are no hello for the CONNECT's host are cut at once.
	jqe "$P" '[.pipelined_connect, .sni_mismatch, .sni_suffix, .not_tls_443] | all(. == "closed")'
	# One request per connection: what was pipelined after the first never went on.
	jqe "$P" '.smuggled == "200"'
	# Around the proxy: nothing. No resolver, no route.
	jqe "$P" '.raw_tcp != "reached" and .raw_tcp != "TimeoutError" and .raw_udp != "reached" and .dns == "gaierror" and .resolv_conf == false'
	# The call says what was refused, and the log has each refusal with its reason.
	sc '.notice | test("the network refused") and test("--allow-hosts")'
	for pat in "refused $H:8443: the ClientHello's server name (SNI) is not the CONNECT's host" "refused $R:$LPORT: the host resolves to a local" \
		"refused GET http://$H.evil.test:8080/ok.txt: not an allowed host" "refused CONNECT 169.254.169.254:443" \
		"refused GET http://3325256706:8080/ok.txt: an IPv4 address" "Host header names another host" \
		"refused $H:443: the tunnel to port 443 does not begin with a TLS ClientHello" "Transfer-Encoding" \
		"a request head over 16 KiB" "refused CONNECT 127.0.0.1:3128"; do
		grep -qF -- "$pat" "$SERVER_LOG" || { echo "not logged: $pat" >&2; grep refused "$SERVER_LOG" >&2; false; }
	done
	[ "$H" = 198.51.100.2 ] || grep -qF "refused private.test:8080: the host resolves to a local or private address" "$SERVER_LOG"
	# Nothing reached the host's loopback, and the index saw the allowed requests only.
	[ ! -s "$BATS_TEST_TMPDIR/loop.port.count" ] || [ "$(cat "$BATS_TEST_TMPDIR/loop.port.count")" = 0 ]
	run ! grep -v '"GET /ok.txt HTTP/1.1" 200' "$BATS_TEST_TMPDIR/index.log"
}

@test "allow-hosts, local: the listed hosts through the proxy; every other way out refused and said" {
	probe_case local allowed.test rebind.test
}

@test "allow-hosts, docker: the listed hosts through the proxy; every other way out refused and said" {
	probe_case docker 198.51.100.2 localhost
}

@test "allow-hosts: bad lists and --network none or all are refused at start-up, in one line, exit 2" {
	for bad in "a..b" "x.example." "*.com" "*x.example" "2130706433" "0x7f.1" "127.1" "0177.0.0.1" "*.1.2.3.4" "a,,b" \
		"bücher.example" "$(printf 'a%.0s' $(seq 64)).example" "h.example:0" "h.example:99999" "-a.example" "[::1]x" \
		"$(printf 'ab.%.0s' $(seq 90))example"; do
		run "$SANDBOX_MCP" --allow-hosts "$bad" </dev/null
		[ "$status" -eq 2 ] || { echo "accepted: $bad" >&2; false; }
		[ "${#lines[@]}" -eq 1 ] && [[ "$output" == *"--allow-hosts"* ]]
	done
	for net in none all; do
		run "$SANDBOX_MCP" --network "$net" --allow-hosts api.example </dev/null
		[ "$status" -eq 2 ] && [[ "$output" == *"--allow-hosts needs --network install"* ]]
	done
	SANDBOX_ALLOW_HOSTS="api.example,*.cdn.example:8443,10.1.2.3,[fd00::1]:99" run "$SANDBOX_MCP" </dev/null
	[ "$status" -eq 0 ]
}

@test "allow-hosts: --check and the tool descriptions list the hosts" {
	run "$SANDBOX_MCP" --backend local --allow-hosts 'api.example, *.cdn.example:8443' --check
	[[ "$output" == *"network     the code reaches only api.example, *.cdn.example:8443 (by name, through the server's filtering proxy)"* ]]
	mcp_session --allow-hosts 'api.example,*.cdn.example:8443' <<<"$(printf '%s\n%s\n' "$INIT" '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')"
	jqe "$(response 2)" '.result.tools[] | select(.name == "execute_bash_commands") | .description | test("reaches only these hosts \\(--allow-hosts: api.example,\\*.cdn.example:8443\\)")'
}

@test "allow-hosts, daytona: the names resolved when the sandbox is made, as its networkAllowList; wildcards refused" {
	with_backend daytona
	run "$SANDBOX_MCP" --backend daytona --allow-hosts 'api.example,*.cdn.example' </dev/null
	[ "$status" -eq 2 ] && [ "${#lines[@]}" -eq 1 ] && [[ "$output" == *"'*.cdn.example': Daytona allows a sandbox's network by address (networkAllowList), and a wildcard names no address"* ]]
	SANDBOX_MCP="$BATS_TEST_TMPDIR/server"
	# A name that resolves to loopback gives no address; one given as a private address is that address.
	local allow="allowed.test:8080,rebind.test,10.9.8.7"
	run "$SANDBOX_MCP" --allow-hosts "$allow" --check
	[[ "$output" == *"the code reaches the addresses 198.51.100.2/32,10.9.8.7/32, on every port"* ]]
	mcp_session --allow-hosts "$allow" <<EOS
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo hi"}')
$(call_json 2 execute_bash_commands '{"code":"echo narrowed","network":"none"}')
$(call_json 3 execute_bash_commands '{"code":"echo wider","network":"evil.test"}')
EOS
	res 1
	sc '.exit_code == 0 and .backend == "daytona"'
	local id
	id=$(printf '%s' "$result" | jq -r '.structuredContent.sandbox_id')
	res 2
	sc '.stdout == "narrowed\n"'
	res 3
	jqe "$result" '.isError == true and (.structuredContent.stderr | test("never widen"))'
	# What the API was sent: the allow list at creation, then blocked for the narrowed call and opened again.
	grep -q "daytona: --allow-hosts $allow is the addresses 198.51.100.2/32,10.9.8.7/32" "$SERVER_LOG"
	# The sandbox was made with the list, not blocked.
	grep -q "create $id: {\"networkAllowList\": \"198.51.100.2/32,10.9.8.7/32\", \"networkBlockAll\": false}" "$BATS_FILE_TMPDIR/daytona.log"
	grep -q "network-settings $id: {\"networkBlockAll\": true}" "$BATS_FILE_TMPDIR/daytona.log"
	grep -q "network-settings $id: {\"networkAllowList\": \"198.51.100.2/32,10.9.8.7/32\", \"networkBlockAll\": false}" "$BATS_FILE_TMPDIR/daytona.log"
}

# narrow_case BACKEND HOST: calls that narrow the list for themselves, never widen it.
narrow_case() {
	with_backend "$1"
	local H=$2 fetch
	[ "$H" = 198.51.100.2 ] || SANDBOX_MCP="$BATS_TEST_TMPDIR/server"
	fetch="import urllib.request as u
def st(url):
    try:
        return u.urlopen(url, timeout=20).status
    except Exception as e:
        return getattr(e, 'code', type(e).__name__)
print(st('http://$H:8080/ok.txt'), st('http://$H:8081/ok.txt'))"
	call() { jq -cn --argjson id "$1" --arg s "$fetch" --arg n "$2" '{jsonrpc:"2.0", id:$id, method:"tools/call", params:{name:"execute_python", arguments:({script:$s} + (if $n == "" then {} else {network:$n} end))}}'; }
	mcp_session --allow-hosts "$H:8080,$H:8081" <<EOS
$INIT
$(call 1 "$H:8080")
$(call 2 none)
$(call 3 "evil.test")
$(call 4 "$H")
$(call 5 "")
$(jq -cn --arg s "$fetch" '{jsonrpc:"2.0", id:6, method:"tools/call", params:{name:"execute_python", arguments:{script:$s, network:"none", background:true}}}')
$(jq -cn --arg s "$fetch" '{jsonrpc:"2.0", id:7, method:"tools/call", params:{name:"execute_python", arguments:{script:$s, network:"none", session:"s"}}}')
EOS
	res 1; sc '.stdout == "200 403\n"'
	res 2; sc '.stdout == "403 403\n"'
	res 3; jqe "$result" '.isError == true and (.structuredContent.stderr | test("never widen"))'
	res 4; jqe "$result" '.isError == true and (.structuredContent.stderr | test("never widen"))'
	# Unnarrowed, both ports are allowed (nothing listens on 8081: the proxy says so).
	res 5; sc '.stdout == "200 502\n"'
	# Code that outlives its call (a background process, a session) would outlive its narrowing.
	res 6; jqe "$result" '.isError == true and (.structuredContent.error | test("^network: a background process outlives its call"))'
	res 7; jqe "$result" '.isError == true and (.structuredContent.error | test("^network: a session outlives its call"))'
	grep -q "refused GET http://$H:8080/ok.txt: not an allowed host" "$SERVER_LOG"
}

@test "allow-hosts, local: a call narrows the list for itself (network: a subset, or none), never widens it" {
	narrow_case local allowed.test
}

@test "allow-hosts, docker: a call narrows the list for itself (network: a subset, or none), never widens it" {
	narrow_case docker 198.51.100.2
}

# bg_case BACKEND HOST: a background process keeps its way out after its call; the calls after
# it run and reach the host too (through the relay its call started, spared with it); and its
# input, closed while a later call runs, reaches it at once: the relay holds none of its pipes.
bg_case() {
	with_backend "$1"
	local H=$2 fetch
	[ "$H" = 198.51.100.2 ] || SANDBOX_MCP="$BATS_TEST_TMPDIR/server"
	fetch="python3 -c 'import urllib.request as u; print(u.urlopen(\"http://$H:8080/ok.txt\", timeout=20).read().decode(), end=\"\")'"
	mcp_session --no-sandbox-ahead --allow-hosts "$H:8080" <<EOS
$INIT
$INITIALIZED
$(bg 1 "cat >/dev/null; $fetch; echo bg-done" '{"wait_s": 1}')
{"wait": 1}
$(call_json 2 execute_bash_commands "$(jq -cn --arg c "$fetch" '{code: $c}')")
{"wait": 2}
$(call_json 3 execute_bash_commands '{"code": "sleep 8.0123; echo slow"}')
$(until_running 'sleep 8.0123')
$(proc 4 '{"process_id": "bg-1", "close_input": true, "wait_s": 6}')
{"wait": 4}
{"wait": 3}
$(call_json 5 execute_bash_commands "$(jq -cn --arg c "$fetch" '{code: $c}')")
{"wait": 5}
$(proc 6 '{"process_id": "bg-1", "wait_s": 20}')
EOS
	res 1
	sc '.process_id == "bg-1" and .running == true'
	res 2
	sc '.exit_code == 0 and .stdout == "the allowed file\n"'
	# Answered before the long call's end with what the program fetched once its input ended:
	# nothing else held that input open.
	[ "$(answer_order 3 4)" = "4 3" ]
	res 4
	sc '.stdout | startswith("the allowed file\n")'
	local four=$result
	res 6
	# 4 or 6 tells its end (one that 4 saw end is forgotten, and 6 is told so).
	jqe "$(jq -cn --argjson a "$four" --argjson b "$result" '[$a, $b] | map(.structuredContent)')" \
		'(map(.stdout // "") | join("")) == "the allowed file\nbg-done\n" and (map(select(.running == false)) | length == 1 and all(.exit_code == 0))'
	res 3
	sc '.exit_code == 0 and .stdout == "slow\n"'
	res 5
	sc '.exit_code == 0 and .stdout == "the allowed file\n"'
	[ "$(grep -c '"GET /ok.txt HTTP/1.1" 200' "$BATS_TEST_TMPDIR/index.log")" = 3 ]
}

# A narrowed call's code stops the relay (a background process keeps it past the call) and
# leaves a request for a host the whole list allows in its backlog; once the call ended, the
# relay is let go on from outside. What the call queued must be closed unread, not served by
# the list restored after it: the relay is a new one after every call, its backlog emptied.
@test "allow-hosts, local: what a narrowed call left queued for the relay, with the relay stopped, is not served after the call" {
	with_backend local
	SANDBOX_MCP="$BATS_TEST_TMPDIR/server"
	local queue fetch
	queue='import os, signal, socket
relay = [int(p) for p in os.listdir("/proc") if p.isdigit() and p != "1"
         and open("/proc/%s/cmdline" % p, "rb").read().startswith(b"sandbox-agent")]
print(len(relay))
os.kill(relay[0], signal.SIGSTOP)
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"GET http://allowed.test:8080/ok.txt?queued HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n")
print("queued")'
	fetch="import urllib.request as u; print(u.urlopen('http://allowed.test:8080/ok.txt?after', timeout=20).read().decode(), end='')"
	# The relay's processes, let go on: those of sandbox-agent whose ancestors hold the server.
	local cont='for p in $(pgrep -f "^sandbox-agent"); do a=$p; while [ "${a:-1}" -gt 1 ]; do a=$(ps -o ppid= -p "$a" | tr -d " "); [ "$a" = "$SERVER_PID" ] && kill -CONT "$p"; done; done; true'
	mcp_session --no-sandbox-ahead --allow-hosts allowed.test:8080 <<EOS
$INIT
$INITIALIZED
$(bg 1 'sleep 120' '{"wait_s": 0.05}')
{"wait": 1}
$(call_json 2 execute_python "$(jq -cn --arg s "$queue" '{script: $s, network: "none"}')")
{"wait": 2}
$(jq -cn --arg c "$cont" '{sh: $c}')
$(call_json 3 execute_python "$(jq -cn --arg s "$fetch" '{script: $s}')")
EOS
	res 2
	sc '.exit_code == 0 and .stdout == "1\nqueued\n"'
	res 3
	sc '.exit_code == 0 and .stdout == "the allowed file\n"'
	grep -q "GET /ok.txt?after" "$BATS_TEST_TMPDIR/index.log"
	run ! grep -q "queued" "$BATS_TEST_TMPDIR/index.log"
}

@test "allow-hosts, local: a background process keeps its way out; later calls run and reach the host; its input closes at once" {
	bg_case local allowed.test
}

@test "allow-hosts, docker: a background process keeps its way out; later calls run and reach the host; its input closes at once" {
	bg_case docker 198.51.100.2
}

# routed_case [SYSCTL]: an address that no interface holds but that a local route delivers to
# this host (`ip route add local`) reaches the host's services as its interfaces' addresses do:
# a name at it is refused as the host's own, and its listener sees nothing. The server runs in a
# network namespace of its own that has that route and the listener (and SYSCTL, set there).
routed_case() {
	with_backend local
	local t=$BATS_TEST_TMPDIR set=""
	[ -z "${1:-}" ] || set="sysctl -qw $1 &&"
	echo "203.0.113.7 routed.test" >"$t/hosts-routed"
	cat >"$t/server-routed" <<WRAP
#!/bin/sh
[ "\$1" = --in-ns ] || exec unshare -m -n "\$0" --in-ns "\$@"
shift
mount --bind "$t/hosts-routed" /etc/hosts && $set ip link set lo up && ip route add local 203.0.113.0/24 dev lo || exit 1
python3 -c 'import socket, sys
s = socket.socket(); s.bind(("203.0.113.7", 8080)); s.listen(8); open(sys.argv[1] + ".up", "w").close()
while True:
    c, _ = s.accept(); open(sys.argv[1], "a").write("reached\\n"); c.close()' "$t/routed.log" &
echo \$! >"$t/routed.pid"
for _ in \$(seq 100); do [ -e "$t/routed.log.up" ] && break; sleep 0.1; done
exec "$SANDBOX_MCP" "\$@"
WRAP
	chmod +x "$t/server-routed"
	local script='import urllib.request as u, urllib.error as e
try:
    print(u.urlopen("http://routed.test:8080/", timeout=20).status)
except e.HTTPError as x:
    print(x.code)'
	SANDBOX_MCP="$t/server-routed" tool execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 60}')" \
		--allow-hosts routed.test:8080
	kill "$(cat "$t/routed.pid")" 2>/dev/null || true
	[ -e "$t/routed.log.up" ]
	sc '.exit_code == 0 and .stdout == "403\n"'
	grep -qF "refused routed.test:8080: the host resolves to a local" "$SERVER_LOG"
	[ ! -e "$t/routed.log" ]
}

@test "allow-hosts, local: a name at an address a local route delivers here, on no interface, is refused as the host's own" {
	routed_case
}

# Where the namespace lets a socket bind any address, a bind tells nothing: the kernel's route
# to the address says it is delivered here.
@test "allow-hosts, local: with ip_nonlocal_bind on, a name at an address a local route delivers here is still refused as the host's own" {
	routed_case net.ipv4.ip_nonlocal_bind=1
}

# flood_case BACKEND HOST: 40 connections that never finish their head (slowloris), a head
# sent a byte at a time past the limit, then the allowed path again.
flood_case() {
	with_backend "$1"
	local H=$2
	[ "$H" = 198.51.100.2 ] || SANDBOX_MCP="$BATS_TEST_TMPDIR/server"
	local script="import socket, time, json, urllib.request as u
out = {}
held = []
for i in range(40):
    s = socket.create_connection(('127.0.0.1', 3128), 10)
    s.sendall(b'GET http://$H:8080/ok.txt HTTP/1.1\r\nX-Slow: ')
    held.append(s)
import select
busy, other, waiting, until = 0, [], list(held), time.monotonic() + 30
while busy < 8 and time.monotonic() < until:
    ready = select.select(waiting, [], [], 0.2)[0]
    for s in ready:
        waiting.remove(s)
        try:
            got = s.recv(200)
            busy += b' 503 ' in got
            if b' 503 ' not in got:
                other.append(got[:40].decode('latin-1'))
        except OSError as e:
            other.append(type(e).__name__)
out['busy'] = busy
out['other'] = other
for s in held:
    s.close()
ok = None
for _ in range(100):
    try:
        ok = u.urlopen('http://$H:8080/ok.txt', timeout=10).status
        break
    except Exception as e:
        ok = getattr(e, 'code', type(e).__name__)
        time.sleep(0.1)
out['after'] = ok
print(json.dumps(out))"
	tool execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 60}')" --allow-hosts "$H:8080"
	local P
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | tail -1)
	# At most 32 at once: the rest were told so at once; once they went, the allowed path works.
	jqe "$P" '.busy >= 8 and .after == 200'
	sc '.notice | test("a connection \\(too many connections at once \\(32\\)\\)")'
	grep -q "refused a connection: too many connections at once (32)" "$SERVER_LOG"
}

@test "allow-hosts, local: 40 unfinished heads at once are bounded (32 held, the rest told 503), then the way out works" {
	flood_case local allowed.test
}

@test "allow-hosts, docker: 40 unfinished heads at once are bounded (32 held, the rest told 503), then the way out works" {
	flood_case docker 198.51.100.2
}

@test "allow-hosts: matching, host by host, and what a call may narrow it to" {
	local H="$REPO_DIR/build/test-helper"
	[ -x "$H" ] || skip_or_fail "build/test-helper is missing (make)"
	local L='api.github.com,*.githubusercontent.com,10.1.2.3:3141,[fd00::1]:99'
	while read -r host port want; do
		run "$H" allow-host "$L" "$host" "$port"
		[ "$output" = "$want" ] || [[ "$want" = refused && "$output" = refused:* ]] || { echo "$host:$port: $output, not $want" >&2; false; }
	done <<'CASES'
api.github.com 443 yes
api.github.com 80 yes
API.GitHub.COM 443 yes
api.github.com 22 no
api.github.com. 443 refused
github.com 443 no
evilapi.github.com 443 no
api.github.com.evil.example 443 no
raw.githubusercontent.com 443 yes
a.b.githubusercontent.com 443 yes
githubusercontent.com 443 no
evilgithubusercontent.com 443 no
raw.githubusercontent.com.evil.example 443 no
10.1.2.3 3141 yes
10.1.2.3 443 no
167838211 3141 refused
012.1.2.3 3141 refused
0xa.1.2.3 3141 refused
10.1.515 3141 refused
fd00::1 99 yes
fd00:0:0::1 99 yes
::ffff:10.1.2.3 3141 no
api.github.com:443 443 refused
user@api.github.com 443 refused
api%2egithub.com 443 refused
CASES
	run "$H" allow-narrow "$L" 'raw.githubusercontent.com,*.x.githubusercontent.com,api.github.com'
	[ "$output" = ok ]
	run "$H" allow-narrow "$L" none
	[ "$output" = ok ]
	for wider in githubusercontent.com '*.github.com' 'api.github.com:22' '10.1.2.3' 'evil.example' '*.githubusercontent.com:8443'; do
		run "$H" allow-narrow "$L" "$wider"
		[[ "$output" == *"never widen"* ]] || { echo "allowed: $wider ($output)" >&2; false; }
	done
}

# Tunnels held open through a server left 64 descriptors, one after another: each is answered,
# 200 while the proxy has a slot its descriptors back, 503 after; none is lost for want of a
# descriptor to take its handover with (with 32 slots and two pipes a tunnel, it was).
@test "allow-hosts, local: a server left 64 descriptors: tunnels held one after another are each answered, 200 or 503, none lost" {
	with_backend local
	few_fds_server 64
	local script="import json, socket, time, urllib.request as u
def tunnel():
    s = socket.create_connection(('127.0.0.1', 3128), 10)
    s.settimeout(10)
    s.sendall(b'CONNECT 198.51.100.2:8443 HTTP/1.1\\r\\nHost: 198.51.100.2:8443\\r\\n\\r\\n')
    got = b''
    try:
        while b'\\r\\n\\r\\n' not in got:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except OSError as e:
        return s, type(e).__name__
    st = got.split(b' ')[1].decode() if got.startswith(b'HTTP/') else 'lost'
    if st == '200':
        s.sendall(b'x')  # the tunnel's first bytes: it is relayed from now on
    return s, st
held, seen = [], {}
for i in range(40):
    s, st = tunnel()
    seen[st] = seen.get(st, 0) + 1
    held.append(s)
for s in held:
    s.close()
after = None
for _ in range(100):
    try:
        after = u.urlopen('http://198.51.100.2:8080/ok.txt', timeout=10).status
    except Exception as e:
        after = getattr(e, 'code', type(e).__name__)
    if after == 200:
        break
    time.sleep(0.1)
print(json.dumps({'seen': seen, 'after': after}))"
	mcp_session --allow-hosts 198.51.100.2:8080,198.51.100.2:8443 <<EOS
$INIT
$(call_json 1 execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 120}')")
$(call_json 2 execute_bash_commands '{"code":"echo still here"}')
EOS
	res 1
	local P
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | tail -1)
	echo "$P" >&2
	jqe "$P" '(.seen | keys - ["200", "503"]) == [] and .seen["200"] >= 1 and .seen["503"] >= 1 and .after == 200'
	grep -q "refused a connection: too many connections at once" "$SERVER_LOG"
	res 2
	sc '.stdout == "still here\n"'
}

@test "allow-hosts, local: a server left 64 descriptors (its least), flooded through its proxy, keeps serving, and the way out works after" {
	with_backend local
	few_fds_server 64
	local script="import socket, time, json, urllib.request as u
held = []
for i in range(40):
    s = socket.create_connection(('127.0.0.1', 3128), 10)
    s.sendall(b'GET http://198.51.100.2:8080/ok.txt HTTP/1.1\r\nX-Slow: ')
    held.append(s)
def st():
    try:
        return u.urlopen('http://198.51.100.2:8080/ok.txt', timeout=10).status
    except Exception as e:
        return getattr(e, 'code', type(e).__name__)
time.sleep(1)
for s in held:
    s.close()
after = None
for _ in range(100):
    after = st()
    if after == 200:
        break
    time.sleep(0.1)
print(json.dumps({'after': after}))"
	mcp_session --allow-hosts 198.51.100.2:8080 <<EOS
$INIT
$(call_json 1 execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 60}')")
{"jsonrpc":"2.0","id":2,"method":"ping"}
$(call_json 3 execute_bash_commands '{"code":"echo still here"}')
EOS
	res 1
	jqe "$(printf '%s' "$result" | jq -r '.structuredContent.stdout')" '.after == 200'
	jqe "$(response 2)" '.result == {}'
	res 3
	sc '.stdout == "still here\n"'
}
