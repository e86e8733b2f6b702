#!/usr/bin/env python3
"""Runs inside the sandbox, for tests/allowhosts.bats: tries each way out and prints one JSON
object, case -> what came back ("200", "403", "400", "431", "closed" (the proxy hung up),
"echo" (the tunnel's far end sent our bytes back), or the error's name).

Usage: allowhosts-probe.py HOST PORT TLSPORT REBIND   HOST:PORT serves /ok.txt over plain HTTP;
                                                      HOST:TLSPORT and HOST:443 echo; REBIND is an
                                                      allowed host:port that resolves to loopback
"""
import json, os, socket, ssl, sys

PROXY = ("127.0.0.1", 3128)
host, port, tlsport, rebind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
out = {}


def hello(name):
    """The bytes of a real ClientHello for server name `name` (no socket needed)."""
    ctx = ssl.create_default_context()
    inc, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, outb, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outb.read()


def ask(data, then=b""):
    """Sends data to the proxy (then `then` after its answer to a CONNECT); what came back."""
    s = socket.create_connection(PROXY, 10)
    s.settimeout(20)
    try:
        s.sendall(data)
        got = b""
        while b"\r\n\r\n" not in got:
            b = s.recv(65536)
            if not b:
                break
            got += b
        status = got.split(b" ")[1].decode() if got.startswith(b"HTTP/") else "closed"
        if status != "200" or not data.startswith(b"CONNECT"):
            if status == "200":
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    got += b
                return "200" if b"the allowed file" in got else "200-other"
            return status
        rest = got.split(b"\r\n\r\n", 1)[1]
        if then:
            s.sendall(then)
        want = then or data.split(b"\r\n\r\n", 1)[1]
        while len(rest) < len(want):
            b = s.recv(65536)
            if not b:
                return "closed"
            rest += b
        return "echo" if rest.startswith(want) else "other"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()


def get(url, hosthdr=None, extra=b""):
    h = hosthdr if hosthdr is not None else url.split("/")[2]
    return ask(b"GET " + url.encode() + b" HTTP/1.1\r\nHost: " + h.encode() + b"\r\n" + extra + b"\r\n")


def connect(target, then=b"", pre=b""):
    return ask(b"CONNECT " + target.encode() + b" HTTP/1.1\r\nHost: " + target.encode() + b"\r\n\r\n" + pre, then)


hp = "%s:%d" % (host, port)
out["ok_http"] = get("http://%s/ok.txt" % hp)
out["ok_upper"] = get("http://%s/ok.txt" % hp.upper())
out["ok_connect_sni"] = connect("%s:%d" % (host, tlsport), hello(host))
out["ok_connect_443"] = connect("%s:443" % host, hello(host))


def server_first(target):
    """A tunnel to a server that speaks first: its banner, then our bytes back."""
    s = socket.create_connection(PROXY, 10)
    s.settimeout(10)
    try:
        s.sendall(b"CONNECT " + target.encode() + b" HTTP/1.1\r\n\r\n")
        got = b""
        while b"BANNER\r\n" not in got:
            b = s.recv(4096)
            if not b:
                return "closed"
            got += b
        s.sendall(b"hello after the banner")
        back = b""
        while len(back) < 22:
            b = s.recv(4096)
            if not b:
                return "closed"
            back += b
        return "echo" if back == b"hello after the banner" else "other"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()


out["ok_server_first"] = server_first("%s:2222" % host)
out["ok_env_proxy"] = "200" if b"the allowed file" in __import__("urllib.request").request.urlopen(
    "http://%s/ok.txt" % hp, timeout=20).read() else "no"
# Addresses for the allowed name, in every spelling.
for name, h in [("v4", "198.51.100.2"), ("decimal", "3325256706"), ("octal", "0306.063.0144.02"),
                ("hex", "0xc6336402"), ("short", "198.51.25602"), ("v6_mapped", "[::ffff:198.51.100.2]"),
                ("v6_mapped_hex", "[::ffff:c633:6402]")]:
    out["ip_" + name] = get("http://%s:%d/ok.txt" % (h, port))
    out["ipc_" + name] = connect("%s:%d" % (h, tlsport), hello(host))
out["userinfo"] = get("http://user@%s/ok.txt" % hp)
out["userinfo_host"] = get("http://%s@evil.test:%d/ok.txt" % (hp, port))
out["connect_userinfo"] = connect("user@%s:%d" % (host, tlsport), hello(host))
out["trailing_dot"] = get("http://%s.:%d/ok.txt" % (host, port))
# A name with a Cyrillic letter, raw in the request line (whatever the allowed host is written as).
out["idn_raw"] = ask(("GET http://all\u043ewed.test:%d/ok.txt HTTP/1.1\r\nHost: x\r\n\r\n" % port).encode())
out["punycode"] = get("http://xn--llowed-9ve.test:%d/ok.txt" % port)
out["suffix"] = get("http://%s.evil.test:%d/ok.txt" % (host, port))
out["prefix"] = get("http://evil%s:%d/ok.txt" % (host, port))
out["wild_bare"] = get("http://wild.test:%d/ok.txt" % port)
out["wild_sub"] = get("http://a.wild.test:%d/ok.txt" % port)
out["wild_suffix"] = get("http://a.wild.test.evil.test:%d/ok.txt" % port)
out["host_header"] = get("http://%s/ok.txt" % hp, "evil.test")
out["host_header_port"] = get("http://%s/ok.txt" % hp, "%s:22" % host)
out["host_header_two"] = get("http://%s/ok.txt" % hp, hp, b"Host: evil.test\r\n")
out["proxy_itself"] = connect("127.0.0.1:3128")
out["loopback"] = connect("127.0.0.1:443")
out["metadata"] = get("http://169.254.169.254/latest/meta-data/")
out["metadata_connect"] = connect("169.254.169.254:443")
out["private"] = connect("10.0.0.1:443")
out["rebind"] = get("http://%s/" % rebind)
out["rebind_private"] = get("http://private.test:%d/ok.txt" % port)
out["ip_v6_other"] = get("http://[2001:db8::2]:%d/ok.txt" % port)
out["port"] = connect("%s:22" % host, hello(host))
out["port_http"] = get("http://%s:8081/ok.txt" % host)
out["long_name"] = get("http://%s.%s:%d/ok.txt" % ("a" * 63 + (".b" * 100), host, port))
out["long_head"] = get("http://%s/ok.txt" % hp, extra=b"X-Pad: " + b"a" * 20000 + b"\r\n")
out["pipelined_connect"] = connect("%s:443" % host, pre=b"GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n")
out["sni_mismatch"] = connect("%s:%d" % (host, tlsport), hello("evil.test"))
out["sni_suffix"] = connect("%s:%d" % (host, tlsport), hello(host + ".evil.test"))
out["not_tls_443"] = connect("%s:443" % host, b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n")
out["connect_80"] = connect("%s:80" % host, b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n")
out["chunked"] = get("http://%s/ok.txt" % hp, extra=b"Transfer-Encoding: chunked\r\n")
out["folded"] = get("http://%s/ok.txt" % hp, extra=b"X-A: a\r\n Host: evil.test\r\n")
out["bare_lf"] = get("http://%s/ok.txt" % hp, extra=b"X-A: a\nHost: evil.test\r\n")
out["smuggled"] = ask(("GET http://%s/ok.txt HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n"
                       "GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n" % (hp, hp)).encode())
out["not_absolute"] = ask(("GET /ok.txt HTTP/1.1\r\nHost: %s\r\n\r\n" % hp).encode())
# Around the proxy.
for name, fn in [("raw_tcp", lambda: socket.create_connection(("198.51.100.2", port), 5)),
                 ("raw_udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("198.51.100.2", 53))),
                 ("dns", lambda: socket.getaddrinfo("resolver-probe.test", port))]:
    try:
        fn()
        out[name] = "reached"
    except OSError as e:
        out[name] = type(e).__name__
# A resolver the sandbox could ask: a nameserver line in /etc/resolv.conf.
try:
    with open("/etc/resolv.conf") as f:
        out["resolv_conf"] = any(l.split()[:1] == ["nameserver"] for l in f)
except OSError:
    out["resolv_conf"] = False
print(json.dumps(out))
