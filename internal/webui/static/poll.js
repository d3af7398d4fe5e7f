// The polling loop: the view shown refreshes every POLL_MS, one refresh at
// a time, and the status line says when it last did or why it failed.

import { onToken } from "./api.js";

const POLL_MS = 2000;
const statusEl = document.getElementById("status");

let view = null; // {refresh(): Promise}
let timer = null;
let inflight = false;

// refreshNow refreshes the view at once instead of at the next poll.
export async function refreshNow() {
  clearTimeout(timer);
  if (!inflight && view) {
    inflight = true;
    const v = view;
    try {
      await v.refresh();
      if (v === view) {
        statusEl.textContent = `updated ${new Date().toLocaleTimeString()}`;
        statusEl.classList.remove("err");
      }
    } catch (e) {
      statusEl.textContent = `refresh failed: ${e.message}`;
      statusEl.classList.add("err");
    } finally {
      inflight = false;
    }
  }
  timer = setTimeout(refreshNow, POLL_MS);
}

// show makes v the view that polls, and refreshes it.
export function show(v) {
  view = v;
  inflight = false;
  refreshNow();
}

// A token the user just gave is tried at once.
onToken(refreshNow);
