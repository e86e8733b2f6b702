# sandbox-mcp's sweep, run with python3 -c after every call (never from a file the call could rewrite).
#   list            prints "PID:STARTTIME ..." of every process: the sandbox's own, before any call
#   sweep KEEP...   SIGKILLs every process of this user but pid 1, the KEEP ones, this one and its
#                   ancestors (the toolbox daemon's exec); until none is left, at most 3 s
import os, signal, sys, time
def procs():
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
a = sys.argv[1:]
if a[:1] == ['list']:
    print(' '.join('%d:%s' % (p, v[1]) for p, v in sorted(procs().items())))
    sys.exit(0)
if os.environ.get('SANDBOX_MCP_NO_SWEEP') == '1':
    print('sweep: off')
    sys.exit(0)
keep, uid, me = set(a[1:]), os.getuid(), os.getpid()
denied, n, end = set(), 0, time.monotonic() + 3
while True:
    ps = procs()
    mine, p = set(), me
    while p in ps and p not in mine:
        mine.add(p)
        p = ps[p][0]
    left = [p for p, v in ps.items() if p != 1 and p not in mine and p not in denied and uid in v[3]
            and v[2] not in (b'Z', b'X') and '%d:%s' % (p, v[1]) not in keep]
    if not left:
        print('sweep: %d killed' % n)
        sys.exit(0)
    if time.monotonic() > end:
        print('sweep: %d processes left' % len(left))
        sys.exit(1)
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
