// The console's DOM helper and number formats, shared by its page modules.
// Text only (never innerHTML): nothing from a request or a model can run as markup.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const fmt = {
  ms: (v) => (v === null || v === undefined ? "–" : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(2)} s`),
  n: (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US")),
  usd: (v) => (v === null || v === undefined ? "–" : `$${Number(v).toFixed(v < 0.01 ? 6 : 4)}`),
  time: (ts) => new Date(ts * 1000).toLocaleTimeString("en-GB"),
  pct: (v) => `${(v * 100).toFixed(1)}%`,
};
