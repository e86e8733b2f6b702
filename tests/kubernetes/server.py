#!/usr/bin/env python3
"""A loopback Kubernetes API test server: the subset of the API that a sandbox backend uses,
with the paths, verbs, bodies, status codes and streams of the real API server, so that a
client written against it works against a cluster. Python's standard library only (with the
openssl command for its certificates). It is itself checked with the official JavaScript
client, @kubernetes/client-node (client-check/).

What it follows:
  - The Kubernetes API reference (kubernetes.io/docs/reference/kubernetes-api/) and the API
    conventions (git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md):
    metav1.Status errors (reason AlreadyExists, NotFound, Invalid with details.causes,
    Conflict, Forbidden, Unauthorized, Expired with code 410), lists with
    metadata.resourceVersion, label selectors (labels.Parse: =, ==, !=, in, notin, exists,
    !exists), field selectors on metadata.name, metadata.namespace and status.phase, watch
    streams (chunked; one
    JSON watch event per line: ADDED, MODIFIED, DELETED, ERROR with a 410 Status when the
    asked resourceVersion is too old), delete with a grace period (the object gets
    metadata.deletionTimestamp, then goes with a DELETED event).
  - core/v1 Pod (pod-v1 reference): the spec is stored as sent; validated: names (DNS-1123),
    labels (the label syntax), containers, command/args, resources (quantities, requests not
    above limits), securityContext (types; privileged with allowPrivilegeEscalation false is
    invalid, as in apis/core/validation), volumes (emptyDir, sizeLimit a quantity, and
    persistentVolumeClaim),
    volumeMounts, activeDeadlineSeconds, runtimeClassName (must name a known RuntimeClass, as
    the RuntimeClass admission plugin checks), automountServiceAccountToken, restartPolicy.
    Status: Pending (PodScheduled) then Running with the Ready, ContainersReady and
    Initialized conditions, containerStatuses; Failed with reason DeadlineExceeded past
    activeDeadlineSeconds; Succeeded or Failed when the container's command ends (whatever
    the restartPolicy: this server restarts nothing).
  - pods/exec over WebSocket, as the API server and kubelet serve it and client-go's
    remotecommand (k8s.io/client-go/tools/remotecommand, websocket.go) and
    k8s.io/apimachinery/pkg/util/httpstream/wsstream speak it: subprotocols
    v5.channel.k8s.io and v4.channel.k8s.io, binary frames whose first byte is the channel
    (0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize), the status on channel 3 as a
    metav1.Status JSON (Success, or Failure with reason NonZeroExitCode and the exit code in
    details.causes[{reason: ExitCode}]), and, in v5 only, channel 255 (CLOSE) whose next byte
    names the stream the client closes (stdin: the command reads end-of-file). The
    WebSocket framing is RFC 6455, written here: the handshake (Sec-WebSocket-Accept),
    masked client frames (an unmasked one is a protocol error, 1002), fragmented messages,
    ping/pong, close; messages over 16 MiB are refused (1009). tty=true is not supported
    (400). A stream stays open for as long as the command runs and the client keeps it; a
    command whose connection goes keeps running, its stdin at end-of-file, as under a kubelet.
    pods/attach speaks the same, to the container's command itself when its spec says stdin:
    true: its stdin, and its stdout from the moment of attaching (what it wrote before went to
    its log), the status when it ends; with stdinOnce, its stdin ends when the first attach
    closes it or goes (as the kubelet does).
  - core/v1 PersistentVolumeClaim (persistent-volume-claim-v1 reference; the storage concepts
    page, kubernetes.io/docs/concepts/storage/persistent-volumes/): create, get, list, watch,
    delete; spec.accessModes and spec.resources.requests.storage validated; bound at once (a
    provisioner with Immediate binding: spec.volumeName, status.phase Bound, status.accessModes,
    status.capacity.storage the request). Its volume is a folder of this server's that outlives
    pods (a tmpfs of the capacity, at most 1 GiB, in this server's own mount namespace, when
    sandboxed), bound into each pod whose volume names the claim (persistentVolumeClaim
    {claimName, readOnly}); securityContext.fsGroup is applied to it as the kubelet's
    SetVolumeOwnership does (lchown, group rw, folders setgid; fsGroupChangePolicy
    OnRootMismatch: only where the root is not so). A pod whose claim does not exist stays
    Pending with PodScheduled False, reason Unschedulable, message 'persistentvolumeclaim "NAME"
    not found', as the scheduler's VolumeBinding plugin says, until the claim is made. Not
    simulated: storage classes, access modes' enforcement, the pvc-protection finalizer.
  - networking.k8s.io/v1 NetworkPolicy: stored (create, get, list, watch, delete), not
    enforced. authorization.k8s.io/v1 SelfSubjectAccessReview: answered from a configurable
    set (see "access"), which also governs the requests themselves (403 Forbidden).
  - The agent-sandbox CRDs (github.com/kubernetes-sigs/agent-sandbox, api/v1alpha1 and
    extensions/api/v1alpha1): agents.x-k8s.io/v1alpha1 Sandbox (spec.podTemplate; its pod
    has the Sandbox's name), extensions.agents.x-k8s.io/v1alpha1 SandboxTemplate
    (spec.podTemplate), SandboxWarmPool (spec.replicas, spec.sandboxTemplateRef.name: keeps
    that many unclaimed Sandboxes), SandboxClaim (spec.sandboxTemplateRef.name,
    spec.warmpool "none"|"default"|a pool's name: adopts a warm Sandbox, or makes one;
    status.sandbox.name, status.conditions Ready). automountServiceAccountToken defaults to
    false in pods made from a template, as its controller does. Status is computed when read.
  - Authentication: HTTPS with a CA this server makes (openssl), a bearer token, or a client
    certificate signed by that CA (the user is its CN). A kubeconfig (clientcmd's v1 Config)
    with both users is written with --kubeconfig-out.

Pods run here: each pod is a PID, mount, UTS and network namespace (unshare, as root) whose
pid 1 (podinit.py, which then becomes the container's command) makes its root, a tmpfs with the host's /usr read-only, one tmpfs per
emptyDir volume (of its sizeLimit, at most 1 GiB: it is this host's memory), pivots into it,
and runs the container's command and args as its securityContext's runAsUser/runAsGroup, with
a container runtime's default capabilities less capabilities.drop plus capabilities.add (all
when privileged), no_new_privs when allowPrivilegeEscalation is false; exec runs in the same
namespaces and root the same way (nsenter, setpriv). Not simulated: seccomp profiles, memory
and CPU limits (see "evict" for an OOM kill), image pulls. A pod without a command runs
"sleep infinity" (the simulated image's entrypoint). Its network namespace has a loopback only:
a pod reaches nothing, this server included (NetworkPolicies are stored, not enforced).
Without root, or where unshare is refused, the commands run on this host in a folder of the
pod's, as this server's user (the log and GET /_control's "sandboxed" say so).

Usage: server.py [--port N] [--port-file FILE] [--kubeconfig-out FILE] [--token T]
  --token (or K8S_TEST_TOKEN): the bearer token it accepts (default "test-token").
Control (no auth): POST /_control with JSON; every POST first restores the defaults below,
then applies what it names. GET /_control: the state, the request log and the pods.
  "latency_ms": MS      added before every API request is handled (default 0)
  "fail": {"status": 500|503|..., "method": M, "path": GLOB, "count": N}
                        answer matching requests (fnmatch on the path) with that status (a
                        metav1.Status); count: how many (default all)
  "exec_drop_ms": MS    exec streams that start from now on lose their connection MS ms after
                        their first output (no status, no close frame), as when a node or
                        proxy goes away
  "watch_end_ms": MS    watches that start from now on end (a clean end of the stream) MS ms in
  "attach_flood": TEXT  attach streams that start from now on, once the client's stdin holds
                        TEXT, read nothing more and send it pings without end (a stalled server)
  "attach_cut": TEXT    attach streams that start from now on, once the client's stdin holds
                        TEXT, lose their connection (no close frame), as when a node goes away
  "attach_hold": {"on": TEXT, "ms": MS}
                        attach streams that start from now on hold the client's stdin MS ms
                        before passing on the message that holds TEXT (a slow node)
  "attach_raw": {"on": TEXT, "hex": HEX}
                        attach streams that start from now on, once the client's stdin holds
                        TEXT, get those bytes as they are (a frame too large, masked, ...)
  "exec_flood": true    exec streams that start from now on read nothing and send pings without
                        end, until the client goes (then the command's stdin ends)
  "exec_flood": "after_stdin"
                        the same, once the client has closed its stdin (v5): what it sent is
                        the command's, whose stdin stays open; nothing more is read, and the
                        command's status is held back until the client goes
  "busy_delete": true   a DELETE of a pod still Pending answers 409 Conflict
  "start_ms": MS        how long a pod stays Pending (default 200)
  "access": {"VERB RESOURCE[/SUB][.GROUP]": bool}, "access_default": bool (default true)
                        what SelfSubjectAccessReview answers and what is allowed
  "runtime_classes": [names] (default ["gvisor", "kata"])
  "agent_sandbox": bool the agent-sandbox CRDs installed (default true)
  "pvc_gone_on_pod": true
                        a pod's PersistentVolumeClaims are deleted as the pod is made (an admin's
                        delete racing it): the pod stays Pending, Unschedulable
  "template_hash_label": false   warm pools filled from now on make pods without the
                       agents.x-k8s.io/sandbox-template-ref-hash label, as a controller older than
                       that label does
  "claim_bind_ms": MS   SandboxClaims made from now on are bound MS ms after they are made (their
                        status names no Sandbox until then), as a controller does in its time
  "evict": {"namespace": NS, "name": POD, "reason": "Evicted"|"OOMKilled"}
                        kills the pod's processes: Evicted: phase Failed, reason Evicted;
                        OOMKilled: the container terminated with reason OOMKilled, 137
  "clear_log": true     empties the request log
"""
import argparse, base64, copy, ctypes, fnmatch, hashlib, hmac, json, os, re, shutil, signal, socket, ssl
import select, struct, subprocess, sys, tempfile, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = tempfile.mkdtemp(prefix='k8s-test-')
LOCK = threading.RLock()
COND = threading.Condition(LOCK)
TOKEN = os.environ.get('K8S_TEST_TOKEN', 'test-token')
DEFAULTS = {'latency_ms': 0, 'fail': None, 'exec_drop_ms': 0, 'watch_end_ms': 0, 'attach_flood': '', 'attach_cut': '', 'attach_raw': None, 'attach_hold': None,
            'exec_flood': False,
            'busy_delete': False,
            'start_ms': 200, 'access': {}, 'access_default': True, 'runtime_classes': ['gvisor', 'kata'],
            'agent_sandbox': True, 'claim_bind_ms': 0, 'pvc_gone_on_pod': False,
            'template_hash_label': True}
CONTROL = copy.deepcopy(DEFAULTS)
REQUESTS = []
OBJECTS = {}  # (resource key, namespace, name) -> object (pods: the Pod's .obj)
VOLUMES = {}  # (namespace, claim name) -> the folder of its volume (a tmpfs of its capacity, when sandboxed)
PODS = {}     # (namespace, name) -> Pod
ALL_PODS = []  # every Pod made, so that none outlives this server
EVENTS = []   # (resourceVersion, resource key, type, object copy), the last MAX_EVENTS
MAX_EVENTS = 2000
MAX_LOG = 10000  # request log entries kept
RV = [1000]
MAX_BODY = 4 << 20
MAX_MESSAGE = 16 << 20
GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'

# resource key -> (group, version, kind, namespaced). Core resources have group ''.
RESOURCES = {
    'pods': ('', 'v1', 'Pod'),
    'persistentvolumeclaims': ('', 'v1', 'PersistentVolumeClaim'),
    'networkpolicies': ('networking.k8s.io', 'v1', 'NetworkPolicy'),
    'sandboxes': ('agents.x-k8s.io', 'v1alpha1', 'Sandbox'),
    'sandboxtemplates': ('extensions.agents.x-k8s.io', 'v1alpha1', 'SandboxTemplate'),
    'sandboxclaims': ('extensions.agents.x-k8s.io', 'v1alpha1', 'SandboxClaim'),
    'sandboxwarmpools': ('extensions.agents.x-k8s.io', 'v1alpha1', 'SandboxWarmPool'),
}
AGENT_GROUPS = ('agents.x-k8s.io', 'extensions.agents.x-k8s.io')
DNS_LABEL = re.compile(r'[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
DNS_SUBDOMAIN = re.compile(r'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
LABEL_NAME = re.compile(r'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$')
QUANTITY = re.compile(r'([+-]?[0-9.]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]+)?$')
SUFFIX = {None: 1, 'm': 1e-3, 'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12, 'P': 1e15, 'E': 1e18,
          'Ki': 1 << 10, 'Mi': 1 << 20, 'Gi': 1 << 30, 'Ti': 1 << 40, 'Pi': 1 << 50, 'Ei': 1 << 60}


def log(msg):
    print('k8s-test: ' + msg, file=sys.stderr, flush=True)


def now_iso():
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


def next_rv():
    RV[0] += 1
    return str(RV[0])


def quantity(v):
    """A resource.Quantity's value, or None when it is not one."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    m = QUANTITY.match(v) if isinstance(v, str) else None
    if not m:
        return None
    try:
        n = float(m.group(1))
    except ValueError:
        return None
    s = m.group(2)
    return n * (10 ** int(s[1:]) if s and s.startswith('e') else SUFFIX[s])


def status_obj(code, reason, message, details=None):
    s = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'message': message,
         'reason': reason, 'code': code}
    if details:
        s['details'] = details
    return s


REASONS = {400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 405: 'MethodNotAllowed',
           409: 'Conflict', 410: 'Expired', 413: 'RequestEntityTooLarge', 415: 'UnsupportedMediaType',
           422: 'Invalid', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout'}


class ApiError(Exception):
    def __init__(self, code, message, reason=None, details=None):
        super().__init__(message)
        self.status = status_obj(code, reason or REASONS.get(code, 'Unknown'), message, details)


def invalid(kind, name, causes):
    msg = '%s "%s" is invalid: %s' % (kind, name, ', '.join('%s: %s' % (c['field'], c['message']) for c in causes))
    return ApiError(422, msg, 'Invalid', {'name': name, 'kind': kind,
                                          'causes': [dict(c, reason='FieldValueInvalid') for c in causes]})


# ---------------------------------------------------------------- label selectors
def parse_selector(text):
    """labels.Parse: a list of (key, op, values); ApiError 400 when it does not parse."""
    reqs = []
    for part in re.findall(r'(?:[^,(]|\([^)]*\))+', text or ''):
        part = part.strip()
        if not part:
            continue
        m = (re.fullmatch(r'([^\s!=]+)\s*(==|=|!=)\s*([^\s,]*)', part) or
             re.fullmatch(r'([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)', part) or
             re.fullmatch(r'(!?)\s*([^\s!=(),]+)', part))
        if not m:
            raise ApiError(400, 'unable to parse requirement: %r' % part)
        if m.re.pattern.startswith('(!?)'):
            reqs.append((m.group(2), '!' if m.group(1) else 'exists', []))
        elif m.group(2) in ('in', 'notin'):
            reqs.append((m.group(1), m.group(2), [v.strip() for v in m.group(3).split(',')]))
        else:
            reqs.append((m.group(1), '!=' if m.group(2) == '!=' else '=', [m.group(3)]))
    return reqs


def selector_matches(reqs, labels):
    for k, op, vals in reqs:
        have = k in labels
        if op == '=' and labels.get(k) != vals[0]:
            return False
        if op == '!=' and have and labels[k] == vals[0]:
            return False
        if op == 'in' and labels.get(k) not in vals:
            return False
        if op == 'notin' and have and labels[k] in vals:
            return False
        if op == 'exists' and not have or op == '!' and have:
            return False
    return True


def field_matches(text, obj):
    for part in filter(None, (text or '').split(',')):
        m = re.fullmatch(r'([a-zA-Z.]+)(==|=|!=)(.*)', part)
        if not m or m.group(1) not in ('metadata.name', 'metadata.namespace', 'status.phase'):
            raise ApiError(400, 'field label not supported: %s' % part.split('=')[0])
        a, b = m.group(1).split('.')
        have = (obj.get(a) or {}).get(b, '')
        if (have == m.group(3)) != (m.group(2) != '!='):
            return False
    return True


# ---------------------------------------------------------------- store and events
def record(key, typ, obj):
    """Records a watch event (LOCK held): obj gets a new resourceVersion."""
    obj['metadata']['resourceVersion'] = next_rv()
    EVENTS.append((int(obj['metadata']['resourceVersion']), key, typ, copy.deepcopy(obj)))
    del EVENTS[:-MAX_EVENTS]
    COND.notify_all()


def new_meta(meta, ns):
    if meta is not None and not isinstance(meta, dict):
        raise ApiError(400, 'metadata: must be an object')
    meta = dict(meta or {})
    if not isinstance(meta.get('generateName', ''), str):
        raise ApiError(400, 'metadata.generateName: must be a string')
    if not meta.get('name') and meta.get('generateName'):
        meta['name'] = meta['generateName'] + uuid.uuid4().hex[:5]
    meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now_iso(), generation=1)
    return meta


def check_meta(kind, meta, causes):
    name = meta.get('name')
    if not isinstance(name, str) or not name:
        causes.append({'field': 'metadata.name', 'message': 'Required value: name or generateName is required'})
    elif len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        causes.append({'field': 'metadata.name', 'message': 'Invalid value: "%s": a lowercase RFC 1123 subdomain '
                       'must consist of lower case alphanumeric characters, \'-\' or \'.\'' % name})
    for field in ('labels', 'annotations'):
        v = meta.get(field)
        if v is not None and (not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values())):
            causes.append({'field': 'metadata.' + field, 'message': 'Invalid value: must be a map of strings'})
    for k, v in (meta.get('labels') or {}).items():
        prefix, _, nm = k.rpartition('/')
        if (not nm or len(nm) > 63 or not LABEL_NAME.match(nm) or
                prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix))):
            causes.append({'field': 'metadata.labels', 'message': 'Invalid value: "%s": name part must consist of '
                           'alphanumeric characters, \'-\', \'_\' or \'.\'' % k})
        if isinstance(v, str) and v and (len(v) > 63 or not LABEL_NAME.match(v)):
            causes.append({'field': 'metadata.labels', 'message': 'Invalid value: "%s": a valid label must be an empty '
                           'string or consist of alphanumeric characters, \'-\', \'_\' or \'.\'' % v})


# ---------------------------------------------------------------- pod validation
def check_pod(body):
    causes = []
    add = lambda f, m: causes.append({'field': f, 'message': m})
    meta = body.get('metadata') or {}
    check_meta('Pod', meta, causes)
    spec = body.get('spec')
    if not isinstance(spec, dict):
        add('spec', 'Required value')
        return causes
    for f in ('automountServiceAccountToken', 'hostNetwork', 'hostPID', 'hostIPC'):
        if f in spec and not isinstance(spec[f], bool):
            add('spec.' + f, 'Invalid value: must be a boolean')
    ads = spec.get('activeDeadlineSeconds')
    if ads is not None and (not isinstance(ads, int) or isinstance(ads, bool) or ads < 1):
        add('spec.activeDeadlineSeconds', 'Invalid value: %s: must be between 1 and 2147483647, inclusive' % json.dumps(ads))
    tgs = spec.get('terminationGracePeriodSeconds')
    if tgs is not None and (not isinstance(tgs, int) or tgs < 0):
        add('spec.terminationGracePeriodSeconds', 'Invalid value: must be greater than or equal to 0')
    rp = spec.get('restartPolicy', 'Always')
    if rp not in ('Always', 'OnFailure', 'Never'):
        add('spec.restartPolicy', 'Unsupported value: %s: supported values: "Always", "OnFailure", "Never"' % json.dumps(rp))
    rc = spec.get('runtimeClassName')
    if rc is not None and (not isinstance(rc, str) or not DNS_SUBDOMAIN.match(rc)):
        add('spec.runtimeClassName', 'Invalid value: %s: a lowercase RFC 1123 subdomain' % json.dumps(rc))
    check_security('spec.securityContext', spec.get('securityContext'), add, pod=True)
    vols = {}
    if not isinstance(spec.get('volumes') or [], list):
        add('spec.volumes', 'Invalid value: must be a list')
        spec['volumes'] = None
    for i, v in enumerate(spec.get('volumes') or []):
        f = 'spec.volumes[%d]' % i
        name = v.get('name') if isinstance(v, dict) else None
        if not isinstance(name, str) or not DNS_LABEL.match(name):
            add(f + '.name', 'Invalid value: %s: a lowercase RFC 1123 label' % json.dumps(name))
            continue
        if name in vols:
            add(f + '.name', 'Duplicate value: "%s"' % name)
        kinds = [k for k in v if k != 'name']
        if kinds == ['persistentVolumeClaim']:
            pvc = v['persistentVolumeClaim']
            if not isinstance(pvc, dict) or not isinstance(pvc.get('claimName'), str) or \
                    not DNS_SUBDOMAIN.match(pvc['claimName']):
                add(f + '.persistentVolumeClaim.claimName', 'Required value')
            elif 'readOnly' in pvc and not isinstance(pvc['readOnly'], bool):
                add(f + '.persistentVolumeClaim.readOnly', 'Invalid value: must be a boolean')
            vols[name] = v
            continue
        if kinds != ['emptyDir']:
            add(f, 'Unsupported value: this server has emptyDir and persistentVolumeClaim volumes only')
            continue
        ed = v['emptyDir'] or {}
        if not isinstance(ed, dict):
            add(f + '.emptyDir', 'Invalid value: must be an object')
            continue
        if ed.get('medium', '') not in ('', 'Memory'):
            add(f + '.emptyDir.medium', 'Unsupported value: %s' % json.dumps(ed.get('medium')))
        if 'sizeLimit' in ed and (quantity(ed['sizeLimit']) is None or quantity(ed['sizeLimit']) < 0):
            add(f + '.emptyDir.sizeLimit', 'Invalid value: %s: must be a quantity' % json.dumps(ed['sizeLimit']))
        vols[name] = v
    containers = spec.get('containers')
    if not isinstance(containers, list) or not containers:
        add('spec.containers', 'Required value')
        return causes
    names = set()
    for i, c in enumerate(containers):
        f = 'spec.containers[%d]' % i
        if not isinstance(c, dict):
            add(f, 'Invalid value: must be an object')
            continue
        if not isinstance(c.get('name'), str) or not DNS_LABEL.match(c['name']):
            add(f + '.name', 'Invalid value: %s: a lowercase RFC 1123 label' % json.dumps(c.get('name')))
        elif c['name'] in names:
            add(f + '.name', 'Duplicate value: "%s"' % c['name'])
        names.add(c.get('name'))
        for k, t in (('resources', dict), ('securityContext', dict), ('env', list), ('volumeMounts', list),
                     ('workingDir', str)):
            if c.get(k) is not None and not isinstance(c[k], t):
                add('%s.%s' % (f, k), 'Invalid value: must be a%s %s' % ('n' if t is dict else '',
                                                                        'object' if t is dict else t.__name__))
                c[k] = None
        if c.get('workingDir') is not None and not c['workingDir'].startswith('/'):
            add(f + '.workingDir', 'Invalid value: must be an absolute path')
        if not isinstance(c.get('image'), str) or not c['image'].strip():
            add(f + '.image', 'Required value')
        for k in ('command', 'args'):
            if k in c and (not isinstance(c[k], list) or not all(isinstance(x, str) for x in c[k])):
                add(f + '.' + k, 'Invalid value: must be a list of strings')
        for j, e in enumerate(c.get('env') or []):
            if not isinstance(e, dict) or not isinstance(e.get('name'), str) or not e['name'] or \
                    not isinstance(e.get('value', ''), str):
                add('%s.env[%d]' % (f, j), 'Invalid value: a name and a string value')
        res = c.get('resources') or {}
        for part in ('limits', 'requests'):
            if not isinstance(res.get(part) or {}, dict):
                add('%s.resources.%s' % (f, part), 'Invalid value: must be an object')
                res = {}
            for k, q in (res.get(part) or {}).items():
                if quantity(q) is None or quantity(q) < 0:
                    add('%s.resources.%s[%s]' % (f, part, k), 'Invalid value: %s: must be a quantity' % json.dumps(q))
        for k, q in (res.get('requests') or {}).items():
            lim = (res.get('limits') or {}).get(k)
            if lim is not None and None not in (quantity(q), quantity(lim)) and quantity(q) > quantity(lim):
                add('%s.resources.requests' % f, 'Invalid value: "%s": must be less than or equal to %s limit of %s'
                    % (q, k, lim))
        check_security(f + '.securityContext', c.get('securityContext'), add, pod=False)
        paths = set()
        for j, m in enumerate(c.get('volumeMounts') or []):
            mf = '%s.volumeMounts[%d]' % (f, j)
            if not isinstance(m, dict) or m.get('name') not in vols:
                add(mf + '.name', 'Not found: %s' % json.dumps(m.get('name') if isinstance(m, dict) else m))
                continue
            p = m.get('mountPath')
            if not isinstance(p, str) or not p.startswith('/') or '..' in p.split('/') or '\0' in p:
                add(mf + '.mountPath', 'Invalid value: %s: must be an absolute path without ..' % json.dumps(p))
            elif p in paths:
                add(mf + '.mountPath', 'Invalid value: "%s": must be unique' % p)
            paths.add(p)
    return causes


def check_security(f, sc, add, pod):
    if sc is None:
        return
    if not isinstance(sc, dict):
        return add(f, 'Invalid value: must be an object')
    for k in ('runAsUser', 'runAsGroup', 'fsGroup'):
        if k in sc and (not isinstance(sc[k], int) or isinstance(sc[k], bool) or not 0 <= sc[k] <= 2147483647):
            add('%s.%s' % (f, k), 'Invalid value: %s: must be between 0 and 2147483647, inclusive' % json.dumps(sc[k]))
    for k in ('runAsNonRoot', 'readOnlyRootFilesystem', 'allowPrivilegeEscalation', 'privileged'):
        if k in sc and not isinstance(sc[k], bool):
            add('%s.%s' % (f, k), 'Invalid value: must be a boolean')
    if not pod and sc.get('privileged') is True and sc.get('allowPrivilegeEscalation') is False:
        add(f, 'Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true')
    caps = sc.get('capabilities')
    if caps is not None and (not isinstance(caps, dict) or
                             not all(isinstance(caps.get(k, []), list) for k in ('add', 'drop'))):
        add(f + '.capabilities', 'Invalid value: add and drop are lists')
    sp = sc.get('seccompProfile')
    if sp is not None:
        t = sp.get('type') if isinstance(sp, dict) else None
        if t not in ('RuntimeDefault', 'Unconfined', 'Localhost'):
            add(f + '.seccompProfile.type', 'Unsupported value: %s: supported values: "Localhost", "RuntimeDefault", '
                '"Unconfined"' % json.dumps(t))
        elif t == 'Localhost' and not sp.get('localhostProfile'):
            add(f + '.seccompProfile.localhostProfile', 'Required value: must be set when seccomp type is Localhost')


# ---------------------------------------------------------------- pods
SANDBOXED = None  # whether pods get namespaces of their own (probed once)
DEFAULT_CAPS = ('chown', 'dac_override', 'fsetid', 'fowner', 'mknod', 'net_raw', 'setgid', 'setuid', 'setfcap',
                'setpcap', 'net_bind_service', 'sys_chroot', 'kill', 'audit_write')
KNOWN_CAPS = DEFAULT_CAPS + ('net_admin', 'sys_ptrace', 'sys_admin', 'sys_resource', 'ipc_lock', 'sys_nice',
                             'sys_time', 'net_broadcast', 'linux_immutable', 'sys_module', 'sys_rawio', 'sys_pacct',
                             'sys_boot', 'lease', 'audit_control', 'mac_override', 'mac_admin', 'syslog',
                             'wake_alarm', 'block_suspend', 'audit_read', 'perfmon', 'bpf', 'checkpoint_restore',
                             'dac_read_search', 'ipc_owner', 'sys_tty_config')
MAX_TMPFS = 1 << 30  # an emptyDir's tmpfs is this host's memory: at most 1 GiB, whatever its sizeLimit


def probe_namespaces():
    if os.geteuid() != 0:
        return False
    try:
        return subprocess.run(['unshare', '--pid', '--mount', '--uts', '--net', '--fork', 'true'], timeout=10,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Pod:
    """One pod: its object (self.obj, the stored API object) and its processes."""
    N = [0]

    def __init__(self, obj):
        self.obj = obj
        self.ns, self.name = obj['metadata']['namespace'], obj['metadata']['name']
        Pod.N[0] += 1
        ALL_PODS.append(self)
        self.ip = '10.244.%d.%d' % (Pod.N[0] // 250, Pod.N[0] % 250 + 2)
        self.dir = os.path.join(ROOT, 'pods', uuid.uuid4().hex)
        os.makedirs(self.dir + '/root')
        self.init = None
        self.init_pid = None
        self.execs = []  # exec'd processes: killed with the pod (with namespaces, its PID namespace's end does it)
        self.ended = False
        self.gone = threading.Event()
        self.done = threading.Event()  # its command ended (exit_code), or it was deleted
        self.exit_code = None
        c = obj['spec']['containers'][0]
        self.container = c
        # stdin: true: the command's stdin and stdout are pipes of this server's, which attach
        # streams (pods/attach); what it writes while none is attached is dropped (a kubelet
        # writes it to the container's log).
        self.stdin_w = self.stdout_r = None
        self.attached = None
        self.attach_lock = threading.Lock()
        st = obj['status'] = {'phase': 'Pending', 'qosClass': self.qos(), 'conditions': [
            {'type': 'PodScheduled', 'status': 'True', 'lastProbeTime': None, 'lastTransitionTime': now_iso()}]}
        st['containerStatuses'] = [{'name': x['name'], 'image': x['image'], 'imageID': '', 'ready': False,
                                    'restartCount': 0, 'started': False,
                                    'state': {'waiting': {'reason': 'ContainerCreating'}}}
                                   for x in obj['spec']['containers']]

    def qos(self):
        res = [c.get('resources') or {} for c in self.obj['spec']['containers']]
        if not any(r.get('limits') or r.get('requests') for r in res):
            return 'BestEffort'
        if all(r.get('limits', {}).get(k) and r.get('requests', {}).get(k, r['limits'][k]) == r['limits'][k]
               for r in res for k in ('cpu', 'memory')):
            return 'Guaranteed'
        return 'Burstable'

    def security(self):
        """(uid, gid, no_new_privs, read-only root) from the pod's and the container's securityContext."""
        p = self.obj['spec'].get('securityContext') or {}
        c = self.container.get('securityContext') or {}
        uid = c.get('runAsUser', p.get('runAsUser', 0))
        gid = c.get('runAsGroup', p.get('runAsGroup', uid if 'runAsUser' in c or 'runAsUser' in p else 0))
        nnp = c.get('allowPrivilegeEscalation') is False
        return uid, gid, nnp, bool(c.get('readOnlyRootFilesystem'))

    def env(self):
        env = {'PATH': '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOSTNAME': self.name,
               'HOME': '/root' if self.security()[0] == 0 else '/'}
        for e in self.container.get('env') or []:
            env[e['name']] = e.get('value', '')
        return env

    def argv(self):
        c = self.container
        cmd = c.get('command') or ['sleep', 'infinity']  # the simulated image's entrypoint
        return cmd + (c.get('args') or [])

    def sandbox_config(self):
        uid, gid, nnp, ro = self.security()
        vols = {v['name']: v for v in self.obj['spec'].get('volumes') or []}
        root_size = 256 << 20
        mounts = []
        for m in self.container.get('volumeMounts') or []:
            v = vols[m['name']]
            if 'persistentVolumeClaim' in v:
                with LOCK:
                    src = VOLUMES.get((self.ns, v['persistentVolumeClaim']['claimName']))
                mounts.append({'mountPath': os.path.normpath(m['mountPath']), 'bind': src,
                               'readOnly': bool(m.get('readOnly') or v['persistentVolumeClaim'].get('readOnly'))})
                continue
            lim = quantity((v.get('emptyDir') or {}).get('sizeLimit', 0) or 0)
            mounts.append({'mountPath': os.path.normpath(m['mountPath']), 'readOnly': bool(m.get('readOnly')),
                           'size': min(int(lim), MAX_TMPFS) if lim else root_size})
        return {'root': self.dir + '/root', 'root_size': root_size, 'uid': uid, 'setpriv': self.setpriv(),
                'gid': gid, 'read_only_root': ro, 'volumes': mounts, 'hostname': self.name[:63], 'pod_ip': self.ip,
                'workdir': self.container.get('workingDir') or '/', 'argv': self.argv(), 'env': self.env()}

    def drain(self):
        """The command's stdout, to the attached stream if there is one."""
        while True:
            try:
                data = os.read(self.stdout_r, 65536)
            except OSError:
                break
            if not data:
                break
            with self.attach_lock:
                ws = self.attached
            if ws is not None:
                try:
                    ws.send(b'\x01' + data)
                except OSError:
                    pass
        os.close(self.stdout_r)

    def start(self):
        """Runs the pod (a thread of its own): Pending for start_ms, then Running."""
        time.sleep(CONTROL['start_ms'] / 1000.0)
        if not self.schedule():
            return
        with LOCK:
            if self.ended or self.obj['metadata'].get('deletionTimestamp'):
                return
        self.set_fs_group()
        stdio = []
        if self.container.get('stdin') is True:
            in_r, self.stdin_w = os.pipe()
            self.stdout_r, out_w = os.pipe()
            stdio = [in_r, out_w]
            threading.Thread(target=self.drain, daemon=True).start()
        if SANDBOXED:
            pre = ['unshare', '--pid', '--mount', '--uts', '--net', '--fork', '--kill-child']
            cfg = dict(self.sandbox_config(), stdio=stdio)
            self.init = subprocess.Popen(pre + [sys.executable, '-S', HERE + '/podinit.py', json.dumps(cfg)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=None,
                                         start_new_session=True, pass_fds=stdio)
            for fd in stdio:
                os.close(fd)
            line = self.init.stdout.readline().decode().strip()
            if line != 'ready':
                self.init.stdout.close()
                return self.finish(1, 'StartError', line or 'the sandbox did not start')
            self.init_pid = self.child_of(self.init.pid)
        else:
            os.makedirs(self.dir + '/root/tmp', exist_ok=True)
            env = dict(self.env(), HOME=self.dir + '/root')
            try:
                self.init = subprocess.Popen(self.argv(), cwd=self.dir + '/root', env=env,
                                             stdin=stdio[0] if stdio else subprocess.DEVNULL,
                                             stdout=stdio[1] if stdio else subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True)
                for fd in stdio:
                    os.close(fd)
            except OSError as x:
                return self.finish(128, 'StartError', str(x))
        t = now_iso()
        with LOCK:
            if self.ended:  # deleted or evicted while it started: what started goes too
                self.kill()
                return
            st = self.obj['status']
            st.update(phase='Running', podIP=self.ip, podIPs=[{'ip': self.ip}], hostIP='10.0.0.1',
                      hostIPs=[{'ip': '10.0.0.1'}], startTime=t)
            st['conditions'] = [{'type': k, 'status': 'True', 'lastProbeTime': None, 'lastTransitionTime': t}
                                for k in ('PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady',
                                          'PodScheduled')]
            for cs in st['containerStatuses']:
                cs.update(ready=True, started=True, state={'running': {'startedAt': t}},
                          containerID='containerd://' + uuid.uuid4().hex)
            self.obj['spec'].setdefault('nodeName', 'node-1')
            record('pods', 'MODIFIED', self.obj)
        ads = self.obj['spec'].get('activeDeadlineSeconds')
        if ads:
            threading.Thread(target=self.deadline, args=(ads,), daemon=True).start()
        if SANDBOXED:
            self.init.stdout.read()  # its end: podinit became the command
            self.init.stdout.close()
            rc = self.init.wait()    # unshare's status is the command's
            return self.finish(rc if rc >= 0 else 128 - rc)
        rc = self.init.wait()
        self.finish(rc if rc >= 0 else 128 - rc)

    def claims(self):
        return [v['persistentVolumeClaim']['claimName'] for v in self.obj['spec'].get('volumes') or []
                if 'persistentVolumeClaim' in v]

    def schedule(self):
        """As the scheduler's VolumeBinding plugin: a pod whose claim is not there stays Pending,
        PodScheduled False (Unschedulable, naming the claim), until it is made or the pod goes.
        False when the pod went first."""
        said = None
        while not self.gone.is_set():
            with LOCK:
                if self.ended or self.obj['metadata'].get('deletionTimestamp'):
                    return False
                missing = [c for c in self.claims() if (self.ns, c) not in VOLUMES]
                if not missing:
                    return True
                if missing[0] != said:
                    said = missing[0]
                    self.obj['status']['conditions'] = [{
                        'type': 'PodScheduled', 'status': 'False', 'reason': 'Unschedulable', 'lastProbeTime': None,
                        'lastTransitionTime': now_iso(),
                        'message': '0/1 nodes are available: persistentvolumeclaim "%s" not found. preemption: 0/1 '
                                   'nodes are available: 1 Preemption is not helpful for scheduling.' % said}]
                    record('pods', 'MODIFIED', self.obj)
            self.gone.wait(0.1)
        return False

    def set_fs_group(self):
        """securityContext.fsGroup on the claims' volumes, as the kubelet's SetVolumeOwnership:
        every file's group fsGroup (lchown: no link followed), group rw (folders rwx and setgid);
        with fsGroupChangePolicy OnRootMismatch, only where the volume's root is not so already."""
        psc = self.obj['spec'].get('securityContext') or {}
        gid = psc.get('fsGroup')
        if not isinstance(gid, int) or not SANDBOXED:
            return
        for c in self.claims():
            with LOCK:
                root = VOLUMES.get((self.ns, c))
            if root is None:
                continue
            st = os.lstat(root)
            if psc.get('fsGroupChangePolicy') == 'OnRootMismatch' and st.st_gid == gid and \
                    st.st_mode & 0o2070 == 0o2070:
                continue
            for d, dirs, files in os.walk(root, followlinks=False):
                for n in [d] + [os.path.join(d, x) for x in dirs + files]:
                    try:
                        os.lchown(n, -1, gid)
                        st = os.lstat(n)
                        if not os.path.islink(n):
                            extra = 0o2070 if os.path.isdir(n) else 0o060
                            os.chmod(n, (st.st_mode & 0o7777) | extra, follow_symlinks=False)
                    except (OSError, NotImplementedError):  # gone, or made a link meanwhile: not followed
                        pass

    @staticmethod
    def child_of(pid):
        for _ in range(500):
            try:
                with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
            except OSError:
                pass
            time.sleep(0.01)
        return None

    def deadline(self, seconds):
        if not self.gone.wait(seconds):
            self.finish(137, pod_reason=('DeadlineExceeded', 'Pod was active on the node longer than the specified '
                                                             'deadline'))

    def kill(self):
        for p in [self.init] + self.execs:
            if p is not None and p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        if self.init is not None:
            self.init.wait()

    def finish(self, code, reason=None, message=None, pod_reason=None):
        """The container ended with code (reason: its terminated reason). Phase Succeeded or Failed."""
        with LOCK:
            if self.ended:
                return
            self.ended = True
        self.kill()
        self.exit_code = code
        self.done.set()
        t = now_iso()
        with LOCK:
            if (self.ns, self.name) not in PODS:
                return
            st = self.obj['status']
            term = {'exitCode': code, 'reason': reason or ('Completed' if code == 0 else 'Error'),
                    'startedAt': st.get('startTime', t), 'finishedAt': t}
            if message:
                term['message'] = message
            for cs in st['containerStatuses']:
                cs.update(ready=False, started=False, state={'terminated': dict(term)})
            st['phase'] = 'Succeeded' if code == 0 and not pod_reason else 'Failed'
            if pod_reason:
                st['reason'], st['message'] = pod_reason
            for cond in st['conditions']:
                if cond['type'] in ('Ready', 'ContainersReady'):
                    cond.update(status='False', reason='PodCompleted' if code == 0 else 'PodFailed',
                                lastTransitionTime=t)
            record('pods', 'MODIFIED', self.obj)

    def setpriv(self):
        """The pod's /usr/bin/setpriv with the container's user, group, no_new_privs and
        capabilities: a container runtime's default set (Docker's and containerd's), less
        securityContext.capabilities.drop ("ALL": all), plus its add; all when privileged."""
        uid, gid, nnp, _ = self.security()
        sc = self.container.get('securityContext') or {}
        caps = sc.get('capabilities') or {}
        norm = lambda c: c.lower().replace('cap_', '', 1)
        if sc.get('privileged'):
            have = None
        else:
            drop = [norm(c) for c in caps.get('drop') or []]
            have = set() if 'all' in drop else set(DEFAULT_CAPS) - set(drop)
            have |= {norm(c) for c in caps.get('add') or [] if norm(c) in KNOWN_CAPS}
        bound = '+all' if have is None else ','.join(['-all'] + ['+' + c for c in sorted(have)])
        return ['/usr/bin/setpriv', '--reuid=%d' % uid, '--regid=%d' % gid, '--clear-groups', '--inh-caps=-all',
                '--bounding-set=' + bound] + (['--no-new-privs'] if nnp else []) + ['--']

    def exec_argv(self, command):
        if not SANDBOXED:
            return command
        pre = ['nsenter', '-t', str(self.init_pid), '--pid', '--mount', '--uts', '--net', '--root', '--wd', '--']
        return pre + self.setpriv() + command

    def remove(self, grace):
        """Deletes it: SIGTERM to its command, SIGKILL after grace seconds, then gone."""
        if SANDBOXED and self.init_pid:
            try:
                os.kill(self.init_pid, signal.SIGTERM)
            except OSError:
                pass
        elif self.init is not None and self.init.poll() is None:
            try:
                os.killpg(self.init.pid, signal.SIGTERM)
            except OSError:
                pass
        if self.init is not None:
            try:
                self.init.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        with LOCK:
            self.ended = True
        self.kill()
        self.done.set()
        self.gone.set()
        # The command's stdin, when no attach holds it (one that does closes it as it ends): a
        # pod gone leaves no descriptor here.
        with self.attach_lock:
            fd = self.stdin_w if self.attached is None else None
            if fd is not None:
                self.stdin_w = None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        with LOCK:
            if PODS.get((self.ns, self.name)) is self:
                del PODS[(self.ns, self.name)]
                OBJECTS.pop(('pods', self.ns, self.name), None)
                record('pods', 'DELETED', self.obj)
        shutil.rmtree(self.dir, ignore_errors=True)


def make_volume(ns, name, size):
    """A claim's volume: a folder of this server's, outliving pods; a tmpfs of the claim's
    capacity (at most MAX_TMPFS) when sandboxed, in this server's own mount namespace."""
    d = os.path.join(ROOT, 'volumes', uuid.uuid4().hex)
    os.makedirs(d, mode=0o755)
    if SANDBOXED:
        subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=%d,mode=0755,nosuid,nodev' % min(max(size, 1 << 20), MAX_TMPFS),
                        'tmpfs', d], check=True)
    VOLUMES[(ns, name)] = d


def release_volume(ns, name):
    """The volume of a deleted claim goes (LOCK held): pods that mount it keep their mount."""
    d = VOLUMES.pop((ns, name), None)
    if d:
        if SANDBOXED:
            subprocess.run(['umount', '-l', d], stderr=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)


def check_pvc(spec, causes):
    add = lambda f, m: causes.append({'field': f, 'message': m})
    modes = spec.get('accessModes')
    if not isinstance(modes, list) or not modes:
        add('spec.accessModes', 'Required value: at least 1 access mode is required')
    else:
        for m in modes:
            if m not in ('ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod'):
                add('spec.accessModes', 'Unsupported value: %s' % json.dumps(m))
    st = ((spec.get('resources') or {}).get('requests') or {}).get('storage')
    if st is None:
        add('spec.resources[storage]', 'Required value')
    elif quantity(st) is None or quantity(st) <= 0:
        add('spec.resources[storage]', 'Invalid value: %s: must be greater than zero' % json.dumps(st))


def create_pod(ns, body, from_template=False):
    """Validates and stores a pod, and starts it. Returns the object (LOCK not held)."""
    if not isinstance(body, dict):
        raise ApiError(400, 'the body of the request was not a Pod')
    body = copy.deepcopy(body)
    if body.get('kind', 'Pod') != 'Pod' or body.get('apiVersion', 'v1') != 'v1':
        raise ApiError(400, 'the API version in the data (%s) does not match the expected API version (v1)'
                       % body.get('apiVersion'))
    body['metadata'] = new_meta(body.get('metadata'), ns)
    if (body.get('metadata') or {}).get('namespace') not in (None, ns):
        raise ApiError(400, 'the namespace of the provided object does not match the namespace sent on the request')
    causes = check_pod(body)
    if causes:
        raise invalid('Pod', body['metadata'].get('name') or '', causes)
    rc = body['spec'].get('runtimeClassName')
    if rc is not None and rc not in CONTROL['runtime_classes']:
        raise ApiError(403, 'pod rejected: RuntimeClass "%s" not found' % rc, 'Forbidden')
    body.update(apiVersion='v1', kind='Pod')
    spec = body['spec']
    spec.setdefault('restartPolicy', 'Always')
    spec.setdefault('terminationGracePeriodSeconds', 30)
    spec.setdefault('dnsPolicy', 'ClusterFirst')
    spec.setdefault('schedulerName', 'default-scheduler')
    spec.setdefault('serviceAccountName', 'default')
    if from_template:
        spec.setdefault('automountServiceAccountToken', False)
    with LOCK:
        key = (ns, body['metadata']['name'])
        if key in PODS:
            raise ApiError(409, 'pods "%s" already exists' % key[1], 'AlreadyExists',
                           {'name': key[1], 'kind': 'pods'})
        if CONTROL['pvc_gone_on_pod']:  # the fault: its claims deleted as it is made (an admin's race)
            for c in [v['persistentVolumeClaim']['claimName'] for v in spec.get('volumes') or []
                      if 'persistentVolumeClaim' in v]:
                o = OBJECTS.pop(('persistentvolumeclaims', ns, c), None)
                if o is not None:
                    record('persistentvolumeclaims', 'DELETED', o)
                    release_volume(ns, c)
        pod = Pod(body)
        PODS[key] = pod
        OBJECTS[('pods',) + key] = body
        record('pods', 'ADDED', body)
        out = copy.deepcopy(body)
    threading.Thread(target=pod.start, daemon=True).start()
    return out


def delete_pod(ns, name, grace):
    with LOCK:
        pod = PODS.get((ns, name))
        if pod is None:
            raise ApiError(404, 'pods "%s" not found' % name, 'NotFound', {'name': name, 'kind': 'pods'})
        if CONTROL['busy_delete'] and pod.obj['status']['phase'] == 'Pending':
            raise ApiError(409, 'Operation cannot be fulfilled on pods "%s": the pod is being created, try again'
                           % name, 'Conflict', {'name': name, 'kind': 'pods'})
        if grace is None:
            grace = pod.obj['spec'].get('terminationGracePeriodSeconds', 30)
        meta = pod.obj['metadata']
        if not meta.get('deletionTimestamp'):
            meta['deletionTimestamp'] = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(time.time() + grace))
            meta['deletionGracePeriodSeconds'] = grace
            record('pods', 'MODIFIED', pod.obj)
            threading.Thread(target=pod.remove, args=(grace,), daemon=True).start()
        return copy.deepcopy(pod.obj)


def evict(b):
    with LOCK:
        pod = PODS.get((b.get('namespace', 'default'), b.get('name')))
    if pod is None:
        return 'no such pod'
    if b.get('reason') == 'OOMKilled':
        pod.finish(137, 'OOMKilled')
    else:
        pod.finish(137, 'ContainerStatusUnknown', 'The container could not be located when the pod was terminated',
                   pod_reason=('Evicted', 'The node was low on resource: memory. Threshold quantity: 100Mi, '
                               'available: 51200Ki.'))
    return 'ok'


# ---------------------------------------------------------------- agent-sandbox controller
def sandbox_pod_body(name, template_spec, owner_labels):
    pt = copy.deepcopy((template_spec or {}).get('podTemplate') or {})
    meta = pt.get('metadata') or {}
    labels = dict(meta.get('labels') or {}, **owner_labels)
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name, 'labels': labels,
                                                            'annotations': meta.get('annotations') or {}},
            'spec': pt.get('spec') or {}}


def make_sandbox(ns, name, podtemplate, labels, owner, from_template):
    """A Sandbox (agents.x-k8s.io) and its pod of the same name."""
    pod = sandbox_pod_body(name, {'podTemplate': podtemplate}, dict(labels, **{'agents.x-k8s.io/sandbox-name': name}))
    create_pod(ns, pod, from_template=from_template)
    sb = {'apiVersion': 'agents.x-k8s.io/v1alpha1', 'kind': 'Sandbox',
          'metadata': new_meta({'name': name, 'labels': labels, 'ownerReferences': [owner] if owner else []}, ns),
          'spec': {'podTemplate': podtemplate, 'replicas': 1}}
    with LOCK:
        OBJECTS[('sandboxes', ns, name)] = sb
        record('sandboxes', 'ADDED', sb)
    return sb


def name_hash(s):
    """agent-sandbox's NameHash (controllers/sandbox_controller.go): FNV-1a 32, 8 hex digits."""
    h = 2166136261
    for b in s.encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return '%08x' % h


# The label the agent-sandbox controllers put on the pods of a Sandbox made from a template (a warm
# pool's, or a claim's), kept through adoption (api/v1beta1 SandboxTemplateRefHashLabel, set by
# extensions/controllers/sandboxwarmpool_controller.go buildSandboxCR); its NetworkPolicies
# select the template's pods by it.
TEMPLATE_HASH_LABEL = 'agents.x-k8s.io/sandbox-template-ref-hash'


def template_of(ns, name):
    t = OBJECTS.get(('sandboxtemplates', ns, name or ''))
    return t


def fill_pool(ns, pool):
    """Keeps spec.replicas unclaimed Sandboxes in a warm pool."""
    name = pool['metadata']['name']
    t = template_of(ns, (pool['spec'].get('sandboxTemplateRef') or {}).get('name'))
    if t is None:
        return
    with LOCK:
        have = [k for k, o in OBJECTS.items() if k[0] == 'sandboxes' and k[1] == ns and
                (o['metadata'].get('labels') or {}).get('agents.x-k8s.io/pool') == name]
    for _ in range(int(pool['spec'].get('replicas') or 0) - len(have)):
        sb_name = '%s-%s' % (name, uuid.uuid4().hex[:5])
        make_sandbox(ns, sb_name, t['spec'].get('podTemplate') or {},
                     dict({'agents.x-k8s.io/pool': name}, **({TEMPLATE_HASH_LABEL: name_hash(t['metadata']['name'])}
                                                           if CONTROL['template_hash_label'] else {})),
                     {'apiVersion': 'extensions.agents.x-k8s.io/v1alpha1', 'kind': 'SandboxWarmPool', 'name': name,
                      'uid': pool['metadata']['uid'], 'controller': True}, True)


def claim(ns, c):
    """Binds a SandboxClaim: adopts a warm pool's Sandbox, or makes one."""
    tname = (c['spec'].get('sandboxTemplateRef') or {}).get('name')
    policy = c['spec'].get('warmpool') or 'default'
    owner = {'apiVersion': 'extensions.agents.x-k8s.io/v1alpha1', 'kind': 'SandboxClaim',
             'name': c['metadata']['name'], 'uid': c['metadata']['uid'], 'controller': True}
    with LOCK:
        if template_of(ns, tname) is None:
            c['status'] = {'conditions': [{'type': 'Ready', 'status': 'False', 'reason': 'TemplateNotFound',
                                           'message': 'SandboxTemplate "%s" not found' % tname,
                                           'lastTransitionTime': now_iso(), 'observedGeneration': 1}]}
            return
        pools = [p for k, p in OBJECTS.items() if k[0] == 'sandboxwarmpools' and k[1] == ns and
                 (p['spec'].get('sandboxTemplateRef') or {}).get('name') == tname and
                 policy != 'none' and (policy == 'default' or p['metadata']['name'] == policy)]
        warm = None
        for p in pools:
            for k, sb in OBJECTS.items():
                labels = sb['metadata'].get('labels') or {}
                if k[0] == 'sandboxes' and k[1] == ns and labels.get('agents.x-k8s.io/pool') == p['metadata']['name']:
                    warm = (p, sb)
                    break
            if warm:
                break
        if warm:
            p, sb = warm
            del sb['metadata']['labels']['agents.x-k8s.io/pool']
            sb['metadata']['labels']['agents.x-k8s.io/claim'] = c['metadata']['name']
            sb['metadata']['ownerReferences'] = [owner]
            record('sandboxes', 'MODIFIED', sb)
            c['status'] = {'sandbox': {'name': sb['metadata']['name']}}
    if warm:
        fill_pool(ns, warm[0])
        return
    name = '%s-%s' % (c['metadata']['name'], uuid.uuid4().hex[:5])
    make_sandbox(ns, name, template_of(ns, tname)['spec'].get('podTemplate') or {},
                 {'agents.x-k8s.io/claim': c['metadata']['name'], TEMPLATE_HASH_LABEL: name_hash(tname)}, owner, True)
    c['status'] = {'sandbox': {'name': name}}


def refresh(key, obj):
    """The status of an agent-sandbox object, from its pods (LOCK held)."""
    ns = obj['metadata'].get('namespace')

    def ready(name):
        pod = PODS.get((ns, name))
        ok = pod is not None and any(c['type'] == 'Ready' and c['status'] == 'True'
                                     for c in pod.obj['status'].get('conditions', []))
        return ok, pod

    if key == 'sandboxes':
        ok, pod = ready(obj['metadata']['name'])
        obj['status'] = {'replicas': 1 if pod else 0, 'selector': 'agents.x-k8s.io/sandbox-name=' + obj['metadata']['name'],
                         'podIPs': [pod.ip] if ok else [], 'conditions': [
                             {'type': 'Ready', 'status': 'True' if ok else 'False',
                              'reason': 'DependenciesReady' if ok else 'DependenciesNotReady',
                              'lastTransitionTime': now_iso(), 'observedGeneration': 1, 'message': ''}]}
    elif key == 'sandboxclaims' and (obj.get('status') or {}).get('sandbox'):
        ok, pod = ready(obj['status']['sandbox']['name'])
        obj['status']['sandbox']['podIPs'] = [pod.ip] if ok else []
        obj['status']['conditions'] = [{'type': 'Ready', 'status': 'True' if ok else 'False',
                                        'reason': 'SandboxReady' if ok else 'SandboxNotReady', 'message': '',
                                        'lastTransitionTime': now_iso(), 'observedGeneration': 1}]
    elif key == 'sandboxwarmpools':
        n = sum(1 for k, o in OBJECTS.items() if k[0] == 'sandboxes' and k[1] == ns and
                (o['metadata'].get('labels') or {}).get('agents.x-k8s.io/pool') == obj['metadata']['name'] and
                ready(k[2])[0])
        obj['status'] = {'readyReplicas': n, 'replicas': int(obj['spec'].get('replicas') or 0)}
    return obj


def delete_sandbox(ns, name):
    with LOCK:
        sb = OBJECTS.pop(('sandboxes', ns, name), None)
        if sb:
            record('sandboxes', 'DELETED', sb)
    if sb:
        try:
            delete_pod(ns, name, 0)
        except ApiError:
            pass


def cascade(key, ns, obj):
    """What goes with a deleted object, as its owner references say."""
    name = obj['metadata']['name']
    if key == 'persistentvolumeclaims':
        with LOCK:
            release_volume(ns, name)
    elif key == 'sandboxes':
        delete_sandbox(ns, name)
    elif key == 'sandboxclaims':
        if (obj.get('status') or {}).get('sandbox'):
            delete_sandbox(ns, obj['status']['sandbox']['name'])
    elif key == 'sandboxwarmpools':
        with LOCK:
            mine = [k[2] for k, o in OBJECTS.items() if k[0] == 'sandboxes' and k[1] == ns and
                    (o['metadata'].get('labels') or {}).get('agents.x-k8s.io/pool') == name]
        for n in mine:
            delete_sandbox(ns, n)


# ---------------------------------------------------------------- WebSocket (RFC 6455)
class WebSocket:
    """The server's end of one WebSocket connection: frames in (masked, possibly fragmented,
    control frames between fragments), frames out (unmasked). send() is thread-safe.

    Every read and write of the socket holds one lock: an OpenSSL connection must not be read
    and written by two threads at once. Both wait outside it (select()), and the socket is
    non-blocking: a send the client does not take yet holds up no read, as a kube-apiserver's
    reading and writing of a stream go on apart (a client that reads only once its own send
    went through would otherwise wait on this one for ever)."""

    SEND_IDLE_S = 30  # a send the client takes nothing of for this long ends the stream

    def __init__(self, sock, rfile):
        self.sock = sock
        self.wlock = threading.Lock()
        self.slock = threading.Lock()  # one frame out at a time
        self.closed = False
        # What the HTTP reader already holds past the handshake (a client may send at once).
        sock.setblocking(False)
        try:
            self.buf = rfile.peek() or b''
            rfile.read(len(self.buf))
        except (OSError, ValueError):
            self.buf = b''

    def send_raw(self, data, even_closed=False):
        """data, whole, on the socket, written in pieces under wlock."""
        view = memoryview(data)
        with self.slock:
            while view:
                with self.wlock:
                    if self.closed and not even_closed:
                        raise BrokenPipeError
                    try:
                        view = view[self.sock.send(view):]
                        continue
                    except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                        pass
                if not select.select([], [self.sock], [], self.SEND_IDLE_S)[1]:
                    raise socket.timeout('the client took nothing for %d s' % self.SEND_IDLE_S)

    def fill(self):
        while True:
            if not (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
                if not select.select([self.sock], [], [], 1.0)[0]:
                    if self.closed:
                        raise EOFError
                    continue
            with self.wlock:
                try:
                    data = self.sock.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError, socket.timeout):
                    continue
            if not data:
                raise EOFError
            self.buf += data
            return

    def read_exact(self, n):
        while len(self.buf) < n:
            self.fill()
        b, self.buf = self.buf[:n], self.buf[n:]
        return b

    def send_frame(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack('!H', n)
        else:
            head += bytes([127]) + struct.pack('!Q', n)
        self.send_raw(head + payload, even_closed=opcode == 8)

    def send(self, data):
        self.send_frame(2, data)

    def close(self, code=1000, reason=b''):
        try:
            self.send_frame(8, struct.pack('!H', code) + reason)
        except OSError:
            pass
        with self.wlock:
            self.closed = True

    def recv(self):
        """The next data message (bytes), or None when the peer closed. Answers pings."""
        parts, size = [], 0
        while True:
            b0, b1 = self.read_exact(2)
            fin, opcode, masked, n = b0 & 0x80, b0 & 0x0F, b1 & 0x80, b1 & 0x7F
            if b0 & 0x70:
                return self.fail(1002, b'reserved bits set')
            if not masked:
                return self.fail(1002, b'client frames must be masked')
            if n == 126:
                n = struct.unpack('!H', self.read_exact(2))[0]
            elif n == 127:
                n = struct.unpack('!Q', self.read_exact(8))[0]
            if opcode >= 8 and (n > 125 or not fin):
                return self.fail(1002, b'bad control frame')
            if size + n > MAX_MESSAGE:
                return self.fail(1009, b'message too big')
            key = self.read_exact(4)
            raw = self.read_exact(n)
            data = (int.from_bytes(raw, 'big') ^ int.from_bytes((key * (n // 4 + 1))[:n], 'big')).to_bytes(n, 'big')
            if opcode == 8:
                self.close(struct.unpack('!H', bytes(data[:2]))[0] if len(data) >= 2 else 1000)
                return None
            if opcode == 9:
                self.send_frame(10, bytes(data))
                continue
            if opcode == 10:
                continue
            if opcode == 0 and not parts or opcode in (1, 2) and parts or opcode not in (0, 1, 2):
                return self.fail(1002, b'bad opcode sequence')
            parts.append(bytes(data))
            size += n
            if fin:
                return b''.join(parts)

    def fail(self, code, why):
        self.close(code, why)
        return None


def exec_status(code):
    if code == 0:
        return {'metadata': {}, 'status': 'Success'}
    return {'metadata': {}, 'status': 'Failure', 'reason': 'NonZeroExitCode',
            'message': 'command terminated with non-zero exit code: error executing command, exit code %d' % code,
            'details': {'causes': [{'reason': 'ExitCode', 'message': str(code)}]}}


# ---------------------------------------------------------------- HTTP
class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'k8s-test'

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        self.connection.settimeout(30)

    def do_GET(self):
        self.handle_any('GET')

    def do_POST(self):
        self.handle_any('POST')

    def do_DELETE(self):
        self.handle_any('DELETE')

    def do_PUT(self):
        self.handle_any('PUT')

    def do_PATCH(self):
        self.handle_any('PATCH')

    def body(self):
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            raise ApiError(411, 'a request body needs a Content-Length here')
        try:
            n = int(self.headers.get('Content-Length') or 0)
        except ValueError:
            n = -1
        if n < 0:
            self.close_connection = True
            raise ApiError(400, 'a bad Content-Length')
        if n > MAX_BODY:
            self.close_connection = True
            raise ApiError(413, 'the request is too large')
        return self.rfile.read(n) if n else b''

    def json_body(self):
        raw = self.body()
        try:
            return json.loads(raw) if raw else None
        except ValueError as x:
            raise ApiError(400, "couldn't get version/kind; json parse error: %s" % x)

    def send(self, code, obj=None, raw=None, ctype='application/json'):
        data = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else b'')
        self.set_status(code)
        self.send_response(code)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        self.send_header('Cache-Control', 'no-cache, private')
        self.end_headers()
        self.wfile.write(data)

    def set_status(self, code):
        """The status of the answer, in the request log too (a stream's entry is there while it lasts)."""
        self.status = code
        if self.entry is not None:
            self.entry['status'] = code

    def auth(self):
        h = self.headers.get('Authorization', '')
        if h.startswith('Bearer ') and hmac.compare_digest(h[7:].encode(), TOKEN.encode()):
            return 'token'
        cert = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        if cert:
            return 'cert:' + dict(x[0] for x in cert.get('subject', ())).get('commonName', '')
        return None

    def handle_any(self, method):
        self.status = 0
        self.entry = None
        u = urlsplit(self.path)
        self.query = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        self.query_all = parse_qs(u.query, keep_blank_values=True)
        path = u.path
        entry = {'method': method, 'path': path, 'query': u.query, 'auth': None,
                 'user_agent': self.headers.get('User-Agent', ''), 'upgrade': self.headers.get('Upgrade', ''),
                 'status': 0}
        try:
            if path == '/_control':
                return self.control(method)
            self.entry = entry
            with LOCK:
                REQUESTS.append(entry)
                del REQUESTS[:-MAX_LOG]
            entry['auth'] = self.auth()
            if CONTROL['latency_ms']:
                time.sleep(CONTROL['latency_ms'] / 1000.0)
            if entry['auth'] is None:
                self.body()
                raise ApiError(401, 'Unauthorized')
            f = CONTROL.get('fail')
            if f and f.get('count', -1) != 0 and f.get('method', method) == method and \
                    fnmatch.fnmatchcase(path, f.get('path', '*')):
                with LOCK:
                    if f.get('count', -1) > 0:
                        f['count'] -= 1
                self.body()
                code = int(f.get('status', 500))
                raise ApiError(code, 'injected failure' if code != 503 else 'the server is currently unable to '
                               'handle the request')
            self.route(method, path)
        except ApiError as x:
            self.send(x.status['code'], x.status)
        except (BrokenPipeError, ConnectionResetError, EOFError, socket.timeout, ssl.SSLError):
            self.close_connection = True
        except Exception as x:  # a bug here, or input nothing above checked: a 500 Status, and serve on
            import traceback
            log('%s %s: %s' % (method, path, traceback.format_exc()))
            self.close_connection = True
            if self.status == 0:
                try:
                    self.send(500, status_obj(500, 'InternalError', 'an error on the server (%s) has prevented the '
                                              'request from succeeding' % type(x).__name__))
                except OSError:
                    pass

    def control(self, method):
        out = {}
        if method == 'POST':
            b = self.json_body() or {}
            with LOCK:
                CONTROL.clear()
                CONTROL.update(copy.deepcopy(DEFAULTS))
                CONTROL.update({k: v for k, v in b.items() if k in DEFAULTS})
                if b.get('clear_log'):
                    REQUESTS.clear()
            if b.get('evict'):
                out['evict'] = evict(b['evict'])
        with LOCK:
            state = dict(CONTROL, requests=list(REQUESTS), sandboxed=SANDBOXED,
                         pods={'%s/%s' % k: {'phase': p.obj['status']['phase'], 'init_pid': p.init_pid,
                                             'root': p.dir + '/root'} for k, p in PODS.items()}, **out)
        self.send(200, state)

    # ------------------------------------------------------------ routing
    def allowed(self, verb, resource, group='', sub='', ns=''):
        r = resource + ('/' + sub if sub else '') + ('.' + group if group else '')
        return CONTROL['access'].get('%s %s' % (verb, r), CONTROL['access_default'])

    def route(self, method, path):
        p = [x for x in path.split('/') if x]
        if p == ['version']:
            return self.send(200, {'major': '1', 'minor': '31', 'gitVersion': 'v1.31.0', 'gitCommit': 'sandbox-mcp-test',
                                   'gitTreeState': 'clean', 'buildDate': '2026-01-01T00:00:00Z', 'goVersion': 'go1.22',
                                   'compiler': 'gc', 'platform': 'linux/amd64'})
        if p == ['api']:
            host = '127.0.0.1:%d' % self.server.server_address[1]
            return self.send(200, {'kind': 'APIVersions', 'versions': ['v1'], 'serverAddressByClientCIDRs': [
                {'clientCIDR': '0.0.0.0/0', 'serverAddress': host}]})
        if p == ['apis']:
            return self.send(200, {'kind': 'APIGroupList', 'apiVersion': 'v1', 'groups': [self.group(g) for g in self.groups()]})
        if p == ['api', 'v1']:
            return self.send(200, self.resource_list('', 'v1'))
        if len(p) == 2 and p[0] == 'apis' and p[1] in self.groups():
            return self.send(200, dict(self.group(p[1]), kind='APIGroup', apiVersion='v1'))
        if len(p) == 3 and p[0] == 'apis' and p[1] in self.groups() and p[2] == self.version_of(p[1]):
            return self.send(200, self.resource_list(p[1], p[2]))
        if p[:2] == ['api', 'v1']:
            group, rest = '', p[2:]
        elif len(p) >= 3 and p[0] == 'apis' and p[1] in self.groups() and p[2] == self.version_of(p[1]):
            group, rest = p[1], p[3:]
        else:
            raise ApiError(404, 'the server could not find the requested resource')
        if group == 'authorization.k8s.io' and rest == ['selfsubjectaccessreviews'] and method == 'POST':
            return self.ssar()
        ns = None
        if len(rest) >= 2 and rest[0] == 'namespaces':
            ns, rest = rest[1], rest[2:]
            if not DNS_LABEL.match(ns):
                raise ApiError(404, 'namespaces "%s" not found' % ns)
        if not rest or rest[0] not in RESOURCES or RESOURCES[rest[0]][0] != group:
            raise ApiError(404, 'the server could not find the requested resource')
        key, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else ''
        if len(rest) > 3 or sub and (key, sub) not in (('pods', 'exec'), ('pods', 'attach')):
            raise ApiError(404, 'the server could not find the requested resource')
        watch = self.query.get('watch') in ('1', 'true')
        verb = {'GET': 'watch' if watch else ('get' if name else 'list'), 'POST': 'create',
                'DELETE': 'delete', 'PUT': 'update', 'PATCH': 'patch'}[method]
        if sub in ('exec', 'attach'):
            verb = 'create' if method == 'POST' else 'get'
        if not self.allowed(verb, key, group, sub):
            self.body()
            who = 'system:serviceaccount:default:test' if self.auth() == 'token' else self.auth()[5:]
            raise ApiError(403, '%s "%s" is forbidden: User "%s" cannot %s resource "%s" in API group "%s" in the '
                           'namespace "%s"' % (key, name or '', who, verb, key + ('/' + sub if sub else ''), group,
                                               ns or ''), 'Forbidden', {'name': name or '', 'kind': key})
        if sub == 'exec':
            return self.exec(ns, name)
        if sub == 'attach':
            return self.attach(ns, name)
        if ns is None and (name or method != 'GET'):
            raise ApiError(404, 'the server could not find the requested resource')
        if method == 'GET' and name is None:
            return self.watch(key, ns) if watch else self.list(key, ns)
        if method == 'GET':
            with LOCK:
                o = OBJECTS.get((key, ns, name))
                if o is None:
                    raise ApiError(404, '%s "%s" not found' % (key, name), 'NotFound', {'name': name, 'kind': key})
                return self.send(200, copy.deepcopy(refresh(key, o)))
        if method == 'POST' and name is None:
            return self.create(key, ns, self.json_body())
        if method == 'DELETE' and name:
            b = self.json_body() or {}
            grace = b.get('gracePeriodSeconds', self.query.get('gracePeriodSeconds')) if isinstance(b, dict) else None
            if grace is not None:
                try:
                    grace = int(grace)
                except (TypeError, ValueError):
                    raise ApiError(400, 'gracePeriodSeconds: %s is not an integer' % json.dumps(grace))
                if grace < 0:
                    raise ApiError(422, 'gracePeriodSeconds: must be greater than or equal to 0', 'Invalid')
            if key == 'pods':
                return self.send(200, delete_pod(ns, name, grace))
            with LOCK:
                o = OBJECTS.pop((key, ns, name), None)
                if o is None:
                    raise ApiError(404, '%s "%s" not found' % (key, name), 'NotFound', {'name': name, 'kind': key})
                record(key, 'DELETED', o)
            cascade(key, ns, o)
            return self.send(200, o if key != 'networkpolicies' else
                             {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Success',
                              'details': {'name': name, 'group': group, 'kind': key, 'uid': o['metadata']['uid']}})
        raise ApiError(405, 'the server does not allow this method on the requested resource')

    def groups(self):
        g = ['networking.k8s.io', 'authorization.k8s.io']
        return g + list(AGENT_GROUPS) if CONTROL['agent_sandbox'] else g

    @staticmethod
    def version_of(group):
        return 'v1alpha1' if group in AGENT_GROUPS else 'v1'

    def group(self, g):
        gv = {'groupVersion': '%s/%s' % (g, self.version_of(g)), 'version': self.version_of(g)}
        return {'name': g, 'versions': [gv], 'preferredVersion': gv}

    def resource_list(self, group, version):
        res = []
        verbs = ['create', 'delete', 'get', 'list', 'watch']
        for key, (g, v, kind) in RESOURCES.items():
            if g == group:
                res.append({'name': key, 'singularName': kind.lower(), 'namespaced': True, 'kind': kind, 'verbs': verbs})
                if key == 'pods':
                    res.append({'name': 'pods/exec', 'singularName': '', 'namespaced': True, 'kind': 'PodExecOptions',
                                'verbs': ['create', 'get']})
                    res.append({'name': 'pods/attach', 'singularName': '', 'namespaced': True,
                                'kind': 'PodAttachOptions', 'verbs': ['create', 'get']})
        if group == 'authorization.k8s.io':
            res.append({'name': 'selfsubjectaccessreviews', 'singularName': 'selfsubjectaccessreview',
                        'namespaced': False, 'kind': 'SelfSubjectAccessReview', 'verbs': ['create']})
        return {'kind': 'APIResourceList', 'apiVersion': 'v1', 'groupVersion': (group + '/' if group else '') + version,
                'resources': res}

    # ------------------------------------------------------------ objects
    def create(self, key, ns, body):
        if key == 'pods':
            return self.send(201, create_pod(ns, body))
        g, v, kind = RESOURCES[key]
        gv = '%s/%s' % (g, v) if g else v
        if not isinstance(body, dict) or body.get('kind', kind) != kind or body.get('apiVersion', gv) != gv:
            raise ApiError(400, 'the body of the request was not a %s of %s' % (kind, gv))
        body = copy.deepcopy(body)
        body.update(apiVersion=gv, kind=kind)
        body['metadata'] = new_meta(body.get('metadata'), ns)
        causes = []
        check_meta(kind, body['metadata'], causes)
        spec = body.get('spec')
        if not isinstance(spec, dict):
            causes.append({'field': 'spec', 'message': 'Required value'})
        elif key in ('sandboxclaims', 'sandboxwarmpools') and not (spec.get('sandboxTemplateRef') or {}).get('name'):
            causes.append({'field': 'spec.sandboxTemplateRef.name', 'message': 'Required value'})
        elif key in ('sandboxtemplates', 'sandboxes') and not isinstance(spec.get('podTemplate'), dict):
            causes.append({'field': 'spec.podTemplate', 'message': 'Required value'})
        elif key == 'sandboxwarmpools' and (not isinstance(spec.get('replicas', 0), int) or spec.get('replicas', 0) < 0):
            causes.append({'field': 'spec.replicas', 'message': 'Invalid value: must be >= 0'})
        elif key == 'networkpolicies' and not isinstance(spec.get('podSelector'), dict):
            causes.append({'field': 'spec.podSelector', 'message': 'Required value'})
        elif key == 'persistentvolumeclaims':
            check_pvc(spec, causes)
        if causes:
            raise invalid(kind if g == '' or g == 'networking.k8s.io' else '%s.%s' % (kind, g),
                          body['metadata'].get('name') or '', causes)
        name = body['metadata']['name']
        with LOCK:
            if (key, ns, name) in OBJECTS:
                raise ApiError(409, '%s.%s "%s" already exists' % (key, g, name), 'AlreadyExists',
                               {'name': name, 'group': g, 'kind': key})
        if key == 'sandboxes':
            sb = make_sandbox(ns, name, spec['podTemplate'], body['metadata'].get('labels') or {}, None, False)
            return self.send(201, sb)
        body['metadata']['labels'] = body['metadata'].get('labels') or {}
        if key == 'persistentvolumeclaims':  # bound at once, as a provisioner with Immediate binding
            storage = spec['resources']['requests']['storage']
            spec.update(volumeName='pvc-' + body['metadata']['uid'], volumeMode=spec.get('volumeMode', 'Filesystem'),
                        storageClassName=spec.get('storageClassName', 'standard'))
            body['status'] = {'phase': 'Bound', 'accessModes': list(spec['accessModes']),
                              'capacity': {'storage': storage}}
            with LOCK:
                if (key, ns, name) in OBJECTS:
                    raise ApiError(409, '%s "%s" already exists' % (key, name), 'AlreadyExists',
                                   {'name': name, 'kind': key})
                make_volume(ns, name, int(quantity(storage)))
        with LOCK:
            OBJECTS[(key, ns, name)] = body
            record(key, 'ADDED', body)
        if key == 'sandboxwarmpools':
            fill_pool(ns, body)
        elif key == 'sandboxclaims' and CONTROL['claim_bind_ms']:
            def bind_later(b=body, ms=CONTROL['claim_bind_ms']):
                time.sleep(ms / 1000.0)
                with LOCK:
                    if OBJECTS.get((key, ns, name)) is not b:
                        return
                claim(ns, b)
                with LOCK:
                    record(key, 'MODIFIED', b)
            threading.Thread(target=bind_later, daemon=True).start()
        elif key == 'sandboxclaims':
            claim(ns, body)
        with LOCK:
            return self.send(201, copy.deepcopy(refresh(key, body)))

    def list(self, key, ns):
        reqs = parse_selector(self.query.get('labelSelector'))
        fs = self.query.get('fieldSelector')
        g, v, kind = RESOURCES[key]
        with LOCK:
            items = [copy.deepcopy(refresh(key, o)) for (k, n, _), o in sorted(OBJECTS.items())
                     if k == key and (ns is None or n == ns) and
                     selector_matches(reqs, o['metadata'].get('labels') or {}) and field_matches(fs, o)]
            rv = str(RV[0])
        self.send(200, {'kind': kind + 'List', 'apiVersion': '%s/%s' % (g, v) if g else v,
                        'metadata': {'resourceVersion': rv}, 'items': items})

    def watch(self, key, ns):
        reqs = parse_selector(self.query.get('labelSelector'))
        fs = self.query.get('fieldSelector')
        field_matches(fs, {})  # a bad field selector is a 400 before the stream starts
        rv = self.query.get('resourceVersion') or ''
        if rv and not rv.isdigit():
            raise ApiError(400, 'invalid resourceVersion %r' % rv)
        ends = []
        if self.query.get('timeoutSeconds'):
            ends.append(time.monotonic() + float(self.query['timeoutSeconds']))
        if CONTROL['watch_end_ms']:
            ends.append(time.monotonic() + CONTROL['watch_end_ms'] / 1000.0)
        end = min(ends) if ends else None
        match = lambda o: (ns is None or o['metadata'].get('namespace') == ns) and \
            selector_matches(reqs, o['metadata'].get('labels') or {}) and field_matches(fs, o)
        self.set_status(200)
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Transfer-Encoding', 'chunked')
        self.send_header('Cache-Control', 'no-cache, private')
        self.end_headers()
        self.connection.settimeout(None)
        self.close_connection = True
        chunk = lambda data: self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data)) or self.wfile.flush()
        with LOCK:
            if not rv or rv == '0':
                first = [{'type': 'ADDED', 'object': copy.deepcopy(refresh(key, o))}
                         for (k, _, _), o in sorted(OBJECTS.items()) if k == key and match(o)]
                last = RV[0]
            else:
                last = int(rv)
                first = []
                oldest = EVENTS[0][0] if EVENTS else RV[0] + 1
                if last < oldest - 1 and last < RV[0]:
                    first = [{'type': 'ERROR', 'object': status_obj(410, 'Expired', 'too old resource version: %d (%d)'
                                                                    % (last, oldest - 1))}]
                    end = 0
        try:
            for e in first:
                chunk(json.dumps(e).encode() + b'\n')
            while end is None or time.monotonic() < end:
                with LOCK:
                    new = [e for e in EVENTS if e[0] > last and e[1] == key]
                    if not new:
                        COND.wait(0.2 if end is None else max(0.0, min(0.2, end - time.monotonic())))
                        new = [e for e in EVENTS if e[0] > last and e[1] == key]
                    if EVENTS:
                        last = max(last, EVENTS[-1][0])
                for _, _, typ, o in new:
                    if match(o):
                        chunk(json.dumps({'type': typ, 'object': o}).encode() + b'\n')
                if not new and select.select([self.connection], [], [], 0)[0] and self.peer_gone():
                    return  # the client went away
            self.wfile.write(b'0\r\n\r\n')
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass

    def peer_gone(self):
        try:
            self.connection.setblocking(False)
            return self.connection.recv(1) == b''
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except OSError:
            return True
        finally:
            self.connection.setblocking(True)

    def ssar(self):
        b = self.json_body()
        if not isinstance(b, dict) or b.get('kind', 'SelfSubjectAccessReview') != 'SelfSubjectAccessReview':
            raise ApiError(400, 'the body of the request was not a SelfSubjectAccessReview')
        spec = b.get('spec') or {}
        ra, nra = spec.get('resourceAttributes'), spec.get('nonResourceAttributes')
        if (ra is None) == (nra is None):
            raise invalid('SelfSubjectAccessReview', '', [{'field': 'spec.resourceAttributes', 'message':
                          'Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified'}])
        if ra is not None:
            ok = self.allowed(ra.get('verb', ''), ra.get('resource', ''), ra.get('group', ''), ra.get('subresource', ''))
        else:
            ok = CONTROL['access'].get('%s %s' % (nra.get('verb', ''), nra.get('path', '')), CONTROL['access_default'])
        out = {'kind': 'SelfSubjectAccessReview', 'apiVersion': 'authorization.k8s.io/v1',
               'metadata': {'creationTimestamp': None}, 'spec': spec, 'status': {'allowed': bool(ok)}}
        if ok:
            out['status']['reason'] = 'allowed by the test server\'s access set'
        self.send(201, out)

    # ------------------------------------------------------------ exec
    def exec(self, ns, name):
        q = self.query_all
        command = q.get('command') or []
        flag = lambda k: (q.get(k) or ['false'])[-1] in ('1', 'true', 'True')
        with LOCK:
            pod = PODS.get((ns, name))
            if pod is None:
                raise ApiError(404, 'pods "%s" not found' % name, 'NotFound', {'name': name, 'kind': 'pods'})
            phase = pod.obj['status']['phase']
        cname = self.query.get('container') or pod.container['name']
        if cname not in [c['name'] for c in pod.obj['spec']['containers']]:
            raise ApiError(400, 'container %s is not valid for pod %s' % (cname, name))
        if not command:
            raise ApiError(400, 'you must specify at least 1 command')
        if any('\0' in c for c in command):
            raise ApiError(400, 'a command argument holds a NUL byte')
        if not (flag('stdin') or flag('stdout') or flag('stderr')):
            raise ApiError(400, 'you must specify at least one of stdin, stdout, stderr')
        if flag('tty'):
            raise ApiError(400, 'tty is not supported by this test server')
        if phase == 'Pending':
            raise ApiError(400, 'pod %s does not have a host assigned' % name)
        if phase != 'Running' or pod.ended:
            raise ApiError(400, 'cannot exec into a container in a completed pod; current phase is %s' % phase)
        proto, key = self.ws_offer()
        try:
            proc = subprocess.Popen(pod.exec_argv(command), env=pod.env(),
                                    cwd=None if SANDBOXED else pod.dir + '/root',
                                    stdin=subprocess.PIPE if flag('stdin') else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as x:
            raise ApiError(500, 'exec failed: %s' % x)
        with LOCK:
            pod.execs = [p for p in pod.execs if p.poll() is None] + [proc]
        ws = self.ws_upgrade(proto, key)
        self.exec_stream(ws, proto, proc, flag)

    def ws_offer(self):
        """The WebSocket handshake's checks: (the subprotocol chosen, the key), or ApiError 400."""
        if self.headers.get('Upgrade', '').lower() != 'websocket' or \
                'upgrade' not in self.headers.get('Connection', '').lower():
            raise ApiError(400, 'Upgrade request required')
        key = self.headers.get('Sec-WebSocket-Key', '')
        try:
            nonce = base64.b64decode(key, validate=True)
        except ValueError:
            nonce = b''
        if self.headers.get('Sec-WebSocket-Version') != '13' or len(nonce) != 16:
            raise ApiError(400, 'a WebSocket handshake needs Sec-WebSocket-Version 13 and a Sec-WebSocket-Key')
        offered = [x.strip() for x in self.headers.get('Sec-WebSocket-Protocol', '').split(',') if x.strip()]
        proto = next((x for x in offered if x in ('v5.channel.k8s.io', 'v4.channel.k8s.io')), None)
        if proto is None:
            raise ApiError(400, 'none of the offered subprotocols %s is supported (v5.channel.k8s.io, '
                           'v4.channel.k8s.io)' % offered)
        return proto, key

    def ws_upgrade(self, proto, key):
        """Answers 101 and returns the connection's WebSocket."""
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.set_status(101)
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept', accept)
        self.send_header('Sec-WebSocket-Protocol', proto)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        return WebSocket(self.connection, self.rfile)

    def exec_stream(self, ws, proto, proc, flag):
        drop = CONTROL['exec_drop_ms']
        first = threading.Event()

        def cut():  # the fault: the connection goes, drop ms after the first output
            first.wait()
            time.sleep(drop / 1000.0)
            with ws.wlock:
                ws.closed = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if drop:
            threading.Thread(target=cut, daemon=True).start()

        def pump(fd, channel):
            while True:
                try:
                    data = os.read(fd, 32768)
                except OSError:
                    break
                if not data:
                    break
                try:
                    if flag('stdout' if channel == 1 else 'stderr'):
                        ws.send(bytes([channel]) + data)
                        first.set()
                except OSError:
                    pass  # the client went away: keep draining, so that the command is not blocked
        pumps = [threading.Thread(target=pump, args=(proc.stdout.fileno(), 1), daemon=True),
                 threading.Thread(target=pump, args=(proc.stderr.fileno(), 2), daemon=True)]
        for t in pumps:
            t.start()

        at_close, flooding, gone = threading.Event(), threading.Event(), threading.Event()

        def flood():  # the fault: nothing is read, pings come until the client goes
            flooding.set()
            try:
                while True:
                    ws.send_frame(9, b'p' * 125)
            except OSError:
                pass
            with ws.wlock:
                ws.closed = True
            gone.set()
            if proc.stdin and not proc.stdin.closed:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

        def reader(flood_at_close=False):
            try:
                while True:
                    msg = ws.recv()
                    if msg is None:
                        break
                    if not msg:
                        continue
                    ch, data = msg[0], msg[1:]
                    if ch == 0 and proc.stdin:
                        try:
                            proc.stdin.write(data)
                            proc.stdin.flush()
                        except OSError:
                            pass
                    elif ch == 255 and proto == 'v5.channel.k8s.io' and data[:1] == b'\0' and proc.stdin:
                        if flood_at_close:
                            at_close.set()
                            return flood()
                        proc.stdin.close()
            except (EOFError, OSError, ValueError):
                pass
            at_close.set()
            # The connection is gone: the command's stdin ends (the command itself runs on, as
            # under a kubelet).
            with ws.wlock:
                ws.closed = True
            if proc.stdin and not proc.stdin.closed:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        how = CONTROL['exec_flood']
        threading.Thread(target=reader if not how else (lambda: reader(True)) if how == 'after_stdin' else flood,
                         daemon=True).start()
        code = proc.wait()
        for t in pumps:
            t.join()
        if how == 'after_stdin':  # the status waits for the flood, which lasts as long as the client
            at_close.wait(120)
            if flooding.is_set():
                gone.wait()
        proc.stdout.close()  # drained: the pumps are done with them
        proc.stderr.close()
        code = code if code >= 0 else 128 - code
        try:
            ws.send(bytes([3]) + json.dumps(exec_status(code)).encode())
        except OSError:
            pass
        ws.close(1000)
        first.set()  # a cut still waiting has nothing left to cut
        try:
            self.connection.shutdown(socket.SHUT_WR) if not isinstance(self.connection, ssl.SSLSocket) else None
        except OSError:
            pass


    # ------------------------------------------------------------ attach
    def attach(self, ns, name):
        """pods/attach: the container's stdin and stdout (stdin: true in its spec) on a WebSocket,
        as exec's, until the command ends (then its status) or the client goes (then, with
        stdinOnce, the command's stdin ends)."""
        q = self.query_all
        flag = lambda k: (q.get(k) or ['false'])[-1] in ('1', 'true', 'True')
        with LOCK:
            pod = PODS.get((ns, name))
            if pod is None:
                raise ApiError(404, 'pods "%s" not found' % name, 'NotFound', {'name': name, 'kind': 'pods'})
            phase = pod.obj['status']['phase']
        cname = self.query.get('container') or pod.container['name']
        if cname != pod.container['name']:
            raise ApiError(400, 'container %s is not valid for pod %s (this server attaches to the first '
                           'container only)' % (cname, name))
        if not (flag('stdin') or flag('stdout') or flag('stderr')):
            raise ApiError(400, 'you must specify at least one of stdin, stdout, stderr')
        if flag('tty'):
            raise ApiError(400, 'tty is not supported by this test server')
        if flag('stdin') and pod.stdin_w is None and phase == 'Running':
            raise ApiError(400, 'container %s in pod %s does not have stdin enabled' % (cname, name))
        if phase == 'Pending':
            raise ApiError(400, 'pod %s does not have a host assigned' % name)
        if phase != 'Running' or pod.ended:
            raise ApiError(400, 'cannot attach to a container in a completed pod; current phase is %s' % phase)
        proto, key = self.ws_offer()
        ws = self.ws_upgrade(proto, key)
        with pod.attach_lock:
            pod.attached = ws if flag('stdout') else None
        once = pod.container.get('stdinOnce') is True
        flood, cut, raw = CONTROL['attach_flood'], CONTROL['attach_cut'], CONTROL['attach_raw']
        hold = CONTROL['attach_hold']

        def stall():  # the fault: nothing more is read, and pings come until the client goes
            try:
                while True:
                    ws.send_frame(9, b'p' * 125)
            except OSError:
                pass

        def close_stdin():
            with pod.attach_lock:
                fd, pod.stdin_w = pod.stdin_w, None
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

        def reader():
            try:
                while True:
                    msg = ws.recv()
                    if msg is None:
                        break
                    if not msg:
                        continue
                    ch, data = msg[0], msg[1:]
                    if hold and ch == 0 and hold['on'].encode() in data:
                        time.sleep(hold['ms'] / 1000)
                    if ch == 0 and flag('stdin') and pod.stdin_w is not None:
                        try:
                            os.write(pod.stdin_w, data)
                        except OSError:
                            pass
                    elif ch == 255 and proto == 'v5.channel.k8s.io' and data[:1] == b'\0' and once:
                        close_stdin()
                    if flood and ch == 0 and flood.encode() in data:
                        stall()
                        break
                    if raw and ch == 0 and raw['on'].encode() in data:
                        ws.send_raw(bytes.fromhex(raw['hex']))
                    if cut and ch == 0 and cut.encode() in data:
                        with ws.wlock:
                            ws.closed = True
                            try:
                                self.connection.shutdown(socket.SHUT_RDWR)
                            except OSError:
                                pass
                        break
            except (EOFError, OSError, ValueError):
                pass
            with ws.wlock:
                ws.closed = True
            with pod.attach_lock:
                if pod.attached is ws:
                    pod.attached = None
            if once and flag('stdin'):
                close_stdin()
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        while not pod.done.wait(0.2):
            if ws.closed:
                return
        with pod.attach_lock:
            if pod.attached is ws:
                pod.attached = None
        try:
            code = pod.exit_code if pod.exit_code is not None else 137
            ws.send(bytes([3]) + json.dumps(exec_status(code)).encode())
        except OSError:
            pass
        ws.close(1000)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64
    ctx = None

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.ctx:
            sock.settimeout(10)
            sock = self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def finish_request(self, request, client_address):
        if self.ctx:
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass


def openssl(*args):
    r = subprocess.run(['openssl'] + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit('k8s-test: openssl %s: %s' % (args[0], r.stderr.decode().strip()))


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate (CN
    test-user, O sandbox-mcp-testers), all EC P-256, in folder d."""
    ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
    openssl('req', '-x509', *ec, '-keyout', d + '/ca.key', '-out', d + '/ca.crt', '-days', '2',
            '-subj', '/CN=sandbox-mcp-test-ca', '-addext', 'basicConstraints=critical,CA:TRUE',
            '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
    for name, subj, ext in (('server', '/CN=kube-apiserver', 'subjectAltName=IP:127.0.0.1,DNS:localhost\n'
                             'extendedKeyUsage=serverAuth\n'),
                            ('client', '/O=sandbox-mcp-testers/CN=test-user', 'extendedKeyUsage=clientAuth\n')):
        with open(d + '/%s.ext' % name, 'w') as f:
            f.write(ext + 'keyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n')
        openssl('req', *ec, '-keyout', d + '/%s.key' % name, '-out', d + '/%s.csr' % name, '-subj', subj)
        openssl('x509', '-req', '-in', d + '/%s.csr' % name, '-CA', d + '/ca.crt', '-CAkey', d + '/ca.key',
                '-CAcreateserial', '-out', d + '/%s.crt' % name, '-days', '2', '-extfile', d + '/%s.ext' % name)


def kubeconfig(d, port):
    b64 = lambda f: base64.b64encode(open(d + '/' + f, 'rb').read()).decode()
    cluster = {'server': 'https://127.0.0.1:%d' % port, 'certificate-authority-data': b64('ca.crt')}
    # JSON is YAML: clientcmd and client-node read it.
    return json.dumps({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'test',
        'clusters': [{'name': 'test', 'cluster': cluster}],
        'users': [{'name': 'token-user', 'user': {'token': TOKEN}},
                  {'name': 'cert-user', 'user': {'client-certificate-data': b64('client.crt'),
                                                 'client-key-data': b64('client.key')}}],
        'contexts': [{'name': 'test', 'context': {'cluster': 'test', 'user': 'token-user', 'namespace': 'default'}},
                     {'name': 'test-cert', 'context': {'cluster': 'test', 'user': 'cert-user', 'namespace': 'default'}}],
        'preferences': {}}, indent=1) + '\n'


def main():
    global SANDBOXED, TOKEN
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--port-file')
    ap.add_argument('--kubeconfig-out')
    ap.add_argument('--token')
    a = ap.parse_args()
    if a.token:
        TOKEN = a.token
    SANDBOXED = probe_namespaces()
    if SANDBOXED:
        # A mount namespace of its own (no thread runs yet): the claims' tmpfs volumes go with
        # this server, however it ends.
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x00020000) != 0 or libc.mount(None, b'/', None, (1 << 14) | (1 << 18), None) != 0:
            SANDBOXED = False
    certs = os.path.join(ROOT, 'pki')
    os.makedirs(certs, mode=0o700)
    make_certs(certs)
    srv = Server(('127.0.0.1', a.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs + '/server.crt', certs + '/server.key')
    ctx.load_verify_locations(certs + '/ca.crt')
    ctx.verify_mode = ssl.CERT_OPTIONAL
    srv.ctx = ctx
    port = srv.server_address[1]
    if a.kubeconfig_out:
        with open(a.kubeconfig_out + '.tmp', 'w') as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(kubeconfig(certs, port))
        os.rename(a.kubeconfig_out + '.tmp', a.kubeconfig_out)
    if a.port_file:
        with open(a.port_file + '.tmp', 'w') as f:
            f.write('%d\n' % port)
        os.rename(a.port_file + '.tmp', a.port_file)
    log('pods run %s' % ('in PID, mount, UTS and network namespaces of their own' if SANDBOXED else
                         'on this host, in a folder each (no namespaces: not root, or unshare refused)'))
    log('listening on https://127.0.0.1:%d, state in %s' % (port, ROOT))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        for p in ALL_PODS:
            p.kill()
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == '__main__':
    main()
