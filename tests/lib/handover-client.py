# The server proxy's socket as the sandbox's code reaches it, for the scripts of
# tests/handover-attacks.bats (put before each): connect to it, read what it said.
import socket

PROXY = "/run/sandbox-proxy/proxy.sock"


def unix():
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(5)
    u.connect(PROXY)
    return u


def told(s, wait=5):
    """What the proxy said on s: its status, "closed" for nothing, or the error's name."""
    s.settimeout(wait)
    try:
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        return got.split(b" ")[1].decode() if got.startswith(b"HTTP/") else "closed"
    except OSError as e:
        return type(e).__name__


def ask(data, wait=5):
    """A client speaking on the proxy's socket itself: the status it was told, or why not."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(wait)
    try:
        s.connect(PROXY)
        s.sendall(data)
        return told(s, wait)
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
