// bench/driver.mjs: the benchmark itself. bench/run prepares the parts (the server binary, Node
// 22 and the official MCP TypeScript SDK, the peers, Docker, the Daytona test server) and runs
// this file with Node 22; run it through bench/run, not by hand.
//
// Lines: floors (/bin/true, bash -c true, bare python3), a hardened bwrap start, docker exec,
// sandbox-mcp on each backend present, and peer MCP servers from npm. Every MCP server is driven
// through the official SDK client (@modelcontextprotocol/sdk) over stdio; a call is timed from
// the request to the (schema-checked) response, as a host sees it. Process lines are timed by
// bench/spawn.py (posix_spawn to exit), so the /bin/true floor is what one process start costs.
// The run is interleaved: each round measures every (case, line) once, lines in turn (rotated
// each round), so machine noise hits all lines alike.
//
// Environment (set by bench/run): BENCH_SERVER, BENCH_CACHE, BENCH_TMP, BENCH_OUT, BENCH_CHART,
// BENCH_ROUNDS, BENCH_FIRST_ROUNDS, BENCH_QUICK, BENCH_SYSTEM_NODE, BENCH_BWRAP_SKIP,
// BENCH_DOCKER_{HOST,IMAGE,CONTAINER,SKIP}, BENCH_DAYTONA_{URL,KEY,LATENCY_MS,SKIP}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chartSvg } from './chart.mjs';

const E = process.env;
const QUICK = E.BENCH_QUICK === '1';
const ROUNDS = Number(E.BENCH_ROUNDS) || (QUICK ? 3 : 30);
const FIRST_ROUNDS = Number(E.BENCH_FIRST_ROUNDS) || (QUICK ? 2 : 10);
const TMP = E.BENCH_TMP || fs.mkdtempSync(path.join(os.tmpdir(), 'bench-'));
// One PATH for every line, so `python3` is the system's everywhere (not a pyenv shim of the
// caller's). The shim folder holds only `python` -> python3, for mcp-server-code-runner, which
// runs `python -u FILE` (Debian has no `python` unless python-is-python3 is installed).
const SHIM = path.join(TMP, 'shim');
fs.mkdirSync(SHIM, { recursive: true });
if (!fs.existsSync(path.join(SHIM, 'python'))) fs.symlinkSync('/usr/bin/python3', path.join(SHIM, 'python'));
const PATH = `/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${SHIM}`;
const log = (m) => process.stderr.write(`bench: ${m}\n`);

// ------------------------------------------------------------------ cases
const X1M = 'x'.repeat(1e6);
const PY = { pass: 'pass', sum: 'print(sum(range(10**6)))', mb: "import sys; sys.stdout.write('x' * 10**6)", numpy: 'import numpy' };
// A host's first call comes after the model has read the tools, not the same millisecond: the
// `_gap` first-call cases wait this long after tools/list (the others call at once).
const FIRST_GAP_MS = Number(E.BENCH_FIRST_GAP_MS) || 250;
const MKFILES = "seq 10000 | sed 's/^/f/' | xargs touch && ls | wc -l"; // just-bash's seq has no -f
const CASES = [
  { id: 'bash_true', unit: 'ms', title: 'bash `true`, warm', vs: 'floor `bash -c true`' },
  { id: 'py_pass', unit: 'ms', title: 'Python `pass`, warm', vs: 'floor `python3 -c pass`' },
  { id: 'py_sum', unit: 'ms', title: 'Python print(sum(range(10**6))), warm', vs: 'floor python3, same script' },
  { id: 'py_numpy', unit: 'ms', title: 'Python `import numpy`, warm', vs: 'ours local, which imports it cold' },
  { id: 'print_1mb', unit: 'ms', title: 'printing 1 MB (10^6 bytes, returned whole), warm', vs: 'the fastest peer that returned it whole' },
  { id: 'ws_10k', unit: 'ms', title: 'bash `true` in a workspace of 10,000 files, warm', vs: "the line's own warm bash `true`" },
  { id: 'first_bash', unit: 'ms', title: 'first call, bash `true` (fresh server)', vs: 'hardened bwrap start of /usr/bin/true' },
  { id: 'first_py', unit: 'ms', title: 'first call, Python `pass` (fresh server)', vs: 'hardened bwrap start of python3 -c pass' },
  { id: 'first_bash_gap', unit: 'ms', title: `first call, bash \`true\`, ${FIRST_GAP_MS} ms after tools/list (fresh server)`, vs: 'hardened bwrap start of /usr/bin/true' },
  { id: 'first_py_gap', unit: 'ms', title: `first call, Python \`pass\`, ${FIRST_GAP_MS} ms after tools/list (fresh server)`, vs: 'hardened bwrap start of python3 -c pass' },
  { id: 'cleanup', unit: 'ms', title: 'cleanup_sandbox (after a first call)', vs: null },
  { id: 'http', unit: 'req', title: 'HTTP requests per warm bash `true` call (Daytona)', vs: null },
  { id: 'rss_after', unit: 'KiB', title: 'server RSS a second after the run, its HTTP helper included (VmRSS)', vs: null },
  { id: 'rss_idle', unit: 'KiB', title: 'server RSS when idle: once its HTTP helper has ended, or 75 s after the run (VmRSS)', vs: null },
  { id: 'rss_peak', unit: 'KiB', title: 'server peak RSS (largest VmHWM of its sessions)', vs: null },
];
const WARM = ['bash_true', 'py_pass', 'py_sum', 'py_numpy', 'print_1mb', 'ws_10k'];

// ------------------------------------------------------------------ process lines
const BWRAP = ['--unshare-all', '--unshare-user', '--uid', '65534', '--gid', '65534', '--die-with-parent',
  '--new-session', '--cap-drop', 'ALL', '--clearenv', '--setenv', 'PATH', '/usr/bin',
  '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib',
  '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp'];

// Process starts are timed by bench/spawn.py (posix_spawn, read stdout, waitpid), one request
// at a time over its stdin and stdout.
const spawner = (() => {
  const p = spawn('/usr/bin/python3', ['-I', path.join(path.dirname(fileURLToPath(import.meta.url)), 'spawn.py')],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = [];
  createInterface({ input: p.stdout }).on('line', (l) => waiting.shift()(JSON.parse(l)));
  p.on('exit', (code) => waiting.splice(0).forEach((w) => w({ status: -1, err: `spawn.py exited ${code}` })));
  return {
    run: (argv, env) => new Promise((res) => { waiting.push(res); p.stdin.write(JSON.stringify({ argv, env }) + '\n'); }),
    close: () => p.stdin.end(),
  };
})();

const sha256 = (s) => createHash('sha256').update(s).digest('hex');

// ops: case -> [argv, expected stdout]: a string it must contain, or X1M, which it must be.
function procLine(name, kind, ops, extra = {}) {
  return {
    name, kind, ops, ...extra,
    async measure(c) {
      const [argv, want] = ops[c];
      const r = await spawner.run(argv, { PATH, ...extra.env });
      if (r.status !== 0) throw new Error(`${argv[0]} exited ${r.status}: ${String(r.err).slice(0, 200)}`);
      if (want === X1M ? r.sha256 !== sha256(X1M) : want && !r.out.includes(want)) throw new Error(`${argv[0]}: unexpected output ${r.out.slice(0, 80)}`);
      return r.ms;
    },
  };
}

// ------------------------------------------------------------------ MCP sessions
async function openSession(spec) {
  const transport = new StdioClientTransport({ ...spec, stderr: 'pipe' });
  let err = '';
  transport.stderr?.on('data', (d) => { err = (err + d).slice(-2000); });
  const client = new Client({ name: 'sandbox-mcp-bench', version: '1.0.0' }, { capabilities: {} });
  try {
    await client.connect(transport);
    const { tools } = await client.listTools(); // as a host does; the SDK then checks outputSchema
    return {
      pid: transport.pid, tools: tools.map((t) => t.name), stderr: () => err,
      async call(name, args) {
        const t0 = performance.now();
        const r = await client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: 300000 });
        return [performance.now() - t0, r];
      },
      close: () => client.close().catch(() => {}),
    };
  } catch (e) {
    await client.close().catch(() => {});
    throw new Error(`${e.message}${err ? '; its stderr ends: ' + err.trim().split('\n').slice(-3).join(' | ') : ''}`);
  }
}

const texts = (r) => (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const oops = (r) => texts(r).slice(0, 300).replace(/\s+/g, ' ');

// How each family's result reads: [stdout, error or null].
const OURS_OUT = (r) => {
  const sc = r.structuredContent;
  if (r.isError || !sc || sc.exit_code !== 0) return ['', 'call failed: ' + oops(r)];
  if (sc.truncated?.stdout) return [sc.stdout, `stdout was cut (${sc.truncated.stdout_bytes} bytes)`];
  return [sc.stdout, null];
};
const TEXT_OUT = (r) => (r.isError ? ['', 'call failed: ' + oops(r)] : [texts(r), null]);
const JUSTBASH_OUT = (r) => {
  let j;
  try { j = JSON.parse(texts(r)); } catch { return ['', 'call failed: ' + oops(r)]; }
  return j.exitCode === 0 ? [j.stdout, null] : ['', `exit ${j.exitCode}: ${String(j.stderr).slice(0, 200)}`];
};

function checkOut(c, out) {
  if (c === 'py_sum' && !out.includes('499999500000')) return 'no 499999500000 in stdout';
  if (c === 'print_1mb' && !out.includes(X1M)) return `1 MB not returned whole (${out.length} characters came back)`;
  if (c === 'setup' && out.trim() !== '10000') return `setup made ${out.trim().slice(0, 40)} files, not 10000`;
  return null;
}

// A server line: sessions `main` (warm cases), `big` (print_1mb; ours only, with the flags it
// needs to return 1 MB whole), `ws` (10,000 files made before timing), and a fresh server per
// first-call sample. ops: case -> [tool, arguments]; `setup` makes the 10,000 files.
function serverLine(name, kind, { spawn, ops, out, tool, version }) {
  const L = { name, kind, ops, version, sessions: {}, has: (c) => c in ops || c === 'ws_10k' || c.startsWith('first_') };
  const run = async (s, c, what = c) => {
    const [ms, r] = await s.call(...ops[what]);
    const [o, err] = out(r);
    const bad = err || checkOut(c, o);
    if (bad) throw new Error(bad);
    return [ms, r];
  };
  L.open = async () => {
    L.sessions.main = await openSession(spawn('main'));
    if (!L.sessions.main.tools.includes(tool)) throw new Error(`no tool ${tool} (it lists ${L.sessions.main.tools.join(', ')})`);
    L.sessions.big = kind === 'ours' ? await openSession(spawn('big')) : L.sessions.main;
    L.sessions.ws = await openSession(spawn('ws'));
  };
  L.warmup = async (c) => {
    if (c === 'ws_10k') { await run(L.sessions.ws, 'setup'); return run(L.sessions.ws, c, 'bash_true'); }
    return run(c === 'print_1mb' ? L.sessions.big : L.sessions.main, c);
  };
  L.measure = async (c) => {
    if (c === 'ws_10k') return (await run(L.sessions.ws, c, 'bash_true'))[0];
    return (await run(c === 'print_1mb' ? L.sessions.big : L.sessions.main, c))[0];
  };
  // One fresh server: the first call's time, and for ours the cleanup that follows it
  // ([ms, cleanup ms or null, why cleanup failed or null]).
  L.first = async (c) => {
    const s = await openSession(spawn('fresh'));
    try {
      if (c.endsWith('_gap')) await new Promise((res) => setTimeout(res, FIRST_GAP_MS));
      const [ms] = await run(s, c, c.startsWith('first_py') ? 'py_pass' : 'bash_true');
      if (c !== 'first_bash' || !ops.cleanup) return [ms, null, null];
      const [t, r] = await s.call(...ops.cleanup);
      if (r.isError || r.structuredContent?.removed !== true) return [ms, null, 'cleanup_sandbox failed: ' + oops(r)];
      return [ms, t, null];
    } finally {
      await s.close();
    }
  };
  L.close = () => Promise.all([...new Set(Object.values(L.sessions))].map((s) => s.close()));
  return L;
}

let cwdN = 0;
const freshDir = (tag) => { const d = path.join(TMP, `cwd-${tag}-${++cwdN}`); fs.mkdirSync(d, { recursive: true }); return d; };

// A line of this server. args: more options; only: the cases it runs (all when not given).
function oursLine(backend, name, env = {}, args = [], only = null) {
  const server = E.BENCH_SERVER;
  const ops = {
    bash_true: ['execute_bash_commands', { code: 'true' }],
    py_pass: ['execute_python', { script: PY.pass }],
    py_sum: ['execute_python', { script: PY.sum }],
    py_numpy: ['execute_python', { script: PY.numpy }],
    print_1mb: ['execute_python', { script: PY.mb }],
    setup: ['execute_bash_commands', { code: MKFILES }],
    cleanup: ['cleanup_sandbox', {}],
  };
  const L = serverLine(name, 'ours', {
    tool: 'execute_bash_commands',
    version: spawnSync(server, ['--version']).stdout?.toString().trim(),
    spawn: (k) => ({
      command: server, cwd: freshDir('ours'),
      args: ['--backend', backend, ...args, ...(k === 'big' ? ['--result-max', '2M', '--output-cap', '1M'] : [])],
      env: { PATH, ...env },
    }),
    out: OURS_OUT,
    ops: only ? Object.fromEntries(Object.entries(ops).filter(([c]) => only.includes(c))) : ops,
  });
  if (only) L.has = (c) => only.includes(c);
  return L;
}

// Peers: tool names and argument shapes from their tools/list and sources (see bench/README.md).
const PEERS = {
  'mcp-server-code-runner': {
    node: 'system', tool: 'run-code', out: TEXT_OUT,
    ops: {
      bash_true: ['run-code', { languageId: 'shellscript', code: 'true' }],
      py_pass: ['run-code', { languageId: 'python', code: PY.pass }],
      py_sum: ['run-code', { languageId: 'python', code: PY.sum }],
      py_numpy: ['run-code', { languageId: 'python', code: PY.numpy }],
      print_1mb: ['run-code', { languageId: 'python', code: PY.mb }],
      setup: ['run-code', { languageId: 'shellscript', code: MKFILES }],
    },
  },
  'mcp-server-commands': {
    node: 'system', tool: 'run_command', out: TEXT_OUT,
    ops: {
      bash_true: ['run_command', { command: 'true' }],
      py_pass: ['run_command', { command: 'python3', stdin: PY.pass }],
      py_sum: ['run_command', { command: 'python3', stdin: PY.sum }],
      py_numpy: ['run_command', { command: 'python3', stdin: PY.numpy }],
      print_1mb: ['run_command', { command: 'python3', stdin: PY.mb }],
      setup: ['run_command', { command: MKFILES }],
    },
  },
  'just-bash-mcp': {
    // Needs Node 22; Python is its emscripten CPython, which it enables on request; output is
    // cut at 30,000 characters unless raised, as ours is raised for the 1 MB case.
    node: '22', tool: 'bash', out: JUSTBASH_OUT,
    env: { JUST_BASH_ENABLE_PYTHON: 'true', JUST_BASH_MAX_OUTPUT_LENGTH: '2000000' },
    ops: {
      bash_true: ['bash', { command: 'true' }],
      py_pass: ['bash', { command: `python3 -c '${PY.pass}'` }],
      py_sum: ['bash', { command: `python3 -c '${PY.sum}'` }],
      print_1mb: ['bash', { command: `python3 -c "${PY.mb}"` }],
      setup: ['bash', { command: MKFILES }],
    },
  },
};

function peerLine(name, p) {
  const dir = path.join(E.BENCH_CACHE, 'peers', name);
  const pkgFile = path.join(dir, 'node_modules', name, 'package.json');
  if (!fs.existsSync(path.join(dir, 'node_modules', '.installed')) || !fs.existsSync(pkgFile)) {
    let why = 'not installed';
    try { why = 'npm could not install it: ' + fs.readFileSync(dir + '.error', 'utf8').trim(); } catch {}
    return { name, kind: 'peer', skip: why };
  }
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8'));
  const bin = path.join(dir, 'node_modules', name, typeof pkg.bin === 'string' ? pkg.bin : Object.values(pkg.bin)[0]);
  const node = p.node === 'system' && E.BENCH_SYSTEM_NODE ? E.BENCH_SYSTEM_NODE : process.execPath;
  const nodeVersion = spawnSync(node, ['--version']).stdout?.toString().trim();
  return serverLine(name, 'peer', {
    ...p, version: `${pkg.version}, node ${nodeVersion}`,
    spawn: () => ({ command: node, args: [bin], cwd: freshDir(name), env: { PATH, ...p.env } }),
  });
}

// ------------------------------------------------------------------ the lines present here
function lines() {
  const L = [
    procLine('floor /bin/true', 'floor', { bash_true: [['/bin/true']] }),
    procLine('floor bash -c true', 'floor', { bash_true: [['bash', '-c', 'true']] }),
    procLine('floor python3', 'floor', {
      py_pass: [['python3', '-c', PY.pass]], py_sum: [['python3', '-c', PY.sum], '499999500000'],
      print_1mb: [['python3', '-c', PY.mb], X1M],
    }),
  ];
  const bw = procLine('bwrap (hardened)', 'bwrap', {
    first_bash: [['bwrap', ...BWRAP, '/usr/bin/true']], first_py: [['bwrap', ...BWRAP, 'python3', '-c', 'pass']],
    first_bash_gap: [['bwrap', ...BWRAP, '/usr/bin/true']], first_py_gap: [['bwrap', ...BWRAP, 'python3', '-c', 'pass']],
  });
  if (E.BENCH_BWRAP_SKIP) bw.skip = E.BENCH_BWRAP_SKIP;
  L.push(bw);
  const dk = { DOCKER_HOST: E.BENCH_DOCKER_HOST || '' };
  const dexec = procLine('docker exec', 'docker', {
    bash_true: [['docker', 'exec', E.BENCH_DOCKER_CONTAINER || '-', 'true']],
    py_pass: [['docker', 'exec', E.BENCH_DOCKER_CONTAINER || '-', 'python3', '-c', 'pass']],
  }, { env: dk });
  const odl = oursLine('local', 'ours local');
  const opre = oursLine('local', 'ours local, numpy preloaded', {}, ['--python-preload', 'numpy'], ['py_pass', 'py_numpy']);
  const odk = oursLine('docker', 'ours docker', { ...dk, SANDBOX_IMAGE: E.BENCH_DOCKER_IMAGE || '' });
  const ms = E.BENCH_DAYTONA_LATENCY_MS || '0';
  const odt = oursLine('daytona', `ours daytona +${ms}ms/req`, {
    DAYTONA_API_URL: `${E.BENCH_DAYTONA_URL}/api`, DAYTONA_API_KEY: E.BENCH_DAYTONA_KEY || '',
  });
  // The floor of a Daytona call: a bare process/execute of `true` in a sandbox of the same test
  // server, at the same latency per request.
  const dtApi = async (method, p, body) => {
    const r = await fetch(`${E.BENCH_DAYTONA_URL}${p}`, {
      method, headers: { Authorization: `Bearer ${E.BENCH_DAYTONA_KEY || ''}`, 'Content-Type': 'application/json' },
      body: body && JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`${method} ${p}: HTTP ${r.status}`);
    return r.json();
  };
  const dtExec = {
    name: `floor daytona execute +${ms}ms/req`, kind: 'floor', ops: { bash_true: null }, sandbox: null,
    async open() {
      const sb = await dtApi('POST', '/api/sandbox', { labels: { 'sandbox-mcp-bench': '1' } });
      this.sandbox = sb.id;
      for (let i = 0; i < 300 && (await dtApi('GET', `/api/sandbox/${sb.id}`)).state !== 'started'; i++)
        await new Promise((res) => setTimeout(res, 50));
    },
    warmup() { return this.measure('bash_true'); },
    async measure() {
      const t0 = performance.now();
      const r = await dtApi('POST', `/toolbox/${this.sandbox}/process/execute`, { command: 'true', timeout: 30 });
      if (r.exitCode !== 0) throw new Error(`process/execute true: exit ${r.exitCode}`);
      return performance.now() - t0;
    },
    async close() { if (this.sandbox) await dtApi('DELETE', `/api/sandbox/${this.sandbox}`); },
  };
  if (E.BENCH_DOCKER_SKIP) dexec.skip = odk.skip = E.BENCH_DOCKER_SKIP;
  if (E.BENCH_DAYTONA_SKIP) odt.skip = dtExec.skip = E.BENCH_DAYTONA_SKIP;
  odt.daytona = true;
  L.push(dexec, odl, opre, odk, dtExec, odt);
  for (const [name, p] of Object.entries(PEERS)) L.push(peerLine(name, p));
  return L;
}

// ------------------------------------------------------------------ measuring
const samples = {}; // case -> line -> [values]
const errors = {}; // case -> line -> reason
const add = (c, l, v) => ((samples[c] ??= {})[l] ??= []).push(v);
const fail = (c, l, e) => { (errors[c] ??= {})[l] ??= String(e.message || e); log(`${l}: ${c}: ${errors[c][l]}`); };
const failed = (c, l) => Boolean(errors[c]?.[l]);
const dtRequests = async () => (await (await fetch(`${E.BENCH_DAYTONA_URL}/_control`)).json()).requests.length;

function status(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => Number((s.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm')) || [])[1]);
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch { return null; }
}

// The live HTTP helpers of a server (backends/http/helper.h): its children named sandbox-http
// that have not ended.
function httpHelpers(pid) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(d)) continue;
    try {
      const st = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const comm = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'));
      const [state, ppid] = st.slice(st.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === pid && comm === 'sandbox-http' && state !== 'Z') out.push(Number(d));
    } catch { /* gone */ }
  }
  return out;
}

// A host's calls are a model's turn apart, not back to back: each timed call of a warm case
// comes this long after the one before it (of any line), so that what a server does between
// calls is not charged to the next line's call. 0 measures calls back to back.
const PAUSE_MS = E.BENCH_PAUSE_MS === undefined ? 100 : Number(E.BENCH_PAUSE_MS);

async function measureOne(line, c) {
  if (failed(c, line.name)) return;
  if (PAUSE_MS > 0 && !c.startsWith('first_')) await new Promise((res) => setTimeout(res, PAUSE_MS));
  try {
    if (c.startsWith('first_')) {
      if (line.first) {
        const [ms, cl, clErr] = await line.first(c);
        add(c, line.name, ms);
        if (clErr) fail('cleanup', line.name, new Error(clErr));
        else if (cl !== null && !failed('cleanup', line.name)) add('cleanup', line.name, cl);
      } else add(c, line.name, await line.measure(c));
      return;
    }
    if (line.daytona && c === 'bash_true') {
      const n0 = await dtRequests();
      add(c, line.name, await line.measure(c));
      add('http', line.name, (await dtRequests()) - n0);
      return;
    }
    add(c, line.name, await line.measure(c));
  } catch (e) {
    fail(c, line.name, e);
  }
}

const hasCase = (l, c) => (l.has ? l.has(c) : c in l.ops);
// Which table rows a line gets: servers every case (skipped or n/a ones say so), process lines
// their own; the HTTP count is Daytona's alone.
const applies = (l, c) => (c === 'http' ? Boolean(l.daytona) : l.kind === 'ours' || l.kind === 'peer' || c in l.ops);

const loadStart = os.loadavg();

async function main() {
  const t0 = Date.now();
  const all = lines();
  const live = [];
  for (const l of all) {
    if (l.skip) { log(`skipped: ${l.name}: ${l.skip}`); continue; }
    if (l.open) {
      try {
        await l.open();
      } catch (e) {
        l.skip = `could not start: ${e.message}`;
        log(`skipped: ${l.name}: ${l.skip}`);
        await l.close?.().catch(() => {});
        continue;
      }
      for (const c of WARM) if (hasCase(l, c)) await l.warmup(c).catch((e) => fail(c, l.name, e));
    }
    live.push(l);
  }
  log(`${live.length} lines, ${ROUNDS} rounds (first calls: ${FIRST_ROUNDS})`);
  for (let r = 0; r < ROUNDS; r++) {
    const order = live.map((_, i) => live[(i + r) % live.length]);
    const cs = [...WARM, ...(r < FIRST_ROUNDS ? ['first_bash', 'first_py', 'first_bash_gap', 'first_py_gap'] : [])];
    for (const c of cs) for (const l of order) if (hasCase(l, c)) await measureOne(l, c);
    if ((r + 1) % 5 === 0 || r === ROUNDS - 1) log(`round ${r + 1}/${ROUNDS} done (${Math.round((Date.now() - t0) / 1000)} s)`);
  }
  // Resident size of the server and its HTTP helper (not its sandboxes): a second after the
  // run, and once idle, when every server's helper has ended (it stays a second after its last
  // request on a unix socket, a minute over TCP), or 75 s after the run.
  await new Promise((res) => setTimeout(res, 1000));
  const servers = live.filter((x) => x.sessions);
  const tree = (pid) => {
    const own = status(pid);
    return own && own.rss + httpHelpers(pid).map((h) => status(h)?.rss || 0).reduce((a, b) => a + b, 0);
  };
  for (const l of servers) {
    const st = Object.values(l.sessions).map((s) => status(s.pid)).filter(Boolean);
    const after = tree(l.sessions.main.pid);
    if (after) add('rss_after', l.name, after);
    if (st.length) add('rss_peak', l.name, Math.max(...st.map((s) => s.hwm)));
  }
  const idleBy = Date.now() + 75000;
  while (Date.now() < idleBy && servers.some((l) => httpHelpers(l.sessions.main.pid).length))
    await new Promise((res) => setTimeout(res, 250));
  log(`idle after ${Math.round((Date.now() - idleBy + 75000) / 1000)} s`);
  for (const l of servers) {
    const idle = tree(l.sessions.main.pid);
    if (idle) add('rss_idle', l.name, idle);
  }
  await Promise.all(live.filter((l) => l.close).map((l) => l.close()));
  spawner.close();
  report(all, Date.now() - t0);
}

// ------------------------------------------------------------------ reporting
function stats(v) {
  const s = [...v].sort((a, b) => a - b), n = s.length;
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return { n, median, p99: s[Math.ceil(0.99 * n) - 1], min: s[0], max: s[n - 1], mean: s.reduce((a, b) => a + b, 0) / n, samples: v };
}

function machine() {
  const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m) || [])[1] || os.cpus()[0]?.model || '?';
  let debian = '?';
  try { debian = fs.readFileSync('/etc/debian_version', 'utf8').trim(); } catch {}
  const v = (cmd, args) => { const r = spawnSync(cmd, args, { env: { PATH } }); return r.status === 0 ? String(r.stdout || r.stderr).trim().split('\n')[0] : null; };
  return {
    cpu, cores: os.availableParallelism?.() ?? os.cpus().length, mem_gib: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(), debian, date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    loadavg_start: loadStart.map((x) => +x.toFixed(2)), loadavg_end: os.loadavg().map((x) => +x.toFixed(2)),
    python3: v('python3', ['--version']), bash: v('bash', ['--version']), bwrap: v('bwrap', ['--version']),
    node_driver: process.version, sdk: JSON.parse(fs.readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url))).version,
  };
}

function report(all, elapsed) {
  const results = {};
  for (const c of CASES) {
    results[c.id] = {};
    for (const [l, v] of Object.entries(samples[c.id] || {})) results[c.id][l] = stats(v);
  }
  const med = (c, l) => results[c][l]?.median;
  // The line each case's ratio is against (ws_10k: each line against itself, in bash_true).
  const fastestPeer = all.filter((l) => l.kind === 'peer' && med('print_1mb', l.name) > 0)
    .sort((a, b) => med('print_1mb', a.name) - med('print_1mb', b.name))[0]?.name;
  const baseline = {
    bash_true: 'floor bash -c true', py_pass: 'floor python3', py_sum: 'floor python3', print_1mb: fastestPeer,
    py_numpy: 'ours local',
    first_bash: 'bwrap (hardened)', first_py: 'bwrap (hardened)',
    first_bash_gap: 'bwrap (hardened)', first_py_gap: 'bwrap (hardened)',
  };
  for (const c of CASES) {
    c.baseline = baseline[c.id] || null;
    for (const [l, r] of Object.entries(results[c.id])) {
      const b = c.id === 'ws_10k' ? med('bash_true', l) : baseline[c.id] && med(c.id, baseline[c.id]);
      r.ratio = b > 0 ? r.median / b : null;
    }
  }
  const m = machine();
  const out = {
    machine: m,
    config: {
      rounds: ROUNDS, first_rounds: FIRST_ROUNDS, quick: QUICK, elapsed_s: Math.round(elapsed / 1000), pause_ms: PAUSE_MS,
      bwrap_line: `bwrap ${BWRAP.join(' ')} CMD`, daytona_latency_ms: Number(E.BENCH_DAYTONA_LATENCY_MS || 0),
      ours_1mb_flags: '--result-max 2M --output-cap 1M', path: PATH,
    },
    lines: all.map((l) => ({ name: l.name, kind: l.kind, version: l.version || null, skipped: l.skip || null })),
    cases: CASES, results, errors,
  };
  fs.mkdirSync(path.dirname(E.BENCH_OUT), { recursive: true });
  fs.writeFileSync(E.BENCH_OUT, JSON.stringify(out, null, 1) + '\n');
  fs.writeFileSync(E.BENCH_CHART, chartSvg(out));

  const p = (s) => process.stdout.write(s + '\n');
  const num = (v, unit) => (v === undefined || v === null ? '-' : unit === 'ms' ? (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) : String(Math.round(v)));
  p(`sandbox-mcp benchmark, ${m.date}`);
  p(`machine: ${m.cpu}, ${m.cores} cores, ${m.mem_gib} GiB, Linux ${m.kernel}, Debian ${m.debian}; ${m.python3}; driver Node ${m.node_driver}, MCP SDK ${m.sdk}`);
  p(`load average (1, 5, 15 min) at the start ${m.loadavg_start.join(' ')}, at the end ${m.loadavg_end.join(' ')}`);
  p(`${ROUNDS} rounds interleaved (first calls: ${FIRST_ROUNDS} fresh servers per line), warm calls ${PAUSE_MS} ms apart, ${Math.round(elapsed / 1000)} s${QUICK ? ', QUICK MODE' : ''}; p99 is the max below 100 samples`);
  for (const c of CASES) {
    const rows = all.filter((l) => applies(l, c.id));
    if (!rows.length) continue;
    p('');
    p(`${c.title} [${c.unit}]${c.vs ? `; ratio = median / median of ${c.vs}` : ''}${c.id === 'print_1mb' && fastestPeer ? ` (${fastestPeer})` : ''}`);
    p(`  ${'line'.padEnd(30)} ${'median'.padStart(9)} ${'p99'.padStart(9)} ${'n'.padStart(4)} ${'ratio'.padStart(8)}`);
    for (const l of rows) {
      const r = results[c.id][l.name];
      let tail;
      if (r) tail = `${num(r.median, c.unit).padStart(9)} ${num(r.p99, c.unit).padStart(9)} ${String(r.n).padStart(4)} ${(r.ratio ? r.ratio.toFixed(2) + 'x' : '-').padStart(8)}`;
      else if (l.skip) tail = 'skipped (the reason is below)';
      else if (errors[c.id]?.[l.name]) tail = 'failed (the reason is below)';
      else if (c.id === 'cleanup' && l.kind === 'peer') tail = 'n/a (no cleanup tool)';
      else tail = 'n/a';
      p(`  ${l.name.padEnd(30)} ${tail}`);
    }
  }
  const sk = all.filter((l) => l.skip);
  p('');
  p(sk.length ? 'skipped lines:' : 'skipped lines: none');
  for (const l of sk) p(`  ${l.name}: ${l.skip}`);
  const fl = Object.entries(errors).flatMap(([c, o]) => Object.entries(o).map(([l, e]) => `  ${l} / ${c}: ${e}`));
  if (fl.length) { p('failed cases (not measured):'); fl.forEach((x) => p(x)); }
  p(`\nJSON: ${E.BENCH_OUT}\nchart: ${E.BENCH_CHART}`);
}

main().catch((e) => { console.error('bench: ' + (e.stack || e)); process.exit(1); });
