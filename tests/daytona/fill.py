#!/usr/bin/env python3
"""fill.py URL KEY: as another client of the Daytona test server's only sandbox would, through
the toolbox API: removes the call runner's folders (/tmp/.sandbox-mcp) and fills the sandbox's
disk and its /dev/shm with bulk uploads, each of which stops at ENOSPC (the test server's
"disk"). Exits 0 once both are full."""
import json, sys, urllib.error, urllib.request

url, key = sys.argv[1], sys.argv[2]
state = json.load(urllib.request.urlopen(url + '/_control', timeout=10))
(sid,) = state['sandboxes']
tb = '%s/toolbox/%s' % (url, sid)
auth = {'Authorization': 'Bearer ' + key}


def ask(method, path, body=None, headers=None):
    req = urllib.request.Request(tb + path, data=body, method=method, headers=dict(auth, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as x:
        return x.code, x.read()


ask('DELETE', '/files?path=/tmp/.sandbox-mcp')
for dest, size in (('/workspace/fill', 64 << 20), ('/dev/shm/fill', 96 << 20)):
    b = b'sandbox-mcp-fill'
    body = (b'--%s\r\nContent-Disposition: form-data; name="files[0].path"\r\n\r\n%s\r\n'
            b'--%s\r\nContent-Disposition: form-data; name="files[0].file"; filename="%s"\r\n'
            b'Content-Type: application/octet-stream\r\n\r\n' % (b, dest.encode(), b, dest.encode()))
    body += bytes(size) + b'\r\n--%s--\r\n' % b
    st, out = ask('POST', '/files/bulk-upload', body, {'Content-Type': 'multipart/form-data; boundary=' + b.decode()})
    if st != 400 or b'no space left on device' not in out:
        sys.exit('%s: expected a full disk, got %d %s' % (dest, st, out[:200]))
