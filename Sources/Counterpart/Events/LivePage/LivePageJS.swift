extension LivePage {
    /// The page's script: one EventSource, state kept in plain objects, the DOM redrawn at
    /// most a few times a second (the log only up to `PAGE` rows: 10,000 entries filter in
    /// a few milliseconds, and no more rows than that are ever in the document).
    static let js = #"""
"use strict";
(() => {
  const MAX_ENTRIES = 10000;   // requests the page keeps (the oldest go)
  const PAGE = 200;            // rows of the log shown at once ("Show more" adds as many)
  const ENDED_KEPT = 8;        // finished transfers still shown
  const RESUMABLE_KEPT = 100;  // resumable uploads shown at most
  const $ = (id) => document.getElementById(id);

  const entries = [];                 // newest last
  const entryKeys = new Set();
  const transfers = new Map();        // id → transfer, in arrival order
  const resumable = new Map();        // upload id → last change
  const rules = new Map();            // rule id → rule
  let shown = PAGE;
  let paused = false;
  let frozenCount = 0;                // entries shown while paused
  let selected = null;                // the entry whose details are open
  let opener = null;                  // the button that opened them
  let dirty = {log: false, transfers: false, resumable: false, rules: false};
  let scheduled = null;
  let lastLogDraw = 0;
  let passing = 0;                    // requests the stream skipped since the journal was last read
  let fillIn = null;                  // reads the journal once they stop coming
  let skippedTotal = 0;               // requests the stream skipped, all told (the browser test reads it)

  const announce = (text) => { const a = $("announcer"); a.textContent = ""; setTimeout(() => { a.textContent = text; }, 30); };
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  function size(n) {
    if (n === null || n === undefined) return "?";
    if (n < 1024) return `${n} ${n === 1 ? "byte" : "bytes"}`;
    let i = 0; let v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
  }
  const time = (text) => { const d = new Date(text); return isNaN(d) ? text : d.toLocaleTimeString(); };
  function cell(row, text, label, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (label) td.dataset.label = label;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  // ---- The request log ----

  function keyOf(entry, eventID) { return entry.sequence > 0 ? `s${entry.sequence}` : `e${eventID}`; }
  function addEntry(entry, eventID, keepNewest = true) {
    const key = keyOf(entry, eventID);
    if (entryKeys.has(key)) return;
    entryKeys.add(key);
    entry.key = key;
    entry.text = [entry.method, entry.path, entry.target, String(entry.status), entry.clientAddress,
                  entry.fault ? entry.fault.fault : "", entry.clientHungUp ? "hung up" : ""].join(" ").toLowerCase();
    entries.push(entry);
    if (keepNewest) keepTheNewest();
    mark("log");
  }

  // The oldest go first: entries are in the order the server finished them.
  function keepTheNewest() {
    if (entries.length <= MAX_ENTRIES) return;
    const gone = entries.splice(0, entries.length - MAX_ENTRIES);
    for (const old of gone) entryKeys.delete(old.key);
  }

  function matching() {
    const words = $("log-filter").value.toLowerCase().split(/\s+/).filter(Boolean);
    const upTo = paused ? frozenCount : entries.length;
    const found = [];
    let total = 0;
    for (let i = upTo - 1; i >= 0; i--) {
      const entry = entries[i];
      if (words.every((w) => entry.text.includes(w))) {
        total++;
        if (found.length < shown) found.push(entry);
      }
    }
    return {found, total, upTo};
  }

  function drawLog() {
    const {found, total, upTo} = matching();
    const body = document.createDocumentFragment();
    for (const entry of found) {
      const row = document.createElement("tr");
      row.dataset.class = String(entry.status).charAt(0);
      if (entry.clientHungUp) row.dataset.hungUp = "";
      if (selected && selected.key === entry.key) row.className = "selected";
      cell(row, String(entry.sequence || ""), "#", "n");
      cell(row, time(entry.receivedAt), "Time", "time");
      cell(row, entry.method, "Method");
      const path = cell(row, "", "Path", "path");
      const open = document.createElement("button");
      open.type = "button";
      open.className = "open";
      open.textContent = entry.target;
      open.dataset.key = entry.key;
      open.setAttribute("aria-label", `${entry.method} ${entry.target}, ${entry.status}${entry.clientHungUp ? ", client hung up" : ""}: details`);
      path.appendChild(open);
      cell(row, entry.clientHungUp ? (entry.status ? `${entry.status}, hung up` : "hung up") : String(entry.status), "Status", "n status-code");
      cell(row, size(entry.requestBodyBytes), "Received", "n");
      cell(row, size(entry.bytesSent === null ? entry.responseBodyBytes : entry.bytesSent), "Sent", "n");
      cell(row, String(entry.durationMilliseconds), "ms", "n");
      cell(row, entry.fault ? entry.fault.fault + (entry.fault.rule ? ` (rule ${entry.fault.rule})` : "") : "", "Fault", "mono fault");
      body.appendChild(row);
    }
    const tbody = $("log").tBodies[0];
    // Keep the focus on the row button it was on when the rows are redrawn.
    const focusedKey = document.activeElement && document.activeElement.classList.contains("open") ? document.activeElement.dataset.key : null;
    tbody.replaceChildren(body);
    if (focusedKey) { const again = tbody.querySelector(`button[data-key="${focusedKey}"]`); if (again) again.focus(); }
    $("log-count").textContent = `(${entries.length.toLocaleString()}${entries.length >= MAX_ENTRIES ? ", the newest kept" : ""})`;
    const filtered = $("log-filter").value.trim() !== "";
    let note = `Showing the newest ${found.length.toLocaleString()} of ${total.toLocaleString()}${filtered ? " matching" : ""}.`;
    if (paused) note += ` Paused: ${(entries.length - upTo).toLocaleString()} newer not shown.`;
    if (passing > 0) note += ` ${passing.toLocaleString()} more came too fast to show one by one: the journal's newest fill in when the requests slow down (the journal keeps the last --journal-size).`;
    $("log-shown").textContent = total === 0 ? (filtered ? "Nothing matches the filter." : "No request yet.") : note;
    $("log-more").hidden = found.length >= total;
    lastLogDraw = performance.now();
  }

  function openDetails(key, button) {
    const entry = entries.find((e) => e.key === key);
    if (!entry) return;
    selected = entry;
    opener = button;
    $("details-number").textContent = `${entry.sequence ? "#" + entry.sequence + ": " : ""}${entry.method} ${entry.target}`;
    const summary = $("details-summary");
    summary.replaceChildren();
    const facts = [
      ["Status", entry.clientHungUp ? `${entry.status} — the client hung up before the answer was sent` : String(entry.status)],
      ["Received at", entry.receivedAt], ["Duration", `${entry.durationMilliseconds} ms`],
      ["Client", entry.clientAddress], ["Decoded path", entry.path],
      ["Request body", size(entry.requestBodyBytes)], ["Response body", size(entry.responseBodyBytes)],
      ["Sent", entry.bytesSent === null ? "unknown" : size(entry.bytesSent)],
      ["Fault", entry.fault ? entry.fault.fault + (entry.fault.rule ? ` (rule ${entry.fault.rule})` : "") : "none"],
    ];
    for (const [name, value] of facts) {
      const dt = document.createElement("dt"); dt.textContent = name;
      const dd = document.createElement("dd"); dd.textContent = value;
      summary.append(dt, dd);
    }
    const headers = document.createDocumentFragment();
    for (const [name, value] of entry.headers) {
      const row = document.createElement("tr");
      cell(row, name, "Name", "mono");
      cell(row, value, "Value", "mono");
      headers.appendChild(row);
    }
    $("details-headers").tBodies[0].replaceChildren(headers);
    const parts = document.createDocumentFragment();
    for (const part of entry.parts) {
      const row = document.createElement("tr");
      cell(row, part.name, "Name");
      cell(row, part.filename === null ? "(a text field)" : part.filename, "Filename");
      cell(row, part.contentType, "Type");
      cell(row, size(part.size), "Size", "n");
      cell(row, part.sha256 || "", "SHA-256", "mono");
      parts.appendChild(row);
    }
    $("details-parts").tBodies[0].replaceChildren(parts);
    $("details-parts-block").hidden = entry.parts.length === 0;
    $("details").hidden = false;
    $("details-heading").focus();
    mark("log");
  }

  function closeDetails() {
    $("details").hidden = true;
    selected = null;
    mark("log");
    draw();
    const back = opener && opener.dataset.key ? $("log").querySelector(`button[data-key="${opener.dataset.key}"]`) : null;
    (back || $("log-filter")).focus();
    opener = null;
  }

  // ---- Transfers ----

  function drawTransfers() {
    const list = $("transfers");
    const seen = new Set();
    for (const t of transfers.values()) {
      seen.add(String(t.id));
      let item = list.querySelector(`li[data-id="${t.id}"]`);
      if (!item) {
        item = document.createElement("li");
        item.className = "transfer";
        item.dataset.id = String(t.id);
        item.innerHTML = '<div class="transfer-head"><span class="transfer-name"></span><span class="transfer-dir"></span></div>' +
          '<progress></progress><div class="transfer-foot"><span class="transfer-bytes"></span><span class="transfer-rate"></span></div>';
        const name = `${t.direction === "upload" ? "Upload" : "Download"} ${t.method} ${t.path}`;
        item.querySelector(".transfer-name").textContent = `${t.method} ${t.path}`;
        item.querySelector(".transfer-dir").textContent = t.direction === "upload" ? "↑ upload" : "↓ download";
        item.querySelector("progress").setAttribute("aria-label", name);
        list.prepend(item);
      }
      const state = t.ended ? (t.total !== null && t.bytes < t.total ? "cut" : "ended") : "running";
      item.dataset.state = state;
      const bar = item.querySelector("progress");
      if (t.total !== null) { bar.max = Math.max(t.total, 1); bar.value = t.bytes; } else if (t.ended) { bar.max = 1; bar.value = 1; } else { bar.removeAttribute("value"); }
      item.querySelector(".transfer-bytes").textContent =
        `${size(t.bytes)}${t.total !== null ? " of " + size(t.total) : ""}${t.total ? ` (${Math.floor(100 * t.bytes / t.total)} %)` : ""}`;
      item.querySelector(".transfer-rate").textContent =
        state === "running" ? `${size(t.bytesPerSecond)}/s` : (state === "cut" ? `cut, ${size(t.bytesPerSecond)}/s on average` : `done, ${size(t.bytesPerSecond)}/s on average`);
    }
    for (const item of [...list.children]) if (!seen.has(item.dataset.id)) item.remove();
    const running = [...transfers.values()].filter((t) => !t.ended).length;
    $("transfers-count").textContent = running ? `(${running} running)` : "";
    $("transfers-empty").hidden = transfers.size > 0;
  }

  function addTransfer(t) {
    const before = transfers.get(t.id);
    transfers.set(t.id, t);
    if (t.ended) {
      if (!before || !before.ended) announce(`${t.direction === "upload" ? "Upload" : "Download"} ${t.path} ${t.total !== null && t.bytes < t.total ? "was cut" : "ended"} at ${size(t.bytes)}.`);
      const ended = [...transfers.values()].filter((x) => x.ended);
      for (const old of ended.slice(0, Math.max(0, ended.length - ENDED_KEPT))) transfers.delete(old.id);
    }
    mark("transfers");
  }

  // ---- Resumable uploads ----

  function drawResumable() {
    const body = document.createDocumentFragment();
    for (const r of [...resumable.values()].reverse()) {
      const row = document.createElement("tr");
      row.dataset.state = r.change;
      cell(row, r.upload, "Upload", "mono");
      cell(row, r.protocol, "Protocol");
      cell(row, size(r.offset), "Offset", "n");
      cell(row, r.length === null ? "not told yet" : size(r.length), "Length", "n");
      const progress = cell(row, "", "Progress");
      const bar = document.createElement("progress");
      bar.setAttribute("aria-label", `upload ${r.upload}`);
      if (r.length !== null) { bar.max = Math.max(r.length, 1); bar.value = r.offset; }
      progress.appendChild(bar);
      cell(row, r.change.replace("-", " "), "Last change");
      body.appendChild(row);
    }
    $("resumable").tBodies[0].replaceChildren(body);
    $("resumable").hidden = resumable.size === 0;
    $("resumable-empty").hidden = resumable.size > 0;
  }

  function addResumable(r) {
    resumable.delete(r.upload);
    resumable.set(r.upload, r);
    if (r.change === "completed" || r.change === "expired") announce(`Resumable upload ${r.upload} ${r.change}.`);
    while (resumable.size > RESUMABLE_KEPT) resumable.delete(resumable.keys().next().value);
    mark("resumable");
  }

  // ---- Rules ----

  function drawRules() {
    const body = document.createDocumentFragment();
    for (const rule of [...rules.values()].sort((a, b) => a.id - b.id)) {
      const row = document.createElement("tr");
      row.dataset.rule = String(rule.id);
      cell(row, String(rule.id), "Rule", "n");
      cell(row, rule.method || "any", "Method");
      cell(row, rule.path, "Path", "mono");
      cell(row, rule.fault + (rule.skip ? ` (after ${rule.skip} let through)` : ""), "Fault", "mono");
      cell(row, String(rule.applied), "Applied", "n");
      cell(row, rule.remaining === null ? "every time" : String(rule.remaining), "Remaining", "n remaining");
      const actions = cell(row, "", "");
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "remove";
      remove.textContent = "Remove";
      remove.dataset.rule = String(rule.id);
      remove.setAttribute("aria-label", `Remove rule ${rule.id}, ${rule.method || "any method"} ${rule.path} ${rule.fault}`);
      actions.appendChild(remove);
      body.appendChild(row);
    }
    const tbody = $("rules").tBodies[0];
    const focused = document.activeElement && document.activeElement.classList.contains("remove") ? document.activeElement.dataset.rule : null;
    tbody.replaceChildren(body);
    if (focused) { const again = tbody.querySelector(`button[data-rule="${focused}"]`); (again || $("rule-fault")).focus(); }
    $("rules").hidden = rules.size === 0;
    $("rules-empty").hidden = rules.size > 0;
  }

  function ruleChanged(change) {
    if (change.change === "cleared") { rules.clear(); announce("Every fault rule was removed."); }
    else if (change.change === "removed") { rules.delete(change.rule.id); }
    else rules.set(change.rule.id, change.rule);
    mark("rules");
  }

  async function arm(event) {
    event.preventDefault();
    const error = $("arm-error");
    error.textContent = "";
    const rule = {path: $("rule-path").value.trim(), fault: $("rule-fault").value.trim()};
    if ($("rule-method").value) rule.method = $("rule-method").value;
    const times = $("rule-times").value.trim();
    const skip = $("rule-skip").value.trim();
    if (times) rule.times = Number(times);
    if (skip && skip !== "0") rule.skip = Number(skip);
    if (!rule.fault) { error.textContent = "A rule needs a fault, e.g. cut=1MiB."; $("rule-fault").focus(); return; }
    try {
      const response = await fetch("/__counterpart/faults", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(rule)});
      const answer = await response.json();
      if (!response.ok) { error.textContent = answer.error || `The server answered ${response.status}.`; $("rule-fault").focus(); return; }
      rules.set(answer.id, answer);
      mark("rules");
      announce(`Rule ${answer.id} armed: ${answer.method || "any method"} ${answer.path} ${answer.fault}.`);
    } catch (failure) {
      error.textContent = `The rule could not be sent: ${failure.message}`;
    }
  }

  async function removeRule(id) {
    const response = await fetch(`/__counterpart/faults/${id}`, {method: "DELETE"});
    if (response.ok || response.status === 404) {
      rules.delete(Number(id));
      mark("rules");
      announce(`Rule ${id} removed.`);
    } else {
      $("arm-error").textContent = `Rule ${id} could not be removed: the server answered ${response.status}.`;
    }
  }

  // ---- Drawing ----

  function mark(what) {
    dirty[what] = true;
    if (scheduled === null) scheduled = requestAnimationFrame(draw);
  }

  function draw() {
    scheduled = null;
    if (dirty.transfers) { dirty.transfers = false; drawTransfers(); }
    if (dirty.resumable) { dirty.resumable = false; drawResumable(); }
    if (dirty.rules) { dirty.rules = false; drawRules(); }
    if (dirty.log) {
      // Under a flood of requests the log is redrawn at most four times a second.
      const wait = 250 - (performance.now() - lastLogDraw);
      if (wait > 0) { setTimeout(() => mark("log"), wait); return; }
      dirty.log = false;
      drawLog();
    }
  }

  // ---- The stream ----

  let source = null;
  async function loadJournal() {
    const counted = passing;  // those skipped after the fetch began may not be in its answer
    try {
      const answer = await (await fetch("/__counterpart/requests")).json();
      passing = Math.max(0, passing - counted);
      for (const entry of answer.requests) addEntry(entry, 0, false);
      entries.sort((a, b) => (a.sequence || 0) - (b.sequence || 0));
      keepTheNewest();
      mark("log");
    } catch (failure) {
      $("log-shown").textContent = `The journal could not be read: ${failure.message}`;
    }
  }

  // After a flood; while the log is paused, later (filling in would move the rows it shows).
  function fillInFromJournal() {
    if (paused) { fillIn = setTimeout(fillInFromJournal, 1000); return; }
    fillIn = null;
    loadJournal();
  }

  function setStatus(state, text) {
    const status = $("status");
    if (status.dataset.state === state && status.textContent === text) return;
    status.dataset.state = state;
    status.textContent = text;
  }

  function connect() {
    // requests=latest: under a flood of requests the stream sends the newest of each batch
    // and counts the others (a "skipped" event); the journal has them all.
    source = new EventSource("/__counterpart/events?requests=latest");
    source.onopen = () => setStatus("live", "Live");
    source.onerror = () => setStatus(source.readyState === EventSource.CLOSED ? "lost" : "connecting",
      source.readyState === EventSource.CLOSED ? "Disconnected (reload the page)" : "Reconnecting…");
    source.addEventListener("snapshot", (event) => {
      const snapshot = JSON.parse(event.data);
      transfers.clear();
      for (const t of snapshot.transfers) transfers.set(t.id, t);
      for (const r of snapshot.resumable) addResumable(r);
      rules.clear();
      for (const rule of snapshot.rules) rules.set(rule.id, rule);
      mark("transfers"); mark("rules"); mark("resumable");
      // A new stream (or one that missed events): the journal fills the log in.
      loadJournal();
    });
    source.addEventListener("request", (event) => addEntry(JSON.parse(event.data), Number(event.lastEventId)));
    source.addEventListener("skipped", (event) => {
      const count = JSON.parse(event.data).requests;
      passing += count;
      skippedTotal += count;
      mark("log");
      clearTimeout(fillIn);
      fillIn = setTimeout(fillInFromJournal, 1000);
    });
    source.addEventListener("transfer", (event) => addTransfer(JSON.parse(event.data)));
    source.addEventListener("resumable", (event) => addResumable(JSON.parse(event.data)));
    source.addEventListener("rule", (event) => ruleChanged(JSON.parse(event.data)));
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("curl-example").textContent = `curl -N ${location.origin}/__counterpart/events`;
    $("arm-form").addEventListener("submit", arm);
    $("rules").addEventListener("click", (event) => {
      const button = event.target.closest("button.remove");
      if (button) removeRule(button.dataset.rule);
    });
    $("log").addEventListener("click", (event) => {
      const button = event.target.closest("button.open");
      if (button) openDetails(button.dataset.key, button);
    });
    $("details-close").addEventListener("click", closeDetails);
    $("details").addEventListener("keydown", (event) => { if (event.key === "Escape") closeDetails(); });
    $("log-filter").addEventListener("input", () => { shown = PAGE; lastLogDraw = 0; mark("log"); });
    $("log-more").addEventListener("click", () => { shown += PAGE; lastLogDraw = 0; mark("log"); });
    $("log-pause").addEventListener("click", () => {
      paused = !paused;
      frozenCount = entries.length;
      $("log-pause").setAttribute("aria-pressed", String(paused));
      lastLogDraw = 0;
      mark("log");
    });
    $("log-clear").addEventListener("click", () => {
      entries.length = 0;
      entryKeys.clear();
      frozenCount = 0;
      lastLogDraw = 0;
      mark("log");
      announce("The list is empty; the server's journal is kept.");
    });
    mark("log"); mark("transfers"); mark("rules"); mark("resumable");
    connect();
  });

  // For tests and the curious: the page's state.
  window.counterpartLive = {entries, transfers, rules, resumable, drawLog: () => { lastLogDraw = 0; drawLog(); },
                            skipped: () => skippedTotal};
})();
"""#
}
