"""The `counterpart` process under test: started on a free port (`--port 0`), known to be
ready when it prints `listening on http://127.0.0.1:PORT`, stopped with SIGTERM."""

import os
import re
import selectors
import signal
import subprocess
import time

LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)\s*$")


class StartError(Exception):
    """The server exited or printed something else before it listened."""


class ServerProcess:
    def __init__(self, binary, root, uploads, flags=(), stderr_path=None, cwd=None, popen=subprocess.Popen,
                 timeout=30.0):
        """Starts `binary --port 0 --quiet --root ROOT --uploads UPLOADS FLAGS...` (stderr to
        `stderr_path`, or discarded) and waits up to `timeout` seconds for its first line.
        `popen` starts the process (a caller that must kill whatever it started passes its own)."""
        self.stderr_path = stderr_path
        argv = [binary, "--port", "0", "--quiet", "--root", root, "--uploads", uploads, *flags]
        stderr = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
        try:
            self.proc = popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
        finally:
            if stderr_path:
                stderr.close()
        line = self._first_line(timeout)
        match = LISTENING.match(line)
        if not match:
            self.proc.kill()
            self.proc.wait()
            raise StartError(f"the server did not start: stdout {line!r}, exit {self.proc.poll()}, "
                             f"stderr {self.stderr_tail(600)!r}")
        self.port = int(match.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def _first_line(self, timeout):
        fd = self.proc.stdout.fileno()
        data = b""
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in data and time.monotonic() < deadline:
                if not selector.select(max(0.0, deadline - time.monotonic())):
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
        finally:
            selector.close()
        return data.decode("utf-8", "replace")

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def status_field(self, name):
        """A field of /proc/PID/status in kB (VmRSS, VmHWM), or None when the process is gone."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as status:
                for line in status:
                    if line.startswith(name + ":"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def open_fds(self):
        """How many descriptors the process has open, or None when it is gone."""
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except OSError:
            return None

    def stderr_tail(self, limit):
        """The last `limit` characters of what the server wrote to stderr."""
        if not self.stderr_path:
            return ""
        try:
            with open(self.stderr_path, "rb") as log:
                return log.read().decode("utf-8", "replace")[-limit:]
        except OSError:
            return ""

    def terminate(self, timeout):
        """SIGTERM and wait up to `timeout` seconds: the exit status, or None when it had to
        be killed."""
        if not self.alive():
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def kill9(self):
        self.proc.kill()
        self.proc.wait(10)
