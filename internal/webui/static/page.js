// The page's fixed parts: the main area the views draw in and the
// breadcrumbs.

import { html, setHTML } from "./html.js";

export const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");

export const setCrumbs = (h) => setHTML(crumbs, h);

// jobCrumbs leads to a job; extra (text or markup) names the page below it.
export function jobCrumbs(jid, name, extra) {
  const base = html`<a href="#/">Overview</a>› <a href="#/jobs/${jid}">${name || jid}</a>`;
  setCrumbs(extra ? html`${base}› <span>${extra}</span>` : base);
}
