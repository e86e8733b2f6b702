# Run in the sandbox (execute_python; DIRS is set in a line put before it): every way code could
# leave a set-uid or set-gid file or folder, or a file capability, in the host folders DIRS.
# Prints one "call mode result" line per try, then "done"; the test looks at the host folders.
import ctypes, errno, os, shutil, subprocess, tarfile

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AT = -100
O_CREAT_WRONLY = os.O_CREAT | os.O_WRONLY
# x86_64 numbers (the test runs there).
NR = dict(chmod=90, fchmod=91, fchmodat=268, fchmodat2=452, open=2, openat=257, creat=85, mkdir=83,
          mkdirat=258, mknod=133, mknodat=259, openat2=437, setxattr=188, lsetxattr=189, fsetxattr=190,
          setxattrat=463)


def sc(name, *a):
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(x) if isinstance(x, int) else x for x in a])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def say(what, mode, result):
    print(what, oct(mode), result)


# A file capability that grants cap_setuid (VFS_CAP_REVISION_2, effective).
CAP = (0x02000001).to_bytes(4, "little") + (1 << 7).to_bytes(4, "little") + bytes(12)
capbuf = ctypes.create_string_buffer(CAP, len(CAP))
setuid_file = subprocess.run("find /usr/bin /bin -perm -4000 -type f | head -1", shell=True,
                             capture_output=True, text=True).stdout.strip()
for d in DIRS:
    os.chdir(d)
    for m in (0o4755, 0o2755, 0o6755):
        t = oct(m)[2:]
        f = ("f" + t).encode()
        open(f, "w").close()
        fd = os.open(f, os.O_RDONLY)
        say("chmod", m, sc("chmod", f, m))
        say("fchmod", m, sc("fchmod", fd, m))
        say("fchmodat", m, sc("fchmodat", AT, f, m))
        say("fchmodat2", m, sc("fchmodat2", AT, f, m, 0))
        say("open", m, sc("open", b"o" + f, O_CREAT_WRONLY, m))
        say("openat", m, sc("openat", AT, b"oa" + f, O_CREAT_WRONLY, m))
        # An unnamed file (O_TMPFILE) made set-id, then named in the folder.
        tfd = libc.syscall(ctypes.c_long(NR["openat"]), ctypes.c_long(AT), b".",
                           ctypes.c_long(os.O_TMPFILE | os.O_WRONLY), ctypes.c_long(m))
        say("tmpfile", m, "ok" if tfd >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
        if tfd >= 0:
            os.link(f"/proc/self/fd/{tfd}", b"t" + f, follow_symlinks=True)
            os.close(tfd)
        # An open that creates nothing passes no mode: what its register holds is not looked at.
        say("plain-open", m, sc("openat", AT, f, os.O_RDONLY, m))
        how = (ctypes.c_uint64 * 3)(O_CREAT_WRONLY, m, 0)
        say("openat2", m, sc("openat2", AT, b"o2" + f, ctypes.byref(how), 24))
        say("creat", m, sc("creat", b"c" + f, m))
        say("mkdir", m, sc("mkdir", b"d" + f, m))
        say("mkdirat", m, sc("mkdirat", AT, b"da" + f, m))
        say("mknod", m, sc("mknod", b"n" + f, 0o100000 | m, 0))
        say("mknodat", m, sc("mknodat", AT, b"na" + f, 0o100000 | m, 0))
        os.close(fd)
    # File capabilities, by each call of the setxattr family.
    open("cap", "w").close()
    fd = os.open("cap", os.O_RDONLY)
    say("setxattr", 0, sc("setxattr", b"cap", b"security.capability", CAP, len(CAP), 0))
    say("lsetxattr", 0, sc("lsetxattr", b"cap", b"security.capability", CAP, len(CAP), 0))
    say("fsetxattr", 0, sc("fsetxattr", fd, b"security.capability", CAP, len(CAP), 0))
    xargs = (ctypes.c_uint64 * 2)(ctypes.addressof(capbuf), len(CAP))
    say("setxattrat", 0, sc("setxattrat", AT, b"cap", 0, b"security.capability", ctypes.byref(xargs), 16))
    os.close(fd)
    # Copying a set-uid program in, by the tools that keep modes, and a hard link to one.
    if setuid_file:
        for i, cmd in enumerate(("cp -p {s} cp-p", "install -m 4755 {s} inst", "cp -a {s} cp-a")):
            r = subprocess.run(cmd.format(s=setuid_file), shell=True, capture_output=True)
            say(cmd.split()[0] + str(i), 0o4755, r.returncode)
        try:
            shutil.copy2(setuid_file, "copy2")
            say("copy2", 0o4755, "ok")
        except OSError as e:
            say("copy2", 0o4755, errno.errorcode.get(e.errno))
        try:
            os.link(setuid_file, "hardlink")
            say("link", 0o4755, "ok")
        except OSError as e:
            say("link", 0o4755, errno.errorcode.get(e.errno))
    # An archive with set-id members, unpacked keeping modes.
    with tarfile.open("/tmp/setid.tar", "w") as tf:
        for name, mode, kind in (("tar-suid", 0o4755, tarfile.REGTYPE), ("tar-sgid-dir", 0o2755, tarfile.DIRTYPE)):
            ti = tarfile.TarInfo(name)
            ti.mode, ti.type = mode, kind
            tf.addfile(ti)
    r = subprocess.run("tar -xpf /tmp/setid.tar", shell=True, capture_output=True)
    say("tar", 0o6755, r.returncode)
    # A folder made in the folder itself (set-gid when the folder is).
    os.mkdir("plain")
print("done")
