// The upload page, enhanced: drop or pick many files, each sent on its own request
// (XMLHttpRequest: fetch reports no upload progress) with a progress bar, speed, time
// left and a Cancel button; the server's JSON answer shown as a table. Without this
// script the page is a plain form that the server answers with an HTML page.
(function () {
  'use strict';

  var form = document.getElementById('upload-form');
  if (!form || !window.XMLHttpRequest || !window.FormData || !('upload' in new XMLHttpRequest())) return;

  // Uploads at once; the rest wait their turn.
  var PARALLEL = 3;
  // The server reads and throws away at most this much of a body it has refused before
  // it answers; past that it closes the connection (README, "Uploads").
  var DRAIN_BYTES = 64 * 1024 * 1024;
  // Speed is measured over the last two seconds of progress events.
  var SPEED_WINDOW_MS = 2000;
  var STATUS_INTERVAL_MS = 250;

  var picker = document.getElementById('files');
  var note = document.getElementById('note');
  var drop = document.getElementById('drop');
  var list = document.getElementById('transfers');
  var transfersSection = document.getElementById('transfers-section');
  var tally = document.getElementById('tally');
  var results = document.querySelector('#results tbody');
  var resultsSection = document.getElementById('results-section');
  var announcer = document.getElementById('announcer');
  var limitHint = document.getElementById('limit-hint');

  var jobs = [];
  var waiting = [];
  var running = 0;
  var maxUploadBytes = null;
  var nextId = 1;

  document.documentElement.classList.add('js');

  var example = document.getElementById('curl-example');
  if (example && /^https?:$/.test(location.protocol)) {
    example.textContent = 'curl -F note=hello -F file=@photo.png ' + location.origin + '/upload';
  }

  // The server's upload limit, when it tells it: too large files are then refused here,
  // before a byte is sent.
  if (window.fetch) {
    fetch('/__counterpart/health', { headers: { Accept: 'application/json' } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (health) {
        if (health && typeof health.maxUploadBytes === 'number') {
          maxUploadBytes = health.maxUploadBytes;
          limitHint.textContent = 'The server takes up to ' + formatBytes(maxUploadBytes) + ' per upload.';
        }
      })
      .catch(function () {});
  }

  picker.addEventListener('change', function () {
    addFiles(picker.files);
    // Picking the same file again starts another upload.
    picker.value = '';
  });

  // A plain submit (Enter in the note field) has nothing left to send: files go as they are picked.
  form.addEventListener('submit', function (event) {
    event.preventDefault();
    if (picker.files && picker.files.length) {
      addFiles(picker.files);
      picker.value = '';
    }
  });

  // Files can be dropped anywhere on the page; the drop zone shows where.
  var dragDepth = 0;
  function carriesFiles(event) {
    var types = event.dataTransfer && event.dataTransfer.types;
    return !!types && Array.prototype.indexOf.call(types, 'Files') >= 0;
  }
  document.addEventListener('dragenter', function (event) {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dragDepth += 1;
    drop.classList.add('dragging');
  });
  document.addEventListener('dragover', function (event) {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = 'copy';
  });
  document.addEventListener('dragleave', function (event) {
    if (!carriesFiles(event)) return;
    dragDepth = Math.max(0, dragDepth - 1);
    if (dragDepth === 0) drop.classList.remove('dragging');
  });
  document.addEventListener('drop', function (event) {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dragDepth = 0;
    drop.classList.remove('dragging');
    addFiles(event.dataTransfer.files);
  });

  function addFiles(files) {
    if (!files || !files.length) return;
    transfersSection.hidden = false;
    for (var i = 0; i < files.length; i++) {
      var job = makeJob(files[i], note.value);
      jobs.push(job);
      list.appendChild(job.row);
      if (maxUploadBytes !== null && job.file.size > maxUploadBytes) {
        fail(job, 'Too large: the server takes at most ' + formatBytes(maxUploadBytes) + ' per upload, and this file is '
          + formatBytes(job.file.size) + '. It was not sent.', null);
      } else {
        waiting.push(job);
      }
    }
    updateTally();
    pump();
  }

  function makeJob(file, noteValue) {
    var id = nextId++;
    var row = element('li', 'transfer');
    row.dataset.state = 'queued';
    var head = row.appendChild(element('div', 'transfer-head'));
    var name = head.appendChild(element('span', 'transfer-name', file.name));
    name.id = 'transfer-name-' + id;
    head.appendChild(element('span', 'transfer-size', formatBytes(file.size)));
    var bar = row.appendChild(element('progress'));
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute('aria-labelledby', name.id);
    var foot = row.appendChild(element('div', 'transfer-foot'));
    var status = foot.appendChild(element('span', 'transfer-status', 'Waiting for its turn'));
    status.tabIndex = -1;
    var cancel = foot.appendChild(element('button', 'cancel', 'Cancel'));
    cancel.type = 'button';
    cancel.appendChild(element('span', 'vh', ' upload of ' + file.name));
    var job = { file: file, note: noteValue, row: row, bar: bar, status: status, cancel: cancel, xhr: null,
      state: 'queued', samples: [], shownAt: 0 };
    cancel.addEventListener('click', function () { cancelJob(job); });
    return job;
  }

  function pump() {
    while (running < PARALLEL && waiting.length) {
      send(waiting.shift());
    }
  }

  function send(job) {
    running += 1;
    setState(job, 'uploading');
    job.status.textContent = 'Starting…';
    var body = new FormData();
    body.append('note', job.note);
    body.append('file', job.file, job.file.name);
    var xhr = new XMLHttpRequest();
    job.xhr = xhr;
    xhr.open('POST', form.action);
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.addEventListener('progress', function (event) {
      if (event.lengthComputable) showProgress(job, event.loaded, event.total);
    });
    xhr.upload.addEventListener('load', function () {
      if (job.state !== 'uploading') return;
      job.bar.value = 100;
      job.status.textContent = '100 % sent — the server is storing it…';
    });
    xhr.addEventListener('load', function () { finish(job, xhr); });
    xhr.addEventListener('error', function () {
      fail(job, 'The connection closed before the server answered.', null,
        'This happens when the server stops or the network drops, and when a file is more than ' + formatBytes(DRAIN_BYTES)
        + ' over the server\'s upload limit' + (maxUploadBytes !== null ? ' (' + formatBytes(maxUploadBytes) + ')' : '')
        + ': the server stops reading it.');
    });
    xhr.addEventListener('abort', function () {
      if (job.state === 'uploading') settleCancelled(job);
    });
    job.startedAt = now();
    job.samples = [{ time: job.startedAt, loaded: 0 }];
    xhr.send(body);
  }

  function showProgress(job, loaded, total) {
    if (job.state !== 'uploading') return;
    var time = now();
    job.samples.push({ time: time, loaded: loaded });
    while (job.samples.length > 2 && time - job.samples[1].time > SPEED_WINDOW_MS) job.samples.shift();
    job.bar.value = total ? loaded / total * 100 : 100;
    if (time - job.shownAt < STATUS_INTERVAL_MS && loaded < total) return;
    job.shownAt = time;
    // The body is the file plus a little multipart framing: show the file's share.
    var fileBytes = total ? Math.min(job.file.size, Math.round(job.file.size * loaded / total)) : 0;
    var first = job.samples[0];
    var seconds = (time - first.time) / 1000;
    var speed = seconds > 0.2 ? (loaded - first.loaded) / seconds : 0;
    var text = Math.floor(job.bar.value) + ' % — ' + formatBytes(fileBytes) + ' of ' + formatBytes(job.file.size);
    if (speed > 0) {
      text += ' · ' + formatBytes(speed) + '/s · ' + formatDuration((total - loaded) / speed) + ' left';
    }
    job.status.textContent = text;
  }

  function finish(job, xhr) {
    if (job.state !== 'uploading') return;
    var answer = null;
    try { answer = JSON.parse(xhr.responseText); } catch (ignored) { answer = null; }
    if (xhr.status !== 200 || !answer || !Array.isArray(answer.files)) {
      var said = answer && typeof answer.error === 'string' ? answer.error : null;
      fail(job, explain(xhr.status, xhr.statusText, said, job), said);
      return;
    }
    running -= 1;
    setState(job, 'done');
    job.bar.value = 100;
    var stored = answer.files.map(function (file) { return file.url ? file.url.split('/').pop() : ''; });
    var storedName = decodeName(stored[0] || job.file.name);
    job.status.textContent = storedName === job.file.name ? 'Done' : 'Done — stored as ' + storedName;
    var fields = (answer.fields || []).filter(function (field) { return field.name === 'note' && field.value; });
    if (fields.length) {
      job.row.appendChild(element('p', 'transfer-detail', 'Note received: “' + fields[0].value + '”'));
    }
    answer.files.forEach(addResult);
    announce(job.file.name + ' uploaded.');
    retire(job);
  }

  function fail(job, sentence, serverText, explanation) {
    if (job.state === 'uploading') running -= 1;
    setState(job, 'error');
    job.status.textContent = sentence;
    if (explanation) job.row.appendChild(element('p', 'transfer-detail', explanation));
    if (serverText) job.row.appendChild(element('p', 'transfer-detail', 'The server said: “' + serverText + '”'));
    announce(job.file.name + ': ' + sentence);
    retire(job);
  }

  function cancelJob(job) {
    if (job.state === 'queued') {
      waiting.splice(waiting.indexOf(job), 1);
      settleCancelled(job);
    } else if (job.state === 'uploading') {
      job.xhr.abort();
    }
    job.status.focus();
  }

  function settleCancelled(job) {
    if (job.state === 'uploading') running -= 1;
    var started = job.state === 'uploading';
    setState(job, 'cancelled');
    job.status.textContent = started ? 'Cancelled — the server discards what it received' : 'Cancelled before it was sent';
    announce(job.file.name + ': cancelled.');
    retire(job);
  }

  // A job that has ended: no Cancel button, and the next one may start.
  function retire(job) {
    job.xhr = null;
    if (job.cancel.parentNode) job.cancel.parentNode.removeChild(job.cancel);
    updateTally();
    pump();
  }

  function setState(job, state) {
    job.state = state;
    job.row.dataset.state = state;
  }

  function explain(status, statusText, said, job) {
    switch (status) {
      case 413: {
        // The body's limit is named in the server's words; its other 413s (too many
        // parts, too much text) are not about the file's size.
        var stated = said && /this server takes at most (\d+)/.exec(said);
        var limit = stated ? Number(stated[1]) : said ? null : maxUploadBytes;
        return limit !== null
          ? 'Too large: the server takes at most ' + formatBytes(limit) + ' per upload, and this file is ' + formatBytes(job.file.size) + '.'
          : 'Too large for the server (413): the form has too many parts or too much text.';
      }
      case 415: return 'The server did not take this as a form upload (415 Unsupported Media Type).';
      case 400: return 'The server could not read the upload (400 Bad Request): the form data was malformed or cut short.';
      case 507: return 'The server\'s disk is full (507 Insufficient Storage): nothing was stored.';
      case 503: return 'The server is busy (503 Service Unavailable): try again in a moment.';
      case 0: return 'The connection closed before the server answered.';
      default:
        if (status >= 500) return 'The server failed (' + status + ' ' + statusText + '): nothing was stored.';
        return 'The server refused the upload (' + status + ' ' + statusText + ').';
    }
  }

  function addResult(file) {
    resultsSection.hidden = false;
    var row = document.createElement('tr');
    var name = row.appendChild(element('td', 'name'));
    name.dataset.label = 'Name';
    var url = typeof file.url === 'string' && file.url.charAt(0) === '/' ? file.url : null;
    var storedName = decodeName(url ? url.split('/').pop() : file.filename || '');
    if (url) {
      var open = name.appendChild(element('a', null, storedName));
      open.href = url;
    } else {
      name.textContent = storedName;
    }
    if (file.filename && file.filename !== storedName) {
      name.appendChild(element('span', 'sent-as', 'sent as ' + file.filename));
    }
    var size = row.appendChild(element('td', 'n', formatBytes(file.size)));
    size.dataset.label = 'Size';
    size.title = groupDigits(file.size) + ' bytes';
    size.dataset.bytes = String(file.size);
    // Two lines of 32 hex digits, not a ragged break.
    var digest = file.sha256 || '';
    var sha = row.appendChild(element('td', 'sha'));
    sha.appendChild(element('span', null, digest.slice(0, 32)));
    sha.appendChild(element('span', null, digest.slice(32)));
    sha.dataset.label = 'SHA-256';
    var link = row.appendChild(element('td', 'link'));
    if (url) {
      var download = link.appendChild(element('a', null, 'Download'));
      download.href = url + '?download';
      download.setAttribute('aria-label', 'Download ' + storedName);
    }
    results.appendChild(row);
  }

  function updateTally() {
    var counts = { done: 0, error: 0, cancelled: 0, uploading: 0, queued: 0 };
    jobs.forEach(function (job) { counts[job.state] += 1; });
    var parts = [];
    if (counts.done) parts.push(counts.done + ' done');
    if (counts.uploading) parts.push(counts.uploading + ' sending');
    if (counts.queued) parts.push(counts.queued + ' waiting');
    if (counts.error) parts.push(counts.error + ' failed');
    if (counts.cancelled) parts.push(counts.cancelled + ' cancelled');
    tally.textContent = parts.length ? '(' + parts.join(', ') + ')' : '';
  }

  function announce(text) {
    announcer.textContent = text;
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function decodeName(encoded) {
    try { return decodeURIComponent(encoded); } catch (ignored) { return encoded; }
  }

  function now() {
    return window.performance ? performance.now() : Date.now();
  }

  // 517 B, 1.5 KiB, 12 MiB: three figures at most, binary units (as the listings).
  function formatBytes(bytes) {
    if (bytes < 1024) return Math.round(bytes) + ' B';
    var units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    var value = bytes / 1024;
    var unit = 0;
    while (value >= 999.5 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return (value < 9.95 ? value.toFixed(1) : String(Math.round(value))) + ' ' + units[unit];
  }

  function groupDigits(number) {
    return String(number).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  function formatDuration(seconds) {
    if (!isFinite(seconds)) return 'a while';
    if (seconds < 1) return 'under a second';
    seconds = Math.ceil(seconds);
    if (seconds < 60) return seconds + ' s';
    if (seconds < 3600) return Math.floor(seconds / 60) + ' min ' + (seconds % 60) + ' s';
    return Math.floor(seconds / 3600) + ' h ' + Math.floor(seconds % 3600 / 60) + ' min';
  }
})();
