// A job's checkpoints tab: counts, the chart of durations and sizes, the
// latest checkpoints, the configuration and the history.

import { api } from "./api.js";
import { badge, fmtBytes, fmtDur, fmtTime, num, shorten } from "./format.js";
import { html, replaceHTML, setHTML, setText } from "./html.js";

function checkpointsSkeleton() {
  return html`
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

// checkpointsTab draws the tab's skeleton into root and answers its
// refresher, called with the job's details at every poll.
export function checkpointsTab(jid, root) {
  replaceHTML(root, checkpointsSkeleton());
  const enc = encodeURIComponent(jid);
  const $ = (id) => root.querySelector(`#${id}`);
  let config = null;
  return async () => {
    const [st, cfg] = await Promise.all([api(`/jobs/${enc}/checkpoints`), config ? Promise.resolve(config) : api(`/jobs/${enc}/checkpoints/config`).catch(() => null)]);
    config = cfg;
    nextCheckpoint($("cp-next"), st.next_checkpoint);
    const c = st.counts || {};
    setHTML($("cp-counts"), html`${[["Triggered", c.total], ["In progress", c.in_progress], ["Completed", c.completed], ["Failed", c.failed], ["Restored", c.restored]]
      .map(([k, v]) => html`<div class="card" data-count="${k.toLowerCase().replace(" ", "_")}"><b>${num(v)}</b><span>${k}</span></div>`)}`);
    const hist = (st.history || []).slice().sort((a, b) => a.id - b.id);
    lastHist = hist;
    setHTML($("cp-chart"), checkpointChart(hist, $("cp-chart").clientWidth));
    setHTML($("cp-latest"), latestPanel(jid, st.latest || {}));
    setHTML($("cp-config"), cfg ? html`<dl class="kv">
      <dt>Mode</dt><dd>${cfg.mode}${cfg.unaligned_checkpoints ? " (unaligned)" : ""}</dd>
      <dt>Interval</dt><dd>${cfg.periodic_checkpoints === false ? "periodic checkpoints off" : fmtDur(cfg.interval)}</dd>
      <dt>Timeout</dt><dd>${fmtDur(cfg.timeout)}</dd><dt>Min pause</dt><dd>${fmtDur(cfg.min_pause)}</dd>
      <dt>Max concurrent</dt><dd>${num(cfg.max_concurrent)}</dd><dt>Tolerable failures</dt><dd>${num(cfg.tolerable_failed_checkpoints)}</dd>
      <dt>Retained</dt><dd>${num(cfg.retained_checkpoints)}</dd><dt>State backend</dt><dd>${cfg.state_backend}${cfg.incremental ? " (incremental)" : ""}</dd>
      <dt>Storage</dt><dd>${cfg.checkpoint_storage}</dd></dl>` : html`<p class="muted">Not available.</p>`);
    const rows = hist.slice().reverse();
    setHTML($("cp-history"), rows.length === 0 ? html`<p class="muted">No checkpoints yet.</p>` : html`
      <table id="cp-history-table"><thead><tr><th>ID</th><th>Status</th><th>Type</th><th class="hide-narrow">Triggered</th><th class="num">Duration</th><th class="num">Checkpointed</th><th class="num hide-narrow">State size</th><th class="num">Acked</th><th>Failure</th></tr></thead><tbody>
      ${rows.map((h) => html`<tr class="cp-row" data-id="${h.id}"><td><a href="#/jobs/${jid}/checkpoints/${h.id}">${h.id}</a></td>
        <td>${badge(h.className)}</td><td>${h.is_savepoint ? "savepoint" : (h.checkpoint_type || "checkpoint").toLowerCase()}</td>
        <td class="hide-narrow">${fmtTime(h.trigger_timestamp)}</td><td class="num">${fmtDur(h.end_to_end_duration)}</td>
        <td class="num">${fmtBytes(h.checkpointed_size)}</td><td class="num hide-narrow">${fmtBytes(h.state_size)}</td>
        <td class="num">${num(h.num_acknowledged_subtasks)}/${num(h.num_subtasks)}</td>
        <td class="err" title="${h.failure_message}">${shorten(h.failure_message, 60)}</td></tr>`)}
      </tbody></table>`);
  };
}

// nextCheckpoint renders the scheduler's answer (a Weir addition to
// Flink's statistics) to "when is the next checkpoint, and what holds it
// back"; the line is hidden when the JobManager does not send it.
function nextCheckpoint(el, n) {
  el.hidden = !n;
  if (!n) return setText(el, "");
  const due = n.due_timestamp > 0 ? n.due_timestamp - Date.now() : null;
  const when = due == null ? "" : due > 0 ? `due in ${fmtDur(due)}` : "due now";
  const queued = n.queued > 0 ? ` · ${num(n.queued)} queued` : "";
  let text;
  if (n.state === "SCHEDULED") text = `Next checkpoint: ${when || n.message || "scheduled"}`;
  else if (n.state === "DELAYED") text = `Next checkpoint delayed: ${n.message || n.reason}${when ? ` (${when})` : ""}`;
  else text = `No checkpoint scheduled: ${n.message || n.reason}`;
  el.dataset.state = n.state || "";
  el.dataset.reason = n.reason || "";
  el.className = `next-cp next-${(n.state || "").toLowerCase()}`;
  setText(el, `${text}${queued}`);
  el.title = n.message || "";
}

function latestPanel(jid, l) {
  const link = (c) => html`<a href="#/jobs/${jid}/checkpoints/${c.id}">#${c.id}</a>`;
  const row = (label, c, extra) => html`<dt>${label}</dt><dd id="latest-${label.toLowerCase()}">${c ? html`${link(c)} ${extra(c)}` : html`<span class="muted">none</span>`}</dd>`;
  const path = (c) => (c.external_path ? html`<br><code>${c.external_path}</code>` : "");
  return html`<dl class="kv">
    ${row("Completed", l.completed, (c) => html`at ${fmtTime(c.latest_ack_timestamp)}, ${fmtDur(c.end_to_end_duration)}, ${fmtBytes(c.checkpointed_size)}${path(c)}`)}
    ${row("Savepoint", l.savepoint, (c) => html`at ${fmtTime(c.latest_ack_timestamp)}${path(c)}`)}
    ${row("Failed", l.failed, (c) => html`at ${fmtTime(c.failure_timestamp)}: <span class="err">${c.failure_reason || ""} ${c.failure_message || ""}</span>`)}
    <dt>Restored</dt><dd id="latest-restored">${l.restored ? html`#${l.restored.id}${l.restored.is_savepoint ? " (savepoint)" : ""} at ${fmtTime(l.restored.restore_timestamp)}${path(l.restored)}` : html`<span class="muted">none</span>`}</dd>
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
  if (!hist.length) return html`<svg id="cp-chart-svg" data-completed="0" data-failed="0" viewBox="0 0 ${W} 60"><text x="${W / 2}" y="34" text-anchor="middle" class="muted">No checkpoints yet</text></svg>`;
  const maxD = Math.max(1, ...done.map((h) => h.end_to_end_duration));
  const maxS = Math.max(1, ...done.map((h) => h.checkpointed_size));
  const n = hist.length;
  const step = pw / n;
  const x = (i) => L + step * (i + 0.5);
  const yd = (d) => T + ph - (d / maxD) * ph;
  const ys = (s) => T + ph - (s / maxS) * ph;
  const grid = [];
  for (let k = 0; k <= 4; k++) {
    const y = T + (ph * k) / 4;
    grid.push(html`<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}"/>`);
    grid.push(html`<text x="${L - 6}" y="${y + 4}" text-anchor="end" class="muted">${fmtDur((maxD * (4 - k)) / 4)}</text>`);
    grid.push(html`<text x="${W - R + 6}" y="${y + 4}" class="muted">${fmtBytes((maxS * (4 - k)) / 4)}</text>`);
  }
  const bw = Math.max(2, Math.min(28, step * 0.6));
  const bars = [], pts = [], marks = [], labels = [];
  const line = [];
  const every = Math.ceil(n / 14);
  hist.forEach((h, i) => {
    const cx = x(i);
    if (i % every === 0 || i === n - 1) labels.push(html`<text x="${cx}" y="${H - 10}" text-anchor="middle" class="muted">${h.id}</text>`);
    if (h.className === "completed") {
      const y = ys(h.checkpointed_size);
      bars.push(html`<rect class="c-bar" x="${cx - bw / 2}" y="${y}" width="${bw}" height="${T + ph - y}"><title>#${h.id} checkpointed ${fmtBytes(h.checkpointed_size)}</title></rect>`);
      line.push(`${cx},${yd(h.end_to_end_duration)}`);
      pts.push(html`<circle class="cp-point${h.is_savepoint ? " savepoint" : ""}" data-id="${h.id}" cx="${cx}" cy="${yd(h.end_to_end_duration)}" r="4.5"><title>${h.is_savepoint ? "Savepoint" : "Checkpoint"} #${h.id}: ${fmtDur(h.end_to_end_duration)}, ${fmtBytes(h.checkpointed_size)}</title></circle>`);
    } else if (h.className === "failed") {
      const y = T + 10, s = 6;
      const reason = [h.failure_reason, h.failure_message].filter(Boolean).join(": ") || "failed";
      marks.push(html`<g class="cp-failed" data-id="${h.id}"><title>Checkpoint #${h.id} failed: ${reason}</title>
        <rect x="${cx - 9}" y="${T}" width="18" height="${ph}"/>
        <line x1="${cx - s}" y1="${y - s}" x2="${cx + s}" y2="${y + s}"/><line x1="${cx - s}" y1="${y + s}" x2="${cx + s}" y2="${y - s}"/></g>`);
    }
  });
  return html`<svg id="cp-chart-svg" data-completed="${done.length}" data-failed="${failed.length}" viewBox="0 0 ${W} ${H}" role="img" aria-label="checkpoint durations and sizes">
    <g class="c-grid">${grid}</g>${bars}
    ${line.length > 1 ? html`<polyline class="c-line" points="${line.join(" ")}"/>` : ""}${pts}${marks}${labels}</svg>`;
}
