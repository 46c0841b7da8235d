#!/usr/bin/python3
"""LLaDA-MoE against the released modeling code, on tiny random checkpoints.

    test_lladamoe.py [--dllmq build/dllmq] [--workdir DIR] [--ref-python PY --ref-dir DIR]

1. Reference logits: tests/data/lladamoe/reference.npz holds the logits of the released
   LLaDAMoEModelLM (transformers 4.57.0, torch CPU, float32) on five tiny checkpoints (4 experts
   top-2; a dense layer + shared expert + router bias + GQA; tied router rows; an all-zero
   router; top-1 of 16 without QK norm) for prompts of 3, 11 and 24 tokens, written by
   tools/lladamoe_reference.py. The checkpoints are rebuilt here with make_tiny_checkpoint.py
   and must hash to the stored SHA-256 (else the fixture is stale). Then
       dllmq logits  within 1e-4 x max|logit| of the reference (every case, ties included)
       tools/ref_forward.py (float64 numpy, written from the code) within 1e-4 x max|logit|
       (cases without ties: its tie rule is "lower index first", not torch's)
   With --ref-python/--ref-dir (a Python with torch + transformers and the reference code) the
   fixture is regenerated and compared first.
2. Routing edge cases on those checkpoints: the zero router sends every row to the same experts
   (the others get no rows), the top-1 case leaves experts without rows, the tie case has rows
   whose top-k cut falls inside a tie (checked with the numpy router).
3. Refusals (dllmq inspect): a missing expert tensor, a wrong expert count, top-k > experts, a
   LLaDA config with MoE fields but no MoE class, LLaDA2 MoE / SDAR / unknown classes: exit
   code 1 (not a crash) and a message naming the tensor or field; `--chat` on a LLaDA-MoE model
   (its template is not implemented) is refused, plain text works.
4. Calibration (KVQuant ar / trace with and without Fisher weights, dLLM-KVQ with Fisher channel
   scores) and every KV store (fp16, bf16, KIVI, KVQuant, dLLM-KVQ) under prefix and dual
   caching run and fill the canvas. (The MoE backward itself is checked against float64 finite
   differences in test_fisher.py.)
5. Decoding token-exact against tools/ref_decode.py on a MoE checkpoint: cache none / prefix /
   dual x quota / threshold / factor, one block and four blocks (test_decode.py's machinery).
6. The rest of the CLI on a MoE checkpoint (with the embedded model's tokenizer): `dllmq eval`
   on three synth problems gives, per problem, the response, NFE and token counts of
   `dllmq generate` on its prompt; a two-cell `dllmq grid` (prefix / dual cache) runs both cells,
   the prefix cell equal to that eval run and the dual cell to `generate`; `dllmq serve` with
   batching: a request's N prompts and concurrent requests with mixed settings (forwards of
   2+ canvases, routed experts) each equal their batch-1 `generate` run (test_server.py's
   checks).
Exit 0 iff all passed; last line "N passed, N failed".
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import lladamoe_reference as lr  # noqa: E402
import make_tiny_checkpoint as mk  # noqa: E402
import ref_forward as rf  # noqa: E402
import safetensors_np as st  # noqa: E402
import test_decode as td  # noqa: E402
from results import Results, run_all  # noqa: E402

FIXTURE = os.path.join(ROOT, "tests", "data", "lladamoe", "reference.npz")
REL_TOL = 1e-4
TIED_CASES = ("tie", "zero")  # torch's tie rule, not the numpy reference's
DECODE_CKPT = dict(seed=36, dtype="bf16", w_std=0.2, lm_head_std=0.8, emb_std=0.3, zero_mask_logit=True,
                   experts=4, top_k=2, expert_mlp=48, router_std=1.0, shared_mlp=32, dense_layers=(1,),
                   layers=3)


def run(cmd, timeout=300):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


def binary_logits(dllmq, d, ids):
    p = run([dllmq, "logits", "-m", d, "--ids", ",".join(map(str, ids)), "--json"])
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode(errors="replace")[-400:])
    out = p.stdout.decode()
    return np.array(json.loads(out[out.find("{"):])["logits"], dtype=np.float64)


def routes(model, layer, ids):
    """Top-k expert sets per row of one MoE layer, from the numpy reference's hidden states."""
    L = model.layers[layer]
    captured = {}
    orig = model._moe

    def spy(m, h):
        if m is L.moe:
            captured["h"] = h
        return orig(m, h)
    model._moe = spy
    try:
        model.forward(ids)
    finally:
        model._moe = orig
    h = captured["h"]
    lg = h @ L.moe["router"].T
    p = np.exp(lg - lg.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p


def reference_checks(res, work, dllmq, arrays, meta):
    for name, c in meta["cases"].items():
        d = os.path.join(work, "ref_" + name)
        kw = dict(c["make"])
        if "dense_layers" in kw:
            kw["dense_layers"] = tuple(kw["dense_layers"])
        mk.make_checkpoint("lladamoe", d, **kw)
        sha = lr.tensors_sha256(d)
        if sha != c["sha256"]:
            res.check("fixture/%s/sha256" % name, False,
                      "rebuilt checkpoint differs from the fixture's: rerun tools/lladamoe_reference.py")
            continue
        model = rf.RefModel(d)
        for j, ids in enumerate(c["prompts"]):
            ref = arrays["%s/%d" % (name, j)].astype(np.float64)
            scale = float(np.max(np.abs(ref)))
            tag = "%s/T=%d" % (name, len(ids))
            try:
                got = binary_logits(dllmq, d, ids)
                err = float(np.max(np.abs(got - ref)))
                res.check("dllmq-vs-torch/" + tag, got.shape == ref.shape and err <= REL_TOL * scale,
                          "max|diff| %.3g, max|ref| %.3g, rel %.2g" % (err, scale, err / scale))
            except Exception as ex:  # noqa: BLE001
                res.check("dllmq-vs-torch/" + tag, False, "error: %s" % ex)
            if name not in TIED_CASES:
                model.min_route_gap = float("inf")
                mine = model.forward(ids)
                err = float(np.max(np.abs(mine - ref)))
                res.check("numpy-ref-vs-torch/" + tag, err <= REL_TOL * scale,
                          "max|diff| %.3g rel %.2g, smallest routing gap %.3g"
                          % (err, err / scale, model.min_route_gap))
        # routing edge cases, read from the numpy router on the same hidden states
        ids = c["prompts"][-1]
        k = kw.get("top_k", 2)
        if name == "zero":
            p = routes(model, 0, ids)
            res.check("routing/zero-router-all-rows-tie", bool(np.all(p == p[0, 0])),
                      "every row: %d experts with p = %.4f; torch sends all rows to the same %d"
                      % (p.shape[1], p[0, 0], k))
        if name == "tie":
            p = routes(model, 0, ids)
            srt = -np.sort(-p, axis=-1)
            cut_in_tie = int(np.sum(srt[:, k - 1] == srt[:, k]))
            res.check("routing/tie-at-top-k-cut", cut_in_tie > 0,
                      "%d of %d rows have equal k-th and (k+1)-th probabilities" % (cut_in_tie, len(ids)))
        if name == "top1":
            short = c["prompts"][0]
            p = routes(model, 0, short)
            used = set(np.argmax(p, axis=-1).tolist())
            res.check("routing/experts-without-rows", len(used) < p.shape[1],
                      "%d-token prompt uses experts %s of %d" % (len(short), sorted(used), p.shape[1]))


def rewrite(src, dst, cfg_edit=None, drop=()):
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    t = st.load_checkpoint_dir(src, upcast=False)
    for name in drop:
        del t[name]
    st.write_sharded(dst, t, n_shards=1, dtype=None, metadata={"format": "pt"})
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if cfg_edit:
        cfg_edit(cfg)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)


def refusal_checks(res, work, dllmq):
    base = os.path.join(work, "refuse_base")
    mk.make_checkpoint("lladamoe", base, seed=1, dtype="f32")

    def set_(**kv):
        return lambda c: c.update(kv)

    def drop_(*keys):
        return lambda c: [c.pop(k) for k in keys]
    cases = [
        ("missing-expert-tensor", dict(drop=["model.layers.1.mlp.experts.3.up_proj.weight"]),
         "missing tensor 'model.layers.1.mlp.experts.3.up_proj.weight'"),
        ("fewer-experts-in-config", dict(cfg_edit=set_(num_experts=3)),
         "holds 4 experts (indices 0..3) but config.json num_experts is 3"),
        ("more-experts-in-config", dict(cfg_edit=set_(num_experts=6)),
         "holds 4 experts (indices 0..3) but config.json num_experts is 6"),
        ("top-k-above-experts", dict(cfg_edit=set_(num_experts_per_tok=5)),
         "num_experts_per_tok 5 exceeds num_experts 4"),
        ("llada-class-with-moe-fields", dict(cfg_edit=set_(architectures=["LLaDAModelLM"])),
         "mixture-of-experts fields (num_experts"),
        ("no-class-with-moe-fields", dict(cfg_edit=drop_("architectures")),
         "mixture-of-experts fields (num_experts"),
        ("llada2-moe", dict(cfg_edit=set_(architectures=["LLaDA2MoeModelLM"], model_type="llada2_moe")),
         "architectures ['LLaDAMoEModelLM']"),
        ("sdar", dict(cfg_edit=set_(architectures=["SDARForCausalLM"], model_type="sdar")),
         "architectures ['LLaDAMoEModelLM']"),
        ("moe-layer-freq-length", dict(cfg_edit=set_(moe_layer_freq=[1])),
         "'moe_layer_freq' has 1 entries"),
        ("router-bias-missing", dict(cfg_edit=set_(moe_router_enable_expert_bias=True)),
         "missing tensor 'model.layers.0.mlp.expert_bias'"),
        ("shared-expert-missing", dict(cfg_edit=set_(shared_expert_intermediate_size=16)),
         "missing tensor 'model.layers.0.shared_expert.gate_proj.weight'"),
    ]
    for name, kw, want in cases:
        d = os.path.join(work, "refuse_" + name)
        rewrite(base, d, **kw)
        p = run([dllmq, "inspect", "-m", d])
        err = p.stderr.decode(errors="replace")
        res.check("refuse/" + name, p.returncode == 1 and want in err,
                  "rc %d, stderr: %s" % (p.returncode, err.strip()[-300:]))
    # --chat: LLaDA-MoE's template is not implemented (its files were not available): refused,
    # never rendered as LLaDA's; plain text still works.
    d = os.path.join(work, "refuse_chat")
    mk.make_checkpoint("lladamoe", d, seed=3, dtype="f32", vocab=810, mask_id=802, eos_id=801)
    shutil.copy(os.path.join(ROOT, "tests", "data", "tokenizer", "digits_seq.tokenizer.json"),
                os.path.join(d, "tokenizer.json"))
    gen = [dllmq, "generate", "-m", d, "-p", "1 2 3", "--gen-length", "8", "--block-length", "8", "--steps", "8"]
    p = run(gen + ["--chat"])
    err = p.stderr.decode(errors="replace")
    res.check("refuse/chat-template", p.returncode == 1 and "LLaDA-MoE chat template is not implemented" in err,
              "rc %d, stderr: %s" % (p.returncode, err.strip()[-200:]))
    p = run(gen)
    res.check("plain-text-prompt", p.returncode == 0, p.stderr.decode(errors="replace")[-200:])
    p = run([dllmq, "inspect", "-m", base, "--json"])
    ok = p.returncode == 0
    det = p.stderr.decode(errors="replace")[-300:]
    if ok:
        j = json.loads(p.stdout.decode())
        expert = 3 * 32 * 64
        ok = (j["architecture"] == "llada-moe" and j["moe"]["n_experts"] == 4 and j["moe"]["top_k"] == 2
              and j["n_params"] - j["n_active_params"] == 2 * 2 * expert)
        det = "params %d, active %d" % (j["n_params"], j["n_active_params"])
    res.check("inspect/total-and-active-params", ok, det)


def store_checks(res, work, dllmq):
    """Calibration (gradient-based too) and every KV store on a MoE model: runs, fills the
    canvas."""
    d = os.path.join(work, "stores")
    mk.make_checkpoint("lladamoe", d, **DECODE_CKPT)
    pj = os.path.join(work, "pairs.jsonl")
    rng = np.random.default_rng(5)
    with open(pj, "w") as f:
        for _ in range(4):
            ids = [int(t) for t in rng.permutation(110)[:14]]
            f.write(json.dumps(dict(prompt_ids=ids[:5], answer_ids=ids[5:])) + "\n")
    arts = {}
    for name, args in (("kvquant-ar", ["--method", "kvquant", "--trajectory", "ar", "--fisher", "none"]),
                       ("kvquant-trace", ["--method", "kvquant", "--trajectory", "trace", "--fisher", "none"]),
                       ("kvquant-trace-fisher", ["--method", "kvquant", "--trajectory", "trace",
                                                 "--fisher", "diffusion"]),
                       ("dllm-kvq", ["--method", "dllm-kvq", "--trajectory", "trace", "--cache", "dual",
                                     "--score-weight", "fisher"])):
        art = os.path.join(work, name + ".safetensors")
        p = run([dllmq, "calibrate", "-m", d, "--data", pj, "--kv-bits", "2", "--out", art, "--gen-length", "32",
                 "--block-length", "8"] + args, timeout=900)
        res.check("calibrate/" + name, p.returncode == 0 and os.path.isfile(art), p.stderr.decode()[-300:])
        arts[name] = art
    mask_id = DECODE_CKPT.get("mask_id", 120)
    for kv, extra in (("fp16", []), ("bf16", []), ("kivi", ["--kv-bits", "2"]),
                      ("kvquant", ["--calib", arts["kvquant-ar"]]), ("kvquant", ["--calib", arts["kvquant-trace"]]),
                      ("kvquant", ["--calib", arts["kvquant-trace-fisher"]]),
                      ("dllm-kvq", ["--calib", arts["dllm-kvq"]])):
        for cache in ("prefix", "dual"):
            p = run([dllmq, "generate", "-m", d, "--prompt-ids", "5,17,33,2,90", "--gen-length", "32",
                     "--block-length", "8", "--steps", "32", "--cache", cache, "--kv", kv, "--json"] + extra)
            ok = p.returncode == 0
            det = p.stderr.decode()[-300:]
            if ok:
                out = p.stdout.decode()
                toks = json.loads(out[out.find("{"):])["tokens"]
                ok = len(toks) == 32 and mask_id not in toks
                det = "tokens %s" % toks[:8]
            tag = os.path.basename(extra[-1]).replace(".safetensors", "") if extra and extra[0] == "--calib" else kv
            res.check("store/%s/%s" % (tag, cache), ok, det)


EVAL_FLAGS = ["--gen-length", "16", "--block-length", "8", "--steps", "8", "--threads", "1"]


def synth_moe(work):
    """A MoE checkpoint with the embedded model's tokenizer (vocab 512), for text tasks."""
    tok_dir = os.path.join(ROOT, "models", "dllmq-synth-tiny")
    tok = json.load(open(os.path.join(tok_dir, "tokenizer.json")))
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    vocab = max(max(tok["model"]["vocab"].values()), max(added.values())) + 1
    d = os.path.join(work, "synth_moe")
    mk.make_checkpoint("lladamoe", d, **dict(DECODE_CKPT, vocab=vocab, mask_id=added["<|mdm_mask|>"],
                                            eos_id=added["<|endoftext|>"]))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), d)
    return d


def eval_samples(run_dir):
    return [json.loads(line) for line in open(os.path.join(run_dir, "samples.jsonl"))]


def same_as_generate(dllmq, d, samples, cache):
    """Per sample: None if `dllmq generate` on its prompt gives the same answer, else why not."""
    for smp in samples:
        p = run([dllmq, "generate", "-m", d, "-p", smp["prompt"], "--chat", "--cache", cache, "--json"] + EVAL_FLAGS)
        if p.returncode != 0:
            return p.stderr.decode(errors="replace")[-200:]
        g = json.loads(p.stdout.decode())
        got = (smp["response"], smp["nfe"], smp["prompt_tokens"], smp["gen_tokens"], smp["kv_bytes"])
        want = (g["text"], g["nfe"], g["prompt_tokens"], len(g["tokens"]), g["kv_bytes"])
        if got != want:
            return "doc %s: eval %r, generate %r" % (smp["doc"], got, want)
    return None


def eval_grid_checks(res, work, dllmq):
    d = synth_moe(work)
    data = os.path.join(ROOT, "data", "synth", "test.jsonl")
    run_dir = os.path.join(work, "eval_prefix")
    # A kept --workdir starts afresh: eval refuses a run directory with samples, and the grid
    # would resume (not rerun) the cells of an earlier run.
    for old in (run_dir, os.path.join(work, "grid")):
        shutil.rmtree(old, ignore_errors=True)
    p = run([dllmq, "eval", "--task", "synth", "--data", data, "-m", d, "--out", run_dir, "--limit", "3",
             "--chat", "--cache", "prefix", "--json"] + EVAL_FLAGS)
    ok = p.returncode == 0 and len(eval_samples(run_dir)) == 3
    res.check("eval/synth-3-problems", ok, p.stderr.decode(errors="replace")[-300:])
    if ok:
        why = same_as_generate(dllmq, d, eval_samples(run_dir), "prefix")
        res.check("eval/equals-generate", why is None, why or "3 responses, NFE, token counts, KV bytes")
    cfg = {"out": os.path.join(work, "grid"), "model": d,
           "tasks": [{"task": "synth", "data": data, "limit": 3, "chat": True}],
           "fixed": {"gen-length": 16, "block-length": 8, "steps": 8},
           "grid": {"cache": ["prefix", "dual"]}, "args": ["--threads", "1"]}
    path = os.path.join(work, "grid.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    p = run([dllmq, "grid", "--config", path], timeout=600)
    cells = {}
    for cache in ("prefix", "dual"):
        cell = os.path.join(cfg["out"], "synth", "cache=" + cache)
        if os.path.isfile(os.path.join(cell, "samples.jsonl")):
            cells[cache] = eval_samples(cell)
    res.check("grid/two-cells-ran", p.returncode == 0 and all(len(v) == 3 for v in cells.values()) and
              len(cells) == 2, "cells %s; %s" % (sorted(cells), p.stderr.decode(errors="replace")[-300:]))
    if len(cells) == 2 and os.path.isdir(run_dir):
        key = lambda r: (r["doc"], r["response"], r["nfe"], r["gen_tokens"])  # noqa: E731
        res.check("grid/prefix-cell-equals-eval",
                  sorted(map(key, cells["prefix"])) == sorted(map(key, eval_samples(run_dir))), "")
        why = same_as_generate(dllmq, d, cells["dual"], "dual")
        res.check("grid/dual-cell-equals-generate", why is None, why or "3 responses")


def serve_checks(res, work, dllmq):
    import test_server as ts
    from serve_client import Server
    d = os.path.join(work, "serve")
    mk.make_checkpoint("lladamoe", d, **DECODE_CKPT)
    env = {k: v for k, v in os.environ.items() if k != "DLLMQ_MODEL"}
    vocab = 118  # below the mask (120) and eos (121) ids
    # --batch-wait 0: a request's N prompts share every forward (max_batch N), as in test_server.py
    with Server(dllmq, ["-m", d, "--threads", "1", "--parallel", "8", "--batch-wait", "0"], env=env) as s:
        ts.check_batches(res, s, dllmq, d, vocab, "lladamoe", ts.BATCH_SETTINGS, [2, 3, 5, 8])
        ts.check_concurrent(res, s, dllmq, "lladamoe", model=d, vocab=vocab)


def decode_checks(res, work, dllmq, verbose):
    d = os.path.join(work, "decode")
    mk.make_checkpoint("lladamoe", d, **DECODE_CKPT)
    m = rf.RefModel(d)
    cases = [c for c in td.build_cases("llada")]
    for c in cases:
        c["name"] = c["name"].replace("llada/", "lladamoe/", 1)
        m.min_route_gap = float("inf")
        td.compare_case(res, d, m, c, dllmq, verbose)
        # a near tie in the float64 routing could route a row differently in float32
        if m.min_route_gap < 1e-4:
            print("note: %s reference run had a routing log-gap of %.3g" % (c["name"], m.min_route_gap))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    ap.add_argument("--ref-python", help="a Python with torch and transformers==4.57.0")
    ap.add_argument("--ref-dir", help="directory holding the refmoe/ package (the released code)")
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_moe_")
    os.makedirs(work, exist_ok=True)
    res = Results()

    def regenerate():
        p = run([a.ref_python, os.path.join(ROOT, "tools", "lladamoe_reference.py"), "--ref-dir", a.ref_dir,
                 "--check", "--out", FIXTURE], timeout=1200)
        res.check("fixture/regenerated-equal", p.returncode == 0, p.stdout.decode()[-500:])

    def against_reference():
        arrays, meta = lr.load(FIXTURE)
        reference_checks(res, work, a.dllmq, arrays, meta)

    checks = [regenerate] if a.ref_python and a.ref_dir else []
    checks += [against_reference, lambda: refusal_checks(res, work, a.dllmq),
               lambda: store_checks(res, work, a.dllmq), lambda: eval_grid_checks(res, work, a.dllmq),
               lambda: serve_checks(res, work, a.dllmq)]
    if not a.skip_decode:
        checks.append(lambda: decode_checks(res, work, a.dllmq, a.verbose))
    try:
        return run_all(res, checks)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
