# sandbox-mcp's call runner inside a Daytona sandbox (runner.h says it all). Every request of
# the server runs
#     PYTHON -I -S -c BOOT MODE ARGS... <<'.sandbox-mcp.'
# where BOOT runs what the first line names: this program (sweep.py and this file, as one: the
# first request's line carries its gzip, base64url; procs answers with the code object the
# sandbox's Python made of it, and keeps it in /tmp, keep_code), or that kept code object,
# checked against the SHA-256 the server names (the code may rewrite it; a copy that is not it
# is never run: the server sends it again). Further lines are data (base64url: no '/' in them).
# A request with a SYNC word, and wsprep, send the workspace sync (wssync.py) as the second
# line, which the runner executes too. BOOT's names (_C, _b, _H, _P, _h, _k) are seen here.
#   go DIR WAIT_MS CHUNK KEEP SYNC CAP SPILL_MAX TIMEOUT_MS SPILL_PREFIX SH_FALLBACK CWD WATCH NPUT (SRC DST MODE)... NENV ENV... -- ARGV...
#       starts the call detached, in a keeper of its own session, then waits as poll does.
#       SRC "-" is the next data line, else a file uploaded into DIR (a fresh folder of an
#       unguessable name, call-...); the files are put in place as one batch (put_all): each
#       is written whole as a new file before any is renamed over its DST, so whatever the
#       code left at DST (a FIFO, a symlink) is replaced, never opened, and a batch that
#       fails (a full disk) changes nothing. WATCH (or ""): a folder; the result says
#       whether anything under it changed during the call. The folders of earlier calls
#       beside DIR (call-...) are removed first: their calls are over. A go sent again for
#       the same DIR does not start the call again: it waits as poll, from offsets 0.
#   poll DIR WAIT_MS CHUNK KEEP SYNC OFF1 OFF2 SWEPT
#       waits until the call ends, its keeper is gone, WAIT_MS pass, or output past the
#       offsets has come and 0.25 s passed; sweeps when the call has ended (SWEPT 0); prints
#       one JSON line: {"done": status or null, "s": [{"off", "data"}, x2], "sweep": ...,
#       "ws": what the call changed in the workspace, with the sweep, unless SYNC is "-"}
#   kill DIR WAIT_MS CHUNK KEEP SYNC OFF1 OFF2
#       asks the keeper to kill the call (a file, and SIGTERM), then as poll; sweeps always
#   SYNC is "-" or GEN:MAXN:MAXB:INLINE:MAXRM:ROOT:STATE (wssync.py's ws_sync)
#   bgq, bgin, bgsig           background processes (SH_FALLBACK's bit 2): runner.h says it all
#   procs                      prints the sandbox's processes: the baseline a sweep spares, then
#                              HASH B64: this program's code object (SHA-256, zlib base64url)
#   wsprep ROOT STATE SRC      after a --workspace folder's files were uploaded into ROOT: its
#                              folders and modes from the manifest SRC ("-": the data line),
#                              and the first listing (wssync.py's ws_prep)
#   put SRC DST MODE           puts SRC ("-": the data line) in place as DST (see go)
#   list DIR MAX [SKIP]        prints one JSON line: what lies under DIR but in DIR/SKIP (folders
#                              walked to 64 levels, no symlink followed), as the agent's AG_LIST
#   get PATH MAX               prints one JSON line: PATH's first MAX bytes, as the agent's AG_GET
#   getb DIR MAX B64           the same for DIR/NAME, NAME (bytes, not UTF-8) given as base64
# The keeper is a child subreaper: every process of the call, setsid ones included, stays its
# descendant and is killed when the call ends, by exit, timeout or kill.
# A full disk (ENOSPC, EDQUOT): the runner's own files (a call's folder, its output, its status)
# live on the sandbox's disk, which the code can fill. A reserve file beside the calls' folders
# (RESERVE bytes, made while there is room) is given up the first time the runner finds no
# room for them, so that the call that frees space (rm) still runs; past that a call's folder
# goes to /dev/shm (alt: memory, a file system of its own in a container); a call whose folder
# cannot be made anywhere is answered with FULL, and the sandbox stays as it is.
import binascii, errno, marshal, os, select, sys, time, zlib

# Not json, base64 nor signal: importing them (re, enum) took every request more time than the
# rest of its start. Their C parts, which they call, do the same work here.
try:
    import _signal as signal
    signal.valid_signals
except (ImportError, AttributeError):
    import signal

def b64(b):
    """base64.b64encode(b).decode()"""
    return binascii.b2a_base64(b, newline=False).decode()

def unb64(s, url=False):
    """base64.b64decode(s), or urlsafe_b64decode with url."""
    if url:
        s = (s.encode() if isinstance(s, str) else s).translate(bytes.maketrans(b'-_', b'+/'))
    return binascii.a2b_base64(s)

try:
    import _json

    class _JsonCtx:  # what json.decoder.JSONDecoder gives its C scanner
        strict, object_hook, object_pairs_hook = True, None, None
        parse_float, parse_int, parse_constant, memo = float, int, float, {}

    _SCAN, _ESC = _json.make_scanner(_JsonCtx()), _json.encode_basestring_ascii
except (ImportError, AttributeError, TypeError):
    _SCAN = None

def jdumps(o):
    """json.dumps(o) (its defaults) for what the runner says: dict, list, tuple, str, int, bool,
    None, float."""
    if _SCAN is None:
        import json
        return json.dumps(o)
    if isinstance(o, str):
        return _ESC(o)
    if o is None:
        return 'null'
    if o is True:
        return 'true'
    if o is False:
        return 'false'
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        return (float.__repr__(o) if o == o and o not in (float('inf'), float('-inf'))
                else 'NaN' if o != o else 'Infinity' if o > 0 else '-Infinity')
    if isinstance(o, dict):
        return '{' + ', '.join(_ESC(k if isinstance(k, str) else jdumps(k).strip('"')) + ': ' + jdumps(v)
                               for k, v in o.items()) + '}'
    if isinstance(o, (list, tuple)):
        return '[' + ', '.join(jdumps(v) for v in o) + ']'
    raise TypeError('not JSON: %s' % type(o).__name__)

def jloads(s):
    """json.loads(s); ValueError when s is not one JSON value."""
    if _SCAN is None:
        import json
        return json.loads(s)
    if isinstance(s, bytes):
        s = s.decode('utf-8')
    s = s.strip(' \t\n\r')
    try:
        o, end = _SCAN(s, 0)
    except StopIteration:
        raise ValueError('not JSON') from None
    if end != len(s):
        raise ValueError('not one JSON value')
    return o

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
FULL = ('the sandbox\'s disk is full (No space left on device): not even the call runner\'s own files fit, '
        'so the call could not start; call cleanup_sandbox to go on with a new sandbox and an empty workspace')
RESERVE = 256 << 10
RUN = ['']  # the folder that holds the calls' folders and the reserve ('' until a call names it)

def write_all(fd, b):
    v = memoryview(b)
    while v:
        v = v[os.write(fd, v):]

def wfile(path, data):
    """Writes path whole or not at all (a reader never sees half of it)."""
    tmp = '%s.%d.tmp' % (path, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

def roomy(fn, *a):
    """fn(*a); when the disk is full, once more after giving up the reserve."""
    try:
        return fn(*a)
    except OSError as x:
        if x.errno not in FULL_ERRNOS or not RUN[0]:
            raise
        try:
            os.unlink(RUN[0] + '/reserve')
        except OSError:
            raise x
        return fn(*a)

def keep_reserve():
    """Makes the reserve again when it is gone and there is room (real bytes: no sparse file)."""
    r = RUN[0] and RUN[0] + '/reserve'
    if not r or os.path.exists(r):
        return
    try:
        wfile(r, bytes(RESERVE))
    except OSError:
        pass

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

def stage(src, dst, mode):
    """Writes src (the bytes, or the path of an uploaded file) whole into a new file beside dst
    (open_parent: no symlink on the way), every write checked: (folder fd, temporary name,
    last name of dst). Nothing is left when it fails."""
    dfd, base = open_parent(dst)
    try:
        try:
            st = os.stat(base, dir_fd=dfd, follow_symlinks=False)
            if (st.st_mode & 0o170000) == 0o040000:  # rename cannot replace a folder: said now
                raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), dst)
        except FileNotFoundError:
            pass
        SEQ[0] += 1
        tmp = '.sandbox-runner-%d-%d.tmp' % (os.getpid(), SEQ[0])
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     mode, dir_fd=dfd)
        try:
            try:
                os.fchmod(fd, mode)
                if isinstance(src, bytes):
                    write_all(fd, src)
                else:
                    with open(src, 'rb') as f:
                        while True:
                            b = f.read(1 << 20)
                            if not b:
                                break
                            write_all(fd, b)
            finally:
                os.close(fd)
        except BaseException:
            os.unlink(tmp, dir_fd=dfd)
            raise
        return dfd, tmp, base
    except BaseException:
        os.close(dfd)
        raise

def existing_part(path):
    """How much of the folder that holds path exists now: the length of its longest leading
    part of whole names that opens as a folder (no symlink followed). What a put makes lies
    past it."""
    p = path
    while True:
        i = p.rfind('/')
        if i <= 0:
            return len(path)
        try:
            fd, _ = open_parent(p, False)
            os.close(fd)
            return i
        except FileNotFoundError:
            p = p[:i]
        except OSError:
            return len(path)

def unmake_folders(path, keep):
    """Removes the folders of path's folder past its first keep bytes, deepest first, while
    they are empty: what a failed put made on its way."""
    p = path
    while True:
        i = p.rfind('/')
        if i <= keep:
            return
        p = p[:i]
        try:
            dfd, base = open_parent(p, False)
        except OSError:
            return
        try:
            os.rmdir(base, dir_fd=dfd)
        except OSError:
            return
        finally:
            os.close(dfd)

def put_all(files):
    """Puts every (src, dst, mode) of files in place, all or none: each is written whole under
    a temporary name (stage) before any is renamed over its dst; on a failure the temporary
    files and the folders made for them are removed, and no dst has changed. None, or (dst,
    OSError) of the one that failed."""
    staged, failed, made = [], None, []
    try:
        for src, dst, mode in files:
            made.append((dst, existing_part(dst)))
            try:
                staged.append(stage(src, dst, mode) + (dst,))
            except OSError as x:
                failed = (dst, x)
                return failed
        for i, (dfd, tmp, base, dst) in enumerate(staged):
            try:
                os.rename(tmp, base, src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError as x:  # not expected: every file is written, no folder in the way
                failed = (dst, x)
                return failed
            staged[i] = (dfd, None, base, dst)
        return None
    finally:
        for dfd, tmp, base, dst in staged:
            if tmp:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
            os.close(dfd)
        if failed:
            for dst, keep in reversed(made):
                if keep < len(dst):
                    unmake_folders(dst, keep)

def put(src, dst, mode):
    failed = put_all([(src, dst, mode)])
    if failed:
        raise failed[1]

# Milliseconds each folder of a listing waits before it is read: 0 but in a test of a slow disk
# (the test server's "walk_delay_ms" sets it in the toolbox's environment, as it sets NO_SWEEP).
try:
    WALK_DELAY = max(0, int(os.environ.get('SANDBOX_MCP_WALK_DELAY_MS') or 0)) / 1000.0
except ValueError:  # not a number: no delay, and the runner serves on
    WALK_DELAY = 0.0

def listing(root, mx, skip='', until=None):
    """Every name under root but folders, which are walked (64 levels, no symlink followed).
    until: a time.monotonic() past which the walk stops, cut short as at 100000 names."""
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
        if WALK_DELAY:
            time.sleep(WALK_DELAY)
        try:
            names = os.listdir(fd)
        except OSError:
            res['skipped'] = True
            names = []
        for n in names:
            if depth == 0 and n == skip:
                continue
            visited[0] += 1
            if visited[0] > 100000 or (until is not None and time.monotonic() > until):
                res['truncated'] = True  # the walk's bounds, folders included (100000: the agent's)
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
            res['entries'].append([b64(r), st.st_size, st.st_mtime_ns, st.st_ctime_ns,
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
                res['data'] = b64(b''.join(b))
        finally:
            os.close(fd)
    except OSError as x:
        res = {'err': x.errno or errno.EIO, 'mode': 0, 'size': 0, 'data': ''}
    finally:
        os.close(dfd)
    return res

OUT_LIST, OUT_FILES, OUT_FILE_MAX = 1000, 20, 65536  # daytona.c's OUT_* say the same
# The longest the walk of outputs() may take: it comes after the call has ended, in the request
# that brings the end, which must be answered within its execute's timeout (dtcall.c's
# EXEC_SLACK_S) whatever the size of the folder or the load of the sandbox.
OUT_WALK_S = 5.0

def changed(res, since):
    """Whether anything in the listing res has a ctime at or after since; True when the walk was
    cut short (by a bound): the server then takes that listing (it comes as "out") as partial,
    and says so."""
    return res['truncated'] or res['skipped'] or any(e[3] >= since for e in res['entries'])

def outputs(root, since):
    """What the server reads right after a call, as the agent's AG_OUTPUTS: root's listing
    (OUT_LIST names; walked for OUT_WALK_S at most, then cut short as at 100000 names), and in
    'files' what get would answer for the first OUT_FILES (in byte order) of the names there
    changed since since, but regular files over OUT_FILE_MAX bytes."""
    res = listing(root, OUT_LIST, '', time.monotonic() + OUT_WALK_S)
    picks = sorted(unb64(e[0]) for e in res['entries']
                   if e[3] >= since and ((e[4] & 0o170000) != 0o100000 or e[1] <= OUT_FILE_MAX))[:OUT_FILES]
    res['files'] = [[b64(p), get(root + '/' + os.fsdecode(p), OUT_FILE_MAX)] for p in picks]
    return res

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
KILLED = []  # the keeper was asked to kill the call (SIGTERM)

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
        s.headpath = '%s/%d.head' % (d, k)
        s.head = roomy(os.open, s.headpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        s.head_cut = False  # the disk had no room for the head: what is past it counts as cut
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
        if s.head_len < s.cap and not s.head_cut:
            h = b[:s.cap - s.head_len]
            try:
                roomy(s.head_write, h)
            except OSError:
                s.head_cut = True
        s.tail += b
        if len(s.tail) > s.half:
            del s.tail[:len(s.tail) - s.half]
        s.dirty = True
        if not s.spill or s.total <= s.cap or s.serr:
            return
        if s.sf is None:
            try:
                s.sf = os.fdopen(create_fresh(s.spill, 0o644), 'wb')
                with open(s.headpath, 'rb') as f:
                    s.swrite(f.read())
                b = b[s.cap - before:] if before < s.cap else b
            except OSError as x:
                s.serr = x.errno or 5
                return
        s.swrite(b)

    def head_write(s, h):
        while h:  # a short write counts what it wrote, then the next one says why it stops
            n = os.write(s.head, h)
            s.head_len += n
            h = h[n:]

    def flush(s):
        if s.dirty:
            try:
                roomy(wfile, s.tailpath, b'%d\n' % (s.total - len(s.tail)) + bytes(s.tail))
                s.dirty = False
            except OSError as x:
                if x.errno not in FULL_ERRNOS:
                    raise

    def close(s):
        s.flush()
        os.close(s.head)
        if s.sf:
            try:
                s.sf.close()
            except OSError as x:
                s.serr = s.serr or x.errno or 5

def subreaper():
    """prctl(PR_SET_CHILD_SUBREAPER, 1): through _ctypes' own calls, as importing ctypes takes the
    call's start several ms; through ctypes where they are not."""
    try:
        import _ctypes
        if _ctypes.call_function(_ctypes.dlsym(_ctypes.dlopen(None, os.RTLD_NOW), 'prctl'), (36, 1, 0, 0, 0)) == 0:
            return
    except Exception:
        pass
    try:
        import ctypes
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
    except Exception:
        pass

def run(d, a, data):
    """The call (go's arguments from CAP on), run by the keeper; data: the files sent inline,
    in order. Its status."""
    cap, smax, tmo, spill = int(a[0]), int(a[1]), int(a[2]) / 1000.0, a[3]
    fb, bg, cwd, watch, nput = int(a[4]) & 1, int(a[4]) & 2, a[5], a[6], int(a[7])
    puts, a = a[8:8 + 3 * nput], a[8 + 3 * nput:]
    n = int(a[0])
    env, argv = a[1:1 + n], a[2 + n:]
    data = iter(data)
    files = [(next(data) if puts[i] == '-' else puts[i], puts[i + 1], int(puts[i + 2], 8))
             for i in range(0, len(puts), 3)]
    failed = put_all(files)
    for src, dst, mode in files:  # an uploaded copy takes room on the disk the call may need
        if not isinstance(src, bytes):
            try:
                os.unlink(src)
            except OSError:
                pass
    if failed:  # as the agent words it
        return {'error': 'writing a file into the sandbox: %s: %s' % (failed[0], failed[1].strerror)}
    cg = memory_cgroup()
    oom_before = oom_kills(cg) if cg else None
    me = os.getpid()
    subreaper()
    killed = KILLED
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
    rin = win = fin = None
    if bg:  # its stdin: a pipe fed from the FIFO d/in (bgin), closed once d/inclose appears
        rin, win = os.pipe()
        os.set_blocking(win, False)
        os.mkfifo(d + '/in', 0o600)
        fin = os.open(d + '/in', os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    pending = bytearray()
    streams = [Stream(d, 1, cap, smax, spill), Stream(d, 2, cap, smax, spill)]
    if os.path.exists(d + '/kill'):
        return {'error': 'the call was cancelled before it started'}
    started_ns = time.clock_gettime_ns(5 if sys.platform.startswith('linux') else time.CLOCK_REALTIME)  # REALTIME_COARSE
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            nul = os.open('/dev/null', os.O_RDONLY) if rin is None else rin
            os.dup2(nul, 0)
            if bg:
                confine()
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
    if rin is not None:
        os.close(rin)
    fds = {r1: streams[0], r2: streams[1]}
    status, timed_out, give_up, last, streams_end = None, False, None, 0.0, None
    while fds or status is None:
        # Both streams at their end: the main process is most likely ending (its end of file
        # comes just before it can be reaped): look again in 2 ms for 0.1 s, not in 50 ms.
        quick = not fds and time.monotonic() - (streams_end or 0) < 0.1
        rd = list(fds) + ([fin] if fin is not None and len(pending) < 65536 else [])
        wr = [win] if win is not None and pending else []
        r_, w_ = select.select(rd, wr, [], 0.002 if quick else 0.05)[:2]
        if w_:
            try:
                del pending[:os.write(win, pending)]
            except BlockingIOError:
                pass
            except OSError:  # it closed its end: what it was sent goes nowhere
                pending.clear()
                os.close(win)
                win = None
        if fin is not None and fin in r_:
            try:
                pending += os.read(fin, 65536)
            except BlockingIOError:
                pass
        if bg:
            win = bg_control(d, pid, win, fin, pending)
        for fd in r_:
            if fd == fin:
                continue
            b = os.read(fd, 65536)
            if b:
                fds[fd].add(b)
            else:
                os.close(fd)
                del fds[fd]
                streams_end = time.monotonic()
        now = time.monotonic()
        if now - last > 0.2:
            for s in streams:
                s.flush()
            if os.path.exists(d + '/kill'):  # works where a signal cannot reach (another PID namespace)
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
            'watch': watch or None}  # 'changed' comes with the sweep (wait_end): no walk here

def confine():
    """Puts the calling process (a background process, before its exec) in a Landlock domain of
    its own, as the agent does: it can then neither trace (read /proc/PID/environ, mem) nor
    signal what later calls start, which lie outside it. Raises OSError when it cannot."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0):  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), 'no_new_privs')
    attr = (ctypes.c_uint64 * 3)(0, 0, 3)  # no access handled; scoped: abstract unix sockets, signals
    fd = libc.syscall(444, attr, 24, 0)  # landlock_create_ruleset
    if fd < 0 or libc.syscall(446, fd, 0):  # landlock_restrict_self
        raise OSError(ctypes.get_errno(), 'landlock')
    os.close(fd)

NO_LANDLOCK = ('background processes need Landlock with scopes (Linux 6.12 or later, Landlock enabled) to keep '
               'them from later calls; this sandbox has none')

def landlock_abi():
    try:
        import ctypes
        return ctypes.CDLL(None).syscall(444, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    except Exception:
        return -1

def bg_control(d, pid, win, fin, pending):
    """A background keeper's requests, as files of its folder: sig (a signal for the process
    group, from bgsig) and inclose (close its stdin once what was sent is in). Its stdin's
    write end, or None once closed."""
    try:
        with ropen(d + '/sig') as f:
            sig = int(f.read(16).strip() or b'0')
        os.unlink(d + '/sig')
        if 0 < sig < 32:
            try:
                os.killpg(pid, sig)
            except OSError:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
    except (OSError, ValueError):
        pass
    if win is not None and os.path.exists(d + '/inclose'):
        try:
            pending += os.read(fin, 1 << 20)
        except OSError:
            pass
        if not pending:
            os.close(win)
            win = None
    return win

def ropen(path):
    """A file of a call's folder, which the code can reach too: opened following no symlink and
    never blocking (a FIFO planted there), a regular file or OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if (os.fstat(fd).st_mode & 0o170000) != 0o100000:
        os.close(fd)
        raise OSError(errno.EINVAL, 'not a regular file', path)
    return os.fdopen(fd, 'rb')

def chunk(d, k, off, size, spill=''):
    try:
        with ropen('%s/%d.head' % (d, k)) as f:
            f.seek(off)
            b = f.read(size)
        if b:
            return off, b
        if spill:  # past the head, the spill file holds the stream from its start (up to SPILL_MAX)
            r = get_at(spill, off, size)
            if r:
                return off, r
        with ropen('%s/%d.tail' % (d, k)) as f:
            t0, b = f.read().split(b'\n', 1)
        t0 = int(t0)
        if t0 + len(b) > off:
            o = max(off, t0)
            return o, b[o - t0:o - t0 + size]
    except (OSError, ValueError):
        pass
    return off, b''

def get_at(path, off, size):
    """size bytes at off of the regular file path, following no symlink, opening nothing that
    can block; b'' when there is none."""
    try:
        dfd, base = open_parent(path, False)
    except OSError:
        return b''
    try:
        fd = os.open(base, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
        try:
            if (os.fstat(fd).st_mode & 0o170000) != 0o100000:
                return b''
            return os.pread(fd, size, off)
        finally:
            os.close(fd)
    except OSError:
        return b''
    finally:
        os.close(dfd)

def status(d):
    try:
        with ropen(d + '/status') as f:
            return jloads(f.read())
    except (OSError, ValueError):
        return None

def proc_state(pid):
    """(state, starttime) of a process, or None when there is none of that pid."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            s = f.read()
        r = s[s.rindex(b')') + 2:].split()
        return r[0], r[19].decode()
    except (OSError, ValueError, IndexError):
        return None

def record(path):
    """(pid, starttime) of the process recorded in path, or None."""
    try:
        with open(path) as f:
            pid, start = f.read().split()
        return int(pid), start
    except (OSError, ValueError):
        return None

def record_me(path):
    roomy(wfile, path, ('%d %s' % (os.getpid(), proc_state(os.getpid())[1])).encode())

def alive(rec):
    """Whether the recorded process still runs: the same start time (a pid can be reused), not
    a zombie."""
    st = rec and proc_state(rec[0])
    return bool(st) and st[1] == rec[1] and st[0] not in (b'Z', b'X')

def take_over(d):
    """Records this process as the call's waiter and kills the one before: the server sends one
    request of a call at a time, so an earlier one still here was abandoned (its request was
    cancelled), and it must not sweep, which would kill this one, when the call ends."""
    old = record(d + '/waiter')
    if old and old[0] != os.getpid() and alive(old):
        try:
            os.kill(old[0], signal.SIGKILL)
        except OSError:
            pass
    record_me(d + '/waiter')

def out_end(d, k):
    """How far stream k's output has come, as its files show."""
    try:
        n = os.stat('%s/%d.head' % (d, k)).st_size
    except OSError:
        return 0
    try:
        with ropen('%s/%d.tail' % (d, k)) as f:
            line = f.readline(32)
            return max(n, int(line) + os.fstat(f.fileno()).st_size - len(line))
    except (OSError, ValueError):
        return n

GONE = ('the call runner in the sandbox ended before the call did: the call\'s code may have killed it '
        '(it runs as the same user)')

def full_hint(d):
    """Why a keeper may have ended without its status: no room left to write it."""
    try:
        st = os.statvfs(d)
        if st.f_bavail == 0:
            return ('; the sandbox\'s disk is full (No space left on device): the workspace is full: remove files '
                    'with execute_bash_commands (rm), or call cleanup_sandbox')
    except OSError:
        pass
    return ''

def wait_end(d, wait, size, keep, sync, offs, swept, child=None, stop=False):
    """Waits until the call has ended, its keeper is gone, wait seconds pass, or output past offs
    has come and 0.25 s passed (at once when a chunk is full); then the answer: the end (after a
    sweep, unless swept), the output past offs. child: go's (pipe, pid) of the keeper, whose
    end of file is its end; else the keeper is found by its record. stop (kill): the sweep
    comes whatever the keeper did."""
    t0, pipe = time.monotonic(), child and child[0]
    while True:
        done, el = status(d), time.monotonic() - t0
        if done is None:
            if child:
                gone = pipe is None
            else:
                k = record(d + '/keeper')
                gone = not alive(k) if k else el > 0.5  # none: go never started one
            if gone:
                done = status(d) or {'error': GONE + full_hint(d)}  # again: a keeper writes its status, then ends
        if done is not None or el >= wait:
            break
        avail = max(out_end(d, k) - off for k, off in ((1, offs[0]), (2, offs[1])))
        if avail >= size or (avail > 0 and el >= 0.25):
            break
        if pipe is not None:
            if select.select([pipe], [], [], 0.02)[0]:  # end of file: the keeper has ended
                os.waitpid(child[1], 0)
                pipe = None
        else:
            time.sleep(0.02)
    if done is None and stop:
        done = {'error': 'the call did not stop within %d ms of being asked to; its processes were killed'
                % (wait * 1000)}
    res = {'done': done, 's': []}
    for k, off in ((1, offs[0]), (2, offs[1])):
        o, b = chunk(d, k, off, size)
        res['s'].append({'off': o, 'data': b64(b)})
    if done is not None and (stop or not swept):
        ok, msg = sweep(keep)
        res['sweep'] = {'ok': ok, 'msg': msg}
        keep_reserve()
        if isinstance(done, dict) and done.get('watch') and isinstance(done.get('started_ns'), int):
            try:  # nothing of the call runs any more: what the server reads next, read now
                res['out'] = outputs(done['watch'], done['started_ns'])
                done['changed'] = changed(res['out'], done['started_ns'])
            except Exception:
                pass
        if sync != '-':  # nothing of the call runs any more: what it left is what it changed
            try:
                res['ws'] = ws_sync(sync)
            except Exception as x:
                res['ws'] = {'error': '%s: %s' % (type(x).__name__, x)}
    return res

def keeper(d, w, a, data):
    """go's child, which runs the call: in a session of its own, so that nothing the toolbox does
    to the execute's process group reaches it, and holding none of the execute's descriptors
    (its answer waits for them all to close) but w, whose end of file tells go it has ended."""
    try:
        signal.signal(signal.SIGTERM, lambda *_: KILLED.append(1))
        os.setsid()
        nul = os.open('/dev/null', os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(nul, fd)
        os.closerange(3, w)
        os.closerange(w + 1, 1 << 16)
        record_me(d + '/keeper')
        res = run(d, a, data)
    except BaseException as x:  # the runner's own failure: say so, never leave the client waiting
        res = {'error': 'the call runner failed: %s' % x}
    try:
        roomy(wfile, d + '/status', jdumps(res).encode())
    finally:
        os._exit(0)

def data_line():
    return unb64(sys.stdin.buffer.readline().strip(), True)

def clear_old(d):
    """Removes the folders of earlier calls (over: the server runs one call at a time, and
    starts the next once the last is swept), which would fill the disk call after call."""
    run, me = os.path.split(d)
    try:
        names = os.listdir(run)
    except OSError:
        return
    for n in names:
        if n.startswith('call-') and n != me:
            p = os.path.join(run, n)
            try:
                for f in os.listdir(p):
                    os.unlink(os.path.join(p, f))
                os.rmdir(p)
            except OSError:
                pass

def alt(d):
    """Where a call's folder goes when the disk has no room for it: /dev/shm (memory, a file
    system of its own in a container), in a folder of this user's."""
    return '/dev/shm/.sandbox-mcp-%d/%s' % (os.getuid(), os.path.basename(d))

def locate(d):
    """The folder the call's go made: d, or its place in /dev/shm."""
    for c in (d, alt(d)):
        if os.path.exists(c + '/waiter') or os.path.exists(c + '/keeper'):
            return c
    return d

def prepare(d, shm):
    if shm:
        p = os.path.dirname(d)
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(p)
        if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != os.getuid():
            raise OSError(errno.EPERM, 'not a folder of this user\'s', p)
    roomy(os.makedirs, d, 0o700, True)
    take_over(d)

def go(a):
    d0, wait, size, keep = a[0], int(a[1]) / 1000.0, int(a[2]), a[3]
    RUN[0] = os.path.dirname(d0)
    nput = int(a[12])
    data = [data_line() for i in range(nput) if a[13 + 3 * i] == '-']
    if os.path.exists(d0 + '/kill') or os.path.exists(alt(d0) + '/kill'):  # came after the kill that cancelled it
        return {'done': {'error': 'the call was cancelled before it started'}, 's': []}
    d = locate(d0)
    if os.path.exists(d + '/waiter'):
        # This call's go came before (an HTTP client may send a request again when its
        # connection dies before the answer): the call is not started twice; wait as poll.
        take_over(d)
        return wait_end(d, wait, size, keep, a[4], (0, 0), False)
    clear_old(d0)
    clear_old(alt(d0))
    if a[4] != '-':
        ws_clear_out(a[4])
    d = None
    for c in (d0, alt(d0)):
        try:
            prepare(c, c != d0)
            d = c
            break
        except OSError as x:
            if c == d0 and x.errno not in FULL_ERRNOS:
                raise
    if d is None:
        # Nothing of the call started; the sweep's word tells the server so.
        ok, msg = sweep(keep)
        return {'done': {'error': FULL}, 's': [], 'sweep': {'ok': ok, 'msg': msg}}
    if d != d0:
        try:
            os.rmdir(d0)
        except OSError:
            pass
    keep_reserve()
    if int(a[9]) & 2 and landlock_abi() < 6:
        ok, msg = sweep(keep)
        return {'done': {'error': NO_LANDLOCK}, 's': [], 'sweep': {'ok': ok, 'msg': msg}}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        keeper(d, w, a[5:], data)
    os.close(w)
    st = proc_state(pid)  # the keeper, as this process knows it (its record is the code's to rewrite)
    res = wait_end(d, wait, size, keep, a[4], (0, 0), False, (r, pid))
    if st:
        res['keeper'] = '%d:%s' % (pid, st[1])
    return res

def kill(a):
    d = locate(a[0])
    RUN[0] = os.path.dirname(a[0])
    try:
        roomy(os.makedirs, d, 0o700, True)
        take_over(d)
        roomy(lambda: open(d + '/kill', 'w').close())  # seen within 0.2 s, whatever PID namespace
    except OSError as x:  # the keeper is in; SIGTERM below still reaches it, and the sweep all
        if x.errno not in FULL_ERRNOS:
            raise
    k = record(d + '/keeper')
    if k and alive(k):
        try:
            os.kill(k[0], signal.SIGTERM)
        except OSError:
            pass
    return wait_end(d, int(a[1]) / 1000.0, int(a[2]), a[3], a[4], (int(a[5]), int(a[6])), False, stop=True)

def bg_alive(keeper):
    """Whether the keeper the server recorded (PID:START) still runs."""
    try:
        pid, start = keeper.split(':')
        return alive((int(pid), start)), int(pid)
    except ValueError:
        return False, 0

def bgq(a):
    """bgq SIZE N (DIR KEEPER OFF1 OFF2 SPILL)...: the state of background processes and up to
    SIZE bytes of each stream from its offset."""
    size, n, out = int(a[0]), int(a[1]), []
    for i in range(n):
        d, keeper, o1, o2, spill = a[2 + 5 * i:7 + 5 * i]
        run_ = bg_alive(keeper)[0]
        done = status(d)
        if done is None and not run_:
            done = status(d) or {'error': GONE + full_hint(d)}
        r = {'done': done, 'end': [out_end(d, 1), out_end(d, 2)], 's': []}
        for k, off in ((1, int(o1)), (2, int(o2))):
            o, b = chunk(d, k, off, size, spill and '%s.%s' % (spill, 'stdout' if k == 1 else 'stderr')) if size else (off, b'')
            r['s'].append({'off': o, 'data': b64(b)})
        out.append(r)
    return out

def bgin(a):
    """bgin DIR KEEPER CLOSE, the bytes as the data line: writes what the FIFO takes now."""
    d, data, n = a[0], data_line(), 0
    if not bg_alive(a[1])[0]:
        return {'error': 'it has ended'}
    if os.path.exists(d + '/inclose'):
        return {'error': 'its input is closed'}
    if data:
        fd = os.open(d + '/in', os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if (os.fstat(fd).st_mode & 0o170000) != 0o010000:
                return {'error': 'its input is not the FIFO it was'}
            v = memoryview(data)
            while n < len(data):
                try:
                    n += os.write(fd, v[n:])
                except (BlockingIOError, BrokenPipeError):
                    break
        finally:
            os.close(fd)
    if a[2] == '1':
        open(d + '/inclose', 'w').close()
    return {'written': n}

def bgsig(a):
    """bgsig DIR KEEPER SIG: the keeper sends SIG to the process group within 50 ms; a KILL it
    does not take within a second (a keeper stopped by the code) is sent to the keeper's whole
    tree here."""
    d, sig = a[0], int(a[2])
    ok, pid = bg_alive(a[1])
    if not ok:
        return {'error': 'it has ended'}
    wfile(d + '/sig', b'%d' % sig)
    end = time.monotonic() + 1
    while time.monotonic() < end and os.path.exists(d + '/sig'):
        time.sleep(0.01)
    if os.path.exists(d + '/sig') and sig == signal.SIGKILL:
        for p in descendants(pid) + [pid]:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    return {'ok': True}

def poll(a):
    d = locate(a[0])
    RUN[0] = os.path.dirname(a[0])
    try:
        take_over(d)
    except OSError as x:  # only an abandoned waiter goes on: the next request ends it
        if x.errno not in FULL_ERRNOS:
            raise
    return wait_end(d, int(a[1]) / 1000.0, int(a[2]), a[3], a[4], (int(a[5]), int(a[6])), a[7] == '1')

def keep_code(hx, m):
    """Keeps the code object m (hx: its SHA-256) where the boot of the next requests looks for it,
    as a new file renamed in place. The call's code may rewrite or remove it (it runs as the same
    user): the boot runs it only when its SHA-256 is the one the server names, else asks for it
    again. Nothing when it cannot (a full disk, a folder in the way)."""
    p = _P + hx
    tmp = '%s.%d.tmp' % (p, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, m)
        finally:
            os.close(fd)
        os.rename(tmp, p)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass

def main():
    a = sys.argv[1:]
    if _k == b'!':  # the server sent the code object: the one kept was gone or not it
        keep_code(_H, _b)
    if a[0] == 'wsprep' or (a[0] in ('go', 'poll', 'kill') and a[5] != '-'):
        exec(zlib.decompress(unb64(sys.stdin.buffer.readline(), True), 31), globals())
    if a[0] in ('go', 'poll', 'kill'):
        try:
            res = {'go': go, 'poll': poll, 'kill': kill}[a[0]](a[1:])
        except Exception as x:
            print('%s: %s' % (type(x).__name__, x))
            sys.exit(1)
        print(jdumps(res))
    elif a[0] in ('bgq', 'bgin', 'bgsig'):
        print(jdumps({'bgq': bgq, 'bgin': bgin, 'bgsig': bgsig}[a[0]](a[1:])))
    elif a[0] == 'procs':
        print(baseline())
        m = marshal.dumps(_C)  # the boot's: this program as this Python compiled it
        keep_code(_h(m), m)
        print(_h(m), b64(zlib.compress(m, 9)).translate(str.maketrans('+/', '-_')))
    elif a[0] == 'wsprep':
        print(jdumps(ws_prep(a[1], a[2], a[3])))
    elif a[0] == 'put':
        put(data_line() if a[1] == '-' else a[1], a[2], int(a[3], 8))
    elif a[0] == 'list':
        print(jdumps(listing(a[1], int(a[2]), a[3] if len(a) > 3 else '')))
    elif a[0] == 'get':
        print(jdumps(get(a[1], int(a[2]))))
    elif a[0] == 'getb':  # getb DIR MAX B64: the file DIR/<the bytes B64 holds>, as get
        print(jdumps(get(a[1] + '/' + os.fsdecode(unb64(a[3])), int(a[2]))))

main()
