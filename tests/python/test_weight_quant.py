#!/usr/bin/python3
"""Weight quantization (docs/weight_quant.md) against numpy written from the scheme's definition.

    test_weight_quant.py --dllmq build/dllmq --workdir DIR

1. `dllmq quantize` on both embedded models (int8 per channel sym, int4-g128 sym, int4-g64
   asym): the GPTQ tensors, unpacked here from the layout's definition, hold exactly the codes,
   fp16 scales and zero points of a numpy round-to-nearest quantizer (f32 arithmetic,
   round-half-even, clamp); every other tensor is unchanged; quantization_config says the scheme;
   the projections' bytes are <= 0.53x (int8) / 0.28x (int4-g128) of bf16.
2. `dllmq logits` on each quantized model is within 1e-4 x max|logit| of the float64 reference
   forward (tools/ref_forward.py) on the dequantized weights w = float32(q - z) * s.
3. A checkpoint written here by numpy alone (not by our writer) with desc_act: g_idx of a random
   permutation, in both zero-point formats ("gptq" v1, stored minus one, and "gptq_v2"): the
   same logits check.
4. Errors: bits 3, a wrong qzeros shape, a missing g_idx each fail naming the field or tensor;
   bad `quantize` flags fail naming the flag.
5. DLLMQ_ISA=scalar gives the same logits, bit for bit, as the dispatched kernels.
6. `dllmq inspect --json` reports weight bits and bytes; `dllmq eval` runs on the int8 and
   int4 models (a few synth problems); KVQuant calibration with the Fisher gradient runs on an
   int4 model and its artifact serves a generation on it.
7. The weights x KV grid (configs/weights_synth.json, cut down): its "quantize" step writes the
   int4 copy (replacing a half-written one, never requantizing a finished one), grid.csv gives
   each cell the weight bytes `inspect` reports and weights + KV totals, weights_report.py makes
   its table and plot (and, with --w8a8-runs, the --w8a8 table), and bad "quantize" entries fail
   naming the entry and key.
8. --w8a8 (int8 activations on the integer codes, docs/weight_quant.md): `dllmq logits --w8a8`
   against a numpy forward whose projections follow the definition (per row sx = max|x| / 127,
   xq = clip(rne(x / sx), -127, 127); per group the exact integer sum of xq * (q - z), times s
   and sx): far closer to it than to the exact forward, on int8 sym/asym, int4 sym/asym and
   desc_act checkpoints; DLLMQ_ISA=scalar (the twin) gives the same logits bit for bit; float
   models are refused with the reason, calibrate refuses the flag, and an exact eval refuses to
   resume a --w8a8 one.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402
import ref_forward as rf  # noqa: E402
from results import Results, run_all  # noqa: E402

REL_TOL = 1e-4
MODELS = {"llada": os.path.join(ROOT, "models", "dllmq-synth-tiny"),
          "dream": os.path.join(ROOT, "models", "dllmq-synth-dream-tiny")}
# The projections of each layout (embedding, norms and LM head stay as stored).
PROJ = {"llada": ["q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out"],
        "dream": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]}
PREFIX = {"llada": "model.transformer.blocks.%d.", "dream": "model.layers.%d."}
F32 = np.float32


def proj_names(arch, n_layers):
    return [PREFIX[arch] % i + p for i in range(n_layers) for p in PROJ[arch]]


# ------------------------------------------------------------------ the scheme, from its definition
def np_quantize(w, bits, group, sym, g_idx=None):
    """Round-to-nearest codes of w [n, k] (float32): (q [n, k], z [G, n], s [G, n] float32).
    Per output column and group: sym: a = max|w| (1 if 0), s = fp16(2a / maxq), z = 2^(b-1);
    asym: lo = min(0, min w), hi = max(0, max w) ((-1, 1) if both 0), s = fp16((hi - lo) / maxq),
    z = clamp(rne(-lo / s), 0, maxq); q = clamp(rne(w / s) + z, 0, maxq); all in float32.
    g_idx: the group of each input column (default k // group)."""
    w = np.asarray(w, dtype=F32)
    n, k = w.shape
    G = k if group == -1 else group
    if g_idx is None:
        g_idx = np.arange(k) // G
    ng = int(g_idx.max()) + 1
    maxq = F32(2 ** bits - 1)
    q = np.zeros((n, k), dtype=np.int64)
    z = np.zeros((ng, n), dtype=np.int64)
    s = np.zeros((ng, n), dtype=F32)
    for g in range(ng):
        cols = np.nonzero(g_idx == g)[0]
        blk = w[:, cols]
        lo = np.minimum(blk.min(axis=1), F32(0))
        hi = np.maximum(blk.max(axis=1), F32(0))
        if sym:
            a = np.maximum(-lo, hi)
            a = np.where(a == 0, F32(1), a).astype(F32)
            s32 = ((a + a) / maxq).astype(F32)
        else:
            both = (lo == 0) & (hi == 0)
            lo = np.where(both, F32(-1), lo).astype(F32)
            hi = np.where(both, F32(1), hi).astype(F32)
            s32 = ((hi - lo) / maxq).astype(F32)
        s16 = s32.astype(np.float16).astype(F32)
        assert np.all(s16 > 0) and np.all(np.isfinite(s16))
        if sym:
            zz = np.full(n, F32(2 ** (bits - 1)), dtype=F32)
        else:
            zz = np.clip(np.rint((-lo / s16).astype(F32)), F32(0), maxq).astype(F32)
        r = np.rint((blk / s16[:, None]).astype(F32))
        qq = np.clip(r + zz[:, None], F32(0), maxq)
        q[:, cols] = qq.astype(np.int64)
        z[g] = zz.astype(np.int64)
        s[g] = s16
    return q, z, s, g_idx


def np_dequantize(q, z, s, g_idx):
    """w[c, k] = float32(q[c, k] - z[g_idx[k], c]) * s[g_idx[k], c]."""
    return ((q - z[g_idx].T).astype(F32) * s[g_idx].T).astype(F32)


# ------------------------------------------------------------------ the GPTQ layout
def pack_gptq(q, z, s, g_idx, bits, v1):
    """qweight int32 [k/pf, n] packed along k, qzeros int32 [G, n/pf] packed along n (z - 1 in v1),
    scales fp16 [G, n], g_idx int32 [k]; code j of a word at bits [b*j, b*j + b)."""
    pf = 32 // bits
    n, k = q.shape
    qt = q.T.astype(np.uint64).reshape(k // pf, pf, n)
    qweight = np.zeros((k // pf, n), dtype=np.uint64)
    for j in range(pf):
        qweight |= qt[:, j, :] << np.uint64(bits * j)
    zz = (z - (1 if v1 else 0)).astype(np.uint64).reshape(z.shape[0], n // pf, pf)
    qzeros = np.zeros((z.shape[0], n // pf), dtype=np.uint64)
    for j in range(pf):
        qzeros |= zz[:, :, j] << np.uint64(bits * j)
    return {"qweight": qweight.astype(np.uint32).view(np.int32),
            "qzeros": qzeros.astype(np.uint32).view(np.int32),
            "scales": s.astype(np.float16), "g_idx": np.asarray(g_idx, dtype=np.int32)}


def unpack_gptq(t, bits, v1):
    pf = 32 // bits
    mask = np.uint32(2 ** bits - 1)
    qw = np.asarray(t["qweight"]).view(np.uint32)
    kp, n = qw.shape
    q = np.stack([(qw >> np.uint32(bits * j)) & mask for j in range(pf)], axis=1).reshape(kp * pf, n).T
    qz = np.asarray(t["qzeros"]).view(np.uint32)
    z = np.stack([(qz >> np.uint32(bits * j)) & mask for j in range(pf)], axis=2).reshape(qz.shape[0], -1)
    z = z.astype(np.int64) + (1 if v1 else 0)
    return q.astype(np.int64), z, np.asarray(t["scales"]).astype(F32), np.asarray(t["g_idx"]).astype(np.int64)


# ------------------------------------------------------------------ helpers
def write_raw(path, tensors):
    """safetensors with each array in its own dtype: uint16 arrays are BF16 bit patterns (as
    read_safetensors(upcast=False) returns them), int32 I32, float16 F16, float32 F32."""
    names = {np.dtype("uint16"): "BF16", np.dtype("int32"): "I32", np.dtype("float16"): "F16",
             np.dtype("float32"): "F32"}
    header, blobs, off = {}, [], 0
    for k, a in tensors.items():
        a = np.ascontiguousarray(a)
        raw = a.tobytes()
        header[k] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header).encode()
    hj += b" " * ((8 - (8 + len(hj)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(hj).to_bytes(8, "little") + hj + b"".join(blobs))


def run(cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def dllmq_logits(dllmq, model_dir, ids):
    p = run([dllmq, "logits", "-m", model_dir, "--ids", ",".join(map(str, ids)), "--json"])
    if p.returncode != 0:
        raise RuntimeError("dllmq logits rc=%d: %s" % (p.returncode, p.stderr[-500:]))
    out = p.stdout
    return np.array(json.loads(out[out.find("{"):])["logits"], dtype=np.float64)


def dequantized_dir(work, name, model_dir, deq):
    """The original checkpoint with the projections replaced by float32 dequantized weights."""
    d = os.path.join(work, name + "-deq")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    orig, _ = st.read_safetensors(os.path.join(model_dir, "model.safetensors"), upcast=True)
    tensors = {k: np.asarray(v, dtype=F32) for k, v in orig.items()}
    for base, w in deq.items():
        tensors[base + ".weight"] = w
    st.write_safetensors(os.path.join(d, "model.safetensors"), tensors, dtype="f32")
    shutil.copy(os.path.join(model_dir, "config.json"), d)
    return d


def logits_check(res, label, dllmq, qdir, deq_dir, rng, vocab, mask_id):
    ids = rng.integers(0, vocab, size=40)
    ids[::5] = mask_id
    got = dllmq_logits(dllmq, qdir, ids)
    ref = rf.RefModel(deq_dir).forward(list(ids))
    err = float(np.max(np.abs(got - ref)))
    scale = float(np.max(np.abs(ref)))
    res.check(label + "/logits", err <= REL_TOL * scale,
              "max|dllmq - ref(dequantized)| %.3g <= %.0e x %.3g" % (err, REL_TOL, scale))


# ------------------------------------------------------------------ 1 + 2: our writer
SCHEMES = [("int8", 8, -1, True), ("int4-g128", 4, 128, True), ("int4-g64-asym", 4, 64, False)]


def check_writer(res, dllmq, work, arch, label, bits, group, sym, rng):
    model_dir = MODELS[arch]
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    n_layers = cfg.get("n_layers", cfg.get("num_hidden_layers"))
    out = os.path.join(work, "%s-%s" % (arch, label))
    shutil.rmtree(out, ignore_errors=True)
    cmd = [dllmq, "quantize", "-m", model_dir, "--weights", "int%d" % bits, "--out", out]
    if group != (-1 if bits == 8 else 128):
        cmd += ["--group", str(group)]
    if not sym:
        cmd += ["--asym"]
    p = run(cmd)
    if p.returncode != 0:
        res.check("%s/%s/quantize" % (arch, label), False, p.stderr[-400:])
        return
    tag = "%s/%s" % (arch, label)
    qcfg = json.load(open(os.path.join(out, "config.json")))["quantization_config"]
    v1 = qcfg["checkpoint_format"] == "gptq"
    res.check(tag + "/config", qcfg["quant_method"] == "gptq" and qcfg["bits"] == bits
              and qcfg["group_size"] == group and qcfg["sym"] == sym and qcfg["desc_act"] is False
              and v1 == sym, json.dumps(qcfg))
    qt, _ = st.read_safetensors(os.path.join(out, "model.safetensors"), upcast=False)
    orig, _ = st.read_safetensors(os.path.join(model_dir, "model.safetensors"), upcast=True)
    orig_raw, _ = st.read_safetensors(os.path.join(model_dir, "model.safetensors"), upcast=False)
    names = proj_names(arch, n_layers)
    exact = True
    deq = {}
    bytes_q = bytes_bf16 = 0
    for base in names:
        w = orig[base + ".weight"]
        q, z, s, g_idx = np_quantize(w, bits, group, sym)
        t = {f: qt[base + "." + f] for f in ("qweight", "qzeros", "scales", "g_idx")}
        q2, z2, s2, g2 = unpack_gptq(t, bits, v1)
        same = (np.array_equal(q, q2) and np.array_equal(z, z2) and np.array_equal(s, s2)
                and np.array_equal(g_idx, g2) and base + ".weight" not in qt)
        if not same and exact:
            print("  first mismatch in", base, "codes", int(np.sum(q != q2)), "zeros",
                  int(np.sum(z != z2)), "scales", int(np.sum(s != s2)))
        exact = exact and same
        deq[base] = np_dequantize(q2, z2, s2, g2)
        bytes_q += sum(np.asarray(v).nbytes for v in t.values())
        bytes_bf16 += w.size * 2
    res.check(tag + "/codes=numpy", exact, "%d projections" % len(names))
    others = [k for k in orig_raw if not any(k == b + ".weight" for b in names)]
    res.check(tag + "/others-unchanged",
              all(k in qt and np.array_equal(np.asarray(qt[k]), np.asarray(orig_raw[k])) for k in others),
              "%d tensors" % len(others))
    ratio = bytes_q / bytes_bf16
    if label in ("int8", "int4-g128"):
        bound = 0.53 if bits == 8 else 0.28
        res.check(tag + "/bytes", ratio <= bound, "projections %.3fx of bf16 (<= %.2f)" % (ratio, bound))
    deq_dir = dequantized_dir(work, "%s-%s" % (arch, label), model_dir, deq)
    vocab = int(cfg.get("vocab_size"))
    logits_check(res, tag, dllmq, out, deq_dir, rng, vocab, int(cfg["mask_token_id"]))
    return out


# ------------------------------------------------------------------ 8: int8 activations
class W8A8Proj:
    """`x @ p.T` is the int8-activation product of docs/weight_quant.md, from its definition:
    per row sx = max|x| / 127 in float32 and xq = clip(rne(x / sx), -127, 127) (0 where sx = 0);
    per group g the exact integer A_g = xq[:, cols_g] @ (q - z_g)[:, cols_g]^T; y = sum_g A_g s_g sx
    (float64 here). Stands in for a weight matrix of tools/ref_forward.py's RefModel."""
    __array_ufunc__ = None  # numpy defers `x @ p` to __rmatmul__

    def __init__(self, q, z, s, g_idx):
        self.q, self.z, self.s, self.g_idx = q, z, s.astype(np.float64), g_idx

    @property
    def T(self):
        return self

    def __rmatmul__(self, x):
        x32 = np.asarray(x, dtype=F32)
        sx = (np.abs(x32).max(axis=1) / F32(127)).astype(F32)
        safe = np.where(sx == 0, F32(1), sx)
        xq = np.clip(np.rint((x32 / safe[:, None]).astype(F32)), -127, 127).astype(np.int64)
        y = np.zeros((x32.shape[0], self.q.shape[0]))
        for g in range(self.z.shape[0]):
            cols = self.g_idx == g
            A = xq[:, cols] @ (self.q[:, cols] - self.z[g][:, None]).T
            y += A * self.s[g][None, :] * sx.astype(np.float64)[:, None]
        return y


LAYER_ATTRS = ["wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"]


def w8a8_ref_model(arch, qdir):
    """RefModel of the original checkpoint (embeddings, norms and LM head are unchanged by
    quantization) with every projection the W8A8 product of qdir's codes."""
    cfg = json.load(open(os.path.join(qdir, "config.json")))
    qc = cfg["quantization_config"]
    v1 = qc.get("checkpoint_format", "gptq") == "gptq"
    qt, _ = st.read_safetensors(os.path.join(qdir, "model.safetensors"), upcast=False)
    m = rf.RefModel(MODELS[arch])
    for i, L in enumerate(m.layers):
        for attr, proj in zip(LAYER_ATTRS, PROJ[arch]):
            base = PREFIX[arch] % i + proj
            t = {f: qt[base + "." + f] for f in ("qweight", "qzeros", "scales", "g_idx")}
            setattr(L, attr, W8A8Proj(*unpack_gptq(t, int(qc["bits"]), v1)))
    return m


def w8a8_check(res, dllmq, arch, qdir, rng, trials=6, need=3):
    """dllmq's activations are f32 and the reference's f64: where one of the thousands of
    activation roundings falls on the other side of a half-way point, the two forwards part by a
    whole int8 step, which the bidirectional attention spreads over every row (measured: 1e-7
    relative noise on the reference's activations moves its logits by up to 0.24). So each trial
    is a short random prompt, and most trials must agree to 1e-4 x max|logit| (no such rounding
    met), while the exact forward sits 0.2-0.4 away: a definition that differed in any projection
    would miss in every trial."""
    tag = "w8a8/" + os.path.basename(qdir)
    cfg = json.load(open(os.path.join(qdir, "config.json")))
    ref_model = w8a8_ref_model(arch, qdir)
    agree, notes, twin_same = 0, [], True
    for trial in range(trials):
        ids = rng.integers(0, int(cfg["vocab_size"]), size=12)
        ids[::4] = int(cfg["mask_token_id"])
        arg = ["logits", "-m", qdir, "--ids", ",".join(map(str, ids)), "--json", "--w8a8"]
        p = run([dllmq] + arg)
        if p.returncode != 0:
            res.check(tag, False, p.stderr.strip()[-300:])
            return
        got = np.array(json.loads(p.stdout[p.stdout.find("{"):])["logits"], dtype=np.float64)
        exact = dllmq_logits(dllmq, qdir, ids)
        ref = ref_model.forward(list(ids))
        scale = float(np.max(np.abs(ref)))
        err = float(np.max(np.abs(got - ref)))
        apart = float(np.max(np.abs(exact - ref)))
        ok = err <= REL_TOL * scale and apart > 100 * err
        agree += ok
        notes.append("%.2g/%.2g" % (err, apart))
        if trial == 0:  # the scalar twin: the same bits
            env = dict(os.environ, DLLMQ_ISA="scalar")
            q = subprocess.run([dllmq] + arg, capture_output=True, text=True, env=env, timeout=600)
            twin_same = q.returncode == 0 and q.stdout == p.stdout
    res.check(tag + "/logits", agree >= need,
              "%d of %d trials within %.0e x max|logit| of the numpy W8A8 forward (max|w8a8 - ref| / "
              "max|exact - ref|: %s)" % (agree, trials, REL_TOL, ", ".join(notes)))
    res.check(tag + "/scalar-twin", twin_same, "DLLMQ_ISA=scalar logits == dispatched kernel's, bit for bit")


# ------------------------------------------------------------------ 3: numpy-written, desc_act
def write_numpy_gptq(work, name, arch, bits, group, sym, v1, rng):
    model_dir = MODELS[arch]
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    n_layers = cfg.get("n_layers", cfg.get("num_hidden_layers"))
    orig_raw, _ = st.read_safetensors(os.path.join(model_dir, "model.safetensors"), upcast=False)
    orig, _ = st.read_safetensors(os.path.join(model_dir, "model.safetensors"), upcast=True)
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tensors, deq = {}, {}
    names = set(proj_names(arch, n_layers))
    for k, v in orig_raw.items():
        base = k[:-len(".weight")]
        if base not in names:
            tensors[k] = v
            continue
        w = orig[k]
        kk = w.shape[1]
        perm = rng.permutation(kk)  # act order: the i-th column in it joins group i // G
        g_idx = np.empty(kk, dtype=np.int64)
        g_idx[perm] = np.arange(kk) // (kk if group == -1 else group)
        q, z, s, g_idx = np_quantize(w, bits, group, sym, g_idx)
        if v1:
            z = np.maximum(z, 1)  # v1 cannot store 0; a zero point of 1 is still a valid code
        for f, a in pack_gptq(q, z, s, g_idx, bits, v1).items():
            tensors[base + "." + f] = a
        deq[base] = np_dequantize(q, z, s, g_idx)
    write_raw(os.path.join(d, "model.safetensors"), tensors)
    for fn in os.listdir(model_dir):
        if fn not in ("model.safetensors", "config.json"):
            shutil.copy(os.path.join(model_dir, fn), d)
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": bits, "group_size": group,
                                  "sym": sym, "desc_act": True,
                                  "checkpoint_format": "gptq" if v1 else "gptq_v2"}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return d, deq, cfg


def corrupt_copy(src, d, edit_cfg=None, edit_tensors=None):
    """A copy of checkpoint directory `src` at `d` with config.json and/or the tensors edited
    (edit_cfg(dict), edit_tensors(dict of arrays), in place)."""
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, d)
    if edit_cfg:
        c = json.load(open(os.path.join(d, "config.json")))
        edit_cfg(c)
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    if edit_tensors:
        t, _ = st.read_safetensors(os.path.join(d, "model.safetensors"), upcast=False)
        t = dict(t)
        edit_tensors(t)
        write_raw(os.path.join(d, "model.safetensors"), t)
    return d


def expect_fail(res, label, cmd, want):
    p = run(cmd)
    ok = p.returncode != 0 and want in p.stderr and "Segmentation" not in p.stderr
    res.check(label, ok, "rc %d, stderr: %s" % (p.returncode, p.stderr.strip()[-250:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir", default="/tmp/dllmq_test_weight_quant")
    args = ap.parse_args()
    dllmq, work = os.path.abspath(args.dllmq), args.workdir
    os.makedirs(work, exist_ok=True)
    res = Results()
    rng = np.random.default_rng(0)
    written = {}

    def writer_checks():
        for arch in ("llada", "dream"):
            for label, bits, group, sym in SCHEMES:
                written[(arch, label)] = check_writer(res, dllmq, work, arch, label, bits, group, sym, rng)

    def numpy_gptq_checks():
        for arch, bits, group, sym, v1 in [("llada", 4, 64, True, True), ("dream", 8, 128, False, False),
                                           ("dream", 4, 32, False, True)]:
            name = "np-%s-%d-g%d-%s-%s" % (arch, bits, group, "sym" if sym else "asym", "v1" if v1 else "v2")
            d, deq, cfg = write_numpy_gptq(work, name, arch, bits, group, sym, v1, rng)
            deq_dir = dequantized_dir(work, name, MODELS[arch], deq)
            logits_check(res, name, dllmq, d, deq_dir, rng, int(cfg["vocab_size"]), int(cfg["mask_token_id"]))

    def error_checks():
        src = os.path.join(work, "np-llada-4-g64-sym-v1")
        ids = ["--ids", "1,2,3"]

        def variant(name, edit_cfg=None, edit_tensors=None):
            return corrupt_copy(src, os.path.join(work, "bad-" + name), edit_cfg, edit_tensors)

        b = "model.transformer.blocks.1.ff_out"
        d = variant("bits3", edit_cfg=lambda c: c["quantization_config"].update(bits=3))
        expect_fail(res, "error/bits3", [dllmq, "logits", "-m", d] + ids, "weight bits 3 not supported")

        def bad_zeros(t):
            t[b + ".qzeros"] = np.zeros((3, 5), dtype=np.int32)
        d = variant("qzeros", edit_tensors=bad_zeros)
        expect_fail(res, "error/qzeros-shape", [dllmq, "logits", "-m", d] + ids, "'%s.qzeros' has shape [3, 5]" % b)
        d = variant("gidx", edit_tensors=lambda t: t.pop(b + ".g_idx"))
        expect_fail(res, "error/missing-g_idx", [dllmq, "logits", "-m", d] + ids, "missing tensor '%s.g_idx'" % b)
        # AutoGPTQ's bias on a bias-free projection (all zero, as it saves them) is bound and added:
        # a zero bias gives the same logits bit for bit, a bias of ones changes them.
        base_out = run([dllmq, "logits", "-m", src] + ids + ["--json"]).stdout
        n_out = 256  # ff_out of the d 256 model: [d, mlp]
        d = variant("zero-bias", edit_tensors=lambda t: t.update({b + ".bias": np.zeros(n_out, dtype=np.float16)}))
        p = run([dllmq, "logits", "-m", d] + ids + ["--json"])
        res.check("autogptq-bias/zero", p.returncode == 0 and p.stdout == base_out and "logits" in base_out,
                  (p.stderr.strip()[-200:] if p.returncode else "same logits as without the bias"))
        d = variant("one-bias", edit_tensors=lambda t: t.update({b + ".bias": np.ones(n_out, dtype=np.float16)}))
        p = run([dllmq, "logits", "-m", d] + ids + ["--json"])
        res.check("autogptq-bias/one", p.returncode == 0 and p.stdout != base_out,
                  (p.stderr.strip()[-200:] if p.returncode else "the bias is added"))
        d = variant("noconfig", edit_cfg=lambda c: c.pop("quantization_config"))
        expect_fail(res, "error/no-quantization_config", [dllmq, "logits", "-m", d] + ids, "no quantization_config")
        m = MODELS["llada"]
        o = os.path.join(work, "flags-out")
        expect_fail(res, "flags/weights", [dllmq, "quantize", "-m", m, "--weights", "int3", "--out", o], "--weights int3")
        expect_fail(res, "flags/group", [dllmq, "quantize", "-m", m, "--weights", "int4", "--group", "100", "--out", o],
                    "group size 100")
        expect_fail(res, "flags/sym+asym", [dllmq, "quantize", "-m", m, "--weights", "int4", "--sym", "--asym",
                                            "--out", o], "excludes")
        expect_fail(res, "flags/out=in", [dllmq, "quantize", "-m", m, "--weights", "int8", "--out", m],
                    "is the input model directory")
        expect_fail(res, "flags/requantize", [dllmq, "quantize", "-m", src, "--weights", "int8", "--out", o],
                    "already quantized")

    def isa_checks():
        # The scalar kernels give the bits of the vector ones (AVX2 / AVX-512, where present).
        ids = list(rng.integers(0, 500, size=33))
        for d in [written.get(("llada", "int4-g128")), written.get(("dream", "int8")),
                  os.path.join(work, "np-dream-4-g32-asym-v1")]:
            if d is None:
                continue
            outs = {}
            for isa in ("scalar", ""):
                env = dict(os.environ)
                env.pop("DLLMQ_ISA", None)
                if isa:
                    env["DLLMQ_ISA"] = isa
                p = subprocess.run([dllmq, "logits", "-m", d, "--ids", ",".join(map(str, ids)), "--json"],
                                   capture_output=True, text=True, env=env, timeout=600)
                outs[isa or "best"] = p.stdout if p.returncode == 0 else "rc %d" % p.returncode
            res.check("isa/%s" % os.path.basename(d), outs["scalar"] == outs["best"] and "logits" in outs["best"],
                      "DLLMQ_ISA=scalar logits == dispatched ISA's, bit for bit")

    def inspect_and_eval():
        for (arch, label), d in sorted(written.items()):
            if d is None or label == "int4-g64-asym":
                continue
            p = run([dllmq, "inspect", "-m", d, "--json"])
            j = json.loads(p.stdout) if p.returncode == 0 else {}
            want_bits = 8 if label == "int8" else 4
            res.check("%s/%s/inspect" % (arch, label),
                      j.get("proj_weight_bits") == want_bits and j.get("weight_format", "").startswith("int%d" % want_bits)
                      and 0 < j.get("proj_weight_bytes", 0) < j.get("weight_bytes", 0),
                      json.dumps({k: j.get(k) for k in ("weight_format", "proj_weight_bits", "proj_weight_bytes",
                                                         "weight_bytes")}))
            out = os.path.join(work, "eval-%s-%s" % (arch, label))
            shutil.rmtree(out, ignore_errors=True)
            p = run([dllmq, "eval", "--task", "synth", "-m", d, "--out", out, "--limit", "4", "--json",
                     "--gen-length", "48", "--block-length", "16", "--cache", "dual", "--threshold", "0.9"])
            ok = p.returncode == 0 and json.loads(p.stdout.strip().splitlines()[-1]).get("n") == 4
            res.check("%s/%s/eval" % (arch, label), ok, p.stderr.strip()[-200:] if not ok else "4 problems")

    def calibrate_on_codes():
        # KVQuant calibration with the Fisher gradient (W^T products on dequantized code tiles) on
        # an int4 model, then a generation with its artifact on the same model.
        d = written.get(("llada", "int4-g128"))
        if d is None:
            return
        art = os.path.join(work, "calib-int4.safetensors")
        flags = ["--gen-length", "48", "--block-length", "16", "--cache", "dual", "--threshold", "0.9"]
        p = run([dllmq, "calibrate", "-m", d, "--task", "synth", "--data", os.path.join(ROOT, "data", "synth", "test.jsonl"),
                 "--method", "kvquant", "--trajectory", "trace", "--fisher", "diffusion", "--kv-bits", "4", "--limit", "2",
                 "--out", art] + flags)
        ok = p.returncode == 0 and os.path.exists(art)
        res.check("llada/int4-g128/calibrate", ok, p.stderr.strip()[-200:])
        if not ok:
            return
        p = run([dllmq, "generate", "-m", d, "--prompt", "Mia has 23 marbles. She buys 14 more marbles. How many "
                 "marbles does Mia have now?", "--chat", "--kv", "kvquant", "--calib", art, "--json"] + flags)
        j = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
        res.check("llada/int4-g128/generate-kvquant", j.get("proj_weight_bits") == 4 and j.get("kv_method") == "kvquant",
                  p.stderr.strip()[-200:] if p.returncode else "kv_store %s" % j.get("kv_store"))

    def grid_weights():
        # configs/weights_synth.json cut down (tools/grid/reduce_config.py): its "quantize" list
        # writes the int4 copy, the "model" axis runs it beside bf16, and grid.csv carries both
        # models' weight bytes and weights + KV totals; tools/grid/weights_report.py tabulates.
        gout = os.path.join(work, "grid-weights")
        shutil.rmtree(gout, ignore_errors=True)
        q4 = "{out}/models/synth-llada-int4"
        cfg = run([sys.executable, os.path.join(ROOT, "tools", "grid", "reduce_config.py"),
                   os.path.join(ROOT, "configs", "weights_synth.json"), "--calib-limit", "2", "--limit", "3",
                   "--models", "synth-llada," + q4, "--caches", "dual", "--kv", "fp16,kivi-2"])
        res.check("grid/reduce", cfg.returncode == 0, cfg.stderr.strip()[-200:])
        if cfg.returncode != 0:
            return
        path = os.path.join(work, "grid-weights.json")
        with open(path, "w") as f:
            f.write(cfg.stdout)
        qdir = os.path.join(gout, "models", "synth-llada-int4")
        os.makedirs(qdir + ".partial")  # what an interrupted grid leaves: replaced, never used
        with open(os.path.join(qdir + ".partial", "config.json"), "w") as f:
            f.write("{")
        p = run([dllmq, "grid", "--config", path, "--out", gout])
        res.check("grid/run", p.returncode == 0, p.stderr.strip()[-300:])
        qc = json.load(open(os.path.join(qdir, "config.json"))).get("quantization_config", {}) \
            if os.path.exists(os.path.join(qdir, "config.json")) else {}
        res.check("grid/quantized-copy", qc.get("bits") == 4 and qc.get("group_size") == 128
                  and not os.path.exists(qdir + ".partial"), json.dumps(qc))
        import csv
        rows = list(csv.DictReader(open(os.path.join(gout, "grid.csv")))) \
            if os.path.exists(os.path.join(gout, "grid.csv")) else []
        fmts = {r["weight_format"]: r for r in rows}
        want = {}
        for d in (MODELS["llada"], qdir):
            j = run([dllmq, "inspect", "-m", d, "--json"])
            if j.returncode == 0:
                ij = json.loads(j.stdout)
                want[ij["weight_format"]] = ij["weight_bytes"]
        ok = len(rows) == 4 and set(fmts) == set(want) and len(want) == 2 and all(
            int(r["weight_bytes"]) == want[r["weight_format"]]
            and int(r["total_bytes"]) == int(r["weight_bytes"]) + int(r["kv_bytes"]) for r in rows)
        res.check("grid/csv-weight-bytes", ok, "inspect %s; csv %s" % (want, [
            (r["weight_format"], r["kv"], r["weight_bytes"], r["kv_bytes"], r["total_bytes"]) for r in rows]))
        p = run([dllmq, "grid", "--config", path, "--out", gout])
        res.check("grid/no-requantize", p.returncode == 0 and "exists, not requantized" in p.stderr,
                  p.stderr.strip()[-200:])
        # a --w8a8 run of the int4 model's fp16 cell, with the cell's flags, for the second table
        w8 = os.path.join(work, "grid-w8a8")
        shutil.rmtree(w8, ignore_errors=True)
        os.makedirs(w8)
        p = run([dllmq, "eval", "--task", "synth", "--data", os.path.join(ROOT, "data", "synth", "test.jsonl"),
                 "--limit", "3", "--out", os.path.join(w8, "synth-llada-int4-dual-fp16"), "--gen-length", "48",
                 "--block-length", "16", "--threshold", "0.9", "--cache", "dual", "--kv", "fp16", "--model", qdir,
                 "--threads", "1", "--w8a8"])
        res.check("grid/w8a8-eval", p.returncode == 0, p.stderr.strip()[-200:])
        p = run([sys.executable, os.path.join(ROOT, "tools", "grid", "weights_report.py"), "--run", gout,
                 "--png", os.path.join(work, "weights.png"), "--w8a8-runs", w8])
        lines = [x for x in p.stdout.splitlines() if x.startswith("| synth-llada | dual |")]
        res.check("grid/weights-report", p.returncode == 0 and len(lines) == 2
                  and all(x.count("(") == 1 for x in lines) and os.path.exists(os.path.join(work, "weights.png")),
                  p.stdout.strip()[-300:] + p.stderr.strip()[-200:])
        w8_lines = [x for x in p.stdout.splitlines() if x.startswith("| synth-llada | int4-g128 | dual | fp16 |")]
        res.check("grid/weights-report-w8a8", len(w8_lines) == 1 and w8_lines[0].count("(") == 1,
                  p.stdout.strip()[-300:])
        for label, edit, want_err in (
                ("int3", lambda q: q.update(weights="int3"), "quantize[0].weights: 'int3' is not a weight format"),
                ("unknown-key", lambda q: q.update(bitz=4), "unknown key 'bitz' in quantize[0]"),
                ("bad-group", lambda q: q.update(group=12), "quantize[0]")):
            c = json.loads(cfg.stdout)
            edit(c["quantize"][0])
            bad = os.path.join(work, "grid-bad-%s.json" % label)
            with open(bad, "w") as f:
                json.dump(c, f)
            expect_fail(res, "grid/error-%s" % label,
                        [dllmq, "grid", "--config", bad, "--out", os.path.join(work, "grid-bad"), "--dry-run"], want_err)

    def w8a8_checks():
        for arch, label in (("llada", "int8"), ("llada", "int4-g128"), ("dream", "int4-g64-asym")):
            if written.get((arch, label)):
                w8a8_check(res, dllmq, arch, written[(arch, label)], rng)
        w8a8_check(res, dllmq, "dream", os.path.join(work, "np-dream-4-g32-asym-v1"), rng)  # desc_act
        w8a8_check(res, dllmq, "dream", os.path.join(work, "np-dream-8-g128-asym-v2"), rng)  # int8 asym
        ids = ["--ids", "1,2,3"]
        expect_fail(res, "w8a8/float-model", [dllmq, "logits", "-m", MODELS["llada"], "--w8a8"] + ids,
                    "has no integer weight codes")
        d = written.get(("llada", "int4-g128"))
        if d:
            # an approximate eval never continues an exact one, or back
            out = os.path.join(work, "eval-w8a8")
            shutil.rmtree(out, ignore_errors=True)
            ev = [dllmq, "eval", "--task", "synth", "-m", d, "--out", out, "--limit", "2", "--json",
                  "--gen-length", "48", "--block-length", "16", "--cache", "dual", "--threshold", "0.9"]
            p = run(ev + ["--w8a8"])
            j = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
            res.check("w8a8/eval", j.get("n") == 2 and j.get("w8a8", "").startswith("w8a8 "),
                      p.stderr.strip()[-200:] if p.returncode else "summary w8a8: %s" % j.get("w8a8"))
            expect_fail(res, "w8a8/eval-resume-exact", ev + ["--resume"], "--resume with a different 'w8a8'")
            expect_fail(res, "w8a8/calibrate", [dllmq, "calibrate", "-m", d, "--task", "synth", "--data",
                                                os.path.join(ROOT, "data", "synth", "test.jsonl"), "--limit", "1",
                                                "--out", os.path.join(work, "x.safetensors"), "--w8a8"],
                        "--w8a8 applies to generate")

    return run_all(res, [writer_checks, numpy_gptq_checks, error_checks, isa_checks, inspect_and_eval,
                         calibrate_on_codes, w8a8_checks, grid_weights])


if __name__ == "__main__":
    sys.exit(main())
