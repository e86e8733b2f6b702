# A prestarted Python interpreter of a sandbox (agent/prestart.py, compiled into the server and
# handed to sandbox-agent). The agent starts one after each call; it starts up, runs `site`,
# imports the modules to preload, and waits. The next execute_python call, when it can, runs in
# it: it becomes the process `python3 /workspace/.sandbox/task.py ARGS` would be (the call's
# environment, sys.argv, sys.path, signal mask, rlimits, folder, fds and command line), runs the
# script as __main__, and exits as that interpreter would. One interpreter per call: nothing of a
# call reaches the next, not even the hash seed.
#
# The agent runs it as `python3 /proc/self/fd/./././4` (the path as long as the script path, so
# that the command line can be rewritten in place), fd 4 a pipe holding a first line
# `_PRELOAD = "MODULE,..."` and this source, with the environment every call has less what
# points where code can write: no PYTHONPATH, and a user site folder that cannot exist. So
# nothing of the workspace runs or is read here before a call: `site` finds only the system's
# folders (read-only in the sandbox), and so do the preloads. A call puts the call's PYTHONPATH
# back into sys.path and its user site into `site`; when a plain start would run or import
# something from there (sitecustomize, usercustomize, a module this one holds, a user site
# folder and its .pth files), or a module this one holds from the script's own folder (first in
# a plain start's sys.path), it says so ('S') and the call starts plainly, where that code
# runs as the call's own. A call whose own variables change how Python starts (PYTHON* and the
# like) is not run here. A bash call does not wait for the modules to preload (only for 'D');
# the agent trusts only an interpreter it heard ready before the call, and hands a call only to
# one that is alone (one thread, stopped by no one, no other process in the sandbox), so one
# that was still importing ends with the call's processes, and no code ever runs beside an
# interpreter that later becomes a call.
#
# It talks to the agent on fd 3 (a unix stream socket) in frames: u32 length (little endian) of
# what follows, a type byte, a payload.
#   interpreter -> agent  'D' nothing: it can no longer be read or written by the code (not
#                         dumpable); 'R' TEXT: ready (TEXT: the modules that failed to import)
#   agent -> interpreter  'F' run spec, with the call's stdout and stderr as SCM_RIGHTS: become
#                         the call -> 'P' (it can), or 'S' (a plain start must), or 'E' TEXT;
#                         after 'P' it waits for 'G' (go: it is the call now) and runs nothing
#                         of the call before: an agent that did not hear 'P' in time kills it
#                         and starts the call plainly
#                         'K' nothing: kill every process of the sandbox but the agent and this
#                         one -> 'k'
# Run spec: u32 count of rlimits, each u32 resource and u64 value; then strs (u32 length and
# bytes): cwd, argv (count first), env (count first).
import os
import sys

_PR_SET_DUMPABLE = 4


def _frame(kind, payload=b''):
    return len(payload + b'x').to_bytes(4, 'little') + kind + payload


def _nodump():
    """Before anything else: code running as the same user can no longer ptrace this process or
    write its memory. Through _ctypes alone, with the three C types needed: importing the
    ctypes package took 7.3 million instructions (callgrind, Python 3.11), this takes 1.9, of
    a start of about 40 before this process is safe from code run beside it. What it imported for it is forgotten, as if never
    imported. prctl, memmove and exit, for later."""
    before = set(sys.modules)
    import _ctypes

    class _int(_ctypes._SimpleCData):
        _type_ = 'i'

    class _ptr(_ctypes._SimpleCData):
        _type_ = 'P'

    class _size(_ctypes._SimpleCData):
        _type_ = 'L'

    class _c_int(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL
        _restype_ = _int

    class _c_ptr(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL
        _restype_ = _ptr
        _argtypes_ = (_ptr, _ptr, _size)

    libc = _ctypes.dlopen(None, os.RTLD_NOW)
    prctl = _c_int(_ctypes.dlsym(libc, 'prctl'))
    if prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        os._exit(1)
    for m in set(sys.modules) - before:
        del sys.modules[m]
    os.write(3, _frame(b'D'))
    return prctl, _c_ptr(_ctypes.dlsym(libc, 'memmove')), _c_int(_ctypes.dlsym(libc, 'exit'))


def _shadowed():
    """The names that a file or folder in a folder of PYTHONPATH would take from this interpreter:
    what `site` imports from the first folder that holds it (sitecustomize, usercustomize), and
    the top-level modules it holds from a file (a plain start with that folder first in sys.path
    would import the folder's)."""
    names = {'sitecustomize', 'usercustomize'}
    for n, m in list(sys.modules.items()):
        if getattr(m, '__file__', None):
            names.add(n.partition('.')[0])
    return names


def _call_paths(env, shadowed, site):
    """What a plain start would take from the places code can write, which this interpreter
    started without (the agent leaves PYTHONPATH and the user site folder out of its environment,
    so that nothing of the workspace ran here before the call): the folders of the call's
    PYTHONPATH, to be put back into sys.path; None when a plain start would run or import
    something from them (a name of shadowed), or would read the user site folder (its .pth files,
    usercustomize), or when PYTHONPATH is not plain absolute paths: the call then starts plainly,
    and what is there runs as its own code."""
    d = {}
    for kv in reversed(env):
        k, _, v = kv.partition(b'=')
        d[k] = v
    folders = []
    for p in os.fsdecode(d.get(b'PYTHONPATH', b'')).split(':') if d.get(b'PYTHONPATH') else ():
        if not p.startswith('/') or os.path.normpath(p) != p or p in sys.path or p in folders:
            return None
        try:
            names = os.listdir(p)
        except FileNotFoundError:
            names = ()
        except OSError:
            return None
        if any(n.partition('.')[0] in shadowed for n in names):
            return None
        folders.append(p)
    if site.ENABLE_USER_SITE:
        base, home = d.get(b'PYTHONUSERBASE'), d.get(b'HOME', b'').rstrip(b'/')
        if not base and not home:
            return None
        base = os.fsdecode(base or home + b'/.local')
        if not hasattr(site, '_get_path') or os.path.isdir(site._get_path(base)):
            return None
    return folders


def _beside(argv, shadowed):
    """Whether the script's folder, first in a plain start's sys.path, holds a module this one
    holds (a preloaded one: a plain start would import the folder's instead). Not sitecustomize
    or usercustomize: `site` is done before that folder is in sys.path."""
    if len(argv) < 2:
        return True
    try:
        names = os.listdir(os.path.dirname(os.fsdecode(argv[1])) or '.')
    except FileNotFoundError:
        return False
    except OSError:
        return True
    skip = ('sitecustomize', 'usercustomize')
    return any(n.partition('.')[0] in shadowed and n.partition('.')[0] not in skip for n in names)


def _recv(ctl, socket):
    """One frame: (kind, payload, fds)."""
    head, anc = b'', []
    while len(head) < 5:
        got, a, _f, _a = ctl.recvmsg(5 - len(head), socket.CMSG_SPACE(4 * 2))
        if not got:
            raise EOFError
        head += got
        anc += a
    n = int.from_bytes(head[:4], 'little') - 1
    body = b''
    while len(body) < n:
        chunk = ctl.recv(n - len(body))
        if not chunk:
            raise EOFError
        body += chunk
    fds = []
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[i:i + 4], 'little') for i in range(0, len(data) - 3, 4)]
    return head[4:5], body, fds


def _spec(b):
    pos = 0

    def u32():
        nonlocal pos
        pos += 4
        return int.from_bytes(b[pos - 4:pos], 'little')

    def u64():
        nonlocal pos
        pos += 8
        return int.from_bytes(b[pos - 8:pos], 'little')

    def s():
        nonlocal pos
        n = u32()
        pos += n
        return b[pos - n:pos]

    rl = [(u32(), u64()) for _ in range(u32())]
    cwd = s()
    argv = [s() for _ in range(u32())]
    env = [s() for _ in range(u32())]
    return rl, cwd, argv, env


def _argspan():
    """Where this process's own argument strings lie, which /proc/PID/cmdline (ps) shows."""
    with open('/proc/self/stat', 'rb') as f:
        fields = f.read().rsplit(b')', 1)[1].split()
    return int(fields[45]), int(fields[46])  # arg_start, arg_end (stat fields 48, 49)


def _cmdline(argv, memmove, span):
    """Writes argv over this process's own argument strings; the agent runs a call here only
    when they are as long."""
    new = b''.join(a + b'\0' for a in argv)
    if len(new) == span[1] - span[0]:
        memmove(span[0], new, len(new))


def _become(spec, fds, c, resource, signal, keep, dir0, span, folders):
    """The process `python3 SCRIPT ARGS` would be, with folders (the call's PYTHONPATH) after
    the script's in sys.path. The script's path."""
    rl, cwd, argv, env = spec
    os.setsid()
    null = os.open('/dev/null', os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    os.closerange(3, 1 << 20)
    try:
        for res, val in rl:
            val = val if val < 1 << 63 else resource.RLIM_INFINITY  # rlim_t's all ones
            resource.setrlimit(res, (val, val))
        os.chdir(cwd)
    except (OSError, ValueError) as e:
        os.write(2, b'sandbox: the call could not start: %s\n' % str(e).encode())
        os._exit(127)
    c[0](_PR_SET_DUMPABLE, 1, 0, 0, 0)
    _cmdline(argv, c[1], span)
    _environ(env)
    path = os.fsdecode(argv[1])
    sys.argv = [path] + [os.fsdecode(a) for a in argv[2:]]
    sys.orig_argv = [os.fsdecode(a) for a in argv]
    at = 0
    if sys.path and sys.path[0] == dir0:
        sys.path[0] = os.path.dirname(path)
        at = 1
    sys.path[at:at] = folders
    site = sys.modules['site']
    site.USER_BASE = site.USER_SITE = None
    site.getusersitepackages()  # from the call's environment, as its start would have
    for m in list(sys.modules):
        if m not in keep:
            del sys.modules[m]
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    return path


def _environ(env):
    """os.environ and C's environment become env (b'KEY=VALUE' strings, in order). Through the
    mapping both share when it is there: clearing os.environ key by key and setting each through
    os.environb took about 0.27 ms of a warm call."""
    data = getattr(os.environ, '_data', None)
    if not isinstance(data, dict) or getattr(os.environb, '_data', None) is not data:
        os.environ.clear()
        for kv in env:
            k, _, v = kv.partition(b'=')
            os.environb[k] = v
        return
    for k in list(data):
        os.unsetenv(k)
    data.clear()
    for kv in env:
        k, _, v = kv.partition(b'=')
        os.putenv(k, v)
        data[k] = v


def _script(path):
    """The call's __main__ module, in sys.modules, as Python makes it, and the script's source."""
    try:
        with open(path, 'rb') as f:
            source = f.read()
    except OSError as e:
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (sys.orig_argv[0], path, e.errno, e.strerror))
        sys.exit(2)
    main = type(sys)('__main__')
    main.__annotations__ = {}
    main.__builtins__ = sys.modules['builtins']
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = sys.modules['_frozen_importlib_external'].SourceFileLoader('__main__', path)
    sys.modules['__main__'] = main
    return main, source


def _exit_code(e):
    """The exit status of an uncaught SystemExit, its message printed as Python prints it."""
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return (c if -2**63 <= c < 2**63 else -1) & 0xff
    try:
        if sys.stderr is not None:
            sys.stderr.write(str(c))
            sys.stderr.write('\n')
        else:
            os.write(2, str(c).encode() + b'\n')
    except Exception:
        pass
    return 1


def _theirs(tb):
    """A traceback without this file's frames at its start."""
    while tb is not None and tb.tb_frame.f_code.co_filename == _HERE:
        tb = tb.tb_next
    return tb


def _uncaught(e):
    """Prints an uncaught exception as Python does, without this file's frames."""
    tb = e.__traceback__ = _theirs(e.__traceback__)
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
    hook = getattr(sys, 'excepthook', _theirs)
    if hook is _theirs:
        sys.stderr.write('sys.excepthook is missing\n')
        sys.stderr.flush()
        sys.__excepthook__(type(e), e, tb)
        return
    try:
        hook(type(e), e, tb)
    except BaseException as h:
        sys.stderr.flush()
        os.write(2, b'Error in sys.excepthook:\n')
        h.__traceback__ = _theirs(h.__traceback__)
        sys.__excepthook__(type(h), h, h.__traceback__)
        sys.stderr.flush()
        os.write(2, b'\nOriginal exception was:\n')
        sys.__excepthook__(type(e), e, tb)


def _flush_std():
    """sys.stdout and sys.stderr flushed, as Python flushes them at exit: False when that failed
    (the exit status is then 120); stdout's failure is printed."""
    ok = True
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None and not f.closed:
                f.flush()
        except BaseException as e:
            ok = False
            if f is sys.stdout:
                sys.unraisablehook(type('UnraisableHookArgs', (), {
                    'exc_type': type(e), 'exc_value': e, 'exc_traceback': e.__traceback__,
                    'err_msg': None, 'object': f})())
    return ok


def _clear(d):
    """As Python clears the globals of a module still alive at exit: names with one leading
    underscore first, then the rest, set to None; __builtins__ kept."""
    for first in (True, False):
        for k in list(d):
            if isinstance(k, str) and k != '__builtins__' and (k.startswith('_') and not k.startswith('__')) == first:
                d[k] = None


def _older_collections():
    """How many collections of generations 1 and 2 have run."""
    stats = _GC.get_stats()
    return stats[1]['collections'], stats[2]['collections']


def _teardown():
    """What Python's exit does to the script's objects, so that their __del__, weakref callbacks
    and file buffers run as they would (Python 3.11's order): every module out of sys.modules,
    a collection (gc.callbacks called), the globals of the script's modules still alive
    cleared, the builtins back as they were, and what that let go collected (gc.callbacks not
    called). The first collection is of the young generations alone when every object made
    since the interpreter was ready is still in the youngest (no collection has run since,
    with the generational collector of Python 3.13 and before): the tens of thousands of
    objects it started with, all in the oldest, are then not walked again, which took 0.7 ms
    of a 3.6 ms call, and the finalizers run in the order a full collection runs them. The
    second, when the clearing let anything go, is a full one: what survived the first is in
    the oldest generation now. (Objects a call moves there with gc.freeze() and then
    gc.unfreeze() are not seen to have moved: a cycle among them that nothing clears is left
    unfinalized.)"""
    import _weakref
    collect = _GC.collect
    young = _GEN is not None and _older_collections() == _GEN and _GC.get_count()[1] == 0
    sys.last_type = sys.last_value = sys.last_traceback = None
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    alive = []
    for m in list(sys.modules):
        mod = sys.modules[m]
        sys.modules[m] = None
        try:
            if m not in _KEEP or m == '__main__':
                alive.append(_weakref.ref(mod))
        except TypeError:
            pass
    mod = None
    collect(1 if young else 2)
    again = False
    for r in reversed(alive):
        if r() is not None:
            _clear(r().__dict__)
            again = True
    b = _BDICT
    for k in [k for k in b if k not in _BUILTINS or b[k] is not _BUILTINS[k]]:
        del b[k]
        again = True
    b.update(_BUILTINS)
    if again:  # else nothing was let go since the collection
        # Python's collections after the first call no gc.callbacks, which it still holds.
        held = _GC.callbacks[:]
        _GC.callbacks.clear()
        collect()
        _GC.callbacks[:] = held  # still held to the end, as Python holds them: nothing freed here


def _exit():
    """The end of the call as Python's own: the uncaught exception handled (a SystemExit's
    status, or the traceback), the non-daemon threads waited for, the atexit callbacks, the
    standard streams flushed, the script's objects finalized; then C's exit(), which flushes C's
    streams, or death by SIGINT after an uncaught KeyboardInterrupt. Python's own teardown of
    everything else, which no code sees, is left out: it would take longer than the call."""
    global _E
    e, _E = _E, None
    code, sigint = 0, False
    if isinstance(e, SystemExit):
        code = _exit_code(e)
    elif e is not None:
        _uncaught(e)
        code, sigint = 1, type(e) is KeyboardInterrupt
    e = None
    try:
        if 'threading' in sys.modules:
            sys.modules['threading']._shutdown()
    except BaseException:
        pass
    try:
        # Before Python 3.10 each atexit module object keeps its own callbacks, and exit runs
        # those of the last one imported: the script's, when it imported atexit.
        mod = _ATEXIT if sys.version_info >= (3, 10) else sys.modules.get('atexit') or _ATEXIT
        mod._run_exitfuncs()
        mod = None
    except BaseException:
        pass
    if not _flush_std():
        code = 120
    try:
        _teardown()
    except BaseException:
        pass
    if not _flush_std():
        code = 120
    # The agent answers the call once the kernel shows this process past its code (in its exit,
    # its memory dropped), with the status the kernel holds, rather than once the kernel has
    # freed that memory (most of a call's end with numpy preloaded). The signal only says when
    # to look: code that sends it early gains nothing (the agent looks once a call).
    try:
        if os.getppid() == 1:
            os.kill(1, _SIGNAL.SIGUSR1)
    except OSError:
        pass
    if sigint:
        _SIGNAL.signal(_SIGNAL.SIGINT, _SIGNAL.SIG_DFL)
        os.kill(os.getpid(), _SIGNAL.SIGINT)
    _LIBC[2](code)


def _serve(preload):
    """Waits for a call; returns only as the call, with its __main__ module and source."""
    global _LIBC, _KEEP, _BUILTINS, _BDICT, _SIGNAL, _GEN, _ATEXIT, _GC, _LIB
    dir0 = sys.path[0] if sys.path else None
    c = _LIBC = _nodump()
    os.close(4)
    failed = []
    for name in filter(None, preload.split(',')):
        try:
            __import__(name)
        except BaseException as e:  # a module that fails is only not preloaded
            failed.append('%s (%s: %s)' % (name, type(e).__name__, e))
    keep = _KEEP = set(sys.modules)
    _BDICT = sys.modules['builtins'].__dict__
    _BUILTINS = dict(_BDICT)
    import _signal as signal
    import _socket as socket
    _SIGNAL = signal
    import resource
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    ctl = socket.socket(fileno=3)
    span = _argspan()
    shadowed = _shadowed()
    site = sys.modules['site']
    compile(b'pass', _HERE, 'exec', dont_inherit=True)  # what a first compile sets up, done
    # The modules the end of a call uses, imported now and held here: out of sys.modules once
    # the call begins, as in a plain start, and not modules of the script's for _teardown to
    # clear (a script's own import of one is another module object, cleared like the rest).
    import atexit
    import gc
    _ATEXIT, _GC = atexit, gc
    # What start-up made, now in the oldest generation, which the collections at the call's end
    # leave alone when they can (_teardown).
    gc.collect()
    if preload:
        # The preloaded modules' objects are left out of the collections at the call's end,
        # which would otherwise walk them all (2.5 ms each with numpy): gc.get_freeze_count()
        # and gc.get_objects() show it, the one thing of preloading a call can see.
        gc.freeze()
    # The young-generation shortcut of _teardown; not with Python 3.14's incremental collector,
    # whose gc.collect(1) is one step of its own cycle.
    _GEN = _older_collections() if sys.version_info < (3, 14) else None
    if _LIB:
        ctl.sendall(_frame(b'C', _LIB))
        _LIB = None
    ctl.sendall(_frame(b'R', '; '.join(failed).encode()))
    while True:
        try:
            kind, body, fds = _recv(ctl, socket)
        except (EOFError, OSError):
            os._exit(0)
        spec = _spec(body) if kind == b'F' and len(fds) == 2 else None
        folders = _call_paths(spec[3], shadowed, site) if spec else None
        if folders is not None and _beside(spec[2], shadowed):
            folders = None
        if kind == b'F' and folders is None:
            for fd in fds:
                os.close(fd)
            ctl.sendall(_frame(b'S') if len(fds) == 2 else _frame(b'E', b'a call needs its two stream fds'))
        elif kind == b'F':
            ctl.sendall(_frame(b'P'))
            # Nothing of the call runs before the agent says go: one that did not hear the 'P'
            # in time starts the call plainly and ends this one.
            try:
                go = _recv(ctl, socket)
            except (EOFError, OSError):
                os._exit(0)
            if go[0] != b'G':
                os._exit(0)
            ctl.detach()  # fd 3 is closed with the rest: the object must not close it again later
            return _script(_become(spec, fds, c, resource, signal, keep, dir0, span, folders))
        elif kind == b'K':
            try:
                os.kill(-1, 9)
            except OSError:
                pass
            ctl.sendall(_frame(b'k'))


# The call runs here, in this file's frame, the one frame below its own. This part comes on fd 4
# after _PRELOAD's line; what is above it, on fd 5: its source ('S'), compiled here and handed
# to the agent ('C', marshal), or that code object ('M') from an interpreter before, which the
# next ones load instead of compiling the source again (compiling took a third of a start).
import sys
import marshal
_HERE = sys._getframe().f_code.co_filename
with open(5, 'rb') as _F:
    _LIB = _F.read()
if _LIB[:1] == b'M':
    _LIB = marshal.loads(_LIB[1:])
    exec(_LIB, globals())
    _LIB = None
else:
    _LIB = compile(_LIB[1:], _HERE, 'exec', dont_inherit=True)
    exec(_LIB, globals())
    _LIB = marshal.dumps(_LIB)
del _F
_MAIN, _SOURCE = _serve(_PRELOAD)
_E = None
try:
    exec(compile(_SOURCE, _MAIN.__file__, 'exec', dont_inherit=True), _MAIN.__dict__)
except BaseException as _x:
    _E = _x
# Python forgets __file__ and __cached__ once the script is done.
_MAIN.__dict__.pop('__file__', None)
_MAIN.__dict__.pop('__cached__', None)
_MAIN = _SOURCE = None
_exit()
