// A job's overview tab: a SQL job's statement; the graph coloured by
// back-pressure, and for the vertex clicked its back-pressure, event time
// and subtasks; the vertices table; the autoscaler; the job's exceptions.

import { api } from "./api.js";
import { autoscalerPanel } from "./autoscaler.js";
import { levelBadge, subtaskLoadTable } from "./backpressure.js";
import { exceptionsList } from "./exceptions.js";
import { jobGraph } from "./graph.js";
import { html, replaceHTML, setHTML, setText } from "./html.js";
import { subtasksTable } from "./subtasks.js";
import { verticesTable } from "./vertices.js";
import { watermarkDetails } from "./watermarks.js";

// jobOverviewTab draws the tab's skeleton into body and answers its
// refresher, called with the job's details at every poll.
export function jobOverviewTab(jid, body) {
  const enc = encodeURIComponent(jid);
  replaceHTML(body, html`
    <section class="panel" id="sql-panel" hidden><h2>SQL</h2><pre id="job-sql"></pre></section>
    <section class="panel"><h2>Job graph</h2><div class="scroll" id="job-graph"></div>
      <div class="legend" id="bp-legend"><span>Back-pressure (the most back-pressured subtask):</span>
        <span><i class="sw bp-ok"></i>ok ≤ 10%</span><span><i class="sw bp-low"></i>low ≤ 50%</span>
        <span><i class="sw bp-high"></i>high &gt; 50%</span><span><i class="sw bp-none"></i>not reported</span>
        <span>· click a vertex for its subtasks</span></div></section>
    <section class="panel" id="bp-panel"><h2 id="bp-title">Back-pressure</h2><div class="scroll" id="bp-subtasks"></div></section>
    <section class="panel" id="wm-panel"><h2 id="wm-title">Event time</h2><div class="scroll" id="wm-body"></div></section>
    <section class="panel" id="st-panel"><h2 id="st-title">Subtasks</h2><div class="scroll" id="st-body"></div></section>
    <section class="panel"><h2>Vertices</h2><div class="scroll" id="job-vertices"></div></section>
    <section class="panel" id="autoscaler-panel"><h2>Autoscaler</h2><div class="scroll" id="autoscaler"></div></section>
    <section class="panel" id="exceptions-panel"><h2>Exceptions</h2><div class="scroll" id="exceptions"></div></section>`);
  const $ = (id) => body.querySelector(`#${id}`);
  // The tab keeps the last answers, so a click redraws at once instead of
  // waiting for the next poll.
  let selected = null; // vertex id whose subtasks are shown
  let last = null; // {job, bps, wms, exceptions, autoscaler}
  let details = null; // {vid, info}: the subtasks of a vertex
  const vertexDetails = (vid) => api(`/jobs/${enc}/vertices/${encodeURIComponent(vid)}`).catch((e) => ({ error: e.message }));
  const draw = () => {
    if (!last) return;
    const { job, bps, wms, exceptions, autoscaler } = last;
    if (selected && !(job.vertices || []).some((v) => v.id === selected)) selected = null;
    $("sql-panel").hidden = !job.sql;
    setText($("job-sql"), job.sql);
    setHTML($("job-graph"), jobGraph(job, bps, selected));
    setHTML($("job-vertices"), verticesTable(job, bps, selected, wms));
    const v = (job.vertices || []).find((x) => x.id === selected);
    setHTML($("bp-title"), v ? html`Back-pressure of ${v.name} ${levelBadge(bps.get(v.id))}` : html`Back-pressure`);
    setHTML($("bp-subtasks"), v ? subtaskLoadTable(v, bps.get(v.id))
      : html`<p class="muted" id="bp-hint">Click a vertex in the graph or the table to see how busy, idle and back-pressured each of its subtasks is.</p>`);
    setHTML($("wm-title"), v ? html`Event time of ${v.name}` : html`Event time`);
    setHTML($("wm-body"), v ? watermarkDetails(wms.get(v.id))
      : html`<p class="muted" id="wm-hint">Click a vertex to see its watermark and what holds it back: why its windows do not fire.</p>`);
    setHTML($("st-title"), v ? html`Subtasks of ${v.name}` : html`Subtasks`);
    setHTML($("st-body"), v ? subtasksTable(v, details?.vid === v.id ? details.info : null)
      : html`<p class="muted" id="st-hint">Click a vertex to see where each of its subtasks runs, its attempt and its region: the subtasks that restart together.</p>`);
    setHTML($("autoscaler"), autoscalerPanel(autoscaler));
    setHTML($("exceptions"), exceptionsList(exceptions));
  };
  const pick = async (e) => {
    const el = e.target.closest("[data-vid]");
    if (!el || (e.type === "keydown" && e.key !== "Enter" && e.key !== " ")) return;
    e.preventDefault();
    selected = el.dataset.vid === selected ? null : el.dataset.vid;
    draw();
    const vid = selected;
    if (vid && details?.vid !== vid) {
      const info = await vertexDetails(vid);
      if (vid === selected) {
        details = { vid, info };
        draw();
      }
    }
  };
  body.addEventListener("click", pick);
  body.addEventListener("keydown", pick);
  return async (job) => {
    // Flink's dashboard asks each vertex for its back-pressure; so does this one.
    const vs = job.vertices || [];
    const vid = selected;
    const [answers, wm, exceptions, autoscaler, info] = await Promise.all([
      Promise.all(vs.map((v) => api(`/jobs/${enc}/vertices/${encodeURIComponent(v.id)}/backpressure`).catch(() => null))),
      api(`/jobs/${enc}/watermarks`).catch(() => null),
      api(`/jobs/${enc}/exceptions`).catch((e) => ({ error: e.message })),
      api(`/jobs/${enc}/autoscaler`).catch((e) => ({ error: e.message })),
      vid ? vertexDetails(vid) : null,
    ]);
    if (vid) details = { vid, info };
    last = { job, bps: new Map(vs.map((v, i) => [v.id, answers[i]])), wms: new Map((wm?.vertices || []).map((w) => [w.id, w])), exceptions, autoscaler };
    draw();
  };
}
