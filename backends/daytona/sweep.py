# sandbox-mcp's sweep: the part of the call runner (runner.py, sent with it as one program) that
# ends what a call left in the sandbox, even when the call killed its keeper (the code runs as
# the same user and can; its setsid descendants then leave the keeper's tree).
#   baseline()    "PID:STARTTIME,..." of every process: taken once, when the sandbox has
#                 started and before any call (the toolbox daemon, the entrypoint, ...)
#   sweep(keep)   SIGKILLs every process of this user but pid 1, those in keep (a baseline; an
#                 entry +PID:STARTTIME spares that process and all its descendants: a background
#                 process's keeper, which the server names, never the sandbox's code),
#                 this one and its ancestors (the toolbox daemon's execute, the daemon); again
#                 until none is left, at most 3 s. (True when none is left, a message)
# SANDBOX_MCP_NO_SWEEP=1 in the toolbox's environment turns it off (the test server sets it when
# it cannot give a sandbox a PID namespace of its own, where a sweep would reach the host).
import os, time
try:  # not signal: its enums cost every request's start (runner.py)
    import _signal as signal
except ImportError:
    import signal

def procs():
    """{pid: (ppid, starttime, state, uids)} of every process that can be read."""
    out = {}
    for p in os.listdir('/proc'):
        if p.isdigit():
            try:
                with open('/proc/%s/stat' % p, 'rb') as f:
                    s = f.read()
                r = s[s.rindex(b')') + 2:].split()
                with open('/proc/%s/status' % p, 'rb') as f:
                    u = [l.split()[1:4] for l in f if l.startswith(b'Uid:')][0]
                out[int(p)] = (int(r[1]), r[19].decode(), r[0], set(int(x) for x in u))
            except (OSError, ValueError, IndexError):
                pass
    return out

def baseline():
    return ','.join('%d:%s' % (p, v[1]) for p, v in sorted(procs().items()))

def sweep(keep):
    if os.environ.get('SANDBOX_MCP_NO_SWEEP') == '1':
        return True, 'sweep: off'
    roots = set(k[1:] for k in keep.split(',') if k.startswith('+'))  # background keepers: they and theirs
    keep = set(k for k in keep.split(',') if k and not k.startswith('+'))
    uid, me = os.getuid(), os.getpid()
    denied, n, end = set(), 0, time.monotonic() + 3
    while True:
        ps = procs()
        mine, p = set(), me
        while p in ps and p not in mine:
            mine.add(p)
            p = ps[p][0]
        spared = [p for p, v in ps.items() if '%d:%s' % (p, v[1]) in roots]
        while spared:
            p = spared.pop()
            mine.add(p)
            spared += [c for c, v in ps.items() if v[0] == p and c not in mine]
        left = [p for p, v in ps.items() if p != 1 and p not in mine and p not in denied and uid in v[3]
                and v[2] not in (b'Z', b'X') and '%d:%s' % (p, v[1]) not in keep]
        if not left:
            return True, 'sweep: %d killed' % n
        if time.monotonic() > end:
            return False, 'sweep: %d processes left' % len(left)
        for p in left:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
                n += 1
            except PermissionError:
                denied.add(p)
            except OSError:
                pass
        time.sleep(0.02)
