"""Reads /__counterpart/events with Python's http.client, as an SSE client written from the
spec would (WHATWG HTML §9.2.6), goes away, and comes back with Last-Event-ID.

Run by Tests/CounterpartTests/Events/EventStreamTests.swift against a running Counterpart:

    sse_resume.py BASE_URL

1. Connects; the stream begins with a snapshot; makes GET /first and reads its event.
2. Closes, makes GET /away-1 … /away-5 while no client reads, reconnects with the last id
   it saw: every event after it comes, ids one apart, the five requests among them, and no
   snapshot (nothing was missed).
3. Makes more requests than the server's backlog holds, reconnects with an id the backlog
   has dropped: a snapshot that says it did not resume.
The last line on stdout is a JSON report; exit 1 with "FAILED: ..." on stderr on failure.
"""

import http.client
import json
import sys
import urllib.parse


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class EventStream:
    def __init__(self, base, last_event_id=None):
        parts = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.connection.request("GET", "/__counterpart/events", headers=headers)
        self.response = self.connection.getresponse()
        check(self.response.status == 200, f"status {self.response.status}")
        content_type = self.response.getheader("Content-Type")
        check(content_type.startswith("text/event-stream"), f"Content-Type {content_type}")
        self.last_id = None

    def next(self):
        """The next event as (id, name, data); comments and retry lines are skipped."""
        name, data, event_id = "message", [], None
        while True:
            line = self.response.fp.readline()
            check(line != b"", "the stream ended")
            line = line.decode("utf-8").rstrip("\n").rstrip("\r")
            if line == "":
                if data:
                    if event_id is not None:
                        self.last_id = event_id
                    return (event_id, name, json.loads("\n".join(data)))
                name, data = "message", []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                event_id = int(value)

    def until_requests(self, paths):
        """The events until those of the requests for all of `paths` have come."""
        events, waiting = [], set(paths)
        while waiting:
            event = self.next()
            events.append(event)
            if event[1] == "request":
                waiting.discard(event[2]["path"])
        return events

    def close(self):
        self.connection.close()


def get(base, path):
    parts = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.request("GET", path)
    connection.getresponse().read()
    connection.close()


def main():
    base = sys.argv[1].rstrip("/")
    report = {}

    first = EventStream(base)
    snapshot = first.next()
    check(snapshot[1] == "snapshot" and snapshot[2]["resumed"] is False, f"a new stream began with {snapshot}")
    get(base, "/first")
    seen = first.until_requests(["/first"])
    last = first.last_id
    first.close()

    away = [f"/away-{n}" for n in range(1, 6)]
    for path in away:
        get(base, path)
    second = EventStream(base, last_event_id=last)
    resumed = second.until_requests(away)
    second.close()
    ids = [event[0] for event in resumed]
    check(resumed[0][1] != "snapshot", f"the resumed stream began with a snapshot: {resumed[0]}")
    check(ids == list(range(last + 1, last + 1 + len(ids))), f"ids after {last}: {ids}")
    # A request's event is published when the server has finished it, a moment after its
    # client read the answer: two requests made one after the other on two connections may
    # be finished by two threads in either order.
    paths = [event[2]["path"] for event in resumed if event[1] == "request"]
    check(sorted(paths) == away, f"the requests made while away: {paths}")
    report["resumed"] = {"after": last, "ids": ids, "paths": paths}

    backlog = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    for n in range(backlog + 4):
        get(base, f"/flood-{n}")
    third = EventStream(base, last_event_id=last)
    stale = third.next()
    third.close()
    check(stale[1] == "snapshot" and stale[2]["resumed"] is False and stale[2]["lastEventId"] == last,
          f"an id the backlog no longer holds got {stale}")
    report["tooOld"] = {"lastEventId": last, "snapshotId": stale[0]}
    report["firstStream"] = len(seen)
    print(json.dumps(report))


if __name__ == "__main__":
    try:
        main()
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
