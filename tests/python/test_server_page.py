#!/usr/bin/python3
"""The page of dllmq serve in headless Chromium (Debian's `chromium`): it loads, sends a prompt
to the embedded model (streaming with stream_steps), draws the denoising steps and shows the
final answer, which must equal the server's non-streamed answer to the same request.

    test_server_page.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')

Chromium is driven through the DevTools protocol over a pipe (--remote-debugging-pipe: fd 3 in,
fd 4 out, NUL-terminated JSON), so only the standard library is needed.
"""
import argparse
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results  # noqa: E402
from serve_client import Server  # noqa: E402

PROMPT = ("Mia has 23 marbles. She buys 14 more marbles. Then she gives away 9 marbles. "
          "How many marbles does Mia have now?")


class Browser:
    """Headless Chromium with a DevTools session on one page."""

    def __init__(self, workdir):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise RuntimeError("chromium is not installed (scripts/setup.sh installs it)")
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()

        def fds():  # the child's fd 3 reads our commands, its fd 4 writes the replies
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)  # out of the way: the pipes may be 3 or 4
            b = fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--user-data-dir=" + os.path.join(workdir, "profile"),
             "--remote-debugging-pipe", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(workdir, "chromium.log"), "w"))
        os.close(cmd_r)
        os.close(res_w)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def call(self, method, params=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        end = time.time() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError("%s: %s" % (method, reply["error"]))
                    return reply["result"]
            left = end - time.time()
            if left <= 0 or not select.select([self.res_r], [], [], left)[0]:
                raise RuntimeError("no reply to %s within %d s" % (method, timeout))
            chunk = os.read(self.res_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium exited")
            self.buf += chunk

    def open(self, url):
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        return r["result"].get("value")

    def close(self):
        try:
            self.session = None
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    env = {k: v for k, v in os.environ.items() if k != "DLLMQ_MODEL"}
    R = Results()
    with Server(a.dllmq, ["--threads", "1"], env=env) as s:
        settings = {"cache": "dual", "threshold": 0.9}
        st, body = s.post("/v1/chat/completions",
                          dict(settings, messages=[{"role": "user", "content": PROMPT}]))
        want = body["choices"][0]["message"]["content"]
        steps = body["choices"][0]["dllmq"]["steps"]
        query = urllib.parse.urlencode(dict(settings, prompt=PROMPT, chat="1", autorun="1"))
        b = Browser(a.workdir)
        try:
            b.open("http://127.0.0.1:%d/?%s" % (s.port, query))
            end, state = time.time() + 120, None
            while time.time() < end:
                state = b.eval("document.body && document.body.dataset.state")
                if state in ("done", "error"):
                    break
                time.sleep(0.1)
            page = b.eval("JSON.stringify({title: document.title, "
                          "answer: document.getElementById('answer').textContent, "
                          "status: document.getElementById('status').textContent, "
                          "steps: document.body.dataset.steps, "
                          "cells: document.getElementById('canvas').children.length})")
            page = json.loads(page)
        finally:
            b.close()
    R.check("page loads", page["title"].startswith("dllmq"), page["title"])
    R.check("page finishes", state == "done" and page["status"].startswith("Done"),
            "state %s, status %r" % (state, page["status"]))
    R.check("page drew denoising steps", 1 <= int(page["steps"]) <= steps and page["cells"] > 0,
            "%s steps drawn (of %d), %d canvas cells" % (page["steps"], steps, page["cells"]))
    R.check("page shows the final answer", page["answer"] == want and want.strip() != "",
            "page %r, API %r" % (page["answer"], want))
    print("%d passed, %d failed" % (R.passed, R.failed))
    sys.exit(0 if R.failed == 0 else 1)


if __name__ == "__main__":
    main()
