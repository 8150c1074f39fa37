// leasehold console: plain JavaScript, no build step. Every value from the
// server is written with textContent (never as HTML).
"use strict";

const pollMS = Number(document.body.dataset.pollMs) || 2000;
let session = {};
let view = "overview";
let keyShown = "";
let jobsCursor = "", jobsNext = "", jobsPageNo = 1;
let prevCounters = null; // {t, counters}
let dlqLoadedAt = null; // performance.now() of the last dead-letter load; null: load at the next poll
let dlqCursor = "", dlqNext = "", dlqPageNo = 1; // a dead-letter page's read is bounded: "next" continues it
let clockBase = []; // elements with live countdowns: {el, base, at, dir}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = String(v);
    else if (k === "onclick") e.addEventListener("click", v);
    else if (k.startsWith("data-")) e.setAttribute(k, String(v));
    else if (k === "href") { if (/^(https?:|#)/.test(String(v))) e.setAttribute("href", String(v)); }
    else e.setAttribute(k, String(v));
  }
  for (const k of kids) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

async function api(path, opts) {
  const r = await fetch(path, Object.assign({credentials: "same-origin", cache: "no-store"}, opts || {}));
  let body = {};
  try { body = await r.json(); } catch (e) { body = {error: "answer not JSON (" + r.status + ")"}; }
  if (!r.ok) { const err = new Error(body.error || body.message || ("HTTP " + r.status)); err.status = r.status; err.body = body; throw err; }
  return body;
}

function flash(msg, bad) {
  const f = document.getElementById("flash");
  f.hidden = false; f.textContent = msg; f.className = bad ? "err" : "";
}

function dur(ms) {
  if (ms === undefined || ms === null || ms < 0) return "-";
  if (ms < 1000) return ms.toFixed(0) + "ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + "s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
  return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
}

// live registers an element whose text counts down (dir -1) or up (dir 1)
// from base milliseconds, measured at the time of the answer.
function live(e, base, dir) { clockBase.push({el: e, base: base, at: performance.now(), dir: dir}); tick1(clockBase[clockBase.length - 1]); return e; }
function tick1(c) {
  const v = c.base + c.dir * (performance.now() - c.at);
  if (c.dir < 0) {
    const left = Math.max(0, v);
    c.el.textContent = (left / 1000).toFixed(1) + "s";
    c.el.classList.toggle("low", left < 3000);
  } else c.el.textContent = dur(v);
}
setInterval(() => { clockBase = clockBase.filter(c => c.el.isConnected); clockBase.forEach(tick1); }, 100);

function table(t, head, rows) {
  clear(t);
  const tr = el("tr");
  head.forEach(h => tr.append(el("th", {text: h, class: /^(fence|attempt|lag|end|committed|partition|offset|jobs\/s|total|count)$/.test(h) ? "num" : null})));
  t.append(el("thead", {}, tr));
  const tb = el("tbody");
  rows.forEach(r => tb.append(r));
  t.append(tb);
  if (rows.length === 0) tb.append(el("tr", {}, el("td", {colspan: head.length, class: "muted", text: "none"})));
}

function keyLink(k) { return el("a", {href: "#key/" + encodeURIComponent(k), class: "mono", text: k}); }
function traceLink(u) { return u ? el("a", {href: u, target: "_blank", rel: "noopener noreferrer", class: "trace", text: "trace"}) : el("span", {class: "muted", text: session.jaeger ? "-" : "no Jaeger URL"}); }
function stateSpan(s) { return el("span", {class: "state-" + s, text: s}); }

// ---------- sign-in and actions ----------

function renderAuth() {
  const a = clear(document.getElementById("auth"));
  if (!session.actions) { a.append(el("span", {id: "readonly", text: "read-only"})); return; }
  if (session.signed_in) {
    a.append(el("span", {id: "signed-in", text: "signed in: " + session.user}),
      el("button", {type: "button", id: "logout", onclick: logout, text: "Sign out"}));
    return;
  }
  const f = el("form", {id: "login"});
  if (session.auth === "basic") {
    f.append(el("input", {id: "login-user", placeholder: "user", autocomplete: "username"}),
      el("input", {id: "login-password", type: "password", placeholder: "password", autocomplete: "current-password"}));
  } else {
    f.append(el("input", {id: "login-token", type: "password", placeholder: "token", autocomplete: "off"}));
  }
  f.append(el("button", {type: "submit", text: "Sign in for actions"}));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    const body = session.auth === "basic"
      ? {user: document.getElementById("login-user").value, password: document.getElementById("login-password").value}
      : {token: document.getElementById("login-token").value};
    try {
      await api("api/login", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
      await loadSession(); flash("signed in"); refresh();
    } catch (e) { flash("sign-in refused: " + e.message, true); }
  });
  a.append(f);
}

async function loadSession() { session = await api("api/session"); renderAuth(); }

async function logout() {
  try { await api("api/logout", {method: "POST", headers: {"X-CSRF-Token": session.csrf || ""}}); } catch (e) { /* signed out anyway */ }
  await loadSession(); refresh();
}

function canAct() { return session.actions && session.signed_in; }

async function act(action, body, btn) {
  if (btn) btn.disabled = true;
  try {
    const r = await api("api/actions/" + action, {method: "POST",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": session.csrf || ""}, body: JSON.stringify(body)});
    let msg = r.message;
    (r.replays || []).forEach(x => { msg += " | " + x.partition + "/" + x.offset + ": " + x.outcome + (x.hint ? " (" + x.hint + ")" : ""); });
    flash(msg);
  } catch (e) {
    flash(action + " " + body.key + ": " + e.message, true);
  } finally {
    if (btn) btn.disabled = false;
    dlqLoadedAt = null;
    refresh();
  }
}

function actionButton(label, action, body, danger) {
  const b = el("button", {type: "button", class: danger ? "danger" : null, "data-action": action, text: label});
  b.addEventListener("click", () => act(action, body, b));
  return b;
}

// ---------- views ----------

async function pollOverview() {
  const o = await api("api/overview");
  const notes = clear(document.getElementById("notes"));
  (o.unavailable || []).forEach(n => notes.append(el("div", {class: "note", text: "Not available here: " + n})));
  if (o.leases_error) notes.append(el("div", {class: "note", text: "leases: " + o.leases_error}));
  if (o.compensations_error) notes.append(el("div", {class: "note", text: "compensations: " + o.compensations_error}));
  if (o.kafka_error) notes.append(el("div", {class: "note", text: "Kafka: " + o.kafka_error}));
  const c = o.worker ? o.worker.counters : null;
  // Standalone: the fleet's figures, as the live workers publish them to Redis.
  const f = !c && o.fleet && o.fleet.workers > 0 ? o.fleet : null;
  const who = f ? "(" + f.workers + (f.workers === 1 ? " worker)" : " workers)") : "(this worker)";
  const card = (id, n, label) => el("div", {class: "card", id: "card-" + id}, el("div", {class: "n", text: n}), el("div", {class: "l", text: label}));
  const na = "n/a";
  const cards = clear(document.getElementById("cards"));
  cards.append(
    card("leases", (o.leases_partial ? "≥ " : "") + o.leases_held, "leases held (all workers)"),
    card("lost", c ? c.leases_lost : f ? f.counters.leases_lost : na, "leases lost " + who),
    card("takeovers", c ? (c.claim_takeover || 0) : f ? f.counters.takeovers : na, "takeovers " + who),
    card("running", o.worker ? o.worker.running : f ? f.running : na, "running " + who),
    card("comp-open", o.compensations_open, "journals open or compensating"),
    card("comp-dead", o.compensations_dead, "compensations dead-lettered"),
    card("dlq", o.dlq_records === undefined ? na : o.dlq_records, "records in " + o.dlq_topic));
  if (o.fleet) cards.append(card("workers", o.fleet.workers, "live workers (worker fleet)"));
  if (o.paused && o.paused.length) cards.append(card("paused", o.paused.join(", "), "job types paused (worker resume TYPE)"));
  const rates = [];
  if (c) {
    const now = performance.now();
    const names = ["claim_acquired", "claim_takeover", "claim_duplicate", "claim_held", "claim_mismatch", "claim_undecodable",
      "succeeded", "retried", "failed", "dead_lettered", "leases_lost", "replayed"];
    names.forEach(n => {
      let rate = "…";
      if (prevCounters && now > prevCounters.t) rate = (((c[n] || 0) - (prevCounters.c[n] || 0)) * 1000 / (now - prevCounters.t)).toFixed(2);
      rates.push(el("tr", {"data-outcome": n}, el("td", {text: n.replace("claim_", "claimed: ")}), el("td", {class: "num", text: rate}), el("td", {class: "num", text: c[n] || 0})));
    });
    prevCounters = {t: now, c: c};
  } else if (f) {
    ["succeeded", "failed", "retried", "dead_lettered", "duplicates", "takeovers", "leases_lost"].forEach(n => {
      const r = f.rates[n];
      rates.push(el("tr", {"data-outcome": n}, el("td", {text: n}), el("td", {class: "num", text: r === undefined ? "…" : r.toFixed(2)}),
        el("td", {class: "num", text: f.counters[n] || 0})));
    });
  }
  table(document.getElementById("rates"), ["outcome", "jobs/s", "total"], rates);
  if (!c && !f) document.querySelector("#rates tbody td").textContent = "no worker publishes to this Redis (see worker fleet)";
  const series = o.fleet ? o.fleet.series : [];
  chart(document.getElementById("chart-jobs"), series.filter(p => p.rated > 0), "jobs a second",
    [["succeeded", "#067647"], ["failed", "#b42318"], ["retried", "#b54708"], ["dead_lettered", "#7a2e9e"], ["duplicates", "#2457c5"]]
      .map(([n, color]) => ({name: n, color: color, get: p => p.rates[n] || 0})));
  chart(document.getElementById("chart-leases"), series, "leases held",
    [{name: "leases held", color: "#2457c5", get: p => p.leases_held}]);
  chart(document.getElementById("chart-lag"), series, "records not committed",
    [{name: "commit lag", color: "#b54708", get: p => p.commit_lag || 0}]);
  table(document.getElementById("lag"), ["topic", "partition", "committed", "end", "lag"],
    (o.lag || []).map(l => el("tr", {}, el("td", {text: l.topic}), el("td", {class: "num", text: l.partition}),
      el("td", {class: "num", text: l.committed}), el("td", {class: "num", text: l.end}), el("td", {class: "num", text: l.lag}))));
}

// chart draws series (fleet points, one a minute, oldest first) over the
// last hour as an inline SVG: one polyline a line {name, color, get}.
function chart(node, series, what, lines) {
  clear(node);
  if (!series.length) { node.append(el("p", {class: "muted", text: "no samples yet: each worker adds one a minute"})); return; }
  const ns = "http://www.w3.org/2000/svg", W = 480, H = 150, L = 40, B = 18;
  const svg = document.createElementNS(ns, "svg");
  const attr = (e, a) => { for (const [k, v] of Object.entries(a)) e.setAttribute(k, String(v)); return e; };
  attr(svg, {viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": what + ", last hour", class: "chart"});
  const now = Date.now(), from = now - 3600e3;
  let top = 0;
  series.forEach(p => lines.forEach(l => { top = Math.max(top, l.get(p)); }));
  top = top > 0 ? top * 1.1 : 1;
  const x = t => L + (W - L - 4) * Math.min(Math.max((t - from) / 3600e3, 0), 1);
  const y = v => 4 + (H - B - 8) * (1 - v / top);
  const text = (tx, ty, s, anchor) => { const e = attr(document.createElementNS(ns, "text"), {x: tx, y: ty, "font-size": 10, fill: "#667085", "text-anchor": anchor || "start"}); e.textContent = s; svg.append(e); };
  svg.append(attr(document.createElementNS(ns, "path"), {d: "M" + L + " 4V" + (H - B) + "H" + (W - 4), stroke: "#e4e7ec", fill: "none"}));
  text(L - 4, 12, top < 10 ? top.toFixed(2) : Math.round(top), "end");
  text(L - 4, H - B, "0", "end");
  text(L, H - 4, "-60 min");
  text(W - 4, H - 4, "now", "end");
  lines.forEach(l => {
    const pts = series.map(p => x(Date.parse(p.t) + 30e3).toFixed(1) + "," + y(l.get(p)).toFixed(1)).join(" ");
    svg.append(attr(document.createElementNS(ns, "polyline"), {points: pts, fill: "none", stroke: l.color, "stroke-width": 1.5, "data-line": l.name}));
  });
  // Colours through the CSSOM: the console's CSP refuses style attributes.
  node.append(svg, el("div", {class: "legend"}, ...lines.map(l => { const s = el("span", {text: "■ " + l.name + " "}); s.style.color = l.color; return s; })));
}

async function pollJobs() {
  const p = await api("api/jobs?cursor=" + encodeURIComponent(jobsCursor));
  jobsNext = p.next;
  document.getElementById("jobs-next").disabled = !p.next;
  document.getElementById("jobs-first").disabled = jobsCursor === "";
  document.getElementById("jobs-page").textContent = "page " + jobsPageNo + (p.next ? "" : " (last)") + ", " + p.rows.length + " leases";
  document.getElementById("jobs-hint").textContent = p.standalone
    ? "Standalone console: job types are known only inside the worker process; elapsed is estimated from the fence (Redis time at the claim)."
    : "Types and elapsed times come from this worker process; leases of other workers show what Redis knows.";
  const rows = p.rows.map(r => {
    const acts = el("td");
    if (canAct() && r.idem) acts.append(actionButton("expire", "expire", {key: r.key, fence: r.fence}, true));
    if (canAct() && r.idem) acts.append(actionButton("cancel", "cancel", {key: r.key, reason: "console"}, true));
    return el("tr", {"data-key": r.key},
      el("td", {}, r.idem ? keyLink(r.key) : el("span", {class: "mono", text: r.key})),
      el("td", {text: r.type || "-"}),
      el("td", {class: "owner", text: r.owner}),
      el("td", {class: "num mono", text: r.fence}),
      el("td", {class: "num", text: r.attempt || "-"}),
      el("td", {class: "elapsed mono"}, r.elapsed_ms ? live(el("span", {title: "from the " + r.elapsed_from}), r.elapsed_ms, 1) : "-"),
      el("td", {}, live(el("span", {class: "countdown"}), r.remaining_ms, -1)),
      el("td", {}, r.state ? stateSpan(r.state) : "-"),
      el("td", {class: "details", title: r.details_size ? r.details_size + " bytes" : null, text: r.details !== undefined ? r.details : "-"}),
      el("td", {}, r.idem ? traceLink(r.trace_url) : ""),
      acts);
  });
  table(document.getElementById("jobs"), ["key", "type", "owner", "fence", "attempt", "elapsed", "lease left", "state", "last heartbeat details", "trace", ""], rows);
}

function kv(pairs) {
  const dl = el("dl", {class: "kv"});
  pairs.forEach(([k, v, cls]) => dl.append(el("dt", {text: k}), el("dd", {class: cls || null}, v instanceof Node ? v : String(v))));
  return dl;
}

function journalTable(j) {
  const t = el("table", {class: "wide journal", "data-fence": j.fence});
  table(t, ["step", "name", "handler", "state", "effect", "attempts", "last error"], j.steps.map(s => el("tr", {"data-step": s.name},
    el("td", {class: "num", text: s.step}), el("td", {text: s.name}), el("td", {class: "mono", text: s.handler}),
    el("td", {class: "step-state"}, stateSpan(s.state)), el("td", {text: s.done ? "done" : "in doubt"}),
    el("td", {class: "num", text: s.attempts}), el("td", {text: s.error || ""}))));
  return t;
}

function historyTable(hs) {
  const t = el("table", {class: "wide history", id: "key-history"});
  table(t, ["attempt", "fence", "owner", "worker", "type", "started", "ended", "how it ended", "compensations", "trace"], hs.map(a => el("tr", {"data-fence": a.fence},
    el("td", {class: "num", text: a.attempt || "-"}), el("td", {class: "num mono", text: a.fence}), el("td", {class: "owner", text: a.owner || "-"}),
    el("td", {class: "mono", text: a.worker || "-"}), el("td", {class: "type", text: a.type || "-"}), el("td", {class: "mono", text: a.started || "-"}), el("td", {class: "mono", text: a.ended || "-"}),
    el("td", {class: "end"}, a.end ? el("span", {class: "state-" + a.end, text: a.end + (a.taken_over && a.end !== "taken_over" ? " (taken over)" : "")}) : "running, or its worker died"),
    el("td", {class: "comps", text: a.compensations.length ? a.compensations.map(c => c.step + ": " + c.outcome).join(", ") : "-"}),
    el("td", {}, a.trace_url ? el("a", {href: a.trace_url, target: "_blank", rel: "noopener noreferrer", text: a.trace_id.slice(0, 16)}) : (a.trace_id ? el("span", {class: "mono", text: a.trace_id.slice(0, 16)}) : "-")))));
  return t;
}

async function pollKey() {
  const target = document.getElementById("key-body");
  if (!keyShown) { clear(target).append(el("p", {class: "hint", text: "Type a key, or click one in Running jobs or Dead letters."})); return; }
  let k;
  try { k = await api("api/key?key=" + encodeURIComponent(keyShown)); } catch (e) { clear(target).append(el("p", {class: "note", text: e.message})); return; }
  const body = el("div", {id: "key-view", "data-key": k.key});
  const grid = el("div", {class: "grid3"});
  grid.append(el("div", {}, el("h2", {text: "Record"}), kv([
    ["key", k.key, "mono"], ["state", stateSpan(k.state)], ["record fence", k.fence, "mono"], ["attempt", k.attempt],
    ["finished at", k.finished_at || "-"], ["held until", k.hold_until || "-"],
    ["cached result", k.result !== undefined ? k.result + (k.result_size > k.result.length ? " … (" + k.result_size + " bytes)" : "") : "-", "mono"],
    ["cached failure", k.failure || "-"],
    ["type", k.type || "-"], ["trace", traceLink(k.trace_url)]])));
  grid.append(el("div", {}, el("h2", {text: "Lease"}), kv(k.leased ? [["lease", "held"], ["fence", k.lease_fence, "mono"], ["owner (digest)", k.owner, "owner"],
    ["lease left", live(el("span", {class: "countdown"}), k.remaining_ms, -1)],
    ["running for", k.elapsed_ms ? live(el("span"), k.elapsed_ms, 1) : "-"]] : [["lease", "none (free, finished, or never seen)"]])));
  grid.append(el("div", {}, el("h2", {text: "Heartbeat details"}), kv(k.has_details ? [["details", k.details, "details"], ["size", k.details_size + " bytes"],
    ["kept for", dur(k.details_kept_ms)]] : [["details", "none"]])));
  body.append(grid);
  const acts = el("div", {class: "actions"});
  if (canAct()) {
    if (k.leased) acts.append(actionButton("Expire lease", "expire", {key: k.key, fence: k.lease_fence}, true));
    if (k.leased) acts.append(actionButton("Cancel job", "cancel", {key: k.key, reason: "console"}, true));
    acts.append(actionButton("Reset key", "reset", {key: k.key}, true));
    if (k.leased) acts.append(actionButton("Reset key and end lease", "reset", {key: k.key, force: true}, true));
  } else if (session.actions) acts.append(el("span", {class: "muted", text: "sign in for actions"}));
  body.append(acts);
  body.append(el("h2", {text: "History (every attempt kept, oldest first)"}));
  if (k.history_error) body.append(el("p", {class: "note", text: k.history_error}));
  if (k.history.length === 0) body.append(el("p", {class: "muted", text: "no attempt in the history"}));
  else body.append(historyTable(k.history));
  body.append(el("h2", {text: "Saga journals (newest fence first)"}));
  if (k.journals_error) body.append(el("p", {class: "note", text: k.journals_error}));
  if (k.journals.length === 0) body.append(el("p", {class: "muted", text: "no journal"}));
  k.journals.forEach(j => body.append(el("p", {class: "journal-head"}, "fence ", el("span", {class: "mono", text: j.fence}), " — journal ",
    stateSpan(j.state), j.created ? " — created " + j.created : ""), journalTable(j)));
  clear(target).append(body);
}

async function pollCompensations() {
  const r = await api("api/compensations");
  const body = el("div");
  if (r.journals.length === 0) body.append(el("p", {class: "muted", id: "comp-none", text: "No dead-lettered or pending compensation."}));
  r.journals.forEach(j => {
    const dead = j.status !== "pending";
    const head = el("p", {class: "comp", "data-key": j.key, "data-status": j.status || "dead_lettered"}, keyLink(j.key), " fence ", el("span", {class: "mono", text: j.fence}),
      dead ? " — dead-lettered since " + (j.dead_since || "?") + " " : " — pending (journal " + j.state + ", created " + j.created + ") ");
    // A pending one is run by a takeover, the sweep or its own retries: no button.
    if (dead && canAct() && r.can_retry) head.append(actionButton("Retry", "retry", {key: j.key}));
    else if (dead && canAct()) head.append(el("span", {class: "muted", text: "(no handlers registered here: retry with worker compensations retry)"}));
    body.append(head, journalTable(j));
  });
  clear(document.getElementById("comp-body")).append(body);
}

async function pollDeadLetters(force) {
  if (!force && dlqLoadedAt !== null && performance.now() - dlqLoadedAt < 5 * pollMS) return;
  const q = new URLSearchParams();
  ["reason", "type", "key"].forEach(n => { const v = document.getElementById("dlq-" + n).value; if (v) q.set(n, v); });
  if (dlqCursor) q.set("cursor", dlqCursor);
  const r = await api("api/deadletters?" + q.toString()); // a failure (503 while another read runs) retries at the next poll
  dlqLoadedAt = performance.now();
  dlqNext = r.next;
  document.getElementById("dlq-next").disabled = !r.next;
  document.getElementById("dlq-first").disabled = dlqCursor === "";
  document.getElementById("dlq-page").textContent = "page " + dlqPageNo + (r.next ? "" : " (last)") + ", " + r.records.length + " records" +
    (r.cut ? " (the read stopped after " + r.scanned + " records, its bound: Next page reads on)" : "");
  const count = (t, m) => table(document.getElementById(t), ["value", "count"], Object.entries(m).map(([k, n]) => el("tr", {}, el("td", {text: k || "(none)"}), el("td", {class: "num", text: n}))));
  count("dlq-reasons", r.by_reason); count("dlq-types", r.by_type);
  table(document.getElementById("dlq"), ["partition", "offset", "time", "reason", "type", "key", "error", "from", "replay", "trace", ""], r.records.map(d => {
    const acts = el("td");
    if (canAct() && d.key) acts.append(actionButton("replay", "replay", {key: d.key, reason: d.reason, type: d.type}), " ", actionButton("reset key", "reset", {key: d.key}, true));
    return el("tr", {"data-key": d.key, "data-offset": d.offset}, el("td", {class: "num", text: d.partition}), el("td", {class: "num", text: d.offset}),
      el("td", {text: d.time}), el("td", {text: d.reason}), el("td", {text: d.type}), el("td", {}, d.key ? keyLink(d.key) : "-"),
      el("td", {class: "details", text: d.error}), el("td", {class: "mono", text: d.orig_topic + "/" + d.orig_partition + "@" + d.orig_offset}),
      el("td", {class: "replay", text: d.replay || "-"}), el("td", {}, d.key ? traceLink(d.trace_url) : ""), acts);
  }));
}

// ---------- routing and polling ----------

function route() {
  const h = decodeURIComponent(location.hash.slice(1) || "overview");
  const [v, ...rest] = h.split("/");
  view = ["overview", "jobs", "key", "compensations", "deadletters"].includes(v) ? v : "overview";
  if (view === "key" && rest.length) { keyShown = rest.join("/"); document.getElementById("key-input").value = keyShown; }
  document.querySelectorAll(".view").forEach(s => { s.hidden = s.id !== "view-" + view; });
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.id === "nav-" + view));
  dlqLoadedAt = null;
  refresh();
}

// Polling pauses while the pointer is on a button or a form field, so that
// a re-rendered table does not move a button away under a click.
let hovering = false;
document.addEventListener("pointerover", ev => { hovering = !!ev.target.closest("button, input"); });

let busy = false;
async function refresh(fromTimer) {
  if (busy || (fromTimer === true && hovering)) return;
  busy = true;
  try {
    if (view === "overview") await pollOverview();
    else if (view === "jobs") await pollJobs();
    else if (view === "key") await pollKey();
    else if (view === "compensations") await pollCompensations();
    else if (view === "deadletters") await pollDeadLetters(false);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("updated").textContent = "update failed: " + e.message;
  } finally { busy = false; }
}

document.getElementById("key-form").addEventListener("submit", ev => {
  ev.preventDefault();
  location.hash = "#key/" + encodeURIComponent(document.getElementById("key-input").value.trim());
});
document.getElementById("dlq-form").addEventListener("submit", ev => { ev.preventDefault(); dlqLoadedAt = null; dlqCursor = ""; dlqPageNo = 1; refresh(); });
document.getElementById("dlq-next").addEventListener("click", () => { if (dlqNext) { dlqCursor = dlqNext; dlqPageNo++; dlqLoadedAt = null; refresh(); } });
document.getElementById("dlq-first").addEventListener("click", () => { dlqCursor = ""; dlqPageNo = 1; dlqLoadedAt = null; refresh(); });
document.getElementById("jobs-next").addEventListener("click", () => { if (jobsNext) { jobsCursor = jobsNext; jobsPageNo++; refresh(); } });
document.getElementById("jobs-first").addEventListener("click", () => { jobsCursor = ""; jobsPageNo = 1; refresh(); });
window.addEventListener("hashchange", route);
setInterval(() => { if (!document.hidden) refresh(true); }, pollMS);
loadSession().catch(e => flash("session: " + e.message, true)).finally(route);
