# scratch: can the model learn "a op b = c" (2-digit) under the LLaDA SFT objective, fast?
import os, sys, math, random, time, torch, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from model import Config, LLaDA, Specials, render_prompt
from tokenizers import Tokenizer
tok = Tokenizer.from_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "models", "dllmq-synth-tiny", "tokenizer.json"))
sp = Specials(tok)
GEN = int(sys.argv[2]) if len(sys.argv) > 2 else 16
steps = int(sys.argv[1]); torch.manual_seed(0); random.seed(0); torch.set_num_threads(int(os.environ.get("TH", "2")))
def sample(rng):
    a = rng.randint(10, 99)
    if rng.random() < 0.5:
        b = rng.randint(0, 99 - a); op = "+"; c = a + b
    else:
        b = rng.randint(0, a); op = "-"; c = a - b
    q = f"Compute {a} {op} {b}."
    return q, (f"{a:02d}{op}{b:02d}={c:02d}" if os.environ.get("FMT") == "tight" else f"{a:02d} {op} {b:02d} = {c:02d}")
rng = random.Random(0)
def enc(q, a):
    p = tok.encode(render_prompt(q), add_special_tokens=False).ids
    x = tok.encode(a + "<|eot_id|>", add_special_tokens=False).ids
    return p, x + [sp.eos] * (GEN - len(x))
m = LLaDA(Config(vocab_size=512))
opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
erng = random.Random(123); evs = [enc(*sample(erng)) for _ in range(300)]
def evaluate():
    m.eval(); ok = 0
    with torch.no_grad():
        for p, x in evs:
            ids = p + x
            c1 = len(p) + (6 if os.environ.get("FMT") == "tight" else 8)  # a1 a0 Ġop Ġ b1 b0 Ġ= Ġ c1 c0
            xx = torch.tensor([ids]); xx[0, c1:] = sp.mask
            pr = m(xx)[0].argmax(-1)
            ok += int(pr[c1] == ids[c1] and pr[c1+1] == ids[c1+1])
    m.train(); return ok / len(evs)
t0 = time.time()
for step in range(steps):
    lr = float(os.environ.get("LR", "1e-3")) * min(1, (step + 1) / 100)
    for g in opt.param_groups: g["lr"] = lr
    batch = [enc(*sample(rng)) for _ in range(64)]
    P = max(len(p) for p, _ in batch); T = P + GEN
    x0 = torch.full((64, T), sp.eos); ans = torch.zeros(64, T, dtype=torch.bool); valid = torch.zeros(64, T, dtype=torch.bool)
    for r, (p, x) in enumerate(batch):
        x0[r, :len(p)] = torch.tensor(p); x0[r, len(p):len(p)+GEN] = torch.tensor(x)
        ans[r, len(p):len(p)+GEN] = True; valid[r, :len(p)+GEN] = True
    t = torch.rand(64, 1)
    if os.environ.get('STRAT'): t = ((torch.arange(64.)[:, None] + t[:1]) / 64)
    pm = 0.999 * t + 0.001
    masked = (torch.rand(64, T) < pm) & ans
    xt = torch.where(masked, torch.full_like(x0, sp.mask), x0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lg = m(xt, valid)
    ce = F.cross_entropy(lg[masked].float(), x0[masked], reduction="none")
    loss = (ce / pm.expand_as(masked)[masked]).sum() / (GEN * 64) if os.environ.get("W", "inv") == "inv" else ce.mean()
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    if (step + 1) % 100 == 0:
        print(step + 1, f"loss {loss.item():.3f} result-acc {evaluate():.3f} {time.time()-t0:.0f}s", flush=True)
