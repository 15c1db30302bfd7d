// A queue's page: polls GET /ui/api/queue once a second, charts the counts it sees, and runs the
// console's actions on the queue (console.js). Names and values come from clients and operators:
// they are written with textContent, never parsed as HTML.
"use strict";
(function () {
  const POLL_MS = 1000;
  const SAMPLES = 120;        // two minutes of chart at one poll a second
  const SERIES = ["visible", "inflight", "delayed"];
  const SVG_NS = "http://www.w3.org/2000/svg";   // a namespace's name: nothing is fetched from it
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const queue = { region: params.get("region") || "", account: params.get("account") || "", name: params.get("name") || "" };
  const consoleApi = window.elasticmqConsole;
  const samples = [];
  let last = null, timer = null;

  const el = window.elasticmqPage.el;

  function pageOf(q) { return "/ui/queue?" + new URLSearchParams({ region: q.region, account: q.account, name: q.name }); }

  function clock(ms) { return new Date(ms).toLocaleTimeString([], { hour12: false }); }

  function rows(tbody, entries) {
    tbody.replaceChildren(...(entries.length ? entries.map(([k, v]) => el("tr", { data: { key: k } }, el("th", {}, k), el("td", {}, v)))
                                             : [el("tr", {}, el("td", { class: "muted" }, "none"))]));
  }

  // -- what the page shows -----------------------------------------------------------------------

  function renderChart() {
    const top = Math.max(1, ...samples.flatMap((s) => SERIES.map((k) => s[k])));
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", "0 0 100 40");
    svg.setAttribute("preserveAspectRatio", "none");
    const x0 = SAMPLES - samples.length;
    for (const key of SERIES) {
      const line = document.createElementNS(SVG_NS, "polyline");
      line.setAttribute("class", key);
      line.dataset.series = key;
      line.setAttribute("vector-effect", "non-scaling-stroke");
      line.setAttribute("points", samples.map((s, i) =>
        ((x0 + i) * 100 / (SAMPLES - 1)).toFixed(1) + "," + (38 - s[key] / top * 36).toFixed(1)).join(" "));
      svg.append(line);
    }
    $("chart").replaceChildren(svg, el("span", { class: "top muted small" }, String(top)));
  }

  function renderTasks(q) {
    const tasks = q.move_tasks || [];
    $("tasks").tBodies[0].replaceChildren(...tasks.map((t) => {
      const cancel = el("td", {});
      if (t.TaskHandle) {
        const b = el("button", { type: "button", class: "cancel-redrive" }, "cancel");
        b.disabled = !consoleApi.state.logged_in;
        b.addEventListener("click", () => run("CancelMessageMoveTask", { TaskHandle: t.TaskHandle }, "cancelled the redrive"));
        cancel.append(b);
      }
      const to = t.DestinationArn ? t.DestinationArn.split(":").pop() : "their source queues";
      return el("tr", { data: { status: t.Status } }, el("td", { class: "status" }, t.Status + (t.FailureReason ? ": " + t.FailureReason : "")),
        el("td", {}, to), el("td", { class: "num moved" }, String(t.ApproximateNumberOfMessagesMoved)),
        el("td", { class: "num" }, t.ApproximateNumberOfMessagesToMove === undefined ? "-" : String(t.ApproximateNumberOfMessagesToMove)),
        el("td", {}, clock(t.StartedTimestamp)), cancel);
    }));
  }

  function render(q) {
    document.title = "elasticmq-py · " + q.name;
    $("queue-name").textContent = q.name;
    $("queue-where").textContent = q.region + " / " + q.account + (q.fifo ? " · FIFO" : "");
    for (const k of SERIES) $(k).textContent = q.counts[k];
    $("fifo-fields").hidden = !q.fifo;
    rows($("attributes").tBodies[0], Object.entries(q.attributes).sort());
    rows($("tags").tBodies[0], Object.entries(q.tags).sort());
    const rd = $("redrive");
    if (q.redrive && q.redrive.dlq) {
      const d = q.redrive.dlq;
      rd.replaceChildren("dead letters go to ", d.exists ? el("a", { id: "dlq-link", href: pageOf(d) }, d.name) : d.name + " (missing)",
        " after " + q.redrive.max_receive_count + " receives");
    } else rd.textContent = "no redrive policy";
    const sources = q.dlq_for || [];
    $("dlq-for").replaceChildren(...(sources.length ? ["the dead-letter queue of "] : []),
      ...sources.flatMap((s, i) => [i ? ", " : "", el("a", { href: pageOf(s), class: "source" }, s.name)]));
    $("redrive-panel").hidden = !sources.length;
    const to = $("redrive-to");
    if (to.options.length !== sources.length + 1) {
      to.replaceChildren(el("option", { value: "" }, "the queues each message came from"),
        ...sources.map((s) => el("option", { value: "arn:aws:sqs:" + s.region + ":" + s.account + ":" + s.name }, s.name)));
    }
    renderTasks(q);
    $("updated").textContent = "updated " + new Date().toLocaleTimeString([], { hour12: false });
  }

  function renderAccess(state) {
    const ok = state.logged_in;
    for (const b of document.querySelectorAll("#actions button")) b.disabled = !ok;
    $("actions-note").textContent = ok ? "(each runs as the SQS request it is, on the master)" :
      state.writable ? "(log in to act)" : "(read-only)";
  }

  function renderPeeked(out) {
    const msgs = (out && out.Messages) || [];
    $("peeked").hidden = false;
    const attrText = (m) => Object.entries(m || {}).map(([k, v]) => k + " = " +
      (v.StringValue !== undefined ? v.StringValue : v.BinaryValue !== undefined ? "(binary) " + v.BinaryValue : v) +
      (v.DataType ? " (" + v.DataType + ")" : "")).join("\n");
    $("peeked").tBodies[0].replaceChildren(...msgs.map((m) => el("tr", { data: { id: m.MessageId } },
      el("td", { class: "mono" }, m.MessageId), el("td", { class: "body" }, m.Body),
      el("td", { class: "pre attrs" }, attrText(m.MessageAttributes)),
      el("td", { class: "pre sysattrs" }, attrText(m.Attributes)),
      el("td", { class: "num receives" }, (m.Attributes || {}).ApproximateReceiveCount || "-"))));
    return msgs.length;
  }

  // -- actions -------------------------------------------------------------------------------------

  async function run(action, p, what) {
    const out = $("action-result");
    out.className = "result";
    out.textContent = action + "…";
    const r = await consoleApi.act(action, queue, p);
    const via = r.body.via ? " (executed by the master, " + r.body.via + ")" : "";
    if (r.body.ok) {
      out.className = "result ok";
      out.textContent = (typeof what === "function" ? what(r.body.output) : what) + via;
    } else {
      const e = r.body.error || {};
      out.className = "result bad";
      out.textContent = action + " failed: " + (e.code || r.status) + ": " + (e.message || "") + via;
    }
    poll();
    return r;
  }

  function attrRow() {
    const row = el("div", { class: "attr" },
      el("input", { class: "attr-name", placeholder: "attribute name" }),
      el("select", { class: "attr-type" }, el("option", {}, "String"), el("option", {}, "Number"), el("option", {}, "Binary")),
      el("input", { class: "attr-value", placeholder: "value (Binary: base64)" }));
    $("send-attrs").append(row);
  }

  $("add-attr").addEventListener("click", attrRow);
  $("send-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = { MessageBody: $("send-body").value };
    const attrs = {};
    for (const row of document.querySelectorAll("#send-attrs .attr")) {
      const name = row.querySelector(".attr-name").value.trim();
      if (!name) continue;
      const type = row.querySelector(".attr-type").value, value = row.querySelector(".attr-value").value;
      attrs[name] = type === "Binary" ? { DataType: type, BinaryValue: value } : { DataType: type, StringValue: value };
    }
    if (Object.keys(attrs).length) p.MessageAttributes = attrs;
    if (last && last.fifo) {
      if ($("send-group").value) p.MessageGroupId = $("send-group").value;
      if ($("send-dedup").value) p.MessageDeduplicationId = $("send-dedup").value;
    }
    run("SendMessage", p, (o) => "sent message " + o.MessageId);
  });
  $("peek").addEventListener("click", () =>
    run("ReceiveMessage", { MaxNumberOfMessages: Number($("peek-count").value) }, (o) => "peeked " + renderPeeked(o) + " messages"));
  $("purge").addEventListener("click", () => {
    if (confirm("Purge every message of " + queue.name + "?")) run("PurgeQueue", {}, "purged " + queue.name);
  });
  $("delete").addEventListener("click", () => {
    if (confirm("Delete the queue " + queue.name + " and its messages?")) run("DeleteQueue", {}, "deleted " + queue.name);
  });
  $("start-redrive").addEventListener("click", () => {
    const p = {};
    if ($("redrive-to").value) p.DestinationArn = $("redrive-to").value;
    if ($("redrive-rate").value) p.MaxNumberOfMessagesPerSecond = Number($("redrive-rate").value);
    run("StartMessageMoveTask", p, "started a redrive");
  });

  // -- the loop --------------------------------------------------------------------------------------

  async function poll() {
    clearTimeout(timer);
    try {
      const r = await fetch("/ui/api/queue?" + new URLSearchParams(queue), { cache: "no-store" });
      const body = await r.json();
      if (r.status === 404) {
        $("missing").textContent = body.error + " (deleted, or not created yet)";
        $("missing").hidden = false;
        for (const k of SERIES) $(k).textContent = "-";
      } else if (r.status === 200) {
        $("missing").hidden = true;
        last = body;
        samples.push(body.counts);
        while (samples.length > SAMPLES) samples.shift();
        render(body);
        renderChart();
        renderAccess(consoleApi.state);
      }
    } catch (err) {
      $("missing").textContent = "This node does not answer (" + err.message + "); retrying every second.";
      $("missing").hidden = false;
    } finally {
      timer = setTimeout(poll, POLL_MS);
    }
  }

  consoleApi.onChange((state) => { renderAccess(state); if (last) renderTasks(last); });
  poll();
})();
