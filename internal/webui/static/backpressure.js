// Back-pressure: a vertex's level, what its subtasks reported, and the
// table of how each subtask spends its time.

import { fmtRate, fmtTime, pct } from "./format.js";
import { html } from "./html.js";

// level is a vertex's back-pressure level, "none" without a report.
export const level = (bp) => (bp && bp.status === "ok" ? bp["backpressure-level"] || bp.backpressureLevel || "none" : "none");
export const levelBadge = (bp) => html`<span class="badge bp-badge bp-${level(bp)}">${level(bp) === "none" ? "no data" : level(bp)}</span>`;

// vertexLoad sums up what the subtasks reported: the highest shares (the
// bottleneck subtask decides) and the job details' records per second.
export function vertexLoad(v, bp) {
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

// subtaskLoadTable shows how each subtask of v spends its time: a stacked
// bar of busy, idle and back-pressured, as in Flink's back-pressure tab.
export function subtaskLoadTable(v, bp) {
  const subs = bp?.status === "ok" ? bp.subtasks || [] : [];
  if (!subs.length) return html`<p class="muted">No subtask of ${v.name} reported its load yet; the TaskManagers report running subtasks with every heartbeat.</p>`;
  const bar = (s) => {
    const w = (r) => Math.max(0, Math.min(100, r * 100));
    const busy = w(s.busyRatio), idle = w(s.idleRatio), back = w(s.ratio);
    return html`<svg class="load-bar" width="120" height="12" viewBox="0 0 100 12" preserveAspectRatio="none" aria-hidden="true">
      <rect class="lb-busy" x="0" width="${busy}" height="12"/><rect class="lb-idle" x="${busy}" width="${idle}" height="12"/>
      <rect class="lb-bp" x="${busy + idle}" width="${back}" height="12"/></svg>`;
  };
  return html`<table id="bp-table" data-vertex="${v.name}"><thead><tr><th class="num">Subtask</th><th>Level</th><th class="num">Back-pressured</th><th class="num">Idle</th><th class="num">Busy</th><th class="hide-narrow"></th><th class="num">In/s</th><th class="num">Out/s</th></tr></thead><tbody>
    ${subs.map((s) => html`<tr class="bp-row bp-${s["backpressure-level"]}" data-subtask="${s.subtask}" data-level="${s["backpressure-level"]}">
      <td class="num">${s.subtask}</td><td>${levelBadge({ status: "ok", "backpressure-level": s["backpressure-level"] })}</td>
      <td class="num">${pct(s.ratio)}</td><td class="num">${pct(s.idleRatio)}</td><td class="num">${pct(s.busyRatio)}</td>
      <td class="hide-narrow">${bar(s)}</td>
      <td class="num">${fmtRate(s.numRecordsInPerSecond)}</td><td class="num">${fmtRate(s.numRecordsOutPerSecond)}</td></tr>`)}
    </tbody></table>
    <div class="legend"><span><i class="lb-busy"></i>busy</span><span><i class="lb-idle"></i>idle (waiting for input)</span><span><i class="lb-bp"></i>back-pressured (waiting for room downstream)</span>
    <span>over the last heartbeat interval, measured ${fmtTime(bp["end-timestamp"])}</span></div>`;
}
