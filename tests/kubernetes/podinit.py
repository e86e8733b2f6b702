"""The pid 1 of one pod of the Kubernetes test server (server.py), started by it under
`unshare --pid --mount --uts --net --fork` as root: it makes the pod's root file system,
pivots into it (pivot_root, as runc does: a chroot could be climbed out of) and becomes the
container's command (execve), which is then PID 1 of the pod's PID namespace, as under a
container runtime (runc execs the command as the container's init). The network namespace has
its loopback only.

The root is a tmpfs of its own with the host's /usr bound read-only and nosuid (a stock image,
simulated), bin/sbin/lib/lib64 links into it, a /dev of a few bound device nodes, a /proc of
the pod's PID namespace, a small /etc, a /tmp, and one tmpfs per emptyDir volume at its
mountPath (of its sizeLimit, or of the root's size), and each persistentVolumeClaim's volume
(the server's folder: "bind") bound there, nosuid and nodev. readOnlyRootFilesystem remounts the root
read-only after that; volumes stay writable unless their volumeMount says readOnly.

The command runs through the root's /usr/bin/setpriv (the host's, read-only) with its user,
group, no_new_privs and capabilities (see server.py's Pod.setpriv), as exec does.

Argument: one JSON object (see server.py's Pod.sandbox_config). Writes "ready\n" on stdout just
before it becomes the command, whose stdin and stdout are /dev/null (nothing it writes reaches
the server's pipe), or with "stdio": [R, W], the server's pipes of pods/attach, and "error: TEXT\n" (exit 1) when the root cannot be made. The command's
exit status is unshare's (128+signal when a signal ended it).
"""
import ctypes, json, os, sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = {'x86_64': 155, 'aarch64': 41}
libc = ctypes.CDLL(None, use_errno=True)


def loopback_up():
    import fcntl, socket, struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8914, struct.pack('16sH', b'lo', 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS: UP, LOOPBACK, RUNNING


def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None
    if libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, 'mount %s: %s' % (dst, os.strerror(e)))


def make_root(cfg):
    r = cfg['root']
    mount(None, '/', None, MS_REC | MS_PRIVATE)
    mount('tmpfs', r, 'tmpfs', MS_NOSUID | MS_NODEV, 'size=%d,mode=0755' % cfg['root_size'])
    for d in ('usr', 'proc', 'dev', 'etc', 'root'):
        os.mkdir(r + '/' + d, 0o755)
    os.mkdir(r + '/tmp')
    os.chmod(r + '/tmp', 0o1777)
    mount('/usr', r + '/usr', None, MS_BIND | MS_REC)
    mount(None, r + '/usr', None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for link in ('bin', 'sbin', 'lib', 'lib64', 'lib32'):
        if os.path.islink('/' + link) and os.path.exists('/usr/' + link):
            os.symlink('usr/' + link, r + '/' + link)
    mount('tmpfs', r + '/dev', 'tmpfs', MS_NOSUID | MS_NOEXEC, 'size=65536,mode=0755')
    for n in ('null', 'zero', 'full', 'random', 'urandom', 'tty'):
        open(r + '/dev/' + n, 'w').close()
        mount('/dev/' + n, r + '/dev/' + n, None, MS_BIND)
    os.mkdir(r + '/dev/shm')
    os.chmod(r + '/dev/shm', 0o1777)
    for i, n in enumerate(('stdin', 'stdout', 'stderr')):
        os.symlink('/proc/self/fd/%d' % i, r + '/dev/' + n)
    os.symlink('/proc/self/fd', r + '/dev/fd')
    mount('proc', r + '/proc', 'proc', MS_NOSUID | MS_NODEV | MS_NOEXEC)
    uid = cfg['uid']
    with open(r + '/etc/passwd', 'w') as f:
        f.write('root:x:0:0:root:/root:/bin/sh\n')
        if uid:
            f.write('user:x:%d:%d:user:/tmp:/bin/sh\n' % (uid, cfg['gid']))
    with open(r + '/etc/group', 'w') as f:
        f.write('root:x:0:\n')
    with open(r + '/etc/hosts', 'w') as f:
        f.write('127.0.0.1\tlocalhost\n%s\t%s\n' % (cfg['pod_ip'], cfg['hostname']))
    with open(r + '/etc/hostname', 'w') as f:
        f.write(cfg['hostname'] + '\n')
    for v in cfg['volumes']:
        d = r + v['mountPath']
        os.makedirs(d, exist_ok=True)
        if 'bind' in v:  # a claim's volume: the server's folder, outliving the pod
            if not v['bind']:
                raise OSError(2, 'the volume of the claim at %s is gone' % v['mountPath'])
            mount(v['bind'], d, None, MS_BIND)
            mount(None, d, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (MS_RDONLY if v.get('readOnly') else 0))
            continue
        else:
            mount('tmpfs', d, 'tmpfs', MS_NOSUID | MS_NODEV, 'size=%d,mode=0777' % v['size'])
        if v.get('readOnly'):
            mount(None, d, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.mkdir(r + '/.old')
    name = cfg['hostname'].encode()
    libc.sethostname(name, len(name))
    loopback_up()
    if libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], r.encode(), (r + '/.old').encode()) != 0:
        e = ctypes.get_errno()
        raise OSError(e, 'pivot_root: %s' % os.strerror(e))
    os.chdir('/')
    if libc.umount2(b'/.old', MNT_DETACH) != 0:
        e = ctypes.get_errno()
        raise OSError(e, 'umount the old root: %s' % os.strerror(e))
    os.rmdir('/.old')
    if cfg['read_only_root']:
        mount(None, '/', None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, 'size=%d' % cfg['root_size'])
    os.chdir(cfg['workdir'])


def become_command(cfg):
    print('ready', flush=True)
    try:
        null = os.open('/dev/null', os.O_RDWR)
        stdio = cfg.get('stdio') or [null, null]  # stdin: true: the server's pipes (pods/attach)
        os.dup2(stdio[0], 0)
        os.dup2(stdio[1], 1)
        for fd in set(stdio + [null]):
            os.close(fd)
        argv = cfg['setpriv'] + cfg['argv']
        os.execve(argv[0], argv, cfg['env'])
    except OSError as x:
        os.write(2, ('%s: %s\n' % (cfg['argv'][0], x.strerror)).encode())
    os._exit(127)


def main():
    cfg = json.loads(sys.argv[1])
    try:
        make_root(cfg)
    except OSError as x:
        print('error: %s' % x, flush=True)
        sys.exit(1)
    become_command(cfg)


if __name__ == '__main__':
    main()
