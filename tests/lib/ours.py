#!/usr/bin/env python3
"""What of the Docker engine's objects the servers of this test made, and what of another's.

The engine is shared: a user's own sandbox-mcp (serving Claude Code, say) may keep sandboxes on
it while the suite runs. Every container and volume a server makes is labelled with the server's
host, pid and start time (backends/docker/docker.c), so an object is ours when its server ran on
this host and is either gone or a process of this test's session (the session of this script,
or a process whose parent chain reaches it). A live server of another session is not ours.

Usage: ours.py containers [DOCKER PS ARGS...]   ids of our containers, any state
       ours.py volumes                          names of our volumes
       ours.py foreign-sandboxes                sandbox ids (label sandbox-mcp.sandbox) of
                                                containers that are not ours
       ours.py foreign-pids                     host pids of the first process of running
                                                containers that are not ours
       ours.py foreign-volumes                  volumes labelled by a server that is not ours,
                                                or mounted by a container that is not ours
"""
import os, socket, subprocess, sys

SID = os.getsid(0)


def stat(pid):
    """(ppid, sid, start time) of a live process, else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # rest[0] is field 3 (state): ppid is field 4, session 6, start time 22.
    return int(rest[1]), int(rest[3]), rest[19]


def in_session(pid):
    seen = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        st = stat(pid)
        if st is None:
            return False
        if st[1] == SID:
            return True
        pid = st[0]
    return False


def ours(labels):
    if labels.get("sandbox-mcp.host") != socket.gethostname():
        return False
    try:
        pid = int(labels.get("sandbox-mcp.pid", ""))
    except ValueError:
        return False
    st = stat(pid)
    if st is None or st[2] != labels.get("sandbox-mcp.starttime", st[2]):
        return True  # its server is gone: a leftover, which one of ours may have left
    return in_session(pid)


def docker(*args):
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.split()


def objects(kind, extra=()):
    """(id, labels, inspect JSON) of every object of KIND labelled sandbox-mcp=1."""
    import json
    if kind == "container":
        ids = docker("ps", "-aq", "--no-trunc", "--filter", "label=sandbox-mcp=1", *extra)
    else:
        ids = docker("volume", "ls", "-q", "--filter", "label=sandbox-mcp=1")
    if not ids:
        return []
    r = subprocess.run(["docker", kind, "inspect", *ids], capture_output=True, text=True)
    out = []
    for o in json.loads(r.stdout or "[]"):  # one removed meanwhile is not there
        labels = (o.get("Config") or {}).get("Labels") if kind == "container" else o.get("Labels")
        out.append((o.get("Id", o.get("Name"))[:12] if kind == "container" else o["Name"], labels or {}, o))
    return out


def main(argv):
    what = argv[0] if argv else ""
    if what == "containers":
        for i, labels, _ in objects("container", argv[1:]):
            if ours(labels):
                print(i)
    elif what == "volumes":
        for name, labels, _ in objects("volume"):
            if ours(labels):
                print(name)
    elif what == "foreign-sandboxes":
        for _, labels, _ in objects("container"):
            if not ours(labels):
                print(labels.get("sandbox-mcp.sandbox", ""))
    elif what == "foreign-pids":
        for _, labels, o in objects("container"):
            if not ours(labels) and o.get("State", {}).get("Pid"):
                print(o["State"]["Pid"])
    elif what == "foreign-volumes":
        for name, labels, _ in objects("volume"):
            if not ours(labels):
                print(name)
        for _, labels, o in objects("container"):
            if not ours(labels):
                for m in o.get("Mounts") or []:
                    if m.get("Type") == "volume" and m.get("Name"):
                        print(m["Name"])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
