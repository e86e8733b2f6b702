// Drives the loopback Daytona test server (../server.py) with Daytona's official TypeScript
// SDK, so that the server stays faithful to the service the backend is written against.
// Reads DAYTONA_API_KEY and DAYTONA_API_URL like any SDK user. Prints one line per check and
// "N passed, N failed"; exit status 1 on any failure.
import { Daytona } from '@daytonaio/sdk';
import assert from 'node:assert/strict';

const daytona = new Daytona();
let sandbox;
let passed = 0, failed = 0;
async function check(name, fn) {
  try { await fn(); passed++; console.log(`ok   ${name}`); }
  catch (e) { failed++; console.log(`FAIL ${name}: ${e?.stack ?? e}`); }
}

await check('create', async () => {
  sandbox = await daytona.create({ language: 'python', labels: { 'sdk-check': '1' }, autoStopInterval: 5 }, { timeout: 30 });
  assert.ok(sandbox.id, 'no id');
  assert.equal(sandbox.state, 'started');
});
await check('get', async () => {
  const again = await daytona.get(sandbox.id);
  assert.equal(again.id, sandbox.id);
  assert.equal(again.labels['sdk-check'], '1');
});
await check('execute_command', async () => {
  const r = await sandbox.process.executeCommand('echo hello; exit 3');
  assert.equal(r.exitCode, 3);
  assert.equal(r.result, 'hello\n');
});
await check('session_streams', async () => {
  await sandbox.process.createSession('sdk-check');
  const r = await sandbox.process.executeSessionCommand('sdk-check', { command: 'echo out; echo err >&2' });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'out\n');
  assert.equal(r.stderr, 'err\n');
  const a = await sandbox.process.executeSessionCommand('sdk-check', { command: 'sleep 0.3; echo later', runAsync: true });
  assert.ok(a.cmdId, 'no cmdId');
  let c;
  for (let i = 0; i < 50; i++) {
    c = await sandbox.process.getSessionCommand('sdk-check', a.cmdId);
    if (c.exitCode !== undefined && c.exitCode !== null) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal(c.exitCode, 0);
  const logs = await sandbox.process.getSessionCommandLogs('sdk-check', a.cmdId);
  assert.equal(logs.stdout, 'later\n');
  await sandbox.process.deleteSession('sdk-check');
});
await check('upload_download', async () => {
  await sandbox.fs.uploadFile(Buffer.from('some data\n'), '/home/daytona/dir/in.txt');
  const back = await sandbox.fs.downloadFile('/home/daytona/dir/in.txt');
  assert.equal(back.toString(), 'some data\n');
  const r = await sandbox.process.executeCommand('cat /home/daytona/dir/in.txt');
  assert.equal(r.result, 'some data\n');
});
await check('delete', async () => {
  await sandbox.delete();
  await assert.rejects(daytona.get(sandbox.id), /not found/i);
});
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
