// Formatting of sizes, durations, times, rates and states. The functions
// return text (escaped where it is interpolated), except badge, which
// returns markup.

import { html } from "./html.js";

export function fmtBytes(n) {
  if (n == null || n < 0) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(n < 10 ? 1 : 0) : n} ${u[i]}`;
}

export function fmtDur(ms) {
  if (ms == null || ms < 0) return "–";
  if (ms < 10 && ms !== Math.round(ms)) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (d) return `${d}d ${h % 24}h`;
  if (h) return `${h}h ${m % 60}m`;
  return `${m}m ${Math.floor(s % 60)}s`;
}

export function fmtTime(ms) {
  if (!ms || ms <= 0) return "–";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

export function fmtRate(n) {
  if (n == null || !isFinite(n)) return "–";
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(0)}k`;
  if (n >= 100) return Math.round(n).toLocaleString();
  return n.toFixed(n < 10 ? 1 : 0);
}

export const num = (n) => (n == null ? "–" : Number(n).toLocaleString());
export const pct = (r) => (r == null ? "–" : `${Math.round(r * 100)}%`);
export const shorten = (s, n) => (!s ? "" : s.length > n ? s.slice(0, n - 1) + "…" : s);

export const badge = (s) => html`<span class="badge s-${s}">${s}</span>`;
