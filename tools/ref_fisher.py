#!/usr/bin/python3
"""float64 numpy reference of the masked-diffusion loss of one decoding forward, with any single
K (pre-RoPE) or V element overridden: the finite-difference check of dllmq's Fisher gradients
(METHODS.md §2, docs/methods.md "Fisher weights").

Written from METHODS.md §2-3 (the loss) on top of tools/ref_forward.py's forward (its kv_hook
perturbs fresh rows; cached rows enter as its `past`), not from dllmq's C++:

    forward:  the rows `ids` at positions pos0 .. pos0+T-1 are computed; every layer attends
              (bidirectionally, no mask) to those rows and to the cached rows given, whose K is
              given pre-RoPE (rotated here at its own position) and V as is.
    loss:     sum_i w_i * (logsumexp(z_i) - z_i[target_i]),  z_i = raw logits row `row_i`
              (LLaDA's SFT weighting makes w_i = 1 / (masked generated positions); the caller
              passes the weights).

A perturbation (layer, pos, "k"|"v", channel, delta) adds delta to that pre-RoPE K or V element
before the attention of that layer (cached or fresh row), so that
    (loss(+h) - loss(-h)) / 2h  ~  d loss / d element.
"""
import numpy as np


def softmax_ce(z, target):
    z = np.asarray(z, dtype=np.float64)
    m = z.max()
    return float(m + np.log(np.exp(z - m).sum()) - z[target])


def step_loss(model, ids, pos0, cached, terms, pert=None):
    """model: tools/ref_forward.RefModel. cached: list per layer of (pos [C], k_pre [C, KV, hd],
    v [C, KV, hd]) or None when nothing is cached. terms: [(row, target, weight)]."""
    ids = np.asarray(ids, dtype=np.int64)
    T = ids.shape[0]
    KV, hd = model.n_kv, model.hd
    past = None
    if cached is not None:
        past = []
        for li in range(model.n_layers):
            cpos = np.asarray(cached[li][0], dtype=np.int64)
            ck = np.array(cached[li][1], dtype=np.float64).reshape(len(cpos), KV, hd)
            cv = np.array(cached[li][2], dtype=np.float64).reshape(len(cpos), KV, hd)
            if pert is not None and pert[0] == li and pert[1] in cpos:
                _, pos, which, ch, delta = pert
                g, c = divmod(ch, hd)
                (ck if which == "k" else cv)[int(np.nonzero(cpos == pos)[0][0]), g, c] += delta
            past.append((model.rope(ck, cpos), cv, cpos))

    def hook(li, k, v):
        if pert is None or pert[0] != li or (cached is not None and pert[1] in cached[li][0]):
            return k, v
        _, pos, which, ch, delta = pert
        r = pos - pos0
        assert 0 <= r < T, "perturbed position is not read"
        k, v = k.copy(), v.copy()
        g, c = divmod(ch, hd)
        (k if which == "k" else v)[r, g, c] += delta
        return k, v

    logits = model.forward(ids, pos0 + np.arange(T), past=past, kv_hook=hook)
    return sum(w * softmax_ce(logits[row - pos0], target) for row, target, w in terms)


def fd_gradient(model, ids, pos0, cached, terms, layer, pos, which, channel, h=1e-4):
    """Central finite difference of step_loss with respect to one pre-RoPE K / V element."""
    up = step_loss(model, ids, pos0, cached, terms, (layer, pos, which, channel, h))
    dn = step_loss(model, ids, pos0, cached, terms, (layer, pos, which, channel, -h))
    return (up - dn) / (2 * h)


def diffusion_terms(canvas, P, target, mask_id, shift, pos0, n):
    """METHODS.md §2's loss terms of a forward computing rows [pos0, pos0 + n) of `canvas`: every
    masked generated position p whose raw row p - shift is computed, target[p - P], weight
    1 / (masked generated positions)."""
    masked = [p for p in range(P, len(canvas)) if canvas[p] == mask_id]
    out = []
    for p in masked:
        row = p - shift
        if pos0 <= row < pos0 + n:
            out.append((row, int(target[p - P]), 1.0 / len(masked)))
    return out
