// Weir dashboard: a hash-routed single page reading the Flink-shaped REST
// API of the JobManager. No build step, no dependencies: the browser loads
// these ES modules as they are. Every view is a fixed skeleton of sections;
// polling rewrites a section only when its markup changed, so nothing
// flickers and inputs keep their state. Markup is built with the html tag
// of html.js, which escapes every value from the API.
//
// Modules: app.js routes; poll.js refreshes the view shown; api.js talks to
// the REST API; html.js escapes and renders; format.js formats numbers and
// times; page.js holds the page's fixed parts. Views: overview.js (jobs and
// TaskManagers), job.js (a job's frame: head, tabs, actions.js), its tabs
// joboverview.js (graph.js, backpressure.js, watermarks.js, subtasks.js,
// vertices.js, exceptions.js) and checkpoints.js, and checkpoint.js (one
// checkpoint's subtasks).

import { checkpointView } from "./checkpoint.js";
import { jobView } from "./job.js";
import { overviewView } from "./overview.js";
import { show } from "./poll.js";

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "jobs" && parts[1]) {
    if (parts[2] === "checkpoints" && parts[3]) return checkpointView(parts[1], parts[3]);
    if (parts[2] === "checkpoints") return jobView(parts[1], "checkpoints");
    return jobView(parts[1], "overview");
  }
  return overviewView();
}

const navigate = () => show(route());

window.addEventListener("hashchange", navigate);
navigate();
