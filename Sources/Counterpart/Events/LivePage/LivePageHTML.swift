extension LivePage {
    /// The page's markup: sections that work as they are read, top to bottom, with the
    /// keyboard alone; the script fills them in.
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Counterpart — live</title>
<link rel="stylesheet" href="/__counterpart/live.css">
<script src="/__counterpart/live.js" defer></script>
</head>
<body>
<main>
<header class="top">
  <h1>Counterpart, live</h1>
  <p id="status" class="status" role="status" data-state="connecting">Connecting…</p>
</header>
<noscript><p class="error">This page needs JavaScript. Without it, read <a href="/__counterpart/requests">/__counterpart/requests</a>
and <a href="/__counterpart/faults">/__counterpart/faults</a>, or watch <code>curl -N …/__counterpart/events</code> in a terminal.</p></noscript>

<section aria-labelledby="transfers-heading">
  <h2 id="transfers-heading">Transfers in flight <span id="transfers-count" class="tally"></span></h2>
  <p id="transfers-empty" class="empty">None right now. Uploads and downloads show here while they run
    (from a quarter of a second on), with the bytes the server has read or sent (for a file sent with
    sendfile: those the client has acknowledged).</p>
  <ul id="transfers" class="transfers"></ul>
</section>

<section aria-labelledby="resumable-heading">
  <h2 id="resumable-heading">Resumable uploads</h2>
  <p id="resumable-empty" class="empty">None since this page opened.</p>
  <table id="resumable" class="grid" hidden>
    <thead><tr><th scope="col">Upload</th><th scope="col">Protocol</th><th scope="col" class="n">Offset</th>
      <th scope="col" class="n">Length</th><th scope="col">Progress</th><th scope="col">Last change</th></tr></thead>
    <tbody></tbody>
  </table>
</section>

<section aria-labelledby="rules-heading">
  <h2 id="rules-heading">Fault rules</h2>
  <form id="arm-form" class="arm" novalidate>
    <div class="field"><label for="rule-method">Method</label>
      <select id="rule-method"><option value="">any</option><option>POST</option><option>PUT</option><option>PATCH</option>
        <option>GET</option><option>HEAD</option><option>DELETE</option></select></div>
    <div class="field wide"><label for="rule-path">Path</label>
      <input id="rule-path" type="text" value="/upload" autocomplete="off" spellcheck="false" aria-describedby="rule-path-hint">
      <span id="rule-path-hint" class="hint">exact, or ending in <code>*</code></span></div>
    <div class="field wide"><label for="rule-fault">Fault</label>
      <input id="rule-fault" type="text" placeholder="cut=1MiB" autocomplete="off" spellcheck="false" aria-describedby="rule-fault-hint">
      <span id="rule-fault-hint" class="hint">e.g. <code>cut=1MiB</code>, <code>status=503</code>, <code>rate=256KiB</code></span></div>
    <div class="field"><label for="rule-times">Times</label>
      <input id="rule-times" type="number" min="1" inputmode="numeric" aria-describedby="rule-times-hint">
      <span id="rule-times-hint" class="hint">empty: every time</span></div>
    <div class="field"><label for="rule-skip">Skip</label>
      <input id="rule-skip" type="number" min="0" value="0" inputmode="numeric"></div>
    <div class="field submit"><button type="submit" class="primary">Arm rule</button></div>
  </form>
  <p id="arm-error" class="error" role="alert"></p>
  <p id="rules-empty" class="empty">No rule is armed.</p>
  <table id="rules" class="grid" hidden>
    <thead><tr><th scope="col">Rule</th><th scope="col">Method</th><th scope="col">Path</th><th scope="col">Fault</th>
      <th scope="col" class="n">Applied</th><th scope="col" class="n">Remaining</th><th scope="col"><span class="vh">Remove</span></th></tr></thead>
    <tbody></tbody>
  </table>
</section>

<section aria-labelledby="log-heading">
  <h2 id="log-heading">Requests <span id="log-count" class="tally"></span></h2>
  <div class="log-tools">
    <label for="log-filter">Filter</label>
    <input id="log-filter" type="search" autocomplete="off" spellcheck="false" aria-describedby="log-shown"
      placeholder="method, path, status, client, fault">
    <button id="log-pause" type="button" aria-pressed="false">Pause</button>
    <button id="log-clear" type="button">Clear the list</button>
  </div>
  <p id="log-shown" class="hint"></p>
  <table id="log" class="grid log">
    <thead><tr><th scope="col" class="n">#</th><th scope="col">Time</th><th scope="col">Method</th><th scope="col">Path</th>
      <th scope="col" class="n">Status</th><th scope="col" class="n">Received</th><th scope="col" class="n">Sent</th>
      <th scope="col" class="n">ms</th><th scope="col">Fault</th></tr></thead>
    <tbody></tbody>
  </table>
  <button id="log-more" type="button" hidden>Show more</button>
</section>

<section id="details" class="details" aria-labelledby="details-heading" hidden>
  <h2 id="details-heading" tabindex="-1">Request <span id="details-number"></span></h2>
  <dl id="details-summary" class="summary"></dl>
  <h3>Headers as received</h3>
  <p class="hint">Credentials and cookies are redacted: only their length is kept.</p>
  <table id="details-headers" class="grid"><thead><tr><th scope="col">Name</th><th scope="col">Value</th></tr></thead><tbody></tbody></table>
  <div id="details-parts-block" hidden>
    <h3>Parts</h3>
    <table id="details-parts" class="grid"><thead><tr><th scope="col">Name</th><th scope="col">Filename</th><th scope="col">Type</th>
      <th scope="col" class="n">Size</th><th scope="col">SHA-256</th></tr></thead><tbody></tbody></table>
  </div>
  <button id="details-close" type="button">Close the details</button>
</section>

<p id="announcer" class="vh" aria-live="polite"></p>

<section class="more" aria-labelledby="more-heading">
  <h2 id="more-heading">From a terminal</h2>
  <pre><code id="curl-example">curl -N http://127.0.0.1:8080/__counterpart/events</code></pre>
  <p>The same events, one per <code>event:</code>/<code>data:</code> pair; send <code>Last-Event-ID</code> to go on from an id.
  The request log as JSON: <a href="/__counterpart/requests">/__counterpart/requests</a>; the rules:
  <a href="/__counterpart/faults">/__counterpart/faults</a>; the upload page: <a href="/">/</a>.</p>
</section>
</main>
</body>
</html>
"""#
}
