#!/usr/bin/env python3
"""A loopback Daytona test server: the part of Daytona's REST API (api.json) and toolbox API
(toolbox.json) that sandbox-mcp and the official SDK's basic calls use, with the paths,
methods, bodies and status codes of the published specs.

It is a test double, not a sandbox: commands run on this host with subprocess, in a temporary
folder per sandbox. Absolute paths under /workspace, /tmp, /home/daytona and /mnt, in file requests
and in command text, are mapped into that folder (a real sandbox has them at the root); /dev/shm
into a folder of the sandbox's own beside it (a container's is a file system of its own), which
is also bound on /dev/shm in the sandbox's mount namespace where it has one (see
DAYTONA_TEST_NO_PIDNS), for the paths its programs make up.

Usage: server.py [--port N] [--port-file FILE]   (port 0, the default: a free one)
  DAYTONA_TEST_KEY      the API key it accepts (default "test-key"); anything else is 401
  DAYTONA_TEST_FAIL     a failure mode from the start, as JSON (see /_control)
  DAYTONA_TEST_START_S  seconds a sandbox spends in "creating" (default 0.2)
  DAYTONA_TEST_LATENCY_MS  milliseconds every API and toolbox request waits before it is
                        handled, as a network round trip would (default 0; see "latency_ms")
  DAYTONA_TEST_NO_PIDNS=1  run commands in this host's PID namespace (by default each sandbox
                        gets one of its own with unshare, where allowed, shared by all its
                        commands and with a reaping pid 1, like a real sandbox's container).
                        Without one, commands get SANDBOX_MCP_NO_SWEEP=1: a sweep would reach
                        this host's processes.
Control: POST /_control {"fail": MODE, "count": N, "on": "api"|"toolbox"|"all", "seconds": S,
                         "method": M, "path": P}   (method and path: only requests that match)
  MODE: "500", "401", "429" (with Retry-After: S), "slow" (S seconds, or until a POST with
  "release": true, which lets every held request go on at once), "drop" (close the
  connection without an answer), "never_start" (sandboxes stay "creating"), "" (none).
  Failures after the work (the request is handled, a sandbox made, then the answer fails):
  "500_after" (HTTP 500 instead of the answer), "truncated" (the answer's headers, then half
  its body and the connection closed), "malformed" (200 with half the body: not JSON),
  "reset_after" (the connection reset, no answer). A client that sends the request again
  makes the work twice: the log has every request.
  "start_s": S keeps sandboxes created from then on "creating" for S seconds (default
  DAYTONA_TEST_START_S); "busy_delete": true answers a DELETE of a sandbox still "creating"
  with 409 ("state change in progress"), as the API does.
  "memory": BYTES gives sandboxes created from then on a memory cgroup of that limit, as a real
  sandbox's container has (when this server runs as root on cgroup v1; 0: none, the default).
  count: how many matching requests fail (default: all); a path "*/x" matches every path
  that ends with "/x". GET /_control returns the state and
  the log of requests (method, path, status, the X-Daytona-* headers, the User-Agent, ms (the
  time it took to answer) and, for a process/execute of the call runner, verb: go, poll, ...).
  "latency_ms": MS sets the added latency of every API and toolbox request (not /_control);
  a POST without it restores DAYTONA_TEST_LATENCY_MS.
  "walk_delay_ms": MS makes every folder the call runner walks in a listing (outputs/ after a
  call, list) wait MS milliseconds before it is read, as a slow or loaded disk would: the
  commands run from then on get SANDBOX_MCP_WALK_DELAY_MS (the runner's WALK_DELAY).
  "no_bash": true makes sandboxes created from then on look like an image without bash: the
  word '/bin/bash' in their commands names a file that does not exist.
  "disk": BYTES gives sandboxes created from then on a disk of that size (0: none, the
  default), as a real sandbox's disk bounds everything written in it: their folder (the
  /workspace, /tmp and /home/daytona of their commands and file requests) is a tmpfs of that
  size, mounted when the sandbox is made and unmounted when it is deleted, so that a write past
  it fails with ENOSPC ("No space left on device") whoever makes it: the commands' processes (the
  call runner's own files included), and this server's file requests (a bulk upload that finds
  no room answers 400 with the daemon's "errors" list, naming the error). It needs root (to
  mount); without it the answer's "disk" stays 0.
"""
import argparse, base64, email.parser, email.policy, json, os, re, shlex, shutil, signal, socket, subprocess
import sys, tempfile, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

KEY = os.environ.get('DAYTONA_TEST_KEY', 'test-key')
START_S = float(os.environ.get('DAYTONA_TEST_START_S', '0.2'))
ROOT = tempfile.mkdtemp(prefix='daytona-test-')
LOCK = threading.Lock()
HOLD, HOLD_GEN = threading.Condition(), [0]  # "slow" holds; a "release" ends them all
SANDBOXES = {}
LATENCY_MS = float(os.environ.get('DAYTONA_TEST_LATENCY_MS', '0'))
CONTROL = {'fail': '', 'count': -1, 'on': 'all', 'seconds': 1, 'memory': 0, 'latency_ms': LATENCY_MS,
           'no_bash': False, 'disk': 0, 'start_s': None, 'busy_delete': False, 'walk_delay_ms': 0}
AFTER = ('500_after', 'truncated', 'malformed', 'reset_after')
CGROUP_V1 = '/sys/fs/cgroup/memory'


def make_cgroup(sid, limit):
    """A memory cgroup of its own for a sandbox (root, cgroup v1), or None."""
    if not limit or os.geteuid() != 0 or not os.path.isdir(CGROUP_V1):
        return None
    d = os.path.join(CGROUP_V1, 'daytona-test-' + sid)
    try:
        os.mkdir(d)
        with open(d + '/memory.limit_in_bytes', 'w') as f:
            f.write(str(limit))
        if os.path.exists(d + '/memory.memsw.limit_in_bytes'):
            with open(d + '/memory.memsw.limit_in_bytes', 'w') as f:
                f.write(str(limit))
    except OSError as x:
        log('no memory cgroup for %s: %s' % (sid, x))
        return None
    return d
REQUESTS = []
MAPPED = re.compile(r'(?<![\w./-])/(workspace|tmp|home/daytona|mnt|dev/shm)(?=[/\s\'";:)]|$)')

def pid_namespace():
    """A real sandbox shows only its own processes; where unshare allows it, each sandbox gets a
    PID namespace (and its own /proc) so that it cannot see or count this host's other processes."""
    for pre in (['unshare', '--pid', '--fork', '--mount-proc'],
                ['unshare', '--user', '--map-root-user', '--pid', '--fork', '--mount-proc']):
        try:
            if subprocess.run(pre + ['true'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10).returncode == 0:
                return pre
        except (OSError, subprocess.TimeoutExpired):
            pass
    return []


NS = pid_namespace() if os.environ.get('DAYTONA_TEST_NO_PIDNS') != '1' else []
# The sandbox's pid 1: reaps orphans, as a container's init does.
INIT = 'import os, time\nwhile True:\n    try:\n        os.wait()\n    except ChildProcessError:\n        time.sleep(0.2)\n'


def start_namespace():
    """A PID namespace for one sandbox: (holder process, prefix that runs a command in it), or
    (None, []). Every command of the sandbox runs in it, so that, as in a real sandbox, an
    orphan is reparented to the sandbox's pid 1 and stays visible to the sandbox's commands."""
    if not NS:
        return None, []
    holder = subprocess.Popen(NS + [sys.executable, '-c', INIT], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(200):
        try:
            with open('/proc/%d/task/%d/children' % (holder.pid, holder.pid)) as f:
                kids = f.read().split()
            if kids:
                pre = ['nsenter', '-t', kids[0]] + (['--user'] if '--user' in NS else []) + ['--pid', '--mount']
                return holder, pre
        except OSError:
            pass
        time.sleep(0.01)
    holder.kill()
    holder.wait()
    return None, []

if os.environ.get('DAYTONA_TEST_FAIL'):
    CONTROL.update(json.loads(os.environ['DAYTONA_TEST_FAIL']))



def bad_allow_list(v):
    """Why a networkAllowList is not what the API takes (a string of comma-separated CIDRs), or None."""
    import ipaddress
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        return 'networkAllowList must be a non-empty string'
    for c in v.split(','):
        try:
            ipaddress.ip_network(c, strict=True)
        except ValueError:
            return 'networkAllowList: invalid CIDR %r' % c
        if '/' not in c:
            return 'networkAllowList: %r has no prefix length' % c
    return None

def log(msg):
    print('daytona-test: ' + msg, file=sys.stderr, flush=True)


def now_iso():
    return time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime())


def semver_ge(v, want):
    try:
        return tuple(int(x) for x in v.split('-')[0].split('.')) >= want
    except ValueError:
        return True  # the daemon treats an unparsable version as newer


def mount_disk(root, size):
    """A disk of size bytes for a sandbox: a tmpfs on its folder (root). True when mounted."""
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=%d,mode=0755' % size, 'tmpfs', root],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        log('no disk of its own for %s: %s' % (root, r.stderr.decode().strip()))
    return r.returncode == 0


class Sandbox:
    def __init__(self, body, base):
        self.id = str(uuid.uuid4())
        self.root = os.path.join(ROOT, self.id)
        os.makedirs(self.root)
        self.disk = bool(CONTROL.get('disk')) and mount_disk(self.root, int(CONTROL['disk']))
        self.shm = self.root + '.shm'
        os.makedirs(self.shm)
        # With a disk, /dev/shm is a tmpfs of Docker's default size, as in a container.
        self.shm_mounted = self.disk and mount_disk(self.shm, 64 << 20)
        for d in ('tmp', 'home/daytona'):
            os.makedirs(os.path.join(self.root, d))
        self.created = time.monotonic()
        self.start_s = START_S if CONTROL.get('start_s') is None else float(CONTROL['start_s'])
        self.never_start = CONTROL['fail'] == 'never_start'
        self.sessions = {}
        self.cgroup = make_cgroup(self.id, CONTROL.get('memory') or 0)
        self.no_bash = bool(CONTROL.get('no_bash'))
        self.holder, self.ns = start_namespace()
        if self.ns:  # its own /dev/shm, for the paths its programs make up too
            r = subprocess.run(self.ns + ['mount', '--bind', self.shm, '/dev/shm'], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
            if r.returncode != 0:
                log('no /dev/shm of its own for %s: %s' % (self.id, r.stderr.decode().strip()))
        labels = dict(body.get('labels') or {})
        labels.setdefault('code-toolbox-language', 'python')
        self.dto = {
            'id': self.id, 'organizationId': 'org-test', 'name': body.get('name') or self.id,
            'user': body.get('user') or 'daytona', 'env': body.get('env') or {}, 'labels': labels,
            'public': bool(body.get('public', False)), 'networkBlockAll': bool(body.get('networkBlockAll', False)),
            'networkAllowList': body.get('networkAllowList'), 'target': body.get('target') or 'us',
            'cpu': body.get('cpu', 1), 'gpu': body.get('gpu', 0), 'memory': body.get('memory', 1),
            'disk': body.get('disk', 3), 'state': 'creating', 'desiredState': 'started', 'errorReason': None,
            'recoverable': False, 'snapshot': body.get('snapshot') or ('' if body.get('buildInfo') else 'daytona-small'),
            'autoStopInterval': body.get('autoStopInterval', 15), 'autoArchiveInterval': body.get('autoArchiveInterval', 10080),
            'autoDeleteInterval': body.get('autoDeleteInterval', -1), 'createdAt': now_iso(), 'updatedAt': now_iso(),
            'daemonVersion': '0.218.0', 'toolboxProxyUrl': base + '/toolbox', 'buildInfo': body.get('buildInfo'),
            'volumes': [], 'backupState': 'None',
        }

    def refresh(self):
        if self.dto['state'] == 'creating' and not self.never_start and time.monotonic() - self.created >= self.start_s:
            self.dto['state'] = 'started'
        return self.dto

    def host(self, p):
        """The host path of a mapped absolute path."""
        return self.shm + p[len('/dev/shm'):] if p.startswith('/dev/shm') else self.root + p

    def path(self, p):
        p = os.path.normpath('/' + p.lstrip('/'))
        if not MAPPED.match(p):
            return None
        return self.host(p)

    def command(self, text):
        if self.no_bash:
            text = text.replace("'/bin/bash'", "'/nonexistent/bin/bash'")
        return MAPPED.sub(lambda m: self.host(m.group(0)), text)

    def enter(self):
        """For preexec_fn: the command joins the sandbox's cgroup, if it has one."""
        if self.cgroup:
            with open(self.cgroup + '/cgroup.procs', 'w') as f:
                f.write(str(os.getpid()))

    def env(self):
        env = {'PATH': '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
               'HOME': self.root + '/home/daytona', 'USER': 'daytona', 'LANG': 'C.UTF-8'}
        if self.holder is None:
            env['SANDBOX_MCP_NO_SWEEP'] = '1'
        with LOCK:
            delay = int(CONTROL.get('walk_delay_ms') or 0)
        if delay > 0:
            env['SANDBOX_MCP_WALK_DELAY_MS'] = str(delay)
        return env

    def kill_all(self):
        for s in list(self.sessions.values()):
            s.close()
        if self.holder is not None:  # the end of the namespace: its pid 1 goes, all of it goes
            try:
                os.killpg(self.holder.pid, signal.SIGKILL)
            except OSError:
                pass
            self.holder.wait()
        if self.cgroup:
            for _ in range(100):
                try:
                    os.rmdir(self.cgroup)
                    break
                except OSError:
                    time.sleep(0.02)

    def remove(self):
        """Deletes it: its processes, its disk, its files."""
        self.kill_all()
        for mounted, d in ((self.disk, self.root), (self.shm_mounted, self.shm)):
            if mounted:
                subprocess.run(['umount', '-l', d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.disk = self.shm_mounted = False
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.shm, ignore_errors=True)


class Command:
    def __init__(self, sandbox, sdir, n, command):
        self.id = 'cmd-%d-%s' % (n, uuid.uuid4().hex[:8])
        self.command = command
        self.out = os.path.join(sdir, self.id + '.out')
        self.err = os.path.join(sdir, self.id + '.err')
        with open(self.out, 'wb') as o, open(self.err, 'wb') as e:
            self.proc = subprocess.Popen(sandbox.ns + ['bash', '-c', sandbox.command(command)], cwd=sandbox.root + '/home/daytona',
                                         env=sandbox.env(), stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                                         start_new_session=True, preexec_fn=sandbox.enter)

    def exit_code(self):
        return self.proc.poll()

    def logs(self):
        with open(self.out, 'rb') as f:
            out = f.read().decode('utf-8', 'replace')
        with open(self.err, 'rb') as f:
            err = f.read().decode('utf-8', 'replace')
        return out, err


class Session:
    def __init__(self, sandbox, sid):
        self.sandbox, self.id = sandbox, sid
        self.dir = tempfile.mkdtemp(prefix='session-', dir=ROOT)
        self.commands = {}

    def close(self):
        for c in self.commands.values():
            if c.proc.poll() is None:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(c.proc.pid, sig)
                    except OSError:
                        pass
                    try:
                        c.proc.wait(0.5)
                        break
                    except subprocess.TimeoutExpired:
                        pass
        shutil.rmtree(self.dir, ignore_errors=True)


def runner_verb(cmd):
    """The call runner's verb (go, poll, kill, ...) in a process/execute command of sandbox-mcp's
    (PYTHON -I -S -c BOOT VERB ...), for the request log; None for any other command. Words are
    read only as far as the verb: what follows (a here-document) is not shell words."""
    lex = shlex.shlex(cmd, posix=True)
    lex.whitespace_split = True
    words = []
    try:
        for w in lex:
            words.append(w)
            if len(words) >= 6:
                break
    except ValueError:
        return None
    return words[5] if words[1:4] == ['-I', '-S', '-c'] and len(words) == 6 else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'daytona-test/1'

    def setup(self):
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm holds the
        # second until the client's delayed ACK (~40 ms per answer), which real servers avoid.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        pass

    # ------------------------------------------------------------ plumbing
    def body(self):
        if getattr(self, 'consumed', False):
            return b''
        self.consumed = True
        if 'chunked' in (self.headers.get('Transfer-Encoding') or '').lower():
            out = []
            while True:
                size = int(self.rfile.readline().split(b';')[0].strip() or b'0', 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b'\n', b''):
                        pass  # trailers
                    return b''.join(out)
                out.append(self.rfile.read(size))
                self.rfile.readline()
        n = int(self.headers.get('Content-Length') or 0)
        return self.rfile.read(n) if n else b''

    def json_body(self):
        b = self.body()
        try:
            return json.loads(b) if b else {}
        except ValueError:
            return None

    def send(self, status, obj=None, raw=None, ctype='application/json', headers=()):
        data = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else b'')
        after, self.after = getattr(self, 'after', None), None
        if after == '500_after':
            return self.error(500, 'An unexpected error occurred.')
        if after == 'reset_after':
            log('reset_after: %s %s handled, the connection reset' % (self.command, urlsplit(self.path).path))
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\x01\x00\x00\x00\x00\x00\x00\x00')
            self.close_connection = True
            self.status = 'dropped'
            self.connection.close()
            return
        if after == 'malformed':
            data = data[:len(data) // 2]
        self.send_response(status)
        if data or status not in (204,):
            self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if after == 'truncated':
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.status = 'dropped'
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if data:
            self.wfile.write(data)
        self.status = status if after is None else '%d (%s)' % (status, after)

    def error(self, status, message, source='DAYTONA_API', code=None, headers=()):
        names = {400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 408: 'Request Timeout',
                 409: 'Conflict', 429: 'Too Many Requests', 500: 'Internal Server Error'}
        body = {'path': self.path, 'timestamp': now_iso(), 'statusCode': status, 'message': message}
        if source == 'DAYTONA_API':
            body['error'] = names.get(status, 'Error')
        else:
            body.update(code=code or names.get(status, 'ERROR').upper().replace(' ', '_'), method=self.command,
                        source=source)
        self.send(status, body, headers=headers)

    def inject(self, area):
        """Applies the configured failure; True when the request was answered (or dropped)."""
        with LOCK:
            mode, on = CONTROL['fail'], CONTROL['on']
            if not mode or mode == 'never_start' or (on != 'all' and on != area) or CONTROL['count'] == 0:
                return False
            if CONTROL.get('method') and CONTROL['method'] != self.command:
                return False
            want, path = CONTROL.get('path'), urlsplit(self.path).path
            if want and (not path.endswith(want[1:]) if want.startswith('*') else want != path):
                return False
            if CONTROL['count'] > 0:
                CONTROL['count'] -= 1
            secs = CONTROL['seconds']
        if mode in AFTER:
            self.after = mode
            return False
        if mode == 'slow':
            log('slow: holding %s %s for %s s' % (self.command, urlsplit(self.path).path, secs))
            with HOLD:
                gen = HOLD_GEN[0]
                HOLD.wait_for(lambda: HOLD_GEN[0] != gen, timeout=secs)
            return False
        if mode == 'drop':
            self.status = 'dropped'
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return True
        if mode == '429':
            self.error(429, 'Rate limit exceeded', headers=[('Retry-After', str(secs)),
                                                             ('Retry-After-authenticated', str(secs))])
        elif mode == '401':
            self.error(401, 'Unauthorized')
        else:
            self.error(int(mode) if mode.isdigit() else 500, 'An unexpected error occurred.')
        return True

    def handle_any(self, method):
        t0 = time.monotonic()
        self.status, self.consumed, self.after, self.verb = None, False, None, None
        url = urlsplit(self.path)
        self.query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [unquote(p) for p in url.path.split('/') if p]
        try:
            if parts[:1] == ['_control']:
                return self.control(method)
            area = 'toolbox' if parts[:1] == ['toolbox'] else 'api'
            with LOCK:
                latency = float(CONTROL.get('latency_ms') or 0)
            if latency > 0:
                time.sleep(latency / 1000)
            if self.headers.get('Authorization') != 'Bearer ' + KEY:
                self.body()
                msg = 'authentication failed: invalid API key' if area == 'toolbox' else 'Unauthorized'
                return self.error(401, msg, source='DAYTONA_PROXY' if area == 'toolbox' else 'DAYTONA_API')
            if self.inject(area):
                return
            if area == 'toolbox':
                return self.toolbox(method, parts[1:])
            if parts[:1] != ['api']:
                return self.error(404, 'Cannot %s %s' % (method, url.path))
            return self.api(method, parts[1:])
        except (BrokenPipeError, ConnectionResetError):
            self.status = 'client gone'
        except Exception as x:  # a bug here must show, not hang the client
            log('error handling %s %s: %r' % (method, self.path, x))
            if self.status is None:
                self.error(500, 'test server error: %r' % x)
        finally:
            if self.status != 'dropped':
                self.body()  # never leave a request body unread on a kept-alive connection
            if parts[:1] != ['_control']:
                entry = {'method': method, 'path': url.path, 'status': self.status,
                         'source': self.headers.get('X-Daytona-Source'),
                         'sdk_version': self.headers.get('X-Daytona-SDK-Version'),
                         'user_agent': self.headers.get('User-Agent'),
                         'ms': round((time.monotonic() - t0) * 1000), 'verb': self.verb}
                with LOCK:
                    REQUESTS.append(entry)
                log('%s %s -> %s (source %s, sdk %s)' % (method, self.path, self.status, entry['source'],
                                                         entry['sdk_version']))

    do_GET = lambda self: self.handle_any('GET')
    do_POST = lambda self: self.handle_any('POST')
    do_DELETE = lambda self: self.handle_any('DELETE')
    do_PUT = lambda self: self.handle_any('PUT')

    def control(self, method):
        if method == 'POST':
            b = self.json_body() or {}
            release = b.pop('release', False)  # an act, not a setting: not kept in CONTROL
            with LOCK:
                CONTROL.update({'fail': '', 'count': -1, 'on': 'all', 'seconds': 1, 'method': '', 'path': '',
                                'memory': 0, 'latency_ms': LATENCY_MS, 'no_bash': False, 'disk': 0,
                                'start_s': None, 'busy_delete': False, 'walk_delay_ms': 0})
                CONTROL.update(b)
                if CONTROL['disk'] and os.geteuid() != 0:
                    CONTROL['disk'] = 0  # cannot mount: the answer says so
                if b.get('clear_log'):
                    REQUESTS.clear()
            if release:
                with HOLD:
                    HOLD_GEN[0] += 1
                    HOLD.notify_all()
        with LOCK:
            state = dict(CONTROL, requests=list(REQUESTS),
                         sandboxes={k: v.dto for k, v in SANDBOXES.items()})
        self.send(200, state)

    # ------------------------------------------------------------ control-plane API
    def sandbox(self, ref):
        with LOCK:
            s = SANDBOXES.get(ref) or next((x for x in SANDBOXES.values() if x.dto['name'] == ref), None)
        if s is None:
            self.error(404, 'Sandbox with ID or name %s not found' % ref)
        return s

    def api(self, method, p):
        base = 'http://%s:%d' % self.server.server_address[:2]
        if p == ['sandbox'] and method == 'GET':
            labels = json.loads(self.query.get('labels') or '{}')
            with LOCK:
                items = [s.refresh() for s in SANDBOXES.values()
                         if all(s.dto['labels'].get(k) == v for k, v in labels.items())]
            limit = int(float(self.query.get('limit', 100)))
            return self.send(200, {'items': items[:limit], 'nextCursor': None})
        if p == ['sandbox'] and method == 'POST':
            body = self.json_body()
            if not isinstance(body, dict):
                return self.error(400, 'Invalid JSON body')
            if body.get('snapshot') and body.get('buildInfo'):
                return self.error(400, 'Cannot specify both snapshot and buildInfo')
            if body.get('snapshot') and any(k in body for k in ('cpu', 'gpu', 'memory', 'disk')):
                return self.error(400, 'Cannot specify Sandbox resources when using a snapshot')
            for k in ('autoStopInterval', 'autoDeleteInterval', 'autoArchiveInterval'):
                if k in body and not isinstance(body[k], int):
                    return self.error(400, '%s must be an integer number' % k)
            why = bad_allow_list(body.get('networkAllowList'))
            if why:
                return self.error(400, why)
            s = Sandbox(body, base)
            with LOCK:
                SANDBOXES[s.id] = s
            log('create %s: %s' % (s.id, json.dumps({k: body.get(k) for k in ('networkAllowList', 'networkBlockAll')},
                                                    sort_keys=True)))
            return self.send(200, s.refresh())
        if len(p) >= 2 and p[0] == 'sandbox':
            s = self.sandbox(p[1])
            if s is None:
                return
            if len(p) == 2 and method == 'GET':
                return self.send(200, s.refresh())
            if len(p) == 2 and method == 'DELETE':
                if CONTROL.get('busy_delete') and s.refresh()['state'] == 'creating':
                    return self.error(409, 'Sandbox state change in progress')
                with LOCK:
                    SANDBOXES.pop(s.id, None)
                s.remove()
                s.dto.update(state='destroyed', desiredState='destroyed')
                return self.send(200, s.dto)
            if p[2:] == ['network-settings'] and method == 'POST':
                b = self.json_body() or {}
                why = bad_allow_list(b.get('networkAllowList'))
                if why:
                    return self.error(400, why)
                for k in ('networkBlockAll', 'networkAllowList', 'domainAllowList'):
                    if k in b:
                        s.dto[k] = b[k]
                log('network-settings %s: %s' % (s.id, json.dumps(b, sort_keys=True)))
                return self.send(200, s.refresh())
            if p[2:] == ['toolbox-proxy-url'] and method == 'GET':
                return self.send(200, {'url': base + '/toolbox'})
        if p == ['config'] and method == 'GET':
            return self.send(200, {'version': '0.218.0', 'defaultSnapshot': 'daytona-small'})
        self.error(404, 'Cannot %s /api/%s' % (method, '/'.join(p)))

    # ------------------------------------------------------------ toolbox
    def toolbox(self, method, p):
        if not p:
            return self.error(404, 'no sandbox', source='DAYTONA_PROXY')
        with LOCK:
            s = SANDBOXES.get(p[0])
        if s is None or s.refresh()['state'] != 'started':
            self.body()
            return self.error(404, 'sandbox not found or not started', source='DAYTONA_PROXY', code='NOT_FOUND')
        p = p[1:]
        split = semver_ge(self.headers.get('X-Daytona-SDK-Version') or '0', (0, 167, 0))
        if p == ['files', 'bulk-upload'] and method == 'POST':
            return self.upload(s)
        if p == ['files', 'download'] and method == 'GET':
            f = s.path(self.query.get('path', ''))
            if not f or not os.path.exists(f):
                return self.error(404, 'file not found', source='DAYTONA_DAEMON', code='FILE_NOT_FOUND')
            if os.path.isdir(f):
                return self.error(400, 'path is a directory', source='DAYTONA_DAEMON')
            with open(f, 'rb') as fh:
                return self.send(200, raw=fh.read(), ctype='application/octet-stream')
        if p == ['files', 'bulk-download'] and method == 'POST':
            return self.bulk_download(s)
        if p == ['files'] and method == 'DELETE':
            f = s.path(self.query.get('path', ''))
            if not f or not os.path.exists(f):
                return self.error(404, 'file not found', source='DAYTONA_DAEMON', code='FILE_NOT_FOUND')
            shutil.rmtree(f) if os.path.isdir(f) else os.unlink(f)
            return self.send(204)
        if p == ['process', 'execute'] and method == 'POST':
            return self.execute(s)
        if p == ['process', 'session'] and method == 'POST':
            b = self.json_body() or {}
            sid = b.get('sessionId')
            if not sid or sid == 'entrypoint':
                return self.error(400, 'invalid session id', source='DAYTONA_DAEMON', code='BAD_REQUEST')
            with LOCK:
                if sid in s.sessions:
                    return self.error(409, 'session already exists', source='DAYTONA_DAEMON', code='CONFLICT')
                s.sessions[sid] = Session(s, sid)
            return self.send(201)
        if len(p) >= 3 and p[:2] == ['process', 'session']:
            sess = s.sessions.get(p[2])
            if sess is None:
                self.body()
                return self.error(404, 'session not found', source='DAYTONA_DAEMON', code='NOT_FOUND')
            if len(p) == 3 and method == 'DELETE':
                with LOCK:
                    s.sessions.pop(sess.id, None)
                sess.close()
                return self.send(204)
            if len(p) == 3 and method == 'GET':
                return self.send(200, {'sessionId': sess.id, 'commands': [
                    dict({'id': c.id, 'command': c.command}, **({'exitCode': c.exit_code()} if c.exit_code() is not None else {}))
                    for c in sess.commands.values()]})
            if p[3:] == ['exec'] and method == 'POST':
                b = self.json_body() or {}
                if not (b.get('command') or '').strip():
                    return self.error(400, 'command is required', source='DAYTONA_DAEMON', code='BAD_REQUEST')
                c = Command(s, sess.dir, len(sess.commands), b['command'])
                sess.commands[c.id] = c
                if b.get('runAsync') or b.get('async'):
                    return self.send(202, {'cmdId': c.id})
                c.proc.wait()
                out, err = c.logs()
                r = {'cmdId': c.id, 'exitCode': c.proc.returncode, 'output': out + err}
                if split:
                    r.update(stdout=out, stderr=err)
                return self.send(200, r)
            if len(p) >= 5 and p[3] == 'command':
                c = sess.commands.get(p[4])
                if c is None:
                    return self.error(404, 'command not found', source='DAYTONA_DAEMON', code='NOT_FOUND')
                if len(p) == 5 and method == 'GET':
                    r = {'id': c.id, 'command': c.command}
                    if c.exit_code() is not None:
                        r['exitCode'] = c.exit_code()
                    return self.send(200, r)
                if p[5:] == ['logs'] and method == 'GET':
                    out, err = c.logs()
                    if split:
                        return self.send(200, {'output': out + err, 'stdout': out, 'stderr': err})
                    return self.send(200, raw=(out + err).encode(), ctype='text/plain')
        self.error(404, 'Cannot %s /%s' % (method, '/'.join(p)), source='DAYTONA_DAEMON', code='NOT_FOUND')

    def upload(self, s):
        ctype = self.headers.get('Content-Type', '')
        raw = self.body()
        if not ctype.startswith('multipart/form-data'):
            return self.error(400, 'expected multipart/form-data', source='DAYTONA_DAEMON', code='BAD_REQUEST')
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b'Content-Type: ' + ctype.encode() + b'\r\n\r\n' + raw)
        paths, done = {}, []
        for part in msg.iter_parts():
            name = part.get_param('name', header='content-disposition') or ''
            m = re.fullmatch(r'files\[(\d+)\]\.(path|file)', name)
            if not m:
                continue
            i = m.group(1)
            if m.group(2) == 'path':
                paths[i] = part.get_payload(decode=True).decode()
                continue
            if i not in paths:  # the daemon streams parts and needs the path first
                return self.error(400, 'missing .path metadata for files[%s]' % i, source='DAYTONA_DAEMON',
                                  code='BAD_REQUEST')
            dest = s.path(paths[i])
            if not dest:
                return self.error(403, 'permission denied: %s' % paths[i], source='DAYTONA_DAEMON',
                                  code='FILE_ACCESS_DENIED')
            data = part.get_payload(decode=True) or b''
            try:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, 'wb') as f:
                    f.write(data)
            except OSError as x:  # as the daemon (Go) words it
                return self.send(400, {'errors': ['files[%s]: write %s: %s' % (i, paths[i], (x.strerror or '').lower())],
                                       'files': done})
            done.append({'path': paths[i], 'bytes': len(data)})
        self.send(200, {'files': done})

    def bulk_download(self, s):
        b = self.json_body() or {}
        if not isinstance(b.get('paths'), list):
            return self.error(400, 'paths is required', source='DAYTONA_DAEMON', code='BAD_REQUEST')
        B = b'DAYTONA-FILE-BOUNDARY'
        out = []
        for path in b['paths']:
            f = s.path(str(path))
            if f and os.path.isfile(f):
                with open(f, 'rb') as fh:
                    data = fh.read()
                head = ('Content-Disposition: form-data; name="file"; filename="%s"\r\n'
                        'Content-Type: application/octet-stream\r\nContent-Length: %d\r\n' % (path, len(data)))
            else:
                data = json.dumps({'statusCode': 404, 'message': 'file not found: %s' % path, 'code': 'FILE_NOT_FOUND',
                                   'source': 'DAYTONA_DAEMON'}).encode()
                head = ('Content-Disposition: form-data; name="error"; filename="%s"\r\n'
                        'Content-Type: application/json\r\n' % path)
            out.append(b'--' + B + b'\r\n' + head.encode() + b'\r\n' + data + b'\r\n')
        out.append(b'--' + B + b'--\r\n')
        self.send(200, raw=b''.join(out), ctype='multipart/form-data; boundary=' + B.decode())

    def execute(self, s):
        b = self.json_body() or {}
        cmd = b.get('command') or ''
        self.verb = runner_verb(cmd)
        if not cmd.strip():
            return self.error(400, 'command is required', source='DAYTONA_DAEMON', code='BAD_REQUEST')
        env = s.env()
        for k, v in (b.get('envs') or {}).items():
            if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', k):
                return self.error(400, 'invalid env name %s' % k, source='DAYTONA_DAEMON', code='BAD_REQUEST')
            env[k] = v
        cwd = s.path(b['cwd']) if b.get('cwd') else s.root + '/home/daytona'
        p = subprocess.Popen(s.ns + ['bash'], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=s.enter)
        try:
            out, _ = p.communicate(s.command(cmd).encode(), timeout=b.get('timeout') or None)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return self.error(408, 'command execution timeout', source='DAYTONA_DAEMON', code='REQUEST_TIMEOUT')
        self.send(200, {'exitCode': p.returncode, 'result': out.decode('utf-8', 'replace')})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--port-file')
    a = ap.parse_args()
    srv = ThreadingHTTPServer(('127.0.0.1', a.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + '.tmp', 'w') as f:
            f.write('%d\n' % port)
        os.rename(a.port_file + '.tmp', a.port_file)
    log('commands run %s' % ('in a PID namespace per sandbox' if NS else "in this host's PID namespace"))
    log('listening on http://127.0.0.1:%d (API base http://127.0.0.1:%d/api), sandboxes in %s' % (port, port, ROOT))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        for s in list(SANDBOXES.values()):
            s.remove()
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == '__main__':
    main()
