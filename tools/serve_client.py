"""Start, talk to and stop `dllmq serve` on 127.0.0.1 (tests and bench/serve_load.py).

Standard library only. The server is started on a free port (--port 0; the port is read from
its "listening on" line), every call has a timeout, and stop() always ends the process.

    with Server(dllmq, ["--threads", "1"]) as s:
        status, body = s.post("/v1/completions", {"prompt": "Hi"})
        for event, data in s.stream("/v1/completions", {"prompt": "Hi", "stream": True}): ...
"""
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time


class Server:
    def __init__(self, dllmq, args, env=None, start_timeout=120):
        self.proc = subprocess.Popen([dllmq, "serve", "--port", "0"] + list(args),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=env)
        self.stderr_lines = []
        self.port = None
        ready = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=read_stderr, daemon=True)
        self._reader.start()
        ready.wait(start_timeout)
        if self.port is None:
            self.stop()
            raise RuntimeError("dllmq serve did not start: " + "".join(self.stderr_lines)[-2000:])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self, timeout=60):
        """SIGTERM, then SIGKILL after `timeout` s; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return self.proc.returncode

    def connection(self, timeout=300):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=300):
        """Returns (status, headers dict, raw body bytes)."""
        c = self.connection(timeout)
        try:
            data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
            c.request(method, path, body=data, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def get(self, path, timeout=300):
        return self.request("GET", path, timeout=timeout)

    def post(self, path, body, timeout=300):
        """Returns (status, parsed JSON body or None)."""
        status, _, raw = self.request("POST", path, body,
                                      {"Content-Type": "application/json"}, timeout)
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, None

    def stream(self, path, body, timeout=300):
        """Yields (event name, data string) of a server-sent event stream."""
        c = self.connection(timeout)
        try:
            c.request("POST", path, body=json.dumps(body),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:500]))
            yield from read_events(r)
        finally:
            c.close()

    def metrics(self):
        """GET /metrics parsed into {'name{labels}': value}."""
        _, _, raw = self.get("/metrics", timeout=30)
        out = {}
        for line in raw.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def cpu_seconds(self):
        """User + system CPU time of the server process so far."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self):
        return self._status_kib("VmRSS:") * 1024

    def peak_rss_bytes(self):
        """The process's resident peak so far (VmHWM)."""
        return self._status_kib("VmHWM:") * 1024

    def _status_kib(self, field):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
        return 0


def read_events(resp):
    """Server-sent events of an http.client response: (event name, data)."""
    name, data = "message", []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line == "":
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def wait_until(pred, timeout, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
