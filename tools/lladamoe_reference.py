#!/usr/bin/env python3
"""Reference logits of tiny LLaDA-MoE checkpoints from the released modeling code.

    lladamoe_reference.py --ref-dir DIR [--out tests/data/lladamoe/reference.npz] [--check]

Needs a Python with torch and transformers==4.57.0 (the version the public LLaDA-MoE training
code pins) and a directory holding the released modeling code as a package: DIR/refmoe/
{__init__.py, modeling_lladamoe.py, configuration_lladamoe.py} (public copies: the
ZHZisZZ/dllm-trainer repository, dllm/pipelines/llada/models/). The reference code is not part
of dllmq and is never committed.

For every case in CASES: writes the checkpoint with tools/make_tiny_checkpoint.py (numpy,
seeded, released tensor names and config fields), loads it into LLaDAMoEModelLM with
load_state_dict(strict=True) (so the names and shapes are the release's), runs the reference
forward in float32 on CPU (eager attention, no mask: bidirectional) on PROMPTS, and stores the
logits with a SHA-256 of the checkpoint's tensors. It also records torch.topk's answers on tied
rows (TOPK_TIES) for the C++ unit test of the routing.

tests/python/test_lladamoe.py compares dllmq (and tools/ref_forward.py) with the stored logits
on a fresh machine without torch: it rebuilds the checkpoints with make_tiny_checkpoint.py and
refuses if their SHA-256 differs from the one stored. --check regenerates everything and
compares it with the committed file instead of writing it.
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_tiny_checkpoint as mk  # noqa: E402
import safetensors_np as st  # noqa: E402

# name -> make_checkpoint keyword arguments (arch lladamoe).
CASES = {
    # 4 experts top-2, QK norm, 2 MoE layers: the minimal shape.
    "base": dict(seed=31, dtype="bf16", experts=4, top_k=2, expert_mlp=32),
    # a dense first layer, a shared expert, a router expert bias, GQA (2 KV heads), 3 layers.
    "full": dict(seed=32, dtype="bf16", layers=3, kv_heads=2, experts=6, top_k=3, expert_mlp=24,
                 shared_mlp=40, dense_layers=(0,), mlp=96, expert_bias=True),
    # 8 experts top-3 where experts 1, 3, 5, 6 share one router row: their probabilities are equal
    # in every row, and torch.topk's tie rule picks among them.
    "tie": dict(seed=33, dtype="f32", experts=8, top_k=3, expert_mlp=16, router="tie:1,3,5,6"),
    # every router logit 0: all probabilities equal, so every row goes to the same experts (the
    # ones the tie rule picks); the other experts get no rows at all.
    "zero": dict(seed=34, dtype="f32", experts=8, top_k=2, expert_mlp=16, router="zero"),
    # no QK norm, 16 experts top-1 (experts with no rows in short prompts), f16 weights.
    "top1": dict(seed=35, dtype="f16", experts=16, top_k=1, expert_mlp=16, qk_norm=False),
}
PROMPT_LENGTHS = (3, 11, 24)
PROMPT_SEED = 3100
# torch.topk(p, k) on rows with ties (probability-like values), for the routing unit test.
TOPK_TIES = [
    ([0.25, 0.25, 0.25, 0.25], 2),
    ([0.125] * 8, 2),
    ([0.125] * 8, 3),
    ([0.1, 0.2, 0.2, 0.1, 0.2, 0.05, 0.1, 0.05], 3),
    ([0.3, 0.1, 0.3, 0.1, 0.1, 0.1], 2),
    ([1.0 / 64] * 64, 8),
    ([1.0 / 64] * 64, 1),
    ([1.0 / 128] * 128, 2),
]


def prompts(vocab, mask_id):
    rng = np.random.default_rng(PROMPT_SEED)
    out = []
    for T in PROMPT_LENGTHS:
        ids = rng.integers(0, vocab, T)
        ids[rng.choice(T, max(1, T // 3), replace=False)] = mask_id
        out.append([int(i) for i in ids])
    return out


def tensors_sha256(model_dir):
    t = st.load_checkpoint_dir(model_dir, upcast=False)
    h = hashlib.sha256()
    for name in sorted(t):
        a = np.ascontiguousarray(t[name])
        h.update(name.encode())
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def reference_logits(model_dir, ids_list):
    import torch
    from refmoe.configuration_lladamoe import LLaDAMoEConfig
    from refmoe.modeling_lladamoe import LLaDAMoEModelLM

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    kw = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "torch_dtype")}
    config = LLaDAMoEConfig(**kw)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = LLaDAMoEModelLM(config).float().eval()
    sd = {k: torch.from_numpy(np.asarray(v, dtype=np.float32))
          for k, v in st.load_checkpoint_dir(model_dir, upcast=True).items()}
    missing, unexpected = model.load_state_dict(sd, strict=True)
    assert not missing and not unexpected
    out = []
    with torch.no_grad():
        for ids in ids_list:
            lg = model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0]
            out.append(lg.float().numpy())
    return out


def topk_ties():
    import torch
    res = []
    for vals, k in TOPK_TIES:
        v, i = torch.topk(torch.tensor([vals], dtype=torch.float32), k, dim=-1)
        res.append(dict(values=vals, k=k, experts=[int(x) for x in i[0]]))
    return res


def generate(work):
    import torch
    import transformers
    arrays, meta = {}, {"torch": torch.__version__, "transformers": transformers.__version__,
                        "cases": {}, "prompt_lengths": list(PROMPT_LENGTHS)}
    for name, kw in CASES.items():
        d = os.path.join(work, name)
        cfg = mk.make_checkpoint("lladamoe", d, **kw)
        ids_list = prompts(cfg["vocab_size"], cfg["mask_token_id"])
        logits = reference_logits(d, ids_list)
        meta["cases"][name] = dict(make=kw, sha256=tensors_sha256(d), prompts=ids_list)
        for j, lg in enumerate(logits):
            arrays["%s/%d" % (name, j)] = lg.astype(np.float32)
    meta["topk_ties"] = topk_ties()
    return arrays, meta


def save(path, arrays, meta):
    buf = io.BytesIO()
    np.savez_compressed(buf, meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8),
                        **arrays)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, path)


def load(path):
    z = np.load(path)
    meta = json.loads(bytes(z["meta"]).decode())
    return {k: z[k] for k in z.files if k != "meta"}, meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref-dir", required=True, help="directory holding the refmoe/ package")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "lladamoe", "reference.npz"))
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(a.ref_dir))
    with tempfile.TemporaryDirectory(prefix="lladamoe_ref_") as work:
        arrays, meta = generate(work)
    if not a.check:
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
        save(a.out, arrays, meta)
        print("wrote %s (%d logit arrays)" % (a.out, len(arrays)))
        return 0
    old_arrays, old_meta = load(a.out)
    bad = []
    for name, c in meta["cases"].items():
        if old_meta["cases"].get(name, {}).get("sha256") != c["sha256"]:
            bad.append("%s: checkpoint sha256 differs" % name)
    for k, v in arrays.items():
        if k not in old_arrays or old_arrays[k].shape != v.shape:
            bad.append("%s: missing or other shape" % k)
            continue
        err = float(np.max(np.abs(old_arrays[k] - v)))
        if err > 1e-5 * max(1.0, float(np.max(np.abs(v)))):
            bad.append("%s: max|diff| %.3g" % (k, err))
    if old_meta["topk_ties"] != meta["topk_ties"]:
        bad.append("torch.topk tie answers differ")
    for b in bad:
        print("MISMATCH " + b)
    print("%d passed, %d failed" % (0 if bad else 1, 1 if bad else 0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
