// The gateway console: plain modules, no build step, no third-party code. Every figure comes from
// the admin API with the admin key as Bearer; the key lives in sessionStorage (this tab) only.
import { lineChart, barChart } from "/ui/static/charts.js";
import { h, fmt } from "/ui/static/dom.js";
import { playgroundPage } from "/ui/static/playground.js";

const KEY = "gateway-admin-key";
const view = document.getElementById("view");
let stopLive = null;

// -- the admin API -------------------------------------------------------------------------------
class Unauthorized extends Error {}

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}`, ...(options.headers || {}) };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { ...options, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  if (res.status === 401) throw new Unauthorized("the admin key was refused");
  const data = res.headers.get("content-type")?.includes("json") ? await res.json() : await res.text();
  if (!res.ok) {
    const err = new Error(data?.error?.message || `HTTP ${res.status}`);
    err.status = res.status;
    throw err;
  }
  return data;
}

// Server-sent events over fetch (EventSource cannot send an Authorization header).
function liveEvents(path, onEvent) {
  const ctl = new AbortController();
  (async () => {
    try {
      const res = await fetch(path, { headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` }, signal: ctl.signal });
      if (!res.ok || !res.body) return;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += value;
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const frame = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (data) onEvent(JSON.parse(data));
        }
      }
    } catch (err) {
      if (err.name !== "AbortError") console.warn("live updates stopped:", err.message);
    }
  })();
  return () => ctl.abort();
}

// -- pages ---------------------------------------------------------------------------------------
function stat(label, value, id) {
  return h("div", { class: "stat" }, h("span", { class: "stat-label" }, label), h("span", { class: "stat-value", "data-stat": id }, value));
}

async function overviewPage() {
  const stats = h("div", { class: "stats" });
  const charts = h("div", { class: "charts" });
  const table = h("div", { class: "table-wrap" });
  view.replaceChildren(h("h1", {}, "Overview"), h("p", { class: "muted", id: "live-note" }, "Last hour in this process, live."), stats, charts, h("h2", {}, "By provider and model"), table);
  const render = (o) => {
    stats.replaceChildren(
      stat("Requests/s (this minute)", o.rps_now.toFixed(2), "rps"),
      stat("Requests (hour)", fmt.n(o.requests), "requests"),
      stat("Error rate", fmt.pct(o.error_rate), "error_rate"),
      stat("TTFT p50", fmt.ms(o.ttft_p50), "ttft_p50"),
      stat("TTFT p95", fmt.ms(o.ttft_p95), "ttft_p95"),
      stat("Input cache hit rate", o.input_cache_hit_rate === null ? "–" : fmt.pct(o.input_cache_hit_rate), "input_cache_hit_rate"),
      stat("Response cache hits", fmt.n(o.response_cache_hits), "response_cache_hits"),
    );
    const xs = o.series.map((p) => p.minute);
    charts.replaceChildren(
      lineChart("Requests per second", xs, [{ name: "req/s", values: o.series.map((p) => p.rps) }], (v) => v.toFixed(2)),
      lineChart("Error rate", xs, [{ name: "errors", values: o.series.map((p) => p.error_rate), cls: "bad" }], (v) => fmt.pct(v)),
      lineChart("Time to first token", xs, [
        { name: "p50", values: o.series.map((p) => p.ttft_p50) },
        { name: "p95", values: o.series.map((p) => p.ttft_p95), cls: "alt" },
      ], fmt.ms),
      barChart("Tokens by model", o.by_model.map((r) => r.model), [
        { name: "input", values: o.by_model.map((r) => r.input_tokens) },
        { name: "output", values: o.by_model.map((r) => r.output_tokens), cls: "alt" },
      ], fmt.n),
    );
    table.replaceChildren(h("table", {},
      h("thead", {}, h("tr", {}, ["Provider", "Model", "Requests", "Input tokens", "Cached input", "Output tokens", "Cost"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, o.by_model.map((r) => h("tr", {}, h("td", {}, r.provider), h("td", {}, r.model), h("td", { class: "num" }, fmt.n(r.requests)),
        h("td", { class: "num" }, fmt.n(r.input_tokens)),
        h("td", { class: "num" }, r.input_cache_hit_rate === null ? "–" : `${fmt.n(r.cached_input_tokens)} (${fmt.pct(r.input_cache_hit_rate)})`),
        h("td", { class: "num" }, fmt.n(r.output_tokens)), h("td", { class: "num" }, fmt.usd(r.cost_usd))))),
    ));
    view.dataset.updated = String(o.now);
  };
  render(await api("/admin/console/overview"));
  stopLive = liveEvents("/admin/console/live?interval=2", render);
}

const COLUMNS = [
  ["Time", (r) => fmt.time(r.ts)], ["Key", (r) => r.key ?? "–"], ["Caller", (r) => r.dialect], ["Route", (r) => r.route ?? "–"],
  // an MCP tools/call (kind "mcp"): its server as the target, the tool as the model
  ["Target", (r) => (r.kind === "mcp" ? `mcp:${r.server ?? "–"}` : r.provider ? `${r.provider}/${r.upstream_model ?? ""}` : "–")], ["Model", (r) => (r.kind === "mcp" ? `tool ${r.tool ?? r.model ?? "–"}` : r.model ?? "–")],
  ["Status", (r) => (r.error_kind ? `${r.status} ${r.error_kind}` : r.status)], ["TTFT", (r) => fmt.ms(r.ttfb_ms)],
  ["Duration", (r) => fmt.ms(r.duration_ms)], ["Tokens in/out", (r) => `${fmt.n(r.input_tokens)} / ${fmt.n(r.output_tokens)}`],
  ["Cost", (r) => (r.cache === "hit" ? `cache hit (saved ${fmt.usd(r.cost_saved_usd)})` : fmt.usd(r.cost_usd))], ["Stop", (r) => r.stop_reason ?? "–"],
];

async function requestsPage(params) {
  const form = h("form", { class: "filters", role: "search" },
    ["key", "model"].map((f) => h("label", {}, f[0].toUpperCase() + f.slice(1), h("input", { name: f, value: params.get(f) || "", size: 14 }))),
    h("label", {}, "Status", h("select", { name: "status" }, [["", "any"], ["error", "errors"], ["200", "200"], ["400", "400"], ["401", "401"], ["429", "429"], ["502", "502"]]
      .map(([v, t]) => h("option", { value: v, selected: (params.get("status") || "") === v }, t)))),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams([...new FormData(form)].filter(([, v]) => v));
    location.hash = `#/requests?${q}`;
  });
  const captured = new Set((await api("/admin/inspector")).captures.map((c) => c.request_id));
  const q = new URLSearchParams([...params].filter(([k]) => ["key", "model", "status"].includes(k)));
  q.set("limit", "200");
  const { requests, source } = await api(`/admin/console/requests?${q}`);
  const rows = requests.map((r) => {
    const bad = r.status >= 400 || r.error_kind;
    const open = () => { location.hash = `#/inspector/${encodeURIComponent(r.request_id)}`; };
    const tr = h("tr", { class: bad ? "row-error" : "", tabindex: "0", "data-request-id": r.request_id, title: captured.has(r.request_id) ? "Open the captured wire" : "Not captured: open its record" },
      COLUMNS.map(([, f], i) => h(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, String(f(r)))));
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
    return tr;
  });
  view.replaceChildren(h("h1", {}, "Requests"), form,
    h("p", { class: "muted" }, `${requests.length} most recent ${source === "store" ? "in the store (every worker)" : "in this process"}. A row opens the request; captured ones show their wire.`),
    h("div", { class: "table-wrap" }, h("table", { class: "requests" },
      h("thead", {}, h("tr", {}, COLUMNS.map(([c]) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows))));
}

const PAGE = 400; // frames rendered at once; "more" renders the next page (long streams stay light)

// One socket read may bring several SSE frames: each frame gets its own row (with its read's offset).
function splitFrames(reads) {
  if (reads.length && reads[0].whole) return reads;
  const out = [];
  let rest = "";
  for (const r of reads) {
    const parts = (rest + r.data).split(/\r?\n\r?\n/);
    rest = parts.pop();
    for (const p of parts) if (p.trim()) out.push({ ms: r.ms, data: p });
  }
  if (rest.trim()) out.push({ ms: reads.at(-1).ms, data: rest });
  return out;
}

function frameList(title, reads, cls) {
  const frames = splitFrames(reads);
  const list = h("ol", { class: `frames ${cls}`, "aria-label": title });
  let shown = 0;
  const more = h("button", { type: "button", class: "more" }, "Show more frames");
  const next = () => {
    for (const f of frames.slice(shown, shown + PAGE)) list.append(h("li", {}, h("span", { class: "offset" }, `+${f.ms.toFixed(1)} ms`), h("pre", {}, f.data)));
    shown += PAGE;
    more.hidden = shown >= frames.length;
  };
  more.addEventListener("click", next);
  next();
  return h("div", { class: "side" }, h("h2", {}, `${title} (${frames.length})`), list, more);
}

function requestBlock(title, r) {
  if (!r) return h("div", { class: "side" }, h("h2", {}, title), h("p", { class: "muted" }, "none"));
  let body = r.body ?? "";
  try { body = JSON.stringify(JSON.parse(body), null, 2); } catch { /* not JSON: shown as sent */ }
  return h("div", { class: "side" }, h("h2", {}, title),
    h("p", { class: "mono" }, `${r.method || "POST"} ${r.path}${r.provider ? `  → ${r.provider} (${r.dialect}), HTTP ${r.status ?? "–"}` : ""}`),
    h("details", {}, h("summary", {}, "Headers"), h("pre", {}, JSON.stringify(r.headers || {}, null, 2))),
    h("pre", { class: "body" }, body));
}

async function inspectorPage(id) {
  if (!id) {
    const { capture, max_requests, captures } = await api("/admin/inspector");
    view.replaceChildren(h("h1", {}, "Inspector"),
      h("p", { class: "muted" }, `Capture: ${capture}, up to ${max_requests} requests kept in this process.`),
      captures.length ? h("ul", { class: "captures" }, captures.map((c) => h("li", { class: c.status >= 400 || c.error_kind ? "row-error" : "" },
        h("a", { href: `#/inspector/${encodeURIComponent(c.request_id)}` }, c.request_id), ` ${fmt.time(c.ts)} ${c.model ?? ""} → ${c.provider ?? "–"} ${c.status}${c.error_kind ? " " + c.error_kind : ""}`)))
        : h("p", {}, "No capture yet."));
    return;
  }
  let c;
  try {
    c = await api(`/admin/inspector/${encodeURIComponent(id)}`);
  } catch (err) {
    if (err.status !== 404) throw err;
    const rec = (await api(`/admin/console/requests?request_id=${encodeURIComponent(id)}&limit=1`)).requests[0];
    view.replaceChildren(h("h1", {}, `Request ${id}`), h("p", { class: "muted" }, "Its wire was not captured (see [inspector] capture)."),
      h("pre", { class: "body" }, rec ? JSON.stringify(rec, null, 2) : "No record of it in this process."));
    return;
  }
  const dl = (q, name, label) => h("a", { class: "button", href: "#", onclick: async (e) => {
    e.preventDefault();
    const res = await fetch(`/admin/inspector/${encodeURIComponent(id)}?${q}`, { headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY)}` } });
    const url = URL.createObjectURL(await res.blob());
    h("a", { href: url, download: name }).click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  } }, label);
  view.replaceChildren(
    h("h1", {}, `Request ${c.request_id}`),
    h("p", { class: c.status >= 400 || c.error_kind ? "error" : "muted" },
      `${c.caller_dialect} → ${c.upstream_dialect ?? "–"} · ${c.model ?? ""} → ${c.provider ?? "–"}/${c.upstream_model ?? ""} · HTTP ${c.status}${c.error_kind ? " · " + c.error_kind : ""} · ${fmt.ms(c.duration_ms)}${c.truncated ? " · capture truncated" : ""}`),
    h("p", { class: "actions" }, dl("download=1", `${id}.json`, "Download the capture (.json)"), " ", dl("side=upstream", `${id}.sse`, "Download the upstream body (.sse)")),
    h("div", { class: "trio" },
      frameList("Upstream frames (raw)", c.upstream_frames, "upstream"),
      frameList("Union events", (c.events || []).map((e) => ({ ms: e.ms, data: `${e.type} ${JSON.stringify(e.event)}`, whole: true })), "events"),
      frameList("Frames sent to the caller", c.caller_frames, "caller")),
    h("div", { class: "pair" }, requestBlock("Caller sent", c.caller_request), requestBlock(`Upstream received${c.upstream_requests.length > 1 ? ` (attempt ${c.upstream_requests.length})` : ""}`, c.upstream_requests.at(-1))),
  );
}

async function keysPage() {
  if (!(await api("/admin/console/info")).named_keys) {
    view.replaceChildren(h("h1", {}, "Keys"), h("p", {}, "Named keys (the admin API's /admin/keys) are not available in this gateway build."));
    return;
  }
  const shown = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "filters" },
    h("label", {}, "Name", h("input", { name: "name", required: true, pattern: "[A-Za-z0-9._\\-]+", size: 16 })),
    h("label", {}, "Budget USD", h("input", { name: "budget_usd", type: "number", step: "0.01", min: "0", size: 8 })),
    h("label", {}, "RPM", h("input", { name: "rpm", type: "number", min: "1", size: 6 })),
    h("label", {}, "MCP tools", h("input", { name: "mcp_tools", placeholder: "files_read_*, calc_*", size: 18 })),
    h("button", { type: "submit" }, "Create key"));
  // "a, b" -> ["a", "b"]; empty -> null (no MCP tool)
  const globs = (v) => { const list = v.split(",").map((g) => g.trim()).filter(Boolean); return list.length ? list : null; };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = Object.fromEntries([...new FormData(form)].filter(([, v]) => v !== "").map(([k, v]) => [k, k === "name" ? v : k === "mcp_tools" ? globs(v) : Number(v)]));
    const made = await api("/admin/keys", { method: "POST", body });
    const copy = h("button", { type: "button", onclick: () => navigator.clipboard?.writeText(made.key).catch(() => {}) }, "Copy");
    shown.replaceChildren(h("p", { class: "card", id: "new-key" }, `Key for ${made.name} (shown this once): `, h("code", { class: "secret" }, made.key), " ", copy));
    await renderList();
  });
  const table = h("div", { class: "table-wrap" });
  async function renderList() {
    const now = await api("/admin/keys");
    const rows = (Array.isArray(now) ? now : now.keys || []).map((k) => {
      // the spend in the key's budget period (all time without a budget), as /admin/spend sums it
      const spent = k.spend?.spent_usd ?? 0;
      const period = k.spend?.period === "total" || !k.spend?.period ? "all time" : k.spend.period.replace(":", " ");
      const bar = k.budget_usd != null ? h("progress", { max: String(k.budget_usd), value: String(Math.min(spent, k.budget_usd)), "aria-label": `spend of ${k.name}` }) : "no budget";
      const spend = h("span", { class: "spend", "data-spent-usd": String(spent) }, ` ${fmt.usd(spent)}${k.budget_usd != null ? " of " + fmt.usd(k.budget_usd) : ""}`);
      const when = h("span", { class: "muted period" }, ` (${period})`);
      const revoke = h("button", { type: "button", class: "danger", onclick: async () => { await api(`/admin/keys/${encodeURIComponent(k.name)}`, { method: "DELETE" }); await renderList(); } }, "Revoke");
      // Change limits: an empty field clears that limit (null), as PATCH /admin/keys/{name} reads it.
      const limits = h("form", { class: "limits", "aria-label": `limits of ${k.name}` },
        [["budget_usd", "Budget USD", "0.01"], ["rpm", "RPM", "1"], ["tpm", "TPM", "1"]].map(([f, label, step]) =>
          h("label", {}, label, h("input", { name: f, type: "number", min: "0", step, size: 7, value: k[f] ?? "" }))),
        h("label", {}, "MCP tools", h("input", { name: "mcp_tools", size: 16, value: (k.mcp_tools || []).join(", "), placeholder: "none" })),
        h("button", { type: "submit" }, "Save"));
      limits.addEventListener("submit", async (e) => {
        e.preventDefault();
        const body = Object.fromEntries([...new FormData(limits)].map(([f, v]) => [f, f === "mcp_tools" ? globs(v) : v === "" ? null : Number(v)]));
        await api(`/admin/keys/${encodeURIComponent(k.name)}`, { method: "PATCH", body });
        await renderList();
      });
      return h("tr", { "data-key": k.name }, h("th", { scope: "row" }, k.name), h("td", {}, (k.models || ["all"]).join(", ")), h("td", { class: "mcp-tools" }, (k.mcp_tools || ["none"]).join(", ")), h("td", {}, bar, spend, when),
        h("td", {}, k.revoked ? "–" : limits), h("td", {}, k.revoked ? "revoked" : revoke));
    });
    table.replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, ["Name", "Models", "MCP tools", "Spend / budget", "Limits", ""].map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)));
  }
  view.replaceChildren(h("h1", {}, "Keys"), form, shown, table);
  await renderList();
}

// -- the shell -----------------------------------------------------------------------------------
const nav = document.getElementById("nav");
const login = document.getElementById("login");

async function route() {
  if (stopLive) { stopLive(); stopLive = null; }
  if (!sessionStorage.getItem(KEY)) {
    nav.hidden = true;
    login.hidden = false;
    view.replaceChildren();
    document.getElementById("admin-key").focus();
    return;
  }
  login.hidden = true;
  nav.hidden = false;
  const [path, query] = (location.hash.slice(1) || "/overview").split("?");
  const [, page, arg] = path.split("/");
  const params = new URLSearchParams(query || "");
  for (const a of nav.querySelectorAll("a")) a.toggleAttribute("aria-current", a.dataset.page === page);
  view.dataset.page = page;
  view.dataset.ready = "";
  try {
    if (page === "requests") await requestsPage(params);
    else if (page === "inspector") await inspectorPage(arg && decodeURIComponent(arg));
    else if (page === "keys") await keysPage();
    else if (page === "playground") stopLive = await playgroundPage(view, api);
    else await overviewPage();
    view.dataset.ready = page;
  } catch (err) {
    if (err instanceof Unauthorized) {
      sessionStorage.removeItem(KEY);
      document.getElementById("login-error").textContent = "The admin key was refused.";
      return route();
    }
    view.replaceChildren(h("h1", {}, "Something failed"), h("p", { class: "error", role: "alert" }, err.message));
    view.dataset.ready = "error";
  }
}

login.addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY, document.getElementById("admin-key").value.trim());
  document.getElementById("login-error").textContent = "";
  route();
});
document.getElementById("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); route(); });
window.addEventListener("hashchange", route);
route();
