// Event time: watermarks, and what holds a vertex's watermark back.

import { num } from "./format.js";
import { html } from "./html.js";

// Watermarks are Unix ms of event time; null: none yet; the int64 maximum:
// the end of event time.
export function fmtWatermark(ms, idle) {
  if (idle) return html`<span class="badge">idle</span>`;
  if (ms == null) return html`<span class="muted">none</span>`;
  if (ms >= 9.2e18) return html`<span class="muted">end</span>`;
  const d = new Date(ms);
  return html`${d.toISOString().slice(11, 23)}`;
}

// watermarkDetails answers "why does my window not fire" for one vertex:
// the sentence from the REST API, then per subtask its watermarks, the
// channel (or split) holding it back and what is idle.
export function watermarkDetails(w) {
  if (!w) return html`<p class="muted">No event time reported.</p>`;
  const ch = (s) => [
    ...(s.channels || []).map((c) => html`<span class="wm-ch${c.holding ? " holding" : ""}${c.idle ? " idle" : ""}" title="${c.holding ? "holding the watermark back" : c.idle ? "idle" : ""}">${c.vertex}[${c.subtask}] ${fmtWatermark(c.watermark, c.idle)}</span>`),
    ...(s.splits || []).map((p) => html`<span class="wm-ch${p.holding ? " holding" : ""}${p.idle ? " idle" : ""}">split ${p.id} ${fmtWatermark(p.watermark, p.idle)}</span>`),
  ].flatMap((x, i) => (i ? [html` `, x] : [x]));
  return html`<p id="wm-explanation" class="${w.idle ? "muted" : ""}">${w.explanation}</p>
    <table id="wm-table"><thead><tr><th class="num">Subtask</th><th>Input watermark</th><th>Output watermark</th><th class="num">Timers</th><th class="num">Late dropped</th><th>Inputs (holding back in bold)</th></tr></thead><tbody>
    ${(w.subtasks || []).map((s) => html`<tr data-subtask="${s.subtask}"><td class="num">${s.subtask}</td><td>${fmtWatermark(s.input_watermark, s.idle)}</td><td>${fmtWatermark(s.output_watermark)}</td>
      <td class="num">${num(s.timers)}</td><td class="num">${num(s.late_records_dropped)}</td><td>${ch(s)}</td></tr>`)}
    </tbody></table>`;
}
