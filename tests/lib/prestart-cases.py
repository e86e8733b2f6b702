#!/usr/bin/env python3
"""Scripts whose results must be the same whether a call runs in an interpreter started ahead of
it (--python-prestart) or in one started when it comes: each prints, exits or fails in a way that
shows one thing a plain `python3 /workspace/.sandbox/task.py` does. Prints them as one JSON
string per line, for tests/prestart.bats. Object addresses (0x...) are masked there."""
import json

CASES = [
    # The process: arguments, paths, environment, folder, umask, session, fds, limits, name.
    'import sys; print(sys.argv, sys.orig_argv, sys.path, sys.executable, sys.flags)',
    'import os; print(sorted(os.environ.items()))',
    "import os; print(os.getcwd(), oct(os.umask(0)), os.getpgrp() == os.getpid(), os.getsid(0) == os.getpid(), os.getppid(), sorted(os.listdir('/proc/self/fd')))",
    'import resource; print([resource.getrlimit(r) for r in range(16)])',
    "print(open('/proc/self/cmdline').read().split('\\0'), open('/proc/self/status').read().split('\\n')[:3])",
    "import os; print(oct(int(open('/proc/self/status').read().split('SigBlk:')[1].split()[0], 16)), os.sched_getaffinity(0) == os.sched_getaffinity(1))",
    # Signals, stdin, streams.
    'import signal; print([(s, signal.getsignal(s)) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)], signal.pthread_sigmask(signal.SIG_BLOCK, []))',
    "import sys; print(sys.stdin.read() == '', sys.stdout.encoding, sys.stdout.line_buffering, sys.stdout.isatty(), sys.stderr.errors)",
    # __main__ and the modules a script starts with.
    'import sys; print(sorted(globals()), __name__, __doc__, __spec__, __loader__.name, __cached__, __package__, __file__)',
    'import sys; print(sorted(sys.modules))',
    'import gc, threading; print(gc.isenabled(), gc.get_threshold(), gc.get_freeze_count(), threading.active_count(), threading.current_thread().name)',
    'import sys; print(sys.getrecursionlimit(), sys.getswitchinterval(), sys.dont_write_bytecode, hasattr(sys, "ps1"))',
    'import __main__; print(__main__.__dict__ is globals())',
    # Tracebacks and exit statuses.
    'x = 1/0',
    'def f(:',
    'import sys; sys.exit("bye")',
    'import sys; sys.exit(300)',
    'import sys; sys.exit(None)',
    'import sys; sys.exit([1, 2])',
    'import sys; sys.exit(True)',
    'exit(4)',
    'quit()',
    'raise KeyboardInterrupt',
    'class K(KeyboardInterrupt): pass\nraise K',
    'try:\n    1/0\nexcept Exception as e:\n    raise ValueError("chained") from e',
    'import sys\ndef h(t, v, tb): print("custom hook", t.__name__, tb.tb_frame.f_code.co_filename)\nsys.excepthook = h\nraise ValueError(1)',
    'import sys; sys.excepthook = None; raise ValueError(2)',
    'import sys\ndef h(t, v, tb): raise TypeError("hook broke")\nsys.excepthook = h\nraise ValueError(3)',
    'import sys; del sys.excepthook; raise ValueError(4)',
    'import os, signal; os.kill(os.getpid(), signal.SIGTERM)',
    'import signal, os\ndef h(s, f): print("got", s); raise SystemExit(7)\nsignal.signal(signal.SIGTERM, h); os.kill(os.getpid(), signal.SIGTERM)',
    'import os; print("before"); os._exit(3)',
    'import warnings; warnings.warn("careful")',
    # The end of the run: atexit, threads, finalizers, buffers, flushing.
    'import atexit; atexit.register(print, "at exit")\nclass D:\n    def __del__(self): print("del", X)\nX = 5\nd = D(); d.me = d',
    'class D:\n    def __del__(self): raise ValueError("in del")\nd = D()',
    'import atexit\ndef f(): raise RuntimeError("in atexit")\natexit.register(f)\natexit.register(print, "second registered runs first")',
    'import atexit; atexit.register(lambda: print("file" in globals(), "__file__" in globals()))',
    'import threading, time\ndef w(): time.sleep(0.2); print("thread done")\nthreading.Thread(target=w).start()',
    'import threading, time\ndef w(): time.sleep(30); print("never")\nthreading.Thread(target=w, daemon=True).start(); print("main done")',
    'import threading\ndef w(): raise SystemExit(5)\nt = threading.Thread(target=w); t.start(); t.join(); print("ok")',
    'import weakref\nclass A: pass\na = A()\nweakref.finalize(a, print, "finalized")',
    'import tempfile, os\nd = tempfile.TemporaryDirectory()\nopen(os.path.join(d.name, "f"), "w").write("x")\nprint(os.path.exists(d.name))',
    'import builtins\nclass D:\n    def __del__(self): print("builtins-held del")\nbuiltins.held = D()',
    'import ctypes; libc = ctypes.CDLL(None); libc.printf(b"from C\\n"); print("from py")',
    'import sys; sys.stdout = open("/workspace/o.txt", "w"); print("to file")',
    'print(open("/workspace/o.txt").read())',
    'f = open("/workspace/b.bin", "wb", buffering=1 << 20); f.write(b"x" * 1000)',
    'import os; print(os.path.getsize("/workspace/b.bin"))',
    'import logging; logging.basicConfig(filename="/workspace/log.txt"); logging.warning("logged")',
    'print(open("/workspace/log.txt").read())',
    'import io, sys; sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), write_through=False); print("rewrapped")',
    'import sys; sys.stdout.close()',
    'import os; os.close(1)',
    'import os; os.close(1); print("x")',
    # Children.
    'import subprocess; print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout)',
    # Finalizers at the end of a cycle the script's own allocations moved to the oldest generation,
    # and of one its gc.collect() moved there (the end's collection is then a full one).
    'class D:\n    def __del__(self): print("old del", X)\nX = 6\nd = D(); d.me = d\nkeep = [[] for _ in range(300000)]\nimport gc; print(gc.get_stats()[1]["collections"] > 0)',
    'import gc\nclass D:\n    def __del__(self): print("del after collect", X)\nX = 1\nd = D(); d.me = d\ngc.collect()\ndel d\nprint("end")',
    # Cycles let go only when the end clears what held them: the builtins, a C module, gc itself.
    'import builtins\nclass D:\n    def __del__(self): print("builtins cycle del")\nd = D(); d.me = d\nbuiltins.keep = d\ndel d',
    'import math\nclass D:\n    def __del__(self): print("math cycle del")\nd = D(); d.me = d\nmath.keep = d\ndel d',
    'import gc\nclass D:\n    def __del__(self): print("gc cycle del")\nd = D(); d.me = d\ngc.keep = d\ndel d',
    # The order of finalizers across generations, and gc.callbacks at the end.
    'import gc\nclass D:\n    def __init__(s, n): s.n = n; s.self = s\n    def __del__(s): print(s.n)\na = D("a"); gc.collect(0); del a\nb = D("b"); del b',
    'import gc\ngc.callbacks.append(lambda phase, info: print(phase))',
    # The environment in order, as os.environ, os.environb and C's environment (a child's) hold it.
    'import os, subprocess\nprint(list(os.environ.items()))\nprint(list(os.environb) == [k.encode() for k in os.environ])\n'
    'print(subprocess.run(["env"], capture_output=True, text=True).stdout.split("\\n"))\n'
    'os.environ["NEW"] = "1"; del os.environ["LANG"]\nprint(subprocess.run(["env"], capture_output=True, text=True).stdout.split("\\n"))',
]

if __name__ == '__main__':
    for c in CASES:
        print(json.dumps(c))
