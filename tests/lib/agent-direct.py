#!/usr/bin/env python3
"""Drives a sandbox-agent directly over its --stdio link (agent/proto.h), for what only the
agent's own start can set up: the agent runs as PID 1 of a PID namespace of its own (unshare,
in a user namespace, so root is not needed), started with the signals given by --ignore
ignored, as a runtime that starts it so would leave them.

Usage: agent-direct.py AGENT [--ignore SIG,...] RUN.json...  (SIG: a name, or a number)

Each RUN.json argument is one call, run in turn: {"argv": [...], "flags": N, "rlimits":
[[resource, limit], ...], "cwd": "/"}. Prints one JSON line per call: {"out": stdout, "err":
stderr, "status": wait status, "flags": AG_EXIT flags}, then {"agent_cwd_before": ...,
"agent_cwd": ..., "agent_nofile": ...} read from the agent's /proc before the first call and
after the last (what a call's process must not have
changed of the agent's).
"""
import json, os, signal, struct, subprocess, sys

AG_HELLO, AG_RUN, AG_OUT, AG_EXIT, AG_ERR = 1, 4, 6, 7, 9


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack('<I', len(b)) + b


def run_frame(spec):
    p = struct.pack('<IQQ', spec.get('flags', 0), 1 << 20, 1 << 20) + s(spec.get('cwd', '/')) + s('/tmp/agent-direct-spill')
    p += struct.pack('<I', 0) + s('')
    rl = spec.get('rlimits', [])
    p += struct.pack('<I', len(rl)) + b''.join(struct.pack('<IQ', r, v) for r, v in rl)
    argv = spec['argv']
    p += struct.pack('<I', len(argv)) + b''.join(s(a) for a in argv)
    env = ['PATH=/usr/local/bin:/usr/bin:/bin']
    p += struct.pack('<I', len(env)) + b''.join(s(e) for e in env)
    return struct.pack('<IB', len(p) + 1, AG_RUN) + p


def read_frame(f):
    h = f.read(5)
    if len(h) < 5:
        sys.exit('agent-direct: the agent ended')
    n, t = struct.unpack('<IB', h)
    return t, f.read(n - 1)


def ignore_raw(sig):
    """Ignores sig with the system call itself: the C library's sigaction refuses the signals it
    keeps for its threads (32 and 33 in glibc), which a runtime may still leave ignored."""
    import ctypes
    nr = {'x86_64': 13, 'aarch64': 134}[os.uname().machine]
    act = (ctypes.c_ulong * 4)(1, 0, 0, 0)  # handler SIG_IGN, flags, restorer, mask
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(ctypes.c_long(nr), ctypes.c_long(sig), act, None, ctypes.c_long(8)) != 0:
        raise OSError(ctypes.get_errno(), 'rt_sigaction')


def main():
    args = sys.argv[1:]
    agent = args.pop(0)
    ignore = []
    if args and args[0] == '--ignore':
        args.pop(0)
        ignore = [int(n) if n.isdigit() else getattr(signal, n) for n in args.pop(0).split(',')]

    def pre():
        for sig in ignore:
            if sig in (32, 33):
                ignore_raw(sig)
            else:
                signal.signal(sig, signal.SIG_IGN)
    p = subprocess.Popen(['unshare', '--user', '--map-root-user', '--pid', '--fork', '--kill-child', agent, '--stdio'],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=pre)
    t, _ = read_frame(p.stdout)
    assert t == AG_HELLO, t
    # The agent: the one child of unshare's forked child.
    ag = int(open('/proc/%d/task/%d/children' % (p.pid, p.pid)).read().split()[0])
    cwd_before = os.readlink('/proc/%d/cwd' % ag)
    for a in args:
        p.stdin.write(run_frame(json.loads(a)))
        p.stdin.flush()
        out, err = b'', b''
        while True:
            t, pl = read_frame(p.stdout)
            if t == AG_OUT:
                if pl[0] == 1:
                    out += pl[1:]
                else:
                    err += pl[1:]
            elif t == AG_EXIT:
                status, flags = struct.unpack('<II', pl[:8])
                break
            elif t == AG_ERR:
                sys.exit('agent-direct: AG_ERR: %s' % pl.decode(errors='replace'))
        print(json.dumps({'out': out.decode(errors='replace'), 'err': err.decode(errors='replace'),
                          'status': status, 'flags': flags}))
    nofile = [l.split()[3] for l in open('/proc/%d/limits' % ag) if l.startswith('Max open files')][0]
    print(json.dumps({'agent_cwd_before': cwd_before, 'agent_cwd': os.readlink('/proc/%d/cwd' % ag),
                      'agent_nofile': nofile}))
    p.stdin.close()
    p.wait()


main()
