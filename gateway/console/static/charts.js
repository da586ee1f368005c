// Hand-drawn SVG charts: a line chart over the last hour's minutes and a grouped bar chart.
// They scale with their box (viewBox), so the same drawing reads on a desktop and on a phone.
const NS = "http://www.w3.org/2000/svg";
const W = 480, H = 180, L = 56, R = 10, T = 12, B = 26;

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function frame(title) {
  const fig = document.createElement("figure");
  fig.className = "chart";
  const cap = document.createElement("figcaption");
  cap.textContent = title;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  fig.append(cap, root);
  return [fig, root];
}

function axis(root, max, fmt) {
  for (const f of [0, 0.5, 1]) {
    const y = T + (H - T - B) * (1 - f);
    root.append(svg("line", { x1: L, x2: W - R, y1: y, y2: y, class: "grid" }));
    root.append(svg("text", { x: L - 6, y: y + 4, class: "tick", "text-anchor": "end" }, fmt(max * f)));
  }
}

export function lineChart(title, xs, series, fmt) {
  const [fig, root] = frame(title);
  const all = series.flatMap((s) => s.values.filter((v) => v !== null && v !== undefined));
  const max = Math.max(...all, 0) || 1;
  axis(root, max, fmt);
  if (!xs.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, class: "empty", "text-anchor": "middle" }, "no requests yet"));
    return fig;
  }
  const x0 = xs[0], span = Math.max(xs[xs.length - 1] - x0, 60);
  const px = (x) => L + ((x - x0) / span) * (W - L - R);
  const py = (v) => T + (H - T - B) * (1 - v / max);
  for (const s of series) {
    const pts = xs.map((x, i) => [x, s.values[i]]).filter(([, v]) => v !== null && v !== undefined);
    const d = pts.map(([x, v], i) => `${i ? "L" : "M"}${px(x).toFixed(1)},${py(v).toFixed(1)}`).join(" ");
    root.append(svg("path", { d, class: `series ${s.cls || ""}` }));
    for (const [x, v] of pts) root.append(svg("circle", { cx: px(x).toFixed(1), cy: py(v).toFixed(1), r: 2.5, class: `dot ${s.cls || ""}` }, undefined));
  }
  const label = (t) => new Date(t * 1000).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" });
  root.append(svg("text", { x: L, y: H - 8, class: "tick" }, label(x0)));
  root.append(svg("text", { x: W - R, y: H - 8, class: "tick", "text-anchor": "end" }, label(xs[xs.length - 1])));
  if (series.length > 1) {
    series.forEach((s, i) => root.append(svg("text", { x: W - R - 60 * (series.length - i), y: T + 10, class: `legend ${s.cls || ""}` }, `— ${s.name}`)));
  }
  return fig;
}

export function barChart(title, labels, series, fmt) {
  const [fig, root] = frame(title);
  const max = Math.max(...series.flatMap((s) => s.values), 0) || 1;
  axis(root, max, fmt);
  if (!labels.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, class: "empty", "text-anchor": "middle" }, "no usage yet"));
    return fig;
  }
  const group = (W - L - R) / labels.length;
  const bw = Math.min(28, (group - 8) / series.length);
  labels.forEach((name, i) => {
    series.forEach((s, j) => {
      const v = s.values[i] || 0;
      const hgt = (H - T - B) * (v / max);
      const rect = svg("rect", { x: (L + i * group + 4 + j * bw).toFixed(1), y: (H - B - hgt).toFixed(1), width: Math.max(1, bw - 2).toFixed(1), height: hgt.toFixed(1), class: `bar ${s.cls || ""}` });
      rect.append(svg("title", {}, `${name} ${s.name}: ${fmt(v)}`));
      root.append(rect);
    });
    const room = Math.max(3, Math.floor(group / 6.5));
    const short = name.length > room ? name.slice(0, room - 1) + "…" : name;
    root.append(svg("text", { x: (L + i * group + 4).toFixed(1), y: H - 8, class: "tick" }, short));
  });
  series.forEach((s, i) => root.append(svg("text", { x: W - R - 60 * (series.length - i), y: T + 10, class: `legend ${s.cls || ""}` }, `■ ${s.name}`)));
  return fig;
}
