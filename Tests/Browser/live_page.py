"""The live page (/__counterpart/) in headless Chromium, with real clients making the traffic.

Run by Tests/CounterpartTests/Events/LivePageBrowserTests.swift against a running Counterpart:

    live_page.py BASE_URL --file PATH --artifacts DIR

A throttled curl upload (a `rate=` fault) must move the page's progress bar up to the
upload's final size; a rule armed with the page's form must cut the next curl upload and
then show 0 remaining; a rule is removed with the keyboard; a request's details open and
close with the focus going back; 10,000 requests fill the log (the stream thins a flood, the
journal fills it in after) and the filter must stay
quick. Screenshots go to DIR. The last line on stdout is a JSON report; the exit status is
1 with "FAILED: ..." on stderr when a check fails.
"""

import argparse
import http.client
import json
import os
import subprocess
import time
import urllib.parse
import urllib.request

from drive import Failure, check, log, run_in_browser

DEADLINE_SECONDS = 150
RATE = "1MiB"

# Records every value the first transfer's progress bar shows, as the page changes it.
WATCH_BAR = """(() => {
  window.barValues = [];
  const record = () => {
    const bar = document.querySelector('#transfers li progress');
    if (bar && bar.hasAttribute('value')) {
      const last = window.barValues[window.barValues.length - 1];
      if (!last || last[0] !== bar.value || last[1] !== bar.max) window.barValues.push([bar.value, bar.max]);
    }
  };
  new MutationObserver(record).observe(document.getElementById('transfers'), {subtree: true, attributes: true, childList: true});
  return true;
})()"""


def curl(*arguments):
    return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", *arguments],
                          capture_output=True, text=True, timeout=60)


def type_into(browser, selector, text):
    browser.click(selector)
    browser.evaluate(f"document.querySelector({json.dumps(selector)}).select(), true")
    browser.call("Input.insertText", {"text": text})


def press(browser, key, code, key_code, text=None):
    for kind in ("keyDown", "keyUp"):
        event = {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code}
        if text and kind == "keyDown":
            event["text"] = text
        browser.call("Input.dispatchKeyEvent", event)


def accessible_names(browser, role):
    tree = browser.call("Accessibility.getFullAXTree")["nodes"]
    return [node.get("name", {}).get("value", "") for node in tree if node.get("role", {}).get("value") == role]


def drive(browser, base, upload_file, artifacts):
    report = {"screenshots": [], "timings": {}}
    os.makedirs(artifacts, exist_ok=True)

    def shot(name, full_page=True):
        path = os.path.join(artifacts, name)
        browser.screenshot(path, full_page)
        report["screenshots"].append(path)

    browser.open_page()
    browser.call("Accessibility.enable")
    browser.viewport(1200, 900)
    browser.navigate(base + "/__counterpart/")
    check(browser.evaluate("document.title") == "Counterpart — live", "the page's title")
    browser.wait_until("document.getElementById('status').dataset.state === 'live'", "the event stream to open")
    check(browser.evaluate("document.getElementById('curl-example').textContent") == f"curl -N {base}/__counterpart/events",
          "the curl example names this server")

    # 1. A throttled curl upload: the page's bar moves, then stands at the upload's final size.
    browser.evaluate(WATCH_BAR)
    size = os.path.getsize(upload_file)
    started = time.monotonic()
    upload = subprocess.Popen(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-F", f"file=@{upload_file}",
                               f"{base}/upload?rate={RATE}"], stdout=subprocess.PIPE, text=True)
    browser.wait_until("""(() => { const bar = document.querySelector('#transfers li progress');
        return bar && bar.value > 0 && bar.value < bar.max / 2; })()""", "the progress bar to start moving", timeout=20)
    names = accessible_names(browser, "progressbar")
    check(any(name.startswith("Upload POST /upload?rate=") for name in names), f"the transfer's bar has no accessible name: {names}")
    browser.wait_until("""(() => { const bar = document.querySelector('#transfers li progress');
        return bar && bar.value >= bar.max / 2 && bar.value < bar.max; })()""", "the progress bar half way", timeout=30)
    shot("live-during.png")
    status = upload.communicate(timeout=60)[0]
    check(status == "200", f"the throttled upload got {status}")
    report["timings"]["throttledUploadSeconds"] = round(time.monotonic() - started, 2)
    browser.wait_until("document.querySelector('#transfers li').dataset.state === 'ended'", "the transfer to end")
    values = browser.evaluate("window.barValues")
    final = values[-1]
    check(final[0] == final[1], f"the bar ends at {final[0]} of {final[1]}")
    check(final[1] > size, f"the bar's maximum {final[1]} is not the multipart body's length (the file is {size})")
    midway = [value for value, maximum in values if 0 < value < maximum]
    check(len(midway) >= 3, f"the bar moved only through {values}")
    journal = json.load(urllib.request.urlopen(base + "/__counterpart/requests?path=/upload", timeout=10))["requests"]
    check(journal[-1]["requestBodyBytes"] == final[1], f"the bar's final size {final[1]} is not the request's {journal[-1]['requestBodyBytes']}")
    report["bar"] = {"values": len(values), "midway": len(midway), "final": final}

    # 2. A rule armed with the page's form cuts the next upload; its count shows 0 after.
    browser.evaluate("document.getElementById('rule-method').value = 'POST', true")
    type_into(browser, "#rule-path", "/upload")
    type_into(browser, "#rule-fault", "cut=1000")
    type_into(browser, "#rule-times", "1")
    browser.click("#arm-form button[type=submit]")
    browser.wait_until("document.querySelector('#rules tbody tr .remaining')?.textContent === '1'", "the armed rule's row")
    armed = json.load(urllib.request.urlopen(base + "/__counterpart/faults", timeout=10))["faults"]
    check(len(armed) == 1 and armed[0]["fault"] == "cut=1000" and armed[0]["method"] == "POST" and armed[0]["times"] == 1,
          f"the server armed {armed}")
    cut = curl("-F", f"file=@{upload_file}", f"{base}/upload")
    check(cut.returncode != 0, f"the upload after the rule was not cut: curl exit {cut.returncode}, status {cut.stdout}")
    report["cutUpload"] = {"curlExit": cut.returncode}
    browser.wait_until("document.querySelector('#rules tbody tr .remaining')?.textContent === '0'", "the rule's count at 0")
    check(browser.evaluate("document.querySelector('#rules tbody tr td[data-label=Applied]').textContent") == "1",
          "the rule shows 1 applied")
    passed = curl("-F", f"file=@{upload_file}", f"{base}/upload")
    check(passed.returncode == 0 and passed.stdout == "200", f"the upload after the rule's one cut: {passed.stdout}")
    browser.wait_until("document.querySelectorAll('#log tbody tr').length >= 4", "the log's rows")
    browser.evaluate("document.activeElement.blur(), true")
    shot("live-page.png")

    # 3. Details of the cut request, with the keyboard: they open, show the headers, close on
    #    Escape, and the focus goes back to the row.
    browser.evaluate("""(() => { const rows = [...document.querySelectorAll('#log tbody tr')];
        const cut = rows.find(r => r.querySelector('td[data-label=Fault]').textContent.startsWith('cut=1000'));
        cut.querySelector('button.open').focus(); return true; })()""")
    press(browser, "Enter", "Enter", 13, "\r")
    browser.wait_until("!document.getElementById('details').hidden", "the details to open")
    check(browser.evaluate("document.activeElement.id") == "details-heading", "the focus did not move to the details")
    headers = browser.evaluate("[...document.querySelectorAll('#details-headers tbody tr td:first-child')].map(td => td.textContent)")
    check("User-Agent" in headers and "Content-Type" in headers, f"the details' headers: {headers}")
    shot("live-details.png")
    press(browser, "Escape", "Escape", 27)
    browser.wait_until("document.getElementById('details').hidden", "Escape to close the details")
    check(browser.evaluate("document.activeElement.classList.contains('open')"), "the focus did not go back to the row")

    # 4. Tab reaches the form, the filter and the rule's Remove button; Enter on it removes it.
    browser.evaluate("document.activeElement.blur(), true")
    reached = []
    for _ in range(30):
        browser.press_tab()
        reached.append(browser.evaluate("document.activeElement.id || document.activeElement.className"))
        if reached[-1] == "remove":
            break
    for wanted in ("rule-method", "rule-path", "rule-fault", "rule-times", "rule-skip", "remove"):
        check(wanted in reached, f"Tab does not reach {wanted}: {reached}")
    check(browser.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "solid", "the focused button shows no outline")
    press(browser, "Enter", "Enter", 13, "\r")
    browser.wait_until("document.getElementById('rules').hidden", "the rule to go")
    check(json.load(urllib.request.urlopen(base + "/__counterpart/faults", timeout=10))["faults"] == [], "the rule is still armed")
    check(browser.evaluate("document.activeElement.id") == "rule-fault", "the focus is lost after the removal")
    browser.wait_until("document.getElementById('announcer').textContent === 'Rule 1 removed.'", "the removal announced")

    # 5. 10,000 requests: the log keeps them and the filter stays quick.
    parsed = urllib.parse.urlsplit(base)
    started = time.monotonic()
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    for index in range(10000):
        connection.request("GET", f"/bytes/{16 + index % 7}")
        response = connection.getresponse()
        response.read()
        check(response.status == 200, f"request {index}: {response.status}")
    connection.close()
    report["timings"]["tenThousandRequestsSeconds"] = round(time.monotonic() - started, 2)
    # The page's stream (requests=latest) may skip some of them: the log fills in from the
    # journal a second after the last skipped ones.
    browser.wait_until("window.counterpartLive.entries.length >= 10000", "10,000 entries on the page", timeout=60)
    report["timings"]["tenThousandOnPageSeconds"] = round(time.monotonic() - started, 2)
    report["skipped"] = browser.evaluate("window.counterpartLive.skipped()")
    timings = browser.evaluate("""(() => {
        const filter = document.getElementById('log-filter');
        const times = [];
        for (const text of ['/bytes/19', 'get 200', 'nothing-matches-this', '']) {
          const begin = performance.now();
          filter.value = text;
          window.counterpartLive.drawLog();
          times.push(performance.now() - begin);
        }
        return times; })()""")
    report["timings"]["filterMilliseconds"] = [round(t, 1) for t in timings]
    check(max(timings) < 150, f"filtering 10,000 entries took {timings} ms")
    type_into(browser, "#log-filter", "/bytes/19")
    browser.wait_until("document.getElementById('log-shown').textContent.includes('matching')", "the filter to apply")
    shown = browser.evaluate("document.getElementById('log-shown').textContent")
    check("of 1,428 matching" in shown or "of 1,429 matching" in shown, f"the filter's note: {shown}")
    check(browser.evaluate("document.querySelectorAll('#log tbody tr').length") == 200, "the log shows more rows than a page")
    started = time.monotonic()
    browser.evaluate("1")
    report["timings"]["evaluateAfterFloodMilliseconds"] = round((time.monotonic() - started) * 1000, 1)

    # A phone-sized screen: the tables stack.
    browser.viewport(390, 844, 2, True)
    type_into(browser, "#log-filter", "")
    browser.evaluate("window.scrollTo(0, 0), true")
    shot("live-phone.png", full_page=False)
    return report


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--file", required=True)
    parser.add_argument("--artifacts", required=True)
    arguments = parser.parse_args()
    run_in_browser(lambda browser: drive(browser, arguments.base.rstrip("/"), os.path.abspath(arguments.file), arguments.artifacts),
                   DEADLINE_SECONDS, failure_shot=os.path.join(arguments.artifacts, "live-failure.png"))


if __name__ == "__main__":
    main()
