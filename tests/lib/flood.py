#!/usr/bin/env python3
"""flood.py SERVER N [ARGS...]: starts N fresh servers one after the other, each flooded with
3,000 pings while it makes its sandbox ahead (its reader and writer threads allocating all the
while), then one call; prints "answered A of N", and for each that did not answer within 20 s,
"stuck K". Each server is shut down by closing its stdin, as a host does; one that is stuck is
killed."""
import json, subprocess, sys, threading

server, n, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
init = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}
lines = [json.dumps(init)] + [json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) for i in range(3000)]
lines.append(json.dumps({"jsonrpc": "2.0", "id": "call", "method": "tools/call",
                         "params": {"name": "execute_bash_commands", "arguments": {"code": "true"}}}))
data = ('\n'.join(lines) + '\n').encode()
answered = 0
for k in range(n):
    p = subprocess.Popen([server] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got = []

    def read():
        for line in p.stdout:
            if b'"id":"call"' in line:
                got.append(json.loads(line))
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    p.stdin.write(data)
    p.stdin.flush()
    t.join(20)
    if got and got[0].get('result', {}).get('structuredContent', {}).get('exit_code') == 0:
        answered += 1
        p.stdin.close()
        p.wait(10)
    else:
        print("stuck %d" % k)
        p.kill()
        p.wait()
print("answered %d of %d" % (answered, n))
