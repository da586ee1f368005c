// The Playground: send one prompt to a route in a chosen caller dialect and watch the answer form
// from that dialect's own stream events (text, thinking, tool calls whose arguments fill in), then
// the usage the stream reported and the cost the gateway booked for the request (its access record,
// found by the x-request-id header — never computed here).
//
// It calls the gateway's model endpoints as any client does, with a caller key: the admin key is
// not a model key, so a playground request is counted, limited and billed as that key's request.
// The caller key is kept in this tab's sessionStorage only and never written back into the page.
import { h, fmt } from "/ui/static/dom.js";
import { DIALECTS, sseFrames } from "/ui/static/dialects.js";

const CALLER_KEY = "gateway-playground-caller-key";
const CHOICE = "gateway-playground-choice"; // route + dialect of the last send (not secret)
const EXAMPLE_TOOLS = JSON.stringify([{ name: "get_weather", description: "The weather in a city", parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city"] } }], null, 2);

function parseTools(text) {
  if (!text.trim()) return [];
  let v;
  try { v = JSON.parse(text); } catch (err) { throw new Error(`Tools: not JSON (${err.message})`); }
  const list = Array.isArray(v) ? v : [v];
  list.forEach((t, i) => {
    if (typeof t !== "object" || t === null || typeof t.name !== "string" || !t.name) throw new Error(`Tools: tool ${i + 1} needs a "name" (string)`);
    if (t.parameters !== undefined && (typeof t.parameters !== "object" || t.parameters === null)) throw new Error(`Tools: "parameters" of ${t.name} must be a JSON Schema object`);
  });
  return list;
}

// The answer being drawn: ordered blocks, each a text node that grows (appendData, never markup).
function answerView() {
  const blocks = h("div", { class: "pg-blocks" });
  const status = h("p", { class: "muted", id: "pg-status" }, "Nothing sent yet.");
  const usage = h("p", { id: "pg-usage", class: "mono" });
  const cost = h("p", { id: "pg-cost" });
  const root = h("section", { id: "pg-answer", class: "card", "aria-label": "Answer", "data-state": "idle" }, status, blocks, usage, cost);
  const byKey = new Map();
  const order = [];
  const sum = {};
  let stopReason = null;
  let lastError = null;

  const block = (key, kind, title) => {
    let b = byKey.get(String(key));
    if (b) return b;
    const text = document.createTextNode("");
    const label = h("span", { class: "pg-label" }, title);
    const body = h("pre", { class: kind === "tool" ? "pg-args" : "pg-text", "data-deltas": "0" }, text);
    const el = h("div", { class: `pg-block pg-${kind}`, "data-kind": kind }, label, body);
    b = { kind, text, body, label, el, deltas: 0 };
    byKey.set(String(key), b);
    order.push(String(key));
    blocks.append(el);
    return b;
  };
  const grow = (b, s) => {
    if (!s) return;
    b.text.appendData(s);
    b.deltas += 1;
    b.body.dataset.deltas = String(b.deltas);
  };

  const ui = {
    root,
    count: () => order.length,
    lastKey: () => order.at(-1),
    lastKind: () => (order.length ? byKey.get(order.at(-1)).kind : null),
    append: (kind, key, s) => grow(block(key, kind, kind === "thinking" ? "Thinking" : "Text"), s),
    tool(key, id, name) {
      const b = block(key, "tool", "Tool call");
      if (name || id) b.label.replaceChildren("Tool call ", h("code", { class: "pg-tool-name" }, name || "?"), id ? h("span", { class: "muted" }, ` ${id}`) : "");
    },
    args: (key, s) => grow(block(key, "tool", "Tool call"), s),
    wholeArgs(key, id, name, obj) {
      ui.tool(key, id, name);
      grow(byKey.get(String(key)), JSON.stringify(obj));
    },
    usage(u) {
      for (const [k, v] of Object.entries(u)) if (v !== null && v !== undefined) sum[k] = v;
      const parts = [["input", "in"], ["output", "out"], ["reasoning", "of which reasoning"], ["cache_read", "cache read"], ["cache_write", "cache write"]]
        .filter(([k]) => sum[k] !== undefined).map(([k, label]) => `${label} ${fmt.n(sum[k])}`);
      usage.textContent = `Usage (from the stream): ${[...(parts.length ? parts : ["none reported"]), ...(stopReason ? [`stop: ${stopReason}`] : [])].join(" · ")}`;
    },
    stop(reason) { stopReason = reason; ui.usage({}); },
    error(message) {
      if (message === lastError) return; // Responses: the error event, then response.failed saying it again
      lastError = message;
      blocks.append(h("p", { class: "error pg-error", role: "alert" }, message));
      root.dataset.error = "1";
    },
    failed: () => lastError !== null,
    status(s, cls = "muted") { status.className = cls; status.textContent = s; },
    finish() {
      for (const b of byKey.values()) {
        if (b.kind !== "tool") continue;
        try { JSON.parse(b.text.data || "{}"); b.el.dataset.json = "valid"; } catch { b.el.dataset.json = "invalid"; b.el.append(h("p", { class: "error" }, "The arguments are not complete JSON.")); }
      }
    },
    cost,
  };
  return ui;
}

// The access record the gateway wrote for this request id (the store's log when there is one:
// whichever worker answered). It is written just after the stream's last byte: wait for it.
async function bookedRecord(api, rid) {
  for (let i = 0; i < 30; i++) {
    const { requests } = await api(`/admin/console/requests?request_id=${encodeURIComponent(rid)}&limit=1`);
    if (requests.length) return requests[0];
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

async function showCost(api, ui, rid) {
  const rec = await bookedRecord(api, rid);
  if (!rec) { ui.cost.textContent = `No access record of ${rid} yet.`; return; }
  const tokens = `${fmt.n(rec.input_tokens)} in / ${fmt.n(rec.output_tokens)} out`;
  ui.cost.replaceChildren(
    rec.cost_usd === null || rec.cost_usd === undefined
      ? h("span", { "data-cost": "unpriced" }, `Cost: unpriced (no price for ${rec.upstream_model ?? rec.model ?? "this model"})`)
      : h("strong", { "data-cost": String(rec.cost_usd) }, `Cost: ${fmt.usd(rec.cost_usd)}`),
    ` · booked ${tokens} · ${rec.provider ?? "–"}/${rec.upstream_model ?? ""} · HTTP ${rec.status}${rec.error_kind ? ` (${rec.error_kind})` : ""} · `,
    h("a", { href: `#/inspector/${encodeURIComponent(rid)}` }, "open in the Inspector"));
  ui.root.dataset.cost = rec.cost_usd === null || rec.cost_usd === undefined ? "unpriced" : String(rec.cost_usd);
}

async function send(api, ui, form, signal) {
  const f = new FormData(form);
  const dialect = DIALECTS[f.get("dialect")];
  const model = String(f.get("model")).trim();
  const tools = parseTools(String(f.get("tools") || ""));
  const maxTokens = Math.max(1, Number(f.get("max_tokens")) || 1024);
  const key = sessionStorage.getItem(CALLER_KEY) || "";
  const body = dialect.body({ model, prompt: String(f.get("prompt")), tools, maxTokens, thinking: f.get("thinking") === "on" });
  const started = performance.now();
  ui.status(`Sending to ${model} as ${dialect.label}…`);
  const res = await fetch(dialect.path(model), { method: "POST", headers: { "Content-Type": "application/json", ...(key ? dialect.auth(key) : {}) }, body: JSON.stringify(body), signal });
  const rid = res.headers.get("x-request-id");
  if (rid) ui.root.dataset.requestId = rid;
  const type = res.headers.get("content-type") || "";
  if (!res.ok || !type.includes("event-stream") || !res.body) {
    const text = await res.text();
    let message = text;
    try { const j = JSON.parse(text); message = j?.error?.message || j?.message || text; } catch { /* not JSON: shown as sent */ }
    ui.status(`HTTP ${res.status}${rid ? ` · ${rid}` : ""}`, res.ok ? "muted" : "error");
    ui.error(`The gateway answered HTTP ${res.status}: ${message}`);
    return rid;
  }
  let first = null, events = 0, ended = false;
  for await (const [name, data] of sseFrames(res.body)) {
    if (first === null) first = performance.now() - started;
    events += 1;
    dialect.reduce(ui, name, data);
    ended = ended || dialect.ends(name, data);
    ui.status(`Streaming · ${rid} · first event after ${fmt.ms(first)} · ${events} events`);
  }
  ui.finish();
  if (!ended && !ui.failed()) ui.error(`The stream closed without ${dialect.label}'s final event: the answer above is cut off.`);
  ui.status(`${ui.failed() ? "Ended with an error" : "Done"} · ${rid} · first event after ${fmt.ms(first)} · ${events} events in ${fmt.ms(performance.now() - started)}`);
  return rid;
}

export async function playgroundPage(view, api) {
  const info = await api("/admin/console/info");
  const saved = JSON.parse(sessionStorage.getItem(CHOICE) || "{}");
  const models = info.models || [];
  const keyInput = h("input", { id: "pg-key", name: "caller_key", type: "password", autocomplete: "off", size: 22 });
  const keyNote = h("span", { class: "muted", id: "pg-key-note" });
  const showKeyNote = () => {
    const has = Boolean(sessionStorage.getItem(CALLER_KEY));
    keyInput.placeholder = has ? "kept for this tab; type to replace" : "a caller key";
    keyNote.textContent = has ? "A caller key is kept for this tab." : "No caller key (fine if the gateway has no [auth]).";
  };
  const forget = h("button", { type: "button", class: "link", onclick: () => { sessionStorage.removeItem(CALLER_KEY); showKeyNote(); } }, "Forget the caller key");
  const tools = h("textarea", { name: "tools", id: "pg-tools", rows: 6, spellcheck: "false", placeholder: "[{\"name\": …, \"description\": …, \"parameters\": {JSON Schema}}]" });
  const sendBtn = h("button", { type: "submit", id: "pg-send" }, "Send");
  const stopBtn = h("button", { type: "button", id: "pg-stop", class: "danger", disabled: true }, "Stop");
  const formError = h("p", { class: "error", role: "alert", id: "pg-form-error" });
  const form = h("form", { class: "playground card", id: "pg-form" },
    h("div", { class: "pg-row" },
      h("label", {}, "Route (model)", h("input", { name: "model", id: "pg-model", list: "pg-models", required: true, autocomplete: "off", value: saved.model || models[0] || "", size: 26 })),
      h("datalist", { id: "pg-models" }, models.map((m) => h("option", { value: m }))),
      h("label", {}, "Caller dialect", h("select", { name: "dialect", id: "pg-dialect" },
        Object.entries(DIALECTS).map(([d, v]) => h("option", { value: d, selected: (saved.dialect || "anthropic") === d }, `${d} (${v.label})`)))),
      h("label", {}, "Max tokens", h("input", { name: "max_tokens", type: "number", min: "1", value: "2048", size: 6 })),
      h("label", { class: "pg-check" }, h("input", { name: "thinking", type: "checkbox" }), "Thinking")),
    h("div", { class: "pg-row" }, h("label", {}, "Caller key", keyInput), keyNote, forget),
    h("label", { class: "pg-wide" }, "Prompt", h("textarea", { name: "prompt", id: "pg-prompt", rows: 3, required: true }, "What is the weather in Paris?")),
    h("details", {}, h("summary", {}, "Tools (JSON, optional; converted to the dialect's tool format)"), tools,
      h("button", { type: "button", class: "link", onclick: () => { tools.value = EXAMPLE_TOOLS; } }, "Insert an example tool")),
    h("div", { class: "pg-row" }, sendBtn, stopBtn), formError);
  let ui = answerView();
  const holder = h("div", {}, ui.root);
  let ctl = null;
  stopBtn.addEventListener("click", () => ctl?.abort());
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    formError.textContent = "";
    if (keyInput.value.trim()) sessionStorage.setItem(CALLER_KEY, keyInput.value.trim());
    keyInput.value = ""; // the key is never shown back
    showKeyNote();
    const f = new FormData(form);
    try { parseTools(String(f.get("tools") || "")); } catch (err) { formError.textContent = err.message; return; }
    sessionStorage.setItem(CHOICE, JSON.stringify({ model: f.get("model"), dialect: f.get("dialect") }));
    ui = answerView();
    holder.replaceChildren(ui.root);
    ui.root.dataset.state = "streaming";
    ctl = new AbortController();
    sendBtn.disabled = true;
    stopBtn.disabled = false;
    let rid = null;
    try {
      rid = await send(api, ui, form, ctl.signal);
      ui.root.dataset.state = ui.root.dataset.error ? "error" : "done";
    } catch (err) {
      ui.error(err.name === "AbortError" ? "Stopped: the answer above is incomplete." : `The stream failed: ${err.message}`);
      ui.root.dataset.state = "error";
    } finally {
      sendBtn.disabled = false;
      stopBtn.disabled = true;
      ctl = null;
    }
    rid = rid || ui.root.dataset.requestId; // a stopped or broken stream still has its record
    if (rid) {
      try { await showCost(api, ui, rid); } catch (err) { ui.cost.textContent = `Cost unavailable: ${err.message}`; }
    }
    ui.root.dataset.booked = "1";
  });
  showKeyNote();
  view.replaceChildren(h("h1", {}, "Playground"),
    h("p", { class: "muted" }, "Sends one streamed request to the gateway's own model endpoint in the dialect you pick, with a caller key (counted, limited and billed as that key's request), and draws the answer from that dialect's stream events."),
    form, holder);
  return () => ctl?.abort();
}
