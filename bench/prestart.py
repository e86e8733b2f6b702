#!/usr/bin/env python3
"""bench/prestart.py: what the work a sandbox does ahead (the prestarted Python interpreter)
costs the calls that did not ask for it, against the floors it must stay under, in one run.

Usage: bench/prestart.py [--server BIN] [--baseline OLD_BIN] [--rounds N] [--json OUT]

Cases, each timed over stdio from the request written to its response read, on --backend
local (median over --rounds, rounds interleaved between the servers and the floors):
- floor `python3 -c pass` and `bash -c true`: a bare start (posix_spawn, stdout to EOF, waitpid),
  bash's after a 100 ms pause as the warm call's;
- bash `true` after a 100 ms pause (the warm call): target: at most the floor + 0.5 ms; and right
  after a Python `pass` (no gap): target: at most the warm call + 1 ms;
- Python `pass` after a 100 ms pause, and calls 20 ms and 300 ms apart (the client waits 20 ms
  or 300 ms between an answer and the next request): target: at most 0.5x the `python3 -c pass`
  floor;
- with --python-preload numpy: `pass` after a pause, and what it costs over a plain server's
  `pass` (the preload's cost at the call's end): target: well under 1 ms.
With --baseline, an older build is measured beside this one in the same rounds.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = '/usr/bin/python3' if os.access('/usr/bin/python3', os.X_OK) else shutil.which('python3')


class Server:
    def __init__(self, binary, extra):
        self.tmp = tempfile.mkdtemp(prefix='prestart-bench-')
        self.p = subprocess.Popen([binary, '--backend', 'local', '--state-dir', self.tmp + '/state'] + extra,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.n = 0
        self.rpc('initialize', {'protocolVersion': '2025-06-18', 'capabilities': {},
                                'clientInfo': {'name': 'bench', 'version': '1'}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()

    def rpc(self, method, params):
        self.n += 1
        t0 = time.perf_counter()
        self.p.stdin.write((json.dumps({'jsonrpc': '2.0', 'id': self.n, 'method': method, 'params': params}) + '\n').encode())
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                sys.exit('bench/prestart.py: the server ended')
            m = json.loads(line)
            if m.get('id') == self.n:
                r = m.get('result') or {}
                if r.get('isError') or (r.get('structuredContent') or {}).get('exit_code') not in (0, None):
                    sys.exit('bench/prestart.py: a call failed: %s' % line[:300])
                return (time.perf_counter() - t0) * 1000

    def bash(self):
        return self.rpc('tools/call', {'name': 'execute_bash_commands', 'arguments': {'code': 'true'}})

    def py(self):
        return self.rpc('tools/call', {'name': 'execute_python', 'arguments': {'script': 'pass'}})

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)
        shutil.rmtree(self.tmp, ignore_errors=True)


def spawn(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1000


def numpy_there():
    return subprocess.run([PY, '-c', 'import numpy'], stderr=subprocess.DEVNULL).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--server', default=os.environ.get('SANDBOX_MCP', os.path.join(HERE, '..', 'build', 'sandbox-mcp')))
    ap.add_argument('--baseline')
    ap.add_argument('--rounds', type=int, default=20)
    ap.add_argument('--json')
    a = ap.parse_args()
    builds = [('this', a.server)] + ([('baseline', a.baseline)] if a.baseline else [])
    numpy = numpy_there()
    servers = {}
    for name, b in builds:
        servers[name] = Server(b, [])
        if numpy:
            servers[name + ' numpy'] = Server(b, ['--python-preload', 'numpy'])
    for s in servers.values():  # the first calls, untimed
        s.bash()
        s.py()
    res = {}

    def add(k, v):
        res.setdefault(k, []).append(v)

    for _ in range(a.rounds):
        add(('floor', 'python3'), spawn([PY, '-c', 'pass']))
        # After the same pause as the warm bash call it is the floor of: a start after an idle
        # 100 ms (the CPU's caches and clocks as a call finds them) against one at once after
        # another start would charge the pause to the call.
        time.sleep(0.1)
        add(('floor', 'bash'), spawn(['bash', '-c', 'true']))
        for name, _b in builds:
            s = servers[name]
            time.sleep(0.1)
            add((name, 'bash warm'), s.bash())
            time.sleep(0.1)
            add((name, 'py ready'), s.py())
            add((name, 'bash after py'), s.bash())
            time.sleep(0.1)
            s.py()
            for _i in range(3):
                time.sleep(0.02)
                add((name, 'py 20ms'), s.py())
            for _i in range(2):
                time.sleep(0.3)
                add((name, 'py 300ms'), s.py())
            if numpy:
                time.sleep(0.1)
                add((name, 'numpy py ready'), servers[name + ' numpy'].py())
    for s in servers.values():
        s.close()
    med = {k: statistics.median(v) for k, v in res.items()}
    floor_py, floor_bash = med[('floor', 'python3')], med[('floor', 'bash')]
    print('prestart (local backend, %d rounds, %d CPUs): floor python3 -c pass %.2f ms, bash -c true %.2f ms'
          % (a.rounds, os.cpu_count(), floor_py, floor_bash))
    head = '| case | ' + ' | '.join('%s ms' % n for n, _ in builds) + ' | target |'
    print(head)
    print('|' + ' --- |' * (len(builds) + 2))
    rows = [
        ('bash `true`, warm (after 100 ms)', 'bash warm', lambda n: 'floor bash -c true + 0.5 ms = %.2f' % (floor_bash + 0.5)),
        ('bash `true` right after Python `pass`', 'bash after py', lambda n: 'warm + 1 ms = %.2f' % (med[(n, 'bash warm')] + 1)),
        ('Python `pass`, ready (after 100 ms)', 'py ready', None),
        ('Python `pass`, calls 20 ms apart', 'py 20ms', lambda n: '0.5x floor python3 = %.2f' % (0.5 * floor_py)),
        ('Python `pass`, calls 300 ms apart', 'py 300ms', lambda n: '0.5x floor python3 = %.2f' % (0.5 * floor_py)),
    ]
    if numpy:
        rows.append(('Python `pass`, numpy preloaded, ready', 'numpy py ready', None))
    for title, key, target in rows:
        cells = []
        for n, _ in builds:
            v = med[(n, key)]
            extra = ''
            if key == 'bash warm':
                extra = ' (+%.2f over the floor)' % (v - floor_bash)
            elif key == 'bash after py':
                extra = ' (+%.2f over warm)' % (v - med[(n, 'bash warm')])
            elif key in ('py 20ms', 'py 300ms', 'py ready'):
                extra = ' (%.2fx floor)' % (v / floor_py)
            elif key == 'numpy py ready':
                extra = ' (+%.2f over plain)' % (v - med[(n, 'py ready')])
            cells.append('%.2f%s' % (v, extra))
        print('| %s | %s | %s |' % (title, ' | '.join(cells), target('this') if target else ''))
    if not numpy:
        print('numpy: not importable by %s, the preload case is skipped' % PY)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'%s/%s' % k: v for k, v in med.items()}, f, indent=1)


if __name__ == '__main__':
    main()
