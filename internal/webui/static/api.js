// The REST API: JSON in, JSON out, errors as exceptions with the server's
// message.

export async function api(path, opts = {}) {
  const init = { method: opts.method || "GET", headers: { Accept: "application/json" } };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = text; }
  if (!r.ok) {
    const msg = body && body.errors ? body.errors.join("; ") : text || r.statusText;
    throw new Error(`${init.method} ${path}: ${r.status} ${msg}`);
  }
  return body;
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
