#!/usr/bin/env python3
"""Train the small byte-level BPE tokenizer of dllmq-synth-tiny with the `tokenizers` library.

Components (kept to standard ones so the C++ tokenizer can load them):
  pre_tokenizer = Sequence[Split(Qwen2/GPT-4 style regex, one piece per digit, "isolated"),
                           ByteLevel(add_prefix_space=False, use_regex=False)]
  model = BPE over the 256 byte symbols, decoder = ByteLevel, no normalizer.
Special tokens (LLaDA names) are appended after the BPE vocabulary, as in LLaDA:
  <|startoftext|> BOS, <|endoftext|> EOS/pad, <|mdm_mask|> mask,
  <|start_header_id|>, <|end_header_id|>, <|eot_id|>.
Total vocabulary = 512.

`--arch dream` writes the tokenizer of dllmq-synth-dream-tiny instead: the same BPE (ids 0..505
copied from the LLaDA model's tokenizer.json, so ordinary text gets the same ids) with the
Dream-v0 / Qwen2.5 special tokens in Dream's order: <|endoftext|> EOS = pad (506), <|im_start|> (507),
<|im_end|> end of turn (508), <|beginoftext|> BOS (509), <|mask|> (510). Like Dream-v0 (152064
embedding rows, 151667 tokens) the model has one embedding row more than the tokenizer has ids
(512 vs 511). The chat template is Qwen2.5's (default system prompt "You are a helpful
assistant.", no BOS, content not trimmed).

Usage (/usr/bin/python3: Debian's python3 with `tokenizers` from PyPI, python3-jinja2 for the template check):
  /usr/bin/python3 training/make_tokenizer.py [--train data/synth/train.jsonl] [--out models/dllmq-synth-tiny]
  /usr/bin/python3 training/make_tokenizer.py --arch dream [--from models/dllmq-synth-tiny] [--out models/dllmq-synth-dream-tiny]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from atomic_write import atomic_open  # noqa: E402  (the exported model's files, crash-safe)
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# Qwen2 / GPT-4-style split: letters with an optional leading non-letter, single digits (\p{N}),
# punctuation runs, newlines, whitespace.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
VOCAB = 512
# LLaDA-8B-Instruct chat template: BOS before the first message, every message as
# header + "\n\n" + trimmed content + <|eot_id|>, then always the assistant header.
CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}")


DREAM_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|beginoftext|>", "<|mask|>"]
# Qwen2.5's chat template without the tool-calling branches (what Dream-v0-Instruct renders for
# plain conversations): a default system turn unless the first message is one.
DREAM_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}"
    "{%- else %}{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if not (message['role'] == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}")


def render_prompt(question, arch="llada"):
    """The chat-templated prompt string (same output as the chat template for one user message)."""
    if arch == "dream":
        return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" + question
                + "<|im_end|>\n<|im_start|>assistant\n")
    return ("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n" + question.strip()
            + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")


def build_dream(from_dir, out_dir):
    """The LLaDA tokenizer's BPE with Dream's special tokens in place of LLaDA's (same ids 506..)."""
    with open(os.path.join(from_dir, "tokenizer.json")) as f:
        j = json.load(f)
    first = min(t["id"] for t in j["added_tokens"])
    assert first == len(j["model"]["vocab"]), "specials must follow the BPE ids"
    j["added_tokens"] = [{"id": first + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(DREAM_SPECIALS)]
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "tokenizer.json.tmp")
    with open(tmp, "w") as f:
        json.dump(j, f, ensure_ascii=False, indent=2)
    os.replace(tmp, os.path.join(out_dir, "tokenizer.json"))
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|beginoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "mask_token": "<|mask|>", "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "model_max_length": 256,
        "chat_template": DREAM_CHAT_TEMPLATE,
    }
    tmp = os.path.join(out_dir, "tokenizer_config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(cfg, f, indent=2)
    os.replace(tmp, os.path.join(out_dir, "tokenizer_config.json"))
    return Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))


def build(train_path, out_dir):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())

    def texts():  # the text around the special tokens, as the model will see it
        with open(train_path) as f:
            for line in f:
                r = json.loads(line)
                yield "user\n\n" + r["question"]
                yield "assistant\n\n" + r["answer"]

    tok.train_from_iterator(texts(), trainer)
    tok.add_special_tokens(SPECIALS)  # appended after the BPE ids
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    os.makedirs(out_dir, exist_ok=True)
    with atomic_open(os.path.join(out_dir, "tokenizer.json"), "w") as f:
        f.write(tok.to_str(pretty=True))  # what tok.save() writes
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "mask_token": "<|mdm_mask|>", "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "model_max_length": 256,
        "chat_template": CHAT_TEMPLATE,
    }
    with atomic_open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return tok


def check(tok, paths, arch="llada"):
    """decode(encode(x)) == x on all task text, and prompt/answer tokenise independently."""
    n = 0
    eot = "<|im_end|>" if arch == "dream" else "<|eot_id|>"
    for p in paths:
        with open(p) as f:
            for line in f:
                r = json.loads(line)
                full = render_prompt(r["question"], arch) + r["answer"] + eot
                ids = tok.encode(full, add_special_tokens=False).ids
                assert tok.decode(ids, skip_special_tokens=False) == full, full
                sep = (tok.encode(render_prompt(r["question"], arch), add_special_tokens=False).ids
                       + tok.encode(r["answer"] + eot, add_special_tokens=False).ids)
                assert sep == ids, full
                n += 1
    print(f"round trip ok on {n} problems")
    try:  # the Jinja chat template must render exactly render_prompt (transformers' Jinja settings)
        import jinja2
    except ImportError:
        print("jinja2 not installed: chat template not checked")
        return
    tpl = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
        DREAM_CHAT_TEMPLATE if arch == "dream" else CHAT_TEMPLATE)
    with open(paths[0]) as f:
        for line in f:
            q = json.loads(line)["question"]
            got = tpl.render(messages=[{"role": "user", "content": q}], bos_token=SPECIALS[0],
                             add_generation_prompt=True)
            assert got == render_prompt(q, arch), (got, render_prompt(q, arch))
    print("chat template renders like render_prompt")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", default="data/synth/train.jsonl")
    ap.add_argument("--out", default=None, help="default models/dllmq-synth-tiny, "
                    "with --arch dream models/dllmq-synth-dream-tiny")
    ap.add_argument("--arch", choices=["llada", "dream"], default="llada")
    ap.add_argument("--from", dest="from_dir", default="models/dllmq-synth-tiny",
                    help="--arch dream: the LLaDA tokenizer whose BPE is reused")
    a = ap.parse_args()
    if a.arch == "dream":
        t = build_dream(a.from_dir, a.out or "models/dllmq-synth-dream-tiny")
    else:
        t = build(a.train, a.out or "models/dllmq-synth-tiny")
    check(t, ["data/synth/test.jsonl", "data/synth/validation.jsonl"], a.arch)
    for s in (DREAM_SPECIALS if a.arch == "dream" else SPECIALS):
        print(s, t.token_to_id(s))
