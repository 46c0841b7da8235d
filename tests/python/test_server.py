#!/usr/bin/python3
"""dllmq serve over loopback (127.0.0.1, a free port, every call with a timeout).

    test_server.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')

- Endpoints: /health, /v1/models, /metrics (Prometheus text), / (the page).
- Tokens equal `dllmq generate` with the same settings: token-id, text and chat prompts, cache
  none / prefix / dual, threshold, factor, KIVI, temperature with a seed.
- Streaming: the deltas add up to the non-streamed answer, finish reasons and usage agree, a stop
  sequence cuts both the same way; stream_steps events form a consistent denoising trajectory
  (masked positions null, each step reveals what it says, tokens never change).
- Errors: malformed JSON, wrong types, unknown and server-only fields, unsupported OpenAI
  options, bad values, over-long prompts, a huge body (413): each a 400 (413) with an
  OpenAI-style error object naming the field; the server keeps serving.
- Batched decoding: a request's N prompts (N = 2..8, different lengths) decode as one batch
  (max_batch N) and each equals its batch-1 run; concurrent requests with different settings
  too; the same on a tiny random Dream checkpoint (whole-canvas and block samplers).
- Cancellation: a client that disconnects (streaming or not) stops its decoding early.
- A full queue answers 503 with Retry-After; SIGTERM stops the server cleanly.
"""
import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_checkpoint as mk  # noqa: E402
from results import Results  # noqa: E402
from serve_client import Server, wait_until  # noqa: E402

DEMO = ("Mia has 23 marbles. She buys 14 more marbles. Then she gives away 9 marbles. "
        "How many marbles does Mia have now?")


def flags_of(fields):
    """Request decoding fields -> the same settings as `dllmq generate` flags."""
    out = []
    for k, v in fields.items():
        flag = "--gen-length" if k == "max_tokens" else "--" + k.replace("_", "-")
        if v is True:
            out.append(flag)
        elif v is not False:
            out += [flag, str(v)]
    return out


def generate(dllmq, model, prompt_args, fields):
    cmd = [dllmq, "generate", "--threads", "1", "--json"] + prompt_args + flags_of(fields)
    if model:
        cmd += ["-m", model]
    return json.loads(subprocess.check_output(cmd, stderr=subprocess.DEVNULL, timeout=300))


def ids_arg(ids):
    return ["--prompt-ids", ",".join(map(str, ids))]


def random_ids(n, seed, vocab):
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(n)]


def check_endpoints(R, s):
    st, h, raw = s.get("/health")
    body = json.loads(raw)
    R.check("health", st == 200 and body["status"] == "ok" and body["parallel"] == 8, raw[:200])
    st, h, raw = s.get("/v1/models")
    body = json.loads(raw)
    R.check("models", st == 200 and body["object"] == "list"
            and body["data"][0]["id"] == "dllmq-synth-tiny", raw[:200])
    st, h, raw = s.get("/")
    page = raw.decode()
    R.check("page", st == 200 and h["content-type"].startswith("text/html")
            and "stream_steps" in page and "<script>" in page, "%d bytes" % len(raw))
    st, h, raw = s.get("/metrics")
    text = raw.decode()
    names = ["dllmq_requests_total", "dllmq_generated_tokens_total", "dllmq_nfe_total",
             "dllmq_queue_depth", "dllmq_kv_bytes_held", "dllmq_request_duration_seconds_bucket",
             "dllmq_batches_total", "dllmq_batch_forward_seconds_total", "dllmq_resident_bytes"]
    ok = st == 200 and h["content-type"].startswith("text/plain") and all(n in text for n in names)
    for line in text.splitlines():  # every sample line is "name{labels} number"
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                float(value)
            except ValueError:
                ok = False
    R.check("metrics", ok, "%d lines" % len(text.splitlines()))


EXACT_CASES = [
    ("defaults", {}),
    ("dual threshold", {"cache": "dual", "threshold": 0.9}),
    ("prefix kivi-2", {"cache": "prefix", "kv": "kivi", "kv_bits": 2, "max_tokens": 32,
                       "block_length": 16, "steps": 16}),
    ("temperature seed", {"temperature": 0.8, "seed": 7, "max_tokens": 32, "block_length": 8,
                          "steps": 16}),
    ("dual factor fp16", {"cache": "dual", "factor": 1.0, "kv": "fp16"}),
]


def check_exact(R, s, dllmq):
    ids = random_ids(23, 5, 500)
    for name, fields in EXACT_CASES:
        st, body = s.post("/v1/completions", dict(fields, prompt=ids))
        ref = generate(dllmq, None, ids_arg(ids), fields)
        got = body["choices"][0]["dllmq"] if st == 200 else {}
        R.check("exact ids: " + name, st == 200 and got["tokens"] == ref["tokens"]
                and got["nfe"] == ref["nfe"] and got["kv_bytes"] == ref["kv_bytes"]
                and body["choices"][0]["text"] == ref["text"],
                "nfe %s" % got.get("nfe"))
    fields = {"cache": "dual", "threshold": 0.9}
    st, body = s.post("/v1/completions", dict(fields, prompt=DEMO))
    ref = generate(dllmq, None, ["--prompt", DEMO], fields)
    R.check("exact text prompt", st == 200 and body["choices"][0]["dllmq"]["tokens"] == ref["tokens"]
            and body["choices"][0]["text"] == ref["text"])
    st, body = s.post("/v1/chat/completions",
                      dict(fields, messages=[{"role": "user", "content": DEMO}]))
    ref = generate(dllmq, None, ["--chat", "--prompt", DEMO], fields)
    msg = body["choices"][0]["message"] if st == 200 else {}
    R.check("exact chat (template applied)", st == 200
            and body["choices"][0]["dllmq"]["tokens"] == ref["tokens"]
            and msg["content"] == ref["text"] and msg["role"] == "assistant"
            and body["object"] == "chat.completion"
            and body["usage"]["prompt_tokens"] == ref["prompt_tokens"], repr(msg.get("content")))
    st, body = s.post("/v1/chat/completions", dict(fields, messages=[
        {"role": "system", "content": "Solve it."}, {"role": "user", "content": DEMO}]))
    ref = generate(dllmq, None, ["--chat", "--system", "Solve it.", "--prompt", DEMO], fields)
    R.check("exact chat with system message", st == 200
            and body["choices"][0]["dllmq"]["tokens"] == ref["tokens"])


def collect(s, path, body):
    """(text deltas joined, finish reasons, usage, step events, saw [DONE])."""
    text, finish, usage, steps, done = "", [], None, [], False
    for event, data in s.stream(path, body):
        if data == "[DONE]":
            done = True
            continue
        ev = json.loads(data)
        if event == "step":
            steps.append(ev)
            continue
        if ev.get("usage"):
            usage = ev["usage"]
        for c in ev["choices"]:
            text += c.get("text", "") if "text" in c else c["delta"].get("content", "")
            if c["finish_reason"]:
                finish.append(c["finish_reason"])
    return text, finish, usage, steps, done


def check_streaming(R, s):
    fields = {"cache": "dual", "threshold": 0.9}
    msgs = [{"role": "user", "content": DEMO}]
    st, body = s.post("/v1/chat/completions", dict(fields, messages=msgs))
    full = body["choices"][0]["message"]["content"]
    text, finish, usage, steps, done = collect(s, "/v1/chat/completions", dict(
        fields, messages=msgs, stream=True, stream_options={"include_usage": True}))
    R.check("chat stream = non-stream", done and text == full
            and finish == [body["choices"][0]["finish_reason"]] and usage == body["usage"],
            repr(text))

    # A stop sequence cuts the streamed and the whole answer at the same place.
    stop = ["="]
    st, body = s.post("/v1/chat/completions", dict(fields, messages=msgs, stop=stop))
    text, finish, _, _, done = collect(s, "/v1/chat/completions", dict(
        fields, messages=msgs, stop=stop, stream=True))
    want = full[:full.index("=")] if "=" in full else full
    R.check("stop sequence", st == 200 and body["choices"][0]["message"]["content"] == want
            and text == want and finish == ["stop"]
            and body["choices"][0]["finish_reason"] == "stop", repr(text))

    # Denoising steps: a consistent trajectory that ends in the non-streamed tokens.
    fields = {"max_tokens": 32, "block_length": 8, "steps": 16, "prompt": DEMO}
    st, body = s.post("/v1/completions", fields)
    tokens = body["choices"][0]["dllmq"]["tokens"]
    text, finish, _, steps, done = collect(s, "/v1/completions",
                                           dict(fields, stream=True, stream_steps=True))
    ok = done and len(steps) >= 1 and text == body["choices"][0]["text"]
    prev = [None] * 32
    for i, ev in enumerate(steps):
        canvas, ids = ev["canvas"], ev["ids"]
        ok = ok and ev["step"] == i and len(canvas) == 32
        ok = ok and ev["masked"] == sum(c is None for c in canvas)
        for p in ev["revealed"]:
            ok = ok and prev[p] is None and canvas[p] is not None
        for p in range(32):
            if canvas[p] is not None:
                ok = ok and ids[p] == tokens[p]  # revealed tokens never change
            if prev[p] is not None:
                ok = ok and canvas[p] == prev[p]
        prev = canvas
    R.check("stream_steps trajectory", ok, "%d step events of %d steps"
            % (len(steps), body["choices"][0]["dllmq"]["steps"]))


def error_cases(big_prompt):
    ok_prompt = {"prompt": "Hi"}
    return [
        ("malformed JSON", b'{"prompt": "x",', None),
        ("not an object", [1, 2], None),
        ("prompt missing", {"max_tokens": 16}, "prompt"),
        ("prompt wrong type", {"prompt": 5}, "prompt"),
        ("prompt ids outside vocabulary", {"prompt": [1, 2, 600]}, "prompt"),
        ("max_tokens wrong type", dict(ok_prompt, max_tokens="16"), "max_tokens"),
        ("max_tokens zero", dict(ok_prompt, max_tokens=0), "max_tokens"),
        ("max_tokens not a block multiple", dict(ok_prompt, max_tokens=50), "max_tokens"),
        ("stream wrong type", dict(ok_prompt, stream="yes"), "stream"),
        ("unknown field", dict(ok_prompt, frobnicate=1), "frobnicate"),
        ("server-only field", dict(ok_prompt, dtype="bf16"), "dtype"),
        ("calibration file from a client", dict(ok_prompt, calib="/etc/passwd"), "calib"),
        ("n > 1", dict(ok_prompt, n=2), "n"),
        ("logprobs", dict(ok_prompt, logprobs=1), "logprobs"),
        ("echo", dict(ok_prompt, echo=True), "echo"),
        ("top_p range", dict(ok_prompt, top_p=2), "top_p"),
        ("threshold range", dict(ok_prompt, threshold=1.5), "threshold"),
        ("cache value", dict(ok_prompt, cache="full"), "cache"),
        ("kv_bits value", dict(ok_prompt, kv="kivi", cache="dual", kv_bits=5), "kv_bits"),
        ("kv_bits type", dict(ok_prompt, kv_bits="a"), "kv_bits"),
        ("alg value", dict(ok_prompt, alg="entropy"), "alg"),
        ("seed negative", dict(ok_prompt, seed=-1), "seed"),
        ("steps above max_tokens", dict(ok_prompt, steps=96), "steps"),
        ("over-long prompt", {"prompt": big_prompt}, "prompt"),
        ("stream_steps without stream", dict(ok_prompt, stream_steps=True), "stream_steps"),
        ("too many stop sequences", dict(ok_prompt, stop=["a"] * 20), "stop"),
        ("chat: bad role", {"messages": [{"role": "robot", "content": "x"}]},
         "messages[0].role"),
        ("chat: content type", {"messages": [{"role": "user", "content": 3}]},
         "messages[0].content"),
    ]


def check_errors(R, s):
    big = random_ids(480, 9, 500)  # 480 + 48 > the model's 512 positions
    for name, body, param in error_cases(big):
        path = "/v1/chat/completions" if name.startswith("chat") else "/v1/completions"
        data = body if isinstance(body, bytes) else json.dumps(body)
        st, _, raw = s.request("POST", path, data, {"Content-Type": "application/json"})
        try:
            err = json.loads(raw)["error"]
            ok = (st == 400 and err["param"] == param and err["type"] == "invalid_request_error"
                  and len(err["message"]) > 5)
            if param:
                ok = ok and param.split("[")[0].split(".")[0] in err["message"]
        except (ValueError, KeyError, TypeError):
            ok, err = False, raw[:200]
        R.check("error: " + name, ok, "%d %s" % (st, err))
    st, _, raw = s.request("POST", "/v1/completions", b"x" * 70000,
                           {"Content-Type": "application/json"})
    err = json.loads(raw)["error"] if raw else {}
    R.check("error: huge body -> 413", st == 413 and "larger" in err.get("message", ""), str(err))
    st, _, raw = s.get("/v1/nothing")
    R.check("error: unknown route -> 404", st == 404 and "error" in json.loads(raw))
    st, _, raw = s.get("/health")
    R.check("serving after the errors", st == 200)


BATCH_SETTINGS = [
    {"max_tokens": 32, "block_length": 16, "steps": 32},
    {"cache": "dual", "threshold": 0.9},
    {"cache": "prefix", "max_tokens": 32, "block_length": 8, "steps": 16},
    {"cache": "dual", "kv": "kivi", "kv_bits": 4, "threshold": 0.8},
    {"temperature": 0.7, "seed": 3, "max_tokens": 16, "block_length": 16, "steps": 8},
    {"cache": "dual", "factor": 1.0, "max_tokens": 64, "block_length": 16, "steps": 64},
    {"alg": "random", "seed": 9, "max_tokens": 16, "block_length": 8, "steps": 16},
]


def check_batches(R, s, dllmq, model, vocab, label, settings, ns):
    for n in ns:
        fields = settings[n % len(settings)]
        prompts = [random_ids(2 + 5 * i + n, 1000 * n + i, vocab) for i in range(n)]
        st, body = s.post("/v1/completions", dict(fields, prompt=prompts))
        ok = st == 200 and len(body["choices"]) == n
        detail = ""
        for i in range(n if ok else 0):
            got = body["choices"][i]["dllmq"]
            ref = generate(dllmq, model, ids_arg(prompts[i]), fields)
            same = got["tokens"] == ref["tokens"] and got["nfe"] == ref["nfe"]
            ok = ok and same and got["max_batch"] == n
            if not same:
                detail = "prompt %d differs" % i
        R.check("%s batch of %d = batch 1 (%s)" % (label, n, json.dumps(fields)), ok,
                detail or ("max_batch %d" % n if ok else str(body)[:300]))


def check_concurrent(R, s, dllmq, label, model=None, vocab=500):
    """Requests with different settings sent at once share forwards and stay exact (`model`:
    the server's -m, None for the embedded model)."""
    before = s.metrics()
    jobs = []
    for i, fields in enumerate(BATCH_SETTINGS):
        jobs.append((random_ids(4 + 6 * i, 77 + i, vocab), fields))
    out = [None] * len(jobs)

    def send(i):
        out[i] = s.post("/v1/completions", dict(jobs[i][1], prompt=jobs[i][0]))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    ok = True
    for i, (ids, fields) in enumerate(jobs):
        ref = generate(dllmq, model, ids_arg(ids), fields)
        st, body = out[i]
        ok = ok and st == 200 and body["choices"][0]["dllmq"]["tokens"] == ref["tokens"]
    after = s.metrics()
    multi = sum(v - before.get(k, 0) for k, v in after.items()
                if k.startswith("dllmq_batches_by_size_total") and '"1"' not in k)
    R.check("concurrent mixed requests = batch 1 (%s)" % label, ok and multi > 0,
            "%d forwards with 2+ canvases" % multi)
    # The batching thread's forward time grew, by no more than the wall time of the requests.
    busy = after.get("dllmq_batch_forward_seconds_total", -1) - \
        before.get("dllmq_batch_forward_seconds_total", 0)
    R.check("batch forward seconds counted (%s)" % label, 0 < busy < 600, "%.3f s" % busy)


def raw_post(port, body):
    """Sends a completion request on a plain socket (closed by the caller to disconnect)."""
    c = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body)
    c.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
               "\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)).encode())
    return c


def check_cancel(R, s):
    """A long decode (256 forwards) whose client leaves stops at its next step."""
    long = {"prompt": DEMO, "max_tokens": 256, "block_length": 32, "steps": 256}
    for how in ("stream", "plain"):
        m0 = s.metrics()
        c = raw_post(s.port, dict(long, stream=True, stream_steps=True) if how == "stream" else long)
        if how == "stream":
            c.recv(4096)  # the first events arrived: decoding is under way
        else:
            wait_until(lambda: s.metrics().get("dllmq_jobs_running", 0) >= 1, 30)
        c.close()
        done = wait_until(lambda: s.metrics().get("dllmq_jobs_running", 1) == 0, 120)
        m1 = s.metrics()
        cancelled = m1['dllmq_jobs_total{outcome="cancelled"}'] - \
            m0['dllmq_jobs_total{outcome="cancelled"}']
        forwards = m1["dllmq_batch_canvases_total"] - m0["dllmq_batch_canvases_total"]
        R.check("cancel on disconnect (%s)" % how, done and cancelled == 1 and forwards < 256,
                "%d of 256 forwards ran" % forwards)


def check_queue_full(R, dllmq):
    with Server(dllmq, ["--threads", "1", "--parallel", "1", "--queue", "0"]) as s:
        long = {"prompt": DEMO, "max_tokens": 256, "block_length": 32, "steps": 256,
                "stream": True}
        c = raw_post(s.port, long)
        wait_until(lambda: s.metrics().get("dllmq_jobs_running", 0) == 1, 30)
        st, h, raw = s.request("POST", "/v1/completions", json.dumps({"prompt": "Hi"}))
        err = json.loads(raw).get("error", {}) if raw else {}
        R.check("full queue -> 503 + Retry-After", st == 503 and int(h.get("retry-after", 0)) >= 1
                and err.get("type") == "server_error", "%d %s" % (st, h.get("retry-after")))
        c.close()
        wait_until(lambda: s.metrics().get("dllmq_jobs_running", 1) == 0, 120)
        st, body = s.post("/v1/completions", {"prompt": "Hi"})
        R.check("served again once the slot is free", st == 200)
        # SIGTERM while a request decodes: the server answers it and exits cleanly.
        c = raw_post(s.port, dict(long, stream=False))
        wait_until(lambda: s.metrics().get("dllmq_jobs_running", 0) == 1, 30)
        t0 = time.time()
        code = s.stop(timeout=60)
        reply = c.recv(4096).decode(errors="replace")
        c.close()
        R.check("SIGTERM stops cleanly", code == 0 and "stopped" in "".join(s.stderr_lines),
                "exit %s in %.1f s; in-flight reply %r" % (code, time.time() - t0, reply[:40]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "DLLMQ_MODEL"}
    R = Results()
    # --batch-wait 0: a batch waits for every decoder in flight, so a request's N prompts share
    # every forward and max_batch == N is deterministic (exactness does not depend on it).
    with Server(a.dllmq, ["--threads", "1", "--parallel", "8", "--max-body", "65536",
                          "--batch-wait", "0"], env=env) as s:
        check_endpoints(R, s)
        check_exact(R, s, a.dllmq)
        check_streaming(R, s)
        check_errors(R, s)
        check_batches(R, s, a.dllmq, None, 500, "llada", BATCH_SETTINGS, range(2, 9))
        check_concurrent(R, s, a.dllmq, "--batch-wait 0")
        check_cancel(R, s)
    # The default policy: a batch may start without a decoder that is late (partial batches).
    with Server(a.dllmq, ["--threads", "1", "--parallel", "8"], env=env) as s:
        check_concurrent(R, s, a.dllmq, "default --batch-wait")

    dream = os.path.join(a.workdir, "dream")
    shutil.rmtree(dream, ignore_errors=True)
    mk.make_checkpoint("dream", dream, seed=3, layers=2, d_model=48, heads=6, kv_heads=2,
                       vocab=128)
    dream_settings = [
        {"max_tokens": 16, "steps": 16},                                   # whole canvas
        {"cache": "dual", "threshold": 0.9, "max_tokens": 32, "block_length": 8, "steps": 32},
        {"cache": "prefix", "max_tokens": 16, "block_length": 8, "steps": 8},
        {"threshold": 0.5, "max_tokens": 16, "steps": 8},                 # global threshold
    ]
    with Server(a.dllmq, ["-m", dream, "--threads", "1", "--parallel", "8", "--batch-wait", "0"],
                env=env) as s:
        check_batches(R, s, a.dllmq, dream, 118, "dream", dream_settings, [2, 3, 5, 8])

    check_queue_full(R, a.dllmq)
    print("%d passed, %d failed" % (R.passed, R.failed))
    sys.exit(0 if R.failed == 0 else 1)


if __name__ == "__main__":
    main()
