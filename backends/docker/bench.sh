#!/bin/sh
# The warm round trip of a trivial call (`true`) on the local and the docker backend, side by
# side: one server per backend, one warm-up call (which makes the sandbox), then N calls, each
# timed from the request written to the response read, as an MCP host sees it.
#
# Usage: backends/docker/bench.sh [N]    (default 200; the server: $SANDBOX_MCP or build/sandbox-mcp)
# Environment: DOCKER_HOST, SANDBOX_IMAGE (e.g. sandbox-mcp-test:latest) as for the server.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
server=${SANDBOX_MCP:-$here/build/sandbox-mcp}
n=${1:-200}
exec python3 - "$server" "$n" <<'EOF'
import json, statistics, subprocess, sys, time

server, n = sys.argv[1], int(sys.argv[2])

def bench(backend):
    p = subprocess.Popen([server, "--backend", backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    def ask(i, method, params):
        p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i:
                return m
    ask(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    call = {"name": "execute_bash_commands", "arguments": {"code": "true"}}
    t0 = time.monotonic()
    first = ask(1, "tools/call", call)["result"]["structuredContent"]
    cold = (time.monotonic() - t0) * 1000
    if first["exit_code"] != 0 or first["backend"] != backend:
        sys.exit("%s: the warm-up call failed: %s" % (backend, first))
    times = []
    for i in range(n):
        t0 = time.monotonic()
        r = ask(2 + i, "tools/call", call)
        times.append((time.monotonic() - t0) * 1000)
        assert r["result"]["structuredContent"]["exit_code"] == 0
    p.stdin.close()
    p.wait(10)
    times.sort()
    return cold, statistics.median(times), times[int(len(times) * 0.9)], statistics.mean(times)

res = {b: bench(b) for b in ("local", "docker")}
print("%-8s %12s %12s %12s %12s" % ("backend", "first call", "median", "p90", "mean"))
for b, (cold, med, p90, mean) in res.items():
    print("%-8s %9.1f ms %9.2f ms %9.2f ms %9.2f ms" % (b, cold, med, p90, mean))
print("docker / local, warm median: %.2fx (%d calls each)" % (res["docker"][1] / res["local"][1], n))
EOF
