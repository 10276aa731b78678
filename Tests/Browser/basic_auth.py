"""The upload page behind HTTP Basic credentials, in headless Chromium.

Run by Tests/CounterpartTests/Auth/BrowserAuthTests.swift against a Counterpart started
with an auth file:

    basic_auth.py BASE_URL --user NAME --password PASSWORD --file PATH

The browser's own credential prompt is what the DevTools protocol's Fetch.authRequired
stands for: the first request of the page is challenged (Basic, realm "Counterpart"), the
credentials are given once, and the page's script, its style, its health check and its
upload go out with them. The file is picked on the page; the results table must show its
SHA-256. The last line on stdout is a JSON report; the exit status is 1 with
"FAILED: ..." on stderr when a check fails.
"""

import argparse
import json
import os
import time

import websocket

from drive import READ_RESULTS, Failure, check, run_in_browser, sha256_of

DEADLINE_SECONDS = 60


class Gatekeeper:
    """Answers the Fetch domain's pauses: every request goes on; a credential challenge
    gets the credentials, as a person typing them into the browser's prompt would."""

    def __init__(self, browser, user, password):
        self.browser = browser
        self.user = user
        self.password = password
        self.challenges = []

    def send(self, method, params):
        # Not waited for: an answer would only come once the paused requests go on.
        self.browser.next_id += 1
        self.browser.socket.send(json.dumps({"id": self.browser.next_id, "method": method, "params": params,
                                             "sessionId": self.browser.session}))

    def serve(self):
        kept = []
        for event in self.browser.events:
            params = event.get("params", {})
            if event["method"] == "Fetch.requestPaused":
                self.send("Fetch.continueRequest", {"requestId": params["requestId"]})
            elif event["method"] == "Fetch.authRequired":
                self.challenges.append(params["authChallenge"])
                self.send("Fetch.continueWithAuth", {"requestId": params["requestId"], "authChallengeResponse": {
                    "response": "ProvideCredentials", "username": self.user, "password": self.password}})
            else:
                kept.append(event)
        self.browser.events = kept

    def receive_for(self, seconds):
        self.browser.socket.settimeout(seconds)
        try:
            message = json.loads(self.browser.socket.recv())
        except websocket.WebSocketTimeoutException:
            return
        if "method" in message:
            self.browser.events.append(message)

    def wait_for_event(self, method, what, timeout=20):
        deadline = time.monotonic() + timeout
        while not any(event["method"] == method for event in self.browser.events):
            check(time.monotonic() < deadline, f"timed out waiting for {what}")
            self.serve()
            self.receive_for(0.1)
        self.serve()

    def wait_until(self, expression, what, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            self.serve()
            value = self.browser.evaluate(expression)
            if value:
                return value
            check(time.monotonic() < deadline, f"timed out waiting for {what}")
            self.receive_for(0.05)


def drive(browser, base, user, password, path):
    browser.open_page()
    browser.call("Fetch.enable", {"handleAuthRequests": True, "patterns": [{"urlPattern": "*"}]})
    gate = Gatekeeper(browser, user, password)
    gate.send("Page.navigate", {"url": base + "/"})
    gate.wait_for_event("Page.loadEventFired", "the page to load behind its credential prompt")
    check(browser.evaluate("document.title") == "Counterpart — upload files", "the page did not load")
    check(len(gate.challenges) == 1, f"one prompt for the page, then none: {gate.challenges}")
    challenge = gate.challenges[0]
    check(challenge.get("scheme", "").lower() == "basic" and challenge.get("realm") == "Counterpart",
          f"the challenge is not Basic, realm Counterpart: {challenge}")
    # The page read the upload limit from the health check, with the credentials it has.
    gate.wait_until("document.readyState === 'complete'", "the page's scripts")
    browser.set_files("#files", [path])
    name = os.path.basename(path)
    results = gate.wait_until(f"""(() => {{ const rows = {READ_RESULTS};
        return rows.some(row => row.name === {json.dumps(name)}) ? rows : null; }})()""", "the upload's result")
    row = next(row for row in results if row["name"] == name)
    check(row["sha256"] == sha256_of(path), f"the results table's SHA-256 is not the file's: {row}")
    check(len(gate.challenges) == 1, f"the upload was challenged again: {gate.challenges}")
    return {"challenge": challenge, "result": row}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--file", required=True)
    arguments = parser.parse_args()
    run_in_browser(lambda browser: drive(browser, arguments.base.rstrip("/"), arguments.user, arguments.password,
                                         os.path.abspath(arguments.file)), DEADLINE_SECONDS)


if __name__ == "__main__":
    main()
