"""Held-out GPTQ checkpoints: the embedded models quantized by AutoGPTQ (PyPI), not by dllmq.

Runs inside the venv that tools/make_gptq_heldout.sh creates (AutoGPTQ 0.7.1, transformers
4.38.2, the system's torch); tests/python/test_gptq_heldout.py reads what it writes.

    python gptq_heldout_quantize.py --out DIR

Each embedded model is loaded into the transformers architecture whose tensor names and forward
it shares (Dream -> Qwen2ForCausalLM, same names; LLaDA -> LlamaForCausalLM, names mapped one to
one), in float32 (bf16 widened exactly), and quantized by AutoGPTQ's own GPTQ (Hessian from
calibration prompts of data/synth/validation.jsonl, act-order, packing) on the CPU. AutoGPTQ
0.7.1 refuses to start without CUDA in `from_pretrained` and moves each layer to its CUDA_0
device inside `quantize`; here the model is wrapped directly (no from_pretrained) and CUDA_0 is
pointed at the CPU (and fasterquant's torch.cuda.synchronize(), a timing barrier, made a no-op
when torch has no CUDA): the quantizer, the Hessian update and the packing are the library's, run on
the CPU. torch 1.13 has no fp16 matmul on the CPU, so GPTQ runs on the f32 model and the
projections are handed to the library's pack_model in fp16 (pack_fp16 below): fp16 scales, as the
library's own fp16 flow writes. `save_quantized` writes its safetensors file and quantize_config.json.

Per variant V, DIR gets:
  V.autogptq/       what save_quantized wrote, untouched
  V.asis/           a dllmq model directory: model.safetensors = the library's file (for LLaDA
                    its tensors renamed, Llama names -> LLaDA names, bytes unchanged); the
                    original model's config.json with "quantization_config" = the library's
                    quantize_config.json verbatim; the tokenizer files
  V/                the same without the all-zero `.bias` tensors AutoGPTQ adds to projections
                    that have no bias (listed in V.zero_bias.json)
  V.ref/            reference data:
    ids.json                    token ids (every 5th the mask token)
    logits_f32.npy              transformers' forward of the library's quantized model (its
                                QuantLinear unpack + dequantize, scales widened to f32 so the
                                product is float32(q - z) * s as dllmq defines it), f32
                                activations, bidirectional attention (see quantized_forward)
    deq/model.safetensors       the library's dequantized weights (QuantLinear forward on the
                                identity, f32 scales, bias off) + every other tensor as saved,
                                f32, original names, config.json: for tools/ref_forward.py
  versions.json     the exact package versions used
"""
import argparse
import importlib.metadata as md
import json
import os
import shutil
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"dream": os.path.join(ROOT, "models", "dllmq-synth-dream-tiny"),
          "llada": os.path.join(ROOT, "models", "dllmq-synth-tiny")}
# (name, arch, bits, group_size, desc_act, sym)
VARIANTS = [("dream-int4-g32-act", "dream", 4, 32, True, True),
            ("dream-int4-g64", "dream", 4, 64, False, True),
            ("dream-int8-g128-act", "dream", 8, 128, True, True),
            ("llada-int4-g64-act", "llada", 4, 64, True, True),
            ("llada-int8-g-1", "llada", 8, -1, False, True)]

LLADA_TO_LLAMA = {"attn_norm": "input_layernorm", "ff_norm": "post_attention_layernorm",
                  "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
                  "attn_out": "self_attn.o_proj", "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
                  "ff_out": "mlp.down_proj"}


def llada_to_llama(name):
    top = {"model.transformer.wte.weight": "model.embed_tokens.weight",
           "model.transformer.ln_f.weight": "model.norm.weight",
           "model.transformer.ff_out.weight": "lm_head.weight"}
    if name in top:
        return top[name]
    p = name.split(".")  # model.transformer.blocks.N.<mod>.<tensor>
    assert p[:3] == ["model", "transformer", "blocks"], name
    return "model.layers.%s.%s.%s" % (p[3], LLADA_TO_LLAMA[p[4]], p[5])


def llama_to_llada(name):
    inv = {v: k for k, v in LLADA_TO_LLAMA.items()}
    top = {"model.embed_tokens.weight": "model.transformer.wte.weight",
           "model.norm.weight": "model.transformer.ln_f.weight",
           "lm_head.weight": "model.transformer.ff_out.weight"}
    if name in top:
        return top[name]
    p = name.split(".")  # model.layers.N.<a>[.<b>].<tensor>
    mod = ".".join(p[3:-1])
    return "model.transformer.blocks.%s.%s.%s" % (p[2], inv[mod] if mod in inv else inv[p[3]], p[-1])


def hf_model(arch):
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    src = MODELS[arch]
    c = json.load(open(os.path.join(src, "config.json")))
    sd = {k: v.float() for k, v in load_file(os.path.join(src, "model.safetensors")).items()}
    if arch == "dream":
        cfg = Qwen2Config(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                          intermediate_size=c["intermediate_size"], num_hidden_layers=c["num_hidden_layers"],
                          num_attention_heads=c["num_attention_heads"], num_key_value_heads=c["num_key_value_heads"],
                          max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
                          rope_theta=c["rope_theta"], tie_word_embeddings=c["tie_word_embeddings"],
                          use_sliding_window=False, sliding_window=None, hidden_act="silu",
                          bos_token_id=c["bos_token_id"], eos_token_id=c["eos_token_id"],
                          pad_token_id=c["pad_token_id"], attn_implementation="eager")
        model = Qwen2ForCausalLM(cfg)
    else:
        assert not c["weight_tying"] and not c["include_bias"] and c["block_type"] == "llama"
        cfg = LlamaConfig(vocab_size=c["vocab_size"], hidden_size=c["d_model"],
                          intermediate_size=c["mlp_hidden_size"], num_hidden_layers=c["n_layers"],
                          num_attention_heads=c["n_heads"], num_key_value_heads=c["n_kv_heads"],
                          max_position_embeddings=c["max_sequence_length"], rms_norm_eps=c["rms_norm_eps"],
                          rope_theta=c["rope_theta"], tie_word_embeddings=False, attention_bias=False,
                          hidden_act="silu", bos_token_id=c["bos_token_id"], eos_token_id=c["eos_token_id"],
                          pad_token_id=c["pad_token_id"], attn_implementation="eager")
        model = LlamaForCausalLM(cfg)
        sd = {llada_to_llama(k): v for k, v in sd.items()}
    model.load_state_dict(sd, strict=True)
    model.eval()
    return model.float(), c


def calibration(arch, n):
    from tokenizers import Tokenizer
    t = json.load(open(os.path.join(MODELS[arch], "tokenizer.json")))
    # tokenizers 0.15 (the newest transformers 4.38 accepts) reads BPE merges as "a b" strings only
    t["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in t["model"]["merges"]]
    t["model"].pop("ignore_merges", None)
    tok = Tokenizer.from_str(json.dumps(t))
    out = []
    with open(os.path.join(ROOT, "data", "synth", "validation.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            ids = tok.encode(r["question"] + "\n" + r["answer"]).ids
            out.append({"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)})
            if len(out) == n:
                break
    return out


def quantized_forward(model, ids):
    """Logits of the (quantized) transformers model, bidirectional: a 4-D all-ones mask (Qwen2
    in transformers 4.38 takes it as given; Llama ignores 4-D masks there and adds its causal_mask
    buffer, so that buffer is cleared)."""
    if hasattr(model.model, "causal_mask"):
        model.model.causal_mask.zero_()
    t = torch.tensor([ids])
    mask = torch.ones(1, 1, len(ids), len(ids), dtype=torch.float32)
    with torch.no_grad():
        return model(input_ids=t, attention_mask=mask).logits[0].double().numpy()


def write_safetensors(path, tensors):
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in tensors.items()}, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--calib", type=int, default=32, help="calibration prompts")
    ap.add_argument("--only", default="", help="comma separated variant names")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))

    import auto_gptq
    import auto_gptq.modeling._base as agbase
    from auto_gptq import BaseQuantizeConfig
    from auto_gptq.modeling.llama import LlamaGPTQForCausalLM
    from auto_gptq.modeling.qwen2 import Qwen2GPTQForCausalLM
    from safetensors.torch import load_file
    agbase.CUDA_0 = torch.device("cpu")  # quantize() moves each layer to CUDA_0: keep it here
    if not torch.cuda.is_available():
        torch.cuda.synchronize = lambda *args, **kw: None  # fasterquant's timing barrier; nothing to wait for
    lib_pack = agbase.pack_model

    def pack_fp16(model, quantizers, *args, **kw):
        # AutoGPTQ stores scales (and bias) in the dtype of the linear it packs; its own flow
        # loads the model in fp16 (from_pretrained(torch_dtype=float16)), which the CPU cannot
        # run (torch 1.13 has no Half matmul on the CPU). So GPTQ runs in f32 and the projections
        # are handed to the library's pack_model in fp16: fp16 scales, as every GPTQ checkpoint.
        for n, m in model.named_modules():
            if n in quantizers:
                m.half()
        return lib_pack(model, quantizers, *args, **kw)
    agbase.pack_model = pack_fp16

    os.makedirs(a.out, exist_ok=True)
    vers = {p: md.version(p) for p in ("auto-gptq", "transformers", "torch", "accelerate", "peft",
                                       "safetensors", "tokenizers", "numpy")}
    vers["python"] = sys.version.split()[0]
    json.dump(vers, open(os.path.join(a.out, "versions.json"), "w"), indent=2)
    rng = np.random.default_rng(1234)
    for name, arch, bits, group, act, sym in VARIANTS:
        if a.only and name not in a.only.split(","):
            continue
        print("== %s" % name, flush=True)
        model, orig_cfg = hf_model(arch)
        vocab = model.config.vocab_size
        mask_id = int(orig_cfg["mask_token_id"])
        qc = BaseQuantizeConfig(bits=bits, group_size=group, desc_act=act, sym=sym)
        cls = Qwen2GPTQForCausalLM if arch == "dream" else LlamaGPTQForCausalLM
        gm = cls(model, False, qc)
        gm.quantize(calibration(arch, a.calib), cache_examples_on_gpu=False)
        raw = os.path.join(a.out, name + ".autogptq")
        shutil.rmtree(raw, ignore_errors=True)
        gm.save_quantized(raw, use_safetensors=True)

        # the dllmq directory: the library's file (renamed tensors for LLaDA), config + its quantize_config
        d = os.path.join(a.out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        lib_file = [f for f in os.listdir(raw) if f.endswith(".safetensors")]
        assert len(lib_file) == 1, lib_file
        lib_path = os.path.join(raw, lib_file[0])
        # AutoGPTQ 0.7.1's make_quant gives every QuantLinear a bias (hard-coded True): a
        # projection without one is saved with an all-zero `.bias`. V.asis keeps them; V drops
        # exactly those (asserted all zero), every other tensor as the library wrote it.
        qconf = json.load(open(os.path.join(raw, "quantize_config.json")))
        cfg = dict(orig_cfg)
        cfg["quantization_config"] = qconf
        orig_names = set(load_file(os.path.join(MODELS[arch], "model.safetensors")))
        sd = load_file(lib_path)
        if arch == "llada":
            sd = {llama_to_llada(k): v for k, v in sd.items()}
        zero_bias = sorted(k for k in sd if k.endswith(".bias") and k not in orig_names)
        assert all(float(sd[k].abs().max()) == 0.0 for k in zero_bias), "a non-zero bias the model lacks"
        for dd, drop in ((d, zero_bias), (d + ".asis", [])):
            shutil.rmtree(dd, ignore_errors=True)
            os.makedirs(dd)
            if arch == "dream" and not drop:
                shutil.copy(lib_path, os.path.join(dd, "model.safetensors"))
            else:
                write_safetensors(os.path.join(dd, "model.safetensors"),
                                  {k: v for k, v in sd.items() if k not in drop})
            json.dump(cfg, open(os.path.join(dd, "config.json"), "w"), indent=2)
            for f in os.listdir(MODELS[arch]):
                if f.startswith("tokenizer") or f == "generation_config.json":
                    shutil.copy(os.path.join(MODELS[arch], f), dd)
        json.dump(zero_bias, open(os.path.join(d, "..", name + ".zero_bias.json"), "w"))

        # references from the library's own dequantization
        ref = os.path.join(a.out, name + ".ref")
        shutil.rmtree(ref, ignore_errors=True)
        os.makedirs(os.path.join(ref, "deq"))
        ids = rng.integers(0, vocab, size=40)
        ids[::5] = mask_id
        ids = [int(i) for i in ids]
        json.dump(ids, open(os.path.join(ref, "ids.json"), "w"))
        qmodel = gm.model
        qlayers = {n: m for n, m in qmodel.named_modules() if hasattr(m, "qweight")}
        print("   QuantLinear class: %s.%s, %d layers" % (type(next(iter(qlayers.values()))).__module__,
                                                         type(next(iter(qlayers.values()))).__name__, len(qlayers)))
        saved = load_file(lib_path)
        assert all(saved[n + ".scales"].dtype == torch.float16 for n in qlayers)
        qmodel.float()  # scales and biases widened: the product float32(q - z) * s, as dllmq defines it
        deq = {}
        for n, m in qlayers.items():
            bias, m.bias = m.bias, None
            with torch.no_grad():
                w = m(torch.eye(m.infeatures, dtype=torch.float32)).t().contiguous()  # [n, k]
            m.bias = bias
            deq[n + ".weight"] = w
        np.save(os.path.join(ref, "logits_f32.npy"), quantized_forward(qmodel, ids))
        tensors = {k: v.float() for k, v in saved.items()
                   if not k.endswith((".qweight", ".qzeros", ".scales", ".g_idx"))}
        tensors.update(deq)
        if arch == "llada":
            tensors = {llama_to_llada(k): v for k, v in tensors.items()}
        write_safetensors(os.path.join(ref, "deq", "model.safetensors"), tensors)
        json.dump(orig_cfg, open(os.path.join(ref, "deq", "config.json"), "w"), indent=2)
        print("   wrote %s (%s)" % (d, ", ".join("%s=%s" % kv for kv in sorted(qconf.items()))), flush=True)
    print("versions: %s" % json.dumps(vers))
    print("auto_gptq from %s" % auto_gptq.__file__)


if __name__ == "__main__":
    main()
