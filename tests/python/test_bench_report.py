#!/usr/bin/python3
"""`dllmq bench --json` reports what its definitions say (issue 29), recomputed here from the
report's own raw fields and from the checkpoint's safetensors header, read independently:

  - efficiency = speedup / FLOP ratio, and the FLOP-count ideal = the baseline's time / FLOP ratio;
  - the bytes the read probe streams are the projections' and LM head's weights: summed here from
    the header's data offsets (every dimension of the embedded model is a multiple of the
    packed panels, so packing adds no padding);
  - the weight-read floor = forwards x those bytes / the measured read rate, and the efficiency it
    allows = min(1, ideal / floor), in (0, 1];
  - a MoE model, whose forwards read only their rows' experts, reports no such floor.

Usage: test_bench_report.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from results import Results, run_all  # noqa: E402
from safetensors_np import read_header  # noqa: E402

MODEL = os.path.join(ROOT, "models", "dllmq-synth-tiny")
# LLaDA's per-layer projections and the untied LM head (reference doc §1.2 names)
READ = re.compile(r"model\.transformer\.(blocks\.\d+\.(q_proj|k_proj|v_proj|attn_out|ff_proj|up_proj|ff_out)"
                  r"|ff_out)\.weight$")


def header_weight_bytes(path):
    _, header = read_header(path)
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for name, t in header.items()
               if name != "__metadata__" and READ.match(name))


def bench(dllmq, model, modes):
    r = subprocess.run([dllmq, "bench", "-m", model, "--prompt-length", "64", "--gen-length", "64",
                        "--block-length", "32", "--steps", "64", "--threads", "2", "--modes", modes,
                        "--json"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"bench exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout), r.stderr


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    res = Results()

    def dense():
        out, err = bench(a.dllmq, MODEL, "none,prefix,dual")
        want_bytes = header_weight_bytes(os.path.join(MODEL, "model.safetensors"))
        res.check("read bytes are the projections' and LM head's", out["peak_read_bytes"] == want_bytes,
                  f"{out['peak_read_bytes']} vs {want_bytes} from the header")
        base = out["modes"][0]
        for m in out["modes"]:
            name = m["cache"]
            ideal = base["time_s"] / m["flop_ratio_vs_first"]
            res.check(f"{name}: efficiency = speedup / FLOP ratio",
                      close(m["efficiency"], m["speedup_vs_first"] / m["flop_ratio_vs_first"]))
            res.check(f"{name}: FLOP-count ideal = baseline time / FLOP ratio", close(m["flop_ideal_s"], ideal),
                      f"{m['flop_ideal_s']} vs {ideal}")
            gb = m["nfe"] * want_bytes * 1e-9
            floor = gb / out["peak_read_gbps"]
            res.check(f"{name}: weight-read floor = forwards x weight bytes / read rate",
                      close(m["weight_read_gb"], gb) and close(m["weight_read_floor_s"], floor),
                      f"{m['weight_read_gb']} GB {m['weight_read_floor_s']} s vs {gb} GB {floor} s")
            bound = min(1.0, ideal / floor)
            res.check(f"{name}: efficiency bound = min(1, ideal / floor), in (0, 1]",
                      close(m["efficiency_bound"], bound) and 0.0 < m["efficiency_bound"] <= 1.0,
                      f"{m['efficiency_bound']} vs {bound}")
        res.check("the bound is printed once per mode", err.count("efficiency the reads allow") == 3)

    def moe():
        from make_tiny_checkpoint import make_checkpoint
        path = os.path.join(a.workdir, "moe")
        make_checkpoint("lladamoe", path, layers=2)
        out, err = bench(a.dllmq, path, "none,dual")
        res.check("MoE: no weight-read floor reported",
                  all("efficiency_bound" not in m for m in out["modes"]) and "reads allow" not in err)

    return run_all(res, [dense, moe])


if __name__ == "__main__":
    sys.exit(main())
