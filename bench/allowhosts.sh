#!/bin/bash
# The cost of --allow-hosts' proxy: HTTPS requests (a new connection each) and a 100 MB
# download from a server on a network namespace of its own, by the code of a local sandbox,
# through the proxy (--allow-hosts) and directly (--network all). Needs root and ip.
# Usage: bench/allowhosts.sh [ROUNDS]   (default 20 requests); prints one line per way.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${SANDBOX_MCP:-$here/../build/sandbox-mcp}
rounds=${1:-20}
tmp=$(mktemp -d)
ns=sbxbench$$ if=sb$$
cleanup() {
	[ -f "$tmp/srv.pid" ] && kill "$(cat "$tmp/srv.pid")" 2>/dev/null
	ip netns del "$ns" 2>/dev/null || true
	ip link del "$if-h" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "$if-h" type veth peer name "$if-i"
ip link set "$if-i" netns "$ns"
ip addr add 198.51.100.9/30 dev "$if-h"
ip link set "$if-h" up
ip -n "$ns" addr add 198.51.100.10/30 dev "$if-i"
ip -n "$ns" link set "$if-i" up
ip -n "$ns" link set lo up
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=bench -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 2>/dev/null
mkdir "$tmp/www"
head -c 100000000 /dev/zero >"$tmp/www/big"
echo ok >"$tmp/www/small"
ip netns exec "$ns" python3 -c '
import functools, http.server, ssl, sys
srv = http.server.ThreadingHTTPServer(("198.51.100.10", 8443), functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1]))
http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[2], sys.argv[3])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()' "$tmp/www" "$tmp/cert.pem" "$tmp/key.pem" &
echo $! >"$tmp/srv.pid"
for _ in $(seq 100); do
	python3 -c 'import socket; socket.create_connection(("198.51.100.10", 8443), 1).close()' 2>/dev/null && break
	sleep 0.1
done
script="import ssl, time, urllib.request as u
ctx = ssl._create_unverified_context()
t = []
for i in range($rounds):
    t0 = time.perf_counter(); u.urlopen('https://198.51.100.10:8443/small', context=ctx, timeout=30).read(); t.append(time.perf_counter() - t0)
t.sort()
t0 = time.perf_counter(); n = len(u.urlopen('https://198.51.100.10:8443/big', context=ctx, timeout=120).read()); big = time.perf_counter() - t0
print('request median %.1f ms, p90 %.1f ms; 100 MB in %.2f s (%.0f MB/s, %d bytes)' % (t[len(t)//2]*1000, t[int(len(t)*0.9)]*1000, big, n/big/1e6, n))"
call=$(jq -cn --arg s "$script" '{jsonrpc:"2.0", id:1, method:"tools/call", params:{name:"execute_python", arguments:{script:$s, timeout_s:300}}}')
init='{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
for way in "--allow-hosts 198.51.100.10:8443" "--network all"; do
	# shellcheck disable=SC2086
	out=$(printf '%s\n%s\n' "$init" "$call" | SANDBOX_STATE_DIR="$tmp/state" "$bin" --backend local --memory 1G $way 2>/dev/null |
		jq -r 'select(.id == 1) | .result.structuredContent | .stdout + .stderr')
	printf '%-36s %s\n' "$way" "$out"
done
