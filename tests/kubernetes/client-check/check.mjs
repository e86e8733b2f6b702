// Drives the loopback Kubernetes test server (../server.py) with the official JavaScript
// client, @kubernetes/client-node, so that the server speaks the API as a cluster does:
// KubeConfig.loadFromFile (token and client-certificate users), CoreV1Api pods, Watch, Exec, Attach
// over WebSocket (v5.channel.k8s.io), PersistentVolumeClaims, NetworkingV1Api, AuthorizationV1Api and
// CustomObjectsApi (an agent-sandbox SandboxClaim bound from a warm pool).
// Usage: node check.mjs KUBECONFIG. Prints one line per check and "N passed, N failed";
// exit status 1 on any failure. K8S_TEST_SANDBOXED=0: the server runs pods without namespaces
// (not as root), so exec's user and folder are not the pod's.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const ns = 'default';
const name = `check-${process.pid}`;
let passed = 0, failed = 0;
async function check(what, fn) {
  try { await fn(); passed++; console.log(`ok   ${what}`); }
  catch (e) { failed++; console.log(`FAIL ${what}: ${e?.stack ?? e}`); }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(fn, what) {
  for (let i = 0; i < 100; i++) { const v = await fn(); if (v) return v; await sleep(100); }
  throw new Error(`timed out waiting for ${what}`);
}
const podBody = (n, labels) => ({
  apiVersion: 'v1', kind: 'Pod',
  metadata: { name: n, labels },
  spec: {
    restartPolicy: 'Never', automountServiceAccountToken: false, activeDeadlineSeconds: 600,
    containers: [{
      name: 'main', image: 'python:3.12-slim', command: ['sleep', 'infinity'],
      resources: { limits: { cpu: '1', memory: '512Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
      securityContext: { runAsUser: 1000, runAsNonRoot: true, allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
      volumeMounts: [{ name: 'workspace', mountPath: '/workspace' }],
      workingDir: '/workspace',
    }],
    volumes: [{ name: 'workspace', emptyDir: { sizeLimit: '64Mi' } }],
  },
});
function collect() {
  const s = new PassThrough(); s.text = '';
  s.on('data', (d) => { s.text += d.toString(); });
  return s;
}
async function exec(pod, command, input) {
  const out = collect(), err = collect();
  let status;
  const ws = await new k8s.Exec(kc).exec(ns, pod, 'main', command, out, err,
    input === undefined ? null : Readable.from([Buffer.from(input)]), false, (s) => { status = s; });
  await new Promise((res) => { if (ws.readyState === ws.CLOSED) res(); else ws.on('close', res); });
  return { stdout: out.text, stderr: err.text, status, protocol: ws.protocol };
}

let watched = [];
let watchReq;
await check('watch pods from now on (labelSelector)', async () => {
  const list = await core.listNamespacedPod({ namespace: ns, labelSelector: `check=${name}` });
  assert.equal(list.items.length, 0);
  watchReq = await new k8s.Watch(kc).watch(`/api/v1/namespaces/${ns}/pods`,
    { labelSelector: `check=${name}`, resourceVersion: list.metadata.resourceVersion },
    (type, obj) => watched.push([type, obj.metadata.name, obj.status?.phase, obj.metadata.deletionTimestamp]),
    () => {});
});
await check('create pod', async () => {
  const p = await core.createNamespacedPod({ namespace: ns, body: podBody(name, { check: name }) });
  assert.equal(p.metadata.name, name);
  assert.ok(p.metadata.uid);
  assert.equal(p.spec.containers[0].securityContext.runAsUser, 1000);
  assert.equal(p.spec.volumes[0].emptyDir.sizeLimit, '64Mi');
  assert.equal(p.status.phase, 'Pending');
});
await check('read pod until Running and Ready', async () => {
  const p = await until(async () => {
    const x = await core.readNamespacedPod({ name, namespace: ns });
    return x.status.phase === 'Running' && x;
  }, 'Running');
  assert.ok(p.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True'));
  assert.ok(p.status.podIP);
});
await check('list pods by label', async () => {
  const l = await core.listNamespacedPod({ namespace: ns, labelSelector: `check=${name}` });
  assert.deepEqual(l.items.map((p) => p.metadata.name), [name]);
  const none = await core.listNamespacedPod({ namespace: ns, labelSelector: `check=${name},other in (x,y)` });
  assert.equal(none.items.length, 0);
});
await check('create with an invalid spec is 422 Invalid', async () => {
  const bad = podBody(`${name}-bad`, {});
  bad.spec.volumes[0].emptyDir.sizeLimit = 'lots';
  await assert.rejects(core.createNamespacedPod({ namespace: ns, body: bad }),
    (e) => e.code === 422 && JSON.parse(e.body).reason === 'Invalid');
});
await check('exec (WebSocket v5): stdin, stdout, stderr, exit status', async () => {
  const r = await exec(name, ['sh', '-c', 'cat; echo to-err >&2; id -u; pwd; exit 3'], 'from stdin\n');
  assert.equal(r.protocol, 'v5.channel.k8s.io');
  if (process.env.K8S_TEST_SANDBOXED === '0') assert.match(r.stdout, /^from stdin\n/);
  else assert.equal(r.stdout, 'from stdin\n1000\n/workspace\n');
  assert.equal(r.stderr, 'to-err\n');
  assert.equal(r.status.status, 'Failure');
  assert.equal(r.status.reason, 'NonZeroExitCode');
  assert.deepEqual(r.status.details.causes, [{ reason: 'ExitCode', message: '3' }]);
  const ok = await exec(name, ['sh', '-c', 'echo ok > f; cat f']);
  assert.equal(ok.stdout, 'ok\n');
  assert.equal(ok.status.status, 'Success');
});
await check('network policy: create, read, list, delete', async () => {
  const net = kc.makeApiClient(k8s.NetworkingV1Api);
  const body = { metadata: { name: `${name}-deny`, labels: { check: name } },
    spec: { podSelector: { matchLabels: { check: name } }, policyTypes: ['Ingress', 'Egress'] } };
  await net.createNamespacedNetworkPolicy({ namespace: ns, body });
  const got = await net.readNamespacedNetworkPolicy({ name: `${name}-deny`, namespace: ns });
  assert.deepEqual(got.spec.policyTypes, ['Ingress', 'Egress']);
  const l = await net.listNamespacedNetworkPolicy({ namespace: ns, labelSelector: `check=${name}` });
  assert.equal(l.items.length, 1);
  await net.deleteNamespacedNetworkPolicy({ name: `${name}-deny`, namespace: ns });
  await assert.rejects(net.readNamespacedNetworkPolicy({ name: `${name}-deny`, namespace: ns }), (e) => e.code === 404);
});
await check('persistent volume claim: create, read bound, a pod Pending without it, then its files outlive a pod', async () => {
  const claim = `${name}-ws`;
  const body = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: claim, labels: { check: name } },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '64Mi' } } } };
  const withClaim = (n) => { const b = podBody(n, { pvc: name }); b.spec.volumes = [{ name: 'workspace',
    persistentVolumeClaim: { claimName: claim } }]; b.spec.securityContext = { fsGroup: 1000,
    fsGroupChangePolicy: 'OnRootMismatch' }; return b; };
  await core.createNamespacedPod({ namespace: ns, body: withClaim(`${name}-p0`) });
  const pending = await until(async () => {
    const p = await core.readNamespacedPod({ name: `${name}-p0`, namespace: ns });
    return p.status.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable') && p;
  }, 'the pod Unschedulable');
  assert.equal(pending.status.phase, 'Pending');
  assert.match(pending.status.conditions[0].message, new RegExp(`persistentvolumeclaim "${claim}" not found`));
  await core.deleteNamespacedPod({ name: `${name}-p0`, namespace: ns, gracePeriodSeconds: 0 });
  const made = await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body });
  assert.equal(made.metadata.name, claim);
  const got = await core.readNamespacedPersistentVolumeClaim({ name: claim, namespace: ns });
  assert.equal(got.status.phase, 'Bound');
  assert.equal(got.status.capacity.storage, '64Mi');
  assert.deepEqual(got.spec.accessModes, ['ReadWriteOnce']);
  const l = await core.listNamespacedPersistentVolumeClaim({ namespace: ns, labelSelector: `check=${name}` });
  assert.equal(l.items.length, 1);
  if (process.env.K8S_TEST_SANDBOXED !== '0') {
    for (const [i, cmd] of [[1, 'echo kept > f; cat f'], [2, 'cat f']]) {
      const p = `${name}-p${i}`;
      await core.createNamespacedPod({ namespace: ns, body: withClaim(p) });
      await until(async () => (await core.readNamespacedPod({ name: p, namespace: ns })).status.phase === 'Running', 'Running');
      assert.equal((await exec(p, ['sh', '-c', cmd])).stdout, 'kept\n');
      await core.deleteNamespacedPod({ name: p, namespace: ns, gracePeriodSeconds: 0 });
    }
  }
  await core.deleteNamespacedPersistentVolumeClaim({ name: claim, namespace: ns });
  await assert.rejects(core.readNamespacedPersistentVolumeClaim({ name: claim, namespace: ns }), (e) => e.code === 404);
});
await check('self subject access review', async () => {
  const authz = kc.makeApiClient(k8s.AuthorizationV1Api);
  const r = await authz.createSelfSubjectAccessReview({ body: { apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { namespace: ns, verb: 'create', resource: 'pods',
      subresource: 'exec' } } } });
  assert.equal(r.status.allowed, true);
});
await check('sandbox claim from a warm pool (CustomObjectsApi)', async () => {
  const co = kc.makeApiClient(k8s.CustomObjectsApi);
  const ext = { group: 'extensions.agents.x-k8s.io', version: 'v1alpha1', namespace: ns };
  const tpl = podBody('unused', {});
  await co.createNamespacedCustomObject({ ...ext, plural: 'sandboxtemplates', body: {
    apiVersion: 'extensions.agents.x-k8s.io/v1alpha1', kind: 'SandboxTemplate', metadata: { name: `${name}-tpl` },
    spec: { podTemplate: { metadata: { labels: { check: `${name}-sb` } }, spec: tpl.spec } } } });
  await co.createNamespacedCustomObject({ ...ext, plural: 'sandboxwarmpools', body: {
    apiVersion: 'extensions.agents.x-k8s.io/v1alpha1', kind: 'SandboxWarmPool', metadata: { name: `${name}-pool` },
    spec: { replicas: 1, sandboxTemplateRef: { name: `${name}-tpl` } } } });
  const warm = await until(async () => {
    const l = await core.listNamespacedPod({ namespace: ns, labelSelector: `check=${name}-sb` });
    return l.items.length === 1 && l.items[0].status.phase === 'Running' && l.items[0];
  }, 'a warm pod');
  await co.createNamespacedCustomObject({ ...ext, plural: 'sandboxclaims', body: {
    apiVersion: 'extensions.agents.x-k8s.io/v1alpha1', kind: 'SandboxClaim', metadata: { name: `${name}-claim` },
    spec: { sandboxTemplateRef: { name: `${name}-tpl` } } } });
  const c = await until(async () => {
    const x = await co.getNamespacedCustomObject({ ...ext, plural: 'sandboxclaims', name: `${name}-claim` });
    return x.status?.conditions?.some((k) => k.type === 'Ready' && k.status === 'True') && x;
  }, 'the claim Ready');
  assert.equal(c.status.sandbox.name, warm.metadata.name);
  const r = await exec(c.status.sandbox.name, ['sh', '-c', 'echo claimed']);
  assert.equal(r.stdout, 'claimed\n');
  await co.deleteNamespacedCustomObject({ ...ext, plural: 'sandboxclaims', name: `${name}-claim` });
  await co.deleteNamespacedCustomObject({ ...ext, plural: 'sandboxwarmpools', name: `${name}-pool` });
  await co.deleteNamespacedCustomObject({ ...ext, plural: 'sandboxtemplates', name: `${name}-tpl` });
  await until(async () => (await core.listNamespacedPod({ namespace: ns, labelSelector: `check=${name}-sb` }))
    .items.length === 0, 'the sandboxes\' pods gone');
});
await check('attach (WebSocket v5) to a stdin pod: its stdin, then its stdout, its status at the end', async () => {
  const att = `${name}-att`;
  const body = podBody(att, { check: `${name}-att` });
  Object.assign(body.spec.containers[0], { stdin: true, stdinOnce: true,
    command: ['sh', '-c', 'read x; echo "got $x"; cat; echo end'] });
  await core.createNamespacedPod({ namespace: ns, body });
  await until(async () => (await core.readNamespacedPod({ name: att, namespace: ns })).status.phase === 'Running', 'Running');
  const out = collect(), err = collect();
  const ws = await new k8s.Attach(kc).attach(ns, att, 'main', out, err,
    Readable.from([Buffer.from('hello\n'), Buffer.from('more\n')]), false);
  await new Promise((res) => { if (ws.readyState === ws.CLOSED) res(); else ws.on('close', res); });
  assert.equal(ws.protocol, 'v5.channel.k8s.io');
  assert.equal(out.text, 'got hello\nmore\nend\n');
  await core.deleteNamespacedPod({ name: att, namespace: ns, gracePeriodSeconds: 0 });
});
await check('client certificate user', async () => {
  const kc2 = new k8s.KubeConfig();
  kc2.loadFromFile(process.argv[2]);
  kc2.setCurrentContext('test-cert');
  const p = await kc2.makeApiClient(k8s.CoreV1Api).readNamespacedPod({ name, namespace: ns });
  assert.equal(p.metadata.name, name);
});
await check('delete pod with grace, then gone', async () => {
  const d = await core.deleteNamespacedPod({ name, namespace: ns, gracePeriodSeconds: 5 });
  assert.ok(d.metadata.deletionTimestamp);
  await until(async () => {
    try { await core.readNamespacedPod({ name, namespace: ns }); return false; }
    catch (e) { if (e.code === 404) return true; throw e; }
  }, 'the pod gone');
});
await check('the watch saw ADDED, MODIFIED to Running, DELETED', async () => {
  await until(() => watched.some(([t]) => t === 'DELETED'), 'DELETED');
  watchReq.abort();
  assert.deepEqual(watched[0].slice(0, 3), ['ADDED', name, 'Pending']);
  assert.ok(watched.some(([t, , ph]) => t === 'MODIFIED' && ph === 'Running'));
  assert.ok(watched.some(([t, , , del]) => t === 'MODIFIED' && del));
});
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
