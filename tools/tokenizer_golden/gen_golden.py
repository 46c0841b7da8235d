#!/usr/bin/env python3
"""Generate the tokenizer golden fixtures under tests/data/tokenizer/.

Expected ids come from the reference libraries: `tokenizers` (HF tokenizer.json files, some trained
here) and `tiktoken` (the Qwen rank file + Qwen2 pattern + Dream specials). The C++ tests compare
against these files, so the test suite itself needs no PyPI package.

    python3 -m venv .venv-tok && .venv-tok/bin/pip install tokenizers tiktoken jinja2
    .venv-tok/bin/python tools/tokenizer_golden/gen_golden.py

Everything is seeded; rerunning with the same library versions (tokenizers 0.23.3, tiktoken 0.14.0,
jinja2 3.1.6, Python 3.11) gives identical files. The Qwen golden needs ../shared/data (or
$DLLMQ_SHARED_DATA); the synth-tiny copy needs models/dllmq-synth-tiny/.
"""

import argparse
import gzip
import json
import os
import random
import shutil
import sys
import unicodedata

import tiktoken
import tokenizers
from tiktoken.load import load_tiktoken_bpe
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer")
SHARED = os.environ.get("DLLMQ_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))

QWEN_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
            r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
                 "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                 "<|repo_name|>", "<|file_sep|>", "<|beginoftext|>", "<|mask|>"]
LLADA_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>"]

# ----------------------------------------------------------------------------------------------
# Corpus


def normalization_agrees(c):
    """tokenizers' normalizers use older Unicode tables than utf8proc / Python; skip the few characters
    whose normalization or combining class changed since (e.g. U+1079C under NFKC, U+089A's class),
    see docs/tokenizer.md."""
    for form, norm in (("NFC", normalizers.NFC()), ("NFD", normalizers.NFD()), ("NFKC", normalizers.NFKC()),
                       ("NFKD", normalizers.NFKD())):
        for s in (c, "a\u0301" + c, c + "\u0316", "a\u0301" + c + "\u0316\u0300"):
            if unicodedata.normalize(form, s) != norm.normalize_str(s):
                return False
    return True


def category_samples(rng):
    """A few characters of every general category (Unicode 14 as in Python 3.11 and PCRE2 10.42)."""
    by_cat = {}
    for cp in range(0x20000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if cp >= 0x80 and (unicodedata.decomposition(c) or unicodedata.combining(c)) and not normalization_agrees(c):
            continue
        by_cat.setdefault(unicodedata.category(c), []).append(c)
    out = []
    for cat in sorted(by_cat):
        if cat == "Cn":
            # Unassigned only where later Unicode versions did not assign (Rust may be newer).
            chars = ["\u0378", "\u0379", "\u0380", "\ufdd0", "\uffff", "\U0001fffe"]
        else:
            chars = by_cat[cat]
        picks = [rng.choice(chars) for _ in range(6)]
        out.append("".join(picks))
        out.append("x" + "".join(picks) + " y " + picks[0] + "1" + picks[1] + " ")
        out.append(" " + picks[2] + "abc" + picks[3] + "\n" + picks[4] + " 12" + picks[5])
    return out


WS = [" ", "\t", "\n", "\r", "\r\n", "\u000b", "\u000c", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2003",
      "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u180e", "\u001c",
      "\ufeff"]

CODE = [
    'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'
    '    return fib(n - 1) + fib(n - 2)\n',
    "#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n"
    "  return v[0] != 2;\n}\n",
    "fn main() {\n    let s: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", s);\n}\n",
    "const f = async (a, b) => { await fetch(`/api/${a}?b=${b}`); return a ?? b; };\n",
    "<html>\n  <body class=\"main\">\n    <p>Hello &amp; welcome!</p>\n  </body>\n</html>\n",
    '{"name": "dllmq", "version": [0, 1, 0], "tags": ["a", "b"], "ok": true, "n": null}',
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "for i in $(seq 1 10); do echo \"$i\" >> /tmp/out.txt; done && cat /tmp/out.txt | wc -l",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "\tif (x == 0) {\n\t\treturn -1;\n\t}\n\n\n\t// TODO: fix\n",
    "x = [i**2 for i in range(100) if i % 3 == 0]  # squares\nprint(sum(x) / len(x))",
    "\\begin{equation} \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2} \\end{equation}",
]

TEXTS = [
    "Hello world", " Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "I'm sure you're right, but we'll see what they've done and he'd say it's fine.",
    "I'M SURE YOU'RE RIGHT, BUT WE'LL SEE WHAT THEY'VE DONE AND HE'D SAY IT'S FINE.",
    "don't DON'T Don'T can't CAN'T it's IT'S 'S 'T 'RE 'VE 'M 'LL 'D 's 't 're 've 'm 'll 'd",
    "Iſ 'ſ 'ſt xʼs x's x’s x‘s", "'''quoted''' ''double''", "rock 'n' roll", "''s", "'",
    "中文文本测试，包括标点符号。今天天气很好！", "日本語のテキスト、カタカナとひらがな。東京タワー",
    "한국어 텍스트입니다. 안녕하세요!", "Ελληνικά κείμενα και αριθμοί 123", "Русский текст: Привет, мир!",
    "עברית טקסט מימין לשמאל", "العربية نص من اليمين إلى اليسار ١٢٣", "हिन्दी पाठ देवनागरी में",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "Tiếng Việt có dấu: người, được, những",
    "emoji 😀😃😄 and 👍🏽 and 🇺🇸🇯🇵 flags", "family 👨‍👩‍👧‍👦 and 🏳️‍🌈 and 👩🏾‍💻 and ❤️‍🔥",
    "keycap 1️⃣ #️⃣ and variation ☺︎ ☺️", "🧑‍🤝‍🧑🧑🏻‍🤝‍🧑🏿", "😀" * 30,
    "e\u0301 vs \u00e9, A\u030a vs \u00c5, \u1100\u1161\u11a8 vs \uac01, ﬁ ﬂ ① ｆｕｌｌｗｉｄｔｈ",
    "Zalgo: Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f",
    "combining only \u0301\u0302\u0303 at start", "\u0301", "a\u200db\u200cc\u2060d\u00ade",
    "1234567890", "3.14159265358979323846264338327950288419716939937510", "1,000,000 and 1.000.000,50",
    "12345678901234567890123456789012345678901234567890", "x=1+2*3-4/5", "2024-01-15T10:30:00Z",
    "٠١٢٣٤٥٦٧٨٩ ०१२३ 一二三 ½ ¾ ² ³ Ⅻ ⅻ ①②", "$100.00 €50 £20 ¥1000 ₹500 ₿0.5",
    "", " ", "  ", "\n", "\n\n", "\r\n", "\t", " \t \n ", "a  b   c    d", "a\n\nb\n\n\nc", "trailing   ",
    "   leading", "   ", " " * 100, "\n" * 50, "\t" * 20 + "x", " \n" * 20, "x" + " " * 70 + "y",
    "=" * 120, "-" * 80 + "\n" + "=" * 80, "!?" * 50, "a" * 200, "ab" * 100, "The" * 60,
    "supercalifragilisticexpialidocious" * 3,
    "<|endoftext|>", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more<|endoftext|><|endoftext|>", "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n"
    "What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", "<|mdm_mask|><|mdm_mask|>x<|mdm_mask|>",
    "<|mask|> <|mask|>", "<|endoftext", "|endoftext|>", "<|im_start|", "< |im_start|>", "<<|im_end|>>",
    "a <|eot_id|> b", "a<|eot_id|>b", " <|eot_id|> ", "<tool_call>{\"a\":1}</tool_call>", "<|fim_prefix|>def",
    "[CLS] [MASK] <s> </s> <unk> <pad>", "<special> and <sp> and  <sp>  x", "café x and cafe\u0301 x",
]


def random_mix(rng, n):
    pools = [
        "the of and to in is was for on that with as by at from",
        "Hello World HELLO world hello WORLD", "don't won't I'm you're we'll they've she'd",
        "0123456789", "中文字符测试数据", "日本語ひらがなカタカナ", "한국어텍스트", "αβγδεζηθ", "абвгдеёжз",
        "😀👍🏽🇺🇸👨‍👩‍👧", "é\u0301ñü", "!@#$%^&*()[]{};:,.<>/?\\|`~-_=+\"'",
    ]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 14)):
            kind = rng.random()
            if kind < 0.45:
                pool = rng.choice(pools)
                words = pool.split() if " " in pool else [pool]
                w = rng.choice(words)
                if len(w) > 3 and rng.random() < 0.5:
                    a = rng.randint(0, len(w) - 1)
                    w = w[a:a + rng.randint(1, 6)]
                parts.append(w)
            elif kind < 0.7:
                parts.append(rng.choice(WS) * rng.randint(1, 4))
            elif kind < 0.8:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 15))))
            elif kind < 0.87:
                parts.append(rng.choice(["'s", "'S", "'ll", "'LL", "'re", "'Ve", "'d", "'M", "'t", "n't"]))
            elif kind < 0.93:
                parts.append(rng.choice(LLADA_SPECIALS + QWEN_SPECIALS[:4] + ["<|mask|>"]))
            else:
                parts.append(chr(rng.choice([rng.randint(0x21, 0x7e), rng.randint(0xa0, 0x2fff),
                                             rng.randint(0x3000, 0x9fff), rng.randint(0x1f300, 0x1faff)])))
        out.append("".join(parts))
    return [s for s in out if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]


def shared_texts():
    out = []
    p = os.path.join(SHARED, "gsm8k", "test.jsonl")
    if os.path.exists(p):
        with open(p) as f:
            for i, line in enumerate(f):
                if i >= 120:
                    break
                r = json.loads(line)
                out.append(r["question"])
                if i % 3 == 0:
                    out.append(r["answer"][:400])
    p = os.path.join(SHARED, "humaneval", "HumanEval.jsonl.gz")
    if os.path.exists(p):
        with gzip.open(p, "rt") as f:
            for i, line in enumerate(f):
                if i >= 40:
                    break
                out.append(json.loads(line)["prompt"][:600])
    return out


INVALID = [b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
           b"\xf0\x9f\x98 x", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
           b"ok \xe4\xb8 \xad", b"\x80\x80\x80", b"Hello \xff world \xfe!", b"\xe4\xb8\xad\xe6\x96", b"<|im_\xffstart|>",
           b"\xf0\x9f\x98\x80\xf0\x9f", b"a\x00b", b"\x00", b"\x01\x02\x1f\x7f"]


def build_corpus():
    rng = random.Random(1234)
    texts = list(TEXTS) + CODE + category_samples(rng)
    for w in WS:
        texts += [w, "a" + w + "b", w * 3 + "x", "x" + w * 2, " " + w + "word" + w + " ", "1" + w + "2",
                  "!" + w + "?", w + "\n" + w]
    texts += shared_texts()
    texts += random_mix(rng, 1000 - len(texts) + 300)
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append({"text": t})
    for b in INVALID:
        out.append({"hex": b.hex()})
    return out


def as_str(entry):
    if "text" in entry:
        return entry["text"]
    return bytes.fromhex(entry["hex"]).decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------------------------
# Tokenizers


def training_text(corpus):
    lines = [as_str(e) for e in corpus]
    p = os.path.join(SHARED, "gsm8k", "train.jsonl")
    if os.path.exists(p):
        with open(p) as f:
            for i, line in enumerate(f):
                if i >= 3000:
                    break
                r = json.loads(line)
                lines += [r["question"], r["answer"]]
    return lines


def train(pre, normalizer, lines, vocab_size, specials, ignore_merges=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(lines, trainer)
    if specials:
        tok.add_special_tokens(specials)
    return tok


def legacy_merges(path):
    """Rewrite merges in the old "a b" string form (both forms must load)."""
    with open(path) as f:
        j = json.load(f)
    j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    with open(path, "w") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)


def build_hf_tokenizers(corpus):
    lines = training_text(corpus)
    out = {}

    # LLaDA's shape: the exact form of models/dllmq-synth-tiny (Split with single digits + ByteLevel).
    synth = os.path.join(ROOT, "models", "dllmq-synth-tiny", "tokenizer.json")
    if os.path.exists(synth):
        dst = os.path.join(OUT, "synth_tiny.tokenizer.json")
        shutil.copyfile(synth, dst)
        out["synth_tiny"] = dst

    specials = [AddedToken(s, special=True, normalized=False) for s in LLADA_SPECIALS]
    t = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PAT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), None, lines, 1200, specials)
    p = os.path.join(OUT, "qwen_split.tokenizer.json")
    t.save(p)
    out["qwen_split"] = p

    # Llama-3 style: 1-3 digit groups, ignore_merges.
    t = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), None, lines, 1500, specials,
        ignore_merges=True)
    p = os.path.join(OUT, "llama3_style.tokenizer.json")
    t.save(p)
    out["llama3_style"] = p

    # GPT-2 style: ByteLevel regex + prefix space, NFC, legacy "a b" merges, added-token options.
    t = train(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True), normalizers.NFC(), lines, 1000, [])
    t.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False),
                          AddedToken("<special>", special=True, normalized=False, lstrip=True, rstrip=True),
                          AddedToken("<|mask|>", special=True, normalized=False, lstrip=True)])
    t.add_tokens([AddedToken("café x", special=False, normalized=True),
                  AddedToken("<sp>", special=False, normalized=False, single_word=True),
                  AddedToken("[MASK]", special=False, normalized=False, rstrip=True)])
    p = os.path.join(OUT, "gpt2_style.tokenizer.json")
    t.save(p)
    legacy_merges(p)
    out["gpt2_style"] = p

    # Digits + Split behaviours + NFKC sequence normalizer.
    t = train(pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(" ", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"[.,;:!?]"), behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"\p{Lu}"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"\n+"), behavior="removed"),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)]),
        normalizers.Sequence([normalizers.NFKC()]), lines, 800, specials[:3])
    p = os.path.join(OUT, "digits_seq.tokenizer.json")
    t.save(p)
    out["digits_seq"] = p

    t = train(pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(Regex(r"\s+"), behavior="isolated", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        normalizers.NFD(), lines, 700, specials[:2])
    p = os.path.join(OUT, "digits_invert.tokenizer.json")
    t.save(p)
    out["digits_invert"] = p
    return out


def build_dream_files(corpus):
    """vocab.json + merges.txt + tokenizer_config.json (Dream's file form) from a Qwen-pattern BPE."""
    lines = training_text(corpus)
    t = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PAT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), normalizers.NFC(), lines, 1100, [])
    d = os.path.join(OUT, "dream_files")
    os.makedirs(d, exist_ok=True)
    t.model.save(d)
    n = t.get_vocab_size()
    added = {}
    for i, s in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "<|mask|>"]):
        added[str(n + i)] = {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                             "single_word": False, "special": s != "<tool_call>"}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"added_tokens_decoder": added, "tokenizer_class": "Qwen2Tokenizer",
                   "eos_token": "<|endoftext|>"}, f, indent=2)
    # Reference: the pipeline transformers' Qwen2TokenizerFast builds from these files.
    ref = Tokenizer(models.BPE.from_file(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")))
    ref.normalizer = normalizers.NFC()
    ref.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PAT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    ref.decoder = decoders.ByteLevel()
    ref.add_tokens([AddedToken(v["content"], special=v["special"], normalized=False)
                    for _, v in sorted(added.items(), key=lambda kv: int(kv[0]))])
    return d, ref


# ----------------------------------------------------------------------------------------------
# Chat templates, rendered with jinja2 the way transformers' apply_chat_template does.

# Dream-Instruct: the Qwen2.5 template (no-tools branch) with "You are a helpful assistant." (reference §2.4).
QWEN_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n")

CHAT_CASES = [("What is 2+2?", None), ("  padded question \n\t", None), ("Hi", "You are terse."),
              ("\u3000full-width space\u2003", " sys with spaces "), ("multi\nline\n\nquestion", None),
              ("", None), ("\x1c\x1dsep\x1f", None), ("\u00a0nbsp\u0085", "\n"), ("emoji 😀", "système"),
              ("<|eot_id|> inside", None)]


def write_chat_golden():
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        print("warning: jinja2 not installed; chat_golden.json not regenerated", file=sys.stderr)
        return
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    with open(os.path.join(ROOT, "models", "dllmq-synth-tiny", "tokenizer_config.json")) as f:
        llada_template = json.load(f)["chat_template"]  # LLaDA-8B-Instruct's template (reference §1.4)
    cases = []
    for user, system in CHAT_CASES:
        msgs = ([{"role": "system", "content": system}] if system is not None else []) + \
               [{"role": "user", "content": user}]
        row = {"user": user, "system": system}
        for name, tpl in (("llada", llada_template), ("qwen", QWEN_TEMPLATE)):
            row[name] = env.from_string(tpl).render(messages=msgs, bos_token="<|startoftext|>",
                                                    add_generation_prompt=True)
        cases.append(row)
    write_json(os.path.join(OUT, "chat_golden.json"), {"cases": cases})


# ----------------------------------------------------------------------------------------------
# Golden files


def decode_cases_hf(rng, tok, corpus_strs):
    vocab_n = tok.get_vocab_size(with_added_tokens=True)
    added = sorted(tok.get_added_tokens_decoder().keys())
    cases = []
    for k in range(160):
        if k < 60:
            # Cut an encoding at arbitrary ids: splits multi-byte characters.
            s = rng.choice(corpus_strs)
            ids = tok.encode(s, add_special_tokens=False).ids
            if len(ids) < 2:
                continue
            a = rng.randint(0, len(ids) - 1)
            ids = ids[a:a + rng.randint(1, 12)]
        else:
            ids = [rng.randrange(vocab_n) for _ in range(rng.randint(1, 10))]
            if added and rng.random() < 0.5:
                ids.insert(rng.randint(0, len(ids)), rng.choice(added))
            if rng.random() < 0.1:
                ids.append(vocab_n + 5)  # unknown id: skipped
        for skip in (False, True):
            cases.append({"ids": ids, "skip_special": skip, "text": tok.decode(ids, skip_special_tokens=skip)})
    return cases


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    corpus = build_corpus()
    strs = [as_str(e) for e in corpus]
    write_json(os.path.join(OUT, "corpus.json"), {"strings": corpus})
    print(f"corpus: {len(corpus)} strings", file=sys.stderr)
    rng = random.Random(99)
    write_chat_golden()

    def hf_golden(name, tok, file_rel, kind, roundtrip):
        enc = [tok.encode(s, add_special_tokens=False).ids for s in strs]
        # split_special_tokens: specials are plain text (our allow_special=false).
        tok.encode_special_tokens = True
        ordinary = {str(i): tok.encode(s, add_special_tokens=False).ids for i, s in enumerate(strs) if "<" in s}
        tok.encode_special_tokens = False
        write_json(os.path.join(OUT, f"golden_{name}.json"),
                   {"source": f"tokenizers {tokenizers.__version__}", "file": file_rel, "kind": kind,
                    "roundtrip": roundtrip, "encode": enc, "encode_ordinary": ordinary,
                    "decode": decode_cases_hf(rng, tok, strs)})
        print(f"golden_{name}: {sum(map(len, enc))} ids", file=sys.stderr)

    roundtrips = {"synth_tiny": True, "qwen_split": True, "llama3_style": True, "gpt2_style": False,
                  "digits_seq": False, "digits_invert": False}
    for name, path in build_hf_tokenizers(corpus).items():
        hf_golden(name, Tokenizer.from_file(path), os.path.basename(path), "tokenizer_json", roundtrips[name])
    d, ref = build_dream_files(corpus)
    hf_golden("dream_files", ref, os.path.basename(d), "model_dir", False)

    qwen = os.path.join(SHARED, "tokenizers", "qwen", "qwen.tiktoken")
    if os.path.exists(qwen):
        ranks = load_tiktoken_bpe(qwen)
        enc = tiktoken.Encoding(name="qwen", pat_str=QWEN_PAT, mergeable_ranks=ranks,
                                special_tokens={s: 151643 + i for i, s in enumerate(QWEN_SPECIALS)})
        ids = [enc.encode(s, allowed_special="all") for s in strs]
        ordinary = {str(i): enc.encode_ordinary(s) for i, s in enumerate(strs) if "<" in s}
        cases = []
        for k in range(200):
            if k < 100:
                s = rng.choice(strs)
                e = ids[strs.index(s)]
                if len(e) < 2:
                    continue
                a = rng.randint(0, len(e) - 1)
                cut = e[a:a + rng.randint(1, 8)]
            else:
                cut = [rng.randrange(151643) for _ in range(rng.randint(1, 8))]
                if rng.random() < 0.4:
                    cut.insert(rng.randint(0, len(cut)), 151643 + rng.randrange(len(QWEN_SPECIALS)))
            cases.append({"ids": cut, "skip_special": False, "text": enc.decode(cut)})
            kept = [i for i in cut if i < 151643]
            cases.append({"ids": cut, "skip_special": True, "text": enc.decode(kept)})
        write_json(os.path.join(OUT, "golden_qwen_tiktoken.json"),
                   {"source": f"tiktoken {tiktoken.__version__}", "file": "qwen.tiktoken", "kind": "tiktoken",
                    "roundtrip": True, "encode": ids, "encode_ordinary": ordinary, "decode": cases})
        print(f"golden_qwen_tiktoken: {sum(map(len, ids))} ids", file=sys.stderr)
    else:
        print(f"warning: {qwen} not found; qwen tiktoken golden not regenerated", file=sys.stderr)


if __name__ == "__main__":
    main()
