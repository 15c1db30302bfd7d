// The dashboard's only script: polls this node's JSON routes once a second and redraws.
// Everything shown comes from names and values a client or an operator chose (queue names, node
// names): it is written with textContent, never parsed as HTML.
"use strict";
(function () {
  const POLL_MS = 1000;
  const SAMPLES = 60;        // one minute of sparkline at one poll a second
  const SERIES = [           // [key, label]: rates over successive samples
    ["all", "requests"], ["send", "sends"], ["receive", "receives"], ["delete", "deletes"],
    ["errors", "errors"], ["forwarded", "forwarded"], ["batches", "batches"],
  ];
  const SVG_NS = "http://www.w3.org/2000/svg";   // a namespace's name: nothing is fetched from it
  const $ = (id) => document.getElementById(id);
  const view = { offset: 0, limit: 50, filter: "", sort: "name" };
  const samples = [];
  let timer = null, busy = false, again = false;

  const el = window.elasticmqPage.el;

  function td(text, cls) { return el("td", cls ? { class: cls } : {}, text === null || text === undefined ? "-" : String(text)); }

  function clock(unixSeconds) {
    return new Date(unixSeconds * 1000).toLocaleTimeString([], { hour12: false });
  }

  function bytes(n) {
    if (typeof n !== "number") return "-";
    const units = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + units[i];
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: "no-store" });
    let body = {};
    try { body = await r.json(); } catch (e) { /* an empty or non-JSON answer */ }
    return { status: r.status, body };
  }

  // -- header and cards ------------------------------------------------------------------------

  function renderHeader(st, health) {
    $("node").textContent = st.node ? "· node " + st.node + (st.cluster ? " of cluster " + st.cluster : "") : "";
    document.title = "elasticmq-py " + (st.node || "");
    const h = health.body || {};
    const pill = $("serving");
    const ok = health.status === 200;
    pill.className = "pill " + (ok ? "ok" : "bad");
    const forwarding = h.groups ? "serving, by forwarding other groups to their masters"
                                : "serving, by forwarding to " + h.master;
    pill.textContent = ok ? (h.serves === "forwarding" ? forwarding : "serving") : "not serving";
    $("reason").textContent = h.reason || "";
    const v = st.view || {};
    const repl = st.replication || {};
    $("master-key").textContent = st.groups ? "Raft leader" : "master";   // with groups it assigns the masters
    $("master").textContent = st.master || v.master || "none";
    $("view").textContent = v.view_id !== undefined ? v.view_id : "-";
    $("epoch").textContent = st.epoch !== undefined && st.epoch !== null ? st.epoch : (v.epoch !== undefined ? v.epoch : "-");
    $("term").textContent = st.term !== undefined ? st.term : "-";
    $("policy").textContent = repl.policy || (repl.enabled ? "-" : "single node");
    $("forwarding").textContent = repl.forward === undefined ? "-" : (repl.forward ? "on" : "off");
    $("updated").textContent = "updated " + new Date().toLocaleTimeString([], { hour12: false });
  }

  // -- members -----------------------------------------------------------------------------------

  function renderMembers(st, activity) {
    const v = st.view || null;
    const repl = st.replication || {};
    const inView = new Set(v ? v.members : st.members || []);
    const names = new Set([st.node, ...(st.configured || []), ...inView, ...Object.keys(st.peers || {})]);
    const master = st.master || (v && v.master);
    const links = (activity && activity.members_http) || {};
    const rows = [];
    for (const name of [...names].filter(Boolean).sort()) {
      const me = name === st.node;
      let role = inView.has(name) ? "replica" : "not in view";
      if (name === master) role = me ? (st.active ? "master (active)" : "master (not active)") : "master";
      if (!inView.size && me) role = st.role || "master";
      const mastered = (st.groups || []).filter((g) => g.master === name).map((g) => g.id);
      if (st.groups && inView.has(name)) {
        role = mastered.length ? "master of group" + (mastered.length > 1 ? "s " : " ") + mastered.join(", ") : "replica";
      }
      const peer = (st.peers || {})[name];
      const raft = me ? "this node" : peer ? "out " + peer.out + ", in " + (peer.in ? "up" : "down") : "-";
      const raftCls = me || !peer ? "" : (peer.out === "up" && peer.in ? "up" : "down");
      const streamUp = (repl.peers || {})[name];
      const stream = me ? "this node" : streamUp === undefined ? "-" : (streamUp ? "up" : "down");
      const r = (repl.replicas || {})[name];
      let acked = r ? r.acked_seq : null, lagB = r ? r.lag_batches : null, lagMs = r ? r.lag_ms : null;
      if (me && repl.enabled) acked = repl.role === "master" ? (repl.log || {}).last_seq : repl.applied_seq;
      const lagging = r && (r.lag_batches > 0 || r.needs_transfer);
      const link = links[name] ? el("a", { href: links[name] + "/ui" }, links[name].replace("http://", "")) : "-";
      rows.push(el("tr", { class: (me ? "me " : "") + (name === master ? "master" : ""), data: { member: name } },
        td(name), td(role, "role"), td(raft, raftCls), td(stream, stream === "up" ? "up" : stream === "down" ? "down" : ""),
        td(acked, "num acked"), td(r && r.needs_transfer ? "transfer" : lagB, "num lag-batches" + (lagging ? " lagging" : "")),
        td(lagMs, "num lag-ms" + (lagging ? " lagging" : "")), el("td", {}, link)));
    }
    $("members").tBodies[0].replaceChildren(...rows);
    $("lag-note").textContent = st.groups
      ? "Acked seq and lag are replication group 0's, measured by its master: open its dashboard to see them."
      : repl.enabled && repl.role !== "master"
        ? "Each replica's lag is measured by the master: open the master's dashboard to see it." : "";
  }

  // -- replication groups ([cluster] groups >= 2; /cluster lists none with one group) -------------------

  function renderGroups(st, activity) {
    const groups = Array.isArray(st.groups) ? st.groups : [];
    $("groups-section").hidden = !groups.length;
    const links = (activity && activity.members_http) || {};
    const rows = groups.map((g) => {
      const master = g.master && g.master !== st.node && links[g.master]
        ? el("a", { href: links[g.master] + "/ui" }, g.master) : g.master || "none";
      return el("tr", { class: g.serving ? "served" : "", data: { group: g.id } },
        td(g.id, "num"), el("td", { class: "master" }, master), td(g.epoch, "num epoch"), td(g.queues, "num queues"),
        td(g.lag, "num lag"), td(g.serving ? "yes (active master)" : "no", "serving" + (g.serving ? " up" : "")));
    });
    $("groups").tBodies[0].replaceChildren(...rows);
  }

  // -- replication and the last transfer -------------------------------------------------------------

  function renderReplication(st) {
    const r = st.replication || {};
    $("replication-group").textContent = st.groups ? "(group 0)" : "";
    if (!r.enabled) { $("replication").textContent = "off (a single node)"; $("transfer").textContent = "none"; return; }
    const log = r.log || {};
    const parts = ["role " + r.role, "serving " + (r.serving ? "yes" : "no"),
      "log " + (log.entries ? log.first_seq + ".." + log.last_seq : "empty") + " (" + bytes(log.bytes) + ")"];
    if (r.role !== "master") parts.push("applied seq " + r.applied_seq);
    if (r.role === "master") parts.push("delay " + r.delay_ms + " ms", "queue " + r.replication_queue + " ops");
    if (r.halted) parts.push("HALTED");
    if (r.throttling) parts.push("throttling producers");
    if (r.amnesiac) parts.push("amnesiac (restarted empty, catching up)");
    $("replication").textContent = parts.join(" · ");
    const t = r.last_transfer;
    $("transfer").textContent = !t ? "none" :
      (t.direction === "sent" ? "sent to " : "received from ") + t.peer +
      (typeof t.at === "number" ? " at " + clock(t.at) : "") + ": " + t.records + " records, " + bytes(t.bytes) +
      (typeof t.duration_s === "number" ? " in " + t.duration_s.toFixed(2) + " s" : "") +
      (t.at_seq !== undefined ? ", up to seq " + t.at_seq : "");
  }

  // -- throughput sparklines --------------------------------------------------------------------------

  function sample(st, activity) {
    const repl = st.replication || {};
    const req = activity.requests || {};
    samples.push({
      t: activity.at, all: req.all, send: req.send, receive: req.receive, delete: req.delete, errors: req.errors,
      forwarded: (repl.forwarding || {}).forwarded || 0,
      batches: repl.role === "master" ? (repl.log || {}).last_seq || 0 : repl.applied_seq || 0,
    });
    while (samples.length > SAMPLES + 1) samples.shift();
  }

  function rates(key) {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const dt = samples[i].t - samples[i - 1].t;
      const dv = (samples[i][key] || 0) - (samples[i - 1][key] || 0);
      out.push(dt > 0 ? Math.max(0, dv) / dt : 0);   // a counter that went back: a restart
    }
    return out;
  }

  function renderSparks() {
    const box = $("sparks");
    const rows = [];
    for (const [key, label] of SERIES) {
      const r = rates(key);
      const top = Math.max(1, ...r);
      // the newest rate at the right edge; a page opened a moment ago fills from the right
      const x0 = SAMPLES - r.length;
      const pts = r.map((v, i) => ((x0 + i) * 100 / (SAMPLES - 1)).toFixed(1) + "," + (28 - v / top * 26).toFixed(1)).join(" ");
      const svg = document.createElementNS(SVG_NS, "svg");
      svg.setAttribute("viewBox", "0 0 100 30");
      svg.setAttribute("preserveAspectRatio", "none");
      const line = document.createElementNS(SVG_NS, "polyline");
      line.setAttribute("points", pts);
      line.setAttribute("vector-effect", "non-scaling-stroke");
      svg.append(line);
      const now = r.length ? r[r.length - 1] : 0;
      rows.push(el("div", { class: "spark", data: { series: key } }, el("span", {}, label), svg,
        el("span", { class: "rate" }, (now >= 10 ? now.toFixed(0) : now.toFixed(1)) + "/s")));
    }
    box.replaceChildren(...rows);
  }

  // -- queues ------------------------------------------------------------------------------------------------

  function queuePage(region, account, name) {
    return "/ui/queue?" + new URLSearchParams({ region, account, name });
  }

  function renderQueues(page) {
    const t = page.totals || {};
    $("queue-summary").textContent = page.total_queues + " queues · " + t.visible + " visible · " + t.inflight +
      " in flight · " + t.delayed + " delayed · " + t.dlqs + " dead-letter queues";
    const rows = page.queues.map((q) => {
      const dlq = el("td", {});
      if (q.dlq && q.dlq.exists && q.dlq.same_namespace) dlq.append(el("a", { href: queuePage(q.region, q.account, q.dlq.name) }, q.dlq.name));
      else if (q.dlq) dlq.append(q.dlq.name + (q.dlq.exists ? "" : " (missing)"));
      else dlq.append("-");
      const name = el("td", {}, el("a", { title: q.url, href: queuePage(q.region, q.account, q.name) }, q.name));
      if (q.dlq_for) name.append(el("span", { class: "dlq" }, "DLQ of " + q.dlq_for));
      return el("tr", { data: { queue: q.name } }, name, td(q.region + " / " + q.account),
        td(q.visible, "num visible"), td(q.inflight, "num inflight"), td(q.delayed, "num delayed"), dlq);
    });
    $("queues").tBodies[0].replaceChildren(...rows);
    const first = page.matched ? page.offset + 1 : 0;
    const last = page.offset + page.queues.length;
    $("pager").textContent = first + "–" + last + " of " + page.matched +
      (page.filter ? " matching “" + page.filter + "”" : "");
    $("prev").disabled = page.offset === 0;
    $("next").disabled = last >= page.matched;
  }

  // -- events ----------------------------------------------------------------------------------------------

  function describe(e) {
    switch (e.event) {
      case "view": return "view " + e.view_id + ": master " + e.master + ", epoch " + e.epoch + ", members " + (e.members || []).join(", ");
      case "role": return e.role + " in term " + e.term;
      case "leader": return "Raft leader " + (e.leader || "none") + " (term " + e.term + ")";
      case "activated": case "deactivated": return e.reason || "";
      case "sync_started": return "master-change sync of epoch " + e.epoch + " from seq " + e.last_seq;
      case "synced": return "synced epoch " + e.epoch + " at seq " + e.last_seq +
        (e.divergent && e.divergent.length ? ", reset " + e.divergent.join(", ") : "");
      case "transfer_started": return "sending a snapshot to " + e.peer + " at seq " + e.at_seq;
      case "transfer_finished": return (e.direction === "sent" ? "sent to " : "received from ") + e.peer + ": " +
        e.records + " records, " + bytes(e.bytes) + " in " + Number(e.duration_s).toFixed(2) + " s";
      case "console": return e.peer + " " + e.action + (e.queue ? " " + e.queue : "") + ": " + e.outcome +
        (e.error ? " (" + e.error + ")" : "") + (e.via ? ", executed by " + e.via : "");
      case "started": return "started" + (e.restarted ? " (restarted: amnesiac until caught up)" : "");
      default: {
        const rest = Object.assign({}, e);
        for (const k of ["ts", "node", "event"]) delete rest[k];
        return JSON.stringify(rest);
      }
    }
  }

  function renderEvents(activity) {
    $("history").textContent = activity.history ? "(from " + activity.history + ")" : "(this node keeps no history log)";
    const items = (activity.events || []).slice().reverse().map((e) =>
      el("li", { data: { event: e.event } }, clock(e.ts) + "  ", el("span", { class: "tag" }, e.event), " " + describe(e)));
    $("events").replaceChildren(...items);
  }

  // -- the loop -----------------------------------------------------------------------------------------------

  async function poll() {
    if (busy) { again = true; return; }
    busy = true;
    clearTimeout(timer);
    try {
      const q = new URLSearchParams({ offset: view.offset, limit: view.limit, filter: view.filter, sort: view.sort });
      const [cluster, health, queues, activity] = await Promise.all([
        getJSON("/cluster"), getJSON("/health"), getJSON("/ui/api/queues?" + q), getJSON("/ui/api/activity")]);
      if (cluster.status !== 200) throw new Error("GET /cluster answered " + cluster.status);
      renderHeader(cluster.body, health);
      renderMembers(cluster.body, activity.body);
      renderGroups(cluster.body, activity.body);
      renderReplication(cluster.body);
      if (activity.status === 200) {
        sample(cluster.body, activity.body);
        renderSparks();
        renderEvents(activity.body);
      }
      if (queues.status === 200) renderQueues(queues.body);
      $("unreachable").hidden = true;
    } catch (err) {
      const b = $("unreachable");
      b.textContent = "This node does not answer (" + err.message + "); retrying every second. " +
        "What is shown is its last known state.";
      b.hidden = false;
      $("serving").className = "pill bad";
      $("serving").textContent = "unreachable";
    } finally {
      busy = false;
      if (again) { again = false; poll(); } else timer = setTimeout(poll, POLL_MS);
    }
  }

  let typing = null;
  $("filter").addEventListener("input", (ev) => {
    clearTimeout(typing);
    typing = setTimeout(() => { view.filter = ev.target.value.trim(); view.offset = 0; poll(); }, 250);
  });
  $("sort").addEventListener("change", (ev) => { view.sort = ev.target.value; view.offset = 0; poll(); });
  $("prev").addEventListener("click", () => { view.offset = Math.max(0, view.offset - view.limit); poll(); });
  $("next").addEventListener("click", () => { view.offset += view.limit; poll(); });
  poll();
})();
