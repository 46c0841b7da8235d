#!/usr/bin/env python3
"""Train dllmq-synth-tiny: a ~3.4 M-parameter LLaDA-architecture masked-diffusion LM on the
synthetic word problems (data/synth), with LLaDA's SFT objective; or, with `--arch dream`,
dllmq-synth-dream-tiny: the Dream-v0 architecture (GQA 8 query / 2 KV heads, q/k/v biases, untied
head) trained with Dream's objective (below).

PyTorch: Debian 12 `python3-torch` (1.13, CPU) run with /usr/bin/python3; BLAS via
update-alternatives -> OpenBLAS (openmp). `tokenizers` from PyPI.

Objective (LLaDA SFT): sequence = chat-templated prompt | answer tokens + <|eot_id|> + EOS
padding up to GEN_LEN. Prompt tokens are never masked; every answer/padding position is
masked independently with prob p = (1-eps)*t + eps, t ~ U(0,1) per sample. Loss = sum over
masked positions of CE/p, divided by the answer length (GEN_LEN, EOS padding included as in
LLaDA) and averaged over the batch.
With `--mask-shots` (k-shot rows, issue 30) the solved shots' answers inside the prompt are masked
too, with their own t ~ U(0,1) per sample, and their 1/t-weighted CE, averaged over each row's
shot-answer tokens, is added with weight --shot-weight: each forward over a ~600-token prompt then
teaches ~7 in-context answers instead of one. The curve's loss column is then that sum.
`--loss-weight uniform` drops the 1/t weight (mean CE over the masked positions): it learned the
arithmetic twice as fast in a micro-experiment whose question states the operands (training/logs/micro/),
but on the stories, whose later lines compute from operands in the masked answer, the 1/t weight is what
let it be learned (model card, runs 16-20); the shipped run uses the LLaDA loss.

Dream objective (`--arch dream`): the same masked-diffusion loss on the same sequence layout
(Qwen2.5 chat template, answer + <|im_end|> + <|endoftext|> padding), with Dream's logit shift:
the prediction for masked position i is read from the model's raw output at position i - 1
(`model.shift_logits`, as every Dream sampler does), so the model keeps the autoregressive
"hidden state i predicts token i+1" layout Dream inherits from Qwen2.5. The loss weight is the
continuous-time masked-diffusion ELBO's 1/t, the weight of Dream's objective (its CART token-level
reweighting is a pretraining device and is not used here). The prompt is non-empty, so position
i - 1 always exists.

Precision: with --bf16 the matmuls run under CPU bf16 autocast (oneDNN, AVX512-BF16: a step
takes half the time of fp32 here) with fp32 master weights, AdamW state, RMSNorm, softmax and
loss; the residual stream stays fp32.

Run (the shipped run is training/run_seed0.sh; resumes from the last checkpoint automatically):
  /usr/bin/python3 training/train.py --seed 0 --steps 4000 --batch 64 --bf16 --threads 2 --no-bucket
Continued training on another mix (new optimizer and schedule from a checkpoint's weights):
  train.py --name NAME --init-from training/checkpoints/seed0.pt --train-files a.jsonl,b.jsonl ...
Checkpoints go to training/checkpoints/ (not committed); the learning curve to
training/logs/curve_{name}.csv (name: seed{seed} unless --name).
"""
import argparse
import csv
import math
import os
import random
import re
import time

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from model import Config, Specials, end_of_turn, exact_match, load_jsonl, make_model, render_prompt, shift_logits

GEN_LEN = 48  # smallest multiple of 16 holding every answer + <|eot_id|> + >= 1 EOS (max is 38)

# dllmq-synth-dream-tiny: Dream-v0 fields at a tiny scale (GQA 4:1, q/k/v biases, eps 1e-6 as Qwen2.5)
DREAM_CONFIG = dict(d_model=256, n_heads=8, n_kv_heads=2, n_layers=4, mlp_hidden_size=768,
                    rope_theta=10000.0, rms_norm_eps=1e-6, max_sequence_length=512, qkv_bias=True, arch="dream")


SHOT_ANSWER = re.compile(r"\nAnswer:( .*?)\n\n", re.S)  # a solved shot's answer in a k-shot question


def shot_answer_flags(rendered, question, offsets):
    """Per prompt token: True where the token lies inside a solved shot's answer (the text after
    "Answer:" up to the blank line) of a k-shot question (training/make_kshot.py). Char offsets
    from the tokenizer keep this exact whatever the BPE merges; a token straddling a span edge is
    left out."""
    base = rendered.find(question.strip())
    spans = [(base + m.start(1), base + m.end(1)) for m in SHOT_ANSWER.finditer(question.strip())]
    return [any(s <= b and e <= t for s, t in spans) for b, e in offsets]


def tokenize(tok, rows, sp, gen_len=GEN_LEN, shot_flags=False):
    rendered = [render_prompt(r["question"], sp.arch) for r in rows]
    prompts = tok.encode_batch(rendered, add_special_tokens=False)
    answers = tok.encode_batch([r["answer"] + end_of_turn(sp.arch) for r in rows], add_special_tokens=False)
    data = []
    for r, text, p, a in zip(rows, rendered, prompts, answers):
        assert len(a.ids) < gen_len, f"answer does not fit gen length {gen_len} with one EOS"
        flags = shot_answer_flags(text, r["question"], p.offsets) if shot_flags else None
        data.append((p.ids, a.ids + [sp.eos] * (gen_len - len(a.ids)), flags))
    return data


def make_batch(data, idx, sp, gen, t_max=1.0):
    """Right-padded batch: ids, clean targets, attention validity, answer-region mask.
    t ~ U(0, t_max) per sample (LLaDA: t_max = 1). Rows tokenized with shot flags also get their
    shots' answers masked, with a second, independent t per sample: `shot_masked` and `p_shot`
    (None without flags)."""
    B, G = len(idx), len(data[idx[0]][1])  # G: generation length (answers are pre-padded)
    T = max(len(data[i][0]) for i in idx) + G
    x0 = torch.full((B, T), sp.eos, dtype=torch.long)
    valid = torch.zeros(B, T, dtype=torch.bool)
    ans = torch.zeros(B, T, dtype=torch.bool)
    shots = torch.zeros(B, T, dtype=torch.bool)
    for r, i in enumerate(idx):
        p, a, flags = data[i]
        x0[r, :len(p)] = torch.tensor(p)
        x0[r, len(p):len(p) + G] = torch.tensor(a)
        valid[r, :len(p) + G] = True
        ans[r, len(p):len(p) + G] = True
        if flags is not None:
            shots[r, :len(p)] = torch.tensor(flags)
    eps = 1e-3
    t = torch.rand(B, 1, generator=gen) * t_max
    p_mask = (1 - eps) * t + eps  # [B, 1]
    masked = (torch.rand(B, T, generator=gen) < p_mask) & ans
    shot_masked, p_shot = None, None
    if data[idx[0]][2] is not None:
        p_shot = (1 - eps) * torch.rand(B, 1, generator=gen) + eps
        shot_masked = (torch.rand(B, T, generator=gen) < p_shot) & shots
    hide = masked if shot_masked is None else masked | shot_masked
    xt = torch.where(hide, torch.full_like(x0, sp.mask), x0)
    return xt, x0, valid, masked, p_mask, shot_masked, p_shot


def batch_indices(data, step, a, group=8):
    """Length bucketing to cut padding (CPU time): draw group*batch random problems per
    `group` steps, sort them by prompt length, cut into `group` batches, visit in random order."""
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + 999_983 * (step // group + 1))
    idx = torch.randint(len(data), (group * a.batch,), generator=g).tolist()
    idx.sort(key=lambda i: len(data[i][0]))
    k = torch.randperm(group, generator=g)[step % group].item()
    return idx[k * a.batch:(k + 1) * a.batch]


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    prog = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * prog))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--beta2", type=float, default=0.95, help="AdamW beta2 (PyTorch's default is 0.999)")
    ap.add_argument("--gen-len", type=int, default=GEN_LEN, help="answer + EOS padding length; "
                    "shorter for a curriculum stage of one-line drills (positions are relative: RoPE)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stop-at", type=int, default=0, help="stop (and checkpoint) after this step; "
                    "the lr schedule still uses --steps")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast for the matmuls (fp32 master weights, "
                    "fp32 norms/softmax/loss): 2x faster on AVX512-BF16 CPUs")
    ap.add_argument("--loss-weight", choices=["inv_t", "uniform"], default="inv_t",
                    help="inv_t: LLaDA's sum of CE/t over masked positions / (batch * gen length); "
                    "uniform: mean CE over the batch's masked positions (no 1/t; lower variance)")
    ap.add_argument("--t-max", type=float, default=1.0,
                    help="mask ratio t ~ U(0, t-max) (LLaDA: 1). A curriculum stage with light masking "
                    "(e.g. 0.3) shows more result digits with their operands visible in the answer line")
    ap.add_argument("--no-bucket", action="store_true", help="uniform random batches, no length bucketing")
    ap.add_argument("--ckpt-every", type=int, default=250)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--n-val-eval", type=int, default=200)
    ap.add_argument("--arch", choices=["llada", "dream"], default="llada")
    ap.add_argument("--model-dir", default="", help="tokenizer source (default: models/dllmq-synth-tiny, "
                    "with --arch dream models/dllmq-synth-dream-tiny)")
    ap.add_argument("--data", default="data/synth")
    ap.add_argument("--train-files", default="train.jsonl",
                    help="comma-separated jsonl files under --data, concatenated (uniform mix by size)")
    ap.add_argument("--val-files", default="validation.jsonl",
                    help="comma-separated; the first is the curve's val_exact_match column")
    ap.add_argument("--init-from", default="", help="start a fresh run (new optimizer and schedule) "
                    "from this checkpoint's weights (a .pt, or an exported model folder of the same arch): "
                    "continued training / fine-tuning")
    ap.add_argument("--init-from-llada", default="", help="--arch dream: start from an exported LLaDA "
                    "model folder's weights (init_from_llada.py), as Dream-v0 started from Qwen2.5")
    ap.add_argument("--name", default="", help="checkpoint and curve name (default seed{seed})")
    ap.add_argument("--mask-shots", action="store_true", help="k-shot rows: also mask the solved shots' "
                    "answers (an independent t per sample) and learn them, weighted by --shot-weight: every "
                    "shot is one more in-context question per forward (issue 30's long-prompt fine-tune)")
    ap.add_argument("--shot-weight", type=float, default=1.0)
    ap.add_argument("--max-seq-len", type=int, default=512, help="config max_sequence_length (RoPE has no "
                    "table: this is what the exported config.json declares; the k-shot variant needs 1024)")
    ap.add_argument("--ckpt-dir", default="training/checkpoints")
    ap.add_argument("--log-dir", default="training/logs")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    model_dir = a.model_dir or ("models/dllmq-synth-dream-tiny" if a.arch == "dream" else "models/dllmq-synth-tiny")
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    sp = Specials(tok, a.arch)
    if a.arch == "dream":  # one embedding row more than the tokenizer has ids, as Dream-v0 has
        cfg = Config(vocab_size=512, **DREAM_CONFIG)
    else:
        cfg = Config(vocab_size=tok.get_vocab_size(), max_sequence_length=a.max_seq_len)
    t0 = time.time()
    train = tokenize(tok, [r for f in a.train_files.split(",") for r in load_jsonl(os.path.join(a.data, f))], sp,
                     a.gen_len, a.mask_shots)
    val_sets = [load_jsonl(os.path.join(a.data, f))[:a.n_val_eval] for f in a.val_files.split(",")]
    val_cols = ["val_exact_match"] + ["val_" + f.removesuffix(".jsonl") for f in a.val_files.split(",")[1:]]
    print(f"tokenized {len(train)} train problems in {time.time() - t0:.1f}s", flush=True)

    model = make_model(cfg)
    print(f"params: {sum(p.numel() for p in model.parameters()):,}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]  # norm weights
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, a.beta2))

    os.makedirs(a.ckpt_dir, exist_ok=True)
    os.makedirs(a.log_dir, exist_ok=True)
    name = a.name or f"seed{a.seed}"
    ckpt = os.path.join(a.ckpt_dir, f"{name}.pt")
    curve = os.path.join(a.log_dir, f"curve_{name}.csv")
    step, elapsed = 0, 0.0
    if os.path.exists(ckpt):  # resume
        s = torch.load(ckpt)
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])
        step, elapsed = s["step"], s["elapsed"]
        print(f"resumed from {ckpt} at step {step}", flush=True)
        with open(curve) as f:  # drop curve rows logged after the checkpoint
            rows = [r for r in csv.reader(f) if r[0] == "step" or int(r[0]) <= step]
        with open(curve, "w") as f:
            csv.writer(f).writerows(rows)
    else:
        if a.init_from:
            if os.path.isdir(a.init_from):  # an exported model folder (bf16 weights, released names)
                from evaluate import load_model
                model.load_state_dict(load_model(a.init_from)[0].state_dict())
            else:
                model.load_state_dict(torch.load(a.init_from)["model"])
            print(f"initialised from {a.init_from}", flush=True)
        if a.init_from_llada:
            from init_from_llada import init_dream_from_llada
            assert a.arch == "dream"
            init_dream_from_llada(model, a.init_from_llada)
            print(f"initialised from the LLaDA weights in {a.init_from_llada}", flush=True)
        with open(curve, "w") as f:
            csv.writer(f).writerow(["step", "loss", "lr", "elapsed_s"] + val_cols)

    model.train()
    run_loss, run_n, t_last = 0.0, 0, time.time()
    while step < min(a.steps, a.stop_at or a.steps):
        # batch indices and masks depend only on (seed, step): resuming reproduces the run
        if a.no_bucket:  # plain random batches (used for steps 1-250 of the shipped run)
            gen = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
            idx = torch.randint(len(train), (a.batch,), generator=gen).tolist()
        else:
            idx = batch_indices(train, step, a)
            gen = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
        xt, x0, valid, masked, p_mask, shot_masked, p_shot = make_batch(train, idx, sp, gen, a.t_max)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = shift_logits(model, model(xt, valid))  # Dream: position i from raw i - 1
        ce = F.cross_entropy(logits[masked].float(), x0[masked], reduction="none")
        if a.loss_weight == "inv_t":
            w = (1.0 / p_mask.expand_as(masked))[masked]
            loss = (ce * w).sum() / (a.gen_len * a.batch)
        else:
            loss = ce.sum() / max(1, ce.numel())
        if shot_masked is not None:  # shots' answers: per-sample 1/t-weighted mean over their tokens
            ce_s = F.cross_entropy(logits[shot_masked].float(), x0[shot_masked], reduction="none")
            w_s = (1.0 / p_shot.expand_as(shot_masked))[shot_masked]
            per_row = torch.zeros(len(idx)).index_add_(0, shot_masked.nonzero()[:, 0], ce_s * w_s)
            n_shot = torch.tensor([max(1, sum(train[i][2])) for i in idx], dtype=torch.float)
            loss = loss + a.shot_weight * (per_row / n_shot).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        run_loss += loss.item()
        run_n += 1
        now = time.time()
        elapsed += now - t_last
        t_last = now

        vals = []
        if step % a.eval_every == 0 or step == a.steps:
            model.eval()
            vals = [f"{exact_match(model, tok, rows, a.gen_len, sp)[0]:.3f}" for rows in val_sets]
            model.train()
            t_last = time.time()  # evaluation time is not training time
        if step % 50 == 0 or vals:
            with open(curve, "a") as f:
                csv.writer(f).writerow([step, f"{run_loss / max(run_n, 1):.4f}", f"{lr_at(step - 1, a):.2e}",
                                        f"{elapsed:.0f}"] + (vals or [""] * len(val_cols)))
            print(f"step {step} loss {run_loss / max(run_n, 1):.4f} lr {lr_at(step - 1, a):.2e} "
                  f"t {elapsed:.0f}s" + "".join(f" {c} {v}" for c, v in zip(val_cols, vals)), flush=True)
            run_loss, run_n = 0.0, 0
        if step % a.ckpt_every == 0 or step in (a.steps, a.stop_at):
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "elapsed": elapsed, "config": cfg.__dict__}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
    print("done", flush=True)


if __name__ == "__main__":
    main()
