#!/usr/bin/env python3
"""Runs a command where user namespaces cannot be made, as root or as another user.

Usage: no-userns.py [--uid UID] -- COMMAND [ARGS...]

The command runs in a user namespace of its own that maps uid/gid 0 and UID to themselves
(so files and processes look the same as outside), whose user.max_user_namespaces is 0: any
further user namespace is refused (ENOSPC), as on a host with the sysctl at 0. With --uid the
command runs as that uid (and gid), with no capabilities; else as root of that namespace.
Needs root. Stdin, stdout and stderr are the command's own; exits with its status.
"""
import ctypes, os, sys

CLONE_NEWUSER = 0x10000000

def main():
    args = sys.argv[1:]
    uid = None
    if args[:1] == ["--uid"]:
        uid, args = int(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit("usage: no-userns.py [--uid UID] -- COMMAND [ARGS...]")
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.close(r2)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os._exit(90)
        os.write(w2, b"x")
        os.close(w2)
        if os.read(r, 1) != b"x":  # the parent has written the maps
            os._exit(91)
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        os.execvp(args[0], args)
    os.close(r)
    os.close(w2)
    os.read(r2, 1)
    ids = "0 0 1\n" + ("%d %d 1\n" % (uid, uid) if uid else "")
    for name in ("uid_map", "gid_map"):
        with open("/proc/%d/%s" % (pid, name), "w") as f:
            f.write(ids)
    os.write(w, b"x")
    os.close(w)
    _, st = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(st) if hasattr(os, "waitstatus_to_exitcode") else st >> 8)

if __name__ == "__main__":
    main()
