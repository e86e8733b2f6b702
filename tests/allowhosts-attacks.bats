# --allow-hosts under attack: ways around the server's filtering proxy that tests/allowhosts.bats
# does not try (hellos cut or doubled, heads other parsers read otherwise, the host's own
# addresses in every disguise and behind allowed names, the proxy's socket reached as itself,
# sockets around the proxy, a call's narrowing outlived by its processes), each refused while
# the allowed path still works, on local and Docker. The setup is allowhosts.bats's: the
# allowed host is the test index's network (198.51.100.2), names are given to the server alone
# by a private /etc/hosts; a listener on all the host's addresses stands for its services.
# suite: uses docker
# suite: owns test-index
load lib/helpers
load lib/docker-setup
load lib/test-index
bats_require_minimum_version 1.5.0

setup_file() {
	docker_setup_file
}
teardown_file() {
	docker_teardown_file
}

setup() {
	common_setup
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make the test index's network and the server's /etc/hosts"
	command -v ip >/dev/null || skip_or_fail "needs ip (iproute2)"
	command -v unshare >/dev/null || skip_or_fail "needs unshare (util-linux)"
	IDX="$BATS_TEST_TMPDIR/index"
	mkdir -p "$IDX" "$BATS_TEST_TMPDIR/self"
	echo "the allowed file" >"$IDX/ok.txt"
	echo "a host service" >"$BATS_TEST_TMPDIR/self/secret.txt"
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	index_up "$IDX"
	ip netns exec "$IDX_NS" python3 "$TESTS_DIR/lib/echo-server.py" 198.51.100.2 443 8443 \
		2>"$BATS_TEST_TMPDIR/echo.log" &
	echo $! >"$BATS_TEST_TMPDIR/echo.pid"
	# The host's services: one on all its addresses (198.51.100.1 among them), one on an
	# abstract unix socket.
	python3 -m http.server 0 --bind 0.0.0.0 --directory "$BATS_TEST_TMPDIR/self" >/dev/null 2>"$BATS_TEST_TMPDIR/self.log" &
	echo $! >"$BATS_TEST_TMPDIR/self.pid"
	ABSTRACT="sbxattack-$$-$BATS_TEST_NUMBER"
	python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(b"\0" + sys.argv[1].encode()); s.listen(4)
while True:
    c, _ = s.accept(); open(sys.argv[2], "a").write("reached\n"); c.close()' "$ABSTRACT" "$BATS_TEST_TMPDIR/abstract.log" &
	echo $! >"$BATS_TEST_TMPDIR/abstract.pid"
	SPORT=
	for _ in $(seq 100); do
		SPORT=$(ss -Hltnp 2>/dev/null | awk -v pid="pid=$(cat "$BATS_TEST_TMPDIR/self.pid")," '$0 ~ pid {n = split($4, a, ":"); print a[n]; exit}')
		[ -n "$SPORT" ] && ip netns exec "$IDX_NS" python3 -c 'import socket; socket.create_connection(("198.51.100.2", 8443), 1).close()' 2>/dev/null && break
		sleep 0.1
	done
	[ -n "$SPORT" ]
	printf '%s\n' "198.51.100.2 allowed.test evil.test multi.test" "10.0.0.1 multi.test" "198.51.100.1 self.test" \
		"169.254.169.254 meta.test" "100.64.0.1 cgnat.test" "::1 v6loop.test" "::ffff:127.0.0.1 v6mapped.test" \
		"fd00::1 ula.test" "0.0.0.0 zero.test" >"$BATS_TEST_TMPDIR/hosts"
	cat >"$BATS_TEST_TMPDIR/server" <<WRAP
#!/bin/sh
exec unshare -m sh -c 'mount --bind "\$0" /etc/hosts && exec "\$@"' "$BATS_TEST_TMPDIR/hosts" "$SANDBOX_MCP" "\$@"
WRAP
	chmod +x "$BATS_TEST_TMPDIR/server"
	REAL_MCP=$SANDBOX_MCP
}

teardown() {
	unprivileged_teardown
	SANDBOX_MCP=${REAL_MCP:-$SANDBOX_MCP}
	index_down
	for p in echo self abstract; do
		[ -f "$BATS_TEST_TMPDIR/$p.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/$p.pid")" 2>/dev/null
	done
	return 0
}

# attack_case BACKEND HOST: lib/allowhosts-attacks.py in the sandbox, after the helpers of
# lib/allowhosts-probe.py, the index allowed as HOST (a name: the server runs with the test's
# /etc/hosts, and the names that resolve to local addresses are tried too; an address: with
# the machine's, where the engine must see the server's mounts).
attack_case() {
	with_backend "$1"
	local script H=$2 mode=ADDRS
	local ALLOW="$H:8080,$H:8443,$H"
	if [ "$H" != 198.51.100.2 ]; then
		SANDBOX_MCP="$BATS_TEST_TMPDIR/server"
		mode=NAMES
		ALLOW="$ALLOW,self.test:$SPORT,meta.test,cgnat.test,v6loop.test,v6mapped.test,ula.test,zero.test,multi.test:8080"
	fi
	script="import sys; sys.argv = ['probe', '$H', '8080', '8443', 'unused', '$mode', '$SPORT', '$ABSTRACT']
$(sed '/^hp = /,$d' "$TESTS_DIR/lib/allowhosts-probe.py")
$(cat "$TESTS_DIR/lib/allowhosts-attacks.py")"
	tool execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 120}')" --allow-hosts "$ALLOW"
	printf '%s' "$result" | jq -c '.content' | cut -c1-2000 >&2
	sc '.exit_code == 0'
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | tail -1)
	[ -n "$P" ]
	echo "$P" | jq . >&2
	# The allowed paths still work: a hello cut in pieces, a plain one, the proxy's socket itself.
	jqe "$P" '.ok_split_segments == "echo" and .ok_built_hello == "echo" and .sock_ok == "200"'
	# Hellos that hide, double or disguise the name: the tunnel is cut.
	jqe "$P" '[.hello_two_records, .hello_two_sni_ext, .hello_two_names, .hello_nul_name, .hello_name_type,
		.hello_dot, .hello_sslv2_443, .hello_huge_record] | all(. == "closed")'
	# Heads other parsers would read otherwise: refused before anything goes out.
	jqe "$P" '[.nul_target, .nul_header, .lf_request_line, .lower_method, .version_2] | all(. == "400")'
	jqe "$P" '[.https_absolute, .space_before_colon, .te_tab, .te_lower, .cl_plus, .cl_list, .cl_two] | all(. == "403")'
	jqe "$P" '[.pct_dot, .pct_nul, .backslash_at, .fragment_at, .double_port, .port_0, .port_65536, .port_wrap,
		.port_negative] | all(. == "403")'
	# A body, and nothing after it: the second request never went (the index saw one GET).
	jqe "$P" '.cl_smuggled == "200"'
	# Local addresses in every spelling, and the host's own: refused.
	jqe "$P" '[to_entries[] | select(.key | startswith("addr_")) | .value] | all(. == "403")'
	jqe "$P" '.sock_loopback == "403" and .sock_evil == "403" and .sock_writable == false'
	# Around the proxy: nothing.
	jqe "$P" '.interfaces == ["lo"] and .raw != "reached" and .packet != "reached"'
	jqe "$P" '[.udp_out, .v6_out, .abstract, .docker_sock] | all(. != "reached")'
	if [ "$mode" = NAMES ]; then
		# A host allowed by name needs its name in the hello (by address, none or the address may be).
		jqe "$P" '.hello_no_sni == "closed" and .hello_addr_for_name == "closed"'
		# Allowed names at local addresses, the host's own among them: refused, said why.
		jqe "$P" '[.name_self, .name_self_connect, .name_meta, .name_cgnat, .name_v6loop, .name_v6mapped, .name_ula,
			.name_zero] | all(. == "403")'
		jqe "$P" '.ok_multi == "200"'
		grep -qF "refused self.test:$SPORT: the host resolves to a local" "$SERVER_LOG"
	fi
	sc '.notice | test("the network refused")'
	# Nothing reached the host's services; the index saw the allowed requests only.
	[ ! -s "$BATS_TEST_TMPDIR/self.log" ] && [ ! -s "$BATS_TEST_TMPDIR/abstract.log" ]
	run ! grep -v '"GET /ok.txt HTTP/1.1" 200' "$BATS_TEST_TMPDIR/index.log"
	[ "$(grep -c '"GET /ok.txt HTTP/1.1" 200' "$BATS_TEST_TMPDIR/index.log")" -ge 2 ]
}

@test "allow-hosts attacks, local: hellos, heads, addresses, the host's own, the proxy's socket, around it: refused" {
	attack_case local allowed.test
}

@test "allow-hosts attacks, docker: hellos, heads, addresses, the proxy's socket, around it: refused" {
	attack_case docker 198.51.100.2
}

@test "allow-hosts attacks, local with a server that is not root: the same, refused" {
	unprivileged_server
	attack_case local 198.51.100.2
	unprivileged_cleanup
}

# narrow_attack BACKEND HOST: a call narrowed to nothing leaves a process behind to use the
# whole list once the call is over; a call's `network` that is no list; widening by wildcard
# or port.
narrow_attack() {
	with_backend "$1"
	local H=$2 wild=evil.test tok="leftover-$$-$BATS_TEST_NUMBER"
	[ "$H" = 198.51.100.2 ] || { SANDBOX_MCP="$BATS_TEST_TMPDIR/server"; wild=$H; }
	local bg="import os, socket, time, urllib.request as u
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in range(3):
            os.close(fd)
        held = socket.socket(socket.AF_UNIX)
        held.connect('/run/sandbox-proxy/proxy.sock')
        for _ in range(60):
            time.sleep(0.1)
            for how in ['env', 'held']:
                try:
                    if how == 'env':
                        r = u.urlopen('http://$H:8080/ok.txt?$tok', timeout=2).status
                    else:
                        held.sendall(b'GET http://$H:8080/ok.txt?$tok HTTP/1.1\r\n\r\n')
                        r = held.recv(100)
                    open('/workspace/bg.txt', 'a').write('%s %r\n' % (how, r))
                except Exception as e:
                    pass
    os._exit(0)
print('left', flush=True)
# And the call itself, as it ends: requests written and left for the proxy to read.
held = []
for _ in range(30):
    s = socket.socket(socket.AF_UNIX)
    s.connect('/run/sandbox-proxy/proxy.sock')
    s.sendall(b'GET http://$H:8080/ok.txt?$tok HTTP/1.1\r\n\r\n')
    held.append(s)
os._exit(0)"
	local check="import os, time
time.sleep(4)
print(open('/workspace/bg.txt').read() if os.path.exists('/workspace/bg.txt') else 'nothing')"
	mk() { jq -cn --argjson id "$1" --arg s "$2" --argjson n "$3" '{jsonrpc:"2.0", id:$id, method:"tools/call", params:{name:"execute_python", arguments:({script:$s, network:$n})}}'; }
	mcp_session --allow-hosts "$H:8080" <<EOS
$INIT
$(mk 1 "$bg" '"none"')
$(mk 2 "$check" '"none"')
$(mk 3 "print(1)" '["none"]')
$(mk 4 "print(1)" '"*.'"$wild"'"')
$(mk 5 "print(1)" '"'"$H"':8443"')
$(mk 6 "print(1)" '"'"$H"':8080,evil.test"')
EOS
	res 1; sc '.stdout == "left\n"'
	# What was left behind ended with the call: nothing of it reached out, or ran on.
	res 2; sc '.stdout == "nothing\n"'
	# A `network` that is not a list does not run with the whole one.
	res 3; jqe "$result" '.isError == true'
	for id in 4 5 6; do
		res "$id"; jqe "$result" '.isError == true and (.structuredContent.stderr | test("never widen"))'
	done
	# Nothing the narrowed call wrote to the proxy went out, before its end or after.
	run ! grep -F "$tok" "$BATS_TEST_TMPDIR/index.log"
}

@test "allow-hosts attacks, local: a narrowed call's leftovers, a network that is no list, widening by wildcard or port" {
	narrow_attack local allowed.test
}

@test "allow-hosts attacks, docker: a narrowed call's leftovers, a network that is no list, widening by wildcard or port" {
	narrow_attack docker 198.51.100.2
}
