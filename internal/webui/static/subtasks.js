// The subtasks of one vertex (GET /jobs/{id}/vertices/{vertexid}): where
// each runs, its attempt and its pipelined region, the set of subtasks that
// fail over together (a Weir addition).

import { badge, fmtDur, fmtTime, num } from "./format.js";
import { html } from "./html.js";

// d is the vertex details, {error} when they could not be read, or null
// while they load.
export function subtasksTable(v, d) {
  if (!d) return html`<p class="muted">Loading the subtasks of ${v.name}…</p>`;
  if (d.error) return html`<p class="err">The subtasks of ${v.name} are not available: ${d.error}</p>`;
  const subs = (d.subtasks || []).slice().sort((a, b) => a.subtask - b.subtask);
  if (!subs.length) return html`<p class="muted">${v.name} has no subtasks.</p>`;
  return html`<table id="subtasks-table" data-vertex="${v.name}"><thead><tr><th class="num">Subtask</th><th>Status</th><th class="num">Attempt</th><th class="num">Region</th><th>TaskManager</th><th class="hide-narrow">Endpoint</th><th class="hide-narrow">Started</th><th class="num hide-narrow">Duration</th></tr></thead><tbody>
    ${subs.map((s) => html`<tr class="st-row" data-subtask="${s.subtask}" data-region="${s.region}" data-attempt="${s.attempt}">
      <td class="num">${s.subtask}</td><td>${badge(s.status)}</td><td class="num">${num(s.attempt)}</td>
      <td class="num st-region">${num(s.region)}</td><td class="st-tm">${s["taskmanager-id"] || "–"}</td>
      <td class="hide-narrow"><code>${s.endpoint}</code></td><td class="hide-narrow">${fmtTime(s["start-time"])}</td>
      <td class="num hide-narrow">${fmtDur(s.duration)}</td></tr>`)}
    </tbody></table>
    <div class="legend"><span>A region is the set of subtasks that restart together when one of them fails.</span></div>`;
}
