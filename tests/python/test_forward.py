#!/usr/bin/python3
"""Forward-pass test: dllmq logits vs the float64 numpy reference (tools/ref_forward.py).

    test_forward.py [--dllmq build/dllmq] [--workdir DIR] [--self-only] [--keep]

1. Self checks of the reference (no binary needed): bf16 rounding, safetensors round trip
   (single, sharded, bf16/f16/f32), a scalar pure-Python forward on a tiny model compared
   with the vectorized reference, RoPE relative-position invariance, joint permutation
   equivariance, T=1 attention, tied head, KV-cache paths (prefix and dual) equal to the
   full forward when the cache is fresh.
2. Binary checks: for several tiny checkpoints (LLaDA, Dream, sharded LLaDA, f16, f32,
   tied, head_dim 32) and sequence lengths 1, 7, 64, 300 with random ids including mask
   tokens, run `dllmq logits -m DIR --ids a,b,c --json` and require
   max|C++ - ref| <= 1e-4 * max|ref|.
Exit code 0 iff everything passed; the last line is "N passed, N failed".
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import safetensors_np as st  # noqa: E402
import make_tiny_checkpoint as mk  # noqa: E402
import ref_forward as rf  # noqa: E402
from results import Results  # noqa: E402  (tests/python/results.py)

REL_TOL = 1e-4

# name -> make_checkpoint kwargs
CHECKPOINTS = {
    "llada-bf16": dict(arch="llada", seed=1),
    "dream-bf16": dict(arch="dream", seed=2),
    "llada-sharded": dict(arch="llada", seed=3, shards=3),
    "llada-f16": dict(arch="llada", seed=4, dtype="f16"),
    "dream-f32": dict(arch="dream", seed=5, dtype="f32"),
    "dream-f16-sharded": dict(arch="dream", seed=6, dtype="f16", shards=2),
    "llada-tied": dict(arch="llada", seed=7, tied=True),
    "dream-tied": dict(arch="dream", seed=8, tied=True),
    "llada-hd32": dict(arch="llada", seed=9, heads=2, head_dim=32, layers=3),
    "dream-mqa-hd32": dict(arch="dream", seed=10, heads=4, kv_heads=1, head_dim=32),
}
LENGTHS = [1, 7, 64, 300]


# ---------------------------------------------------------------- scalar reference
def scalar_forward(m, ids, positions):
    """Pure-Python loops (math module only) over a RefModel's weights: an independent
    second implementation used on a very small model."""
    T = len(ids)
    D, H, KV, hd = m.d_model, m.n_heads, m.n_kv, m.hd
    rep = H // KV

    def mat(w, x):  # w [out,in] list-of-rows, x vector
        return [sum(w[o][i] * x[i] for i in range(len(x))) for o in range(len(w))]

    def rms(x, w):
        r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + m.eps)
        return [x[i] * r * w[i] for i in range(len(x))]

    def rope_vec(vec, pos):
        out = [0.0] * hd
        half = hd // 2
        for i in range(half):
            ang = pos * (m.rope_theta ** (-(2.0 * i) / hd))
            c, s = math.cos(ang), math.sin(ang)
            a, b = vec[i], vec[i + half]
            out[i] = a * c - b * s
            out[i + half] = b * c + a * s
        return out

    x = [list(map(float, m.embed[t])) for t in ids]
    for L in m.layers:
        wq, wk, wv, wo = L.wq.tolist(), L.wk.tolist(), L.wv.tolist(), L.wo.tolist()
        qs, ks, vs = [], [], []
        for t in range(T):
            h = rms(x[t], L.attn_norm.tolist())
            q = mat(wq, h)
            k = mat(wk, h)
            v = mat(wv, h)
            if L.bq is not None:
                q = [a + b for a, b in zip(q, L.bq.tolist())]
                k = [a + b for a, b in zip(k, L.bk.tolist())]
                v = [a + b for a, b in zip(v, L.bv.tolist())]
            qs.append([rope_vec(q[hh * hd:(hh + 1) * hd], positions[t]) for hh in range(H)])
            ks.append([rope_vec(k[j * hd:(j + 1) * hd], positions[t]) for j in range(KV)])
            vs.append([v[j * hd:(j + 1) * hd] for j in range(KV)])
        newx = []
        for t in range(T):
            att = []
            for hh in range(H):
                j = hh // rep
                sc = [sum(qs[t][hh][d] * ks[u][j][d] for d in range(hd)) / math.sqrt(hd) for u in range(T)]
                mx = max(sc)
                e = [math.exp(s - mx) for s in sc]
                z = sum(e)
                att.extend(sum(e[u] / z * vs[u][j][d] for u in range(T)) for d in range(hd))
            o = mat(wo, att)
            xt = [x[t][i] + o[i] for i in range(D)]
            h = rms(xt, L.ffn_norm.tolist())
            g = mat(L.w_gate.tolist(), h)
            u = mat(L.w_up.tolist(), h)
            act = [g[i] / (1.0 + math.exp(-g[i])) * u[i] for i in range(len(g))]
            dn = mat(L.w_down.tolist(), act)
            newx.append([xt[i] + dn[i] for i in range(D)])
        x = newx
    lm = m.lm_head.tolist()
    out = []
    for t in range(T):
        h = rms(x[t], m.final_norm.tolist())
        out.append(mat(lm, h))
    return np.array(out)


def self_checks(res, work):
    # bf16 rounding: RNE
    vals = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, 1.0 + 2 ** -8 + 2 ** -20, 65504.0, 0.0],
                    dtype=np.float32)
    exp = [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x3F81, 0x4780, 0x0000]
    got = st.f32_to_bf16_bits(vals).tolist()
    res.check("self/bf16-rne", got == exp, "%s vs %s" % ([hex(g) for g in got], [hex(e) for e in exp]))

    # round trips
    rng = np.random.default_rng(0)
    t = {"a": rng.standard_normal((3, 5)).astype(np.float32), "b": rng.standard_normal(7).astype(np.float32)}
    ok = True
    for dt, tol in (("f32", 0), ("f16", 1e-3), ("bf16", 8e-3)):
        p = os.path.join(work, "rt_%s.safetensors" % dt)
        st.write_safetensors(p, t, metadata={"format": "pt"}, dtype=dt)
        back, meta = st.read_safetensors(p)
        n, hdr = st.read_header(p)
        ok &= meta == {"format": "pt"} and (8 + n) % 8 == 0
        for k in t:
            ok &= back[k].shape == t[k].shape
            ok &= float(np.max(np.abs(back[k] - t[k]) / (np.abs(t[k]) + 1e-30))) <= tol
        if dt == "bf16":
            raw, _ = st.read_safetensors(p, upcast=False)
            ok &= raw["a"].dtype == np.uint16 and np.array_equal(raw["a"], st.f32_to_bf16_bits(t["a"]))
            ok &= hdr["a"]["dtype"] == "BF16"
    sd = os.path.join(work, "rt_sharded")
    big = {"t%d" % i: rng.standard_normal((2, i + 1)).astype(np.float32) for i in range(5)}
    st.write_sharded(sd, big, n_shards=3, dtype="f32")
    idx = json.load(open(os.path.join(sd, "model.safetensors.index.json")))
    ok &= sorted(set(idx["weight_map"].values())) == ["model-0000%d-of-00003.safetensors" % i for i in (1, 2, 3)]
    back = st.load_checkpoint_dir(sd)
    ok &= all(np.array_equal(back[k], big[k]) for k in big)
    res.check("self/safetensors-roundtrip", ok)

    # scalar implementation vs vectorized on very small models, both archs
    for arch in ("llada", "dream"):
        d = os.path.join(work, "scalar_" + arch)
        mk.make_checkpoint(arch, d, seed=11, layers=2, d_model=16, heads=4,
                           kv_heads=2 if arch == "dream" else 4, mlp=24, vocab=20, mask_id=17, eos_id=18,
                           dtype="bf16")
        m = rf.RefModel(d)
        ids = [3, 17, 17, 5, 0, 19]
        pos = list(range(6))
        a = m.forward(ids, pos)
        b = scalar_forward(m, ids, pos)
        err = float(np.max(np.abs(a - b)))
        res.check("self/scalar-vs-vectorized-" + arch, err < 1e-10, "max err %.3g" % err)

    for arch in ("llada", "dream"):
        d = os.path.join(work, "prop_" + arch)
        mk.make_checkpoint(arch, d, seed=12)
        m = rf.RefModel(d)
        ids = rng.integers(0, m.vocab, 40)
        ids[::3] = m.mask_id
        full, kv = m.forward(ids, return_kv=True)
        scale = float(np.max(np.abs(full)))
        # relative positions only: shifting all positions leaves logits unchanged
        sh = m.forward(ids, np.arange(40) + 1234)
        res.check("self/rope-shift-invariance-" + arch, np.max(np.abs(sh - full)) < 1e-9 * scale)
        # permuting (id, position) pairs jointly permutes the rows
        perm = rng.permutation(40)
        pr = m.forward(ids[perm], np.arange(40)[perm])
        res.check("self/joint-permutation-" + arch, np.max(np.abs(pr - full[perm])) < 1e-10 * scale)
        # but permuting ids alone at fixed positions changes things (RoPE is active)
        pr2 = m.forward(ids[perm], np.arange(40))
        res.check("self/rope-active-" + arch, np.max(np.abs(pr2 - full[perm])) > 1e-3 * scale)
        # T=1: softmax over a single key is 1, so attention output == v
        one = m.forward(ids[:1])
        L0 = m.layers[0]
        res.check("self/single-token-finite-" + arch, np.all(np.isfinite(one)) and one.shape == (1, m.vocab))
        # fresh caches reproduce the full forward
        s, e = 12, 20
        past = [(k, v, np.arange(40)) for (k, v) in kv]
        dual = m.forward(ids[s:e], np.arange(s, e), past=past)
        res.check("self/dual-cache-fresh-" + arch, np.max(np.abs(dual - full[s:e])) < 1e-10 * scale)
        pre = [(k[:s], v[:s], np.arange(s)) for (k, v) in kv]
        pref = m.forward(ids[s:], np.arange(s, 40), past=pre)
        res.check("self/prefix-cache-fresh-" + arch, np.max(np.abs(pref - full[s:])) < 1e-10 * scale)
        # a stale cache differs (the cache is really used)
        ids2 = ids.copy()
        ids2[:s] = (ids2[:s] + 1) % m.vocab
        pref2 = m.forward(ids[s:], np.arange(s, 40), past=pre)
        _, kv2 = m.forward(ids2, return_kv=True)
        pre2 = [(k[:s], v[:s], np.arange(s)) for (k, v) in kv2]
        pref3 = m.forward(ids[s:], np.arange(s, 40), past=pre2)
        res.check("self/cache-is-used-" + arch, np.max(np.abs(pref3 - pref2)) > 1e-6 * scale)
        del L0
        # logits not degenerate: softmax max prob varies
        pm = np.exp(full - full.max(1, keepdims=True))
        pm = (pm / pm.sum(1, keepdims=True)).max(1)
        res.check("self/non-degenerate-" + arch, 0.02 < pm.mean() < 0.99, "mean max prob %.3f" % pm.mean())

    # tied head: the LM head is the embedding
    d = os.path.join(work, "tied_check")
    mk.make_checkpoint("dream", d, seed=13, tied=True)
    m = rf.RefModel(d)
    names = st.load_checkpoint_dir(d).keys()
    res.check("self/tied", m.lm_head is m.embed and "lm_head.weight" not in names)


def run_binary(dllmq, model_dir, ids, timeout=600):
    cmd = [dllmq, "logits", "-m", model_dir, "--ids", ",".join(str(int(i)) for i in ids), "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("rc=%d: %s" % (p.returncode, p.stderr.decode(errors="replace")[-500:]))
    out = p.stdout.decode()
    # tolerate log lines before the JSON object
    start = out.find("{")
    return np.array(json.loads(out[start:])["logits"], dtype=np.float64)


def binary_checks(res, work, dllmq):
    rng = np.random.default_rng(2024)
    for name, kw in CHECKPOINTS.items():
        d = os.path.join(work, "ckpt", name)
        kw = dict(kw)
        arch = kw.pop("arch")
        mk.make_checkpoint(arch, d, **kw)
        m = rf.RefModel(d)
        for T in LENGTHS:
            ids = rng.integers(0, m.vocab, T)
            nm = max(1, T // 4)
            ids[rng.choice(T, nm, replace=False)] = m.mask_id
            case = "bin/%s/T=%d" % (name, T)
            ref = m.forward(ids)
            try:
                got = run_binary(dllmq, d, ids)
            except Exception as ex:  # noqa: BLE001
                res.check(case, False, "error: %s" % ex)
                continue
            if got.shape != ref.shape:
                res.check(case, False, "shape %s vs ref %s" % (got.shape, ref.shape))
                continue
            err = float(np.max(np.abs(got - ref)))
            scale = float(np.max(np.abs(ref)))
            res.check(case, err <= REL_TOL * scale, "max|diff| %.3g, max|ref| %.3g, rel %.3g" % (err, scale, err / scale))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    ap.add_argument("--self-only", action="store_true", help="only check the reference itself")
    ap.add_argument("--keep", action="store_true", help="keep an auto-created workdir")
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_fwd_")
    os.makedirs(work, exist_ok=True)
    res = Results()
    try:
        self_checks(res, work)
        if not a.self_only:
            if not (os.path.isfile(a.dllmq) and os.access(a.dllmq, os.X_OK)):
                res.check("bin/exists", False, "no executable at %s" % a.dllmq)
            else:
                binary_checks(res, work, a.dllmq)
    finally:
        if not a.workdir and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    if res.fail_names:
        print("failed: " + ", ".join(res.fail_names))
    print("%d passed, %d failed" % (res.passed, res.failed))
    return 0 if res.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
