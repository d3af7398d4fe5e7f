// A job's autoscaler (GET /jobs/{id}/autoscaler): the figures behind its
// latest evaluation, vertex by vertex, and its decisions, newest first,
// each with its reason.

import { fmtRate, fmtTime } from "./format.js";
import { html } from "./html.js";

const pct = (u) => (u > 0 ? `${(100 * u).toFixed(0)}%` : "–");

// autoscalerPanel renders the answer x, {error} when it could not be read,
// or null while it loads.
export function autoscalerPanel(x) {
  if (!x) return html`<p class="muted">Loading…</p>`;
  if (x.error) return html`<p class="err">The autoscaler is not available: ${x.error}</p>`;
  if (!x.enabled) {
    return html`<p class="muted" id="autoscaler-off">The autoscaler is off for this job: the job spec's <code>autoscaler: {enabled: true}</code> turns it on.</p>`;
  }
  const history = (x.history || []).slice().reverse();
  const latest = history.find((e) => (e.vertices || []).length);
  const c = x.config || {};
  return html`<p class="muted" id="autoscaler-config">Target utilization ${pct(c["target-utilization"])} ± ${pct(c["utilization-boundary"])};
      decides every ${c.interval} over ${c["metrics-window"]}; scale-down after ${c["scale-down-delay"]}; at most ${c["max-rescales-per-hour"]} rescales an hour.</p>
    ${latest ? html`<table id="autoscaler-vertices"><thead><tr><th>Vertex</th><th>Parallelism</th><th>Busy</th><th>True rate</th>
        <th>Target rate</th><th>Catch-up</th><th>Backlog</th><th>Utilization</th><th>Recommended</th></tr></thead><tbody>
      ${latest.vertices.map((v) => html`<tr><td>${v.vertex}</td><td>${v.parallelism}</td><td>${(v["busy-ms-per-second"] / 10).toFixed(0)}%</td>
        <td>${fmtRate(v["true-processing-rate"])}/s</td><td>${fmtRate(v["target-rate"])}/s</td><td>${fmtRate(v["catch-up-rate"])}/s</td>
        <td>${v["pending-records"] >= 0 ? fmtRate(v["pending-records"]) : "–"}</td><td>${pct(v.utilization)}</td>
        <td title="${v.reason}">${v.chosen !== v.parallelism ? html`<b>${v.chosen}</b>` : v.recommended}</td></tr>`)}
      </tbody></table>` : ""}
    <table id="autoscaler-history"><thead><tr><th>Time</th><th>Decision</th><th>Reason</th></tr></thead><tbody>
      ${history.slice(0, 20).map((e) => html`<tr class="as-entry as-${e.kind}"><td>${fmtTime(e.time)}${e.repeats ? html`<br><span class="muted">×${e.repeats + 1} to ${fmtTime(e.last)}</span>` : ""}</td>
        <td>${e.kind}</td><td>${e.reason}</td></tr>`)}
    </tbody></table>`;
}
