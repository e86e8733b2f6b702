#!/usr/bin/env python3
"""bench/background.py: what background processes cost a host, timed over stdio against
build/sandbox-mcp (or $SANDBOX_MCP): a warm `true` call, a `background: true` call's return
(wait_s 0, a program that runs on), and a `process` read of a running one, each from the
request written to its response read. Rounds interleave the three; the background process
each round starts is killed, untimed, before the next.

Usage: bench/background.py [--backend local|docker] [--rounds N]
"""
import argparse, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--backend', default='local')
    ap.add_argument('--rounds', type=int, default=30)
    a = ap.parse_args()
    server = os.environ.get('SANDBOX_MCP', os.path.join(HERE, '..', 'build', 'sandbox-mcp'))
    p = subprocess.Popen([server, '--backend', a.backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    n = [0]

    def rpc(method, params):
        n[0] += 1
        t0 = time.perf_counter()
        p.stdin.write((json.dumps({'jsonrpc': '2.0', 'id': n[0], 'method': method, 'params': params}) + '\n').encode())
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get('id') == n[0]:
                return (time.perf_counter() - t0) * 1000, m.get('result')

    def call(name, args):
        return rpc('tools/call', {'name': name, 'arguments': args})

    rpc('initialize', {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'bench', 'version': '1'}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    call('execute_bash_commands', {'code': 'true'})
    res = {'warm bash `true`': [], 'background: true, return (wait_s 0)': [], 'process read of a running one': [],
           'Python `pass`, a fresh interpreter': [], 'session cell `x += 1`': []}
    call('execute_python', {'script': 'x = 0', 'session': 'bench'})
    for _ in range(a.rounds):
        time.sleep(0.1)
        ms, r = call('execute_bash_commands', {'code': 'true'})
        res['warm bash `true`'].append(ms)
        time.sleep(0.1)
        ms, r = call('execute_bash_commands', {'code': 'echo up; exec sleep 60', 'background': True, 'wait_s': 0})
        pid = r['structuredContent'].get('process_id')
        if not pid:
            sys.exit('no process_id: %s' % json.dumps(r)[:300])
        res['background: true, return (wait_s 0)'].append(ms)
        time.sleep(0.1)
        ms, r = call('process', {'process_id': pid})
        res['process read of a running one'].append(ms)
        call('process', {'process_id': pid, 'signal': 'KILL', 'wait_s': 5})
        time.sleep(0.1)
        ms, r = call('execute_python', {'script': 'pass'})
        res['Python `pass`, a fresh interpreter'].append(ms)
        time.sleep(0.1)
        ms, r = call('execute_python', {'script': 'x += 1', 'session': 'bench'})
        if r['structuredContent'].get('exit_code') != 0:
            sys.exit('session cell failed: %s' % json.dumps(r)[:300])
        res['session cell `x += 1`'].append(ms)
    p.stdin.close()
    p.wait(30)
    print('| case (%s backend, %d rounds) | median ms | p90 ms |' % (a.backend, a.rounds))
    print('| --- | --- | --- |')
    for k, v in res.items():
        v.sort()
        print('| %s | %.2f | %.2f |' % (k, statistics.median(v), v[int(len(v) * 0.9) - 1]))


if __name__ == '__main__':
    main()
