// The vertices table of a job: status, back-pressure, event time and
// throughput per vertex.

import { levelBadge, vertexLoad } from "./backpressure.js";
import { badge, fmtDur, fmtRate, num, pct } from "./format.js";
import { html } from "./html.js";
import { fmtWatermark } from "./watermarks.js";

function ioCell(m, key) {
  if (!m || !m[`${key}-complete`]) return html`<span class="muted" title="not reported by every subtask">n/a</span>`;
  return num(m[key]);
}

// descriptions are what a SQL job's vertices run: their plan nodes'
// descriptions, which for other vertices are only their names.
function descriptions(job) {
  const names = new Map((job.vertices || []).map((v) => [v.id, v.name]));
  return new Map((job.plan?.nodes || []).filter((n) => n.description && n.description !== names.get(n.id))
    .map((n) => [n.id, n.changelog_mode === "retract" ? `${n.description} · changelog: retract (-U/+U, -D)` : n.description]));
}

export function verticesTable(job, bps, selected, wms) {
  const desc = descriptions(job);
  return html`<table id="vertices-table"><thead><tr><th>Vertex</th><th class="num">Parallelism</th><th>Status</th><th>Back-pressure</th><th>Watermark</th><th class="num">Lag</th><th class="num">In/s</th><th class="num">Out/s</th><th class="num hide-narrow">Records in</th><th class="num hide-narrow">Records out</th><th class="num hide-narrow">Tasks running</th><th class="num hide-narrow">Duration</th></tr></thead><tbody>
    ${(job.vertices || []).map((v) => {
      const m = v.metrics || {};
      const l = vertexLoad(v, bps.get(v.id));
      return html`<tr class="vertex-row${v.id === selected ? " selected" : ""}" data-vid="${v.id}" data-vertex="${v.name}" tabindex="0">
        <td><span class="link">${v.name}</span>${desc.has(v.id) ? html`<div class="vertex-desc muted">${desc.get(v.id)}</div>` : ""}</td><td class="num">${num(v.parallelism)}</td><td>${badge(v.status)}</td>
        <td>${levelBadge(bps.get(v.id))} ${l.bp == null ? "" : html`<span class="muted">${pct(l.bp)}</span>`}</td>
        <td class="wm-cell">${fmtWatermark(wms.get(v.id)?.watermark, wms.get(v.id)?.idle)}</td><td class="num">${wms.get(v.id)?.lag_ms == null ? "–" : fmtDur(wms.get(v.id).lag_ms)}</td>
        <td class="num">${l.reported ? fmtRate(l.in) : "–"}</td><td class="num">${l.reported ? fmtRate(l.out) : "–"}</td>
        <td class="num hide-narrow">${ioCell(m, "read-records")}</td><td class="num hide-narrow">${ioCell(m, "write-records")}</td>
        <td class="num hide-narrow">${num(v.tasks?.RUNNING ?? 0)}/${num(v.parallelism)}</td><td class="num hide-narrow">${fmtDur(v.duration)}</td></tr>`;
    })}</tbody></table>`;
}
