"""Speaking HTTP/1.1 to the server over sockets: `Conn`, a raw connection that sends and
reads at once and parses what comes back by hand (status line, 1xx heads, bodies framed by
Content-Length, chunked or the close); `simple_get`, one plain GET on it; `request`, one
well-formed request with http.client, for scenarios that need an answer rather than the
bytes."""

import http.client
import json
import re
import select
import socket
import time

BODY_READ_CAP = 1 << 20  # bytes of a response body read at most

STATUS_LINE = re.compile(rb"^HTTP/1\.[01] ([1-5][0-9][0-9])(?: [^\r\n]*)?$")


def _ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def _short(text, limit):
    return text if len(text) <= limit else text[:limit] + "..."


class Head:
    def __init__(self, raw, status, headers):
        self.raw = raw
        self.status = status
        self.headers = headers  # [(lowercased name, value)]

    def header(self, name):
        for key, value in self.headers:
            if key == name:
                return value
        return None


class Exchange:
    """What came back for one request on a connection."""

    def __init__(self):
        self.interim = []  # 1xx heads
        self.head = None  # the final head
        self.outcome = None  # "answered", "closed", "reset", "timeout", "malformed", "connect"
        self.after_eof = False  # the answer (or close) came only after the client half-closed
        self.body = b""
        self.body_complete = None
        self.note = ""
        self.seconds = 0.0


class Conn:
    """A raw TCP connection that sends and reads at once (the server may stop reading, or
    answer before the whole request is sent)."""

    def __init__(self, port, timeout=5):
        self.sock = None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.out = b""
        self.pos = 0
        self.pauses = []  # [(offset, seconds)]: after sending up to offset, wait
        self.send_after = 0.0
        self.eof = False
        self.reset = False
        self.write_closed = False
        self.write_failed = False
        self.sent_log = bytearray()

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def queue(self, data, pauses=()):
        base = len(self.out)
        self.out += data
        self.pauses += [(base + offset, seconds) for offset, seconds in pauses]
        self.pauses.sort()

    @property
    def all_sent(self):
        return self.pos >= len(self.out)

    def half_close(self):
        if not self.write_closed:
            self.write_closed = True
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def pump(self, wait):
        """Sends what it can, reads what has come; waits up to `wait` seconds for either."""
        now = time.monotonic()
        want_write = not self.all_sent and not self.write_closed and not self.write_failed and now >= self.send_after
        if self.eof or self.reset:
            if want_write:
                pass
            else:
                time.sleep(min(wait, 0.05))
                return
        if not want_write and not self.all_sent and not self.write_failed and not self.write_closed:
            wait = max(0.0, min(wait, self.send_after - now))
        readable, writable, _ = select.select([] if (self.eof or self.reset) else [self.sock],
                                              [self.sock] if want_write else [], [], wait)
        if writable:
            limit = len(self.out)
            while self.pauses and self.pauses[0][0] <= self.pos:
                self.pauses.pop(0)
            if self.pauses:
                limit = min(limit, self.pauses[0][0])
            try:
                count = self.sock.send(self.out[self.pos:limit])
                self.sent_log += self.out[self.pos:self.pos + count]
                self.pos += count
                if self.pauses and self.pos >= self.pauses[0][0]:
                    self.send_after = time.monotonic() + self.pauses[0][1]
                    self.pauses.pop(0)
            except (BrokenPipeError, ConnectionResetError):
                self.write_failed = True
            except BlockingIOError:
                pass
            except OSError:
                self.write_failed = True
        if readable:
            try:
                data = self.sock.recv(65536)
                if data:
                    self.buf += data
                else:
                    self.eof = True
            except ConnectionResetError:
                self.reset = True
            except BlockingIOError:
                pass
            except OSError:
                self.reset = True

    def _take_head(self):
        """A complete head from the buffer: Head, None (not yet), or 'malformed'."""
        if not self.buf:
            return None
        if not self.buf.startswith(b"HTTP/"[:len(self.buf)]):
            return "malformed"
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return "malformed" if len(self.buf) > 262144 else None
        raw = bytes(self.buf[:end + 4])
        del self.buf[:end + 4]
        lines = raw[:-4].split(b"\r\n")
        match = STATUS_LINE.match(lines[0])
        if not match:
            return "malformed"
        headers = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                return "malformed"
            headers.append((name.decode("latin-1").strip().lower(), value.decode("latin-1").strip()))
        return Head(raw, int(match.group(1)), headers)

    def read_response(self, grace, timeout, exchange):
        """Reads up to the final head (1xx read past). Half-closes after `grace` seconds
        without one; then gives the server `timeout` more seconds."""
        start = time.monotonic()
        soft = start + grace
        hard = None
        while True:
            head = self._take_head()
            if head == "malformed":
                exchange.outcome = "malformed"
                exchange.note = "unparseable response bytes: " + repr(bytes(self.buf[:200]))
                break
            if isinstance(head, Head):
                if head.status < 200:
                    exchange.interim.append(head)
                    continue
                exchange.head = head
                exchange.outcome = "answered"
                break
            if self.reset:
                exchange.outcome = "reset"
                break
            if self.eof:
                exchange.outcome = "closed"
                if self.buf:
                    exchange.note = "partial head before close: " + repr(bytes(self.buf[:200]))
                break
            now = time.monotonic()
            if hard is None and now >= soft:
                self.half_close()
                hard = now + timeout
            if hard is not None and now >= hard:
                exchange.outcome = "timeout"
                break
            self.pump(0.05 if hard is None else 0.1)
        exchange.after_eof = self.write_closed
        exchange.seconds = time.monotonic() - start
        return exchange

    def read_body(self, exchange, method, timeout):
        """Reads the final response's body (by its framing) up to BODY_READ_CAP bytes."""
        head = exchange.head
        if method == "HEAD" or head.status in (204, 304):
            exchange.body_complete = True
            return
        deadline = time.monotonic() + timeout
        length = head.header("content-length")
        chunked = (head.header("transfer-encoding") or "").lower() == "chunked"
        if length is not None and not chunked:
            try:
                length = int(length)
            except ValueError:
                exchange.body_complete = False
                exchange.note = f"Content-Length {length!r}"
                return
            want = min(length, BODY_READ_CAP)
            while len(self.buf) < want and not self.eof and not self.reset and time.monotonic() < deadline:
                self.pump(0.1)
            exchange.body = bytes(self.buf[:want])
            del self.buf[:want]
            exchange.body_complete = len(exchange.body) == want
            exchange.body_capped = want < length
            return
        if chunked:
            body = bytearray()
            while time.monotonic() < deadline:
                line_end = self.buf.find(b"\r\n")
                if line_end >= 0:
                    size_text = bytes(self.buf[:line_end]).split(b";")[0].strip()
                    try:
                        size = int(size_text, 16)
                    except ValueError:
                        exchange.body_complete = False
                        return
                    if size == 0:
                        end = self.buf.find(b"\r\n\r\n", line_end)
                        if end >= 0 or self.buf[line_end:line_end + 4] == b"\r\n\r\n":
                            del self.buf[:(end if end >= 0 else line_end) + 4]
                            exchange.body = bytes(body)
                            exchange.body_complete = True
                            return
                    elif len(self.buf) >= line_end + 2 + size + 2:
                        body += self.buf[line_end + 2:line_end + 2 + size]
                        del self.buf[:line_end + 2 + size + 2]
                        if len(body) > BODY_READ_CAP:
                            exchange.body = bytes(body)
                            exchange.body_complete = True
                            exchange.body_capped = True
                            return
                        continue
                if self.eof or self.reset:
                    break
                self.pump(0.1)
            exchange.body = bytes(body)
            exchange.body_complete = False
            return
        # Neither: the body runs to the close.
        while not self.eof and not self.reset and len(self.buf) < BODY_READ_CAP and time.monotonic() < deadline:
            self.pump(0.1)
        exchange.body = bytes(self.buf)
        self.buf.clear()
        exchange.body_complete = self.eof or len(exchange.body) >= BODY_READ_CAP


def simple_get(port, target, timeout, extra=b""):
    """A plain request on a new connection: (status, headers, body, seconds) or None."""
    start = time.monotonic()
    try:
        conn = Conn(port, timeout=timeout)
    except OSError:
        return None
    try:
        conn.queue(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra + b"\r\n")
        exchange = conn.read_response(timeout, 1.0, Exchange())
        if exchange.outcome != "answered":
            return None
        conn.read_body(exchange, "GET", max(0.5, timeout - (time.monotonic() - start)))
        return exchange.head.status, exchange.head, exchange.body, time.monotonic() - start
    finally:
        conn.close()


class Reply:
    def __init__(self, status, headers, body, seconds, error=None):
        self.status, self.headers, self.body, self.seconds, self.error = status, headers, body, seconds, error

    def json(self):
        try:
            return json.loads(self.body)
        except (ValueError, TypeError):
            return None

    def describe(self):
        if self.status is None:
            return f"no answer ({self.error}) after {_ms(self.seconds)}"
        return f"{self.status} {_short(self.body.decode('utf-8', 'replace'), 160)!r} in {_ms(self.seconds)}"


def request(port, method, path, headers=None, body=None, timeout=5.0, source=None):
    """One request on a fresh connection, with http.client; never raises for network errors."""
    start = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=source)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data,
                     time.monotonic() - start)
    except (OSError, http.client.HTTPException) as error:
        return Reply(None, {}, b"", time.monotonic() - start, f"{type(error).__name__}: {error}")
    finally:
        connection.close()
