# sandbox-mcp's workspace sync: the part of the call runner (runner.py; sent after it, and run
# in its globals, by the requests that use it) that tells the server what a call changed in
# the workspace, so that the server can keep its --workspace folder on the host in step with it
# (wssync.h says the server's half).
#   ws_prep(root, state, manifest)   after the folder's files were uploaded into root: makes
#                 its empty folders, gives files and folders their modes, and records the
#                 listing the next sync compares with (STATE/0.json)
#   ws_sync(spec) at a call's end, after the sweep (nothing of the call runs any more):
#                 compares root with the listing the server last took in (STATE/GEN.json),
#                 records the new one (STATE/GEN+1.json), and says what changed: folders made,
#                 names removed, files written (small ones inline, larger ones linked or copied
#                 into STATE/out/I for the server's bulk download), within the call's bounds
#   ws_clear_out(spec)  removes those copies, when the next call's go starts (the server has
#                 fetched them, or its next sync makes them again)
# A listing is {name: [kind, ino, size, mtime_ns, ctime_ns, mode]}, kind 'f' (a regular file)
# or 'd' (a folder); symlinks and special files are never in it, so never copied back. The
# server names the listing it took in: one whose answer was lost is compared with again.
# What a call's bounds leave out keeps its old entry, so the next call sends it.
# The state lives in a folder of the server's choosing that code running as the same user
# could change: that only changes what is copied into the host folder, which the same code
# decides anyway, and the server checks every name it gets.
import base64, json, os

WS_WALK_MAX = 100000          # names a walk looks at (folders included)
WS_DEPTH = 64
WS_INLINE_ONE = 64 << 10      # a file larger than this goes by bulk download
WS_NAMES_MAX = 4 << 20        # bytes of names one answer carries

def ws_walk(root):
    """(listing, hidden, cut) of root: hidden, the folders that could not be read or lie too
    deep (what they hold is unknown); cut, whether the walk stopped at WS_WALK_MAX."""
    ents, hidden, seen = {}, set(), [0]

    def walk(fd, rel, depth):
        try:
            names = os.listdir(fd)
        except OSError:
            hidden.add(rel)
            return True
        for n in names:
            seen[0] += 1
            if seen[0] > WS_WALK_MAX:
                return False
            r = rel + '/' + n if rel else n
            try:
                st = os.stat(n, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            kind = {0o100000: 'f', 0o040000: 'd'}.get(st.st_mode & 0o170000)
            if kind == 'f':
                ents[r] = ['f', st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode & 0o7777]
            if kind != 'd':
                continue
            ents[r] = ['d', st.st_ino, 0, 0, 0, st.st_mode & 0o7777]
            try:
                if depth + 1 >= WS_DEPTH:
                    raise OSError
                cfd = os.open(n, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                hidden.add(r)
                continue
            try:
                if not walk(cfd, r, depth + 1):
                    return False
            finally:
                os.close(cfd)
        return True

    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        whole = walk(top, '', 0)
    finally:
        os.close(top)
    return ents, hidden, not whole

def ws_open(top, rel, flags):
    """Opens rel below the open folder top, one name at a time, following no symlink."""
    names = rel.split('/')
    fd = os.dup(top)
    try:
        for n in names[:-1]:
            nfd = os.open(n, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return os.open(names[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)

def ws_mkdirs(top, rel):
    fd = os.dup(top)
    try:
        for n in rel.split('/'):
            try:
                os.mkdir(n, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            nfd = os.open(n, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)

def ws_name(b):
    return os.fsdecode(base64.b64decode(b))

def ws_b64(rel):
    return base64.b64encode(os.fsencode(rel)).decode()

def ws_prep(root, state, src):
    m = json.loads(data_line() if src == '-' else open(src, 'rb').read())
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for b, mode in m['dirs']:
            ws_mkdirs(top, ws_name(b))
        # Files first, then folders from the deepest up: a folder without write permission
        # must not stop what goes on inside it.
        dirs = sorted(m['dirs'], key=lambda x: ws_name(x[0]), reverse=True)
        for (b, mode), kind in [(x, 'f') for x in m['files']] + [(x, 'd') for x in dirs]:
            fd = ws_open(top, ws_name(b), os.O_RDONLY | os.O_NONBLOCK | (os.O_DIRECTORY if kind == 'd' else 0))
            try:
                if kind == 'd' or (os.fstat(fd).st_mode & 0o170000) == 0o100000:
                    os.fchmod(fd, mode & 0o7777)
            finally:
                os.close(fd)
    finally:
        os.close(top)
    os.makedirs(state + '/out', 0o700, exist_ok=True)
    ents = ws_walk(root)[0]
    wfile(state + '/0.json', json.dumps(ents).encode())
    return {'ok': True, 'entries': len(ents)}

def _pump(fd, want, put):
    """Reads up to want bytes of fd, a MiB at a time, into put."""
    while want > 0:
        c = os.read(fd, min(want, 1 << 20))
        if not c:
            break
        put(c)
        want -= len(c)


def ws_take(top, rel, state, i, inline_left):
    """Reads the file rel for the server: (its entry, its bytes when they go inline, else None:
    then linked or copied to STATE/out/i). OSError when it cannot be read as a regular file."""
    fd = ws_open(top, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if (st.st_mode & 0o170000) != 0o100000:
            raise OSError('not a regular file')
        e = ['f', st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode & 0o7777]
        if st.st_size <= min(WS_INLINE_ONE, inline_left):
            b = []
            _pump(fd, st.st_size, b.append)
            return e, b''.join(b)
        out = '%s/out/%d' % (state, i)
        try:  # a second name costs nothing: nothing runs before the server has read it, and the
            # next call's go removes it before the call starts (ws_clear_out)
            os.link('/proc/self/fd/%d' % fd, out)
        except OSError:
            with open(out, 'wb') as f:
                _pump(fd, st.st_size, f.write)
        return e, None
    finally:
        os.close(fd)

def ws_ancestors(p):
    """p and every folder above it."""
    while p:
        yield p
        p = p.rpartition('/')[0]

def ws_clear_out(spec):
    """Removes the copies the last sync made for the server, which has fetched them (or will
    get them again): before a call starts, so that a linked file's link count is its own."""
    state = spec.split(':', 6)[6]
    try:
        for n in os.listdir(state + '/out'):
            os.unlink('%s/out/%s' % (state, n))
    except OSError:
        pass

def ws_sync(spec):
    g, maxn, maxb, inl, maxrm, root, state = spec.split(':', 6)
    gen, maxn, maxb, inl, maxrm = int(g), int(maxn), int(maxb), int(inl), int(maxrm)
    ws_clear_out(spec)
    os.makedirs(state + '/out', 0o700, exist_ok=True)
    for n in os.listdir(state):
        if (n.endswith('.json') and n != '%d.json' % gen) or n.endswith('.tmp'):  # a .tmp: a write cut short
            os.unlink('%s/%s' % (state, n))
    try:
        with open('%s/%d.json' % (state, gen)) as f:
            prev = json.load(f)
    except (OSError, ValueError):
        prev = {}
    cur, hidden, cut = ws_walk(root)
    new, res = dict(prev), {'gen': gen, 'rm': [], 'mk': [], 'put': [], 'big': [], 'unread': 0, 'left': [0, 0],
                      'cut': cut}
    # Removed (or of another kind now), children before their folder; nothing is known to be
    # gone from what a walk did not see.
    gone = [] if cut else sorted((p for p, e in prev.items() if (p not in cur or cur[p][0] != e[0])
                                  and not any(a in hidden for a in ws_ancestors(p.rpartition('/')[0]))), reverse=True)
    wait, names = set(), [0]

    def name(p):  # p's name for the answer, or None when the answer has no room left for it
        b = ws_b64(p)
        names[0] += len(b) + 16
        return b if names[0] <= WS_NAMES_MAX else None

    for p in gone:
        b = name(p) if len(res['rm']) < maxrm else None
        if b is None:
            wait.add(p)
            res['left'][0] += 1
            continue
        res['rm'].append(b)
        del new[p]
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    n = nb = il = 0
    try:
        for p in sorted(cur):
            e, o = cur[p], prev.get(p)
            if o is not None and o[0] == e[0] and (e[0] == 'd' or o[1:] == e[1:]):
                continue
            b = None
            if n < maxn and not any(a in wait for a in ws_ancestors(p)) and not (e[0] == 'f' and e[2] <= maxb < nb + e[2]):
                b = name(p)
            if b is None:
                res['left'][0] += 1
                res['left'][1] += e[2]
                continue
            if e[0] == 'd':
                res['mk'].append([b, e[5] & 0o777])
            elif e[2] > maxb:  # never fits a call: said, and not tried again until it changes
                res['big'].append([b, e[2]])
            else:
                try:
                    e, data = ws_take(top, p, state, len(res['put']), inl - il)
                except OSError:  # said, and not tried again until it changes
                    res['unread'] += 1
                    new[p] = e
                    continue
                if data is not None:
                    il += len(data)
                nb += e[2]
                res['put'].append([b, e[5] & 0o777, e[2],
                                   base64.b64encode(data).decode() if data is not None else None])
            new[p] = e
            n += 1
    finally:
        os.close(top)
    if res['rm'] or res['mk'] or res['put'] or res['big'] or res['unread']:
        res['gen'] = gen + 1
        wfile('%s/%d.json' % (state, gen + 1), json.dumps(new).encode())
    return res
