#!/usr/bin/env python3
# A --python for tests/prestart.bats, put into the workspace by a call: python3 itself, but the
# interpreter started ahead of a call (its main part on fd 4, its functions on fd 5: their source
# after 'S', or after 'M' the code an interpreter before compiled from the changed source) runs
# its source changed as the file /workspace/wrap-mode says, and appends that mode to
# /workspace/wrapped:
#   mute    it never says 'P' to a call, and keeps its socket to the agent open as it runs one:
#           as one whose answer the agent does not hear in time
#   child   it starts a sleeper before it starts
#   thread  it starts a thread before it says it is ready
import fcntl
import os
import sys

if len(sys.argv) == 2 and sys.argv[1].startswith('/proc/self/') and sys.argv[1].endswith('/4'):
    mode = open('/workspace/wrap-mode').read().strip()

    def whole(fd):
        b = b''
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b
            b += chunk

    main, lib = whole(4), whole(5)
    changes = []
    if mode == 'mute':
        changes = [(b"ctl.sendall(_frame(b'P'))", b"pass"), (b"os.closerange(3, 1 << 20)", b"os.closerange(4, 1 << 20)")]
    elif mode == 'thread':
        old = b"    ctl.sendall(_frame(b'R'"
        changes = [(old, b"    __import__('threading').Thread(target=__import__('time').sleep, args=(300,), daemon=True).start()\n" + old)]
    for old, new in changes if lib[:1] == b'S' else ():
        if lib.count(old) != 1:
            sys.exit('prestart-wrap: the source changed: %r is not in it once' % old)
        lib = lib.replace(old, new)
    for fd, data in ((4, main), (5, lib)):
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        os.write(w, data)
        os.close(w)
        os.dup2(r, fd)
        os.close(r)
    if mode == 'child' and os.fork() == 0:
        os.execvp('sleep', ['sleep', '300'])
    with open('/workspace/wrapped', 'a') as f:
        f.write(mode + '\n')
os.execvp('python3', ['python3'] + sys.argv[1:])
