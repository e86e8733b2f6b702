# sandbox-mcp's call runner inside a Daytona sandbox (uploaded with every call).
#   run DIR CAP SPILL_MAX TIMEOUT_MS SPILL_PREFIX SH_FALLBACK CWD WATCH NPUT (SRC DST MODE)... NENV ENV... -- ARGV...
#       the PUT files were uploaded to SRC (in DIR, a fresh folder of an unguessable name) and
#       are put in place as new files renamed over DST: whatever the code left at DST (a FIFO,
#       a symlink) is replaced, never opened; WATCH (or ""): a folder; the result says whether
#       anything under it changed during the call (saves the server a listing when nothing did)
#   poll DIR OFF1 OFF2 CHUNK   prints one JSON line: output past the offsets, and the end
#   kill DIR                   asks the runner to kill the call (a file, and SIGTERM)
#   put SRC DST MODE           puts the uploaded SRC in place as DST (see run)
#   list DIR MAX [SKIP]        prints one JSON line: what lies under DIR but in DIR/SKIP (folders
#                              walked to 64 levels, no symlink followed), as the agent's AG_LIST
#   get PATH MAX               prints one JSON line: PATH's first MAX bytes, as the agent's AG_GET
#   getb DIR MAX B64           the same for DIR/NAME, NAME (bytes, not UTF-8) given as base64
# The runner is a child subreaper: every process of the call, setsid ones included, stays its
# descendant and is killed when the call ends, by exit, timeout or kill.
import base64, ctypes, errno, json, os, select, signal, sys, time

def wfile(path, data):
    with open(path + '.tmp', 'wb') as f:
        f.write(data)
    os.rename(path + '.tmp', path)

SEQ = [0]

def open_parent(path, create=True):
    """The folder that is to hold path (absolute), opened by walking down from / one name at a
    time without following a symlink and making missing folders (unless create is false): a
    file put there never lands outside the folder its path names. (fd, last name); OSError
    ELOOP for a symlink on the way."""
    names = [n for n in path.split('/') if n not in ('', '.')]
    if not path.startswith('/') or not names or '..' in names:
        raise OSError(errno.EINVAL, 'not a plain absolute path', path)
    fd = os.open('/', os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for n in names[:-1]:
            flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                nfd = os.open(n, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(n, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(n, flags, dir_fd=fd)
            except NotADirectoryError:
                if (os.stat(n, dir_fd=fd, follow_symlinks=False).st_mode & 0o170000) == 0o120000:
                    raise OSError(errno.ELOOP, 'a name on its way is a symlink, which is not followed', path)
                raise OSError(errno.ENOTDIR, 'a name on its way is not a folder', path)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd, names[-1]

def create_fresh(path, mode):
    """A new file renamed over path: never opens what is there (a FIFO would block) and follows
    no symlink on the way (open_parent). An fd."""
    dfd, base = open_parent(path)
    try:
        SEQ[0] += 1
        tmp = '.sandbox-runner-%d-%d.tmp' % (os.getpid(), SEQ[0])
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     mode, dir_fd=dfd)
        try:
            os.fchmod(fd, mode)
            os.rename(tmp, base, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise
        return fd
    finally:
        os.close(dfd)

def put(src, dst, mode):
    fd = create_fresh(dst, mode)
    try:
        with open(src, 'rb') as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                os.write(fd, b)
    finally:
        os.close(fd)

def listing(root, mx, skip=''):
    """Every name under root but folders, which are walked (64 levels, no symlink followed)."""
    res = {'entries': [], 'truncated': False, 'skipped': False}
    try:
        pfd, base = open_parent(root, False)
        try:
            top = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
        finally:
            os.close(pfd)
    except OSError as x:
        res['skipped'] = x.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
        return res
    size, visited = [0], [0]

    def walk(fd, rel, depth):  # one open folder per level, as the agent
        try:
            names = os.listdir(fd)
        except OSError:
            res['skipped'] = True
            names = []
        for n in names:
            if depth == 0 and n == skip:
                continue
            visited[0] += 1
            if visited[0] > 100000:  # the walk's time bound, folders included, as the agent's
                res['truncated'] = True
                return False
            n = os.fsencode(n)
            try:
                st = os.stat(n, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            r = rel + b'/' + n if rel else n
            if (st.st_mode & 0o170000) == 0o040000:
                if depth + 1 >= 64:
                    res['skipped'] = True
                    continue
                try:
                    cfd = os.open(n, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:
                    res['skipped'] = True
                    continue
                try:
                    if not walk(cfd, r, depth + 1):
                        return False
                finally:
                    os.close(cfd)
                continue
            if len(res['entries']) >= mx or size[0] > 32 << 20:
                res['truncated'] = True
                return False
            res['entries'].append([base64.b64encode(r).decode(), st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                   st.st_mode])
            size[0] += len(r) + 64
        return True

    try:
        walk(top, b'', 0)
    finally:
        os.close(top)
    return res

def get(path, mx):
    """A regular file's first mx bytes, following no symlink, opening nothing that can block."""
    res = {'err': 0, 'mode': 0, 'size': 0, 'data': ''}
    try:
        dfd, base = open_parent(path, False)
    except OSError as x:
        res['err'] = x.errno or errno.EIO
        return res
    try:
        st = os.stat(base, dir_fd=dfd, follow_symlinks=False)
        if (st.st_mode & 0o170000) == 0o120000:
            res['err'] = errno.ELOOP
            return res
        res['mode'], res['size'] = st.st_mode, st.st_size
        if (st.st_mode & 0o170000) != 0o100000:
            return res
        fd = os.open(base, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
        try:
            st = os.fstat(fd)
            res['mode'], res['size'] = st.st_mode, st.st_size
            if (st.st_mode & 0o170000) == 0o100000:
                want, b = min(st.st_size, mx), []
                while want > 0:
                    c = os.read(fd, min(want, 1 << 20))
                    if not c:
                        break
                    b.append(c)
                    want -= len(c)
                res['data'] = base64.b64encode(b''.join(b)).decode()
        finally:
            os.close(fd)
    except OSError as x:
        res = {'err': x.errno or errno.EIO, 'mode': 0, 'size': 0, 'data': ''}
    finally:
        os.close(dfd)
    return res

def changed_since(root, since):
    """Whether anything under root has a ctime at or after since (as the server's look would
    find: the same bounds); True when the walk was cut short, so that the server looks itself."""
    res = listing(root, 1000)
    return res['truncated'] or res['skipped'] or any(e[3] >= since for e in res['entries'])

def memory_cgroup():
    """The folder of this process's memory cgroup (v1 or v2), or None."""
    try:
        with open('/proc/self/cgroup') as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for l in lines:
        n, ctl, path = l.split(':', 2)
        if 'memory' in ctl.split(','):
            return '/sys/fs/cgroup/memory' + path.rstrip('/')
    for l in lines:
        if l.startswith('0::'):
            return '/sys/fs/cgroup' + l[3:].rstrip('/')
    return None

def oom_kills(cg):
    for name in ('memory.events', 'memory.oom_control'):
        try:
            with open(os.path.join(cg, name)) as f:
                for l in f:
                    if l.startswith('oom_kill '):
                        return int(l.split()[1])
        except (OSError, ValueError, TypeError):
            pass
    return None

def memory_limit(cg):
    for name in ('memory.max', 'memory.limit_in_bytes'):
        try:
            with open(os.path.join(cg, name)) as f:
                v = f.read().strip()
            if v != 'max' and int(v) < (1 << 60):
                return int(v)
        except (OSError, ValueError, TypeError):
            pass
    return 0

def descendants(me):
    kids = {}
    for p in os.listdir('/proc'):
        if p.isdigit():
            try:
                with open('/proc/%s/stat' % p, 'rb') as f:
                    s = f.read()
                kids.setdefault(int(s[s.rindex(b')') + 2:].split()[1]), []).append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [me]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out

EXITED = {}

def reap():
    try:
        while True:
            p, w = os.waitpid(-1, os.WNOHANG)
            if p <= 0:
                return
            EXITED[p] = w
    except ChildProcessError:
        pass

def wait_main(pid, block):
    if pid not in EXITED:
        try:
            p, w = os.waitpid(pid, 0 if block else os.WNOHANG)
            if p == pid:
                EXITED[pid] = w
        except ChildProcessError:
            EXITED.setdefault(pid, 0)
    return EXITED.get(pid)

def kill_tree(me, pgid):
    end = time.monotonic() + 3
    while time.monotonic() < end:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
        d = descendants(me)
        if not d:
            return
        for p in d:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        reap()
        time.sleep(0.01)

class Stream:
    def __init__(s, d, k, cap, smax, spill):
        s.k, s.cap, s.half, s.smax = k, cap, cap // 2, smax
        s.spill = spill and '%s.%s' % (spill, 'stdout' if k == 1 else 'stderr')
        s.total, s.head_len, s.tail = 0, 0, bytearray()
        s.head = open('%s/%d.head' % (d, k), 'wb', buffering=0)
        s.tailpath = '%s/%d.tail' % (d, k)
        s.sf, s.serr, s.swrote, s.scut, s.dirty = None, 0, 0, False, True

    def swrite(s, b):
        if s.swrote + len(b) > s.smax:
            b = b[:s.smax - s.swrote]
            s.scut = True
        try:
            s.sf.write(b)
            s.swrote += len(b)
        except OSError as x:
            s.serr = x.errno or 5

    def add(s, b):
        before = s.total
        s.total += len(b)
        if s.head_len < s.cap:
            h = b[:s.cap - s.head_len]
            s.head.write(h)
            s.head_len += len(h)
        s.tail += b
        if len(s.tail) > s.half:
            del s.tail[:len(s.tail) - s.half]
        s.dirty = True
        if not s.spill or s.total <= s.cap or s.serr:
            return
        if s.sf is None:
            try:
                s.sf = os.fdopen(create_fresh(s.spill, 0o644), 'wb')
                with open(s.head.name, 'rb') as f:
                    s.swrite(f.read())
                b = b[s.cap - before:] if before < s.cap else b
            except OSError as x:
                s.serr = x.errno or 5
                return
        s.swrite(b)

    def flush(s):
        if s.dirty:
            wfile(s.tailpath, b'%d\n' % (s.total - len(s.tail)) + bytes(s.tail))
            s.dirty = False

    def close(s):
        s.flush()
        s.head.close()
        if s.sf:
            try:
                s.sf.close()
            except OSError as x:
                s.serr = s.serr or x.errno or 5

def run(a):
    d, cap, smax, tmo, spill = a[0], int(a[1]), int(a[2]), int(a[3]) / 1000.0, a[4]
    fb, cwd, watch, nput = a[5] == '1', a[6], a[7], int(a[8])
    puts, a = a[9:9 + 3 * nput], a[9 + 3 * nput:]
    n = int(a[0])
    env, argv = a[1:1 + n], a[2 + n:]
    for i in range(0, len(puts), 3):
        try:
            put(puts[i], puts[i + 1], int(puts[i + 2], 8))
        except OSError as x:  # as the agent words it
            return {'error': 'writing a file into the sandbox: %s: %s' % (puts[i + 1], x.strerror)}
    cg = memory_cgroup()
    oom_before = oom_kills(cg) if cg else None
    me = os.getpid()
    try:
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass
    killed = []
    signal.signal(signal.SIGTERM, lambda *_: killed.append(1))
    envd = dict(x.split('=', 1) for x in env if '=' in x)
    prog = argv[0]
    found = '/' in prog and os.path.lexists(prog)
    if '/' not in prog:
        for p in envd.get('PATH', '/usr/bin:/bin').split(':'):
            if p and os.path.lexists(os.path.join(p, prog)):
                found, prog = True, os.path.join(p, prog)
                if os.access(prog, os.X_OK):
                    break
    # As the agent: /bin/sh when the program is not there at all (ENOENT), not when it is there
    # but cannot run.
    if fb and not found:
        prog, argv = '/bin/sh', ['/bin/sh'] + argv[1:]
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    streams = [Stream(d, 1, cap, smax, spill), Stream(d, 2, cap, smax, spill)]
    started_ns = time.clock_gettime_ns(5 if sys.platform.startswith('linux') else time.CLOCK_REALTIME)  # REALTIME_COARSE
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            nul = os.open('/dev/null', os.O_RDONLY)
            os.dup2(nul, 0)
            os.dup2(w1, 1)
            os.dup2(w2, 2)
            os.closerange(3, 65536)
            # Every signal at its default and none blocked: the code starts as if from a login,
            # not with what this runner or the toolbox daemon set.
            for sig in signal.valid_signals():
                try:
                    signal.signal(sig, signal.SIG_DFL)
                except (OSError, ValueError, RuntimeError):
                    pass
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.chdir(cwd)
            os.execve(prog, argv, envd)
        except OSError as x:
            os.write(2, ('sandbox-mcp: cannot run %s: %s\n' % (argv[0], x.strerror)).encode())
        os._exit(127)
    os.close(w1)
    os.close(w2)
    wfile(d + '/pid', b'%d\n' % me)
    wfile(d + '/alive', b'')
    fds = {r1: streams[0], r2: streams[1]}
    status, timed_out, give_up, last = None, False, None, 0.0
    while fds or status is None:
        for fd in select.select(list(fds), [], [], 0.05)[0]:
            b = os.read(fd, 65536)
            if b:
                fds[fd].add(b)
            else:
                os.close(fd)
                del fds[fd]
        now = time.monotonic()
        if now - last > 0.2:
            for s in streams:
                s.flush()
            wfile(d + '/alive', b'')  # the heartbeat poll reads: pids mean nothing across namespaces
            if os.path.exists(d + '/kill'):
                killed.append(1)
            last = now
        if status is None:
            reap()
            status = wait_main(pid, False)
            if status is None and (killed or now - start > tmo):
                timed_out = not killed
                kill_tree(me, pid)
                status = wait_main(pid, True)
            if status is not None:
                kill_tree(me, pid)  # the call is over: nothing it started may outlive it
                give_up = time.monotonic() + 2
        elif now > give_up:
            break  # a writer that could not be killed: stop waiting for end of file
    if status is None:
        status = wait_main(pid, True)
    for s in streams:
        s.close()
    code = (os.WEXITSTATUS(status) if os.WIFEXITED(status)
            else 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1)
    oom_after = oom_kills(cg) if cg and oom_before is not None else None
    oom = oom_after is not None and oom_after > oom_before
    return {'exit_code': code, 'timed_out': timed_out, 'killed': bool(killed),
            'bytes': [s.total for s in streams],
            'spilled': [bool(s.sf) and not s.serr for s in streams],
            'spill_errno': [s.serr for s in streams],
            'spill_cut': any(s.scut for s in streams),
            'oom_killed': oom, 'memory_limit': memory_limit(cg) if oom else 0, 'started_ns': started_ns,
            'changed': changed_since(watch, started_ns) if watch else None}

def chunk(d, k, off, size):
    try:
        with open('%s/%d.head' % (d, k), 'rb') as f:
            f.seek(off)
            b = f.read(size)
        if b:
            return off, b
        with open('%s/%d.tail' % (d, k), 'rb') as f:
            t0, b = f.read().split(b'\n', 1)
        t0 = int(t0)
        if t0 + len(b) > off:
            o = max(off, t0)
            return o, b[o - t0:o - t0 + size]
    except (OSError, ValueError):
        pass
    return off, b''

def poll(d, off1, off2, size):
    res = {'s': []}
    try:
        with open(d + '/status') as f:
            res['done'] = json.load(f)
    except (OSError, ValueError):
        res['done'] = None
        try:
            res['running'] = time.time() - os.stat(d + '/alive').st_mtime < 5
        except OSError:
            res['running'] = False
    for k, off in ((1, off1), (2, off2)):
        o, b = chunk(d, k, off, size)
        res['s'].append({'off': o, 'data': base64.b64encode(b).decode()})
    return res

def main():
    a = sys.argv[1:]
    if a[0] == 'run':
        try:
            os.makedirs(a[1], exist_ok=True)
            res = run(a[1:])
        except Exception as x:  # the runner's own failure: say so, never leave the client waiting
            res = {'error': 'the call runner failed: %s' % x}
        wfile(a[1] + '/status', json.dumps(res).encode())
    elif a[0] == 'poll':
        print(json.dumps(poll(a[1], int(a[2]), int(a[3]), int(a[4]))))
    elif a[0] == 'put':
        put(a[1], a[2], int(a[3], 8))
    elif a[0] == 'list':
        print(json.dumps(listing(a[1], int(a[2]), a[3] if len(a) > 3 else '')))
    elif a[0] == 'get':
        print(json.dumps(get(a[1], int(a[2]))))
    elif a[0] == 'getb':  # getb DIR MAX B64: the file DIR/<the bytes B64 holds>, as get
        print(json.dumps(get(a[1] + '/' + os.fsdecode(base64.b64decode(a[3])), int(a[2]))))
    elif a[0] == 'kill':
        open(a[1] + '/kill', 'w').close()  # seen within 0.2 s, whatever namespace we are in
        try:
            with open(a[1] + '/pid') as f:
                os.kill(int(f.read()), signal.SIGTERM)
        except (OSError, ValueError):
            pass

main()
