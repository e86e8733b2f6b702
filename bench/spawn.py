#!/usr/bin/env python3
"""bench/spawn.py: times plain process starts (the floors, bwrap, docker exec) for
bench/driver.mjs, which keeps one running for the whole benchmark. A small, lean spawner, so
that a floor is what one start costs here, not what Node's spawnSync adds to it.

For each JSON line {"argv": [...], "env": {...}} on stdin it resolves argv[0] on env's PATH,
then, timed: posix_spawn (stdin /dev/null, stdout a pipe, stderr a memfd), stdout read to EOF,
waitpid. It answers one JSON line {"ms", "status", "out_len", "out" (the first 4 KiB of
stdout), "sha256" (of all of it), "err" (the first 4 KiB of stderr)}.
Usage: python3 bench/spawn.py   (bench/driver.mjs starts it)
"""
import hashlib, json, os, shutil, sys, time


def run(argv, env):
    exe = shutil.which(argv[0], path=env.get('PATH', os.defpath))
    if exe is None:
        return {'ms': 0, 'status': 127, 'out_len': 0, 'out': '', 'sha256': '', 'err': '%s: not found' % argv[0]}
    r, w = os.pipe()
    errfd = os.memfd_create('stderr')
    null = os.open(os.devnull, os.O_RDONLY)
    chunks = []
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(exe, argv, env, file_actions=[
        (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_DUP2, errfd, 2)])
    os.close(w)
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    _, st = os.waitpid(pid, 0)
    ms = (time.perf_counter_ns() - t0) / 1e6
    os.close(r)
    os.close(null)
    out = b''.join(chunks)
    os.lseek(errfd, 0, os.SEEK_SET)
    err = os.read(errfd, 4096)
    os.close(errfd)
    return {'ms': ms, 'status': os.waitstatus_to_exitcode(st), 'out_len': len(out),
            'out': out[:4096].decode('utf-8', 'replace'), 'sha256': hashlib.sha256(out).hexdigest(),
            'err': err.decode('utf-8', 'replace')}


for line in sys.stdin:
    q = json.loads(line)
    sys.stdout.write(json.dumps(run(q['argv'], q['env'])) + '\n')
    sys.stdout.flush()
