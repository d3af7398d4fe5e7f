// The job graph: the plan laid out in columns by depth (sources left),
// edges as curves labelled with the partitioner. Each box is coloured by
// the vertex's back-pressure level and shows its throughput.

import { level, vertexLoad } from "./backpressure.js";
import { fmtRate, num, pct } from "./format.js";
import { html } from "./html.js";

export function jobGraph(job, bps, selected) {
  const nodes = job.plan?.nodes || [];
  if (!nodes.length) return html`<p class="muted">No plan.</p>`;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const vert = new Map((job.vertices || []).map((v) => [v.id, v]));
  const depth = new Map();
  const dep = (n, seen = new Set()) => {
    if (depth.has(n.id)) return depth.get(n.id);
    if (seen.has(n.id)) return 0;
    seen.add(n.id);
    let d = 0;
    for (const i of n.inputs || []) if (byId.has(i.id)) d = Math.max(d, dep(byId.get(i.id), seen) + 1);
    depth.set(n.id, d);
    return d;
  };
  nodes.forEach((n) => dep(n));
  const cols = [];
  nodes.forEach((n) => (cols[depth.get(n.id)] ||= []).push(n));
  const W = 210, H = 88, GX = 100, GY = 30, PAD = 20;
  const fed = new Set(nodes.flatMap((n) => (n.inputs || []).map((i) => i.id)));
  const pos = new Map();
  const rows = Math.max(...cols.map((c) => c.length));
  cols.forEach((c, ci) => c.forEach((n, ri) => {
    const off = ((rows - c.length) * (H + GY)) / 2;
    pos.set(n.id, { x: PAD + ci * (W + GX), y: PAD + off + ri * (H + GY) });
  }));
  const width = PAD * 2 + cols.length * W + (cols.length - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  const edges = [], boxes = [];
  for (const n of nodes) {
    const to = pos.get(n.id);
    for (const i of n.inputs || []) {
      const from = pos.get(i.id);
      if (!from) continue;
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x - 4, y2 = to.y + H / 2;
      const mx = (x1 + x2) / 2;
      edges.push(html`<g class="g-edge" data-from="${i.id}" data-to="${n.id}"><path d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}" marker-end="url(#arrow)"/>
        <text x="${mx}" y="${(y1 + y2) / 2 - 6}" text-anchor="middle">${i.ship_strategy}</text></g>`);
    }
    const v = vert.get(n.id) || {};
    const name = v.name || n.description || n.id;
    const bp = bps.get(n.id);
    const lv = level(bp);
    const l = vertexLoad(v, bp);
    // A source reads nothing and a sink writes nothing; their one rate says it all.
    const rates = [(n.inputs || []).length ? `in ${fmtRate(l.in)}/s` : "", fed.has(n.id) ? `out ${fmtRate(l.out)}/s` : ""].filter(Boolean);
    const io = l.reported && rates.length ? rates.join(" · ") : (n.operator || "");
    const load = l.bp == null ? "" : `back-pressured ${pct(l.bp)} · busy ${pct(l.busy)}`;
    boxes.push(html`<g class="g-vertex s-${v.status} bp-${lv}${n.id === selected ? " selected" : ""}" data-vertex="${name}" data-vid="${n.id}" data-bp="${lv}" transform="translate(${to.x},${to.y})" tabindex="0" role="button" aria-label="${name}: back-pressure ${lv}">
      <title>${name}: ${n.operator} ×${n.parallelism} (${v.status}), back-pressure ${lv === "none" ? "not reported" : lv}${n.description && n.description !== name ? "\n" + n.description : ""}</title>
      <rect width="${W}" height="${H}" rx="8"/>
      <text x="12" y="22" font-weight="600">${name.length > 20 ? name.slice(0, 19) + "…" : name}</text>
      <text x="${W - 10}" y="22" text-anchor="end" class="bp-tag">${lv === "none" ? "" : lv}</text>
      <text x="12" y="41" class="muted">parallelism ${num(n.parallelism)} · ${v.status || ""}</text>
      <text x="12" y="59" class="g-io">${io}</text>
      <text x="12" y="77" class="muted g-load">${load}</text></g>`);
  }
  return html`<svg id="job-graph-svg" viewBox="0 0 ${width} ${height}" width="${width}" role="group" aria-label="job graph">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>
    ${edges}${boxes}</svg>`;
}
