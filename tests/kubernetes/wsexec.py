#!/usr/bin/env python3
"""A tiny pods/exec WebSocket client for the tests of the Kubernetes test server, written from
RFC 6455 and the channel protocol (see server.py), independent of the server's own framing.

Usage: wsexec.py KUBECONFIG NAMESPACE POD [options] -- COMMAND [ARGS...]
  --protocols P1,P2   the subprotocols offered (default v5.channel.k8s.io,v4.channel.k8s.io)
  --stdin TEXT        sent on channel 0 (stdin=true in the query)
  --close-stdin       then the v5 CLOSE message (255, 0)
  --stdin-delay S     waits S seconds before it sends stdin
  --fragment          stdin in three fragments, with a ping between them
  --unmasked          sends one unmasked frame (the server must close with 1002)
  --huge              sends the head of a frame of 2^40 bytes (the server must close with 1009)
  --close-after S     sends a close frame after S seconds
  --context NAME      the kubeconfig context (default: its current-context)
Prints one JSON object: protocol, stdout, stderr, status (channel 3, parsed), close_code
(the server's close frame, or null), pongs, http_status and http_body (when not upgraded).
"""
import argparse, base64, hashlib, json, os, socket, ssl, struct, tempfile, time
from urllib.parse import quote, urlsplit


def frame(opcode, payload, fin=True, mask=True):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    m = 0x80 if mask else 0
    head += bytes([m | n]) if n < 126 else bytes([m | 126]) + struct.pack('!H', n) if n < 65536 else \
        bytes([m | 127]) + struct.pack('!Q', n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('kubeconfig')
    ap.add_argument('namespace')
    ap.add_argument('pod')
    ap.add_argument('--protocols', default='v5.channel.k8s.io,v4.channel.k8s.io')
    ap.add_argument('--stdin')
    ap.add_argument('--close-stdin', action='store_true')
    ap.add_argument('--stdin-delay', type=float, default=0)
    ap.add_argument('--fragment', action='store_true')
    ap.add_argument('--unmasked', action='store_true')
    ap.add_argument('--huge', action='store_true')
    ap.add_argument('--close-after', type=float)
    ap.add_argument('--context')
    ap.add_argument('command', nargs='+')
    a = ap.parse_args()
    kc = json.load(open(a.kubeconfig))
    ctxname = a.context or kc['current-context']
    ctx = next(c['context'] for c in kc['contexts'] if c['name'] == ctxname)
    cluster = next(c['cluster'] for c in kc['clusters'] if c['name'] == ctx['cluster'])
    user = next(u['user'] for u in kc['users'] if u['name'] == ctx['user'])
    u = urlsplit(cluster['server'])
    tls = ssl.create_default_context(cadata=base64.b64decode(cluster['certificate-authority-data']).decode())
    if 'client-certificate-data' in user:
        d = tempfile.mkdtemp()
        for k, f in (('client-certificate-data', 'c.crt'), ('client-key-data', 'c.key')):
            with open(os.path.join(d, f), 'wb') as fh:
                fh.write(base64.b64decode(user[k]))
        tls.load_cert_chain(os.path.join(d, 'c.crt'), os.path.join(d, 'c.key'))
    sock = tls.wrap_socket(socket.create_connection((u.hostname, u.port), timeout=20), server_hostname=u.hostname)
    q = '&'.join('command=' + quote(c, safe='') for c in a.command)
    q += '&stdout=true&stderr=true&tty=false' + ('&stdin=true' if a.stdin is not None else '')
    key = base64.b64encode(os.urandom(16)).decode()
    req = ('GET /api/v1/namespaces/%s/pods/%s/exec?%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n'
           'Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n'
           'Sec-WebSocket-Protocol: %s\r\n' % (a.namespace, a.pod, q, u.netloc, key, a.protocols))
    if 'token' in user:
        req += 'Authorization: Bearer %s\r\n' % user['token']
    sock.sendall((req + '\r\n').encode())
    f = sock.makefile('rb')
    status_line = f.readline().decode()
    headers = {}
    while True:
        line = f.readline().decode()
        if line in ('\r\n', '\n', ''):
            break
        k, _, v = line.partition(':')
        headers[k.strip().lower()] = v.strip()
    out = {'http_status': int(status_line.split()[1]), 'protocol': headers.get('sec-websocket-protocol'),
           'stdout': '', 'stderr': '', 'status': None, 'close_code': None, 'pongs': 0, 'other': []}
    if out['http_status'] != 101:
        n = int(headers.get('content-length', 0))
        out['http_body'] = json.loads(f.read(n) or b'null')
        print(json.dumps(out))
        return
    want = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest()).decode()
    out['accept_ok'] = headers.get('sec-websocket-accept') == want
    if a.unmasked:
        sock.sendall(frame(2, b'\0x', mask=False))
    if a.huge:
        sock.sendall(bytes([0x82, 0x80 | 127]) + struct.pack('!Q', 1 << 40) + os.urandom(4) + b'\0' * 1024)
    if a.stdin is not None:
        time.sleep(a.stdin_delay)
        data = a.stdin.encode()
        if a.fragment:
            third = max(1, len(data) // 3)
            sock.sendall(frame(2, b'\0' + data[:third], fin=False))
            sock.sendall(frame(9, b'ping!'))
            sock.sendall(frame(0, data[third:2 * third], fin=False))
            sock.sendall(frame(0, data[2 * third:], fin=True))
        else:
            sock.sendall(frame(2, b'\0' + data))
        if a.close_stdin:
            sock.sendall(frame(2, b'\xff\x00'))
    if a.close_after:
        import threading
        threading.Timer(a.close_after, lambda: sock.sendall(frame(8, struct.pack('!H', 1000)))).start()
    while True:
        h = f.read(2)
        if len(h) < 2:
            break
        n = h[1] & 0x7F
        if n == 126:
            n = struct.unpack('!H', f.read(2))[0]
        elif n == 127:
            n = struct.unpack('!Q', f.read(8))[0]
        payload = f.read(n)
        op = h[0] & 0x0F
        if op == 8:
            out['close_code'] = struct.unpack('!H', payload[:2])[0] if len(payload) >= 2 else 1005
            break
        if op == 10:
            out['pongs'] += 1
            continue
        if op != 2 or not payload:
            out['other'].append(op)
            continue
        ch, data = payload[0], payload[1:].decode('utf-8', 'replace')
        if ch == 1:
            out['stdout'] += data
        elif ch == 2:
            out['stderr'] += data
        elif ch == 3:
            out['status'] = json.loads(data)
        else:
            out['other'].append(ch)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
