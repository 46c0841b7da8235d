#!/usr/bin/python3
"""dllmq serve as an operator runs it (issue 33), over loopback only (127.0.0.1, free ports,
every call with a timeout, every loop bounded):

- API keys: the matrix none / wrong / right key, header forms (scheme case, extra spaces, Basic,
  no scheme), /health open, /metrics protected unless --metrics-public; the key from the flag,
  from --api-key-file and from DLLMQ_API_KEY; conflicting or empty key sources refused; a
  warning when listening beyond loopback without a key.
- The official `openai` Python client (PyPI, pinned, in a venv this test makes) with a key:
  plain and streamed completions equal the server's own answer, and a wrong key raises the
  client's AuthenticationError.
- Graceful drain: 8 streams in flight (4 decoding, 4 queued), SIGTERM: every stream ends with the
  text of an undisturbed run, new requests get 503 with Retry-After, /health says draining, the
  process exits 0 within --drain-timeout; a second signal stops at once (exit 0, the streams
  still open end with the shutdown error).
- Limits: --request-timeout ends a long request with a 504 'timeout' error (plain and streamed)
  and frees its slot; --max-tokens refuses larger requests, and a server whose default exceeds
  it does not start; slow clients (stalled headers, a body that stops, a stream nobody reads)
  hold neither a decoding slot nor other clients up.
- Observability: --log writes one JSON line per request (request id = X-Request-Id, tokens,
  NFE, queue wait, decode time, status); /metrics has the latency and queue-wait histograms.

    test_server_ops.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results, run_all  # noqa: E402
from serve_client import Server, read_events, wait_until  # noqa: E402

KEY = "sk-test-0123456789abcdef"
OPENAI_PIN = "openai==3.51.0"
ENV = {k: v for k, v in os.environ.items() if k not in ("DLLMQ_MODEL", "DLLMQ_API_KEY")}
PROMPT = "Mia has 23 marbles. She buys 14 more marbles. How many marbles does Mia have now?"
# A request that decodes for a while (no cache: one full forward per step).
LONG = {"prompt": PROMPT, "max_tokens": 96, "block_length": 32, "steps": 96}


def auth(key):
    return {"Authorization": "Bearer " + key, "Content-Type": "application/json"}


def post(s, path, body, headers=None, timeout=300):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    st, hd, raw = s.request("POST", path, json.dumps(body), h, timeout)
    try:
        return st, hd, json.loads(raw)
    except ValueError:
        return st, hd, None


def stream_text(port, body, headers=None, timeout=300):
    """Runs one streamed completion; returns (status, text, error message or None)."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)), headers=h)
        r = c.getresponse()
        if r.status != 200:
            return r.status, "", (json.loads(r.read() or b"{}").get("error") or {}).get("message")
        text, err = "", None
        for name, data in read_events(r):
            if data == "[DONE]":
                break
            d = json.loads(data)
            if "error" in d:
                err = d["error"].get("message")
            for ch in d.get("choices", []):
                text += ch.get("text") or ""
        return 200, text, err
    finally:
        c.close()


def check_keys(R, dllmq, work):
    with Server(dllmq, ["--threads", "1", "--api-key", KEY], env=ENV) as s:
        body = {"prompt": "Hi", "max_tokens": 16}
        st, hd, j = post(s, "/v1/completions", body)
        err = (j or {}).get("error", {})
        R.check("key/missing -> 401 OpenAI error", st == 401 and err.get("type") and
                "API key" in err.get("message", "") and hd.get("www-authenticate") == "Bearer",
                "%d %s" % (st, j))
        st, _, j = post(s, "/v1/completions", body, {"Authorization": "Bearer wrong"})
        R.check("key/wrong -> 401", st == 401 and "Incorrect API key" in str(j), "%d" % st)
        st, _, _ = post(s, "/v1/completions", body, {"Authorization": "Bearer " + KEY + "x"})
        R.check("key/longer -> 401", st == 401, "%d" % st)
        st, _, _ = post(s, "/v1/completions", body, {"Authorization": "Bearer " + KEY[:-1]})
        R.check("key/prefix -> 401", st == 401, "%d" % st)
        st, _, _ = post(s, "/v1/completions", body, {"Authorization": "Basic " + KEY})
        R.check("key/Basic scheme -> 401", st == 401, "%d" % st)
        st, _, _ = post(s, "/v1/completions", body, {"Authorization": KEY})
        R.check("key/no scheme -> 401", st == 401, "%d" % st)
        st, _, j = post(s, "/v1/completions", body, {"Authorization": "Bearer " + KEY})
        R.check("key/right -> 200", st == 200 and j["choices"][0]["text"] is not None, "%d" % st)
        st, _, _ = post(s, "/v1/completions", body, {"Authorization": "bearer   " + KEY})
        R.check("key/scheme case and spaces -> 200", st == 200, "%d" % st)
        st, _, j = post(s, "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16},
                        {"Authorization": "Bearer " + KEY})
        R.check("key/chat right -> 200", st == 200, "%d" % st)
        st, _, _ = s.request("GET", "/v1/models")
        R.check("key/models protected", st == 401, "%d" % st)
        st, _, _ = s.request("GET", "/v1/models", headers={"Authorization": "Bearer " + KEY})
        R.check("key/models with key", st == 200, "%d" % st)
        st, _, _ = s.request("GET", "/health")
        R.check("key/health open", st == 200, "%d" % st)
        st, _, _ = s.request("GET", "/metrics")
        R.check("key/metrics protected", st == 401, "%d" % st)
        st, _, raw = s.request("GET", "/metrics", headers={"Authorization": "Bearer " + KEY})
        R.check("key/metrics with key", st == 200 and b"dllmq_" in raw, "%d" % st)
        st, _, _ = s.request("GET", "/")
        R.check("key/page open", st == 200, "%d" % st)
        st, _, _ = s.request("GET", "/nope")
        R.check("key/unknown route needs the key too", st == 401, "%d" % st)
    with Server(dllmq, ["--threads", "1", "--api-key", KEY, "--metrics-public"], env=ENV) as s:
        st, _, raw = s.request("GET", "/metrics")
        R.check("key/--metrics-public", st == 200 and b"dllmq_" in raw, "%d" % st)
        st, _, _ = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16})
        R.check("key/--metrics-public keeps the API closed", st == 401, "%d" % st)
    key_file = os.path.join(work, "key.txt")
    with open(key_file, "w") as f:
        f.write("  %s  \nsecond line ignored\n" % KEY)
    with Server(dllmq, ["--threads", "1", "--api-key-file", key_file], env=ENV) as s:
        ok = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16}, auth(KEY))[0] == 200
        no = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16})[0] == 401
        R.check("key/--api-key-file", ok and no)
    with Server(dllmq, ["--threads", "1"], env=dict(ENV, DLLMQ_API_KEY=KEY)) as s:
        ok = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16}, auth(KEY))[0] == 200
        no = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16})[0] == 401
        R.check("key/DLLMQ_API_KEY", ok and no)
    empty = os.path.join(work, "empty.txt")
    open(empty, "w").close()
    for args, want in ((["--api-key", KEY, "--api-key-file", key_file], "--api-key-file"),
                       (["--api-key-file", empty], empty),
                       (["--api-key-file", os.path.join(work, "missing")], "missing"),
                       (["--api-key", "has space"], "--api-key")):
        p = subprocess.run([dllmq, "serve", "--port", "0"] + args, capture_output=True,
                           text=True, timeout=60, env=ENV)
        R.check("key/refused %s" % " ".join(args[:2]), p.returncode == 1 and want in p.stderr,
                p.stderr.strip()[-200:])
    # Beyond loopback without a key: a warning at start (nothing is sent to that address).
    with Server(dllmq, ["--threads", "1", "--host", "0.0.0.0"], env=ENV) as s:
        warned = any("WARNING" in l and "API key" in l for l in s.stderr_lines)
        R.check("key/warning when not loopback", warned, "".join(s.stderr_lines)[-300:])
    with Server(dllmq, ["--threads", "1"], env=ENV) as s:
        quiet = not any("WARNING" in l for l in s.stderr_lines)
        R.check("key/no warning on loopback", quiet)


def openai_python(work):
    """A venv with the pinned openai client (PyPI); None (and why) if it cannot be made."""
    venv = os.path.join(work, "venv-openai")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        p = subprocess.run(["/usr/bin/python3", "-m", "venv", venv], capture_output=True,
                           text=True, timeout=300)
        if p.returncode != 0:
            return None, p.stderr[-300:]
    p = subprocess.run([py, "-m", "pip", "install", "-q", OPENAI_PIN], capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        return None, p.stderr[-300:]
    return py, ""


OPENAI_SCRIPT = r"""
import json, sys
import openai
base, key = sys.argv[1], sys.argv[2]
out = {}
c = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=120)
r = c.completions.create(model="m", prompt=sys.argv[3], max_tokens=16)
out["plain"] = r.choices[0].text
out["streamed"] = "".join(ch.choices[0].text for ch in
                          c.completions.create(model="m", prompt=sys.argv[3], max_tokens=16,
                                               stream=True) if ch.choices)
r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": sys.argv[3]}],
                              max_tokens=16)
out["chat"] = r.choices[0].message.content
bad = openai.OpenAI(base_url=base, api_key=key + "-wrong", max_retries=0, timeout=60)
try:
    bad.completions.create(model="m", prompt="Hi", max_tokens=16)
    out["wrong_key"] = "no error"
except openai.AuthenticationError as e:
    out["wrong_key"] = "AuthenticationError %s" % e.status_code
except Exception as e:
    out["wrong_key"] = "other %r" % e
print(json.dumps(out))
"""


def check_openai_client(R, dllmq, work):
    py, why = openai_python(work)
    if py is None:
        R.check("openai/venv with %s" % OPENAI_PIN, False, why)
        return
    with Server(dllmq, ["--threads", "1", "--api-key", KEY], env=ENV) as s:
        p = subprocess.run([py, "-c", OPENAI_SCRIPT, "http://127.0.0.1:%d/v1" % s.port, KEY,
                            PROMPT], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            R.check("openai/client runs", False, p.stderr[-500:])
            return
        out = json.loads(p.stdout)
        _, _, want = post(s, "/v1/completions", {"prompt": PROMPT, "max_tokens": 16}, auth(KEY))
        want_text = want["choices"][0]["text"]
        R.check("openai/plain with key", out["plain"] == want_text, repr(out["plain"]))
        R.check("openai/streamed with key", out["streamed"] == want_text, repr(out["streamed"]))
        R.check("openai/chat with key", isinstance(out["chat"], str), repr(out["chat"]))
        R.check("openai/wrong key -> AuthenticationError",
                out["wrong_key"] == "AuthenticationError 401", out["wrong_key"])


def check_drain(R, dllmq):
    base = ["--threads", "1", "--parallel", "4", "--batch-wait", "0"]
    args = base + ["--drain-timeout", "120"]
    bodies = [dict(LONG, prompt=PROMPT + " " * i) for i in range(8)]
    with Server(dllmq, args, env=ENV) as s:
        results = [None] * 8
        ts = [threading.Thread(target=lambda i=i: results.__setitem__(i, stream_text(s.port, bodies[i])))
              for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(600)
        want = [r[1] for r in results]
        R.check("drain/undisturbed run", all(r[0] == 200 and r[2] is None for r in results))

    with Server(dllmq, args, env=ENV) as s:
        results = [None] * 8
        ts = [threading.Thread(target=lambda i=i: results.__setitem__(i, stream_text(s.port, bodies[i])))
              for i in range(8)]
        for t in ts:
            t.start()
        wait_until(lambda: s.metrics().get("dllmq_jobs_running", 0) == 4 and
                   s.metrics().get("dllmq_queue_depth", 0) == 4, 60)
        m = s.metrics()
        inflight = (m.get("dllmq_jobs_running", 0), m.get("dllmq_queue_depth", 0))
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: any("draining" in l for l in s.stderr_lines), 30)
        st, hd, j = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16}, timeout=30)
        R.check("drain/new request -> 503 + Retry-After",
                st == 503 and int(hd.get("retry-after", 0)) >= 1 and "shutting down" in str(j),
                "%d %s" % (st, j))
        st, _, raw = s.request("GET", "/health", timeout=30)
        R.check("drain/health says draining",
                st == 503 and json.loads(raw).get("status") == "draining", "%d %s" % (st, raw))
        for t in ts:
            t.join(600)
        code = s.proc.wait(180)
        took = time.time() - t0
        same = [r is not None and r[0] == 200 and r[2] is None and r[1] == w
                for r, w in zip(results, want)]
        R.check("drain/every stream completes with the undisturbed text (%d running, %d queued "
                "at SIGTERM)" % inflight, all(same) and inflight == (4, 4),
                "%s" % [(r[0], r[2]) if r else None for r in results])
        R.check("drain/exit 0 within the timeout", code == 0 and took < 120,
                "exit %s after %.1f s" % (code, took))

    # What the drain cannot finish: after --drain-timeout, or at once on a second signal, the
    # open streams end with the shutdown error and the process exits 0.
    for label, drain, second in (("drain timeout", "1", False), ("second signal", "600", True)):
        with Server(dllmq, base + ["--drain-timeout", drain], env=ENV) as s:
            results = [None] * 4
            ts = [threading.Thread(target=lambda i=i: results.__setitem__(
                i, stream_text(s.port, dict(LONG, max_tokens=256, steps=256)))) for i in range(4)]
            for t in ts:
                t.start()
            wait_until(lambda: s.metrics().get("dllmq_jobs_running", 0) == 4, 60)
            t0 = time.time()
            s.proc.send_signal(signal.SIGTERM)
            wait_until(lambda: any("draining" in l for l in s.stderr_lines), 30)
            if second:
                s.proc.send_signal(signal.SIGTERM)
            code = s.proc.wait(120)
            took = time.time() - t0
            for t in ts:
                t.join(120)
            errs = [r[2] for r in results if r]
            R.check("drain/%s: streams told why, exit 0" % label, code == 0 and took < 30 and
                    len(errs) == 4 and all(e and "shutting down" in e for e in errs),
                    "exit %s after %.1f s; %s" % (code, took, errs))


def check_limits(R, dllmq):
    with Server(dllmq, ["--threads", "1", "--request-timeout", "0.5", "--max-tokens", "128"],
                env=ENV) as s:
        long = dict(LONG, max_tokens=128, steps=128)
        t0 = time.time()
        st, _, j = post(s, "/v1/completions", long)
        took = time.time() - t0
        err = (j or {}).get("error", {})
        R.check("timeout/plain -> 504 timeout", st == 504 and err.get("type") == "timeout" and
                "--request-timeout" in err.get("message", ""), "%d %s" % (st, j))
        R.check("timeout/stops decoding", took < 10, "%.1f s" % took)
        st, text, e = stream_text(s.port, long)
        R.check("timeout/streamed -> error event", st == 200 and e and "--request-timeout" in e,
                "%d %s" % (st, e))
        R.check("timeout/slot freed",
                wait_until(lambda: s.metrics().get("dllmq_jobs_running", 1) == 0, 30))
        st, _, j = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16, "steps": 4,
                                              "block_length": 16})
        R.check("timeout/short request still served", st == 200, "%d %s" % (st, j))
        st, _, j = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 160, "steps": 160,
                                              "block_length": 32})
        R.check("max-tokens/over the cap -> 400 naming it",
                st == 400 and (j or {}).get("error", {}).get("param") == "max_tokens" and
                "--max-tokens" in str(j), "%d %s" % (st, j))
    p = subprocess.run([dllmq, "serve", "--port", "0", "--max-tokens", "8"], capture_output=True,
                       text=True, timeout=60, env=ENV)
    R.check("max-tokens/below the default -> refuses to start",
            p.returncode == 1 and "--max-tokens" in p.stderr, p.stderr.strip()[-200:])


def check_slow_clients(R, dllmq):
    """Slowloris-style clients, bounded: 24 connections that send their headers a byte at a
    time, one that stops in the middle of its body, one that trickles its body a byte within
    every --io-timeout (ended by --body-timeout), one that never reads its stream."""
    with Server(dllmq, ["--threads", "1", "--parallel", "2", "--queue", "4", "--io-timeout",
                        "1", "--body-timeout", "2"], env=ENV) as s:
        stop = time.time() + 8
        slow = []
        for _ in range(24):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            slow.append(c)
        closed = [False] * len(slow)

        def trickle():
            while time.time() < stop:
                for i, c in enumerate(slow):
                    if closed[i]:
                        continue
                    try:
                        c.sendall(b"X")
                    except OSError:
                        closed[i] = True
                time.sleep(0.3)
        tr = threading.Thread(target=trickle)
        tr.start()
        t0 = time.time()
        oks = 0
        for _ in range(4):
            st, _, _ = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16}, timeout=30)
            oks += st == 200
        R.check("slow/other clients served beside 24 trickling ones", oks == 4,
                "%d of 4 in %.1f s" % (oks, time.time() - t0))
        tr.join(20)
        for c in slow:
            c.close()
        # A body that stops: the connection is closed after --io-timeout, no job is started.
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"prompt\": ")
        t0 = time.time()
        try:
            data = c.recv(4096)
        except OSError:
            data = b""
        took = time.time() - t0
        c.close()
        R.check("slow/stalled body closed after --io-timeout", took < 8,
                "%.1f s, got %r" % (took, data[:60]))
        # A body trickled a byte every 0.4 s (each wait within --io-timeout 1): the whole body
        # is bounded by --body-timeout 2, answered 408 naming the flag.
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000\r\n\r\n{")
        c.settimeout(0.4)
        t0 = time.time()
        data = b""
        while time.time() - t0 < 15:
            try:
                got = c.recv(4096)
                if not got:
                    break
                data += got
                if b"\r\n\r\n" in data and b"}" in data:
                    break
            except socket.timeout:
                try:
                    c.sendall(b" ")
                except OSError:
                    break
            except OSError:
                break
        took = time.time() - t0
        c.close()
        R.check("slow/trickled body ended by --body-timeout (408)",
                data.startswith(b"HTTP/1.1 408") and b"--body-timeout" in data and took < 6,
                "%.1f s, got %r" % (took, data[:200]))
        # A stream nobody reads: decoding finishes and the slot is freed anyway.
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = json.dumps(dict(LONG, stream=True, stream_steps=True)).encode()
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: s.metrics().get("dllmq_jobs_running", 0) >= 1, 30)
        freed = wait_until(lambda: s.metrics().get("dllmq_jobs_running", 1) == 0, 120)
        R.check("slow/unread stream does not hold its slot", freed)
        st, _, _ = post(s, "/v1/completions", {"prompt": "Hi", "max_tokens": 16}, timeout=60)
        R.check("slow/served after the unread stream", st == 200, "%d" % st)
        c.close()


def check_log_and_metrics(R, dllmq):
    with Server(dllmq, ["--threads", "1", "--log"], env=ENV) as s:
        st, hd, j = post(s, "/v1/completions", {"prompt": PROMPT, "max_tokens": 16})
        rid = hd.get("x-request-id", "")
        st2, _, _ = post(s, "/v1/completions", {"prompt": 5})
        stream_text(s.port, {"prompt": PROMPT, "max_tokens": 16})
        wait_until(lambda: sum(l.startswith("{") for l in s.stderr_lines) >= 3, 10)
        lines = [json.loads(l) for l in s.stderr_lines if l.startswith("{")]
        mine = [l for l in lines if l.get("request_id") == rid]
        ok = len(mine) == 1 and st == 200
        if ok:
            l = mine[0]
            ok = (l["status"] == 200 and l["path"] == "/v1/completions" and
                  l["prompt_tokens"] == j["usage"]["prompt_tokens"] and
                  l["completion_tokens"] == j["usage"]["completion_tokens"] and
                  l["generated_tokens"] == 16 and l["nfe"] >= 1 and l["queue_s"] >= 0 and
                  l["decode_s"] > 0 and l["latency_s"] >= l["decode_s"])
        R.check("log/one JSON line per request with its costs", ok, "%s" % mine)
        bad = [l for l in lines if l.get("status") == 400]
        R.check("log/error line", len(bad) == 1 and "prompt" in bad[0].get("error", ""),
                "%s" % bad)
        streamed = [l for l in lines if l.get("status") == 200 and l.get("request_id") != rid]
        R.check("log/streamed request logged with its NFE",
                len(streamed) == 1 and streamed[0].get("nfe", 0) >= 1, "%s" % streamed)
        # A streamed request's latency is observed when its stream is released, which may come
        # after its log line: poll /metrics rather than read it once.
        m = {}

        def histograms_filled():
            m.clear()
            m.update(s.metrics())
            return (m.get("dllmq_request_duration_seconds_count", 0) >= 2 and
                    m.get("dllmq_queue_wait_seconds_count", 0) >= 2)
        wait_until(histograms_filled, 10)
        R.check("metrics/latency and queue-wait histograms",
                m.get("dllmq_request_duration_seconds_count", 0) >= 2 and
                m.get("dllmq_queue_wait_seconds_count", 0) >= 2 and
                any(k.startswith("dllmq_queue_wait_seconds_bucket") for k in m),
                "request count %s, queue-wait count %s" % (m.get("dllmq_request_duration_seconds_count"),
                                                           m.get("dllmq_queue_wait_seconds_count")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    d, R = os.path.abspath(a.dllmq), Results()
    return run_all(R, [
        lambda: check_keys(R, d, a.workdir),
        lambda: check_log_and_metrics(R, d),
        lambda: check_limits(R, d),
        lambda: check_slow_clients(R, d),
        lambda: check_drain(R, d),
        lambda: check_openai_client(R, d, a.workdir)])


if __name__ == "__main__":
    sys.exit(main())
