// bench/chart.mjs: draws the benchmark's results (the JSON bench/driver.mjs writes) as an SVG a
// README can embed: one group per timed case, one horizontal bar per line (its median), on a
// log scale, with the machine it ran on in the title. No dependencies.
// Usage: node bench/chart.mjs RESULTS.json OUT.svg   (bench/run draws it after every run)
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const COLORS = { floor: '#9e9e9e', bwrap: '#6d4c41', docker: '#0277bd', ours: '#2e7d32', peer: '#c62828' };
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2)) + ' ms';

export function chartSvg(res) {
  const kind = Object.fromEntries(res.lines.map((l) => [l.name, l.kind]));
  const groups = res.cases.filter((c) => c.unit === 'ms').map((c) => ({
    title: c.title,
    bars: Object.entries(res.results[c.id] || {}).filter(([, r]) => r.median > 0).map(([line, r]) => ({ line, v: r.median })),
  })).filter((g) => g.bars.length);
  const all = groups.flatMap((g) => g.bars.map((b) => b.v));
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...all, 1))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all, 10))));
  const W = 960, left = 230, right = 90, barH = 13, gap = 3, top = 64;
  const plotW = W - left - right;
  const x = (v) => left + (Math.log10(v / lo) / Math.log10(hi / lo)) * plotW;
  let y = top, body = '';
  for (const g of groups) {
    body += `<text x="8" y="${y + 12}" font-weight="bold">${esc(g.title)}</text>`;
    y += 18;
    for (const b of g.bars) {
      const w = Math.max(1, x(b.v) - left);
      body += `<text x="${left - 6}" y="${y + barH - 3}" text-anchor="end">${esc(b.line)}</text>` +
        `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${COLORS[kind[b.line]] || '#555'}"/>` +
        `<text x="${(left + w + 4).toFixed(1)}" y="${y + barH - 3}">${fmt(b.v)}</text>`;
      y += barH + gap;
    }
    y += 10;
  }
  let grid = '';
  for (let v = lo; v <= hi * 1.001; v *= 10) {
    const gx = x(v).toFixed(1);
    grid += `<line x1="${gx}" y1="${top - 6}" x2="${gx}" y2="${y - 6}" stroke="#ddd"/>` +
      `<text x="${gx}" y="${y + 8}" text-anchor="middle" fill="#666">${v >= 1 ? v : v.toPrecision(1)} ms</text>`;
  }
  const m = res.machine;
  const sub = `${m.cpu}, ${m.cores} cores, ${m.mem_gib} GiB, Linux ${m.kernel}, Debian ${m.debian}, ${m.date}` +
    ` (${res.config.rounds} rounds${res.config.pause_ms ? `, warm calls ${res.config.pause_ms} ms apart` : ''}${res.config.quick ? ', quick mode' : ''})`;
  // The non-time figures, as one line under the axis.
  const rss = Object.entries(res.results.rss_idle || {}).map(([l, r]) => `${l} ${(r.median / 1024).toFixed(1)}`).join(', ');
  const http = Object.entries(res.results.http || {}).map(([l, r]) => `${l}: ${r.median} HTTP requests per warm call`).join('; ');
  const foot = [rss && `idle RSS (MiB): ${rss}`, http].filter(Boolean);
  foot.forEach((t, i) => { body += `<text x="8" y="${y + 28 + 14 * i}" fill="#444">${esc(t)}</text>`; });
  const H = y + 20 + 14 * foot.length + (foot.length ? 8 : 0);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="#fff"/>
<text x="8" y="20" font-size="15" font-weight="bold">sandbox-mcp benchmark: median time per call, log scale (shorter is faster)</text>
<text x="8" y="38" fill="#444">${esc(sub)}</text>
<text x="8" y="52" fill="#444">grey: floors · brown: bwrap · blue: docker exec · green: sandbox-mcp · red: peer MCP servers; all servers through the official MCP TypeScript SDK client</text>
${grid}${body}
</svg>
`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [inp, out] = process.argv.slice(2);
  if (!inp || !out) { console.error('usage: node chart.mjs RESULTS.json OUT.svg'); process.exit(2); }
  fs.writeFileSync(out, chartSvg(JSON.parse(fs.readFileSync(inp, 'utf8'))));
}
