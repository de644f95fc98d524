// agentscope UI: pages drawn from the JSON API (the CLI's own documents), no framework, no network.
"use strict";

const CATEGORIES = ["inference", "queue", "network", "tool", "db", "retry", "cpu", "other"];
const SELECTION = ["task", "service", "since", "until", "repair"];
const TASKS_PER_PAGE = 50;
const WATERFALL_ROWS = 1500; // a trace of more spans draws these first: each drawn row costs the browser layout work
const page = document.getElementById("page");

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children.flat()) if (child) node.append(child);
  return node;
}

// The same rounding as the terminal (agentscope.cli.render.ms_text).
function ms(value) {
  if (value >= 10000) return (value / 1000).toFixed(1) + " s";
  if (value >= 1000) return (value / 1000).toFixed(2) + " s";
  return value.toFixed(1) + " ms";
}

function percent(value, digits = 0) {
  return (value * 100).toFixed(digits).replace("-", "−") + "%";
}

function signedPercent(value) {
  return (value >= 0 ? "+" : "") + percent(value, 1);
}

function color(category) {
  return `var(--${CATEGORIES.includes(category) ? category : "other"})`;
}

function route() {
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  return { path: path || "/", params: new URLSearchParams(query || "") };
}

function selectionOf(params) {
  const out = new URLSearchParams();
  for (const key of SELECTION) if (params.get(key)) out.set(key, params.get(key));
  return out;
}

function link(path, params) {
  const query = params.toString();
  return "#" + path + (query ? "?" + query : "");
}

async function api(path, params) {
  const query = params.toString();
  const response = await fetch(path + (query ? "?" + query : ""));
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function show(...nodes) {
  page.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined));
}

function showError(message) {
  const box = document.getElementById("error");
  box.hidden = !message;
  box.textContent = message || "";
}

// Filters: the selection lives in the page's address, so a view can be linked and reloaded.
async function loadOverview() {
  const overview = await api("/api/overview", new URLSearchParams());
  document.getElementById("store").textContent =
    `${overview.store} · ${overview.spans.toLocaleString()} spans · ${overview.traces.toLocaleString()} traces`;
  for (const [id, values] of [["f-task", overview.task_names], ["f-service", overview.services]]) {
    const select = document.getElementById(id);
    const current = select.value;
    select.replaceChildren(el("option", { value: "", text: "all" }), ...values.map((v) => el("option", { value: v, text: v })));
    select.value = values.includes(current) ? current : "";
  }
}

function syncFilters(params) {
  for (const key of ["task", "service"]) {
    const select = document.getElementById("f-" + key);
    const value = params.get(key) || "";
    if (value && ![...select.options].some((o) => o.value === value)) select.append(el("option", { value, text: value }));
    select.value = value;
  }
  document.getElementById("f-since").value = params.get("since") || "";
  document.getElementById("f-until").value = params.get("until") || "";
  document.getElementById("f-repair").checked = params.get("repair") !== "0";
}

document.getElementById("filters").addEventListener("submit", (event) => {
  event.preventDefault();
  const params = new URLSearchParams();
  for (const key of ["task", "service", "since", "until"]) {
    const value = document.getElementById("f-" + key).value.trim();
    if (value) params.set(key, value);
  }
  if (!document.getElementById("f-repair").checked) params.set("repair", "0");
  const { path } = route();
  location.hash = link(path.startsWith("/trace/") ? "/tasks" : path, params);
});

document.getElementById("f-clear").addEventListener("click", () => {
  location.hash = link(route().path, new URLSearchParams());
});

function budgetBar(rows, total) {
  const bar = el("div", { class: "bar", id: "budget-bar" });
  for (const row of rows) {
    if (row.ms <= 0) continue;
    bar.append(el("div", {
      class: "seg", "data-category": row.category, "data-ms": row.ms,
      title: `${row.category} ${ms(row.ms)} (${percent(row.ms / total)})`,
      style: `width:${(row.ms / total) * 100}%;background:${color(row.category)}`,
    }));
  }
  const legend = el("div", { class: "legend" }, rows.filter((r) => r.ms > 0).map((r) =>
    el("span", {}, el("i", { style: `background:${color(r.category)}` }), `${r.category} ${ms(r.ms)}`)));
  return [bar, legend];
}

function whatifCurve(curve, p95) {
  const width = 560, height = 220, left = 56, bottom = 30, top = 12;
  const values = curve.flatMap((p) => [p.p95_ms, p.p95_ms_pessimistic]).concat([p95]);
  const high = Math.max(...values) * 1.05;
  const x = (i) => left + (i / Math.max(1, curve.length - 1)) * (width - left - 12);
  const y = (v) => top + (1 - v / high) * (height - top - bottom);
  const line = (key) => curve.map((p, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(p[key]).toFixed(1)}`).join("");
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", id: "whatif-curve", role: "img" },
    svg("line", { x1: left, x2: width - 12, y1: y(p95), y2: y(p95), stroke: "#d9534f", "stroke-dasharray": "4 3" }),
    svg("path", { d: line("p95_ms_pessimistic"), fill: "none", stroke: "#c9a6d9", "stroke-width": 2 }),
    svg("path", { d: line("p95_ms"), fill: "none", stroke: "#8e44ad", "stroke-width": 2.5 }),
    curve.map((p, i) => svg("text", { x: x(i), y: height - 10, "text-anchor": "middle" },
      document.createTextNode(p.inference_speedup === "inf" ? "∞" : `×${p.inference_speedup}`))),
    [0, 0.5, 1].map((f) => svg("text", { x: left - 6, y: y(high * f / 1.05) + 4, "text-anchor": "end" },
      document.createTextNode(ms(high * f / 1.05)))));
  return el("figure", {}, chart, el("figcaption", { class: "dim",
    text: "p95 if inference were N× faster (optimistic, and pessimistic in light); dashed: today's p95" }));
}

function histogram(durations, p95) {
  const width = 560, height = 220, left = 40, bottom = 30, top = 12, bins = 30;
  if (!durations.length) return el("p", { class: "dim", text: "no durations" });
  const low = Math.min(...durations), high = Math.max(...durations);
  const span = Math.max(high - low, 1e-9);
  const counts = new Array(bins).fill(0);
  for (const d of durations) counts[Math.min(bins - 1, Math.floor(((d - low) / span) * bins))] += 1;
  const most = Math.max(...counts);
  const barWidth = (width - left - 12) / bins;
  const xOf = (v) => left + ((v - low) / span) * (width - left - 12);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", id: "histogram", role: "img" },
    counts.map((c, i) => svg("rect", {
      x: left + i * barWidth + 1, width: Math.max(1, barWidth - 2),
      y: top + (1 - c / most) * (height - top - bottom), height: (c / most) * (height - top - bottom), fill: "#b9a3c9",
    })),
    svg("line", { x1: xOf(p95), x2: xOf(p95), y1: top, y2: height - bottom, stroke: "#d9534f", "stroke-dasharray": "4 3" }),
    svg("text", { x: left, y: height - 10 }, document.createTextNode(ms(low))),
    svg("text", { x: width - 12, y: height - 10, "text-anchor": "end" }, document.createTextNode(ms(high))),
    svg("text", { x: xOf(p95), y: top + 10, "text-anchor": "end" }, document.createTextNode("p95 ")));
  return el("figure", {}, chart, el("figcaption", { class: "dim", text: "task durations; dashed: p95" }));
}

function table(id, header, rows, numeric = []) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, header.map((h, i) => el("th", { class: numeric.includes(i) ? "num" : null, text: h })))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c, i) =>
      c instanceof Node ? el("td", {}, c) : el("td", { class: numeric.includes(i) ? "num" : null, text: c }))))));
}

function whatifTable(rows) {
  return table("whatif-table", ["scenario", "p50", "p95", "p95 change", "p95 range"], rows.map((w) => [
    w.scenario, ms(w.p50_ms), ms(w.p95_ms), signedPercent(w.p95_change),
    Math.abs(w.p95_ms_range[0] - w.p95_ms_range[1]) > 1e-6 ? `${ms(w.p95_ms_range[0])} – ${ms(w.p95_ms_range[1])}` : "",
  ]), [1, 2, 3]);
}

async function overviewPage(params) {
  const selection = selectionOf(params);
  const [blame, curve] = await Promise.all([api("/api/blame", selection), api("/api/curve", selection)]);
  const latency = blame.latency_ms;
  const kpi = (label, value) => el("div", { class: "kpi" }, el("div", { class: "value", text: value }), el("div", { class: "label", text: label }));
  show(
    el("p", { class: "verdict", id: "verdict", text: blame.verdict }),
    el("div", { class: "kpis", id: "kpis", "data-tasks": blame.tasks.count, "data-p50-ms": latency.p50, "data-p95-ms": latency.p95, "data-p99-ms": latency.p99 },
      kpi("tasks", blame.tasks.count.toLocaleString()), kpi("p50", ms(latency.p50)), kpi("p95", ms(latency.p95)), kpi("p99", ms(latency.p99)),
      kpi("task types", blame.tasks.names.join(", "))),
    el("h2", { text: `What a p${blame.percentile} task is made of` }),
    ...budgetBar(blame.budget, latency.p95),
    el("div", { class: "grid" },
      el("div", {}, el("h2", { text: "What if inference were faster" }), whatifCurve(curve.curve, latency.p95)),
      el("div", {}, el("h2", { text: "Durations" }), histogram(curve.distribution_ms.durations, latency.p95))),
    el("h2", { text: "What if" }), whatifTable(blame.whatif),
    el("h2", { text: "Top operations on the critical path" }),
    table("operations-table", ["operation", "category", "ms", "share", "calls/task"], blame.operations.map((op) =>
      [op.name, op.category, ms(op.ms), percent(op.share), op.calls_per_task.toFixed(1)]), [2, 3, 4]),
  );
}

function miniBar(categories, total) {
  return el("div", { class: "mini" }, CATEGORIES.filter((c) => categories[c] > 0).map((c) =>
    el("div", { title: `${c} ${ms(categories[c])}`, style: `width:${(categories[c] / total) * 100}%;background:${color(c)}` })));
}

async function tasksPage(params) {
  const selection = selectionOf(params);
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  const query = new URLSearchParams(selection);
  query.set("limit", TASKS_PER_PAGE);
  query.set("offset", offset);
  const data = await api("/api/tasks", query);
  const rows = data.tasks.map((t) => el("tr", {
    class: "clickable" + (t.in_p95_window ? " p95-window" : ""), "data-trace-id": t.trace_id, "data-duration-ms": t.duration_ms,
    onclick: () => { location.hash = link("/trace/" + t.trace_id, selection); },
  },
  el("td", { class: "num", text: t.rank }), el("td", { class: "name", text: t.name, title: t.name }),
  el("td", { text: t.start.replace("T", " ").replace("+00:00", "Z") }), el("td", { class: "num", text: ms(t.duration_ms) }),
  el("td", { text: t.accepted ? "yes" : "no" }), el("td", {}, miniBar(t.categories, t.duration_ms)),
  el("td", { class: "dim", text: t.trace_id })));
  const pager = el("div", { class: "pager" },
    el("button", { type: "button", disabled: offset === 0, onclick: () => go(offset - TASKS_PER_PAGE) }, "← slower"),
    el("span", { class: "dim", text: `${offset + 1}–${offset + data.tasks.length} of ${data.count.toLocaleString()}` }),
    el("button", { type: "button", disabled: offset + TASKS_PER_PAGE >= data.count, onclick: () => go(offset + TASKS_PER_PAGE) }, "faster →"));
  function go(next) {
    const target = new URLSearchParams(selection);
    if (next > 0) target.set("offset", Math.max(0, next));
    location.hash = link("/tasks", target);
  }
  show(
    el("p", { class: "dim", text: `Slowest first. Shaded: the tasks around p95 (${data.p95_ms === null ? "—" : ms(data.p95_ms)}) that the budget averages.` }),
    pager,
    el("table", { id: "tasks-table", "data-count": data.count },
      el("thead", {}, el("tr", {}, ["#", "task", "start (UTC)", "duration", "accepted", "critical path", "trace"].map((h, i) =>
        el("th", { class: i === 0 || i === 3 ? "num" : null, text: h })))),
      el("tbody", {}, rows)),
  );
}

function repairCounts(repaired) {
  const counts = {};
  for (const r of repaired) counts[r.rule] = (counts[r.rule] || 0) + 1;
  return Object.entries(counts).map(([rule, n]) => `${n} ${rule}`).join(", ");
}

function attributesPanel(span) {
  const rows = [["span id", span.span_id], ["kind", span.kind], ["status", span.status || ""], ["service", span.service || ""],
    ["start", ms(span.start_ms)], ["duration", ms(span.end_ms - span.start_ms)], ["on the critical path", ms(span.on_path_ms)]];
  if (span.repaired) rows.push(["repaired", `${span.repaired.rule} → ${span.repaired.new_parent_id}`]);
  for (const [key, value] of Object.entries(span.attributes)) rows.push([key, typeof value === "string" ? value : JSON.stringify(value)]);
  return el("div", { id: "attributes", "data-span-id": span.span_id }, el("h2", { text: span.name }), table("attributes-table", ["", ""], rows));
}

async function tracePage(traceId, params) {
  const selection = selectionOf(params);
  const [doc, spans] = await Promise.all([
    api(`/api/traces/${encodeURIComponent(traceId)}`, selection),
    api(`/api/traces/${encodeURIComponent(traceId)}/spans`, selection),
  ]);
  const total = Math.max(doc.task.duration_ms, 1e-9);
  const pieces = {};
  for (const piece of doc.critical_path) (pieces[piece.span_id] ||= []).push(piece);
  const clip = (v) => Math.min(Math.max(v, 0), total);
  const panel = el("div", { id: "attributes-slot" });
  const drawn = params.get("all_spans") === "1" ? spans.spans : firstRows(spans.spans, pieces);
  const rows = drawn.map((span) => {
    const left = (clip(span.start_ms) / total) * 100;
    const width = Math.max(0.15, ((clip(span.end_ms) - clip(span.start_ms)) / total) * 100);
    const row = el("div", {
      class: "span-row" + (pieces[span.span_id] ? " on-path" : ""), "data-span-id": span.span_id,
      onclick: () => {
        for (const other of document.querySelectorAll(".span-row.selected")) other.classList.remove("selected");
        row.classList.add("selected");
        panel.replaceChildren(attributesPanel(span));
      },
    },
    el("div", { class: "span-name", style: `padding-left:${0.5 + Math.min(span.depth, 12) * 1.1}em`, title: span.name },
      span.name, el("span", { class: "kind", text: span.kind }),
      span.repaired ? el("span", { class: "repaired", title: span.repaired.rule, text: "↳ repaired" }) : null),
    el("div", { class: "track" },
      el("div", { class: "span-bar", style: `left:${left}%;width:${width}%;background:${color(span.category)}` }),
      (pieces[span.span_id] || []).map((p) => el("div", {
        class: "cp", "data-span-id": p.span_id, "data-category": p.category, "data-component": p.component || "",
        "data-start-ms": p.start_ms, "data-end-ms": p.end_ms, title: `${p.category}${p.component ? "." + p.component : ""} ${ms(p.end_ms - p.start_ms)}`,
        style: `left:${(clip(p.start_ms) / total) * 100}%;width:${Math.max(0.1, ((clip(p.end_ms) - clip(p.start_ms)) / total) * 100)}%;background:${color(p.category)}`,
      }))),
    el("div", { class: "span-time", text: ms(span.end_ms - span.start_ms) }));
    return row;
  });
  const attribution = CATEGORIES.map((c) => ({ category: c, ms: doc.attribution[c] || 0 }));
  const repaired = doc.repaired.length;
  show(
    el("p", {}, el("a", { href: link("/tasks", selection), text: "← tasks" })),
    el("h2", { id: "trace-title", text: `${doc.task.name} · ${ms(doc.task.duration_ms)} · trace ${doc.trace_id}` }),
    doc.explained === "root" ? el("p", { class: "dim", text: "This trace holds no task: its root span is explained." }) : null,
    ...budgetBar(attribution, total),
    el("p", { class: "dim", text: "Strong bars: the critical path, coloured by category; faint bars: each span's own time. Click a span for its attributes." +
      (repaired ? ` ${repaired} span(s) repaired (${repairCounts(doc.repaired)}: foreign-trace repairs; untick "repair" to see the tree as recorded).` : "") }),
    drawn.length < spans.spans.length ? el("p", { id: "waterfall-cut", class: "dim" },
      `Drawing ${drawn.length.toLocaleString()} of ${spans.spans.length.toLocaleString()} spans: those on the critical path and their parents when there are fewer, then the first in tree order. `,
      el("a", { href: link(`/trace/${encodeURIComponent(traceId)}`, withAllSpans(selection)), text: "Draw them all" }),
      " (slow in a browser past a few thousand).") : null,
    el("div", { class: "waterfall", id: "waterfall", "data-trace-id": doc.trace_id }, rows),
    panel,
  );
}

function withAllSpans(selection) {
  const params = new URLSearchParams(selection);
  params.set("all_spans", "1");
  return params;
}

// The spans a waterfall of many draws, WATERFALL_ROWS in tree order: those on the critical path and
// their parents first, when they are fewer, then the first others (a parent always before its children).
function firstRows(spans, pieces) {
  if (spans.length <= WATERFALL_ROWS) return spans;
  const parentOf = new Map(spans.map((span) => [span.span_id, span.parent_id]));
  let keep = new Set();
  for (const spanId of Object.keys(pieces)) {
    for (let id = spanId; id && !keep.has(id); id = parentOf.get(id)) keep.add(id);
  }
  if (keep.size > WATERFALL_ROWS) keep = new Set();
  for (const span of spans) {
    if (keep.size >= WATERFALL_ROWS) break;
    keep.add(span.span_id);
  }
  return spans.filter((span) => keep.has(span.span_id));
}

async function budgetPage(params) {
  const selection = selectionOf(params);
  const query = new URLSearchParams(selection);
  if (params.get("tasks_per_month")) query.set("tasks_per_month", params.get("tasks_per_month"));
  const doc = await api("/api/budget", query);
  const latency = doc.latency;
  const scope = doc.scope;
  const money = (v) => {
    if (v === null || v === undefined) return "—";
    const digits = Math.abs(v) < 0.01 ? { maximumSignificantDigits: 3 } : { minimumFractionDigits: 2, maximumFractionDigits: 2 };
    return "$" + v.toLocaleString("en-US", digits);
  };
  const sections = (doc.task_types || []).map((s) => [s.scope.task_names.join(", "), s.scope.tasks.toLocaleString(), ms(s.latency.latency_ms.p95), s.latency.verdict]);
  show(
    el("p", { class: "verdict", text: latency.verdict }),
    el("p", { class: "dim", text: `${scope.tasks.toLocaleString()} tasks (${percent(scope.accepted_rate)} accepted) in ${scope.traces.toLocaleString()} traces, ${scope.period.start} to ${scope.period.end}; projected to ${doc.projection.tasks_per_month.toLocaleString()} tasks a month.` }),
    el("h2", { text: `What a p${latency.percentile} task is made of` }),
    table("budget-table", ["category", "ms", "share", "components"], latency.budget.map((r) => [
      r.category, ms(r.ms), percent(r.share), Object.entries(r.components).filter(([, v]) => v > 0.0005).map(([k, v]) => `${k} ${ms(v)}`).join(", "),
    ]), [1, 2]),
    el("h2", { text: "What if" }), whatifTable(latency.whatif),
    doc.decision ? el("h2", { text: "Candidates: predicted latency beside cost" }) : null,
    doc.decision ? table("decision-table", ["option", "p50", "p95", "p95 change", "per accepted task", "priced as", "measured at"],
      doc.decision.map((d) => [d.option, ms(d.p50_ms), ms(d.p95_ms), signedPercent(d.p95_change), money(d.cost_per_accepted_task), d.priced_as || "—", d.concurrency ? `${d.concurrency} at once` : "—"]),
      [1, 2, 3, 4]) : null,
    el("h2", { text: "Monthly cost" }),
    table("options-table", ["option", "kind", "what", "per month", "per task", "per accepted task"],
      [...doc.options].sort((a, b) => a.monthly_cost - b.monthly_cost).map((o) => [o.name, o.kind.replace("_", " "), o.what, money(o.monthly_cost), money(o.cost_per_task), money(o.cost_per_accepted_task)]),
      [3, 4, 5]),
    sections.length ? el("h2", { text: "Per task type" }) : null,
    sections.length ? table("task-types-table", ["task type", "tasks", "p95", "verdict"], sections, [1, 2]) : null,
  );
}

async function render() {
  const { path, params } = route();
  syncFilters(params);
  for (const a of document.querySelectorAll("nav a")) {
    const active = (a.dataset.page === "overview" && path === "/") || path.startsWith("/" + a.dataset.page) || (a.dataset.page === "tasks" && path.startsWith("/trace/"));
    a.classList.toggle("active", active);
    a.href = link(a.dataset.page === "overview" ? "/" : "/" + a.dataset.page, selectionOf(params));
  }
  showError("");
  document.body.dataset.loading = "1";
  try {
    if (path === "/") await overviewPage(params);
    else if (path === "/tasks") await tasksPage(params);
    else if (path.startsWith("/trace/")) await tracePage(decodeURIComponent(path.slice(7)), params);
    else if (path === "/budget") await budgetPage(params);
    else throw new Error(`no page ${path}`);
  } catch (error) {
    page.replaceChildren();
    showError(error.message);
  } finally {
    document.body.dataset.loading = "0";
    document.body.dataset.rendered = location.hash || "#/";
  }
}

window.addEventListener("hashchange", render);
loadOverview().catch((error) => showError(error.message)).finally(render);
