/**
 * The management page: one self-contained HTML document (no build step, no external
 * assets) that polls /ui/overview.json and redraws. Served as is by ./routes.ts.
 */
export const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>talon · cluster</title>
<style>
  :root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --mute:#6b7385; --line:#e3e6ec; --ok:#1f9d55; --warn:#c98a04; --bad:#d64545; --accent:#3461c1; }
  @media (prefers-color-scheme: dark) { :root { --bg:#14171d; --card:#1c2028; --ink:#e6e9ef; --mute:#9aa3b5; --line:#2c323d; --accent:#7fa2ee; } }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--ink); }
  header { display:flex; flex-wrap:wrap; gap:.5rem 1.5rem; align-items:baseline; padding:.9rem 1.5rem; border-bottom:1px solid var(--line); background:var(--card); }
  header h1 { font-size:1.15rem; margin:0; }
  header .meta { color:var(--mute); font-size:.85rem; }
  main { padding:1rem 1.5rem 2rem; max-width:1400px; margin:0 auto; }
  .cards { display:grid; grid-template-columns:repeat(auto-fit, minmax(170px, 1fr)); gap:.75rem; margin-bottom:1rem; }
  .card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:.7rem .9rem; }
  .card .label { color:var(--mute); font-size:.75rem; text-transform:uppercase; letter-spacing:.04em; }
  .card .value { font-size:1.35rem; font-weight:600; margin-top:.15rem; font-variant-numeric:tabular-nums; }
  .card .sub { color:var(--mute); font-size:.8rem; }
  section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:.8rem 1rem; margin-bottom:1rem; }
  section h2 { font-size:.95rem; margin:0 0 .6rem; }
  table { width:100%; border-collapse:collapse; font-variant-numeric:tabular-nums; }
  th, td { text-align:left; padding:.4rem .5rem; border-bottom:1px solid var(--line); white-space:nowrap; }
  th { color:var(--mute); font-weight:500; font-size:.78rem; }
  td.num, th.num { text-align:right; }
  tr:last-child td { border-bottom:none; }
  .badge { display:inline-block; padding:.05rem .45rem; border-radius:999px; font-size:.75rem; font-weight:600; color:#fff; }
  .healthy, .ready { background:var(--ok); } .degraded, .unknown, .notready { background:var(--warn); } .unhealthy, .down { background:var(--bad); }
  .bar { position:relative; width:120px; height:8px; background:var(--line); border-radius:4px; display:inline-block; vertical-align:middle; margin-right:.4rem; }
  .bar > i { position:absolute; left:0; top:0; bottom:0; background:var(--accent); border-radius:4px; }
  #chart { width:100%; height:160px; display:block; }
  .legend { color:var(--mute); font-size:.8rem; margin-top:.3rem; }
  .legend b { display:inline-block; width:10px; height:3px; vertical-align:middle; margin:0 .3rem 0 .8rem; }
  #banner { display:none; background:var(--bad); color:#fff; padding:.5rem 1.5rem; }
  .empty { color:var(--mute); padding:.6rem .5rem; }
  .mono { font-family:ui-monospace, SFMono-Regular, Menlo, monospace; font-size:.85em; }
</style>
</head>
<body>
<div id="banner" role="alert"></div>
<header>
  <h1>talon · <span id="cluster">…</span></h1>
  <span id="ready"></span>
  <span class="meta">state store <b id="store">…</b></span>
  <span class="meta">placement epoch <b class="mono" id="epoch">…</b></span>
  <span class="meta">control <span class="mono" id="control">…</span></span>
  <span class="meta">updated <span id="updated">…</span></span>
</header>
<main>
  <div class="cards">
    <div class="card"><div class="label">Workers in placement</div><div class="value" id="c-members">–</div><div class="sub" id="c-members-sub"></div></div>
    <div class="card"><div class="label">Cache use</div><div class="value" id="c-use">–</div><div class="sub" id="c-use-sub"></div></div>
    <div class="card"><div class="label">Requests / s (last min)</div><div class="value" id="c-rate">–</div><div class="sub">all workers</div></div>
    <div class="card"><div class="label">Hit ratio (last min)</div><div class="value" id="c-hit">–</div><div class="sub">hits ÷ (hits + misses)</div></div>
  </div>
  <section>
    <h2>Last <span id="span">10</span> min</h2>
    <svg id="chart" viewBox="0 0 1000 160" preserveAspectRatio="none" aria-label="request rate and hit ratio"></svg>
    <div class="legend"><b style="background:var(--accent)"></b>requests/s (max <span id="maxrate">0</span>)<b style="background:var(--ok)"></b>hit ratio (0–100 %)</div>
  </section>
  <section>
    <h2>Workers</h2>
    <table>
      <thead><tr><th>Node</th><th>Address</th><th>Zone</th><th>Health</th><th>Placement</th><th>Use</th><th class="num">Blocks</th><th class="num">Req/s</th><th class="num">Hit ratio</th><th class="num">Last status</th></tr></thead>
      <tbody id="workers"><tr><td class="empty" colspan="10">loading…</td></tr></tbody>
    </table>
  </section>
  <section>
    <h2>Coordinators</h2>
    <table><thead><tr><th>Node</th><th>Address</th><th>Health</th></tr></thead><tbody id="coordinators"></tbody></table>
  </section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const bytes = (n) => {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(n < 10 ? 1 : 0)) + " " + units[i];
};
const pct = (r) => (r === null || r === undefined ? "–" : (100 * r).toFixed(1) + " %");
const rate = (r) => (r >= 100 ? r.toFixed(0) : r.toFixed(1));
const age = (ms) => (ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s") + " ago";

function renderChart(series, spanMs) {
  const svg = $("chart");
  if (series.length < 2) { svg.innerHTML = '<text x="500" y="85" text-anchor="middle" fill="currentColor" opacity=".5" font-size="14">collecting samples…</text>'; $("maxrate").textContent = "0"; return; }
  const end = series[series.length - 1].atMs, start = end - spanMs;
  const x = (t) => (1000 * (t - start)) / spanMs;
  const max = Math.max(1, ...series.map((p) => p.requestsPerSec));
  $("maxrate").textContent = rate(max);
  const line = (pts) => pts.map((p, i) => (i === 0 ? "M" : "L") + p[0].toFixed(1) + " " + p[1].toFixed(1)).join(" ");
  const rates = series.map((p) => [x(p.atMs), 155 - (145 * p.requestsPerSec) / max]);
  const hits = series.filter((p) => p.hitRatio !== null).map((p) => [x(p.atMs), 155 - 145 * p.hitRatio]);
  svg.innerHTML =
    '<path d="' + line(rates) + '" fill="none" stroke="var(--accent)" stroke-width="2" vector-effect="non-scaling-stroke"/>' +
    (hits.length > 1 ? '<path d="' + line(hits) + '" fill="none" stroke="var(--ok)" stroke-width="2" vector-effect="non-scaling-stroke"/>' : "");
}

function render(o) {
  $("cluster").textContent = o.clusterId;
  $("ready").innerHTML = o.ready ? '<span class="badge ready">ready</span>' : '<span class="badge notready" title="' + esc(o.notReadyReason || "") + '">not ready</span>';
  $("store").textContent = o.stateBackend + (o.ready ? " · followed" : " · " + (o.notReadyReason || "unavailable"));
  $("epoch").textContent = o.epochHex;
  $("control").textContent = o.controlAddress;
  $("updated").textContent = new Date(o.generatedAt).toLocaleTimeString();
  const inPlacement = o.workers.filter((w) => w.inPlacement);
  $("c-members").textContent = inPlacement.length + " / " + o.workers.length;
  $("c-members-sub").textContent = o.workers.length - inPlacement.length + " out of placement";
  const cap = o.workers.reduce((n, w) => n + (w.capacityBytes || 0), 0), used = o.workers.reduce((n, w) => n + (w.residentBytes || 0), 0);
  $("c-use").textContent = cap > 0 ? pct(used / cap) : "–";
  $("c-use-sub").textContent = bytes(used) + " of " + bytes(cap);
  const recent = o.series.filter((p) => p.atMs > o.series[o.series.length - 1].atMs - o.rateWindowMs);
  const total = o.workers.reduce((n, w) => n + w.requestsPerSec, 0);
  $("c-rate").textContent = rate(total);
  const hitPoints = recent.filter((p) => p.hitRatio !== null);
  $("c-hit").textContent = hitPoints.length === 0 ? "–" : pct(hitPoints.reduce((n, p) => n + p.hitRatio, 0) / hitPoints.length);
  $("span").textContent = Math.round(Math.max(1, (o.series.length ? o.series[o.series.length - 1].atMs - o.series[0].atMs : 0) / 60000));
  renderChart(o.series, Math.max(60000, o.series.length ? o.series[o.series.length - 1].atMs - o.series[0].atMs : 0));
  $("workers").innerHTML = o.workers.length === 0
    ? '<tr><td class="empty" colspan="10">no workers have reported to this coordinator</td></tr>'
    : o.workers.map((w) => {
        const use = w.capacityBytes ? w.residentBytes / w.capacityBytes : null;
        return '<tr data-worker-id="' + esc(w.id) + '">' +
          "<td><b>" + esc(w.id) + "</b></td>" +
          '<td class="mono">' + esc(w.address) + "</td>" +
          "<td>" + esc(w.zone || "–") + "</td>" +
          '<td><span class="badge ' + esc(w.health) + '">' + esc(w.health) + "</span></td>" +
          "<td>" + (w.inPlacement ? '<span class="badge ready">in</span>' : '<span class="badge notready">' + (w.ready ? "out" : "not ready") + "</span>") + "</td>" +
          '<td><span class="bar"><i style="width:' + (use === null ? 0 : Math.min(100, 100 * use)).toFixed(1) + '%"></i></span>' + bytes(w.residentBytes) + " / " + bytes(w.capacityBytes) + "</td>" +
          '<td class="num">' + w.blockCount + "</td>" +
          '<td class="num">' + rate(w.requestsPerSec) + "</td>" +
          '<td class="num">' + pct(w.hitRatio) + "</td>" +
          '<td class="num">' + age(w.lastHeartbeatAgeMs) + "</td></tr>";
      }).join("");
  $("coordinators").innerHTML = o.coordinators.map((c) =>
    '<tr><td class="mono">' + esc(c.id) + '</td><td class="mono">' + esc(c.address) + '</td><td><span class="badge ' + esc(c.health) + '">' + esc(c.health) + "</span></td></tr>").join("");
  document.body.dataset.workers = o.workers.map((w) => w.id).join(",");
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
}

let every = 2000;
async function poll() {
  try {
    const res = await fetch("/ui/overview.json", { cache: "no-store", credentials: "same-origin" });
    if (!res.ok) throw new Error(res.status === 401 ? "unauthorized: reopen the page as /ui?token=<admin token>" : "HTTP " + res.status);
    const o = await res.json();
    every = Math.max(250, Math.min(5000, o.sampleIntervalMs));
    render(o);
    $("banner").style.display = "none";
  } catch (e) {
    $("banner").textContent = "Cannot reach the coordinator (" + e.message + "); retrying…";
    $("banner").style.display = "block";
  }
  setTimeout(poll, every);
}
poll();
</script>
</body>
</html>
`
