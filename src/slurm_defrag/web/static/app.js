// slurm-defrag web page: plain JavaScript, no framework, no build step, no CDN.
// Reads /api/snapshot, /api/history, /api/impact and /api/plans (relative URLs, so the
// page also works behind a reverse proxy's path prefix) and redraws every REFRESH_MS.
// Every text from Slurm (job names, reasons, command output) goes through textContent,
// never innerHTML.
"use strict";

const REFRESH_MS = 5000;
const SVG_NS = "http://www.w3.org/2000/svg";
const openPlans = new Set(); // plan ids the reader expanded, kept across redraws
const closedPlans = new Set(); // open plans the reader collapsed

function $(id) { return document.getElementById(id); }

// el("td", {class: "num", text: "3", data: {node: "n1"}, title: "..."}, child, ...)
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key === "data") {
      for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
    } else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function table(headers, rows) {
  const head = el("tr", {}, ...headers.map(
    (h) => el("th", {class: h.endsWith("#") ? "num" : null, text: h.replace(/#$/, "")})));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

// A job's colour comes with the snapshot (/api/snapshot jobs[id].colour): the server
// gives jobs that share a node different colours (domain/job_colours.py), which a hash
// of the id alone cannot promise. A job missing there (none should be) is grey.
function jobColour(id, jobs) {
  return ((jobs || {})[id] || {}).colour || "hsl(0, 0%, 45%)";
}

// ISO 8601 in the reader's time zone, with its offset: 2026-11-29 13:00:00+01:00 (a
// locale's format was US-style in many browsers, and named no zone).
function time(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  const off = -d.getTimezoneOffset();
  const zone = `${off < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${zone}`;
}

async function getJSON(path) {
  const response = await fetch(path, {cache: "no-store"});
  const body = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

// ---- summary and GPU map ---------------------------------------------------------------

function renderSummary(s) {
  const u = s.summary.unusable;
  $("summary").replaceChildren(
    el("b", {text: s.cluster}), ` at ${time(s.taken_at)} · `,
    `${s.summary.free} of ${s.summary.gpus} GPUs free · `,
    el("span", {text: `${s.summary.unusable_total} unusable`,
                title: `spatial ${u.spatial}, topology ${u.topology}, configuration ${u.configuration}`}),
    ` (s/t/c ${u.spatial}/${u.topology}/${u.configuration}) · FGD ${s.summary.fgd} · `,
    `${s.summary.pending} pending, ${s.summary.falsely_starved} falsely starved · `,
    el("span", {class: "origin", text: s.origin}));
  // Unknown NVLink topology: the map and the figures of those nodes assume no NVLink.
  const unknown = s.topology_unknown || {nodes: 0, message: null};
  const banner = $("topology-banner");
  banner.hidden = !unknown.nodes;
  banner.textContent = unknown.nodes ? unknown.message : "";
}

function gpuCell(node, cell, jobs) {
  const classes = ["gpu", cell.status];
  if (cell.switch_start) classes.push("switch-start");
  let title = `${node.name} GPU ${cell.gpu}: `;
  if (cell.status === "busy") {
    const job = jobs[cell.job] || {};
    title += `job ${cell.job}` + (job.user ? ` (${job.user}, ${job.name || "no name"})` : "");
  } else {
    title += {block: "free, in a free NVLink block", stranded: "free, stranded (no free NVLink peer)",
              off: "free, node takes no new work", unknown: "busy, job not visible"}[cell.status];
  }
  const span = el("span", {class: classes.join(" "), title,
                           data: {node: node.name, gpu: cell.gpu, status: cell.status}});
  if (cell.job) {
    span.dataset.job = cell.job;
    span.style.backgroundColor = jobColour(cell.job, jobs);
  }
  return span;
}

function renderMap(s) {
  const rows = s.nodes.map((node) => {
    const held = [...new Set(node.gpus.filter((c) => c.job).map((c) => c.job))];
    const state = node.state.join(",") + (node.reservation ? ` resv ${node.reservation}` : "");
    return el("tr", {class: node.available ? "available" : "unavailable", data: {node: node.name}},
      el("td", {}, el("span", {class: "node-name", text: node.name}), el("br"),
         el("span", {class: node.available ? "state" : "state bad", text: state,
                     title: node.reason || null})),
      el("td", {}, node.gpu_model || "no GPUs", el("br"),
         el("span", {class: "state", text: node.topology})),
      el("td", {}, el("div", {class: "gpus"}, ...node.gpus.map((c) => gpuCell(node, c, s.jobs)))),
      el("td", {class: "num", text: node.largest_free_block}),
      el("td", {}, ...held.map((id) => {
        const tag = el("span", {class: "job-tag", text: id, data: {job: id}});
        tag.style.backgroundColor = jobColour(id, s.jobs);
        return tag;
      })));
  });
  $("gpu-map").replaceChildren(
    table(["node", "model", "GPUs", "max free block#", "jobs"], rows));
}

function renderStarving(s) {
  if (!s.starving.length) {
    $("starving").replaceChildren(el("p", {class: "empty", text: "none"}));
    return;
  }
  const rows = s.starving.map((j) => el("tr", {data: {job: j.job_id}},
    el("td", {text: j.job_id}), el("td", {text: j.user}), el("td", {text: j.partition}),
    el("td", {text: j.request}), el("td", {text: j.reason}), el("td", {text: j.message})));
  $("starving").replaceChildren(
    table(["job", "user", "partition", "request", "reason", "why"], rows));
}

// ---- history chart ---------------------------------------------------------------------

const SERIES = [
  {key: "free", label: "free GPUs", cls: "free", colour: "#9fb7cf", fill: true},
  {key: "unusable", label: "free but unusable", cls: "unusable", colour: "#d6452f"},
  {key: "falsely_starved", label: "falsely starved jobs", cls: "starved", colour: "#6a3d9a"},
];

// The smallest of 1, 2, 3, 4, 5, 6, 8 (times a power of ten) at least v: round tick steps.
function niceStep(v) {
  const scale = 10 ** Math.floor(Math.log10(v));
  return scale * [1, 2, 3, 4, 5, 6, 8, 10].find((m) => m * scale >= v);
}

function renderHistory(h) {
  const box = $("history");
  if (!h.series.length) {
    box.replaceChildren(el("p", {class: "empty", text: h.note || "no data in this window"}));
    return;
  }
  const W = 960, H = 260, L = 44, R = 12, T = 10, B = 28;
  // From the first data point, not the window's start: a young database fills the chart.
  const t0 = Math.max(Date.parse(h.since), Date.parse(h.series[0].t)), t1 = Date.parse(h.until);
  const peak = Math.max(1, ...h.series.flatMap((p) => SERIES.map((s) => p[s.key])));
  const top = 4 * niceStep(peak / 4);
  const x = (iso) => L + Math.max(0, Date.parse(iso) - t0) / Math.max(1, t1 - t0) * (W - L - R);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const chart = svg("svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
                            "aria-label": "fragmentation over time"});
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    chart.append(svg("line", {class: "axis", x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    chart.append(svg("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"},
                     Number.isInteger(v) ? v : v.toFixed(1)));
  }
  for (const [iso, anchor] of [[new Date(t0).toISOString(), "start"], [h.until, "end"]]) {
    chart.append(svg("text", {x: x(iso), y: H - 8, "text-anchor": anchor}, time(iso)));
  }
  const step = h.resolution_s * 1000;
  for (const s of SERIES) {
    // Step lines: each bucket's mean holds until the next bucket starts.
    const pts = [];
    for (const p of h.series) {
      const a = x(p.t), b = x(new Date(Date.parse(p.t) + step).toISOString());
      pts.push(`${a},${y(p[s.key])}`, `${Math.min(b, W - R)},${y(p[s.key])}`);
    }
    if (s.fill) {
      const first = x(h.series[0].t), last = pts[pts.length - 1].split(",")[0];
      chart.append(svg("polygon", {fill: s.colour, "fill-opacity": 0.45, stroke: "none",
        points: `${first},${y(0)} ${pts.join(" ")} ${last},${y(0)}`, "data-series": s.key}));
    } else {
      chart.append(svg("polyline", {fill: "none", stroke: s.colour, "stroke-width": 2,
                                    points: pts.join(" "), "data-series": s.key}));
    }
  }
  const legend = el("div", {class: "chart-legend"}, ...SERIES.map((s) =>
    el("span", {}, el("span", {class: `swatch ${s.cls}`}), s.label)),
    el("span", {text: `${h.snapshots} snapshots, ${Math.round(h.resolution_s / 60)}-minute means`}));
  const worst = (h.nodes || []).slice(0, 5).map((n) => el("tr", {},
    el("td", {text: n.node}), el("td", {class: "num", text: n.unusable_gpu_hours.toFixed(1)}),
    el("td", {class: "num", text: n.unusable_hours.toFixed(1)}),
    el("td", {class: "num", text: n.mean_free.toFixed(1)})));
  box.replaceChildren(legend, chart, worst.length ? el("h3", {text: "Most fragmented nodes"}) : "",
    worst.length ? table(["node", "unusable GPU·h#", "hours with unusable GPUs#", "mean free#"], worst) : "");
}

// ---- impact: before and after ----------------------------------------------------------

function fmt(v, unit) {
  if (v === null || v === undefined) return "–";
  const digits = Math.abs(v) < 10 ? 2 : Math.abs(v) < 1000 ? 1 : 0;
  return v.toFixed(digits) + (unit === "h" ? " h" : "");
}

function signed(v, unit) {
  return v === null || v === undefined ? "–" : (v > 0 ? "+" : "") + fmt(v, unit);
}

function impactChart(r) {
  const W = 960, H = 180, L = 44, R = 12, T = 10, B = 28;
  const pts = r.series;
  const t0 = Date.parse(pts[0].t), t1 = Date.parse(r.until);
  const peak = Math.max(1, ...pts.map((p) => Math.max(p.unusable, p.falsely_starved_gpus || 0)));
  const top = 4 * niceStep(peak / 4);
  const x = (iso) => L + Math.max(0, Date.parse(iso) - t0) / Math.max(1, t1 - t0) * (W - L - R);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const chart = svg("svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
                            "aria-label": "unusable GPUs before and after the change"});
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    chart.append(svg("line", {class: "axis", x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    chart.append(svg("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"},
                     Number.isInteger(v) ? v : v.toFixed(1)));
  }
  for (const [key, colour] of [["unusable", "#d6452f"], ["falsely_starved_gpus", "#6a3d9a"]]) {
    chart.append(svg("polyline", {fill: "none", stroke: colour, "stroke-width": 2,
      points: pts.map((p) => `${x(p.t)},${y(p[key] || 0)}`).join(" "), "data-series": key}));
  }
  const cx = x(r.change_at);
  chart.append(svg("line", {class: "change", x1: cx, x2: cx, y1: T, y2: H - B}));
  chart.append(svg("text", {x: cx + 4, y: T + 12}, "change"));
  chart.append(svg("text", {x: L, y: H - 8, "text-anchor": "start"}, time(pts[0].t)));
  chart.append(svg("text", {x: W - R, y: H - 8, "text-anchor": "end"}, time(r.until)));
  return chart;
}

function periodLine(p) {
  const plans = Object.entries(p.plans).map(([k, n]) => `${n} ${k}`).join(", ") || "none";
  return `${p.name}: ${p.jobs} jobs started (median wait ${fmt(p.wait_median_h, "h")}), ` +
    `plans ${plans}, ${p.requeues} requeues (${p.gpu_hours_lost.toFixed(1)} GPU-h lost)`;
}

function renderImpact(r) {
  const box = $("impact");
  if (r.note) {
    box.replaceChildren(el("p", {class: "empty", text: r.note}));
    return;
  }
  const rows = r.comparisons.map((c) => el("tr", {},
    el("td", {text: c.label}), el("td", {class: "num", text: fmt(c.before, c.unit)}),
    el("td", {class: "num", text: fmt(c.after, c.unit)}),
    el("td", {class: "num", text: signed(c.difference, c.unit)}),
    el("td", {class: "num", text: c.low === null ? "–" : `${signed(c.low)} … ${signed(c.high)}`}),
    el("td", {class: `verdict ${c.verdict.replace(/ /g, "-")}`, text: c.verdict})));
  box.replaceChildren(
    el("p", {text: `change at ${time(r.change_at)} (${r.change})`}),
    r.series.length ? impactChart(r) : "",
    el("div", {class: "chart-legend"},
      el("span", {}, el("span", {class: "swatch unusable"}), "unusable GPUs"),
      el("span", {}, el("span", {class: "swatch starved"}), "falsely starved GPUs")),
    table(["", "before#", "after#", "change#", "95 % interval#", ""], rows),
    el("p", {class: "note", text: periodLine(r.before)}),
    el("p", {class: "note", text: periodLine(r.after)}),
    ...r.notes.map((n) => el("p", {class: "note", text: n})));
}

// ---- plans -----------------------------------------------------------------------------

function planSummary(p) {
  const served = p.targets.filter((t) => t.served).map((t) => t.job_id);
  const what = p.kind !== "defrag" ? p.kind
    : served.length ? `start ${served.join(", ")} by requeuing ${p.victims.map((v) => v.job_id).join(", ") || "nothing"}`
    : "no target served";
  return el("summary", {},
    el("b", {text: `plan ${p.id}`}), " ", el("span", {class: `badge ${p.status}`, text: p.status}),
    " ", el("span", {class: "badge", text: p.mode}), ` ${time(p.created_at)} · ${what}`);
}

function planBody(p) {
  const parts = [];
  if (p.note) parts.push(el("p", {class: "note", text: p.note}));
  if (p.targets.length) {
    parts.push(table(["target", "user", "request", "placement", "served"], p.targets.map((t) =>
      el("tr", {data: {job: t.job_id}}, el("td", {text: t.job_id}), el("td", {text: t.user}),
         el("td", {text: t.request}),
         el("td", {text: t.placements.map((pl) => `${pl.node}: GPUs ${pl.gpus.join(",")}`).join("; ")}),
         el("td", {text: t.served ? "yes" : "no"})))));
  }
  if (p.victims.length) {
    parts.push(table(["victim", "user", "GPUs", "lost GPU·h#", "why"], p.victims.map((v) =>
      el("tr", {data: {job: v.job_id}}, el("td", {text: v.job_id}), el("td", {text: v.user}),
         el("td", {text: Object.entries(v.gpus).map(([n, g]) => `${n}: ${g.join(",")}`).join("; ")}),
         el("td", {class: "num", text: v.lost_gpu_hours.toFixed(2)}), el("td", {text: v.reason})))));
  }
  parts.push(el("h4", {text: "Steps"}));
  parts.push(p.steps.length ? table(["#", "action", "target", "state", "error", "finished"],
    p.steps.map((s) => el("tr", {data: {step: s.seq, state: s.state}},
      el("td", {text: s.seq}), el("td", {text: s.action}), el("td", {text: s.target}),
      // A dry-run step ran in the sandbox only: its "done" never happened in Slurm.
      el("td", {}, el("span", {class: `badge ${s.state}`,
        text: p.mode === "dry-run" && s.state === "done" ? "not executed (dry-run)" : s.state})),
      el("td", {text: s.error}), el("td", {text: time(s.finished_at)}))))
    : el("p", {class: "empty", text: "no steps"}));
  parts.push(el("h4", {text: "Slurm commands"}));
  parts.push(p.commands.length ? table(["when", "command", "exit", "output", "s#"],
    p.commands.map((c) => el("tr", {},
      el("td", {text: time(c.started_at) + (c.dry_run ? " (dry-run)" : "")}),
      el("td", {}, el("code", {text: c.argv.join(" ")})),
      el("td", {class: c.executed === false ? "" : "num", text: c.outcome}),
      el("td", {}, el("pre", {text: [c.stdout, c.stderr].filter(Boolean).join("\n")})),
      el("td", {class: "num", text: c.duration_s.toFixed(2)}))))
    : el("p", {class: "empty", text: "no Slurm commands"}));
  return parts;
}

function planElement(p, newest) {
  const expanded = openPlans.has(p.id) || (!closedPlans.has(p.id) && (p.open || newest));
  const details = el("details", {class: "plan", data: {plan: p.id, status: p.status,
    targets: p.targets.map((t) => t.job_id).join(" "), victims: p.victims.map((v) => v.job_id).join(" ")}},
    planSummary(p), ...planBody(p));
  details.open = expanded;
  details.addEventListener("toggle", () => {
    (details.open ? openPlans : closedPlans).add(p.id);
    (details.open ? closedPlans : openPlans).delete(p.id);
  });
  return details;
}

function renderPlans(body) {
  const current = body.plans.filter((p) => p.open);
  const past = body.plans.filter((p) => !p.open);
  const box = $("plans");
  if (!body.plans.length) {
    box.replaceChildren(el("p", {class: "empty", text: body.note || "no plans yet"}));
    return;
  }
  box.replaceChildren(
    el("h3", {text: `In progress (${current.length})`}),
    ...(current.length ? current.map((p) => planElement(p, false)) : [el("p", {class: "empty", text: "none"})]),
    el("h3", {text: `Past (${past.length} most recent)`}),
    ...past.map((p, i) => planElement(p, i === 0 && !current.length)));
}

// ---- refresh loop ----------------------------------------------------------------------

async function refresh() {
  const since = encodeURIComponent($("since").value);
  const impactSince = encodeURIComponent($("impact-since").value);
  const [snap, hist, plans, impact] = await Promise.allSettled([
    getJSON("api/snapshot"), getJSON(`api/history?since=${since}`), getJSON("api/plans"),
    getJSON(`api/impact?since=${impactSince}`)]);
  const errors = [];
  if (snap.status === "fulfilled") {
    renderSummary(snap.value); renderMap(snap.value); renderStarving(snap.value);
  } else errors.push(`snapshot: ${snap.reason.message}`);
  if (hist.status === "fulfilled") renderHistory(hist.value);
  else errors.push(`history: ${hist.reason.message}`);
  if (plans.status === "fulfilled") renderPlans(plans.value);
  else errors.push(`plans: ${plans.reason.message}`);
  if (impact.status === "fulfilled") renderImpact(impact.value);
  else errors.push(`impact: ${impact.reason.message}`);
  const status = $("status");
  status.className = errors.length ? "status error" : "status";
  status.textContent = errors.length ? errors.join(" · ")
    : `updated ${new Date().toLocaleTimeString([], {hour12: false})}`;
  document.body.dataset.loaded = "true"; // for tests: one full round has been drawn
}

$("since").addEventListener("change", refresh);
$("impact-since").addEventListener("change", refresh);
refresh();
setInterval(refresh, REFRESH_MS);
