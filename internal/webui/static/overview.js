// The overview: the cluster's counts, the jobs and the TaskManagers.

import { api } from "./api.js";
import { badge, fmtDur, fmtTime, num } from "./format.js";
import { html, replaceHTML, setHTML } from "./html.js";
import { main, setCrumbs } from "./page.js";

export function overviewView() {
  setCrumbs(html`<span>Overview</span>`);
  replaceHTML(main, html`
    <div class="cards" id="ov-cards"></div>
    <section class="panel"><h2>Jobs</h2><div class="scroll" id="ov-jobs"></div></section>
    <section class="panel"><h2>TaskManagers</h2><div class="scroll" id="ov-tms"></div></section>`);
  const cards = document.getElementById("ov-cards");
  const jobsEl = document.getElementById("ov-jobs");
  const tmsEl = document.getElementById("ov-tms");
  return {
    async refresh() {
      const [ov, tms, jobs] = await Promise.all([api("/overview"), api("/taskmanagers"), api("/jobs/overview")]);
      setHTML(cards, html`${[
        ["TaskManagers", ov.taskmanagers], ["Slots total", ov["slots-total"]], ["Slots free", ov["slots-available"]],
        ["Running", ov["jobs-running"]], ["Finished", ov["jobs-finished"]], ["Cancelled", ov["jobs-cancelled"]], ["Failed", ov["jobs-failed"]],
      ].map(([k, v]) => html`<div class="card"><b>${num(v)}</b><span>${k}</span></div>`)}`);

      const list = (jobs.jobs || []).slice().sort((a, b) => b["start-time"] - a["start-time"]);
      // Restarts are only in the job details; fetch them for the newest jobs.
      const details = await Promise.all(list.slice(0, 25).map((j) => api(`/jobs/${encodeURIComponent(j.jid)}`).catch(() => null)));
      const restarts = new Map(details.filter(Boolean).map((d) => [d.jid, d.restarts]));
      setHTML(jobsEl, list.length === 0 ? html`<p class="muted">No jobs yet. Submit one with <code>weir job submit -f spec.yaml</code>.</p>` : html`
        <table id="jobs-table"><thead><tr><th>Name</th><th>State</th><th class="hide-narrow">Started</th><th class="num">Uptime</th><th class="num">Restarts</th><th class="num hide-narrow">Tasks</th><th class="hide-narrow">Job ID</th></tr></thead><tbody>
        ${list.map((j) => html`<tr class="job-row" data-jid="${j.jid}">
          <td><a href="#/jobs/${j.jid}">${j.name}</a></td><td>${badge(j.state)}</td>
          <td class="hide-narrow">${fmtTime(j["start-time"])}</td><td class="num">${fmtDur(j.duration)}</td>
          <td class="num">${restarts.has(j.jid) ? num(restarts.get(j.jid)) : "–"}</td>
          <td class="num hide-narrow">${num(j.tasks?.running)}/${num(j.tasks?.total)}</td>
          <td class="hide-narrow muted"><code>${j.jid}</code></td></tr>`)}
        </tbody></table>`);

      const now = Date.now();
      const tmList = (tms.taskmanagers || []).slice().sort((a, b) => a.id.localeCompare(b.id));
      setHTML(tmsEl, tmList.length === 0 ? html`<p class="muted">No TaskManager registered.</p>` : html`
        <table id="tms-table"><thead><tr><th>ID</th><th>Address</th><th class="num">Slots free / total</th><th>Last heartbeat</th><th class="hide-narrow">Metrics</th></tr></thead><tbody>
        ${tmList.map((t) => {
          const ago = Math.max(0, Math.round((now - t.timeSinceLastHeartbeat) / 1000));
          return html`<tr class="tm-row" data-tm="${t.id}"><td>${t.id}</td><td><code>${t.path}</code></td>
          <td class="num">${num(t.freeSlots)} / ${num(t.slotsNumber)}</td>
          <td title="${new Date(t.timeSinceLastHeartbeat).toISOString()}">${ago < 2 ? "just now" : `${ago} s ago`}</td>
          <td class="hide-narrow">${t.httpAddress ? html`<code>${t.httpAddress}/metrics</code>` : "–"}</td></tr>`;
        })}</tbody></table>`);
    },
  };
}
