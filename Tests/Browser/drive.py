"""Drives the upload page in headless Chromium through the DevTools protocol.

Run by Tests/CounterpartTests/BrowserTests.swift with the Python of .build/python
(scripts/setup installs websocket-client there) against a running Counterpart:

    drive.py BASE_URL --files DIR --artifacts DIR --downloads DIR

DIR (--files) holds the files to upload: big.bin, the one whose name is not ASCII,
notes.txt, cancel-me.bin (cancelled midway) and too-large.bin (over the server's limit).
The page is used as a person would: files are set on its picker and dropped on it,
buttons are clicked with the mouse and reached with Tab; then again with JavaScript
off, through the plain form. Screenshots go to --artifacts.
The last line on stdout is a JSON report; the exit status is 1 with "FAILED: ..." on
stderr when a check fails.
"""

import argparse
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

NON_ASCII_NAME = "résumé Ωμέγα.txt"
# The uploads of the first batch are slowed down by the server (a fault, `?rate=`), so
# that progress can be watched and a screenshot taken midway.
RATE = "4MiB"
DEADLINE_SECONDS = 90


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def log(message):
    print(f"drive: {message}", file=sys.stderr, flush=True)


class Browser:
    """Headless Chromium and one DevTools connection to it (flat sessions)."""

    def __init__(self, profile):
        self.profile = profile
        self.process = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--mute-audio", "--hide-scrollbars",
             "--force-color-profile=srgb", "--lang=en-US", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while True:
            if os.path.exists(port_file):
                lines = open(port_file).read().split("\n")
                if len(lines) >= 2 and lines[1]:
                    break
            check(self.process.poll() is None, f"chromium exited at start (status {self.process.returncode})")
            check(time.monotonic() < deadline, "chromium did not open its DevTools port in 30 s")
            time.sleep(0.05)
        self.socket = websocket.create_connection(f"ws://127.0.0.1:{lines[0]}{lines[1]}", timeout=30,
                                                  suppress_origin=True)
        self.next_id = 0
        self.events = []
        self.session = None

    def close(self):
        try:
            self.socket.close()
        except Exception:
            pass
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def call(self, method, params=None, browser_level=False, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not browser_level:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline, method)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise Failure(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def _receive(self, deadline, waiting_for):
        remaining = deadline - time.monotonic()
        check(remaining > 0, f"no answer from chromium in time ({waiting_for})")
        self.socket.settimeout(remaining)
        try:
            return json.loads(self.socket.recv())
        except websocket.WebSocketTimeoutException:
            raise Failure(f"no answer from chromium in time ({waiting_for})")

    def wait_event(self, method, timeout=20, where=lambda params: True):
        deadline = time.monotonic() + timeout
        while True:
            for index, event in enumerate(self.events):
                if event["method"] == method and where(event.get("params", {})):
                    del self.events[index]
                    return event.get("params", {})
            self.events.append(self._receive(deadline, method))

    def open_page(self):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})

    def viewport(self, width, height, scale=1, mobile=False):
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile})

    def navigate(self, url):
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise Failure(f"script failed: {details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    # What Runtime.evaluate answers while the page it runs in is being replaced (a click that
    # navigates): the page is not there yet, which a wait goes on waiting for.
    NAVIGATING = ("Inspected target navigated or closed", "Execution context was destroyed",
                  "Cannot find context with specified id")

    def wait_until(self, expression, what, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except Failure as failure:
                if not any(text in str(failure) for text in self.NAVIGATING):
                    raise
                value = None
            if value:
                return value
            check(time.monotonic() < deadline, f"timed out waiting for {what}")
            time.sleep(0.05)

    def screenshot(self, path, full_page=True):
        params = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update({"captureBeyondViewport": True,
                           "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        # Let the progress bars' transitions end first.
        time.sleep(0.3)
        data = self.call("Page.captureScreenshot", params)["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))
        log(f"screenshot {path}")

    def center_of(self, selector):
        box = self.evaluate(f"""(() => {{
            const node = document.querySelector({json.dumps(selector)});
            if (!node) return null;
            node.scrollIntoView({{block: 'center'}});
            const r = node.getBoundingClientRect();
            return {{x: r.left + r.width / 2, y: r.top + r.height / 2}};
        }})()""")
        check(box is not None, f"nothing matches {selector}")
        return box

    def click(self, selector):
        point = self.center_of(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent",
                      {"type": kind, "x": point["x"], "y": point["y"], "button": "left", "clickCount": 1})

    def press_tab(self):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9})

    def dom_node(self, selector):
        root = self.call("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = self.call("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        check(node != 0, f"nothing matches {selector}")
        return node

    def dom_html(self, selector):
        return self.call("DOM.getOuterHTML", {"nodeId": self.dom_node(selector)})["outerHTML"]

    def dom_set_files(self, selector, paths):
        self.call("DOM.setFileInputFiles", {"files": paths, "nodeId": self.dom_node(selector)})

    def dom_click(self, selector):
        node = self.dom_node(selector)
        self.call("DOM.scrollIntoViewIfNeeded", {"nodeId": node})
        quad = self.call("DOM.getBoxModel", {"nodeId": node})["model"]["content"]
        x, y = sum(quad[0::2]) / 4, sum(quad[1::2]) / 4
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def set_files(self, selector, paths):
        node = self.call("Runtime.evaluate", {"expression": f"document.querySelector({json.dumps(selector)})"})
        self.call("DOM.setFileInputFiles", {"files": paths, "objectId": node["result"]["objectId"]})

    def drop_files(self, selector, paths):
        point = self.center_of(selector)
        data = {"items": [], "files": paths, "dragOperationsMask": 1}
        for kind in ("dragEnter", "dragOver", "drop"):
            self.call("Input.dispatchDragEvent", {"type": kind, "x": point["x"], "y": point["y"], "data": data})


# The page's state, read from its DOM.
READ_ROWS = """Array.from(document.querySelectorAll('#transfers > li')).map(li => ({
    name: li.querySelector('.transfer-name').textContent,
    state: li.dataset.state,
    progress: li.querySelector('progress').value,
    status: li.querySelector('.transfer-status').textContent,
    detail: Array.from(li.querySelectorAll('.transfer-detail')).map(p => p.textContent),
    hasCancel: !!li.querySelector('button.cancel'),
}))"""

READ_RESULTS = """Array.from(document.querySelectorAll('#results tbody tr')).map(tr => ({
    name: tr.querySelector('.name a').textContent,
    href: tr.querySelector('.name a').getAttribute('href'),
    size: Number(tr.querySelector('.n').dataset.bytes),
    sizeText: tr.querySelector('.n').textContent,
    sha256: tr.querySelector('.sha').textContent,
    download: tr.querySelector('.link a').getAttribute('href'),
}))"""

# Records every value each progress bar takes (setting `value` sets the attribute).
WATCH_PROGRESS = """(() => {
    window.progressSeen = {};
    new MutationObserver(records => {
        for (const record of records) {
            const li = record.target.closest('li');
            const name = li.querySelector('.transfer-name').textContent;
            (window.progressSeen[name] = window.progressSeen[name] || []).push(record.target.value);
        }
    }).observe(document.getElementById('transfers'), {subtree: true, attributes: true, attributeFilter: ['value']});
    return true;
})()"""


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def rows_by_name(browser):
    return {row["name"]: row for row in browser.evaluate(READ_ROWS)}


def drive(browser, base, files, artifacts, downloads):
    report = {"screenshots": [], "timings": {}}
    started = time.monotonic()

    def shot(name, full_page=True):
        path = os.path.join(artifacts, name)
        browser.screenshot(path, full_page)
        report["screenshots"].append(path)

    health = json.load(urllib.request.urlopen(base + "/__counterpart/health", timeout=10))
    limit = health.get("maxUploadBytes")
    report["limitFromHealth"] = limit

    browser.open_page()
    browser.viewport(1000, 760)
    browser.navigate(base + "/")
    browser.wait_until("document.documentElement.classList.contains('js')", "the page's script")
    if limit is not None:
        browser.wait_until("document.getElementById('limit-hint').textContent !== ''", "the upload limit from health")
    check(browser.evaluate("document.title") == "Counterpart — upload files", "the page's title")
    check(browser.evaluate("getComputedStyle(document.querySelector('.submit')).display") == "none",
          "with JavaScript, files go as they are picked: the plain submit button is hidden")
    browser.evaluate(WATCH_PROGRESS)

    # Keyboard: Tab reaches the file picker, and the drop zone shows the focus.
    browser.evaluate("document.activeElement && document.activeElement.blur(), true")
    for _ in range(6):
        browser.press_tab()
        if browser.evaluate("document.activeElement.id") == "files":
            break
    check(browser.evaluate("document.activeElement.id") == "files", "Tab does not reach the file picker")
    check(browser.evaluate("getComputedStyle(document.getElementById('drop')).outlineStyle") == "solid",
          "the focused drop zone shows no outline")
    browser.evaluate("document.activeElement.blur(), true")
    shot("1-before.png")

    # Batch 1: picked with the file input, throttled by the server, one cancelled midway.
    browser.evaluate(f"document.getElementById('note').value = 'from the browser test', true")
    browser.evaluate(f"document.getElementById('upload-form').setAttribute('action', '/upload?rate={RATE}'), true")
    names = ["big.bin", NON_ASCII_NAME, "notes.txt", "cancel-me.bin"]
    browser.set_files("#files", [os.path.join(files, name) for name in names])
    browser.wait_until("document.querySelectorAll('#transfers > li').length === 4", "four rows")
    # The fourth waits for a free slot (three at a time), then is cancelled once it has sent
    # some and big.bin is half way (its speed and time left shown).
    browser.wait_until("""(() => { const rows = document.querySelectorAll('#transfers > li');
        return rows[3].dataset.state === 'uploading' && rows[3].querySelector('progress').value > 3
            && rows[0].querySelector('progress').value > 50; })()""",
                       "cancel-me.bin to be partly sent and big.bin half way", timeout=30)
    row = rows_by_name(browser)["big.bin"]
    check(row["state"] == "uploading" and 0 < row["progress"] < 100,
          f"big.bin should be uploading midway when cancel-me.bin is: {row}")
    check(" MiB/s · " in row["status"] and row["status"].endswith(" left"), f"big.bin shows no speed and time left: {row}")
    shot("2-during.png")
    browser.click("#transfers > li:nth-child(4) button.cancel")
    browser.wait_until("document.querySelectorAll('#transfers > li')[3].dataset.state === 'cancelled'",
                       "the cancelled row")
    check(browser.evaluate("document.activeElement.classList.contains('transfer-status')"),
          "after Cancel the focus should move to the row's status")
    browser.wait_until("""Array.from(document.querySelectorAll('#transfers > li'))
        .every(li => ['done', 'error', 'cancelled'].includes(li.dataset.state))""", "every upload to end", timeout=40)
    report["timings"]["batch1Seconds"] = round(time.monotonic() - started, 2)

    rows = rows_by_name(browser)
    seen = browser.evaluate("window.progressSeen")
    for name in names[:3]:
        row = rows[name]
        check(row["state"] == "done", f"{name} did not upload: {row}")
        check(row["progress"] == 100, f"the progress bar of {name} ended at {row['progress']}")
        check(not row["hasCancel"], f"{name} still has a Cancel button")
        check(row["detail"] == ["Note received: “from the browser test”"], f"{name}: the note is not shown: {row}")
        check(seen.get(name, [])[-1:] == [100], f"{name}: the progress bar never reached 100: {seen.get(name)}")
    midway = [value for value in seen.get("big.bin", []) if 0 < value < 100]
    check(len(midway) >= 3, f"big.bin's bar should move through values between 0 and 100: {seen.get('big.bin')}")
    report["bigProgressSteps"] = len(midway)
    cancelled = rows["cancel-me.bin"]
    check(cancelled["state"] == "cancelled" and "Cancelled" in cancelled["status"], f"cancel-me.bin: {cancelled}")
    check(0 < cancelled["progress"] < 100, f"cancel-me.bin should stop midway: {cancelled}")

    results = browser.evaluate(READ_RESULTS)
    check(sorted(r["name"] for r in results) == sorted(names[:3]), f"the results table: {results}")
    for result in results:
        path = os.path.join(files, result["name"])
        check(result["sha256"] == sha256_of(path), f"{result['name']}: the SHA-256 shown is not the file's")
        check(result["size"] == os.path.getsize(path), f"{result['name']}: the size shown is not the file's")
        check(result["download"] == result["href"] + "?download", f"{result['name']}: the download link")
    report["results"] = results

    # Batch 2: dropped on the page, over the server's limit.
    browser.evaluate("document.getElementById('upload-form').setAttribute('action', '/upload'), true")
    browser.drop_files("#drop", [os.path.join(files, "too-large.bin")])
    browser.wait_until("""(() => { const li = document.querySelectorAll('#transfers > li')[4];
        return li && li.dataset.state === 'error'; })()""", "the too large file to be refused", timeout=30)
    too_large = rows_by_name(browser)["too-large.bin"]
    check(too_large["status"].startswith("Too large: the server takes at most "), f"too-large.bin: {too_large}")
    check(" per upload, and this file is " in too_large["status"], f"too-large.bin: {too_large}")
    if limit is None:
        check(any(text.startswith("The server said: “") for text in too_large["detail"]),
              f"the server's own words are not shown: {too_large}")
    report["tooLarge"] = too_large
    check(browser.evaluate("document.getElementById('announcer').textContent").startswith("too-large.bin: Too large"),
          "the refusal is not announced")
    browser.evaluate("window.scrollTo(0, 0), true")
    shot("3-after.png")
    browser.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    shot("3-after-dark.png")
    browser.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})

    # The same page on a phone-sized screen, its uploads in view.
    browser.viewport(360, 740, scale=2, mobile=True)
    width = browser.evaluate("document.documentElement.scrollWidth")
    check(width <= 360, f"the page is {width} px wide on a 360 px screen")
    browser.evaluate("document.getElementById('transfers-section').scrollIntoView(), true")
    shot("4-after-phone.png", full_page=False)
    browser.viewport(1000, 760)

    # The listing of /uploads/: sort by time, then follow a download link.
    browser.navigate(base + "/uploads/")
    listed = browser.evaluate("""Array.from(document.querySelectorAll('tbody td.name a:not([href^="../"])'))
        .map(a => a.textContent)""")
    check(listed == sorted(names[:3], key=str.lower), f"the listing, by name: {listed}")
    browser.click("thead th:nth-child(3) a")
    browser.wait_until("location.search === '?sort=time&order=desc'", "the listing sorted by time")
    check(browser.evaluate("document.querySelector('thead th:nth-child(3)').getAttribute('aria-sort')") == "descending",
          "aria-sort on the Modified column")
    shot("5-listing.png")

    browser.call("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads, "eventsEnabled": True},
                 browser_level=True)
    link = f"a[aria-label={json.dumps('Download ' + NON_ASCII_NAME, ensure_ascii=False)}]"
    href = browser.evaluate(f"document.querySelector({json.dumps(link)}).getAttribute('href')")
    browser.click(link)
    begin = browser.wait_event("Browser.downloadWillBegin")
    progress = browser.wait_event("Browser.downloadProgress", where=lambda p: p.get("state") in ("completed", "canceled"))
    check(progress["state"] == "completed", f"the download was {progress['state']}")
    check(begin["suggestedFilename"] == NON_ASCII_NAME, f"the browser named the download {begin['suggestedFilename']!r}")
    saved = os.path.join(downloads, NON_ASCII_NAME)
    check(os.path.exists(saved), f"no {saved}: {os.listdir(downloads)}")
    check(sha256_of(saved) == sha256_of(os.path.join(files, NON_ASCII_NAME)), "the downloaded bytes differ")
    report["download"] = {"href": href, "suggestedFilename": begin["suggestedFilename"], "bytes": os.path.getsize(saved)}

    # Without JavaScript: the plain form, answered with the server's HTML page. Only the DOM
    # domain and input events from here: the page runs no script.
    browser.call("Emulation.setScriptExecutionDisabled", {"value": True})
    browser.navigate(base + "/")
    check("js" not in browser.dom_html("html").split(">")[0], "the page's script ran although scripts are off")
    shot("6-without-javascript.png")
    browser.dom_set_files("#files", [os.path.join(files, "notes.txt")])
    browser.dom_click("#note")
    browser.call("Input.insertText", {"text": "sent without JavaScript"})
    browser.events = [e for e in browser.events if e["method"] != "Page.loadEventFired"]
    browser.dom_click("button[type=submit]")
    browser.wait_event("Page.loadEventFired")
    answer = browser.dom_html("body")
    check("<h1>Upload received</h1>" in answer, f"the plain form got no HTML answer: {answer[:300]}")
    check("notes-1.txt" in answer and "sent without JavaScript" in answer, f"the HTML answer: {answer[:600]}")
    check(sha256_of(os.path.join(files, "notes.txt")) in answer, "the HTML answer lacks the file's SHA-256")
    shot("7-without-javascript-answer.png")
    report["timings"]["totalSeconds"] = round(time.monotonic() - started, 2)
    return report


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--files", required=True)
    parser.add_argument("--artifacts", required=True)
    parser.add_argument("--downloads", required=True)
    arguments = parser.parse_args()
    os.makedirs(arguments.artifacts, exist_ok=True)
    os.makedirs(arguments.downloads, exist_ok=True)
    failure_shot = os.path.join(arguments.artifacts, "failure.png")
    run_in_browser(lambda browser: drive(browser, arguments.base.rstrip("/"), os.path.abspath(arguments.files),
                                         arguments.artifacts, os.path.abspath(arguments.downloads)),
                   DEADLINE_SECONDS, failure_shot)


def run_in_browser(work, deadline_seconds, failure_shot=None):
    """Runs work(browser) in a fresh headless Chromium within the deadline, prints its report
    as JSON, or FAILED and exit 1 (with a screenshot at failure_shot when there is a page)."""
    check_tools()
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Failure(f"over {deadline_seconds} s")))
    signal.alarm(deadline_seconds)
    profile = tempfile.mkdtemp(prefix="counterpart-chromium-")
    browser = None
    try:
        browser = Browser(profile)
        report = work(browser)
    except Failure as failure:
        if failure_shot and browser is not None and browser.session:
            try:
                signal.alarm(0)
                browser.screenshot(failure_shot)
            except Exception:
                pass
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
    finally:
        signal.alarm(0)
        if browser is not None:
            browser.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(json.dumps(report, ensure_ascii=False))


def check_tools():
    if shutil.which("chromium") is None:
        print("FAILED: chromium is not installed: run scripts/setup chromium (make test does)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
