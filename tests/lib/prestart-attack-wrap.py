#!/usr/bin/env python3
# A --python for tests/prestart-attacks.bats, put into the workspace by a call: python3 itself,
# but the interpreter started ahead of a call (its main part on fd 4, its functions on fd 5 after
# 'S' (source) or 'M' (the code an interpreter before handed the agent)) sends the agent the
# frame of its functions' code ('C') as the file /workspace/wrap-mode says, and appends
# "MODE S" or "MODE M" to /workspace/wrapped:
#   empty   a 'C' of no bytes
#   big     a 'C' of 1 MiB and one byte
#   huge    a frame header that says 4 GiB of 'C', then nothing
#   early   a whole 'C' before it says it is non-dumpable ('D'), then the real one
#   after   the 'C' only after its 'R'
#   slow    the first 100 bytes of its 'C', then nothing for 30 s
#   two     its 'C', then another of junk
#   junk    a 'C' of 1000 bytes of junk (kept, as the 'R' after it is trusted)
#   mib     a 'C' of exactly 1 MiB of junk (kept too; more than a pipe holds unprivileged)
#   raises  a 'C' that is a real code object, one that raises as it is loaded
#   plain   its 'C' as it is
import fcntl
import marshal
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

    def frame(k, p=b''):
        return len(p + b'x').to_bytes(4, 'little') + k + p

    main, lib = whole(4), whole(5)
    send = b"        ctl.sendall(_frame(b'C', _LIB))\n"
    ready = b"    ctl.sendall(_frame(b'R', '; '.join(failed).encode()))\n"
    raises = marshal.dumps(compile("raise SystemExit('planted')", 'x', 'exec'))
    new = {
        'empty': b"        ctl.sendall(_frame(b'C', b''))\n",
        'big': b"        ctl.sendall(_frame(b'C', b'x' * ((1 << 20) + 1)))\n",
        'huge': b"        ctl.sendall(b'\\xff\\xff\\xff\\xffC')\n",
        'slow': b"        ctl.sendall(_frame(b'C', _LIB)[:100]); __import__('time').sleep(30)\n",
        'two': send + b"        ctl.sendall(_frame(b'C', b'junk' * 100))\n",
        'junk': b"        ctl.sendall(_frame(b'C', b'j' * 1000))\n",
        'mib': b"        ctl.sendall(_frame(b'C', b'j' * (1 << 20)))\n",
        'raises': b"        ctl.sendall(_frame(b'C', %r))\n" % raises,
    }
    if lib[:1] == b'S':
        if lib.count(send) != 1 or lib.count(ready) != 1:
            sys.exit('prestart-attack-wrap: the source changed')
        if mode in new:
            lib = lib.replace(send, new[mode])
        elif mode == 'after':
            lib = lib.replace(send, b"        _LATE = _LIB\n").replace(ready, ready + b"    ctl.sendall(_frame(b'C', _LATE))\n")
    for fd, data in ((4, main), (5, lib)):
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        os.write(w, data)
        os.close(w)
        os.dup2(r, fd)
        os.close(r)
    with open('/workspace/wrapped', 'a') as f:
        f.write('%s %s\n' % (mode, lib[:1].decode()))
    if mode == 'early':
        os.write(3, frame(b'C', b'early' * 10))
os.execvp('python3', ['python3'] + sys.argv[1:])
