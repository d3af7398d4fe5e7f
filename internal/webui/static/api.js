// The REST API: JSON in, JSON out, errors as exceptions with the server's
// message. A JobManager started with --auth-token-file wants a bearer
// token: the dashboard asks for one when the API answers 401 and keeps it
// for the browser tab (sessionStorage), never in the page's address.

const TOKEN_KEY = "weir-token";

// tokenGiven runs when the user gave a token: the poller refreshes the
// view at once (poll.js sets it).
let tokenGiven = () => {};
export function onToken(f) { tokenGiven = f; }

export async function api(path, opts = {}) {
  const init = { method: opts.method || "GET", headers: { Accept: "application/json" } };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) init.headers.Authorization = `Bearer ${token}`;
  const r = await fetch(path, init);
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = text; }
  if (!r.ok) {
    const msg = body && body.errors ? body.errors.join("; ") : text || r.statusText;
    if (r.status === 401) askToken(token ? "The token was refused." : "This JobManager needs a token.");
    throw new Error(`${init.method} ${path}: ${r.status} ${msg}`);
  }
  return body;
}

// askToken shows the token form in the header, once.
function askToken(why) {
  if (document.getElementById("token-form")) return;
  const form = document.createElement("form");
  form.id = "token-form";
  form.className = "token-form";
  const label = document.createElement("label");
  label.textContent = `${why} Token: `;
  const input = document.createElement("input");
  input.type = "password";
  input.name = "token";
  input.autocomplete = "off";
  input.required = true;
  label.append(input);
  const button = document.createElement("button");
  button.type = "submit";
  button.textContent = "Use token";
  form.append(label, button);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    form.remove();
    tokenGiven();
  });
  document.querySelector("header.top").append(form);
  input.focus();
}

// awaitOperation polls an asynchronous operation (a triggered checkpoint or
// savepoint) until it completes and answers its result.
export async function awaitOperation(path) {
  for (let i = 0; i < 600; i++) {
    const r = await api(path);
    if (r.status?.id === "COMPLETED") return r.operation || {};
    await new Promise((res) => setTimeout(res, 500));
  }
  throw new Error("timed out waiting for the operation");
}
