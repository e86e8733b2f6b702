#!/usr/bin/env python3
"""bench/percall.py: what one warm call costs the server and the in-sandbox agent, counted by
the kernel rather than timed: CPU time, context switches and system calls per call.

Usage: bench/percall.py [--server BIN] [--baseline OLD_BIN] [--calls N] [--code CODE]

Each server runs on --backend local; after one call has made its sandbox, `perf stat
--no-inherit` is attached to the server's threads and to the agent's process (not to the call's
own programs, which are the same for any server) for N warm calls of CODE (execute_bash_commands,
default `true`, 30 ms apart), and its counts are divided by N. With --baseline, the older build
is measured the same way right after. Needs perf (linux-perf), with tracepoints readable (root).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

EVENTS = 'task-clock,context-switches,raw_syscalls:sys_enter'


def children(pid):
    """Children of any of pid's threads (each thread's list holds those it started)."""
    kids = []
    for tid in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/children' % (pid, tid)) as f:
                kids += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return kids


def measure(binary, calls, code):
    tmp = tempfile.mkdtemp(prefix='percall-bench-')
    p = subprocess.Popen([binary, '--backend', 'local', '--state-dir', tmp + '/state'],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    n = [0]

    def rpc(method, params):
        n[0] += 1
        p.stdin.write((json.dumps({'jsonrpc': '2.0', 'id': n[0], 'method': method, 'params': params}) + '\n').encode())
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit('bench/percall.py: the server ended')
            m = json.loads(line)
            if m.get('id') == n[0]:
                return m

    call = {'name': 'execute_bash_commands', 'arguments': {'code': code}}
    rpc('initialize', {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'percall', 'version': '1'}})
    rpc('tools/call', call)
    agents = children(p.pid)
    if len(agents) != 1:
        sys.exit('bench/percall.py: expected one agent process under the server, found %s' % agents)
    outs, perfs = [], []
    for pid in (p.pid, agents[0]):
        out = os.path.join(tmp, 'perf-%d' % pid)
        outs.append(out)
        perfs.append(subprocess.Popen(['perf', 'stat', '--no-inherit', '-x', ',', '-e', EVENTS, '-p', str(pid), '-o', out],
                                      stderr=subprocess.DEVNULL))
    time.sleep(0.5)  # perf attached
    for _ in range(calls):
        time.sleep(0.03)
        m = rpc('tools/call', call)
        if (m.get('result') or {}).get('isError'):
            sys.exit('bench/percall.py: a call failed: %s' % json.dumps(m)[:300])
    for q in perfs:
        q.send_signal(2)
        q.wait(10)
    p.stdin.close()
    p.wait(30)
    res = {}
    for who, out in zip(('server', 'agent'), outs):
        with open(out) as f:
            for line in f:
                parts = line.strip().split(',')
                if len(parts) > 2 and parts[2] in EVENTS.split(','):
                    res[(who, parts[2])] = float(parts[0]) / calls
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--server', default=os.path.join(here, '..', 'build', 'sandbox-mcp'))
    ap.add_argument('--baseline')
    ap.add_argument('--calls', type=int, default=200)
    ap.add_argument('--code', default='true')
    a = ap.parse_args()
    if not shutil.which('perf'):
        sys.exit('bench/percall.py: perf is not installed (linux-perf)')
    runs = [('this build', a.server)] + ([('baseline', a.baseline)] if a.baseline else [])
    print('per warm `%s` call (%d calls, 30 ms apart; the call\'s own programs not counted)' % (a.code, a.calls))
    print('| build | server CPU ms | server switches | server syscalls | agent CPU ms | agent switches | agent syscalls |')
    print('| --- | --- | --- | --- | --- | --- | --- |')
    for name, binary in runs:
        r = measure(binary, a.calls, a.code)
        print('| %s | %.3f | %.2f | %.1f | %.3f | %.2f | %.1f |' % (
            name, r.get(('server', 'task-clock'), 0), r.get(('server', 'context-switches'), 0),
            r.get(('server', 'raw_syscalls:sys_enter'), 0), r.get(('agent', 'task-clock'), 0),
            r.get(('agent', 'context-switches'), 0), r.get(('agent', 'raw_syscalls:sys_enter'), 0)))


main()
