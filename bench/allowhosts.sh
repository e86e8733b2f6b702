#!/bin/bash
# The cost of --allow-hosts' proxy: HTTPS requests (a new connection each) and a 100 MB
# download from a server on a network namespace of its own, by the code of a local sandbox,
# through the proxy (--allow-hosts) and directly (--network all). Needs root and ip.
# The two ways alternate, three times each (a fresh server each time), so that the machine's
# load falls on both alike; the figures are medians over all of a way's samples, beside the
# targets: at most 1 ms more per request, at least 80% of the direct download's speed.
# Usage: bench/allowhosts.sh [ROUNDS [JSON]]   (default 20 requests a run); prints a table, and
#        writes the figures to JSON when named.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${SANDBOX_MCP:-$here/../build/sandbox-mcp}
rounds=${1:-20}
json_out=${2:-}
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
script="import json, ssl, time, urllib.request as u
ctx = ssl._create_unverified_context()
t = []
for i in range($rounds):
    t0 = time.perf_counter(); u.urlopen('https://198.51.100.10:8443/small', context=ctx, timeout=30).read(); t.append((time.perf_counter() - t0) * 1000)
t0 = time.perf_counter(); n = len(u.urlopen('https://198.51.100.10:8443/big', context=ctx, timeout=120).read()); big = time.perf_counter() - t0
print(json.dumps({'request_ms': t, 'mb_s': n / big / 1e6, 'bytes': n}))"
call=$(jq -cn --arg s "$script" '{jsonrpc:"2.0", id:1, method:"tools/call", params:{name:"execute_python", arguments:{script:$s, timeout_s:300}}}')
init='{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
: >"$tmp/proxy.jsonl"
: >"$tmp/direct.jsonl"
for _ in 1 2 3; do
	for way in proxy direct; do
		if [ "$way" = proxy ]; then opt="--allow-hosts 198.51.100.10:8443"; else opt="--network all"; fi
		# shellcheck disable=SC2086
		printf '%s\n%s\n' "$init" "$call" | SANDBOX_STATE_DIR="$tmp/state" "$bin" --backend local --memory 1G $opt 2>/dev/null |
			jq -c 'select(.id == 1) | .result.structuredContent | (.stdout | fromjson? // {error: .})' >>"$tmp/$way.jsonl"
	done
done
python3 - "$tmp/proxy.jsonl" "$tmp/direct.jsonl" "$json_out" <<'PY'
import json, statistics, sys
ways = {}
for name, path in (("--allow-hosts (proxy)", sys.argv[1]), ("--network all (direct)", sys.argv[2])):
    runs = [json.loads(l) for l in open(path) if l.strip()]
    bad = [r for r in runs if "request_ms" not in r or r.get("bytes") != 100000000]
    if bad or not runs:
        sys.exit("allowhosts: a run failed: %s" % json.dumps(bad[:1])[:400])
    req = sorted(x for r in runs for x in r["request_ms"])
    ways[name] = {"request_median_ms": statistics.median(req), "request_p90_ms": req[int(len(req) * 0.9) - 1],
                  "mb_s": statistics.median(r["mb_s"] for r in runs), "runs": len(runs), "requests": len(req)}
p, d = ways["--allow-hosts (proxy)"], ways["--network all (direct)"]
extra = p["request_median_ms"] - d["request_median_ms"]
ratio = p["mb_s"] / d["mb_s"]
print("| way | HTTPS request, median ms | p90 ms | 100 MB download, MB/s |")
print("| --- | --- | --- | --- |")
for k, v in ways.items():
    print("| %s | %.2f | %.2f | %.0f |" % (k, v["request_median_ms"], v["request_p90_ms"], v["mb_s"]))
print("proxy: %+.2f ms a request (target: under 1 ms: %s); download at %.0f%% of direct (target: 80%%: %s)"
      % (extra, "held" if extra < 1 else "NOT held", ratio * 100, "held" if ratio >= 0.8 else "NOT held"))
if sys.argv[3]:
    json.dump({"ways": ways, "extra_ms": extra, "download_ratio": ratio}, open(sys.argv[3], "w"), indent=1)
PY
