# Runs inside the sandbox, for tests/allowhosts-attacks.bats, after the helpers of
# lib/allowhosts-probe.py (everything before its first case: ask, get, connect, hello, host,
# port, tlsport): tries more ways around the proxy and prints one JSON object, case -> what came
# back (as allowhosts-probe.py says it).
#
# sys.argv[5]: "NAMES" when the server resolves the test's names (self.test, multi.test, ...:
# see the .bats file), else "ADDRS"; sys.argv[6]: the port of the host's own listener;
# sys.argv[7]: the name of an abstract unix socket the host listens on.
import json, os, socket, struct, time

names = sys.argv[5] == "NAMES"
sport = int(sys.argv[6])
out = {}


def tunnel(target, chunks, want=None):
    """CONNECT, then each chunk in a segment of its own; "echo" when the far end sent the
    bytes back, "closed" when the proxy hung up, else the status."""
    s = socket.create_connection(PROXY, 10)
    s.settimeout(20)
    try:
        s.sendall(b"CONNECT " + target.encode() + b" HTTP/1.1\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            b = s.recv(65536)
            if not b:
                return "closed"
            got += b
        if not got.startswith(b"HTTP/1.1 200"):
            return got.split(b" ")[1].decode()
        for c in chunks:
            s.sendall(c)
            time.sleep(0.2)
        want = want if want is not None else b"".join(chunks)
        rest = got.split(b"\r\n\r\n", 1)[1]
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


def hello_of(exts):
    """A ClientHello record with these extensions ((type, bytes), ...)."""
    body = b"\x03\x03" + b"\x11" * 32 + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    e = b"".join(struct.pack(">HH", t, len(d)) + d for t, d in exts)
    body += struct.pack(">H", len(e)) + e
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


def sni(*names, kind=0):
    lst = b"".join(bytes([kind]) + struct.pack(">H", len(n)) + n for n in names)
    return (0, struct.pack(">H", len(lst)) + lst)


H = host.encode()
tls = "%s:%d" % (host, tlsport)
hp = "%s:%d" % (host, port)

# The allowed tunnel, its hello in pieces (TCP may cut it anywhere).
real = hello(host)
out["ok_split_segments"] = tunnel(tls, [real[:3], real[3:40], real[40:]])
out["ok_built_hello"] = tunnel(tls, [hello_of([sni(H)])])
# Hellos that hide or double the name.
body = real[5:]
out["hello_two_records"] = tunnel(tls, [b"\x16\x03\x01" + struct.pack(">H", 40) + body[:40]
                                        + b"\x16\x03\x01" + struct.pack(">H", len(body) - 40) + body[40:]])
out["hello_two_sni_ext"] = tunnel(tls, [hello_of([sni(H), sni(b"evil.test")])])
out["hello_two_names"] = tunnel(tls, [hello_of([sni(H, b"evil.test")])])
out["hello_nul_name"] = tunnel(tls, [hello_of([sni(H + b"\x00.evil.test")])])
out["hello_name_type"] = tunnel(tls, [hello_of([sni(H, kind=1)])])
out["hello_no_sni"] = tunnel(tls, [hello_of([])])
out["hello_dot"] = tunnel(tls, [hello_of([sni(H + b".")])])
out["hello_addr_for_name"] = tunnel(tls, [hello_of([sni(b"198.51.100.2")])])
out["hello_sslv2_443"] = tunnel("%s:443" % host, [b"\x80\x2e\x01\x00\x02" + b"\x00" * 45])
out["hello_huge_record"] = tunnel(tls, [b"\x16\x03\x01\xff\xff" + b"\x01" * 100])
# Request lines and heads other parsers read otherwise.
raw = lambda head: ask(head.encode("latin-1"))
out["nul_target"] = raw("GET http://%s/ok.txt\x00 HTTP/1.1\r\n\r\n" % hp)
out["nul_header"] = raw("GET http://%s/ok.txt HTTP/1.1\r\nX-A: a\x00b\r\n\r\n" % hp)
out["lf_request_line"] = raw("GET http://evil.test/ HTTP/1.1\nHost: %s\r\n\r\n" % hp)
out["lower_method"] = raw("get http://%s/ok.txt HTTP/1.1\r\n\r\n" % hp)
out["version_2"] = raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
out["https_absolute"] = raw("GET https://%s/ok.txt HTTP/1.1\r\n\r\n" % hp)
out["space_before_colon"] = raw("GET http://%s/ok.txt HTTP/1.1\r\nHost : evil.test\r\n\r\n" % hp)
out["te_tab"] = raw("GET http://%s/ok.txt HTTP/1.1\r\nTransfer-Encoding:\tchunked\r\n\r\n" % hp)
out["te_lower"] = raw("GET http://%s/ok.txt HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n" % hp)
out["cl_plus"] = raw("GET http://%s/ok.txt HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello" % hp)
out["cl_list"] = raw("GET http://%s/ok.txt HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello" % hp)
out["cl_two"] = raw("GET http://%s/ok.txt HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello" % hp)
# A body, then a second request on the same connection: the body goes, the second never does.
out["cl_smuggled"] = raw("GET http://%s/ok.txt HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
                         "GET http://evil.test:%d/ HTTP/1.1\r\nHost: evil.test\r\n\r\n" % (hp, port))
for name, url in [("pct_dot", "http://%s%%2etest:%d/ok.txt" % (host.rsplit(".", 1)[0], port)),
                  ("pct_nul", "http://%s%%00.evil.test:%d/ok.txt" % (host, port)),
                  ("backslash_at", "http://evil.test\\@%s/ok.txt" % hp),
                  ("fragment_at", "http://evil.test:%d#@%s/ok.txt" % (port, hp)),
                  ("double_port", "http://%s:%d/ok.txt" % (hp, port)),
                  ("port_0", "http://%s:0/ok.txt" % host),
                  ("port_65536", "http://%s:65536/ok.txt" % host),
                  ("port_wrap", "http://%s:%d/ok.txt" % (host, 65536 + port)),
                  ("port_negative", "http://%s:-%d/ok.txt" % (host, 2 ** 64 - port))]:
    out[name] = get(url, hp)
# The host's own addresses in every disguise, and other local ones (none is listed).
for name, target in [("v6_compat", "[::127.0.0.1]:443"), ("v6_mapped_hex", "[::ffff:7f00:1]:443"),
                     ("v6_nat64", "[64:ff9b::7f00:1]:443"), ("v6_unspec", "[::]:443"), ("v6_loop", "[::1]:443"),
                     ("v6_zone", "[fe80::1%25lo]:443"), ("v4_zero", "0.0.0.0:443"), ("v4_0", "0:443"),
                     ("v4_short", "127.1:443"), ("v4_dec", "2130706433:443"), ("v4_self", "198.51.100.1:%d" % sport),
                     ("v4_cgnat", "100.64.0.1:443"), ("v4_bcast", "255.255.255.255:443")]:
    out["addr_" + name] = connect(target)
# Names the list allows, whose addresses are local (the server resolves them).
if names:
    out["name_self"] = get("http://self.test:%d/secret.txt" % sport)
    out["name_self_connect"] = connect("self.test:%d" % sport)
    for n in ["meta", "cgnat", "v6loop", "v6mapped", "ula", "zero"]:
        out["name_" + n] = connect("%s.test:443" % n)
    # Several addresses, one private: only the others are tried.
    out["ok_multi"] = get("http://multi.test:%d/ok.txt" % port)
# The proxy's own socket, reached as itself: the same rules.
def unix(data):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    try:
        s.connect("/run/sandbox-proxy/proxy.sock")
        s.sendall(data)
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        return got.split(b" ")[1].decode() if got.startswith(b"HTTP/") else "closed"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
out["sock_loopback"] = unix(b"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n")
out["sock_evil"] = unix(b"GET http://evil.test:%d/ HTTP/1.1\r\n\r\n" % port)
out["sock_ok"] = unix(b"GET http://%s/ok.txt HTTP/1.1\r\n\r\n" % hp.encode())
out["sock_writable"] = os.access("/run/sandbox-proxy", os.W_OK)
# Around the proxy: no interface but lo, no raw or packet socket, no host socket.
out["interfaces"] = [n for _, n in socket.if_nameindex()]
for name, fn in [("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                 ("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),
                 ("udp_out", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("198.51.100.2", 443))),
                 ("v6_out", lambda: socket.create_connection(("2001:db8::1", 443), 5)),
                 ("abstract", lambda: socket.socket(socket.AF_UNIX).connect(b"\0" + sys.argv[7].encode())),
                 ("docker_sock", lambda: socket.socket(socket.AF_UNIX).connect("/var/run/docker.sock"))]:
    try:
        fn()
        out[name] = "reached"
    except OSError as e:
        out[name] = type(e).__name__
print(json.dumps(out))
