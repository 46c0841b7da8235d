#!/usr/bin/env python3
"""Time upstream Fast-dLLM (NVlabs/Fast-dLLM, llada/) decoding on a LLaDA checkpoint.

This file contains no upstream code: it imports `generate.py` and `model/modeling_llada.py`
from the directory given with --fastdllm (a checkout of Fast-dLLM's `llada/` folder) and calls
its `generate`, `generate_with_prefix_cache` and `generate_with_dual_cache` unchanged.

    run_upstream.py --fastdllm /tmp/fastdllm/llada -m /tmp/benchmodel \
        --prompt-ids-file /tmp/prompt.txt --gen-length 128 --block-length 32 --steps 128 \
        --modes none,prefix,dual --threads 2 --json

Prints one JSON object: per mode, the generated tokens, NFE, wall time, process CPU time and
tokens/s (generated tokens / wall seconds of the generate call; model load not counted).

Compatibility shims (only applied when the running torch lacks the API; torch < 2.0):
  * `torch.compile` -> identity decorator (upstream wraps its SDPA helper in @torch.compile()),
  * `F.scaled_dot_product_attention` -> softmax(q k^T / sqrt(d)) v in plain torch ops
    (what torch 2's "math" SDPA backend computes; upstream calls it with no mask, non-causal),
  * `torch.backends.cuda.enable_{flash,mem_efficient,math}_sdp` -> no-op (CUDA-only switches).
Both are reported in the JSON under "shims".
"""
import argparse
import json
import math
import os
import sys
import time


def install_shims(torch):
    import torch.nn.functional as F

    shims = []
    if not hasattr(torch, "compile"):
        def _compile(fn=None, **kw):
            if fn is None:
                return lambda f: f
            return fn
        torch.compile = _compile
        shims.append("torch.compile=identity")
    if not hasattr(F, "scaled_dot_product_attention"):
        def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
            assert attn_mask is None and not is_causal and dropout_p == 0.0
            s = scale if scale is not None else 1.0 / math.sqrt(q.size(-1))
            att = torch.matmul(q, k.transpose(-2, -1)) * s
            return torch.matmul(torch.softmax(att, dim=-1), v)
        F.scaled_dot_product_attention = _sdpa
        shims.append("F.scaled_dot_product_attention=math")
    import torch.backends.cuda as tbc
    for name in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp"):
        if not hasattr(tbc, name):  # CUDA-only kernel switches upstream sets at model init
            setattr(tbc, name, lambda enabled: None)
            shims.append(f"torch.backends.cuda.{name}=no-op")
    return shims


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fastdllm", required=True, help="path to Fast-dLLM's llada/ folder (holds generate.py, model/)")
    ap.add_argument("-m", "--model", required=True, help="LLaDA checkpoint dir (config.json + safetensors)")
    ap.add_argument("--prompt-ids-file", help="file of prompt token ids (comma or whitespace separated)")
    ap.add_argument("--prompt-ids", help="prompt token ids, comma separated")
    ap.add_argument("--gen-length", type=int, default=128)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--modes", default="none,prefix,dual", help="comma separated: none, prefix, dual")
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode (each one reported)")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--mask-id", type=int, help="default: mask_token_id from config.json")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    a = ap.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    shims = install_shims(torch)

    sys.path.insert(0, os.path.abspath(a.fastdllm))
    import generate as up  # upstream llada/generate.py (imports model.modeling_llada)
    from model.modeling_llada import LLaDAModelLM

    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    mask_id = a.mask_id if a.mask_id is not None else cfg["mask_token_id"]

    if a.prompt_ids_file:
        with open(a.prompt_ids_file) as f:
            text = f.read()
    elif a.prompt_ids:
        text = a.prompt_ids
    else:
        ap.error("give --prompt-ids-file or --prompt-ids")
    ids = [int(t) for t in text.replace(",", " ").split()]

    dtype = getattr(torch, a.dtype)
    t0 = time.perf_counter()
    model = LLaDAModelLM.from_pretrained(a.model, torch_dtype=dtype).eval()
    load_s = time.perf_counter() - t0
    prompt = torch.tensor(ids, dtype=torch.long).unsqueeze(0)

    fns = {"none": up.generate, "prefix": up.generate_with_prefix_cache, "dual": up.generate_with_dual_cache}
    rows = []
    for mode in a.modes.split(","):
        fn = fns[mode]
        for r in range(a.repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            with torch.no_grad():
                x, nfe = fn(model, prompt, steps=a.steps, gen_length=a.gen_length, block_length=a.block_length,
                            temperature=0.0, remasking="low_confidence", mask_id=mask_id)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            toks = x[0, len(ids):].tolist()
            row = {"cache": mode, "rep": r, "nfe": int(nfe), "time_s": wall, "cpu_s": cpu,
                   "tokens_per_s": len(toks) / wall, "tokens": toks}
            rows.append(row)
            print(f"  upstream {mode:<7} NFE {nfe:>4}  {wall:8.2f} s  {len(toks) / wall:8.2f} tok/s  cpu {cpu:8.2f} s",
                  file=sys.stderr, flush=True)
    out = {"impl": "fast-dllm", "model": a.model, "prompt_length": len(ids), "gen_length": a.gen_length,
           "block_length": a.block_length, "steps": a.steps, "threads": a.threads, "dtype": a.dtype,
           "torch": torch.__version__, "shims": shims, "load_s": load_s, "modes": rows}
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
