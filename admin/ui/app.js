// ctxpress dashboard. Plain JavaScript, no dependencies. Every text that
// comes from the API (ids, models, summaries: model output, untrusted) is
// set with textContent or as an SVG text node, never parsed as markup.
"use strict";

const API = "/ctxpress";
const PAGE = 25;
const SVGNS = "http://www.w3.org/2000/svg";

const state = {
  offset: 0,
  hasMore: false,
  selected: null,          // {id, ns}
  turn: null,              // the turn number opened in the turn view, of the selected conversation
  shownTurn: null,         // the turn the turn view shows now
  compacting: new Map(),   // conversation id -> started event
  replicas: new Set(),     // the replicas events came from (behind a load balancer, several)
  rows: [],
  currency: "$",           // from /stats
  showMoney: true,         // false: ui.price_per_million_tokens is negative
};

const $ = (id) => document.getElementById(id);
const fmt = (n) => Number(n || 0).toLocaleString("en-US");

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return Math.round(s) + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  if (s < 86400) return Math.round(s / 3600) + "h ago";
  return Math.round(s / 86400) + "d ago";
}

function money(v, cur) {
  const a = Math.abs(v);
  return (v < 0 ? "−" : "") + cur + (a >= 1 || a === 0 ? a.toFixed(2) : a.toFixed(4));
}

// amount is a bill in its unit: money, or for a local upstream
// (cost_unit "prefill") prefill-token equivalents.
function amount(v, unit) {
  if (unit === "prefill") return (v < 0 ? "−" : "") + fmt(Math.round(Math.abs(v) * 1e6)) + " prefill tok";
  return money(v, state.currency);
}

const pct = (share) => (100 * (share || 0)).toFixed(1) + "%";

// plural is n and noun, with an s unless n is one.
const plural = (n, noun) => fmt(n) + " " + noun + (n === 1 ? "" : "s");

// unreported says how many calls came back without usage: they are in no
// cost, and the reader should know.
function unreported(u) {
  return u.unreported ? ", " + fmt(u.unreported) + " without usage (not priced)" : "";
}

async function api(path) {
  const r = await fetch(API + path, { credentials: "same-origin", cache: "no-store" });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const msg = (body.error && body.error.message) || r.status + " " + r.statusText;
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return body;
}

function showError(err) {
  const box = $("error");
  box.hidden = !err;
  box.textContent = err ? String(err.message || err) : "";
}

// --- totals ---------------------------------------------------------------

async function loadStats() {
  const s = await api("/stats");
  $("t-requests").textContent = fmt(s.requests);
  $("t-saved").textContent = fmt(s.tokens_saved);
  $("t-saved-pct").textContent = s.tokens_before > 0 ? pct(s.tokens_saved / s.tokens_before) + " of input" : "";
  state.currency = s.currency;
  state.showMoney = s.price_per_million_tokens > 0;
  $("t-cached").textContent = pct(s.cached_share);
  $("t-cached-sub").textContent = "of " + fmt(s.usage.input_tokens) + " input tokens" + unreported(s.usage);
  for (const t of document.querySelectorAll("#totals .money")) t.hidden = !state.showMoney;
  $("t-cost").textContent = amount(s.cost, s.cost_unit);
  $("t-cost-sub").textContent = "incl. " + amount(s.summary_cost, s.cost_unit) + " of summary calls";
  // The saved tile is the API's (savedTile): money for hosted models,
  // prefill tokens only for a local server, and labelled so.
  const tile = s.saved_tile;
  $("t-money-label").textContent = tile.label;
  $("t-money").textContent = tile.value;
  $("t-money").classList.toggle("neg", !!tile.negative);
  $("t-money-note").textContent = tile.note;
  $("t-price").textContent = tile.detail || "";
  state.mode = s.mode;
  $("observe").hidden = s.mode !== "observe";
  $("t-compactions").textContent = fmt(s.compactions);
  // Each original brought back is a marker that hid something needed:
  // by the step that replaced it, with the tool and way in the tooltip.
  const byKind = {};
  for (const r of s.retrieved || []) byKind[r.kind] = (byKind[r.kind] || 0) + r.count;
  const kinds = Object.entries(byKind).map(([k, n]) => k + " " + fmt(n)).join(", ");
  $("t-conversations").textContent = plural(s.conversations, "conversation") + (s.persistent ? "" : " (memory only)") +
    (s.retrievals ? ", " + plural(s.retrievals, "original") + " brought back (" + kinds + ")" : "");
  $("t-conversations").title = (s.retrieved || []).map(r => r.kind + " of " + (r.tool || "a summary") + ", by " + r.way + ": " + fmt(r.count)).join("\n");
}

// --- conversations table ----------------------------------------------------

async function loadList() {
  const page = await api("/conversations?offset=" + state.offset + "&limit=" + PAGE);
  state.rows = page.data;
  state.hasMore = page.has_more;
  renderList();
}

function badges(c) {
  const td = el("td");
  if (c.compacting || state.compacting.has(c.id)) td.append(el("span", { class: "badge compacting" }, "compacting" + onReplica(state.compacting.get(c.id)) + "…"));
  if (c.breaker_tripped) td.append(el("span", { class: "badge tripped" }, "breaker open"));
  if (c.compaction_scheduled) td.append(el("span", { class: "badge scheduled" }, "compaction scheduled"));
  if (c.branch_count > 0) td.append(el("span", { class: "badge" }, "summarised"));
  return td;
}

// conversationCell names a conversation by what the user asked first,
// with its agent and id under it; the id alone when nothing else is known.
function conversationCell(c) {
  const td = el("td", { class: "conv", title: c.id + "  (namespace " + c.namespace + ")" });
  td.append(el("div", { class: "title" + (c.title ? "" : " id") }, c.title || c.id));
  const sub = [c.agent, c.title ? c.id : ""].filter(Boolean).join(" · ");
  if (sub) td.append(el("div", { class: "sub" }, sub));
  return td;
}

function renderList() {
  const tbody = $("conversations").tBodies[0];
  tbody.replaceChildren();
  for (const c of state.rows) {
    const tr = el("tr", { "data-id": c.id, "data-ns": c.namespace });
    if (state.selected && state.selected.id === c.id && state.selected.ns === c.namespace) tr.className = "selected";
    tr.append(conversationCell(c), el("td", {}, c.model || "–"),
      el("td", { class: "num" }, fmt(c.requests)),
      el("td", { class: "num" }, fmt(c.last_input_tokens)),
      el("td", { class: "num" }, fmt(c.tokens_saved)),
      el("td", { class: "num cached" }, c.usage.calls ? pct(c.cached_share) : "–"),
      el("td", { class: "num cost" }, state.showMoney ? amount(c.cost, c.cost_unit) : "–"),
      el("td", { class: "num" }, fmt(c.compactions)),
      el("td", { title: c.updated_at }, ago(c.updated_at)),
      badges(c));
    tr.addEventListener("click", () => select(c.id, c.namespace));
    tbody.append(tr);
  }
  $("empty").hidden = state.rows.length > 0 || state.offset > 0;
  $("prev").disabled = state.offset === 0;
  $("next").disabled = !state.hasMore;
  $("page").textContent = state.rows.length ? (state.offset + 1) + "–" + (state.offset + state.rows.length) : "";
}

// --- one conversation -------------------------------------------------------

function select(id, ns) {
  state.selected = { id, ns };
  state.turn = state.shownTurn = null;
  $("turn").hidden = true;
  setHash();
  renderList();
  loadDetail().catch(showError);
}

function setHash() {
  const sel = state.selected;
  history.replaceState(null, "", "#c=" + encodeURIComponent(sel.ns) + "/" + encodeURIComponent(sel.id) + (state.turn ? ";t=" + state.turn : ""));
}

const conversationPath = (sel) => "/conversations/" + encodeURIComponent(sel.id);

async function loadDetail() {
  const sel = state.selected;
  if (!sel) return;
  let got;
  try {
    got = await api("/conversations/" + encodeURIComponent(sel.id) + "?namespace=" + encodeURIComponent(sel.ns));
  } catch (err) {
    if (err.status === 404) { $("detail").hidden = true; state.selected = null; return; }
    throw err;
  }
  const d = got.data[0];
  $("detail").hidden = false;
  $("d-id").textContent = d.title || "Conversation " + d.id;
  $("d-ns").textContent = (d.title ? d.id + " · " : "") + "namespace " + d.namespace;
  const facts = $("d-facts");
  facts.replaceChildren();
  const fact = (label, value) => { const s = el("span", { "data-fact": label }, label + " "); s.append(el("b", {}, value)); facts.append(s); };
  if (d.agent) fact("agent", d.agent);
  fact("model", d.model || "–");
  fact("requests", fmt(d.requests));
  fact("tokens saved", fmt(d.tokens_saved));
  fact("cached", pct(d.cached_share) + " of " + fmt(d.usage.input_tokens) + " input tokens" + unreported(d.usage));
  const server = d.server_compaction_usage;
  if (server && server.calls) {
    fact("upstream compactions", fmt(server.calls) + ": " + fmt(server.input_tokens) + " input, " + fmt(server.output_tokens) + " output tokens (in the usage above)");
  }
  if (state.showMoney) {
    fact("cost", amount(d.cost, d.cost_unit));
    fact("summary calls", fmt(d.summary_usage.calls) + " for " + amount(d.summary_cost, d.cost_unit) + unreported(d.summary_usage));
    fact("direct (estimate)", amount(d.cost_direct_estimate, d.cost_unit));
    fact("saved", amount(d.money_saved, d.cost_unit));
    if (d.price_basis === "assumed") fact("prices", "assumed: no price known for " + (d.model || "this model") + " (set models: prices)");
  }
  fact("compactions", fmt(d.compactions));
  fact("last input", fmt(d.last_input_tokens));
  fact("calibration", d.calibration ? d.calibration.toFixed(2) : "–");
  fact("branches", String(d.branch_count));
  if (d.breaker.tripped) fact("breaker", "open: " + d.breaker.reason);
  drawChart(d.turns);
  renderTurns(d.turns);
  const sum = $("summary");
  if (d.current_summary) {
    sum.textContent = d.current_summary.summary;
    sum.classList.remove("muted");
  } else {
    sum.textContent = "Not compacted yet: the conversation is sent as the client wrote it (squashed and deduplicated).";
    sum.classList.add("muted");
  }
  if (state.turn && state.shownTurn !== state.turn) await loadTurn(); // not again on every live update: the reader keeps their place
}

// drawChart plots input tokens per turn: as the client sent them (grey,
// dashed) and as ctxpress forwarded them (blue). A compaction is a dashed
// vertical line where the blue line drops.
function drawChart(turns) {
  const box = $("chart");
  box.replaceChildren();
  if (!turns.length) { box.append(el("p", { class: "muted" }, "No turns recorded.")); return; }
  const W = 900, H = 260, L = 64, R = 12, T = 12, B = 30;
  const max = Math.max(1, ...turns.map((t) => Math.max(t.tokens_before, t.tokens_after)));
  const step = turns.length > 1 ? (W - L - R) / (turns.length - 1) : 0;
  const x = (i) => L + (turns.length > 1 ? i * step : (W - L - R) / 2);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "input tokens per turn" });
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4, yy = y(v);
    root.append(svg("line", { class: k ? "grid" : "axis", x1: L, x2: W - R, y1: yy, y2: yy }));
    const label = svg("text", { x: L - 6, y: yy + 4, "text-anchor": "end" });
    label.textContent = fmt(Math.round(v));
    root.append(label);
  }
  const ticks = Math.min(turns.length, 10);
  for (let k = 0; k < ticks; k++) {
    const i = Math.round((k * (turns.length - 1)) / Math.max(1, ticks - 1));
    const label = svg("text", { x: x(i), y: H - 10, "text-anchor": "middle" });
    label.textContent = String(i + 1);
    root.append(label);
  }
  turns.forEach((t, i) => {
    if (t.compacted) root.append(svg("line", { class: "compaction", x1: x(i), x2: x(i), y1: T, y2: H - B }));
  });
  const points = (key) => turns.map((t, i) => x(i).toFixed(1) + "," + y(t[key]).toFixed(1)).join(" ");
  root.append(svg("polyline", { class: "line-before", points: points("tokens_before") }));
  root.append(svg("polyline", { class: "line-after", points: points("tokens_after") }));
  const r = turns.length > 80 ? 1.8 : 3;
  turns.forEach((t, i) => {
    const b = svg("circle", { class: "pt-before", cx: x(i), cy: y(t.tokens_before), r: r * 0.7 });
    const a = svg("circle", { class: "pt-after" + (t.compacted ? " compacted" : ""), cx: x(i), cy: y(t.tokens_after), r, "data-turn": i + 1 });
    const tip = svg("title", {});
    tip.textContent = "turn " + (i + 1) + ": " + fmt(t.tokens_before) + " → " + fmt(t.tokens_after) + " tokens" +
      (t.input_tokens ? " (upstream counted " + fmt(t.input_tokens) + (t.cached_tokens ? ", " + fmt(t.cached_tokens) + " cached" : "") + ")" : "") +
      (t.server_compaction_input_tokens ? ", upstream compacted it: " + fmt(t.server_compaction_input_tokens) + " input, " +
        fmt(t.server_compaction_output_tokens || 0) + " output tokens" : "") +
      (t.compacted ? ", compacted" : "");
    a.append(tip);
    root.append(b, a);
  });
  box.append(root);
}

// --- turns ------------------------------------------------------------------

// What an edit did, as a person says it.
const EDIT_WORDS = { squashed: "squashed", deduped: "deduplicated", pruned: "pruned to one line", summarised: "summarised", cut: "cut to fit", more: "more" };

// doneText sums up a turn's edits: "summary of 30 messages, 3 squashed, 1 pruned".
function doneText(edits) {
  if (!edits || !edits.length) return "";
  const count = {};
  const parts = [];
  for (const e of edits) {
    if (e.kind === "summarised") parts.push("summary of " + plural(e.count, "message"));
    else if (e.kind === "cut") parts.push(plural(e.count, "message") + " cut");
    else count[e.kind] = (count[e.kind] || 0) + (e.kind === "more" ? e.count : 1);
  }
  for (const k of ["squashed", "deduped", "pruned"]) if (count[k]) parts.push(fmt(count[k]) + " " + k);
  if (count.more) parts.push(fmt(count.more) + " more");
  return parts.join(", ");
}

const arrow = (a, b) => fmt(a) + " → " + fmt(b);

// renderTurns lists the turns, newest first: each one's tokens as sent
// and forwarded, what was done, and a mark where a compaction happened.
function renderTurns(turns) {
  const tbody = $("turns").tBodies[0];
  tbody.replaceChildren();
  for (const t of [...turns].reverse()) {
    const tr = el("tr", { "data-turn": t.number });
    if (t.compaction) tr.classList.add("compaction");
    if (state.turn === t.number) tr.classList.add("selected");
    const what = el("td", { class: "what" });
    if (t.compaction) {
      const c = t.compaction;
      what.append(el("span", { class: "badge compaction", title: c.prepared ? "summary prepared in the background, first sent by this turn" : "compacted before this turn was forwarded" },
        "compaction: " + arrow(c.tokens_before, c.tokens_after) + " tokens"));
    }
    what.append(document.createTextNode(doneText(t.edits)));
    tr.append(el("td", { class: "num" }, String(t.number)), el("td", { title: t.at }, ago(t.at)),
      el("td", { class: "num" }, arrow(t.tokens_before, t.tokens_after)), what,
      el("td", { class: "kept muted" }, t.kept ? "bodies kept" : ""));
    tr.addEventListener("click", () => openTurn(t.number));
    tbody.append(tr);
  }
  $("turns-empty").hidden = turns.length > 0;
}

function openTurn(n) {
  state.turn = n;
  setHash();
  for (const tr of $("turns").tBodies[0].rows) tr.classList.toggle("selected", Number(tr.dataset.turn) === n);
  loadTurn().catch(showError);
}

async function loadTurn() {
  const sel = state.selected, n = state.turn;
  if (!sel || !n) return;
  let v;
  try {
    v = await api(conversationPath(sel) + "/turns/" + n + "?namespace=" + encodeURIComponent(sel.ns));
  } catch (err) {
    if (err.status === 404) { $("turn").hidden = true; state.turn = state.shownTurn = null; return; }
    throw err;
  }
  if (state.turn !== n) return; // another turn was opened meanwhile
  renderTurn(v);
}

// renderTurn shows one turn: what was done to which message, with sizes,
// and the request as the client sent it beside what was forwarded.
function renderTurn(v) {
  state.shownTurn = v.number;
  $("turn").hidden = false;
  $("tv-title").textContent = "Turn " + v.number;
  const facts = $("tv-facts");
  facts.replaceChildren();
  const fact = (label, value) => { const s = el("span", { "data-fact": label }, label + " "); s.append(el("b", {}, value)); facts.append(s); };
  fact("at", new Date(v.at).toLocaleString());
  fact("tokens", arrow(v.tokens_before, v.tokens_after) + " (as sent → as forwarded)");
  if (v.input_tokens) fact("upstream counted", fmt(v.input_tokens) + (v.cached_tokens ? ", " + fmt(v.cached_tokens) + " cached" : ""));
  if (v.compaction) fact("compaction", arrow(v.compaction.tokens_before, v.compaction.tokens_after) + " tokens" +
    (v.compaction.covered_messages ? ", " + plural(v.compaction.covered_messages, "message") + " summarised" : ""));

  const tbody = $("tv-edits").tBodies[0];
  tbody.replaceChildren();
  for (const e of v.edits) {
    const which = e.kind === "more" ? plural(e.count, "other edit") : e.count > 1 ? "#" + e.index + "–" + (e.index + e.count - 1) : "#" + e.index;
    const tr = el("tr", { "data-kind": e.kind, "data-index": e.index });
    const kind = el("td");
    kind.append(el("span", { class: "badge edit " + e.kind }, EDIT_WORDS[e.kind] || e.kind));
    tr.append(el("td", { class: "num" }, which), el("td", {}, e.name || (e.count > 1 ? "messages" : "–")), kind,
      el("td", { class: "num" }, fmt(e.tokens_before)), el("td", { class: "num" }, fmt(e.tokens_after)),
      el("td", { class: "num" }, e.tokens_before ? pct(1 - e.tokens_after / e.tokens_before) : "–"));
    tbody.append(tr);
  }
  $("tv-edits-empty").hidden = v.edits.length > 0;
  $("tv-edits").hidden = v.edits.length === 0;

  const bodies = $("tv-bodies");
  bodies.replaceChildren();
  if (!v.sent) {
    bodies.append(el("p", { class: "muted not-kept" }, "Bodies " + v.not_kept + "."));
    return;
  }
  bodies.append(bodyColumn("As the client sent it", v.sent, "sent"), bodyColumn(state.mode === "observe" ? "What ctxpress would have forwarded" : "As forwarded to the model", v.forwarded, "forwarded"));
}

// bodyColumn is one side of the turn view: a body's messages, each with
// its role, tool, size and text, the edited ones marked.
function bodyColumn(title, b, side) {
  const col = el("div", { class: "body " + side });
  col.append(el("h4", {}, title + " · " + plural(b.messages.length, "message") + ", " + fmt(b.bytes) + " bytes"));
  if (b.instructions) {
    const m = el("div", { class: "msg instructions" + (b.instructions.includes("<conversation_summary>") ? " summary" : "") });
    m.append(el("div", { class: "head" }, "instructions"), el("pre", {}, b.instructions));
    col.append(m);
  }
  // A run a summary replaced (or cut) is one folded block: it is most of
  // a long conversation, and the reader wants what was kept.
  let run = null;
  for (const msg of b.messages) {
    const card = messageCard(msg);
    if (msg.edit !== "summarised" && msg.edit !== "cut") { run = null; col.append(card); continue; }
    if (!run || run.kind !== msg.edit) {
      run = { kind: msg.edit, first: msg.index, n: 0, bytes: 0, box: el("details", { class: "run " + msg.edit }) };
      run.label = el("summary");
      run.box.append(run.label);
      col.append(run.box);
    }
    run.n++;
    run.bytes += msg.bytes;
    run.box.append(card);
    run.label.textContent = "#" + run.first + (run.n > 1 ? "–#" + msg.index : "") + " · " + plural(run.n, "message") + " " +
      (EDIT_WORDS[run.kind] || run.kind) + " · " + fmt(run.bytes) + " bytes (click to show)";
  }
  return col;
}

// messageCard is one message: role, tool, size, what was done, its text.
function messageCard(msg) {
  const m = el("div", { class: "msg" + (msg.edit ? " edited " + msg.edit : "") + (msg.summary ? " summary" : ""), "data-index": msg.index });
  const head = el("div", { class: "head" }, "#" + msg.index + " " + msg.role + (msg.name ? " · " + msg.name : "") + " · " + fmt(msg.bytes) + " bytes");
  if (msg.edit) head.append(el("span", { class: "badge edit " + msg.edit }, EDIT_WORDS[msg.edit] || msg.edit));
  if (msg.summary) head.append(el("span", { class: "badge edit summarised" }, "summary"));
  if (msg.omitted_bytes) head.append(el("span", { class: "muted" }, fmt(msg.omitted_bytes) + " bytes not shown"));
  m.append(head, el("pre", {}, msg.text));
  return m;
}

// --- live updates -----------------------------------------------------------

let pending = null, lastStats = 0;

// refresh redraws after events, at most every 300 ms (a busy agent sends
// many turns), and the totals at most once a second: they read every record.
function refresh() {
  if (pending) return;
  pending = setTimeout(async () => {
    pending = null;
    try {
      const jobs = [loadList(), loadDetail()];
      if (Date.now() - lastStats > 1000) { lastStats = Date.now(); jobs.push(loadStats()); } else { setTimeout(refresh, 1000); }
      await Promise.all(jobs);
      showError(null);
    } catch (err) { showError(err); }
  }, 300);
}

// onReplica names the replica of event e, once events came from more than
// one: a single ctxpress shows what it always showed.
function onReplica(e) {
  return e && e.replica && state.replicas.size > 1 ? " on " + e.replica : "";
}

// heard notes the replica of an event and returns the event.
function heard(m) {
  const e = JSON.parse(m.data);
  if (e.replica && !state.replicas.has(e.replica)) {
    state.replicas.add(e.replica);
    if (state.replicas.size === 2) renderCompacting();
  }
  return e;
}

function renderCompacting() {
  const box = $("compacting");
  const items = [...state.compacting.entries()].map(([id, e]) => id + onReplica(e));
  box.hidden = items.length === 0;
  box.textContent = items.length ? "Compacting " + items.join(", ") + ": writing a summary…" : "";
  renderList();
}

function connect() {
  const live = $("live");
  const es = new EventSource(API + "/events?types=all");
  es.onopen = () => { live.textContent = "live"; live.className = "live on"; refresh(); };
  es.onerror = () => { live.textContent = "reconnecting…"; live.className = "live off"; };
  es.addEventListener("turn", (m) => { heard(m); refresh(); });
  es.addEventListener("compaction_started", (m) => {
    const e = heard(m);
    state.compacting.set(e.conversation, e);
    renderCompacting();
  });
  es.addEventListener("compaction", (m) => {
    const e = heard(m);
    state.compacting.delete(e.conversation);
    renderCompacting();
    refresh();
  });
}

function start() {
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); loadList().catch(showError); });
  $("next").addEventListener("click", () => { state.offset += PAGE; loadList().catch(showError); });
  const m = /^#c=([^/]*)\/(.+?)(?:;t=(\d+))?$/.exec(location.hash);
  if (m) {
    state.selected = { ns: decodeURIComponent(m[1]), id: decodeURIComponent(m[2]) };
    if (m[3]) state.turn = Number(m[3]);
  }
  lastStats = Date.now();
  Promise.all([loadStats(), loadList(), loadDetail()]).then(() => showError(null), showError)
    .finally(() => document.body.setAttribute("data-ready", "1"));
  connect();
}

document.addEventListener("DOMContentLoaded", start);
