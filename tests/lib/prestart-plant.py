# Run as a call (tests/prestart.bats): plants code wherever `site` could find it at a Python
# start: sitecustomize.py and usercustomize.py in every folder of sys.path, the workspace and
# the user site folder, and a .pth file with an import line in the user site folder, the
# workspace and every site-packages folder. Each, when run, appends "NAME PID CHILD" to
# /workspace/marker, CHILD a sleeper it started. Prints where it could not write (the system's
# folders, which must be read-only) and what it planted.
import os, site, sys

CODE = ("import os\n"
        "p = os.fork()\n"
        "if p == 0:\n"
        "    os.execvp('sleep', ['sleep', '300'])\n"
        "open('/workspace/marker', 'a').write('%s %d %d\\n' % ({name!r}, os.getpid(), p))\n")
user = site.getusersitepackages()
os.makedirs(user)
folders = sorted(set(sys.path[1:] + ['/workspace', '/workspace/.sandbox', user] + site.getsitepackages()))
planted, refused = [], []
for d in folders:
    if d.startswith('/workspace/'):
        os.makedirs(d, exist_ok=True)
    for f in ('sitecustomize.py', 'usercustomize.py', 'planted.pth'):
        name = d + '/' + f
        code = CODE.format(name=name)
        if f.endswith('.pth'):
            code = 'import os; exec(%r)\n' % code
        try:
            with open(name, 'x') as out:
                out.write(code)
            planted.append(name)
        except OSError:
            refused.append(name)
print('planted', len(planted))
print('writable outside the workspace:', [n for n in planted if not n.startswith('/workspace/')])
