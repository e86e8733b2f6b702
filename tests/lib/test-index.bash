# A package index on a network of its own, for the install-step tests: load after lib/helpers.
#   index_up ROOT     a network namespace joined to this host by a veth (host 198.51.100.1,
#                     index 198.51.100.2: a documentation range, neither loopback nor private),
#                     serving ROOT as a PEP 503 index on 198.51.100.2:8080 (lib/test-index.py)
#   index_down        removes it
#   INDEX_URL         http://198.51.100.2:8080/simple once up
#   index_fixture_up  the install tests' index: okpkg 1.0, and the projects of a hostile index
#                     (evil-loopback, a wheel on the host's loopback service at HOST_PORT, and
#                     evil-metadata, one at the metadata address), in $BATS_TEST_TMPDIR/index,
#                     and one more project when given NAME HREF...; then index_up.
#   index_fixture_down  undoes it
# Needs root and ip (iproute2).

index_up() {
	local root=$1
	IDX_NS="sbxidx$$${BATS_TEST_NUMBER:-0}"
	IDX_IF="si$$${BATS_TEST_NUMBER:-0}"
	ip netns add "$IDX_NS" || return 1
	ip link add "$IDX_IF-h" type veth peer name "$IDX_IF-i" || return 1
	ip link set "$IDX_IF-i" netns "$IDX_NS"
	ip addr add 198.51.100.1/24 dev "$IDX_IF-h"
	ip link set "$IDX_IF-h" up
	ip -n "$IDX_NS" addr add 198.51.100.2/24 dev "$IDX_IF-i"
	ip -n "$IDX_NS" link set "$IDX_IF-i" up
	ip -n "$IDX_NS" link set lo up
	ip netns exec "$IDX_NS" python3 "$TESTS_DIR/lib/test-index.py" "$root" 198.51.100.2 8080 \
		2>"$BATS_TEST_TMPDIR/index.log" &
	echo $! >"$BATS_TEST_TMPDIR/index.pid"
	INDEX_URL=http://198.51.100.2:8080/simple
	for _ in $(seq 100); do
		python3 -c 'import socket; socket.create_connection(("198.51.100.2", 8080), 1).close()' 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

index_down() {
	[ -f "$BATS_TEST_TMPDIR/index.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/index.pid")" 2>/dev/null
	[ -n "${IDX_NS:-}" ] && ip netns del "$IDX_NS" 2>/dev/null
	[ -n "${IDX_IF:-}" ] && ip link del "$IDX_IF-h" 2>/dev/null
	return 0
}

# index_project ROOT NAME HREF...: a project page linking to each HREF.
index_project() {
	local root=$1 name=$2
	shift 2
	mkdir -p "$root/simple/$name"
	{
		echo '<!DOCTYPE html><html><body>'
		for href in "$@"; do
			echo "<a href=\"$href\">${href##*/}</a>"
		done
		echo '</body></html>'
	} >"$root/simple/$name/index.html"
}

index_fixture_up() {
	IDX="$BATS_TEST_TMPDIR/index"
	mkdir -p "$IDX/files"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$IDX/files" okpkg 1.0
	index_project "$IDX" okpkg ../../files/okpkg-1.0-py3-none-any.whl
	# The host's loopback service a hostile index page sends pip to.
	python3 "$TESTS_DIR/lib/stall-server.py" "$BATS_TEST_TMPDIR/host.port" &
	echo $! >"$BATS_TEST_TMPDIR/host.pid"
	for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/host.port" ] && break; sleep 0.05; done
	HOST_PORT=$(cat "$BATS_TEST_TMPDIR/host.port")
	index_project "$IDX" evil-loopback "http://127.0.0.1:$HOST_PORT/evil_loopback-1.0-py3-none-any.whl"
	index_project "$IDX" evil-metadata "http://169.254.169.254/latest/evil_metadata-1.0-py3-none-any.whl"
	[ $# -eq 0 ] || index_project "$IDX" "$@"
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	index_up "$IDX"
}

index_fixture_down() {
	index_down
	[ -f "$BATS_TEST_TMPDIR/host.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/host.pid")" 2>/dev/null
	return 0
}
