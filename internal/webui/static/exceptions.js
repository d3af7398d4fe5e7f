// A job's exceptions (GET /jobs/{id}/exceptions, exceptionHistory), newest
// first: when, in which task, on which TaskManager, what the failure
// restarted (Weir's regions and full-restart) and its cause.

import { fmtTime } from "./format.js";
import { html } from "./html.js";

// restartText says what a failure restarted.
export function restartText(e) {
  if (e["full-restart"]) return "whole job";
  const rs = e.regions || [];
  if (!rs.length) return "not restarted";
  return `${rs.length === 1 ? "region" : "regions"} ${rs.join(", ")}`;
}

const isoTime = (ms) => {
  const d = new Date(ms);
  return ms > 0 && !isNaN(d) ? d.toISOString() : "";
};

// exceptionsList renders the answer x of /jobs/{id}/exceptions, {error}
// when it could not be read, or null while it loads.
export function exceptionsList(x) {
  if (!x) return html`<p class="muted">Loading…</p>`;
  if (x.error) return html`<p class="err">The exceptions are not available: ${x.error}</p>`;
  const hist = x.exceptionHistory || {};
  const entries = (hist.entries || []).slice().sort((a, b) => (b.timestamp || 0) - (a.timestamp || 0));
  if (!entries.length) return html`<p class="muted" id="exceptions-empty">No exceptions</p>`;
  const tm = (e) => {
    if (!e.taskManagerId && !e.endpoint) return html`<span class="muted">–</span>`;
    return html`${e.taskManagerId || ""}${e.endpoint ? html` <code>${e.endpoint}</code>` : ""}`;
  };
  return html`<table id="exceptions-table"><thead><tr><th>Time</th><th>Task</th><th>TaskManager</th><th>Restarted</th></tr></thead>
    ${entries.map((e) => html`<tbody class="exc-entry" data-restart="${restartText(e)}">
      <tr class="exc-row"><td class="exc-time" title="${isoTime(e.timestamp)}">${fmtTime(e.timestamp)}</td>
        <td class="exc-task">${e.taskName || "–"}</td><td class="exc-tm">${tm(e)}</td>
        <td class="exc-restart">${restartText(e)}</td></tr>
      <tr class="exc-cause-row"><td colspan="4"><pre class="exc-cause">${e.stacktrace || e.exceptionName || ""}</pre></td></tr></tbody>`)}
    </table>
    ${hist.truncated ? html`<p class="muted" id="exceptions-truncated">The newest ${entries.length} exceptions are shown; older ones are left out.</p>` : ""}`;
}
