// Files in and out, and the workspace as MCP resources, as a host built on the official MCP
// TypeScript SDK client sees them: the SDK checks every result against its schemas (content
// blocks, and structuredContent against the tool's outputSchema once the tools were listed).
// Usage: node check.mjs SERVER_COMMAND [ARGS...]; prints one line per check and
// "N passed, N failed"; exit 1 on any failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, McpError, ResourceListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

const [command, ...args] = process.argv.slice(2);
if (!command) { console.error('usage: check.mjs SERVER_COMMAND [ARGS...]'); process.exit(2); }
let stderrText = '';
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'pipe' });
transport.stderr?.on('data', (d) => { stderrText += d; });
const client = new Client({ name: 'sdk-files', version: '1.0.0' }, { capabilities: {} });
let changed = 0;
const waiters = [];
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { changed++; waiters.splice(0).forEach((w) => w()); });

// As patient as the calls: a listing on a loaded machine (a remote backend's, 10,000 files) may
// take longer than the SDK's default 60 s.
const patient = { timeout: 120000 };
const call = (name, a) => client.callTool({ name, arguments: a }, CallToolResultSchema, patient);
const sha = (b) => createHash('sha256').update(b).digest('hex');
const allBytes = Buffer.from([...Array(256).keys()]);
const errorCode = async (p) => { try { await p; } catch (e) { if (e instanceof McpError) return e.code; throw e; } return 0; };

// A PNG from nothing but the standard library: 64 x 48, a colour gradient.
const PNG_SCRIPT = `
import os, struct, zlib, hashlib
w, h = 64, 48
rows = b''.join(b'\\x00' + bytes(v for x in range(w) for v in (x * 4, y * 5, 128)) for y in range(h))
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
png = (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))
os.makedirs('outputs', exist_ok=True)
open('outputs/plot.png', 'wb').write(png)
print(hashlib.sha256(png).hexdigest())
`;

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

check('capabilities', async () => {
  assert.ok(client.getServerCapabilities()?.resources, 'resources capability missing');
  await client.listTools(); // from here on the SDK checks structuredContent against outputSchema
});

check('png_comes_back_as_image', async () => {
  const r = await call('execute_python', { script: PNG_SCRIPT });
  assert.equal(r.structuredContent.exit_code, 0, JSON.stringify(r.structuredContent));
  const img = r.content.find((c) => c.type === 'image');
  assert.ok(img, 'no image content: ' + JSON.stringify(r.content.map((c) => c.type)));
  assert.equal(img.mimeType, 'image/png');
  assert.equal(sha(Buffer.from(img.data, 'base64')), r.structuredContent.stdout.trim(), 'image bytes differ');
  const a = r.structuredContent.artifacts?.find((x) => x.path === 'outputs/plot.png');
  assert.ok(a && a.shown === 'image' && a.uri === 'sandbox://workspace/outputs/plot.png', JSON.stringify(a));
  assert.match(r.content[0].text, /outputs\/plot\.png \(image\/png, \d+ bytes\): shown as an image/);
});

check('every_byte_in_through_files_out_through_collect', async () => {
  const r = await call('execute_bash_commands', {
    code: 'cp in/all.bin copy.bin && wc -c < copy.bin',
    files: { 'in/all.bin': { base64: allBytes.toString('base64') } },
    collect: ['copy.bin', 'in/all.bin', 'missing.bin'],
  });
  assert.equal(r.structuredContent.stdout.trim(), '256');
  const byPath = Object.fromEntries(r.structuredContent.artifacts.map((a) => [a.path, a]));
  for (const p of ['copy.bin', 'in/all.bin']) {
    assert.equal(byPath[p].shown, 'base64', JSON.stringify(byPath[p]));
    assert.ok(Buffer.from(byPath[p].base64, 'base64').equals(allBytes), `${p} differs`);
  }
  assert.equal(byPath['missing.bin'].shown, 'none');
  assert.equal(byPath['missing.bin'].note, 'no such file');
});

check('outputs_hostile_shapes', async () => {
  // A 2 GB sparse file (or 1 GB where the sandbox's file size limit refuses 2 GB, as local's
  // and Docker's 1 GiB default does), a FIFO and a symlink out of the sandbox.
  const r = await call('execute_bash_commands', {
    code: 'mkdir -p outputs && cd outputs && { truncate -s 2G sparse.bin 2>/dev/null || truncate -s 1G sparse.bin; } && ' +
      'mkfifo pipe && ln -s /etc/passwd link && echo done',
  });
  assert.equal(r.structuredContent.stdout, 'done\n', JSON.stringify(r.structuredContent));
  const byPath = Object.fromEntries(r.structuredContent.artifacts.map((a) => [a.path, a]));
  assert.ok([2 ** 30, 2 ** 31].includes(byPath['outputs/sparse.bin'].size), JSON.stringify(byPath['outputs/sparse.bin']));
  assert.equal(byPath['outputs/sparse.bin'].shown, 'link');
  assert.ok(r.content.some((c) => c.type === 'resource_link' && c.uri === 'sandbox://workspace/outputs/sparse.bin'));
  assert.equal(byPath['outputs/pipe'].shown, 'none');
  assert.match(byPath['outputs/pipe'].note, /FIFO/);
  assert.equal(byPath['outputs/link'].shown, 'none');
  assert.match(byPath['outputs/link'].note, /symlink/);
  assert.equal(await errorCode(client.readResource({ uri: 'sandbox://workspace/outputs/sparse.bin' }, patient)), -32602);
  assert.equal(await errorCode(client.readResource({ uri: 'sandbox://workspace/outputs/pipe' }, patient)), -32002);
  assert.equal(await errorCode(client.readResource({ uri: 'sandbox://workspace/outputs/link' }, patient)), -32002);
});

check('ten_thousand_outputs', async () => {
  const r = await call('execute_bash_commands', {
    code: 'mkdir -p outputs/many && cd outputs/many && seq -f "f%05g" 10000 | xargs touch && ls | wc -l',
  });
  assert.equal(r.structuredContent.stdout.trim(), '10000');
  assert.equal(r.structuredContent.artifacts.length, 20);
  // outputs/ is looked at up to 1,000 names: 980 more are counted, and the rest is said.
  assert.match(r.content[0].text, /\n980 more files are not returned \(at most 20 per call\)/);
  assert.match(r.content[0].text, /outputs\/ holds more than 1000 files \(or 100000 names\), or took too long to walk: only part of it was looked at/);
  assert.ok(JSON.stringify(r).length <= 32 * 1024, `result is ${JSON.stringify(r).length} bytes`);
});

check('resources_list_paged_and_read', async () => {
  await call('execute_bash_commands', {
    code: 'mkdir -p many && for i in $(seq 130); do echo $i > many/n$i.txt; done; printf "héllo" > "a b.txt"',
  });
  const uris = [];
  let cursor, pages = 0;
  do {
    const page = await client.listResources(cursor ? { cursor } : {}, patient);
    uris.push(...page.resources.map((x) => x.uri));
    cursor = page.nextCursor;
    pages++;
  } while (cursor && pages < 100);
  assert.ok(pages >= 2, `one page only (${uris.length} resources)`);
  assert.equal(uris.filter((u) => u.startsWith('sandbox://workspace/many/')).length, 130);
  assert.ok(uris.includes('sandbox://workspace/a%20b.txt'), 'a b.txt missing');
  assert.ok(uris.includes('sandbox://workspace/in/all.bin'), 'in/all.bin missing');
  assert.ok(!uris.some((u) => u.includes('/.sandbox/')), 'the server\'s own folder is listed');
  const t = await client.readResource({ uri: 'sandbox://workspace/a%20b.txt' }, patient);
  assert.equal(t.contents[0].text, 'héllo');
  const b = await client.readResource({ uri: 'sandbox://workspace/in/all.bin' }, patient);
  assert.ok(Buffer.from(b.contents[0].blob, 'base64').equals(allBytes), 'blob differs');
  assert.equal(await errorCode(client.readResource({ uri: 'sandbox://workspace/no/such' }, patient)), -32002);
  assert.equal(await errorCode(client.readResource({ uri: 'sandbox://workspace/../etc/passwd' }, patient)), -32602);
  assert.equal(await errorCode(client.readResource({ uri: 'file:///etc/passwd' }, patient)), -32602);
});

check('list_changed_after_a_call_that_changed_the_tree', async () => {
  await client.listResources(undefined, patient);
  const before = changed;
  const got = new Promise((res) => waiters.push(res));
  await call('execute_bash_commands', { code: 'echo new > new-file.txt' });
  await Promise.race([got, new Promise((_, rej) => setTimeout(() => rej(new Error('no list_changed within 10 s')), 10000))]);
  assert.ok(changed > before);
});

await client.connect(transport);
let passed = 0, failed = 0;
for (const { name, fn } of checks) {
  try {
    await fn();
    console.log(`ok ${name}`);
    passed++;
  } catch (e) {
    console.log(`FAIL ${name}: ${e?.message ?? e}`);
    failed++;
  }
  await call('execute_bash_commands', { code: 'rm -rf outputs' }); // each check starts with none
}
await client.close();
if (failed) console.log('--- server stderr (last lines):\n' + stderrText.split('\n').slice(-15).join('\n'));
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
