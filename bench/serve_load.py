#!/usr/bin/python3
"""Bounded load test of dllmq serve on 127.0.0.1: batched decoding vs one request at a time.

    /usr/bin/python3 bench/serve_load.py [--dllmq build/dllmq] [-m MODEL] [--clients 16]
        [--requests 64] [--rounds 2] [--passes 3] [--parallel 16] [--threads 0] [--out OUT.json]
        [FIELDS ...]

FIELDS: request decoding fields as JSON, one object per setting to measure, e.g.
'{"cache": "dual", "threshold": 0.9}'. Without any, three settings: the server's defaults ({}),
'{"cache": "dual"}' and '{"cache": "dual", "threshold": 0.9}' (batching gains most where a
request's forwards are 16-row dual-cache steps, least where they are whole canvases).

Each round starts one server per configuration, in alternation (batched, one at a time, ...), so
machine noise hits both alike, and sends the requests --passes times (warm-up passes, then the
measured one): `--parallel P` (requests in flight decode together, one forward
over all their canvases) and `--parallel 1` (one request at a time; the others wait in the
queue). Against each, `--clients` threads send `--requests` chat requests in total (the
embedded model's synthetic test problems, the same list for both), non-streamed, each with a
timeout. Reported per configuration (best round by throughput): errors, p50/p99 latency,
requests/s, generated tokens/s (canvas positions decoded, the generation length) and answer
tokens/s, tokens per second of server CPU time (what a busy machine does not distort), the
server's mean batch size, and its RSS after every pass and over the measured one (level when
memory does not grow with the number of requests served).
The ratio batched / one-at-a-time is printed side by side, with the load average before and
after (a busy machine shows); with several settings, an overview table of the ratios last.
Exit status 1 when any request failed.
"""
import argparse
import json
import os
import random
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The request settings measured by default: the server's own defaults (no cache, one token per
# step: every forward a whole canvas), Fast-dLLM's dual cache (16-row step forwards), and dual
# cache with the confidence threshold (a block done one or two steps after its refresh).
DEFAULT_SETTINGS = [{}, {"cache": "dual"}, {"cache": "dual", "threshold": 0.9}]
sys.path.insert(0, os.path.join(ROOT, "tools"))
from serve_client import Server  # noqa: E402


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(q / 100.0 * (len(xs) - 1)))))
    return xs[k]


def post(server, body):
    path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
    return server.post(path, body, timeout=1800)


def run_load(server, bodies, clients):
    """Sends every body once from `clients` threads; returns per-request records and RSS samples."""
    lock = threading.Lock()
    nxt = [0]
    records = []
    rss = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            rss.append((time.time(), server.rss_bytes()))
            stop.wait(0.05)

    def client():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(bodies):
                return
            t0 = time.time()
            try:
                status, body = post(server, bodies[i])
            except Exception as e:  # noqa: BLE001 - counted as an error, reported
                status, body = -1, {"error": str(e)}
            rec = {"i": i, "status": status, "latency": time.time() - t0, "t_end": time.time()}
            if status == 200:
                c = body["choices"][0]
                rec["gen_tokens"] = len(c["dllmq"]["tokens"])
                rec["answer_tokens"] = body["usage"]["completion_tokens"]
                rec["max_batch"] = c["dllmq"]["max_batch"]
            else:  # what went wrong, for the report
                rec["error"] = "%s: %s" % (status, json.dumps(body)[:300])
            with lock:
                records.append(rec)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.time()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(1800)
    wall = time.time() - t0
    stop.set()
    sampler.join(5)
    return records, rss, t0, wall


def summarize(name, records, rss, t0, wall, metrics, rss_warm):
    ok = [r for r in records if r["status"] == 200]
    lat = [r["latency"] for r in ok]
    half = t0 + wall / 2
    first = [b for t, b in rss if t <= half]
    second = [b for t, b in rss if t > half]
    batches = metrics.get("dllmq_batches_total", 0)
    canvases = metrics.get("dllmq_batch_canvases_total", 0)
    return {
        "config": name,
        "requests": len(records),
        "errors": len(records) - len(ok),
        "error_kinds": sorted({r["error"] for r in records if "error" in r})[:5],
        "wall_s": wall,
        "p50_s": percentile(lat, 50),
        "p99_s": percentile(lat, 99),
        "requests_per_s": len(ok) / wall,
        "gen_tokens_per_s": sum(r["gen_tokens"] for r in ok) / wall,
        "answer_tokens_per_s": sum(r["answer_tokens"] for r in ok) / wall,
        "mean_batch": canvases / batches if batches else 0.0,
        "max_batch": max((r["max_batch"] for r in ok), default=0),
        "rss_warm_mib": rss_warm / 2**20,
        "rss_first_half_max_mib": max(first, default=0) / 2**20,
        "rss_second_half_max_mib": max(second, default=0) / 2**20,
        "rss_end_mib": (rss[-1][1] if rss else 0) / 2**20,
    }


def run_setting(a, fields):
    """Both servers on one request setting, --rounds alternated rounds; prints the side-by-side
    table and returns its summary."""
    if a.ids:
        rng = random.Random(1)
        bodies = [dict(fields, prompt=[rng.randrange(100) for _ in range(a.ids + i % 5)])
                  for i in range(a.requests)]
    else:
        with open(a.data) as f:
            questions = [json.loads(line)["question"] for line in f][:a.requests]
        bodies = [dict(fields, messages=[{"role": "user", "content": q}]) for q in questions]
    env = dict(os.environ)
    for kv in a.server_env:
        k, _, v = kv.partition("=")
        env[k] = v
    configs = [("batched", a.parallel), ("one-at-a-time", a.one_parallel)]
    base = ["--threads", str(a.threads), "--queue", str(max(64, a.requests))]
    if a.model:
        base += ["-m", a.model]

    load_before = os.getloadavg()
    results = {name: [] for name, _ in configs}
    for rnd in range(a.rounds):
        for name, parallel in configs:
            extra = ["--batch-wait", str(a.batch_wait)] if a.batch_wait is not None and \
                parallel > 1 else []
            with Server(a.dllmq, base + ["--parallel", str(parallel)] + extra, env=env) as s:
                # The first passes warm the server up (kernels, buffers, threads); the last one
                # is measured, and its RSS against the previous pass's end shows whether memory
                # keeps growing.
                rss_passes = []
                for _ in range(a.passes - 1):
                    run_load(s, bodies, a.clients)
                    rss_passes.append(s.rss_bytes() / 2**20)
                rss_warm = s.rss_bytes()
                m0, cpu0 = s.metrics(), s.cpu_seconds()
                records, rss, t0, wall = run_load(s, bodies, a.clients)
                m1 = {k: v - m0.get(k, 0) for k, v in s.metrics().items()}
                row = summarize(name, records, rss, t0, wall, m1, rss_warm)
                row["server_cpu_s"] = s.cpu_seconds() - cpu0
                row["gen_tokens_per_cpu_s"] = (row["gen_tokens_per_s"] * wall / row["server_cpu_s"]
                                               if row["server_cpu_s"] else 0.0)
                row["rss_after_passes_mib"] = rss_passes + [row["rss_end_mib"]]
                row["round"] = rnd
                row["load_avg_1m"] = os.getloadavg()[0]
                results[name].append(row)
                print("round %d %-14s %6.1f gen tok/s (%6.1f per server CPU s)  p50 %.3f s  "
                      "p99 %.3f s  errors %d  mean batch %.2f  RSS after each pass %s MiB  "
                      "(load %.2f)"
                      % (rnd, name, row["gen_tokens_per_s"], row["gen_tokens_per_cpu_s"],
                         row["p50_s"], row["p99_s"], row["errors"], row["mean_batch"],
                         " ".join("%.1f" % r for r in row["rss_after_passes_mib"]),
                         row["load_avg_1m"]), flush=True)
                for e in row["error_kinds"]:
                    print("    error: %s" % e, flush=True)
    load_after = os.getloadavg()

    best = {n: max(rows, key=lambda r: r["gen_tokens_per_s"]) for n, rows in results.items()}
    b, o = best["batched"], best["one-at-a-time"]
    print()
    print("| | batched (--parallel %d) | one at a time (--parallel 1) | ratio |" % a.parallel)
    print("|---|---|---|---|")
    for key, label, fmt in [("errors", "errors", "%d"), ("p50_s", "p50 latency (s)", "%.3f"),
                            ("p99_s", "p99 latency (s)", "%.3f"),
                            ("requests_per_s", "requests/s", "%.2f"),
                            ("gen_tokens_per_s", "generated tokens/s", "%.1f"),
                            ("gen_tokens_per_cpu_s", "generated tokens per server CPU s", "%.1f"),
                            ("answer_tokens_per_s", "answer tokens/s", "%.1f"),
                            ("mean_batch", "mean canvases per forward", "%.2f"),
                            ("rss_warm_mib", "RSS after the warm-up passes (MiB)", "%.1f"),
                            ("rss_first_half_max_mib", "RSS max, 1st half of the last pass (MiB)",
                             "%.1f"),
                            ("rss_second_half_max_mib", "RSS max, 2nd half of the last pass (MiB)",
                             "%.1f"),
                            ("rss_end_mib", "RSS at the end (MiB)", "%.1f")]:
        ratio = ("%.2fx" % (b[key] / o[key])) if o[key] else ""  # no ratio of a zero (errors)
        print("| %s | %s | %s | %s |" % (label, fmt % b[key], fmt % o[key], ratio))
    print()
    print("%d clients, %d requests per run, best of %d rounds; fields %s; load average "
          "%.2f before, %.2f after; %d CPUs" % (a.clients, a.requests, a.rounds, json.dumps(fields),
                                                load_before[0], load_after[0], os.cpu_count()))
    ratio = b["gen_tokens_per_s"] / o["gen_tokens_per_s"]
    errors = sum(r["errors"] for rows in results.values() for r in rows)
    growth = max(r["rss_end_mib"] - r["rss_warm_mib"] for rows in results.values() for r in rows)
    print("throughput ratio %.2fx, per server CPU second %.2fx; errors %d; largest RSS growth "
          "over a measured pass %.1f MiB" % (ratio, b["gen_tokens_per_cpu_s"] /
                                             o["gen_tokens_per_cpu_s"], errors, growth))
    return {"fields": fields, "rounds": results, "best": best, "ratio": ratio,
            "ratio_cpu": b["gen_tokens_per_cpu_s"] / o["gen_tokens_per_cpu_s"], "errors": errors,
            "rss_growth_mib": growth, "load_avg": [load_before[0], load_after[0]]}



def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("-m", "--model", default="")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--passes", type=int, default=3,
                    help="times the requests are sent to each server (the last one is measured)")
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--one-parallel", type=int, default=1,
                    help="--parallel of the comparison server (1: one request at a time)")
    ap.add_argument("--threads", type=int, default=0, help="server OpenMP threads (0: all)")
    ap.add_argument("--batch-wait", type=float, default=None,
                    help="the batched server's --batch-wait (default: the server's own)")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "synth", "test.jsonl"))
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment of the servers (e.g. GOMP_SPINCOUNT=10000); repeatable")
    ap.add_argument("--ids", type=int, default=0, metavar="N",
                    help="send random N-token id prompts to /v1/completions instead of the "
                         "synthetic problems as chat (models without a tokenizer)")
    ap.add_argument("--out")
    ap.add_argument("fields", nargs="*",
                    help="request decoding fields, a JSON object per setting to measure "
                         "(default: the three of DEFAULT_SETTINGS)")
    a = ap.parse_args()
    settings = [json.loads(f) for f in a.fields] or DEFAULT_SETTINGS
    summaries = []
    for fields in settings:
        print("== fields %s" % json.dumps(fields), flush=True)
        summaries.append(run_setting(a, fields))
        print(flush=True)
    if len(summaries) > 1:
        print("| fields | batched gen tok/s | one at a time | ratio (wall) | ratio (server CPU s) "
              "| errors |")
        print("|---|---|---|---|---|---|")
        for r in summaries:
            print("| `%s` | %.1f | %.1f | %.2fx | %.2fx | %d |" % (
                json.dumps(r["fields"]), r["best"]["batched"]["gen_tokens_per_s"],
                r["best"]["one-at-a-time"]["gen_tokens_per_s"], r["ratio"], r["ratio_cpu"],
                r["errors"]))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"settings": summaries, "clients": a.clients, "requests": a.requests}, f,
                      indent=1)
    return 1 if any(r["errors"] for r in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
