// Fairway's dashboard: a page per view, drawn from the HTTP API (see
// /api/openapi.json), kept live by the event stream. Everything a tenant
// wrote (names, args, errors, logs) reaches the page through textContent
// only, never as HTML.
"use strict";

const state = { draws: 0, bulkResult: null, role: null, csrf: "", group: "", window: "1h", live: null, liveOK: false, refresh: null, pending: false, jobsCursor: [],
  limitDraft: { kind: "task", name: "", max: "", error: null }, rateDraft: { task: "", group: "", rate: "", error: null },
  weightDrafts: {}, weightDraft: { group: "", weight: "" }, weightError: null };
const COLORS = ["#2f6fdb", "#1f9d55", "#c98a0b", "#d64545", "#8a4fd1", "#13a3a3", "#d1559b", "#6b7d1f", "#a0522d", "#5a6bff"];
const STATE_COLOR = { success: "var(--ok)", failed: "var(--bad)", cancelled: "var(--idle)" };

// h builds an element: h("a", {href: "#"}, "text", child…).
function h(tag, attrs, ...children) {
  const svg = ["svg", "rect", "line", "text", "tspan", "polyline", "g", "title", "path", "defs", "marker"].includes(tag);
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function toast(msg, bad) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.className = "toast" + (bad ? " bad" : "");
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 4000);
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") opts.headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const e = new Error((data.error && data.error.message) || res.statusText);
    e.status = res.status;
    e.code = data.error && data.error.code;
    e.field = data.error && data.error.field;
    if (res.status === 401 && path !== "/api/login") showLogin();
    throw e;
  }
  return data;
}

// ---- formatting

const fmtNum = (n) => (n ?? 0).toLocaleString("en");
function fmtSecs(s) {
  if (!s) return "0 ms";
  if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 1 : 0) + " ms";
  if (s < 120) return s.toFixed(s < 10 ? 2 : 1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function fmtTime(t) {
  if (!t) return "";
  const d = new Date(t);
  return d.toLocaleString(undefined, { hour12: false });
}
// browserZone is the zone this browser shows times in (fmtTime).
const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
// fmtIn shows a time in a zone (an IANA name or UTC), the zone said: the
// browser's, said as well, when it does not know that zone.
function fmtIn(t, zone) {
  if (zone) {
    try {
      return new Date(t).toLocaleString(undefined, { hour12: false, timeZone: zone }) + " " + zone;
    } catch { /* a zone this browser does not know */ }
  }
  return fmtTime(t) + " " + browserZone();
}
function ago(t) {
  if (!t) return "";
  const s = (Date.now() - new Date(t).getTime()) / 1000;
  if (s < 0) return "in " + fmtSecs(-s);
  return fmtSecs(s) + " ago";
}
// fmtBucket names a bucket's width: "minute", "5 minutes", "15 s".
function fmtBucket(s) {
  if (s % 3600 === 0) return s === 3600 ? "hour" : `${s / 3600} hours`;
  if (s % 60 === 0) return s === 60 ? "minute" : `${s / 60} minutes`;
  return `${s} s`;
}
// fmtRate shows jobs per second, or per minute or hour when fewer.
function fmtRate(perSec) {
  if (perSec >= 1) return perSec.toFixed(perSec < 10 ? 1 : 0) + "/s";
  if (perSec * 60 >= 1) return (perSec * 60).toFixed(1) + "/min";
  return (perSec * 3600).toFixed(perSec > 0 ? 1 : 0) + "/h";
}
const stateTag = (s) => h("span", { class: "state " + s }, s);
// nodes drops the children a view leaves out (null, undefined, false), as
// h does: replaceChildren and append would show each as the text "null".
const nodes = (...children) => children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false);

function empty(title, ...lines) {
  return h("div", { class: "empty" }, h("strong", {}, title), ...lines.map((l) => h("div", {}, l)));
}

// ---- charts (inline SVG)

// barChart draws stacked bars per bucket: series [{name, color, values}].
function barChart(buckets, series, opts = {}) {
  const W = 800, H = 220, L = 44, B = 22, T = 8;
  const n = buckets.length;
  const totals = buckets.map((_, i) => series.reduce((a, s) => a + (s.values[i] || 0), 0));
  const max = Math.max(1, ...totals);
  const bw = (W - L) / Math.max(1, n);
  const svg = h("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": opts.label || "chart" });
  for (const f of [0, 0.5, 1]) {
    const y = T + (H - B - T) * (1 - f);
    svg.append(h("line", { class: "axis", x1: L, x2: W, y1: y, y2: y }), h("text", { x: L - 6, y: y + 4, "text-anchor": "end" }, opts.fmt ? opts.fmt(max * f) : fmtNum(Math.round(max * f))));
  }
  buckets.forEach((b, i) => {
    let y = H - B;
    for (const s of series) {
      const v = s.values[i] || 0;
      if (!v) continue;
      const hgt = ((H - B - T) * v) / max;
      y -= hgt;
      svg.append(h("rect", { x: L + i * bw + 1, y, width: Math.max(1, bw - 2), height: hgt, fill: s.color }, h("title", {}, `${fmtTime(b)} ${s.name}: ${opts.fmt ? opts.fmt(v) : fmtNum(v)}`)));
    }
  });
  const ticks = Math.min(6, n);
  for (let k = 0; k < ticks; k++) {
    const i = Math.floor((k * (n - 1)) / Math.max(1, ticks - 1));
    const anchor = k === 0 ? "start" : k === ticks - 1 ? "end" : "middle";
    const x = k === 0 ? L + i * bw : k === ticks - 1 ? L + (i + 1) * bw : L + i * bw + bw / 2;
    svg.append(h("text", { x, y: H - 6, "text-anchor": anchor }, new Date(buckets[i]).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hour12: false })));
  }
  return svg;
}

function legend(series) {
  return h("div", { class: "legend" }, series.map((s) => {
    const sw = h("i");
    sw.style.background = s.color;
    return h("span", {}, sw, s.name);
  }));
}

// ---- login and session

function showLogin(message) {
  state.role = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  document.getElementById("view").replaceChildren();
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = message || "";
  if (state.live) { state.live.close(); state.live = null; }
  setLive(false);
}

function loggedIn(s) {
  state.role = s.role;
  state.csrf = s.csrf;
  state.group = s.group || "";
  document.getElementById("login").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  document.getElementById("who").textContent = (s.role === "admin" ? "admin" : "read-only") + (state.group ? " · group " + state.group : "");
  for (const a of document.querySelectorAll("nav a.operator")) a.hidden = !!state.group;
  document.body.dataset.role = s.role;
  connectLive();
  route();
}

async function login(token) {
  try {
    loggedIn(await api("POST", "/api/login", { token }));
  } catch (e) {
    showLogin(e.message);
  }
}

// ---- live events

function setLive(on) {
  const el = document.getElementById("live");
  el.textContent = on ? "live" : "offline";
  el.className = "live " + (on ? "on" : "off");
  state.liveOK = on;
}

function connectLive() {
  if (state.live) state.live.close();
  const es = new EventSource("/api/events");
  state.live = es;
  es.onopen = () => setLive(true);
  es.onerror = () => setLive(false);
  es.addEventListener("job", (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    document.dispatchEvent(new CustomEvent("fairway-event", { detail: ev }));
    scheduleRefresh();
  });
}

// scheduleRefresh redraws the current view at most once a second while
// events arrive; not while a field of the view's forms has the focus (a
// redraw would take what is being typed away): then once it has left.
function scheduleRefresh() {
  if (state.pending) return;
  state.pending = true;
  setTimeout(() => {
    state.pending = false;
    const f = document.activeElement;
    if (f && f.form && f.tagName !== "BUTTON" && f.closest("#view")) scheduleRefresh();
    else if (state.refresh) state.refresh();
  }, 1000);
}

// ---- views

function windowPicker(onChange) {
  const sel = h("select", { id: "window", "aria-label": "time window", onchange: (e) => { state.window = e.target.value; onChange(); } },
    ["15m", "1h", "6h", "24h"].map((w) => h("option", { value: w, selected: w === state.window }, "last " + w)));
  return sel;
}

async function viewOverview(root) {
  // The partitions are the operators': a dashboard confined to a group
  // does not ask for them.
  const [st, parts] = await Promise.all([api("GET", "/api/stats?window=" + state.window), state.group ? null : api("GET", "/api/partitions")]);
  const fin = { success: 0, failed: 0, cancelled: 0 };
  const per = { success: st.buckets.map(() => 0), failed: st.buckets.map(() => 0), cancelled: st.buckets.map(() => 0) };
  for (const f of st.finished || []) { fin[f.state] += f.jobs; per[f.state][f.bucket] += f.jobs; }
  let waiting = 0, running = 0;
  for (const q of st.queue || []) {
    if (q.state === "waiting" || q.state === "stuck") waiting += q.jobs;
    if (q.state === "running" || q.state === "scheduled") running += q.jobs;
  }
  const all = st.all || {};
  const processed = fin.success + fin.failed + fin.cancelled;
  const tile = (id, n, l) => h("div", { class: "tile", id }, h("div", { class: "n" }, n), h("div", { class: "l" }, l));
  const rate = processed / (st.buckets.length * st.bucket_seconds || 1);
  root.replaceChildren(
    h("div", { class: "bar" }, h("h1", {}, "Overview"), h("span", { class: "spacer" }), windowPicker(() => route())),
    h("div", { class: "tiles" },
      tile("t-processed", fmtNum(processed), "finished in the window"),
      tile("t-rate", fmtRate(rate), "throughput"),
      tile("t-failed", fmtNum(fin.failed), "failed"),
      tile("t-cancelled", fmtNum(fin.cancelled), "cancelled"),
      tile("t-waiting", fmtNum(waiting), "waiting now"),
      tile("t-running", fmtNum(running), "running now"),
      tile("t-wait", fmtSecs(all.wait_p50) + " / " + fmtSecs(all.wait_p99), "wait p50 / p99"),
      tile("t-run", fmtSecs(all.run_p50) + " / " + fmtSecs(all.run_p99), "run p50 / p99")),
  );
  if (processed === 0 && waiting === 0 && running === 0) {
    root.append(h("div", { class: "card" }, empty("No jobs in this window yet",
      "Submit one from a terminal: fairway submit echo --group acme --args '{\"hello\":\"world\"}'",
      "It appears here, in Jobs and in Fairness as it moves.")));
    if (parts) root.append(partitionsCard(parts.partitions || []));
    return;
  }
  const series = [
    { name: "success", color: "#1f9d55", values: per.success },
    { name: "failed", color: "#d64545", values: per.failed },
    { name: "cancelled", color: "#8a96a3", values: per.cancelled },
  ];
  const tasks = (st.tasks || []).map((t) => h("tr", {},
    h("td", {}, t.task), h("td", { class: "num" }, fmtNum(t.started)), h("td", { class: "num" }, fmtNum(t.ended)),
    h("td", { class: "num" }, fmtSecs(t.wait_p50)), h("td", { class: "num" }, fmtSecs(t.wait_p99)),
    h("td", { class: "num" }, fmtSecs(t.run_p50)), h("td", { class: "num" }, fmtSecs(t.run_p99))));
  root.append(
    h("div", { class: "card" }, h("h2", {}, `Finished per ${fmtBucket(st.bucket_seconds)}`), barChart(st.buckets, series, { label: "finished jobs per bucket" }), legend(series)),
    h("div", { class: "card" }, h("h2", {}, "Per task"),
      h("table", { id: "task-table" }, h("thead", {}, h("tr", {}, ["task", "started", "ended", "wait p50", "wait p99", "run p50", "run p99"].map((c, i) => h("th", { class: i ? "num" : "" }, c)))), h("tbody", {}, tasks))),
  );
  if (parts) root.append(partitionsCard(parts.partitions || []));
}

// partitionsCard lists the journal's partitions: who leads each, its
// lease, database, jobs and how far its events trail (docs/operations.md,
// "Partitions").
function partitionsCard(list) {
  const jobs = (p, ...states) => states.reduce((n, s) => n + ((p.jobs || {})[s] || 0), 0);
  const lease = (p) => !p.leader ? "-" : p.lease_left_ms > 0 ? `${fmtSecs(p.lease_left_ms / 1000)} left` : `ran out ${fmtSecs(-p.lease_left_ms / 1000)} ago`;
  const lag = (p) => p.unpublished_rows > 0 ? `${fmtNum(p.unpublished_rows)} rows, ${fmtSecs(p.lag_ms / 1000)}` : "none";
  return h("div", { class: "card" }, h("h2", {}, "Partitions"),
    h("table", { id: "partition-table" },
      h("thead", {}, h("tr", {}, ["partition", "leader", "epoch", "lease", "database", "groups", "waiting", "running", "held", "event lag"].map((c, i) => h("th", { class: i >= 5 && i <= 8 ? "num" : "" }, c)))),
      h("tbody", {}, list.map((p) => h("tr", { dataset: { partition: String(p.partition) } },
        h("td", {}, String(p.partition)), h("td", { class: "mono" }, p.leader || (p.epoch ? "(none: given up)" : "(none yet)")), h("td", {}, String(p.epoch)), h("td", {}, lease(p)),
        h("td", { class: "mono" }, p.database), h("td", { class: "num" }, fmtNum(p.groups)),
        h("td", { class: "num" }, fmtNum(jobs(p, "waiting", "stuck"))), h("td", { class: "num" }, fmtNum(jobs(p, "scheduled", "running"))),
        h("td", { class: "num" }, fmtNum(jobs(p, "pending"))),
        h("td", {}, lag(p)))))));
}

const fmtPct = (v) => ((v || 0) * 100).toFixed(1) + "%";
const fmtWeight = (w) => String(+(+w).toFixed(3));

// shareBar draws a group's share of the slot-time as a bar, with a mark at
// its weighted fair share (none when it ran nothing: it had no share due).
function shareBar(s, color) {
  const fill = h("div", { class: "fill" });
  fill.style.width = Math.min(100, s.share * 100) + "%";
  if (color) fill.style.background = color;
  let mark = null;
  if (s.seconds > 0) {
    mark = h("div", { class: "fair" });
    mark.style.left = Math.min(100, s.fair_share * 100) + "%";
  }
  const label = `${s.group}: ${fmtPct(s.share)} of the slot-time; fair share ${s.seconds > 0 ? fmtPct(s.fair_share) : "none (it ran nothing)"}`;
  return h("div", { class: "sharebar", role: "img", "aria-label": label, title: label }, fill, mark);
}

// setWeight sets a group's weight; a refusal is shown next to the form it
// came from (state.weightError), what was typed kept across redraws.
async function setWeight(group, text, form) {
  const weight = Number(text);
  if (text.trim() === "" || !Number.isFinite(weight)) {
    state.weightError = { form, group, field: "weight", message: "a number above 0, at most 1000 (1 is the default)" };
  } else {
    try {
      await api("PUT", `/api/weights/${encodeURIComponent(group)}`, { weight });
      toast(`${group}: weight ${fmtWeight(weight)}`);
      delete state.weightDrafts[group];
      if (form === "new") state.weightDraft = { group: "", weight: "" };
      state.weightError = null;
    } catch (x) {
      if (x.status === 401) return;
      state.weightError = { form, group, field: x.field || "", message: x.message };
    }
  }
  route();
}

// weightControl is a group's weight, and for admins a field to change it.
function weightControl(s) {
  if (state.role !== "admin") return fmtWeight(s.weight);
  const err = state.weightError && state.weightError.form === "row" && state.weightError.group === s.group;
  return h("form", { class: "weight-form", novalidate: true,
    oninput: (e) => { state.weightDrafts[s.group] = e.target.value; },
    onsubmit: (e) => { e.preventDefault(); setWeight(s.group, e.currentTarget.elements.weight.value, "row"); } },
  h("input", { name: "weight", type: "number", min: 0, max: 1000, step: "any", class: "weight", value: state.weightDrafts[s.group] ?? fmtWeight(s.weight),
    "aria-label": "weight of " + s.group, "aria-invalid": err ? "true" : null }),
  h("button", { type: "submit", title: "set the weight of " + s.group }, "Set"));
}

// newWeightForm sets the weight of a group not listed (one that ran no job
// in the window).
function newWeightForm() {
  const d = state.weightDraft;
  const err = state.weightError && state.weightError.form === "new" ? state.weightError : null;
  const bad = (field) => (err && (err.field === field || (field === "weight" && !err.field)) ? "true" : null);
  return h("form", { class: "filters", id: "weight-form", novalidate: true,
    oninput: (e) => { d[e.target.name] = e.target.value; },
    onsubmit: (e) => {
      e.preventDefault();
      if (!d.group.trim()) {
        state.weightError = { form: "new", field: "group", message: "missing: the group (tenant) to weigh" };
        route();
        return;
      }
      setWeight(d.group.trim(), d.weight, "new");
    } },
  h("label", {}, "group", h("input", { name: "group", value: d.group, placeholder: "a group, e.g. acme", size: 22, autocomplete: "off", "aria-invalid": bad("group") })),
  h("label", {}, "weight", h("input", { name: "weight", type: "number", min: 0, max: 1000, step: "any", class: "weight", value: d.weight, placeholder: "1", "aria-invalid": bad("weight") })),
  h("button", { type: "submit", class: "primary" }, "Set weight"));
}

// sharesCard shows each group's share of the executors' slot-time over the
// window against its weighted fair share, and its weight.
function sharesCard(sh, colorOf) {
  const list = sh.groups || [];
  const admin = state.role === "admin";
  const ran = list.some((s) => s.seconds > 0);
  const err = state.weightError;
  const card = h("div", { class: "card", id: "shares" }, h("h2", {}, "Share of the executors' time against the fair share"));
  if (!ran) {
    card.append(empty("No job ran in this window",
      "Each tenant's share of the slot-time shows here once jobs run, with a mark at its weighted fair share.",
      list.length ? "The weights set are listed below." : "Every tenant has the default weight 1: fairway groups set-weight acme 3 gives acme three times the share."));
  }
  if (list.length) {
    card.append(h("table", { id: "share-table" },
      h("thead", {}, h("tr", {}, ["group", "share of the slot-time (mark: fair share)", "share", "fair share", "slot-time", "weight"].map((c, i) => h("th", { class: i > 1 && i < 5 ? "num" : "" }, c)))),
      h("tbody", {}, list.map((s) => h("tr", { dataset: { group: s.group } },
        h("td", {}, s.group),
        h("td", { class: "bar-cell" }, shareBar(s, colorOf(s.group))),
        h("td", { class: "num share" }, fmtPct(s.share)),
        h("td", { class: "num fair" }, s.seconds > 0 ? fmtPct(s.fair_share) : "—"),
        h("td", { class: "num" }, fmtSecs(s.seconds)),
        h("td", { class: "weight" }, weightControl(s)))))));
  }
  if (err && err.form === "row") card.append(h("p", { id: "weight-error", class: "error", role: "alert" }, `${err.group}: ${err.field ? err.field + ": " : ""}${err.message}`));
  card.append(h("p", { class: "muted" }, "The bar is each tenant's share of the executors' slot-time over the window; the mark is its weighted fair share, its weight over the weights of the tenants that ran jobs then: what it gets while they all have work. A tenant left of its mark had less work to run, or shorter jobs while fairness counts jobs (scheduler.fairness)."));
  if (admin) {
    card.append(h("h2", {}, "Weigh another group"), newWeightForm());
    if (err && err.form === "new") card.append(h("p", { id: "weight-new-error", class: "error", role: "alert" }, `${err.field ? err.field + ": " : ""}${err.message}`));
  }
  return card;
}

async function viewFairness(root) {
  // The shares and weights are the operators': a dashboard confined to a
  // group shows its queue only.
  const [data, sh] = await Promise.all([api("GET", "/api/groups?window=" + state.window), state.group ? null : api("GET", "/api/shares?window=" + state.window)]);
  const groups = data.groups || [];
  root.replaceChildren(h("div", { class: "bar" }, h("h1", {}, "Fairness"), h("span", { class: "spacer" }), windowPicker(() => route())));
  const series = groups.slice(0, COLORS.length).map((g, i) => ({ name: g.group, color: COLORS[i], values: g.share.map((v) => v * 100) }));
  const colors = new Map(series.map((s) => [s.name, s.color]));
  if (sh) root.append(sharesCard(sh, (g) => colors.get(g)));
  if (groups.length === 0) {
    root.append(h("div", { class: "card" }, empty("No tenant has jobs in this window",
      "Each group (tenant) gets its turn: submit jobs for two groups and watch their shares here.",
      "fairway submit sleep --group acme --args '{\"seconds\":2}'")));
    return;
  }
  root.append(
    h("div", { class: "card" }, h("h2", {}, "Share of the slots in use, per tenant"),
      barChart(data.buckets, series, { label: "share of slots per tenant", fmt: (v) => v.toFixed(0) + "%" }), legend(series),
      h("p", { class: "muted" }, "Each bar is the slots in use in that bucket, split by tenant. A noisy tenant that does not starve the others leaves room for theirs.")),
    h("div", { class: "card" }, h("table", { id: "group-table" },
      h("thead", {}, h("tr", {}, ["group", "waiting", "running", "pending", "oldest due", "share of slots"].map((c, i) => h("th", { class: i ? "num" : "" }, c)))),
      h("tbody", {}, groups.map((g) => h("tr", { class: "clickable", dataset: { group: g.group }, onclick: () => { location.hash = "#/jobs?group=" + encodeURIComponent(g.group); } },
        h("td", {}, g.group), h("td", { class: "num" }, fmtNum(g.waiting)), h("td", { class: "num" }, fmtNum(g.running)), h("td", { class: "num" }, fmtNum(g.pending)),
        h("td", { class: "num" }, g.oldest_due_seconds ? fmtSecs(g.oldest_due_seconds) : "—"), h("td", { class: "num" }, (g.avg_share * 100).toFixed(1) + "%")))))),
  );
}

const FILTERS = ["group", "task", "state", "priority", "since", "until", "text"];

function jobsQuery() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  const f = {};
  for (const k of FILTERS) if (q.get(k)) f[k] = q.get(k);
  return f;
}

async function viewJobs(root) {
  const f = jobsQuery();
  const params = new URLSearchParams(f);
  params.set("limit", "50");
  const cursor = state.jobsCursor[state.jobsCursor.length - 1];
  if (cursor) params.set("cursor", cursor);
  const data = await api("GET", "/api/jobs?" + params);
  const admin = state.role === "admin";
  const input = (name, attrs) => h("label", {}, name, h("input", { name, value: f[name] || "", ...attrs }));
  const form = h("form", { class: "filters", id: "job-filters", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(e.target)) if (v) q.set(k, k === "since" || k === "until" ? new Date(v).toISOString() : v);
    state.jobsCursor = [];
    location.hash = "#/jobs" + (q.toString() ? "?" + q : "");
  } },
    state.group ? null : input("group", { placeholder: "any" }),
    input("task", { placeholder: "any" }),
    h("label", {}, "state", h("select", { name: "state" }, ["", "pending", "waiting", "scheduled", "running", "stuck", "success", "failed", "cancelled"].map((s) => h("option", { value: s, selected: s === (f.state || "") }, s || "any")))),
    h("label", {}, "priority", h("select", { name: "priority" }, ["", "high", "low"].map((s) => h("option", { value: s, selected: s === (f.priority || "") }, s || "any")))),
    input("since", { type: "datetime-local", value: f.since ? toLocalInput(f.since) : "" }),
    input("until", { type: "datetime-local", value: f.until ? toLocalInput(f.until) : "" }),
    admin ? input("text", { placeholder: "in args or errors", size: 18 }) : null,
    h("button", { type: "submit", class: "primary" }, "Filter"),
    h("button", { type: "button", onclick: () => { state.jobsCursor = []; location.hash = "#/jobs"; } }, "Clear"));
  const bulk = h("div", { class: "bar", id: "bulk" },
    h("span", { class: "muted" }, "All jobs that match:"),
    ["cancel", "retry", "release"].map((a) => h("button", { type: "button", id: "bulk-" + a, disabled: !admin, title: admin ? "" : "admin only", onclick: () => bulkAction(a, f) }, a[0].toUpperCase() + a.slice(1) + " all…")),
    // The last bulk action's result stays while the view shows the same
    // filters, through live refreshes; another view or filter drops it.
    h("span", { id: "bulk-result", class: "muted" }, state.bulkResult && state.bulkResult.hash === location.hash ? state.bulkResult.text : ""));
  const jobs = data.jobs || [];
  root.replaceChildren(h("h1", {}, "Jobs"), h("div", { class: "card" }, form, bulk));
  if (jobs.length === 0) {
    root.append(h("div", { class: "card" }, empty(Object.keys(f).length ? "No job matches these filters" : "No jobs yet",
      Object.keys(f).length ? "Loosen a filter, or clear them." : "Submit one: fairway submit echo --group acme --args '{\"hello\":\"world\"}'")));
    return;
  }
  const rows = jobs.map((j) => h("tr", { class: "clickable", dataset: { id: j.id, group: j.group }, onclick: () => { location.hash = jobHash(j.group, j.id); } },
    h("td", { class: "mono" }, j.id), h("td", {}, j.group), h("td", {}, j.task), h("td", {}, stateTag(j.state)), h("td", {}, j.priority),
    h("td", { class: "num" }, j.attempt), h("td", {}, ago(j.submitted)), h("td", { class: "muted" }, (j.error || "").slice(0, 80))));
  const pager = h("div", { class: "bar" },
    h("button", { type: "button", disabled: state.jobsCursor.length === 0, onclick: () => { state.jobsCursor.pop(); route(); } }, "← Newer"),
    h("button", { type: "button", id: "next-page", disabled: !data.next_cursor, onclick: () => { state.jobsCursor.push(data.next_cursor); route(); } }, "Older →"));
  root.append(h("div", { class: "card" }, h("table", { id: "job-table" },
    h("thead", {}, h("tr", {}, ["id", "group", "task", "state", "priority", "attempt", "submitted", "error"].map((c) => h("th", { class: c === "attempt" ? "num" : "" }, c)))),
    h("tbody", {}, rows)), pager));
}

function toLocalInput(iso) {
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

async function bulkAction(action, filter) {
  const out = document.getElementById("bulk-result");
  try {
    const preview = await api("POST", "/api/bulk", { action, filter, preview: true });
    const n = preview.matched + (preview.more ? "+" : "");
    if (preview.matched === 0) { out.textContent = "No job matches."; return; }
    if (!confirm(`${action[0].toUpperCase() + action.slice(1)} ${n} job(s) that match these filters?` + (preview.more ? " (The first batch of them: run it again for the rest.)" : ""))) return;
    const res = await api("POST", "/api/bulk", { action, filter });
    // The view is drawn again; the result stays on it.
    const text = `${action}: ${res.changed} of ${res.matched} changed` + (res.errors && res.errors.length ? `; ${res.errors.length} could not be (${res.errors[0].message})` : "");
    state.bulkResult = { text, hash: location.hash };
    toast(text);
    route();
  } catch (e) {
    toast(e.message, true);
  }
}

// ---- the dependency graph (inline SVG)

// shortID shows the end of a long id (a workflow's ids share their start,
// the time they were made): "…4f2a9c1e".
const shortID = (id) => (id.length > 12 ? "…" + id.slice(-8) : id);
const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
const jobHash = (group, id) => `#/job/${encodeURIComponent(group)}/${encodeURIComponent(id)}`;

// graphLayout places the jobs of a graph in layers, from left to right:
// a job's layer is the longest path to it from a job that depends on none
// of the others. Within a layer, a few passes order the jobs by the mean
// place of their neighbours, which keeps edges from crossing.
function graphLayout(jobs) {
  const byID = new Map(jobs.map((j) => [j.id, j]));
  const deps = new Map(jobs.map((j) => [j.id, (j.depends_on || []).filter((d) => byID.has(d))]));
  const kids = new Map(jobs.map((j) => [j.id, []]));
  for (const [id, ds] of deps) for (const d of ds) kids.get(d).push(id);
  const layerOf = new Map();
  const onPath = new Set();
  const depth = (id) => {
    if (layerOf.has(id)) return layerOf.get(id);
    if (onPath.has(id)) return 0; // a cycle is refused when stored; this only guards
    onPath.add(id);
    const l = Math.max(-1, ...deps.get(id).map(depth)) + 1;
    onPath.delete(id);
    layerOf.set(id, l);
    return l;
  };
  const layers = [];
  for (const j of jobs) (layers[depth(j.id)] ||= []).push(j.id);
  const pos = new Map();
  const place = (l) => l.forEach((id, i) => pos.set(id, i - (l.length - 1) / 2));
  layers.forEach(place);
  const mean = (ids) => (ids.length ? ids.reduce((a, d) => a + pos.get(d), 0) / ids.length : null);
  for (let pass = 0; pass < 4; pass++) {
    const down = pass % 2 === 0;
    for (const l of down ? layers.slice(1) : layers.slice(0, -1).reverse()) {
      const key = new Map(l.map((id) => [id, mean((down ? deps : kids).get(id)) ?? pos.get(id)]));
      l.sort((a, b) => key.get(a) - key.get(b));
      place(l);
    }
  }
  return { byID, deps, layers };
}

// graphSVG draws a job's graph: a box per job, coloured by its state, an
// arrow from each dependency to its dependent; a click opens a job.
function graphSVG(jobs, focus) {
  const { byID, deps, layers } = graphLayout(jobs);
  const W = 196, H = 48, GX = 64, GY = 16, P = 10;
  const rows = Math.max(...layers.map((l) => l.length));
  const at = new Map();
  layers.forEach((l, c) => l.forEach((id, r) => at.set(id, { x: P + c * (W + GX), y: P + (r + (rows - l.length) / 2) * (H + GY) })));
  const width = 2 * P + layers.length * W + (layers.length - 1) * GX, height = 2 * P + rows * H + (rows - 1) * GY;
  const svg = h("svg", { class: "graph", id: "graph-svg", width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": `dependency graph of ${jobs.length} jobs` },
    h("defs", {}, h("marker", { id: "graph-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      h("path", { d: "M0,0 L10,5 L0,10 z" }))));
  for (const [id, ds] of deps) {
    const to = at.get(id);
    for (const d of ds) {
      const from = at.get(d);
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x - 1, y2 = to.y + H / 2, mx = (x1 + x2) / 2;
      svg.append(h("path", { class: "edge" + (byID.get(d).state === "success" ? "" : " open"), "marker-end": "url(#graph-arrow)",
        d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, dataset: { from: d, to: id } }));
    }
  }
  for (const [id, { x, y }] of at) {
    const j = byID.get(id);
    const open = () => { location.hash = jobHash(j.group, j.id); };
    svg.append(h("g", { class: `node ${j.state}` + (id === focus ? " current" : ""), dataset: { id }, tabindex: 0, role: "link", "aria-current": id === focus ? "page" : null,
      "aria-label": `${j.task} ${j.id}, ${j.state}`, onclick: open, onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } } },
      h("title", {}, `${j.task} ${j.id}: ${j.state}` + (j.subject ? `\n${j.subject}` : "") + (j.error ? `\n${j.error}` : "")),
      id === focus ? h("rect", { class: "halo", x: x - 4, y: y - 4, width: W + 8, height: H + 8, rx: 10 }) : null,
      h("rect", { x, y, width: W, height: H, rx: 7 }),
      h("text", { x: x + 10, y: y + 19, class: "task" }, clip(j.task, 24), j.subject && j.task.length < 20 ? h("tspan", { class: "subject" }, " " + clip(j.subject, 24 - j.task.length)) : null),
      h("text", { x: x + 10, y: y + 37, class: "sub" }, h("tspan", { class: "id" }, shortID(j.id)), " · ", h("tspan", { class: "st" }, j.state === "running" ? `running ${j.progress || 0}%` : j.state))));
  }
  return svg;
}

// waitsFor lists the dependencies a blocked job still waits for.
function waitsFor(j, byID) {
  if (j.state !== "pending" || !(j.depends_on || []).length) return [];
  return j.depends_on.filter((d) => (byID.get(d) || {}).state !== "success");
}

// dependencyPanel shows a job's graph, and the same as a list (for screen
// readers, and to copy ids from); null when the job stands alone.
function dependencyPanel(jobs, focus, truncated) {
  if (!jobs || jobs.length < 2) return null;
  const byID = new Map(jobs.map((j) => [j.id, j]));
  const items = jobs.map((j) => {
    const waits = waitsFor(j, byID);
    return h("li", { dataset: { id: j.id } }, stateTag(j.state), " ",
      j.id === focus ? h("strong", { class: "mono" }, j.id) : h("a", { class: "mono", href: jobHash(j.group, j.id) }, j.id),
      " ", j.task, j.subject ? h("span", { class: "muted" }, " ", j.subject) : "", j.id === focus ? " (this job)" : "",
      waits.length ? h("span", { class: "muted" }, " — waits for ", waits.join(", ")) : "",
      j.error && j.state !== "success" ? h("span", { class: "error" }, " — ", clip(j.error, 120)) : "");
  });
  return h("div", { class: "card", id: "dependencies" }, h("h2", {}, "Dependencies"),
    h("div", { class: "graph-scroll" }, graphSVG(jobs, focus)),
    // Open for a small graph; a large one's list is a click away.
    h("details", { class: "graph-list", open: jobs.length <= 12 }, h("summary", { class: "muted" }, `As a list (${jobs.length} jobs)`), h("ul", { id: "graph-list" }, items)),
    truncated ? h("p", { class: "muted", id: "graph-truncated" }, `Only the job's nearest relatives are shown: ${truncated}.`) : null);
}

async function viewJob(root, group, id) {
  const path = `/api/jobs/${encodeURIComponent(group)}/${encodeURIComponent(id)}`;
  // The graph is an extra: the job's page draws without it.
  const [data, graph] = await Promise.all([api("GET", path), api("GET", path + "/graph").catch(() => ({ jobs: [] }))]);
  const j = data.job;
  const admin = state.role === "admin";
  const act = (name, label, enabled, body) => h("button", { type: "button", id: "job-" + name, disabled: !admin || !enabled, title: admin ? "" : "admin only",
    onclick: async () => {
      try {
        await api("POST", `${path}/${name}`, body);
        toast(`${label}: done`);
        route();
      } catch (e) { toast(e.message, true); }
    } }, label);
  const final = ["success", "failed", "cancelled"].includes(j.state);
  const progress = h("div", { class: "progress", title: j.progress + "%" }, (() => { const d = h("div"); d.style.width = (j.progress || 0) + "%"; return d; })());
  const kv = (k, v) => [h("dt", {}, k), h("dd", {}, v ?? "")];
  // Attempts, from the events: each start and how it ended.
  const attempts = new Map();
  for (const ev of data.events) {
    if (!ev.attempt) continue;
    const a = attempts.get(ev.attempt) || { n: ev.attempt, states: [] };
    a.states.push(ev);
    attempts.set(ev.attempt, a);
  }
  root.replaceChildren(...nodes(
    h("div", { class: "bar" }, h("a", { href: "#/jobs" }, "← Jobs"), h("h1", { id: "job-title" }, `${j.task} `, h("span", { class: "mono" }, j.id)), stateTag(j.state)),
    h("div", { class: "bar" },
      act("cancel", "Cancel", !final), act("retry", "Retry", j.state === "failed" || j.state === "cancelled"), act("release", "Release", j.state === "pending"),
      act("priority", j.priority === "high" ? "Make low priority" : "Make high priority", ["pending", "waiting", "stuck"].includes(j.state), { priority: j.priority === "high" ? "low" : "high" })),
    h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Job"), h("dl", { class: "kv" },
        kv("group", j.group), kv("task", j.task), kv("state", stateTag(j.state)), kv("priority", j.priority), kv("attempt", `${j.attempt} (retries ${j.retries} of ${j.max_retries})`),
        kv("progress", progress), kv("submitted", fmtTime(j.submitted)), kv("started", fmtTime(j.started)), kv("finished", fmtTime(j.finished)),
        kv("executor", j.worker), kv("tracker", j.tracker), kv("subject", j.subject), kv("submitter", j.submitter), kv("error", j.error ? h("span", { class: "error" }, j.error) : ""))),
      h("div", { class: "card" }, h("h2", {}, "Timeline"),
        data.events.length ? h("ol", { class: "timeline", id: "timeline" }, data.events.map((ev) => h("li", {},
          h("div", {}, stateTag(ev.state), " ", h("span", { class: "muted" }, fmtTime(ev.time)), ev.attempt ? ` · attempt ${ev.attempt}` : "", ev.executor ? ` · ${ev.executor}` : ""),
          ev.error ? h("div", { class: "error" }, ev.error) : null)))
          : empty("No events in the stream", "Events older than the stream keeps (nats.events-max-bytes) are gone; the job's row above is the truth."),
        data.events_more ? h("p", { class: "muted" }, "More events than one look reads: the timeline may be cut.") : null)),
    dependencyPanel(graph.jobs, j.id, graph.truncated),
    h("div", { class: "card" }, h("h2", {}, "Attempts"),
      attempts.size ? h("table", { id: "attempts" }, h("thead", {}, h("tr", {}, ["attempt", "states", "error"].map((c) => h("th", {}, c)))),
        h("tbody", {}, [...attempts.values()].map((a) => h("tr", {}, h("td", {}, a.n), h("td", {}, a.states.map((e) => [stateTag(e.state), " "])),
          h("td", { class: "error" }, a.states.map((e) => e.error).filter(Boolean).join("; "))))))
        : empty("Not run yet", j.state === "pending" ? "It is held: Release it to let it run." : "It waits for its turn and a free executor slot.")),
    admin ? h("div", { class: "grid2" },
      h("div", { class: "card" }, h("h2", {}, "Args"), h("pre", { id: "job-args" }, JSON.stringify(j.args, null, 2))),
      h("div", { class: "card" }, h("h2", {}, "Result"), j.result !== undefined && j.result !== null ? h("pre", { id: "job-result" }, JSON.stringify(j.result, null, 2)) : empty("No result yet")))
      : h("p", { class: "muted" }, "The read-only role does not see args or results."),
    h("div", { class: "card" }, h("h2", {}, "Log"),
      data.logs.length ? h("pre", { id: "job-log" }, data.logs.map((l) => `${fmtTime(l.time)} [${l.attempt}] ${l.level.toUpperCase()} ${l.message}`).join("\n"))
        : empty("No log lines", "A task logs through job.Log in Go (or the executor protocol's logs).")),
  ));
}

async function viewExecutors(root) {
  const data = await api("GET", "/api/executors");
  const list = data.executors || [];
  const admin = state.role === "admin";
  root.replaceChildren(h("h1", {}, "Executors"));
  if (list.length === 0) {
    root.append(h("div", { class: "card" }, empty("No executor has registered", "Start one: fairway executor --app-id worker-1 (fairway dev runs one).")));
    return;
  }
  // Only a live executor can be drained: one that has left (gone, or
  // deregistered) has no button, and a drain the coordinators refuse (it
  // left since the view was drawn) is shown, and the view drawn again.
  const drain = (e) => h("button", { type: "button", class: "danger", disabled: !admin, title: "take no new jobs, finish the running ones, then stop",
    onclick: async () => {
      if (!confirm(`Drain ${e.app_id}? It takes no new jobs, finishes its running ones, deregisters and exits.`)) return;
      try { await api("POST", `/api/executors/${encodeURIComponent(e.app_id)}/drain`); toast(`${e.app_id} is draining`); setTimeout(route, 1500); } catch (err) { toast(err.message, true); route(); }
    } }, "Drain");
  const left = (e) => h("span", { class: "muted", title: "it has left: nothing to drain" }, e.left ? `left ${ago(e.left)}` : "left");
  root.append(h("div", { class: "card" }, h("table", { id: "executor-table" },
    h("thead", {}, h("tr", {}, ["executor", "host", "state", "slots in use", "tasks", "started", "last heartbeat", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, list.map((e) => h("tr", { dataset: { app: e.app_id } },
      h("td", { class: "mono" }, e.app_id), h("td", {}, e.host), h("td", {}, e.state || "live"),
      h("td", {}, `${e.running} / ${e.slots}`), h("td", {}, (e.tasks || []).join(", ")), h("td", {}, ago(e.started)), h("td", {}, ago(e.last_heartbeat)),
      h("td", {}, !e.state || e.state === "live" ? drain(e) : left(e))))))));
}

const LIMIT_NAME_HINT = { task: "a task, e.g. export", group: "a group, or * for every other" };

// limitForm sets a limit; what is typed stays in state.limitDraft across
// the view's redraws, and so does the coordinators' refusal, next to the
// field it names.
function limitForm() {
  const d = state.limitDraft;
  const err = d.error;
  const bad = (field) => (err && err.field === field ? "true" : null);
  const keep = (e) => {
    d[e.target.name] = e.target.value;
    if (e.target.name === "kind") e.currentTarget.elements.name.placeholder = LIMIT_NAME_HINT[d.kind];
  };
  const submit = async (e) => {
    e.preventDefault();
    const name = d.name.trim(), max = Number(d.max);
    if (!name) d.error = { field: "name", message: "missing: the task or group to limit" };
    else if (d.max === "" || !Number.isInteger(max)) d.error = { field: "max", message: "a whole number of jobs (0 stops new claims)" };
    else {
      try {
        await api("PUT", `/api/limits/${encodeURIComponent(d.kind)}/${encodeURIComponent(name)}`, { max });
        toast(`${d.kind} ${name}: at most ${fmtNum(max)} at once`);
        Object.assign(d, { name: "", max: "", error: null });
      } catch (x) {
        if (x.status === 401) return;
        d.error = { field: x.field || "", message: x.message };
      }
    }
    route();
  };
  return h("form", { class: "filters", id: "limit-form", novalidate: true, oninput: keep, onchange: keep, onsubmit: submit },
    h("label", {}, "kind", h("select", { name: "kind", "aria-invalid": bad("kind") }, ["task", "group"].map((k) => h("option", { value: k, selected: k === d.kind }, k)))),
    h("label", {}, "name", h("input", { name: "name", value: d.name, placeholder: LIMIT_NAME_HINT[d.kind], size: 26, autocomplete: "off", "aria-invalid": bad("name") })),
    h("label", {}, "max", h("input", { name: "max", type: "number", min: 0, step: 1, value: d.max, placeholder: "jobs at once", class: "max", "aria-invalid": bad("max") })),
    h("button", { type: "submit", class: "primary" }, "Set limit"),
    h("p", { id: "limit-error", class: "error", role: "alert" }, err ? (err.field ? `${err.field}: ` : "") + err.message : ""));
}

// limitMeter is a bar of the jobs held out of the limit's max.
function limitMeter(l) {
  const full = l.held >= l.max;
  const bar = h("div");
  bar.style.width = (l.max ? Math.min(100, (100 * l.held) / l.max) : 100) + "%";
  return h("div", { class: "meter" + (full ? " full" : ""), role: "meter", "aria-valuemin": 0, "aria-valuemax": l.max, "aria-valuenow": l.held,
    "aria-label": `${l.held} of ${l.max} held` }, bar);
}

// rateScope names a rate limit as the API does: task:T, group:G, or both.
function rateScope(task, group) {
  return [task ? "task:" + task : "", group ? "group:" + group : ""].filter(Boolean).join(",");
}

// rateCounts says which job starts a rate limit counts.
function rateCounts(r) {
  if (!r.group) return `task ${r.task}, across the cluster`;
  if (!r.task) return r.group === "*" ? "each group, separately (unless it has its own)" : `group ${r.group}`;
  return r.group === "*" ? `task ${r.task} in each group, separately (unless the group has its own for it)` : `task ${r.task} in group ${r.group}`;
}

// rateForm sets a rate limit; as limitForm, what is typed and the
// coordinators' refusal stay in state.rateDraft across redraws.
function rateForm() {
  const d = state.rateDraft;
  const err = d.error;
  const bad = (...fields) => (err && fields.includes(err.field) ? "true" : null);
  const keep = (e) => { d[e.target.name] = e.target.value; };
  const submit = async (e) => {
    e.preventDefault();
    const scope = rateScope(d.task.trim(), d.group.trim());
    if (!scope) d.error = { field: "scope", message: "missing: a task, a group (* for each group), or both" };
    else if (!d.rate.trim()) d.error = { field: "rate", message: "missing: N/period, such as 10/s, 100/m or 5/30s" };
    else {
      try {
        await api("PUT", `/api/limits/rate/${encodeURIComponent(scope)}`, { rate: d.rate.trim() });
        toast(`${scope}: at most ${d.rate.trim()} starts`);
        Object.assign(d, { task: "", group: "", rate: "", error: null });
      } catch (x) {
        if (x.status === 401) return;
        d.error = { field: x.field || "", message: x.message };
      }
    }
    route();
  };
  return h("form", { class: "filters", id: "rate-form", novalidate: true, oninput: keep, onchange: keep, onsubmit: submit },
    h("label", {}, "task", h("input", { name: "task", value: d.task, placeholder: "e.g. send-mail (empty: any)", size: 24, autocomplete: "off", "aria-invalid": bad("scope", "task") })),
    h("label", {}, "group", h("input", { name: "group", value: d.group, placeholder: "a group, * each (empty: all)", size: 24, autocomplete: "off", "aria-invalid": bad("scope", "group") })),
    h("label", {}, "rate", h("input", { name: "rate", value: d.rate, placeholder: "10/s, 100/m, 5/30s", size: 14, autocomplete: "off", class: "rate", "aria-invalid": bad("rate") })),
    h("button", { type: "submit", class: "primary" }, "Set rate limit"),
    h("p", { id: "rate-error", class: "error", role: "alert" }, err ? (err.field ? `${err.field}: ` : "") + err.message : ""));
}

// rateTable lists the rate limits; admins can remove each.
function rateTable(rates, admin) {
  const remove = (r) => h("button", { type: "button", class: "danger", title: "remove the rate limit: its jobs start as slots allow", onclick: async () => {
    if (!confirm(`Remove the rate limit of ${r.scope}? Its jobs then start as fast as free slots allow.`)) return;
    try { await api("DELETE", `/api/limits/rate/${encodeURIComponent(r.scope)}`); toast(`${r.scope}: no rate limit`); route(); } catch (e) { toast(e.message, true); }
  } }, "Remove");
  return h("table", { id: "rate-table" },
    h("thead", {}, h("tr", {}, ["scope", "rate", "counts the starts of", "set", admin ? "" : null].filter((c) => c !== null).map((c) => h("th", {}, c)))),
    h("tbody", {}, rates.map((r) => h("tr", { dataset: { scope: r.scope } },
      h("td", {}, h("span", { class: "mono" }, r.scope)),
      h("td", { class: "rate" }, r.rate),
      h("td", { class: "muted" }, rateCounts(r)),
      h("td", { class: "muted" }, ago(r.updated)),
      admin ? h("td", {}, remove(r)) : null))));
}

async function viewLimits(root) {
  const data = await api("GET", "/api/limits");
  const list = data.limits || [];
  const rates = (data.rates || []).map((r) => ({ ...r, scope: rateScope(r.task, r.group) }));
  const admin = state.role === "admin";
  root.replaceChildren(h("h1", {}, "Limits"),
    h("div", { class: "card" }, h("h2", {}, "Concurrency limits"),
      h("p", { class: "note", id: "limit-note" }, "A limit caps the jobs of a task, or of a group, that executors hold (scheduled or running) at once across the cluster: the jobs over it wait, and the free slots go to the jobs after them."),
      admin ? limitForm() : null));
  if (list.length === 0) {
    root.append(h("div", { class: "card" }, empty("No concurrency limit", (admin ? "Set one above, or from a terminal: " : "An operator sets one: ") + "fairway limits set task export 5")));
  } else {
    const remove = (l) => h("button", { type: "button", class: "danger", title: "remove the limit: its jobs run as slots allow", onclick: async () => {
      if (!confirm(`Remove the ${l.kind} limit of ${l.name}? Its jobs then run as fast as free slots allow.`)) return;
      try { await api("DELETE", `/api/limits/${encodeURIComponent(l.kind)}/${encodeURIComponent(l.name)}`); toast(`${l.kind} ${l.name}: no limit`); route(); } catch (e) { toast(e.message, true); }
    } }, "Remove");
    const every = (l) => l.kind === "group" && l.name === "*";
    root.append(h("div", { class: "card" }, h("table", { id: "limit-table" },
      h("thead", {}, h("tr", {}, ["kind", "name", "max", "held now", "held of max", "set", admin ? "" : null].filter((c) => c !== null).map((c) => h("th", { class: c === "max" || c === "held now" ? "num" : "" }, c)))),
      h("tbody", {}, list.map((l) => h("tr", { dataset: { kind: l.kind, name: l.name }, class: l.held >= l.max ? "at-limit" : null },
        h("td", {}, l.kind),
        h("td", {}, h("span", { class: "mono" }, l.name), every(l) ? h("span", { class: "muted" }, " (every group without a limit of its own)") : null),
        h("td", { class: "num max" }, fmtNum(l.max)),
        h("td", { class: "num held", title: every(l) ? "the most any one group holds" : null }, fmtNum(l.held)),
        h("td", { class: "meter-cell" }, limitMeter(l), l.max === 0 ? h("span", { class: "tag bad" }, "stopped") : l.held >= l.max ? h("span", { class: "tag warn" }, "at its limit") : null),
        h("td", { class: "muted" }, ago(l.updated)),
        admin ? h("td", {}, remove(l)) : null))))));
  }
  root.append(h("div", { class: "card", id: "rates" }, h("h2", {}, "Rate limits"),
    h("p", { class: "note", id: "rate-note" }, "A rate limit caps how many jobs of a task, of a group, or of a task in each group start per period across the cluster: a job over its rate waits, and the free slots go to the jobs after it."),
    admin ? rateForm() : null,
    rates.length ? rateTable(rates, admin)
      : empty("No rate limit", (admin ? "Set one above, or from a terminal: " : "An operator sets one: ") + "fairway limits set rate task:send-mail 10/s")));
}

async function viewPeriodic(root) {
  const data = await api("GET", "/api/periodic");
  const list = data.periodic || [];
  const admin = state.role === "admin";
  root.replaceChildren(h("h1", {}, "Periodic tasks"));
  if (list.length === 0) {
    root.append(h("div", { class: "card" }, empty("No periodic task", "Add one: fairway periodic add nightly --task echo --group acme --timer '*-*-* 02:00'")));
    return;
  }
  const btn = (p, action, label) => h("button", { type: "button", disabled: !admin, onclick: async () => {
    try { await api("POST", `/api/periodic/${encodeURIComponent(p.id)}/${action}`); toast(`${p.id}: ${label}`); route(); } catch (e) { toast(e.message, true); }
  } }, label);
  root.append(h("div", { class: "card" }, h("table", { id: "periodic-table" },
    h("thead", {}, h("tr", {}, ["id", "task", "group", "timer", "enabled", "next five runs (the timer's zone)", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, list.map((p) => h("tr", { dataset: { id: p.id } },
      h("td", { class: "mono" }, p.id), h("td", {}, p.task), h("td", {}, p.group), h("td", { class: "mono" }, p.timer), h("td", {}, p.enabled ? "yes" : "no"),
      // Each run in the timer's zone (UTC unless it names one); the title
      // says it in the browser's.
      h("td", {}, p.next_runs.length ? h("ol", {}, p.next_runs.map((t) => h("li", { title: "your time: " + fmtIn(t, browserZone()) }, fmtIn(t, p.zone))))
        : h("span", { class: "muted" }, "disabled")),
      h("td", {}, p.enabled ? btn(p, "disable", "Disable") : btn(p, "enable", "Enable"), " ", btn(p, "run", "Run now"))))))));
}

// ---- routing

const VIEWS = { overview: viewOverview, fairness: viewFairness, jobs: viewJobs, executors: viewExecutors, limits: viewLimits, periodic: viewPeriodic };

async function route() {
  if (!state.role) return;
  const [path] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").map(decodeURIComponent);
  const root = document.getElementById("view");
  let name = parts[0] || "overview";
  let draw;
  if (name === "job" && parts.length === 3) {
    draw = (into) => viewJob(into, parts[1], parts[2]);
    name = "jobs";
  } else {
    const v = VIEWS[name] || viewOverview;
    draw = (into) => v(into);
  }
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === name);
  // Each draw builds a page of its own, shown only when no later draw has
  // begun: a slow answer for the view just left must not cover the next.
  const run = async () => {
    const seq = ++state.draws;
    const page = h("div");
    let ok = true;
    try {
      await draw(page);
    } catch (e) {
      if (e.status === 401) return;
      ok = false;
      page.replaceChildren(h("div", { class: "card" }, h("p", { class: "error", role: "alert" }, e.message)));
    }
    if (seq !== state.draws) return;
    root.replaceChildren(...page.childNodes);
    if (ok) root.dataset.ready = location.hash || "#/overview";
  };
  state.refresh = run;
  delete root.dataset.ready;
  await run();
}

// ---- start

function applyTheme(t) {
  document.documentElement.dataset.theme = t;
  localStorage.setItem("fairway-theme", t);
}

document.addEventListener("DOMContentLoaded", async () => {
  applyTheme(localStorage.getItem("fairway-theme") || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"));
  document.getElementById("theme").addEventListener("click", () => applyTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark"));
  document.getElementById("login-form").addEventListener("submit", (e) => { e.preventDefault(); login(document.getElementById("token").value); });
  document.getElementById("logout").addEventListener("click", async () => { await api("POST", "/api/logout").catch(() => {}); showLogin(); });
  window.addEventListener("hashchange", () => { if (!location.hash.startsWith("#/jobs")) state.jobsCursor = []; route(); });
  // A link printed by fairway dev carries the token in the fragment, which
  // never reaches a server or its logs; it is dropped from the address at once.
  const m = location.hash.match(/^#token=([^&]+)/);
  if (m) {
    history.replaceState(null, "", location.pathname + "#/overview");
    await login(decodeURIComponent(m[1]));
    return;
  }
  try {
    loggedIn(await api("GET", "/api/session"));
  } catch {
    showLogin();
  }
});
