// Weir dashboard: a hash-routed single page reading the Flink-shaped REST
// API of the JobManager. No build step, no dependencies. Every view is a
// fixed skeleton of sections; polling rewrites a section only when its
// markup changed, so nothing flickers and inputs keep their state.

const POLL_MS = 2000;
const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");
const statusEl = document.getElementById("status");

// ---------------------------------------------------------------- helpers

const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

function setHTML(el, html) {
  if (el && el.__html !== html) {
    el.__html = html;
    el.innerHTML = html;
  }
}

async function api(path, opts = {}) {
  const init = { method: opts.method || "GET", headers: { Accept: "application/json" } };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = text; }
  if (!r.ok) {
    const msg = body && body.errors ? body.errors.join("; ") : text || r.statusText;
    throw new Error(`${init.method} ${path}: ${r.status} ${msg}`);
  }
  return body;
}

function fmtBytes(n) {
  if (n == null || n < 0) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(n < 10 ? 1 : 0) : n} ${u[i]}`;
}

function fmtDur(ms) {
  if (ms == null || ms < 0) return "–";
  if (ms < 10 && ms !== Math.round(ms)) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (d) return `${d}d ${h % 24}h`;
  if (h) return `${h}h ${m % 60}m`;
  return `${m}m ${Math.floor(s % 60)}s`;
}

function fmtTime(ms) {
  if (!ms || ms <= 0) return "–";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

const badge = (s) => `<span class="badge s-${esc(s)}">${esc(s)}</span>`;
const num = (n) => (n == null ? "–" : Number(n).toLocaleString());

// ---------------------------------------------------------------- routing

let view = null; // {refresh(): Promise}
let timer = null;
let inflight = false;

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "jobs" && parts[1]) {
    if (parts[2] === "checkpoints" && parts[3]) return checkpointView(parts[1], parts[3]);
    if (parts[2] === "checkpoints") return jobView(parts[1], "checkpoints");
    return jobView(parts[1], "overview");
  }
  return overviewView();
}

async function tick() {
  clearTimeout(timer);
  if (!inflight && view) {
    inflight = true;
    const v = view;
    try {
      await v.refresh();
      if (v === view) {
        statusEl.textContent = `updated ${new Date().toLocaleTimeString()}`;
        statusEl.classList.remove("err");
      }
    } catch (e) {
      statusEl.textContent = `refresh failed: ${e.message}`;
      statusEl.classList.add("err");
    } finally {
      inflight = false;
    }
  }
  timer = setTimeout(tick, POLL_MS);
}

function navigate() {
  view = route();
  inflight = false;
  tick();
}

window.addEventListener("hashchange", navigate);
navigate();

// ---------------------------------------------------------------- overview

function overviewView() {
  setHTML(crumbs, `<span>Overview</span>`);
  main.innerHTML = `
    <div class="cards" id="ov-cards"></div>
    <section class="panel"><h2>Jobs</h2><div class="scroll" id="ov-jobs"></div></section>
    <section class="panel"><h2>TaskManagers</h2><div class="scroll" id="ov-tms"></div></section>`;
  const cards = document.getElementById("ov-cards");
  const jobsEl = document.getElementById("ov-jobs");
  const tmsEl = document.getElementById("ov-tms");
  return {
    async refresh() {
      const [ov, tms, jobs] = await Promise.all([api("/overview"), api("/taskmanagers"), api("/jobs/overview")]);
      setHTML(cards, [
        ["TaskManagers", ov.taskmanagers], ["Slots total", ov["slots-total"]], ["Slots free", ov["slots-available"]],
        ["Running", ov["jobs-running"]], ["Finished", ov["jobs-finished"]], ["Cancelled", ov["jobs-cancelled"]], ["Failed", ov["jobs-failed"]],
      ].map(([k, v]) => `<div class="card"><b>${num(v)}</b><span>${k}</span></div>`).join(""));

      const list = (jobs.jobs || []).slice().sort((a, b) => b["start-time"] - a["start-time"]);
      // Restarts are only in the job details; fetch them for the newest jobs.
      const details = await Promise.all(list.slice(0, 25).map((j) => api(`/jobs/${encodeURIComponent(j.jid)}`).catch(() => null)));
      const restarts = new Map(details.filter(Boolean).map((d) => [d.jid, d.restarts]));
      setHTML(jobsEl, list.length === 0 ? `<p class="muted">No jobs yet. Submit one with <code>weir job submit -f spec.yaml</code>.</p>` : `
        <table id="jobs-table"><thead><tr><th>Name</th><th>State</th><th class="hide-narrow">Started</th><th class="num">Uptime</th><th class="num">Restarts</th><th class="num hide-narrow">Tasks</th><th class="hide-narrow">Job ID</th></tr></thead><tbody>
        ${list.map((j) => `<tr class="job-row" data-jid="${esc(j.jid)}">
          <td><a href="#/jobs/${esc(j.jid)}">${esc(j.name)}</a></td><td>${badge(j.state)}</td>
          <td class="hide-narrow">${fmtTime(j["start-time"])}</td><td class="num">${fmtDur(j.duration)}</td>
          <td class="num">${restarts.has(j.jid) ? num(restarts.get(j.jid)) : "–"}</td>
          <td class="num hide-narrow">${num(j.tasks?.running)}/${num(j.tasks?.total)}</td>
          <td class="hide-narrow muted"><code>${esc(j.jid)}</code></td></tr>`).join("")}
        </tbody></table>`);

      const now = Date.now();
      const tmList = (tms.taskmanagers || []).slice().sort((a, b) => a.id.localeCompare(b.id));
      setHTML(tmsEl, tmList.length === 0 ? `<p class="muted">No TaskManager registered.</p>` : `
        <table id="tms-table"><thead><tr><th>ID</th><th>Address</th><th class="num">Slots free / total</th><th>Last heartbeat</th><th class="hide-narrow">Metrics</th></tr></thead><tbody>
        ${tmList.map((t) => {
          const ago = Math.max(0, Math.round((now - t.timeSinceLastHeartbeat) / 1000));
          return `<tr class="tm-row" data-tm="${esc(t.id)}"><td>${esc(t.id)}</td><td><code>${esc(t.path)}</code></td>
          <td class="num">${num(t.freeSlots)} / ${num(t.slotsNumber)}</td>
          <td title="${esc(new Date(t.timeSinceLastHeartbeat).toISOString())}">${ago < 2 ? "just now" : `${ago} s ago`}</td>
          <td class="hide-narrow">${t.httpAddress ? `<code>${esc(t.httpAddress)}/metrics</code>` : "–"}</td></tr>`;
        }).join("")}</tbody></table>`);
    },
  };
}

// ---------------------------------------------------------------- job page

function jobCrumbs(jid, name, extra) {
  const base = `<a href="#/">Overview</a>› <a href="#/jobs/${esc(jid)}">${esc(name || jid)}</a>`;
  setHTML(crumbs, extra ? `${base}› <span>${extra}</span>` : base);
}

function jobView(jid, tab) {
  const enc = encodeURIComponent(jid);
  main.innerHTML = `
    <div class="jobhead" id="job-head"></div>
    <nav class="tabs">
      <a href="#/jobs/${esc(jid)}" class="${tab === "overview" ? "active" : ""}" id="tab-overview">Overview</a>
      <a href="#/jobs/${esc(jid)}/checkpoints" class="${tab === "checkpoints" ? "active" : ""}" id="tab-checkpoints">Checkpoints</a>
    </nav>
    <div id="tab-body"></div>
    ${actionsPanel()}`;
  wireActions(jid);
  const head = document.getElementById("job-head");
  const body = document.getElementById("tab-body");
  let sub;
  if (tab === "checkpoints") {
    body.innerHTML = checkpointsSkeleton();
    sub = checkpointsRefresher(jid, body);
  } else {
    body.innerHTML = `
      <section class="panel"><h2>Job graph</h2><div class="scroll" id="job-graph"></div>
        <div class="legend" id="bp-legend"><span>Back-pressure (the most back-pressured subtask):</span>
          <span><i class="sw bp-ok"></i>ok ≤ 10%</span><span><i class="sw bp-low"></i>low ≤ 50%</span>
          <span><i class="sw bp-high"></i>high &gt; 50%</span><span><i class="sw bp-none"></i>not reported</span>
          <span>· click a vertex for its subtasks</span></div></section>
      <section class="panel" id="bp-panel"><h2 id="bp-title">Back-pressure</h2><div class="scroll" id="bp-subtasks"></div></section>
      <section class="panel" id="wm-panel"><h2 id="wm-title">Event time</h2><div class="scroll" id="wm-body"></div></section>
      <section class="panel"><h2>Vertices</h2><div class="scroll" id="job-vertices"></div></section>`;
    sub = null;
  }
  // The overview tab keeps the last answers, so a click redraws at once
  // instead of waiting for the next poll.
  let selected = null; // vertex id whose subtasks are shown
  let last = null; // {job, bps}
  const draw = () => {
    if (!last) return;
    const { job, bps, wms } = last;
    if (selected && !(job.vertices || []).some((v) => v.id === selected)) selected = null;
    setHTML(document.getElementById("job-graph"), jobGraph(job, bps, selected));
    setHTML(document.getElementById("job-vertices"), verticesTable(job, bps, selected, wms));
    const v = (job.vertices || []).find((x) => x.id === selected);
    setHTML(document.getElementById("bp-title"), v ? `Back-pressure of ${esc(v.name)} ${levelBadge(bps.get(v.id))}` : "Back-pressure");
    setHTML(document.getElementById("bp-subtasks"), v ? subtaskLoadTable(v, bps.get(v.id))
      : `<p class="muted" id="bp-hint">Click a vertex in the graph or the table to see how busy, idle and back-pressured each of its subtasks is.</p>`);
    setHTML(document.getElementById("wm-title"), v ? `Event time of ${esc(v.name)}` : "Event time");
    setHTML(document.getElementById("wm-body"), v ? watermarkDetails(wms.get(v.id))
      : `<p class="muted" id="wm-hint">Click a vertex to see its watermark and what holds it back: why its windows do not fire.</p>`);
  };
  if (!sub) {
    const pick = (e) => {
      const el = e.target.closest("[data-vid]");
      if (!el || (e.type === "keydown" && e.key !== "Enter" && e.key !== " ")) return;
      e.preventDefault();
      selected = el.dataset.vid === selected ? null : el.dataset.vid;
      draw();
    };
    body.addEventListener("click", pick);
    body.addEventListener("keydown", pick);
  }
  return {
    async refresh() {
      const job = await api(`/jobs/${enc}`);
      jobCrumbs(jid, job.name, tab === "checkpoints" ? "Checkpoints" : "");
      document.title = `${job.name} · Weir`;
      setHTML(head, `<h1>${esc(job.name)}</h1>${badge(job.state)}
        <span class="muted">uptime ${fmtDur(job.duration)}</span>
        <span class="muted">restarts <b id="job-restarts">${num(job.restarts)}</b></span>
        <span class="muted">started ${fmtTime(job["start-time"])}</span>
        <code class="muted">${esc(job.jid)}</code>
        ${job.failure_cause ? `<div class="err">${esc(job.failure_cause)}</div>` : ""}`);
      const running = job.state === "RUNNING";
      for (const b of document.querySelectorAll("[data-needs-running]")) b.disabled = !running;
      if (sub) return sub(job);
      // Flink's dashboard asks each vertex for its back-pressure; so does this one.
      const vs = job.vertices || [];
      const [answers, wm] = await Promise.all([
        Promise.all(vs.map((v) => api(`/jobs/${enc}/vertices/${encodeURIComponent(v.id)}/backpressure`).catch(() => null))),
        api(`/jobs/${enc}/watermarks`).catch(() => null),
      ]);
      last = { job, bps: new Map(vs.map((v, i) => [v.id, answers[i]])), wms: new Map((wm?.vertices || []).map((w) => [w.id, w])) };
      draw();
    },
  };
}

// level is a vertex's back-pressure level, "none" without a report.
const level = (bp) => (bp && bp.status === "ok" ? bp["backpressure-level"] || bp.backpressureLevel || "none" : "none");
const levelBadge = (bp) => `<span class="badge bp-badge bp-${esc(level(bp))}">${level(bp) === "none" ? "no data" : esc(level(bp))}</span>`;
const pct = (r) => (r == null ? "–" : `${Math.round(r * 100)}%`);

function fmtRate(n) {
  if (n == null || !isFinite(n)) return "–";
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(0)}k`;
  if (n >= 100) return Math.round(n).toLocaleString();
  return n.toFixed(n < 10 ? 1 : 0);
}

// vertexLoad sums up what the subtasks reported: the highest shares (the
// bottleneck subtask decides) and the job details' records per second.
function vertexLoad(v, bp) {
  const subs = bp?.status === "ok" ? bp.subtasks || [] : [];
  const m = v.metrics || {};
  const reported = m["read-records-complete"] || m["write-records-complete"] || subs.length > 0;
  return {
    reported,
    in: m["read-records-per-second"], out: m["write-records-per-second"],
    bp: subs.length ? Math.max(...subs.map((s) => s.ratio)) : null,
    busy: subs.length ? Math.max(...subs.map((s) => s.busyRatio)) : null,
  };
}

function ioCell(m, key) {
  if (!m || !m[`${key}-complete`]) return `<span class="muted" title="not reported by every subtask">n/a</span>`;
  return num(m[key]);
}

function verticesTable(job, bps, selected, wms) {
  return `<table id="vertices-table"><thead><tr><th>Vertex</th><th class="num">Parallelism</th><th>Status</th><th>Back-pressure</th><th>Watermark</th><th class="num">Lag</th><th class="num">In/s</th><th class="num">Out/s</th><th class="num hide-narrow">Records in</th><th class="num hide-narrow">Records out</th><th class="num hide-narrow">Tasks running</th><th class="num hide-narrow">Duration</th></tr></thead><tbody>
    ${(job.vertices || []).map((v) => {
      const m = v.metrics || {};
      const l = vertexLoad(v, bps.get(v.id));
      return `<tr class="vertex-row${v.id === selected ? " selected" : ""}" data-vid="${esc(v.id)}" data-vertex="${esc(v.name)}" tabindex="0">
        <td><span class="link">${esc(v.name)}</span></td><td class="num">${num(v.parallelism)}</td><td>${badge(v.status)}</td>
        <td>${levelBadge(bps.get(v.id))} ${l.bp == null ? "" : `<span class="muted">${pct(l.bp)}</span>`}</td>
        <td class="wm-cell">${fmtWatermark(wms.get(v.id)?.watermark, wms.get(v.id)?.idle)}</td><td class="num">${wms.get(v.id)?.lag_ms == null ? "–" : fmtDur(wms.get(v.id).lag_ms)}</td>
        <td class="num">${l.reported ? fmtRate(l.in) : "–"}</td><td class="num">${l.reported ? fmtRate(l.out) : "–"}</td>
        <td class="num hide-narrow">${ioCell(m, "read-records")}</td><td class="num hide-narrow">${ioCell(m, "write-records")}</td>
        <td class="num hide-narrow">${num(v.tasks?.RUNNING ?? 0)}/${num(v.parallelism)}</td><td class="num hide-narrow">${fmtDur(v.duration)}</td></tr>`;
    }).join("")}</tbody></table>`;
}

// subtaskLoadTable shows how each subtask of v spends its time: a stacked
// bar of busy, idle and back-pressured, as in Flink's back-pressure tab.
function subtaskLoadTable(v, bp) {
  const subs = bp?.status === "ok" ? bp.subtasks || [] : [];
  if (!subs.length) return `<p class="muted">No subtask of ${esc(v.name)} reported its load yet; the TaskManagers report running subtasks with every heartbeat.</p>`;
  const bar = (s) => {
    const w = (r) => Math.max(0, Math.min(100, r * 100));
    const busy = w(s.busyRatio), idle = w(s.idleRatio), back = w(s.ratio);
    return `<svg class="load-bar" width="120" height="12" viewBox="0 0 100 12" preserveAspectRatio="none" aria-hidden="true">
      <rect class="lb-busy" x="0" width="${busy}" height="12"/><rect class="lb-idle" x="${busy}" width="${idle}" height="12"/>
      <rect class="lb-bp" x="${busy + idle}" width="${back}" height="12"/></svg>`;
  };
  return `<table id="bp-table" data-vertex="${esc(v.name)}"><thead><tr><th class="num">Subtask</th><th>Level</th><th class="num">Back-pressured</th><th class="num">Idle</th><th class="num">Busy</th><th class="hide-narrow"></th><th class="num">In/s</th><th class="num">Out/s</th></tr></thead><tbody>
    ${subs.map((s) => `<tr class="bp-row bp-${esc(s["backpressure-level"])}" data-subtask="${s.subtask}" data-level="${esc(s["backpressure-level"])}">
      <td class="num">${s.subtask}</td><td>${levelBadge({ status: "ok", "backpressure-level": s["backpressure-level"] })}</td>
      <td class="num">${pct(s.ratio)}</td><td class="num">${pct(s.idleRatio)}</td><td class="num">${pct(s.busyRatio)}</td>
      <td class="hide-narrow">${bar(s)}</td>
      <td class="num">${fmtRate(s.numRecordsInPerSecond)}</td><td class="num">${fmtRate(s.numRecordsOutPerSecond)}</td></tr>`).join("")}
    </tbody></table>
    <div class="legend"><span><i class="lb-busy"></i>busy</span><span><i class="lb-idle"></i>idle (waiting for input)</span><span><i class="lb-bp"></i>back-pressured (waiting for room downstream)</span>
    <span>over the last heartbeat interval, measured ${fmtTime(bp["end-timestamp"])}</span></div>`;
}

// Watermarks are Unix ms of event time; null: none yet; the int64 maximum:
// the end of event time.
function fmtWatermark(ms, idle) {
  if (idle) return `<span class="badge">idle</span>`;
  if (ms == null) return `<span class="muted">none</span>`;
  if (ms >= 9.2e18) return `<span class="muted">end</span>`;
  const d = new Date(ms);
  return `${d.toISOString().slice(11, 23)}`;
}

// watermarkDetails answers "why does my window not fire" for one vertex:
// the sentence from the REST API, then per subtask its watermarks, the
// channel (or split) holding it back and what is idle.
function watermarkDetails(w) {
  if (!w) return `<p class="muted">No event time reported.</p>`;
  const ch = (s) => [
    ...(s.channels || []).map((c) => `<span class="wm-ch${c.holding ? " holding" : ""}${c.idle ? " idle" : ""}" title="${c.holding ? "holding the watermark back" : c.idle ? "idle" : ""}">${esc(c.vertex)}[${c.subtask}] ${fmtWatermark(c.watermark, c.idle)}</span>`),
    ...(s.splits || []).map((p) => `<span class="wm-ch${p.holding ? " holding" : ""}${p.idle ? " idle" : ""}">split ${esc(p.id)} ${fmtWatermark(p.watermark, p.idle)}</span>`),
  ].join(" ");
  return `<p id="wm-explanation" class="${w.idle ? "muted" : ""}">${esc(w.explanation)}</p>
    <table id="wm-table"><thead><tr><th class="num">Subtask</th><th>Input watermark</th><th>Output watermark</th><th class="num">Timers</th><th class="num">Late dropped</th><th>Inputs (holding back in bold)</th></tr></thead><tbody>
    ${(w.subtasks || []).map((s) => `<tr data-subtask="${s.subtask}"><td class="num">${s.subtask}</td><td>${fmtWatermark(s.input_watermark, s.idle)}</td><td>${fmtWatermark(s.output_watermark)}</td>
      <td class="num">${num(s.timers)}</td><td class="num">${num(s.late_records_dropped)}</td><td>${ch(s)}</td></tr>`).join("")}
    </tbody></table>`;
}

// jobGraph lays the plan out in columns by depth (sources left) and draws
// edges as curves labelled with the partitioner. Each box is coloured by
// the vertex's back-pressure level and shows its throughput.
function jobGraph(job, bps, selected) {
  const nodes = job.plan?.nodes || [];
  if (!nodes.length) return `<p class="muted">No plan.</p>`;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const vert = new Map((job.vertices || []).map((v) => [v.id, v]));
  const depth = new Map();
  const dep = (n, seen = new Set()) => {
    if (depth.has(n.id)) return depth.get(n.id);
    if (seen.has(n.id)) return 0;
    seen.add(n.id);
    let d = 0;
    for (const i of n.inputs || []) if (byId.has(i.id)) d = Math.max(d, dep(byId.get(i.id), seen) + 1);
    depth.set(n.id, d);
    return d;
  };
  nodes.forEach((n) => dep(n));
  const cols = [];
  nodes.forEach((n) => (cols[depth.get(n.id)] ||= []).push(n));
  const W = 210, H = 88, GX = 100, GY = 30, PAD = 20;
  const fed = new Set(nodes.flatMap((n) => (n.inputs || []).map((i) => i.id)));
  const pos = new Map();
  const rows = Math.max(...cols.map((c) => c.length));
  cols.forEach((c, ci) => c.forEach((n, ri) => {
    const off = ((rows - c.length) * (H + GY)) / 2;
    pos.set(n.id, { x: PAD + ci * (W + GX), y: PAD + off + ri * (H + GY) });
  }));
  const width = PAD * 2 + cols.length * W + (cols.length - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  let edges = "", boxes = "";
  for (const n of nodes) {
    const to = pos.get(n.id);
    for (const i of n.inputs || []) {
      const from = pos.get(i.id);
      if (!from) continue;
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x - 4, y2 = to.y + H / 2;
      const mx = (x1 + x2) / 2;
      edges += `<g class="g-edge" data-from="${esc(i.id)}" data-to="${esc(n.id)}"><path d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}" marker-end="url(#arrow)"/>
        <text x="${mx}" y="${(y1 + y2) / 2 - 6}" text-anchor="middle">${esc(i.ship_strategy)}</text></g>`;
    }
    const v = vert.get(n.id) || {};
    const name = v.name || n.description || n.id;
    const bp = bps.get(n.id);
    const lv = level(bp);
    const l = vertexLoad(v, bp);
    // A source reads nothing and a sink writes nothing; their one rate says it all.
    const rates = [(n.inputs || []).length ? `in ${fmtRate(l.in)}/s` : "", fed.has(n.id) ? `out ${fmtRate(l.out)}/s` : ""].filter(Boolean);
    const io = l.reported && rates.length ? rates.join(" · ") : (n.operator || "");
    const load = l.bp == null ? "" : `back-pressured ${pct(l.bp)} · busy ${pct(l.busy)}`;
    boxes += `<g class="g-vertex s-${esc(v.status)} bp-${esc(lv)}${n.id === selected ? " selected" : ""}" data-vertex="${esc(name)}" data-vid="${esc(n.id)}" data-bp="${esc(lv)}" transform="translate(${to.x},${to.y})" tabindex="0" role="button" aria-label="${esc(name)}: back-pressure ${esc(lv)}">
      <title>${esc(name)}: ${esc(n.operator)} ×${n.parallelism} (${esc(v.status)}), back-pressure ${lv === "none" ? "not reported" : esc(lv)}</title>
      <rect width="${W}" height="${H}" rx="8"/>
      <text x="12" y="22" font-weight="600">${esc(name.length > 20 ? name.slice(0, 19) + "…" : name)}</text>
      <text x="${W - 10}" y="22" text-anchor="end" class="bp-tag">${lv === "none" ? "" : esc(lv)}</text>
      <text x="12" y="41" class="muted">parallelism ${num(n.parallelism)} · ${esc(v.status || "")}</text>
      <text x="12" y="59" class="g-io">${esc(io)}</text>
      <text x="12" y="77" class="muted g-load">${esc(load)}</text></g>`;
  }
  return `<svg id="job-graph-svg" viewBox="0 0 ${width} ${height}" width="${width}" role="group" aria-label="job graph">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>
    ${edges}${boxes}</svg>`;
}

// ---------------------------------------------------------------- actions

function actionsPanel() {
  return `<section class="panel" id="actions"><h2>Actions</h2>
    <div class="actions">
      <button id="btn-checkpoint" data-needs-running>Trigger checkpoint</button>
      <input id="savepoint-dir" placeholder="savepoint directory (empty: the JobManager's default)" aria-label="savepoint directory">
      <button id="btn-savepoint" data-needs-running>Trigger savepoint</button>
      <button id="btn-stop" data-needs-running>Stop with savepoint</button>
      <button id="btn-cancel" class="danger" data-needs-running>Cancel job</button>
    </div>
    <div id="action-result" role="status" class="muted"></div></section>`;
}

async function awaitOperation(path) {
  for (let i = 0; i < 600; i++) {
    const r = await api(path);
    if (r.status?.id === "COMPLETED") return r.operation || {};
    await new Promise((res) => setTimeout(res, 500));
  }
  throw new Error("timed out waiting for the operation");
}

function wireActions(jid) {
  const enc = encodeURIComponent(jid);
  const out = document.getElementById("action-result");
  const dir = document.getElementById("savepoint-dir");
  const show = (cls, msg) => { out.className = cls; out.textContent = msg; };
  const cause = (op) => op.failureCause || op["failure-cause"];
  const run = async (question, what, fn) => {
    if (!confirm(question)) return;
    show("muted", `${what}…`);
    try {
      show("ok", await fn());
    } catch (e) {
      show("bad", `${what} failed: ${e.message}`);
    }
    tick();
  };
  const target = () => dir.value.trim() || null;
  document.getElementById("btn-checkpoint").onclick = () => run("Trigger a checkpoint of this job?", "Checkpoint", async () => {
    const t = await api(`/jobs/${enc}/checkpoints`, { method: "POST", body: {} });
    const op = await awaitOperation(`/jobs/${enc}/checkpoints/${encodeURIComponent(t["request-id"])}`);
    if (cause(op)) throw new Error(cause(op).class + ": " + cause(op)["stack-trace"]);
    return `Checkpoint ${op.checkpointId} completed.`;
  });
  document.getElementById("btn-savepoint").onclick = () => run(`Trigger a savepoint${target() ? ` into ${target()}` : ""}?`, "Savepoint", async () => {
    const t = await api(`/jobs/${enc}/savepoints`, { method: "POST", body: { "target-directory": target(), "cancel-job": false } });
    const op = await awaitOperation(`/jobs/${enc}/savepoints/${encodeURIComponent(t["request-id"])}`);
    if (cause(op)) throw new Error(cause(op)["stack-trace"] || cause(op).class);
    return `Savepoint completed: ${op.location}`;
  });
  document.getElementById("btn-stop").onclick = () => run(`Stop the job with a savepoint${target() ? ` into ${target()}` : ""}?`, "Stop", async () => {
    const t = await api(`/jobs/${enc}/stop`, { method: "POST", body: { targetDirectory: target(), drain: false } });
    const op = await awaitOperation(`/jobs/${enc}/savepoints/${encodeURIComponent(t["request-id"])}`);
    if (cause(op)) throw new Error(cause(op)["stack-trace"] || cause(op).class);
    return `Job stopped; savepoint at ${op.location}`;
  });
  document.getElementById("btn-cancel").onclick = () => run("Cancel this job? Its tasks stop without a savepoint.", "Cancel", async () => {
    await api(`/jobs/${enc}?mode=cancel`, { method: "PATCH" });
    return "Cancellation requested.";
  });
}

// ---------------------------------------------------------------- checkpoints

function checkpointsSkeleton() {
  return `
    <div class="next-cp" id="cp-next" role="status" hidden></div>
    <div class="cards" id="cp-counts"></div>
    <section class="panel"><h2>End-to-end duration and checkpointed size</h2><div id="cp-chart"></div>
      <div class="legend"><span><i style="background:var(--chart-line)"></i>duration (left axis)</span>
      <span><i style="background:var(--chart-bar)"></i>checkpointed size (right axis)</span>
      <span><i style="background:var(--ok)"></i>savepoint</span><span><i style="background:var(--bad)"></i>failed (hover for the reason)</span></div></section>
    <div class="grid2">
      <section class="panel"><h2>Latest</h2><div id="cp-latest"></div></section>
      <section class="panel"><h2>Configuration</h2><div id="cp-config"></div></section>
    </div>
    <section class="panel"><h2>History</h2><div class="scroll" id="cp-history"></div></section>`;
}

// The chart is drawn at the width of its panel (1 SVG unit = 1 CSS pixel, so
// its text keeps its size) and redrawn when the window is resized.
let lastHist = null;
window.addEventListener("resize", () => {
  const el = document.getElementById("cp-chart");
  if (el && lastHist) setHTML(el, checkpointChart(lastHist, el.clientWidth));
});

function checkpointsRefresher(jid, root) {
  const enc = encodeURIComponent(jid);
  const $ = (id) => root.querySelector(`#${id}`);
  let config = null;
  return async () => {
    const [st, cfg] = await Promise.all([api(`/jobs/${enc}/checkpoints`), config ? Promise.resolve(config) : api(`/jobs/${enc}/checkpoints/config`).catch(() => null)]);
    config = cfg;
    nextCheckpoint($("cp-next"), st.next_checkpoint);
    const c = st.counts || {};
    setHTML($("cp-counts"), [["Triggered", c.total], ["In progress", c.in_progress], ["Completed", c.completed], ["Failed", c.failed], ["Restored", c.restored]]
      .map(([k, v]) => `<div class="card" data-count="${k.toLowerCase().replace(" ", "_")}"><b>${num(v)}</b><span>${k}</span></div>`).join(""));
    const hist = (st.history || []).slice().sort((a, b) => a.id - b.id);
    lastHist = hist;
    setHTML($("cp-chart"), checkpointChart(hist, $("cp-chart").clientWidth));
    setHTML($("cp-latest"), latestPanel(jid, st.latest || {}));
    setHTML($("cp-config"), cfg ? `<dl class="kv">
      <dt>Mode</dt><dd>${esc(cfg.mode)}${cfg.unaligned_checkpoints ? " (unaligned)" : ""}</dd>
      <dt>Interval</dt><dd>${cfg.periodic_checkpoints === false ? "periodic checkpoints off" : fmtDur(cfg.interval)}</dd>
      <dt>Timeout</dt><dd>${fmtDur(cfg.timeout)}</dd><dt>Min pause</dt><dd>${fmtDur(cfg.min_pause)}</dd>
      <dt>Max concurrent</dt><dd>${num(cfg.max_concurrent)}</dd><dt>Tolerable failures</dt><dd>${num(cfg.tolerable_failed_checkpoints)}</dd>
      <dt>Retained</dt><dd>${num(cfg.retained_checkpoints)}</dd><dt>State backend</dt><dd>${esc(cfg.state_backend)}${cfg.incremental ? " (incremental)" : ""}</dd>
      <dt>Storage</dt><dd>${esc(cfg.checkpoint_storage)}</dd></dl>` : `<p class="muted">Not available.</p>`);
    const rows = hist.slice().reverse();
    setHTML($("cp-history"), rows.length === 0 ? `<p class="muted">No checkpoints yet.</p>` : `
      <table id="cp-history-table"><thead><tr><th>ID</th><th>Status</th><th>Type</th><th class="hide-narrow">Triggered</th><th class="num">Duration</th><th class="num">Checkpointed</th><th class="num hide-narrow">State size</th><th class="num">Acked</th><th>Failure</th></tr></thead><tbody>
      ${rows.map((h) => `<tr class="cp-row" data-id="${h.id}"><td><a href="#/jobs/${esc(jid)}/checkpoints/${h.id}">${h.id}</a></td>
        <td>${badge(h.className)}</td><td>${h.is_savepoint ? "savepoint" : esc((h.checkpoint_type || "checkpoint").toLowerCase())}</td>
        <td class="hide-narrow">${fmtTime(h.trigger_timestamp)}</td><td class="num">${fmtDur(h.end_to_end_duration)}</td>
        <td class="num">${fmtBytes(h.checkpointed_size)}</td><td class="num hide-narrow">${fmtBytes(h.state_size)}</td>
        <td class="num">${num(h.num_acknowledged_subtasks)}/${num(h.num_subtasks)}</td>
        <td class="err" title="${esc(h.failure_message)}">${esc(shorten(h.failure_message, 60))}</td></tr>`).join("")}
      </tbody></table>`);
  };
}

// nextCheckpoint renders the scheduler's answer (a Weir addition to
// Flink's statistics) to "when is the next checkpoint, and what holds it
// back"; the line is hidden when the JobManager does not send it.
function nextCheckpoint(el, n) {
  el.hidden = !n;
  if (!n) return setHTML(el, "");
  const due = n.due_timestamp > 0 ? n.due_timestamp - Date.now() : null;
  const when = due == null ? "" : due > 0 ? `due in ${fmtDur(due)}` : "due now";
  const queued = n.queued > 0 ? ` · ${num(n.queued)} queued` : "";
  let text;
  if (n.state === "SCHEDULED") text = `Next checkpoint: ${when || esc(n.message) || "scheduled"}`;
  else if (n.state === "DELAYED") text = `Next checkpoint delayed: ${esc(n.message || n.reason)}${when ? ` (${when})` : ""}`;
  else text = `No checkpoint scheduled: ${esc(n.message || n.reason)}`;
  el.dataset.state = n.state || "";
  el.dataset.reason = n.reason || "";
  el.className = `next-cp next-${esc((n.state || "").toLowerCase())}`;
  setHTML(el, `${text}${queued}`);
  el.title = n.message || "";
}

const shorten = (s, n) => (!s ? "" : s.length > n ? s.slice(0, n - 1) + "…" : s);

function latestPanel(jid, l) {
  const link = (c) => `<a href="#/jobs/${esc(jid)}/checkpoints/${c.id}">#${c.id}</a>`;
  const row = (label, c, extra) => `<dt>${label}</dt><dd id="latest-${label.toLowerCase()}">${c ? `${link(c)} ${extra(c)}` : `<span class="muted">none</span>`}</dd>`;
  return `<dl class="kv">
    ${row("Completed", l.completed, (c) => `at ${fmtTime(c.latest_ack_timestamp)}, ${fmtDur(c.end_to_end_duration)}, ${fmtBytes(c.checkpointed_size)}${c.external_path ? `<br><code>${esc(c.external_path)}</code>` : ""}`)}
    ${row("Savepoint", l.savepoint, (c) => `at ${fmtTime(c.latest_ack_timestamp)}${c.external_path ? `<br><code>${esc(c.external_path)}</code>` : ""}`)}
    ${row("Failed", l.failed, (c) => `at ${fmtTime(c.failure_timestamp)}: <span class="err">${esc(c.failure_reason || "")} ${esc(c.failure_message || "")}</span>`)}
    <dt>Restored</dt><dd id="latest-restored">${l.restored ? `#${l.restored.id}${l.restored.is_savepoint ? " (savepoint)" : ""} at ${fmtTime(l.restored.restore_timestamp)}${l.restored.external_path ? `<br><code>${esc(l.restored.external_path)}</code>` : ""}` : `<span class="muted">none</span>`}</dd>
  </dl>`;
}

// checkpointChart draws one column per checkpoint of the history: a bar of
// the checkpointed size (right axis) and a point on the duration line (left
// axis) for a completed one, a red cross with the reason for a failed one.
function checkpointChart(hist, width) {
  const W = Math.max(300, Math.round(width || 900)), H = W < 600 ? 200 : 240, L = 60, R = 70, T = 14, B = 30;
  const pw = W - L - R, ph = H - T - B;
  const done = hist.filter((h) => h.className === "completed");
  const failed = hist.filter((h) => h.className === "failed");
  if (!hist.length) return `<svg id="cp-chart-svg" data-completed="0" data-failed="0" viewBox="0 0 ${W} 60"><text x="${W / 2}" y="34" text-anchor="middle" class="muted">No checkpoints yet</text></svg>`;
  const maxD = Math.max(1, ...done.map((h) => h.end_to_end_duration));
  const maxS = Math.max(1, ...done.map((h) => h.checkpointed_size));
  const n = hist.length;
  const step = pw / n;
  const x = (i) => L + step * (i + 0.5);
  const yd = (d) => T + ph - (d / maxD) * ph;
  const ys = (s) => T + ph - (s / maxS) * ph;
  let grid = "";
  for (let k = 0; k <= 4; k++) {
    const y = T + (ph * k) / 4;
    grid += `<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}"/>`;
    grid += `<text x="${L - 6}" y="${y + 4}" text-anchor="end" class="muted">${fmtDur((maxD * (4 - k)) / 4)}</text>`;
    grid += `<text x="${W - R + 6}" y="${y + 4}" class="muted">${fmtBytes((maxS * (4 - k)) / 4)}</text>`;
  }
  const bw = Math.max(2, Math.min(28, step * 0.6));
  let bars = "", pts = "", marks = "", labels = "";
  const line = [];
  const every = Math.ceil(n / 14);
  hist.forEach((h, i) => {
    const cx = x(i);
    if (i % every === 0 || i === n - 1) labels += `<text x="${cx}" y="${H - 10}" text-anchor="middle" class="muted">${h.id}</text>`;
    if (h.className === "completed") {
      const y = ys(h.checkpointed_size);
      bars += `<rect class="c-bar" x="${cx - bw / 2}" y="${y}" width="${bw}" height="${T + ph - y}"><title>#${h.id} checkpointed ${fmtBytes(h.checkpointed_size)}</title></rect>`;
      line.push(`${cx},${yd(h.end_to_end_duration)}`);
      pts += `<circle class="cp-point${h.is_savepoint ? " savepoint" : ""}" data-id="${h.id}" cx="${cx}" cy="${yd(h.end_to_end_duration)}" r="4.5"><title>${h.is_savepoint ? "Savepoint" : "Checkpoint"} #${h.id}: ${fmtDur(h.end_to_end_duration)}, ${fmtBytes(h.checkpointed_size)}</title></circle>`;
    } else if (h.className === "failed") {
      const y = T + 10, s = 6;
      const reason = [h.failure_reason, h.failure_message].filter(Boolean).join(": ") || "failed";
      marks += `<g class="cp-failed" data-id="${h.id}"><title>Checkpoint #${h.id} failed: ${esc(reason)}</title>
        <rect x="${cx - 9}" y="${T}" width="18" height="${ph}"/>
        <line x1="${cx - s}" y1="${y - s}" x2="${cx + s}" y2="${y + s}"/><line x1="${cx - s}" y1="${y + s}" x2="${cx + s}" y2="${y - s}"/></g>`;
    }
  });
  return `<svg id="cp-chart-svg" data-completed="${done.length}" data-failed="${failed.length}" viewBox="0 0 ${W} ${H}" role="img" aria-label="checkpoint durations and sizes">
    <g class="c-grid">${grid}</g>${bars}
    ${line.length > 1 ? `<polyline class="c-line" points="${line.join(" ")}"/>` : ""}${pts}${marks}${labels}</svg>`;
}

// ---------------------------------------------------------------- checkpoint detail

function checkpointView(jid, cid) {
  const enc = encodeURIComponent(jid);
  main.innerHTML = `<div class="jobhead" id="cp-head"></div>
    <section class="panel"><div id="cp-summary"></div></section>
    <div id="cp-vertices"></div>`;
  const head = document.getElementById("cp-head");
  const summary = document.getElementById("cp-summary");
  const verts = document.getElementById("cp-vertices");
  let final = false;
  return {
    async refresh() {
      if (final) return; // a finished checkpoint no longer changes
      const [job, d] = await Promise.all([api(`/jobs/${enc}`), api(`/jobs/${enc}/checkpoints/details/${encodeURIComponent(cid)}`)]);
      jobCrumbs(jid, job.name, `<a href="#/jobs/${esc(jid)}/checkpoints">Checkpoints</a>› #${esc(cid)}`);
      setHTML(head, `<h1>${d.is_savepoint ? "Savepoint" : "Checkpoint"} #${esc(d.id)}</h1>${badge(d.className)}
        <span class="muted">triggered ${fmtTime(d.trigger_timestamp)}</span>`);
      setHTML(summary, `<dl class="kv">
        <dt>End to end</dt><dd>${fmtDur(d.end_to_end_duration)}</dd>
        <dt>Checkpointed size</dt><dd>${fmtBytes(d.checkpointed_size)}</dd><dt>State size</dt><dd>${fmtBytes(d.state_size)}</dd>
        <dt>Acknowledged</dt><dd>${num(d.num_acknowledged_subtasks)}/${num(d.num_subtasks)}</dd>
        <dt>Buffered during alignment</dt><dd>${fmtBytes(d.alignment_buffered)}</dd>
        ${d.external_path ? `<dt>Path</dt><dd><code>${esc(d.external_path)}</code></dd>` : ""}
        ${d.className === "failed" ? `<dt>Failure</dt><dd class="err">${esc(d.failure_reason || "")} ${esc(d.failure_message || "")}</dd>` : ""}
        ${(d.declined_subtasks || []).length ? `<dt>Declined by</dt><dd>${d.declined_subtasks.map((s) => `${esc(s.vertex)}[${s.subtask}]${s.decline_message ? `: ${esc(s.decline_message)}` : ""}`).join(", ")}</dd>` : ""}
        ${(d.pending_subtasks || []).length ? `<dt>Not acknowledged</dt><dd>${d.pending_subtasks.map((s) => `${esc(s.vertex)}[${s.subtask}] <span class="muted">${phaseText(s)}</span>`).join(", ")}</dd>` : ""}
      </dl>`);
      const order = (job.vertices || []).map((v) => v.id);
      const ids = Object.keys(d.tasks || {}).sort((a, b) => order.indexOf(a) - order.indexOf(b));
      const subs = await Promise.all(ids.map((v) => api(`/jobs/${enc}/checkpoints/details/${encodeURIComponent(cid)}/subtasks/${encodeURIComponent(v)}`).catch(() => null)));
      setHTML(verts, ids.map((v, i) => subtaskPanel(d.trigger_timestamp, d.tasks[v], subs[i])).join(""));
      final = d.className !== "in_progress";
    },
  };
}

// phaseText says how far a subtask that has not acknowledged got, as its
// TaskManager last reported it.
function phaseText(s) {
  const words = {
    WAITING: "no barrier reached it",
    ALIGNING: "aligning",
    SNAPSHOTTING: "taking its snapshot",
    UPLOADING: "writing its state",
    DECLINED: "declined",
  };
  let t = words[s.phase] || (s.phase ? s.phase.toLowerCase() : "");
  if (s.phase === "ALIGNING" && s.channels) t += ` (${num(s.barriers_received)}/${num(s.channels)} barriers)`;
  if (s.phase_timestamp) t += `, reported ${fmtTime(s.phase_timestamp)}`;
  return esc(t);
}

function subtaskPanel(trigger, task, sub) {
  const list = sub?.subtasks || [];
  const done = list.filter((s) => s.className === "completed");
  let slowest = done.reduce((m, s) => (!m || s.end_to_end_duration > m.end_to_end_duration ? s : m), null);
  // Mark the slowest subtask only when it stands out from the fastest.
  const fastest = Math.min(...done.map((s) => s.end_to_end_duration));
  if (slowest && !(slowest.end_to_end_duration - fastest >= 10 && slowest.end_to_end_duration > 1.2 * fastest)) slowest = null;
  const maxE = Math.max(1, ...done.map((s) => s.end_to_end_duration));
  return `<section class="panel vertex-panel" data-vertex="${esc(task.name)}"><h2>${esc(task.name)} <span class="muted">${num(task.num_acknowledged_subtasks)}/${num(task.num_subtasks)} acknowledged · ${fmtDur(task.end_to_end_duration)} · ${fmtBytes(task.checkpointed_size)}</span></h2>
    <div class="scroll"><table class="subtasks"><thead><tr><th class="num">Subtask</th><th>Status</th><th>Acknowledged</th><th class="num">End to end</th><th></th><th class="num">Checkpointed</th><th class="num">Sync</th><th class="num">Async</th><th class="num">Alignment</th><th class="num">Buffered</th><th class="num">Start delay</th></tr></thead><tbody>
    ${list.map((s) => s.className !== "completed"
      ? `<tr class="subtask-row"><td class="num">${s.index}</td><td>${badge(s.status)}</td><td colspan="9" class="muted">not acknowledged: ${phaseText(s)}</td></tr>`
      : `<tr class="subtask-row${s === slowest ? " slow" : ""}" ${s === slowest ? `title="the slowest subtask"` : ""}>
        <td class="num">${s.index}</td><td>${badge(s.status)}${s.unaligned_checkpoint ? " unaligned" : ""}${s.aborted ? " aborted" : ""}</td>
        <td>${fmtTime(s.ack_timestamp)} <span class="muted">(+${fmtDur(s.ack_timestamp - trigger)})</span></td>
        <td class="num">${fmtDur(s.end_to_end_duration)}</td>
        <td><svg width="80" height="10" viewBox="0 0 80 10"><rect width="${(80 * s.end_to_end_duration) / maxE}" height="10" rx="2" fill="var(--chart-line)"/></svg></td>
        <td class="num">${fmtBytes(s.checkpointed_size)}</td><td class="num">${fmtDur(s.checkpoint?.sync)}</td><td class="num">${fmtDur(s.checkpoint?.async)}</td>
        <td class="num">${fmtDur(s.alignment?.duration)}</td><td class="num">${fmtBytes(s.alignment?.buffered)}</td><td class="num">${fmtDur(s.start_delay)}</td></tr>`).join("")}
    </tbody></table></div></section>`;
}
