// A job's actions: trigger a checkpoint or a savepoint, stop with a
// savepoint, cancel. Each asks for confirmation; results are set as text.

import { api, awaitOperation } from "./api.js";
import { html } from "./html.js";
import { refreshNow } from "./poll.js";

export function actionsPanel() {
  return html`<section class="panel" id="actions"><h2>Actions</h2>
    <div class="actions">
      <button id="btn-checkpoint" data-needs-running>Trigger checkpoint</button>
      <input id="savepoint-dir" placeholder="savepoint directory (empty: the JobManager's default)" aria-label="savepoint directory">
      <button id="btn-savepoint" data-needs-running>Trigger savepoint</button>
      <button id="btn-stop" data-needs-running>Stop with savepoint</button>
      <button id="btn-cancel" class="danger" data-needs-running>Cancel job</button>
    </div>
    <div id="action-result" role="status" class="muted"></div></section>`;
}

export function wireActions(jid) {
  const enc = encodeURIComponent(jid);
  const out = document.getElementById("action-result");
  const dir = document.getElementById("savepoint-dir");
  const show = (cls, msg) => { out.className = cls; out.textContent = msg; };
  const cause = (op) => op.failureCause || op["failure-cause"];
  const run = async (question, what, fn) => {
    if (!confirm(question)) return;
    show("muted", `${what}…`);
    try {
      show("ok", await fn());
    } catch (e) {
      show("bad", `${what} failed: ${e.message}`);
    }
    refreshNow();
  };
  const target = () => dir.value.trim() || null;
  document.getElementById("btn-checkpoint").onclick = () => run("Trigger a checkpoint of this job?", "Checkpoint", async () => {
    const t = await api(`/jobs/${enc}/checkpoints`, { method: "POST", body: {} });
    const op = await awaitOperation(`/jobs/${enc}/checkpoints/${encodeURIComponent(t["request-id"])}`);
    if (cause(op)) throw new Error(cause(op).class + ": " + cause(op)["stack-trace"]);
    return `Checkpoint ${op.checkpointId} completed.`;
  });
  document.getElementById("btn-savepoint").onclick = () => run(`Trigger a savepoint${target() ? ` into ${target()}` : ""}?`, "Savepoint", async () => {
    const t = await api(`/jobs/${enc}/savepoints`, { method: "POST", body: { "target-directory": target(), "cancel-job": false } });
    const op = await awaitOperation(`/jobs/${enc}/savepoints/${encodeURIComponent(t["request-id"])}`);
    if (cause(op)) throw new Error(cause(op)["stack-trace"] || cause(op).class);
    return `Savepoint completed: ${op.location}`;
  });
  document.getElementById("btn-stop").onclick = () => run(`Stop the job with a savepoint${target() ? ` into ${target()}` : ""}?`, "Stop", async () => {
    const t = await api(`/jobs/${enc}/stop`, { method: "POST", body: { targetDirectory: target(), drain: false } });
    const op = await awaitOperation(`/jobs/${enc}/savepoints/${encodeURIComponent(t["request-id"])}`);
    if (cause(op)) throw new Error(cause(op)["stack-trace"] || cause(op).class);
    return `Job stopped; savepoint at ${op.location}`;
  });
  document.getElementById("btn-cancel").onclick = () => run("Cancel this job? Its tasks stop without a savepoint.", "Cancel", async () => {
    await api(`/jobs/${enc}?mode=cancel`, { method: "PATCH" });
    return "Cancellation requested.";
  });
}
