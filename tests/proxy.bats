# The install step's proxy (backends/agenthost/proxy.c), on its own: what it lets through and what it refuses.
# It runs in a network namespace of its own ("host"), with a veth to a second one ("index")
# where a test package index listens on 198.51.100.2 (a documentation range, not a private
# one); the "host" namespace has its own loopback listener standing for services on the host.
load lib/helpers
bats_require_minimum_version 1.5.0

HELPER="${TEST_HELPER:-$REPO_DIR/build/test-helper}"

setup() {
	common_setup
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make network namespaces"
	command -v ip >/dev/null || skip_or_fail "needs ip (iproute2)"
	[ -x "$HELPER" ] || skip_or_fail "build/test-helper is missing (make)"
	N="sbx$$-${BATS_TEST_NUMBER}"
	H="$N-h" I="$N-i"
	ip netns add "$H"
	ip netns add "$I"
	ip link add "$N-a" type veth peer name "$N-b"
	ip link set "$N-a" netns "$H"
	ip link set "$N-b" netns "$I"
	ip -n "$H" addr add 198.51.100.1/24 dev "$N-a"
	ip -n "$I" addr add 198.51.100.2/24 dev "$N-b"
	for ns in "$H" "$I"; do
		ip -n "$ns" link set lo up
	done
	ip -n "$H" link set "$N-a" up
	ip -n "$I" link set "$N-b" up
	mkdir -p "$BATS_TEST_TMPDIR/www/simple/okpkg"
	echo "index of okpkg" > "$BATS_TEST_TMPDIR/www/simple/okpkg/index.html"
	echo "the host's secret" > "$BATS_TEST_TMPDIR/secret.txt"
	ip netns exec "$I" python3 -m http.server 8080 --bind 198.51.100.2 --directory "$BATS_TEST_TMPDIR/www" \
		>"$BATS_TEST_TMPDIR/index.log" 2>&1 &
	echo $! > "$BATS_TEST_TMPDIR/index.pid"
	# A service on the "host"'s loopback that nothing may reach through the proxy.
	ip netns exec "$H" python3 -m http.server 8081 --bind 127.0.0.1 --directory "$BATS_TEST_TMPDIR" \
		>"$BATS_TEST_TMPDIR/loopback.log" 2>&1 &
	echo $! > "$BATS_TEST_TMPDIR/loopback.pid"
	for _ in $(seq 100); do
		ip netns exec "$H" python3 -c 'import socket; socket.create_connection(("198.51.100.2", 8080), 1).close(); socket.create_connection(("127.0.0.1", 8081), 1).close()' 2>/dev/null && break
		sleep 0.1
	done
}

teardown() {
	[ -z "${N:-}" ] && return 0
	for f in index loopback proxy; do
		[ -f "$BATS_TEST_TMPDIR/$f.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/$f.pid")" 2>/dev/null
	done
	ip netns del "$H" 2>/dev/null
	ip netns del "$I" 2>/dev/null
	return 0
}

# start_proxy URL|HOST...: runs the proxy in the "host" namespace; SOCK is its socket.
start_proxy() {
	SOCK="$BATS_TEST_TMPDIR/proxy.sock"
	mkfifo "$BATS_TEST_TMPDIR/in"
	ip netns exec "$H" "$HELPER" proxy "$SOCK" "$@" <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/proxy.out" 2>"$BATS_TEST_TMPDIR/proxy.err" &
	echo $! > "$BATS_TEST_TMPDIR/proxy.pid"
	exec 7>"$BATS_TEST_TMPDIR/in"
	for _ in $(seq 100); do grep -q ready "$BATS_TEST_TMPDIR/proxy.out" 2>/dev/null && break; sleep 0.05; done
	grep -q ready "$BATS_TEST_TMPDIR/proxy.out"
}

stop_proxy() {
	exec 7>&-
	for _ in $(seq 100); do grep -q "^allowed" "$BATS_TEST_TMPDIR/proxy.out" && break; sleep 0.05; done
	cat "$BATS_TEST_TMPDIR/proxy.out"
}

client() {
	run python3 "$TESTS_DIR/lib/proxy-client.py" "$SOCK" "$@"
	echo "$output"
}

@test "the index's host and port go through, by plain HTTP and by CONNECT" {
	start_proxy http://198.51.100.2:8080/simple
	client get http://198.51.100.2:8080/simple/okpkg/index.html
	[[ "${lines[0]}" == *" 200 "* && "$output" == *"index of okpkg"* ]]
	client connect 198.51.100.2:8080 /simple/okpkg/index.html
	[[ "${lines[0]}" == *" 200 "* && "$output" == *"index of okpkg"* ]]
	stop_proxy
	grep -q "^allowed 2 refused 0$" "$BATS_TEST_TMPDIR/proxy.out"
}

@test "anything but the index is refused: loopback, metadata, private networks, other hosts and ports" {
	start_proxy http://198.51.100.2:8080/simple
	for target in 127.0.0.1:8081 169.254.169.254:80 10.0.0.1:443 192.168.1.1:443 198.51.100.1:8080 example.org:443 198.51.100.2:22; do
		client connect "$target" /secret.txt
		[[ "${lines[0]}" == *" 403 "* ]] || { echo "not refused: $target"; false; }
		[[ "$output" != *"secret"* ]]
	done
	client get http://127.0.0.1:8081/secret.txt
	[[ "${lines[0]}" == *" 403 "* && "$output" != *"the host's secret"* ]]
	client get "http://198.51.100.2@127.0.0.1:8081/secret.txt"
	[[ "${lines[0]}" == *" 40"* && "$output" != *"the host's secret"* ]]
	client raw 'GET /secret.txt HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n\r\n'
	[[ "${lines[0]}" == *" 403 "* && "$output" != *"the host's secret"* ]]
	client raw 'not http at all\r\n\r\n'
	[[ "${lines[0]}" == *" 400 "* ]]
	# Nothing reached the loopback service.
	[ ! -s "$BATS_TEST_TMPDIR/loopback.log" ] || ! grep -q "GET /secret.txt" "$BATS_TEST_TMPDIR/loopback.log"
}

@test "an allowed name that resolves to a local address is still refused; an address given as such is not" {
	start_proxy localhost http://127.0.0.1:8081/
	client connect localhost:8081 /secret.txt
	[[ "${lines[0]}" == *" 403 "* && "$output" == *"local or private address"* ]]
	client get http://127.0.0.1:8081/secret.txt
	[[ "${lines[0]}" == *" 200 "* && "$output" == *"the host's secret"* ]]
}

@test "the address rule, address by address" {
	for a in 127.0.0.1 10.1.2.3 172.16.0.1 172.31.255.255 192.168.0.1 169.254.169.254 100.64.0.1 0.0.0.0 224.0.0.1 255.255.255.255 \
		::1 :: fe80::1 fc00::1 fd12::1 ff02::1 ::ffff:127.0.0.1 ::ffff:10.0.0.1 64:ff9b::a00:1; do
		run "$HELPER" addr-allowed pypi.org "$a" https://pypi.org/simple
		[ "$output" = no ] || { echo "$a allowed"; false; }
	done
	for a in 151.101.0.223 198.51.100.2 172.32.0.1 2a04:4e42::223 ::ffff:151.101.0.223; do
		run "$HELPER" addr-allowed pypi.org "$a" https://pypi.org/simple
		[ "$output" = yes ] || { echo "$a refused"; false; }
	done
	run "$HELPER" addr-allowed 10.1.2.3 10.1.2.3 http://10.1.2.3:3141/simple
	[ "$output" = yes ]
	run "$HELPER" addr-allowed 10.1.2.3 10.1.2.4 http://10.1.2.3:3141/simple
	[ "$output" = no ]
}

@test "only an allowed index host that fails says the index is unreachable; what the sandbox sends cannot forge it" {
	start_proxy http://198.51.100.2:8080/simple
	# Refused before any dial: other hosts and ports, a name with control characters, garbage.
	for target in 127.0.0.1:8081 example.org:443 198.51.100.2:22 index.invalid:443; do
		client connect "$target" /x
		[[ "${lines[0]}" == *" 403 "* ]] || { echo "not refused: $target"; false; }
	done
	client raw 'CONNECT 198.51.100.2:8080\r\nX: index.invalid:443 HTTP/1.1\r\n\r\n'
	client raw 'CONNECT index.invalid\n:443 HTTP/1.1\r\n\r\n'
	client raw 'not http at all\r\n\r\n'
	stop_proxy
	grep -qx "unreachable none" "$BATS_TEST_TMPDIR/proxy.out"
}

@test "an allowed index host:port where nothing listens is said once, as host:port: connection refused" {
	start_proxy http://198.51.100.2:8080/simple http://198.51.100.2:8082/
	client connect 198.51.100.2:8082 /x
	[[ "${lines[0]}" != *" 200 "* ]]
	client connect 198.51.100.2:8082 /y
	client connect 198.51.100.2:8080 /simple/okpkg/index.html
	[[ "${lines[0]}" == *" 200 "* ]]
	stop_proxy
	grep -qx "unreachable 198.51.100.2:8082: connection refused" "$BATS_TEST_TMPDIR/proxy.out"
}

@test "the index's own host is reached only as itself: one Host, naming it; one request per connection; no CONNECT to 80" {
	start_proxy http://198.51.100.2:8080/simple
	client raw 'GET http://198.51.100.2:8080/simple/okpkg/index.html HTTP/1.1\r\nHost: evil.example\r\n\r\n'
	[[ "${lines[0]}" == *" 403 "* && "$output" == *"Host header"* ]]
	client raw 'GET http://198.51.100.2:8080/simple/okpkg/index.html HTTP/1.1\r\nHost: 198.51.100.2:8080\r\nHost: evil.example\r\n\r\n'
	[[ "${lines[0]}" == *" 403 "* ]]
	client raw 'GET http://198.51.100.2:8080/simple/okpkg/index.html HTTP/1.1\r\nX: a\r\n Host: evil.example\r\n\r\n'
	[[ "${lines[0]}" == *" 403 "* ]]
	client raw 'GET http://198.51.100.2:8080/simple/okpkg/index.html HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
	[[ "${lines[0]}" == *" 403 "* ]]
	client raw 'CONNECT 198.51.100.2:80 HTTP/1.1\r\n\r\n'
	[[ "${lines[0]}" == *" 403 "* && "$output" == *"port 80"* ]]
	# A second request pipelined behind the first never reaches the index.
	client raw 'GET http://198.51.100.2:8080/simple/okpkg/index.html HTTP/1.1\r\nHost: 198.51.100.2:8080\r\n\r\nGET /simple/smuggled/ HTTP/1.1\r\nHost: evil.example\r\n\r\n'
	[[ "${lines[0]}" == *" 200 "* ]]
	stop_proxy
	run ! grep -q "smuggled" "$BATS_TEST_TMPDIR/index.log"
	run ! grep -q "evil" "$BATS_TEST_TMPDIR/index.log"
}

@test "descriptors queued on the proxy's socket where it does not read (lib/handover-queued.py): none of its closes waits on the code, none is kept, it stops" {
	start_proxy http://198.51.100.2:8080/simple
	local pid fds
	pid=$(cat "$BATS_TEST_TMPDIR/proxy.pid")
	fds=$(ls "/proc/$pid/fd" | wc -l)
	{ printf 'HOWS = "busy behind nested many"\n'; cat "$TESTS_DIR/lib/handover-client.py"; printf 'PROXY = "%s"\n' "$SOCK"
		cat "$TESTS_DIR/lib/handover-queued.py"; } >"$BATS_TEST_TMPDIR/queued.py"
	run timeout 30 ip netns exec "$H" python3 "$BATS_TEST_TMPDIR/queued.py"
	[ "$status" -eq 0 ]
	jqe "$output" '.after == "403" and .after_s < 3 and .busy == "503"'
	for _ in $(seq 50); do [ "$(ls "/proc/$pid/fd" | wc -l)" -le "$fds" ] && break; sleep 0.1; done
	[ "$(ls "/proc/$pid/fd" | wc -l)" -le "$fds" ]
	stop_proxy
	grep -q "^allowed 0 refused" "$BATS_TEST_TMPDIR/proxy.out"
}

@test "connections at once and in turn are all served by threads kept waiting, a few and no more; in turn, by those alone; it stops with them waiting" {
	start_proxy http://198.51.100.2:8080/simple
	local pid n first kept
	pid=$(cat "$BATS_TEST_TMPDIR/proxy.pid")
	# The helper's threads and the leader (and a sanitizer's own, where built with one).
	first=$(ls "/proc/$pid/task" | wc -l)
	local url=http://198.51.100.2:8080/simple/okpkg/index.html i at_once=()
	for i in $(seq 12); do
		python3 "$TESTS_DIR/lib/proxy-client.py" "$SOCK" get "$url" >"$BATS_TEST_TMPDIR/at-once.$i" &
		at_once+=($!)
	done
	wait "${at_once[@]}"
	for i in $(seq 12); do
		run cat "$BATS_TEST_TMPDIR/at-once.$i"
		[[ "${lines[0]}" == *" 200 "* && "$output" == *"index of okpkg"* ]]
	done
	# Beside those: at most PROXY_FOLLOWERS (4) waiting, and at least one; those that served at
	# once past them end.
	for _ in $(seq 200); do
		n=$(ls "/proc/$pid/task" | wc -l)
		[ "$n" -le $((first + 4)) ] && break
		sleep 0.05
	done
	[ "$n" -le $((first + 4)) ]
	[ "$n" -ge $((first + 1)) ]
	# In turn, each connection is taken by the leader, which hands the lead to one waiting and
	# serves it: no thread starts or ends.
	kept=$(ls "/proc/$pid/task" | sort | tr '\n' ' ')
	for i in $(seq 20); do
		client get "$url"
		[[ "${lines[0]}" == *" 200 "* && "$output" == *"index of okpkg"* ]]
	done
	[ "$(ls "/proc/$pid/task" | sort | tr '\n' ' ')" = "$kept" ]
	stop_proxy
	grep -q "^allowed 32 refused 0$" "$BATS_TEST_TMPDIR/proxy.out"
}
