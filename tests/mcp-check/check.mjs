// Checks an MCP stdio server against the sandbox tools' contract (doc/tools.md), using the
// official TypeScript SDK client: the same client code that real hosts are built on.
// Usage: node check.mjs [--only a,b] SERVER_COMMAND [ARGS...]
// Prints one line per check and a closing "N passed, N failed" line; exit 1 on any failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import assert from 'node:assert/strict';

let argv = process.argv.slice(2);
let only = null;
if (argv[0] === '--only') { only = new Set(argv[1].split(',')); argv = argv.slice(2); }
const [command, ...args] = argv;
if (!command) { console.error('usage: check.mjs [--only a,b] SERVER_COMMAND [ARGS...]'); process.exit(2); }

let stderrText = '';
let negotiated;
function connect() {
  const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'pipe' });
  transport.stderr?.on('data', (d) => { stderrText += d; });
  let wrapped;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => wrapped,
    set: (fn) => { wrapped = (m, e) => { if (m?.result?.protocolVersion) negotiated = m.result.protocolVersion; fn?.(m, e); }; },
  });
  const client = new Client({ name: 'mcp-check', version: '1.0.0' }, { capabilities: {} });
  return { client, transport };
}

const { client, transport } = connect();
const badLines = [];
client.onerror = (e) => badLines.push(String(e?.message ?? e));

const call = (name, a, opts) => client.callTool({ name, arguments: a }, CallToolResultSchema, { timeout: 120000, ...opts });
const sc = (r) => r.structuredContent ?? {};

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

check('initialize', async () => {
  assert.ok(client.getServerCapabilities()?.tools, 'tools capability missing');
  assert.ok(['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'].includes(negotiated), `negotiated ${negotiated}`);
  await client.ping();
});

check('tools_list', async () => {
  const { tools } = await client.listTools();
  for (const n of ['execute_python', 'execute_bash_commands', 'cleanup_sandbox', 'process']) {
    const t = tools.find((x) => x.name === n);
    assert.ok(t, `${n} missing`);
    assert.equal(t.inputSchema?.type, 'object', `${n} inputSchema`);
    assert.ok(t.description && t.description.length > 20, `${n} needs a real description`);
  }
  const py = tools.find((x) => x.name === 'execute_python');
  assert.ok(py.inputSchema.properties?.script, 'execute_python.script');
  assert.ok(py.inputSchema.properties?.requirements, 'execute_python.requirements');
  assert.ok(tools.find((x) => x.name === 'execute_bash_commands').inputSchema.properties?.code, 'execute_bash_commands.code');
  assert.ok(py.outputSchema, 'execute_python outputSchema');
});

check('bash_streams', async () => {
  const r = await call('execute_bash_commands', { code: 'echo out; echo err >&2; exit 3' });
  assert.equal(sc(r).stdout, 'out\n');
  assert.equal(sc(r).stderr, 'err\n');
  assert.equal(sc(r).exit_code, 3);
  assert.equal(r.isError, true);
  assert.ok(['daytona', 'docker', 'kubernetes', 'local'].includes(sc(r).backend), `backend ${sc(r).backend}`);
  assert.equal(r.content?.[0]?.type, 'text');
});

check('python_runs', async () => {
  const r = await call('execute_python', { script: 'import sys\nprint("héllo", 6*7)\nprint("warn", file=sys.stderr)' });
  assert.equal(sc(r).stdout, 'héllo 42\n');
  assert.equal(sc(r).stderr, 'warn\n');
  assert.equal(sc(r).exit_code, 0);
  assert.notEqual(r.isError, true);
});

check('python_error', async () => {
  const r = await call('execute_python', { script: 'print("before")\nraise ValueError("boom")' });
  assert.equal(sc(r).stdout, 'before\n');
  assert.match(sc(r).stderr, /ValueError: boom/);
  assert.equal(sc(r).exit_code, 1);
  assert.equal(r.isError, true);
});

check('files_persist_state_resets', async () => {
  let r = await call('execute_python', { script: 'open("data.txt","w").write("kept")\nx = 42' });
  assert.equal(sc(r).exit_code, 0);
  r = await call('execute_bash_commands', { code: 'cat data.txt' });
  assert.equal(sc(r).stdout, 'kept');
  r = await call('execute_python', { script: 'print(x)' });
  assert.match(sc(r).stderr, /NameError/);
});

check('timeout_kills', async () => {
  const t0 = Date.now();
  const r = await call('execute_bash_commands', { code: 'echo start; (sleep 300 &) ; sleep 300', timeout_s: 1 });
  assert.equal(sc(r).timed_out, true);
  assert.equal(sc(r).stdout, 'start\n');
  assert.equal(r.isError, true);
  assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
  const ps = await call('execute_bash_commands', {
    code: 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done | grep -c "sleep 30[0]"' });
  assert.equal(sc(ps).stdout.trim(), '0', 'a process of the timed-out call survived');
});

check('bad_arguments', async () => {
  const r = await call('execute_python', {});
  assert.equal(r.isError, true);
  try { await call('no_such_tool', {}); assert.fail('unknown tool must be a JSON-RPC error'); }
  catch (e) { assert.ok(e instanceof McpError, String(e)); assert.equal(e.code, -32602); }
});

check('no_secret_env', async () => {
  const r = await call('execute_bash_commands', { code: 'env' });
  for (const k of ['DAYTONA_API_KEY', 'MCP_CHECK_SECRET', 'HOME=/root']) assert.ok(!sc(r).stdout.includes(k), `${k} leaked`);
});

check('progress', async () => {
  const seen = [];
  const r = await call('execute_bash_commands', { code: 'for i in 1 2 3; do echo tick $i; sleep 1; done' },
    { onprogress: (p) => seen.push(p), resetTimeoutOnProgress: true });
  assert.equal(sc(r).exit_code, 0);
  assert.ok(seen.length >= 2, `only ${seen.length} progress notifications`);
});

check('cancel', async () => {
  const ac = new AbortController();
  const p = call('execute_bash_commands', { code: 'sleep 30' }, { signal: ac.signal });
  await new Promise((res) => setTimeout(res, 700));
  const t0 = Date.now();
  ac.abort();
  await p.catch(() => {});
  const r = await call('execute_bash_commands', { code: 'echo alive' });
  assert.equal(sc(r).stdout, 'alive\n');
  assert.ok(Date.now() - t0 < 3000, `next call waited ${Date.now() - t0} ms after cancel`);
});

check('sequential_order', async () => {
  await call('execute_bash_commands', { code: 'rm -f order.txt' });
  const ps = [];
  for (let i = 0; i < 5; i++) ps.push(call('execute_bash_commands', { code: `echo ${i} >> order.txt; sleep 0.1` }));
  await Promise.all(ps);
  const r = await call('execute_bash_commands', { code: 'cat order.txt' });
  assert.equal(sc(r).stdout, '0\n1\n2\n3\n4\n');
});

check('background_process', async () => {
  let r = await call('execute_bash_commands', { code: 'echo start; read x; echo "got $x"; sleep 30', background: true, wait_s: 0.5 });
  assert.equal(sc(r).running, true);
  assert.equal(sc(r).stdout, 'start\n');
  const id = sc(r).process_id;
  assert.match(id, /^bg-[0-9]+$/);
  // The process tool is answered while a long call runs.
  let order = [];
  const slow = call('execute_bash_commands', { code: 'sleep 3; echo slow' }).then((x) => { order.push('call'); return x; });
  await new Promise((res) => setTimeout(res, 300));
  r = await call('process', { process_id: id, input: 'hi\n', wait_s: 10 }).then((x) => { order.push('process'); return x; });
  assert.equal(sc(r).input_written, 3);
  assert.equal(sc(r).stdout, 'got hi\n');
  assert.equal((await slow).structuredContent.stdout, 'slow\n');
  assert.deepEqual(order, ['process', 'call']);
  r = await call('process', {});
  assert.ok(sc(r).processes.some((p) => p.process_id === id && p.running), 'listed as running');
  r = await call('process', { process_id: id, signal: 'KILL', wait_s: 10 });
  assert.equal(sc(r).running, false);
  assert.equal(sc(r).exit_code, 137);
});

check('python_session', async () => {
  let r = await call('execute_python', { script: 'import math\nx = 20', session: 'sdk' });
  assert.equal(sc(r).value, null);
  r = await call('execute_python', { script: 'x += 1\nprint("p")\nmath.floor(x * 2.5)', session: 'sdk' });
  assert.equal(sc(r).value, '52');
  assert.equal(sc(r).stdout, 'p\n');
  assert.equal(sc(r).session, 'sdk');
  r = await call('process', { process_id: 'sdk', signal: 'KILL', wait_s: 10 });
  assert.equal(sc(r).running, false);
});

check('cleanup', async () => {
  let r = await call('cleanup_sandbox', {});
  assert.notEqual(r.isError, true);
  r = await call('execute_bash_commands', { code: 'ls data.txt' });
  assert.notEqual(sc(r).exit_code, 0, 'workspace survived cleanup');
});

let passed = 0, failed = 0;
try {
  await client.connect(transport);
  for (const c of checks) {
    if (only && !only.has(c.name)) continue;
    try { await c.fn(); passed++; console.log(`ok   ${c.name}`); }
    catch (e) { failed++; console.log(`FAIL ${c.name}: ${e?.message ?? e}`); }
  }
} catch (e) {
  failed++; console.log(`FAIL connect: ${e?.message ?? e}`);
} finally {
  await client.close().catch(() => {});
}
if (badLines.length) { failed++; console.log(`FAIL stdout_is_protocol_only: ${badLines[0]}`); }
if (failed && stderrText) console.log('--- server stderr (tail) ---\n' + stderrText.split('\n').slice(-15).join('\n'));
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
