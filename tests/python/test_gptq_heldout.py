#!/usr/bin/python3
"""GPTQ checkpoints written by a PyPI GPTQ library (AutoGPTQ), not by dllmq (docs/weight_quant.md,
"Held-out GPTQ checkpoints").

    tools/make_gptq_heldout.sh [VENV [OUT]]      # once: venv + AutoGPTQ + the checkpoints
    test_gptq_heldout.py --dllmq build/dllmq --workdir DIR [--heldout OUT]
                                                 # OUT: $DLLMQ_GPTQ_HELDOUT, else ../gptq-heldout

Without the checkpoints (no venv was made: CI) the test says SKIP and passes. Per variant
(Dream and LLaDA layouts; 4-bit with and without desc_act, 8-bit; see VARIANTS):
1. layout: the tensors the library wrote, unpacked by the layout of docs/weight_quant.md (v1 zero
   points, stored minus one), give float32(q - z) * s equal bit for bit to the library's own
   dequantization (its QuantLinear unpack, scales widened to f32); desc_act variants have a
   permuted g_idx, the others g_idx[k] = k // group_size.
2. logits: `dllmq logits` within 1e-4 x max|logit| of (a) transformers' forward of the library's
   quantized model (QuantLinear modules, bidirectional attention) and (b) the float64 reference
   forward (tools/ref_forward.py) on the library's dequantized weights.
3. as-is: the library's file unchanged (AutoGPTQ 0.7.1 saves an all-zero `.bias` for every
   projection without one) loads and gives the same logits.
4. quantize_config.json: the library's file beside an unquantized config.json is read the same.
5. Errors on corrupted copies of a library checkpoint: a qzeros of the wrong shape, bits 3 in
   its quantization_config, a removed g_idx: each fails naming the tensor or field.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402
import ref_forward as rf  # noqa: E402
from results import Results, run_all  # noqa: E402
from test_weight_quant import corrupt_copy, dllmq_logits, expect_fail, run, unpack_gptq  # noqa: E402

REL_TOL = 1e-4
# name: (bits, group_size, desc_act), as tools/gptq_heldout_quantize.py writes them
VARIANTS = {"dream-int4-g32-act": (4, 32, True), "dream-int4-g64": (4, 64, False),
            "dream-int8-g128-act": (8, 128, True), "llada-int4-g64-act": (4, 64, True),
            "llada-int8-g-1": (8, -1, False)}
CORRUPT_SRC = "dream-int4-g32-act"
CORRUPT_PROJ = "model.layers.1.mlp.down_proj"


def rel_err(got, ref):
    return float(np.max(np.abs(got - ref))) / float(np.max(np.abs(ref)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir", default="/tmp/dllmq_test_gptq_heldout")
    ap.add_argument("--heldout", default=os.environ.get(
        "DLLMQ_GPTQ_HELDOUT", os.path.join(os.path.dirname(ROOT), "gptq-heldout")),
                    help="what tools/make_gptq_heldout.sh wrote (default: $DLLMQ_GPTQ_HELDOUT, else "
                         "gptq-heldout beside the repository)")
    args = ap.parse_args()
    dllmq, work, held = os.path.abspath(args.dllmq), args.workdir, args.heldout
    if not os.path.exists(os.path.join(held, "versions.json")):
        print("SKIP: no held-out GPTQ checkpoints in %s (no AutoGPTQ venv here; tools/make_gptq_heldout.sh "
              "creates both)" % held)
        print("0 passed, 0 failed")
        return 0
    os.makedirs(work, exist_ok=True)
    print("library versions: %s" % json.dumps(json.load(open(os.path.join(held, "versions.json")))))
    res = Results()
    worst = {}

    def variant_checks():
        for name, (bits, group, act) in VARIANTS.items():
            d, ref = os.path.join(held, name), os.path.join(held, name + ".ref")
            if not os.path.isdir(d):
                res.check("present/" + name, False, "%s missing: rerun tools/make_gptq_heldout.sh" % d)
                continue
            cfg = json.load(open(os.path.join(d, "config.json")))
            qc = cfg["quantization_config"]
            res.check("config/" + name, (qc["bits"], qc["group_size"], qc["desc_act"], qc.get("checkpoint_format"))
                      == (bits, group, act, None), "library quantization_config %s" % json.dumps(qc))
            # 1. the layout against the library's own dequantization
            t, _ = st.read_safetensors(os.path.join(d, "model.safetensors"), upcast=False)
            deq, _ = st.read_safetensors(os.path.join(ref, "deq", "model.safetensors"), upcast=True)
            bases = sorted(k[:-len(".qweight")] for k in t if k.endswith(".qweight"))
            bad, order_ok = [], True
            for b in bases:
                q, z, s, g = unpack_gptq({x: t[b + "." + x] for x in ("qweight", "qzeros", "scales", "g_idx")},
                                         bits, v1=True)
                w = ((q - z[g].T).astype(np.float32) * s[g].T).astype(np.float32)
                if not np.array_equal(w, np.asarray(deq[b + ".weight"], dtype=np.float32)):
                    bad.append(b)
                k = len(g)
                plain = np.array_equal(g, np.arange(k) // (k if group == -1 else group))
                order_ok &= (not plain) if act else plain
            res.check("layout/" + name, len(bases) == 28 and not bad and order_ok,
                      "%d projections; float32(q - z) * s == library dequantization bit for bit (mismatch: %s); "
                      "g_idx %s" % (len(bases), bad[:3], "permuted (desc_act)" if act else "k // group"))
            # 2. logits
            ids = json.load(open(os.path.join(ref, "ids.json")))
            got = dllmq_logits(dllmq, d, ids)
            lib = np.load(os.path.join(ref, "logits_f32.npy"))
            f64 = rf.RefModel(os.path.join(ref, "deq")).forward(list(ids))
            e1, e2 = rel_err(got, lib), rel_err(got, f64)
            worst[name] = (e1, e2)
            res.check("logits/" + name, e1 <= REL_TOL and e2 <= REL_TOL,
                      "max|dllmq - lib| / max|lib| %.2e, vs ref_forward(f64, library-dequantized) %.2e (<= %.0e)"
                      % (e1, e2, REL_TOL))
            # 3. the library's file as it is (zero biases included)
            p = run([dllmq, "logits", "-m", d + ".asis", "--ids", ",".join(map(str, ids)), "--json"])
            if p.returncode == 0:
                e3 = rel_err(np.array(json.loads(p.stdout[p.stdout.find("{"):])["logits"]), lib)
                res.check("as-is/" + name, e3 <= REL_TOL, "unchanged library file: %.2e" % e3)
            else:
                res.check("as-is/" + name, False, "the library's unchanged file (all-zero .bias on bias-free "
                          "projections) is refused: %s" % (p.stderr.strip().splitlines() or [""])[-1][:300])

    def quantize_config_json():
        name = "llada-int4-g64-act"
        src = os.path.join(held, name)
        d = os.path.join(work, "qcj-" + name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        c = json.load(open(os.path.join(d, "config.json")))
        shutil.copy(os.path.join(held, name + ".autogptq", "quantize_config.json"), d)
        c.pop("quantization_config")
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
        ids = json.load(open(os.path.join(held, name + ".ref", "ids.json")))
        same = np.array_equal(dllmq_logits(dllmq, d, ids), dllmq_logits(dllmq, src, ids))
        res.check("quantize_config.json", same, "the library's quantize_config.json beside config.json: same logits")

    def error_checks():
        src = os.path.join(held, CORRUPT_SRC)
        ids = ["--ids", "1,2,3"]

        def variant(label, edit_cfg=None, edit_tensors=None):
            return corrupt_copy(src, os.path.join(work, "bad-" + label), edit_cfg, edit_tensors)

        b = CORRUPT_PROJ
        d = variant("bits3", edit_cfg=lambda c: c["quantization_config"].update(bits=3))
        expect_fail(res, "error/bits3", [dllmq, "logits", "-m", d] + ids, "weight bits 3 not supported")

        def bad_zeros(t):
            t[b + ".qzeros"] = np.ascontiguousarray(t[b + ".qzeros"][:, :-1])
        d = variant("qzeros", edit_tensors=bad_zeros)
        expect_fail(res, "error/qzeros-shape", [dllmq, "logits", "-m", d] + ids, "'%s.qzeros' has shape [24, 31]" % b)
        d = variant("gidx", edit_tensors=lambda t: t.pop(b + ".g_idx"))
        expect_fail(res, "error/missing-g_idx", [dllmq, "logits", "-m", d] + ids, "missing tensor '%s.g_idx'" % b)

    def summary():
        print("max relative logit error, dllmq vs library forward / vs f64 reference: " + ", ".join(
            "%s %.2e / %.2e" % (k, a, b) for k, (a, b) in worst.items()))

    return run_all(res, [variant_checks, quantize_config_json, error_checks, summary])


if __name__ == "__main__":
    sys.exit(main())
