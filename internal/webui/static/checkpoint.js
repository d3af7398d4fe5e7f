// One checkpoint: its summary and, per vertex, every subtask's
// acknowledgement, durations and sizes.

import { api } from "./api.js";
import { badge, fmtBytes, fmtDur, fmtTime, num } from "./format.js";
import { html, replaceHTML, setHTML } from "./html.js";
import { jobCrumbs, main } from "./page.js";

export function checkpointView(jid, cid) {
  const enc = encodeURIComponent(jid);
  replaceHTML(main, html`<div class="jobhead" id="cp-head"></div>
    <section class="panel"><div id="cp-summary"></div></section>
    <div id="cp-vertices"></div>`);
  const head = document.getElementById("cp-head");
  const summary = document.getElementById("cp-summary");
  const verts = document.getElementById("cp-vertices");
  let final = false;
  return {
    async refresh() {
      if (final) return; // a finished checkpoint no longer changes
      const [job, d] = await Promise.all([api(`/jobs/${enc}`), api(`/jobs/${enc}/checkpoints/details/${encodeURIComponent(cid)}`)]);
      jobCrumbs(jid, job.name, html`<a href="#/jobs/${jid}/checkpoints">Checkpoints</a>› #${cid}`);
      setHTML(head, html`<h1>${d.is_savepoint ? "Savepoint" : "Checkpoint"} #${d.id}</h1>${badge(d.className)}
        <span class="muted">triggered ${fmtTime(d.trigger_timestamp)}</span>`);
      setHTML(summary, html`<dl class="kv">
        <dt>End to end</dt><dd>${fmtDur(d.end_to_end_duration)}</dd>
        <dt>Checkpointed size</dt><dd>${fmtBytes(d.checkpointed_size)}</dd><dt>State size</dt><dd>${fmtBytes(d.state_size)}</dd>
        <dt>Acknowledged</dt><dd>${num(d.num_acknowledged_subtasks)}/${num(d.num_subtasks)}</dd>
        <dt>Buffered during alignment</dt><dd>${fmtBytes(d.alignment_buffered)}</dd>
        ${d.external_path ? html`<dt>Path</dt><dd><code>${d.external_path}</code></dd>` : ""}
        ${d.className === "failed" ? html`<dt>Failure</dt><dd class="err">${d.failure_reason || ""} ${d.failure_message || ""}</dd>` : ""}
        ${(d.declined_subtasks || []).length ? html`<dt>Declined by</dt><dd>${list(d.declined_subtasks.map((s) => html`${s.vertex}[${s.subtask}]${s.decline_message ? `: ${s.decline_message}` : ""}`))}</dd>` : ""}
        ${(d.pending_subtasks || []).length ? html`<dt>Not acknowledged</dt><dd>${list(d.pending_subtasks.map((s) => html`${s.vertex}[${s.subtask}] <span class="muted">${phaseText(s)}</span>`))}</dd>` : ""}
      </dl>`);
      const order = (job.vertices || []).map((v) => v.id);
      const ids = Object.keys(d.tasks || {}).sort((a, b) => order.indexOf(a) - order.indexOf(b));
      const subs = await Promise.all(ids.map((v) => api(`/jobs/${enc}/checkpoints/details/${encodeURIComponent(cid)}/subtasks/${encodeURIComponent(v)}`).catch(() => null)));
      setHTML(verts, html`${ids.map((v, i) => subtaskPanel(d.trigger_timestamp, d.tasks[v], subs[i]))}`);
      final = d.className !== "in_progress";
    },
  };
}

// list joins markup with commas.
const list = (items) => items.flatMap((x, i) => (i ? [html`, `, x] : [x]));

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
  return t;
}

function subtaskPanel(trigger, task, sub) {
  const rows = sub?.subtasks || [];
  const done = rows.filter((s) => s.className === "completed");
  let slowest = done.reduce((m, s) => (!m || s.end_to_end_duration > m.end_to_end_duration ? s : m), null);
  // Mark the slowest subtask only when it stands out from the fastest.
  const fastest = Math.min(...done.map((s) => s.end_to_end_duration));
  if (slowest && !(slowest.end_to_end_duration - fastest >= 10 && slowest.end_to_end_duration > 1.2 * fastest)) slowest = null;
  const maxE = Math.max(1, ...done.map((s) => s.end_to_end_duration));
  return html`<section class="panel vertex-panel" data-vertex="${task.name}"><h2>${task.name} <span class="muted">${num(task.num_acknowledged_subtasks)}/${num(task.num_subtasks)} acknowledged · ${fmtDur(task.end_to_end_duration)} · ${fmtBytes(task.checkpointed_size)}</span></h2>
    <div class="scroll"><table class="subtasks"><thead><tr><th class="num">Subtask</th><th>Status</th><th>Acknowledged</th><th class="num">End to end</th><th></th><th class="num">Checkpointed</th><th class="num">Sync</th><th class="num">Async</th><th class="num">Alignment</th><th class="num">Buffered</th><th class="num">Start delay</th></tr></thead><tbody>
    ${rows.map((s) => s.className !== "completed"
      ? html`<tr class="subtask-row"><td class="num">${s.index}</td><td>${badge(s.status)}</td><td colspan="9" class="muted">not acknowledged: ${phaseText(s)}</td></tr>`
      : html`<tr class="subtask-row${s === slowest ? " slow" : ""}" ${s === slowest ? html`title="the slowest subtask"` : ""}>
        <td class="num">${s.index}</td><td>${badge(s.status)}${s.unaligned_checkpoint ? " unaligned" : ""}${s.aborted ? " aborted" : ""}</td>
        <td>${fmtTime(s.ack_timestamp)} <span class="muted">(+${fmtDur(s.ack_timestamp - trigger)})</span></td>
        <td class="num">${fmtDur(s.end_to_end_duration)}</td>
        <td><svg width="80" height="10" viewBox="0 0 80 10"><rect width="${(80 * s.end_to_end_duration) / maxE}" height="10" rx="2" fill="var(--chart-line)"/></svg></td>
        <td class="num">${fmtBytes(s.checkpointed_size)}</td><td class="num">${fmtDur(s.checkpoint?.sync)}</td><td class="num">${fmtDur(s.checkpoint?.async)}</td>
        <td class="num">${fmtDur(s.alignment?.duration)}</td><td class="num">${fmtBytes(s.alignment?.buffered)}</td><td class="num">${fmtDur(s.start_delay)}</td></tr>`)}
    </tbody></table></div></section>`;
}
