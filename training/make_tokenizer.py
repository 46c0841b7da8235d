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

Usage: python3 training/make_tokenizer.py [--train data/synth/train.jsonl] [--out models/dllmq-synth-tiny]
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


def render_prompt(question):
    """The chat-templated prompt string (same output as CHAT_TEMPLATE for one user message)."""
    return ("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n" + question.strip()
            + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")


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


def check(tok, paths):
    """decode(encode(x)) == x on all task text, and prompt/answer tokenise independently."""
    n = 0
    for p in paths:
        with open(p) as f:
            for line in f:
                r = json.loads(line)
                full = render_prompt(r["question"]) + r["answer"] + "<|eot_id|>"
                ids = tok.encode(full, add_special_tokens=False).ids
                assert tok.decode(ids, skip_special_tokens=False) == full, full
                sep = (tok.encode(render_prompt(r["question"]), add_special_tokens=False).ids
                       + tok.encode(r["answer"] + "<|eot_id|>", add_special_tokens=False).ids)
                assert sep == ids, full
                n += 1
    print(f"round trip ok on {n} problems")
    try:  # the Jinja chat template must render exactly render_prompt (transformers' Jinja settings)
        import jinja2
    except ImportError:
        print("jinja2 not installed: chat template not checked")
        return
    tpl = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(CHAT_TEMPLATE)
    with open(paths[0]) as f:
        for line in f:
            q = json.loads(line)["question"]
            assert tpl.render(messages=[{"role": "user", "content": q}], bos_token=SPECIALS[0]) == render_prompt(q)
    print("chat template renders like render_prompt")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", default="data/synth/train.jsonl")
    ap.add_argument("--out", default="models/dllmq-synth-tiny")
    a = ap.parse_args()
    t = build(a.train, a.out)
    check(t, ["data/synth/test.jsonl", "data/synth/validation.jsonl"])
    for s in SPECIALS:
        print(s, t.token_to_id(s))
