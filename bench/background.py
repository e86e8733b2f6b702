#!/usr/bin/env python3
"""bench/background.py: what background processes and Python sessions cost a host, timed over
stdio against build/sandbox-mcp (or --server), each beside its baseline in the same rounds:

  session cell `x += 1`             against a fresh-interpreter `pass` call   (target: <= 0.35x)
  `background: true` return         against a warm `true` call (wait_s 0)     (target: <= warm + 1 ms)
  `process` read of a running one   against a warm `true` call, end to end    (target: below it)
                                    and the server's own CPU time per read    (target: < 1 ms)
  warm `true` beside 8 live         against warm `true` with none             (target: within
  background processes                                                          noise: +5% or 0.2 ms)

Times run from the request written to its response read. The server's CPU time is the sum of
its threads' run time (/proc/PID/task/*/schedstat, nanoseconds) across the request. Rounds
interleave every case, 100 ms apart; the background process each round starts is killed,
untimed, before the next. Prints a table with each target and whether it held; --json writes
the figures.

Usage: bench/background.py [--server BIN] [--backend local|docker] [--image IMG] [--rounds N] [--json OUT]
"""
import argparse, glob, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


def server_cpu_ns(pid):
    total = 0
    for f in glob.glob('/proc/%d/task/*/schedstat' % pid):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--server', default=os.environ.get('SANDBOX_MCP', os.path.join(HERE, '..', 'build', 'sandbox-mcp')))
    ap.add_argument('--backend', default='local')
    ap.add_argument('--image', default=os.environ.get('SANDBOX_IMAGE', 'sandbox-mcp-test:latest'))
    ap.add_argument('--rounds', type=int, default=30)
    ap.add_argument('--json')
    a = ap.parse_args()
    argv = [a.server, '--backend', a.backend] + (['--image', a.image] if a.backend == 'docker' else [])
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    n = [0]

    def rpc(method, params):
        n[0] += 1
        t0 = time.perf_counter()
        p.stdin.write((json.dumps({'jsonrpc': '2.0', 'id': n[0], 'method': method, 'params': params}) + '\n').encode())
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit('the server ended (%s backend)' % a.backend)
            m = json.loads(line)
            if m.get('id') == n[0]:
                return (time.perf_counter() - t0) * 1000, m.get('result')

    def call(name, args):
        ms, r = rpc('tools/call', {'name': name, 'arguments': args})
        if r is None or (r.get('isError') and name != 'process'):
            sys.exit('%s failed: %s' % (name, json.dumps(r)[:300]))
        return ms, r

    def start_bg():
        ms, r = call('execute_bash_commands', {'code': 'echo up; exec sleep 600', 'background': True, 'wait_s': 0})
        pid = r['structuredContent'].get('process_id')
        if not pid or r['structuredContent'].get('running') is not True:
            sys.exit('no running process_id: %s' % json.dumps(r)[:300])
        return ms, pid

    def kill(pid):
        call('process', {'process_id': pid, 'signal': 'KILL', 'wait_s': 5})

    rpc('initialize', {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'bench', 'version': '1'}})
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    call('execute_bash_commands', {'code': 'true'})
    call('execute_python', {'script': 'x = 0', 'session': 'bench'})
    names = ['warm bash `true`', 'background: true, return (wait_s 0)', 'process read of a running one',
             'process read, server CPU', 'Python `pass`, a fresh interpreter', 'session cell `x += 1`',
             'warm bash `true`, 8 live background processes']
    res = {k: [] for k in names}
    for _ in range(a.rounds):
        time.sleep(0.1)
        res['warm bash `true`'].append(call('execute_bash_commands', {'code': 'true'})[0])
        time.sleep(0.1)
        ms, pid = start_bg()
        res['background: true, return (wait_s 0)'].append(ms)
        time.sleep(0.1)
        before = server_cpu_ns(p.pid)
        ms, r = call('process', {'process_id': pid})
        res['process read, server CPU'].append((server_cpu_ns(p.pid) - before) / 1e6)
        if r['structuredContent'].get('running') is not True:
            sys.exit('the read did not find it running: %s' % json.dumps(r)[:300])
        res['process read of a running one'].append(ms)
        kill(pid)
        time.sleep(0.1)
        res['Python `pass`, a fresh interpreter'].append(call('execute_python', {'script': 'pass'})[0])
        time.sleep(0.1)
        ms, r = call('execute_python', {'script': 'x += 1', 'session': 'bench'})
        if r['structuredContent'].get('exit_code') != 0:
            sys.exit('session cell failed: %s' % json.dumps(r)[:300])
        res['session cell `x += 1`'].append(ms)
    # The same warm call beside 8 live background processes (the session, a background process
    # of its own, ended first: 8 is the default limit).
    kill('bench')
    live = [start_bg()[1] for _ in range(8)]
    for _ in range(a.rounds):
        time.sleep(0.1)
        res['warm bash `true`, 8 live background processes'].append(call('execute_bash_commands', {'code': 'true'})[0])
    for pid in live:
        kill(pid)
    # and the baseline again after them, in case the machine changed in between.
    for _ in range(a.rounds):
        time.sleep(0.1)
        res['warm bash `true`'].append(call('execute_bash_commands', {'code': 'true'})[0])
    p.stdin.close()
    p.wait(30)

    med = {k: statistics.median(v) for k, v in res.items()}
    warm = med['warm bash `true`']
    targets = {
        'session cell `x += 1`': ('<= 0.35x a fresh `pass`', med['session cell `x += 1`'] <= 0.35 * med['Python `pass`, a fresh interpreter'],
                                  '%.2fx' % (med['session cell `x += 1`'] / med['Python `pass`, a fresh interpreter'])),
        'background: true, return (wait_s 0)': ('<= warm `true` + 1 ms', med['background: true, return (wait_s 0)'] <= warm + 1,
                                                '%+.2f ms' % (med['background: true, return (wait_s 0)'] - warm)),
        'process read of a running one': ('below a warm `true`', med['process read of a running one'] < warm,
                                          '%.2fx' % (med['process read of a running one'] / warm)),
        'process read, server CPU': ('< 1 ms', med['process read, server CPU'] < 1, ''),
        'warm bash `true`, 8 live background processes': (
            'within noise of none (+5% or 0.2 ms)',
            med['warm bash `true`, 8 live background processes'] <= max(warm * 1.05, warm + 0.2),
            '%+.2f ms' % (med['warm bash `true`, 8 live background processes'] - warm)),
    }
    print('| case (%s backend, %d rounds) | median ms | p90 ms | target | against the baseline | held |' % (a.backend, a.rounds))
    print('| --- | --- | --- | --- | --- | --- |')
    for k in names:
        v = sorted(res[k])
        t = targets.get(k)
        print('| %s | %.2f | %.2f | %s | %s | %s |' % (k, med[k], v[max(int(len(v) * 0.9) - 1, 0)],
                                                       t[0] if t else 'baseline', t[2] if t else '',
                                                       ('yes' if t[1] else 'NO') if t else ''))
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'backend': a.backend, 'rounds': a.rounds, 'samples_ms': res, 'median_ms': med,
                       'targets': {k: {'target': t[0], 'held': t[1], 'against': t[2]} for k, t in targets.items()}},
                      f, indent=1)


if __name__ == '__main__':
    main()
