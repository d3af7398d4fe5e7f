// Markup is built only with the html tag: every value interpolated into an
// html`…` template is escaped, unless it is itself markup made by html (an
// Html value, or an array of them). setHTML and replaceHTML accept only Html,
// so no string from the REST API reaches innerHTML unescaped: a job named
// <script>…</script> shows as text.

const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

// esc is the one escape function: text (or a number) to HTML, safe both
// between tags and inside a double- or single-quoted attribute.
export const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ENTITIES[c]);

// Html is markup known to be safe: made by the html tag from the app's own
// template text and escaped values.
class Html {
  constructor(s) { this.s = s; }
  toString() { return this.s; }
}

const part = (v) => (v instanceof Html ? v.s : Array.isArray(v) ? v.map(part).join("") : esc(v));

// html is the template tag: html`<td>${name}</td>` escapes name.
export function html(strings, ...values) {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += part(values[i]) + strings[i + 1];
  return new Html(out);
}

function checked(h) {
  if (!(h instanceof Html)) throw new TypeError("markup must be made with the html tag");
  return h.s;
}

// setHTML rewrites el only when its markup changed, so polling neither
// flickers nor resets what the user is doing in it.
export function setHTML(el, h) {
  const s = checked(h);
  if (el && el.__html !== s) {
    el.__html = s;
    el.innerHTML = s;
  }
}

// replaceHTML always rewrites el: for a view's skeleton, whose elements get
// fresh listeners.
export function replaceHTML(el, h) {
  const s = checked(h);
  el.__html = s;
  el.innerHTML = s;
}

// setText sets el's text (no markup at all).
export function setText(el, text) {
  const s = String(text ?? "");
  if (el && (el.__html !== undefined || el.textContent !== s)) {
    el.__html = undefined;
    el.textContent = s;
  }
}
