// A job's page: its head (name, state, uptime, restarts, failure), the
// tabs, and the actions. The tab's own module draws the body.

import { actionsPanel, wireActions } from "./actions.js";
import { api } from "./api.js";
import { checkpointsTab } from "./checkpoints.js";
import { badge, fmtDur, fmtTime, num } from "./format.js";
import { html, replaceHTML, setHTML } from "./html.js";
import { jobOverviewTab } from "./joboverview.js";
import { jobCrumbs, main } from "./page.js";

export function jobView(jid, tab) {
  const enc = encodeURIComponent(jid);
  replaceHTML(main, html`
    <div class="jobhead" id="job-head"></div>
    <nav class="tabs">
      <a href="#/jobs/${jid}" class="${tab === "overview" ? "active" : ""}" id="tab-overview">Overview</a>
      <a href="#/jobs/${jid}/checkpoints" class="${tab === "checkpoints" ? "active" : ""}" id="tab-checkpoints">Checkpoints</a>
    </nav>
    <div id="tab-body"></div>
    ${actionsPanel()}`);
  wireActions(jid);
  const head = document.getElementById("job-head");
  const body = document.getElementById("tab-body");
  const refreshTab = tab === "checkpoints" ? checkpointsTab(jid, body) : jobOverviewTab(jid, body);
  return {
    async refresh() {
      const job = await api(`/jobs/${enc}`);
      jobCrumbs(jid, job.name, tab === "checkpoints" ? "Checkpoints" : "");
      document.title = `${job.name} · Weir`;
      setHTML(head, html`<h1>${job.name}</h1>${badge(job.state)}
        <span class="muted">uptime ${fmtDur(job.duration)}</span>
        <span class="muted">restarts <b id="job-restarts">${num(job.restarts)}</b></span>
        <span class="muted">started ${fmtTime(job["start-time"])}</span>
        <code class="muted">${job.jid}</code>
        ${job.failure_cause ? html`<div class="err">${job.failure_cause}</div>` : ""}`);
      const running = job.state === "RUNNING";
      for (const b of document.querySelectorAll("[data-needs-running]")) b.disabled = !running;
      return refreshTab(job);
    },
  };
}
