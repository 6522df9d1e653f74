#!/usr/bin/env python3
"""Writes tests/text/goldens/tokenizer_goldens.jsonl.gz: Hugging Face's BertTokenizerFast ids
for real texts and hard cases, and tests/text/goldens/tokenizer_goldens_multiscript.jsonl.gz:
its ids for seeded random multi-script strings (accented Latin, Greek, Cyrillic, Arabic with the
punctuation and marks of recent Unicode versions, Hebrew, Devanagari, CJK, Hangul, emoji,
combining marks, control and zero-width characters, unassigned code points), which
tests/text/bert_tokenizer_parity_test.cpp compares with tenax::sdk::BertTokenizer id by id.

Run from the repository root after tools/fetch_assets.sh, in a venv (never the system Python):
    python3 -m venv .venv-goldens
    .venv-goldens/bin/pip install -r tools/goldens/requirements-text.txt
    .venv-goldens/bin/python tools/goldens/tokenizer_goldens.py

Only local files are read (no hub). Each line is one call:
    {"texts": [...], "pairs": [...] | null,
     "options": {"max_length": int | null, "truncation": "none" | "longest_first" |
                 "only_first" | "only_second", "padding": "none" | "longest" | "max_length"},
     "expected": [{"input_ids": [...], "attention_mask": [...], "token_type_ids": [...]}, ...]}
or, where Hugging Face refuses the call, "error": "<its message>" instead of "expected".
"""
import csv
import gzip
import json
import os
import random
import sys

import tokenizers
import transformers
import unicode_age
from transformers import BertTokenizerFast

ASSETS = os.environ.get("TENAX_ASSETS", ".assets")
MODEL_DIR = os.path.join(ASSETS, "all-minilm-l6-v2")
DATA = os.path.join(ASSETS, "data", "rotten_tomatoes", "train.csv")
OUT = os.path.join("tests", "text", "goldens", "tokenizer_goldens.jsonl.gz")
OUT_MULTISCRIPT = os.path.join("tests", "text", "goldens", "tokenizer_goldens_multiscript.jsonl.gz")

N_REAL = 2500       # real single texts, whole (no truncation)
N_PAIRS = 120       # real pairs under every truncation strategy and length

HARD = [
    # accents and scripts
    "Café naïve résumé Ångström ÉCOLE façade coöperate",
    "Tiếng Việt có dấu: Hà Nội, Đà Nẵng",
    "Привет, мир! Ёжик в тумане.",
    "Ελληνικά: ΟΔΟΣ οδός Σίσυφος ΣΑΣ",
    "العربية لغة جميلة", "עברית עם ניקוד: שָׁלוֹם",
    "हिन्दी भाषा में स्वागत है", "ภาษาไทยไม่มีช่องว่าง",
    "e\u0301 a\u0308\u0323 \u1e0b\u0323 o\u0323\u0302",   # decomposed marks, reordering
    "İSTANBUL ıi Straße ǅemal ﬁne ½ ² Ⅻ ＡＢＣ１２３ \u212a\u212b",
    # CJK
    "我爱北京天安门。", "東京タワーはとても高いです。", "안녕하세요 세계! 한국어",
    "豈更車 \U00020000\U0002A6DF \U0002B820x \U0002B920x \u3400\u4dbf",
    "mixed英文and中文text", "ｶﾀｶﾅ カタカナ ひらがな",
    # emoji
    "I ❤️ this movie 😀😀!", "family 👨\u200d👩\u200d👧 flag 🇫🇷 thumbs 👍🏽", "🥰🫨 new emoji",
    # control, format and zero-width characters
    "a\u200bb zero\u200cwidth\u200djoiner", "\ufeffBOM at start", "tab\there\nnewline\r\nCRLF",
    "nul\x00byte", "\x07bell \x1b[0mansi", "replacement \ufffd char", "soft\u00adhyphen",
    "line\u2028sep para\u2029sep", "nbsp\u00a0x thin\u2009space ideo\u3000space",
    "rtl\u200fmark ltr\u200emark", "vt\x0bff\x0cnel\x85end", "private \ue000 use \U000F0000",
    "unassigned \u0378 noncharacter \uffff \U0010FFFF", "tag \U000E0041 chars",
    # long words
    "a" * 99, "a" * 100, "a" * 101, "b" * 300, "supercalifragilistic" * 6,
    "é" * 101, "ab" * 50 + "!" + "cd" * 51, "x" * 100 + " short",
    # empty and blank
    "", " ", "   \t\n  ", "\u200b\u200b", "\x00\x01\x02",
    # special tokens written in the text
    "hello [SEP] world", "[CLS][MASK]x[PAD]", "[UNK]", "[sep] [Sep]", "a[SEP]b", "[[SEP]]",
    # punctuation and symbols
    "Hello!!! What's up?? $100 + 50% = a^b ~ `code` {x|y} <tag> @user #hash",
    "—dash– “quotes” «guillemets» ¿qué? ¡sí! …", "∑ ≤ √ ∞ © ® ™ € £ ¥ § ¶ †",
    "3.14159 1,000,000 2nd 4th 10:30pm 2024-01-01", "McDonald's iPhone e-mail U.S.A.",
    "unaffable unbelievable antidisestablishmentarianism",
    "don't won't can't it's o'clock rock'n'roll",
]

HARD_PAIRS = [
    ("Is this a question?", "Yes, it is."),
    ("", "second only"), ("first only", ""), ("", ""),
    ("short", "a much longer second sequence that goes on and on and on for many words"),
    ("a much longer first sequence that goes on and on and on for many words", "short"),
    ("equal length one two three", "equal length four five six"),
    ("我爱北京", "I ❤️ Beijing 😀"), ("[SEP] inside", "and [CLS] here"),
]

TRUNCATIONS = ["longest_first", "only_first", "only_second"]

N_MULTISCRIPT = 2000  # random multi-script strings
SEED = 17

# Code point ranges (both ends included) that the random strings draw from, by script or kind.
# Each includes characters assigned in recent Unicode versions, where the Unicode data of
# `tokenizers` (several versions, see bert_unicode_tables.py) and of other libraries differ.
POOLS = {
    "latin": [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x1E00, 0x1EFF), (0xA720, 0xA7FF),
              (0xAB30, 0xAB6F), (0x10780, 0x107BA), (0x1DF00, 0x1DF2A)],
    "greek": [(0x370, 0x3FF), (0x1F00, 0x1FFF), (0x10140, 0x1018E)],
    "cyrillic": [(0x400, 0x52F), (0x1C80, 0x1C8A), (0x2DE0, 0x2DFF), (0xA640, 0xA69F),
                 (0x1E030, 0x1E08F)],
    "arabic": [(0x600, 0x6FF), (0x750, 0x77F), (0x870, 0x8FF), (0xFB50, 0xFDFF),
               (0xFE70, 0xFEFC), (0x10EC0, 0x10EFF), (0x1EE00, 0x1EEFF)],
    "hebrew": [(0x591, 0x5FF), (0xFB1D, 0xFB4F)],
    "devanagari": [(0x900, 0x97F), (0xA8E0, 0xA8FF), (0x11B00, 0x11B09)],
    "cjk": [(0x3000, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
            (0xFF00, 0xFFEF), (0x20000, 0x2A6DF), (0x2A700, 0x2EE5F), (0x2F800, 0x2FA1F),
            (0x30000, 0x323AF), (0x323B0, 0x3347F)],
    "hangul": [(0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7A3),
               (0xD7B0, 0xD7FF)],
    "emoji": [(0x2600, 0x27BF), (0x1F1E6, 0x1F1FF), (0x1F300, 0x1FAFF), (0xFE0F, 0xFE0F),
              (0x200D, 0x200D), (0x1F3FB, 0x1F3FF)],
    "marks": [(0x300, 0x36F), (0x483, 0x489), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF),
              (0x20D0, 0x20FF), (0xFE20, 0xFE2F), (0x10D69, 0x10D6D), (0x1E4EC, 0x1E4EF)],
    "punctuation": [(0x21, 0x2F), (0x3A, 0x40), (0x2010, 0x205E), (0x2E00, 0x2E5D),
                    (0x3001, 0x3003), (0x3008, 0x3011), (0x61D, 0x61F), (0x10ED0, 0x10ED0),
                    (0x11B00, 0x11B09), (0x16FE2, 0x16FE4)],
    "control": [(0x0, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x890, 0x891),
                (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202F),
                (0x2060, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFD), (0x13430, 0x1343F),
                (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE007F), (0xE000, 0xE00F),
                (0xF0000, 0xF000F)],
    "space": [(0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x202F, 0x202F),
              (0x205F, 0x205F), (0x3000, 0x3000)],
}


def recent_code_points():
    """Characters assigned in Unicode 9.0 or later, by unicode_age: any script or kind."""
    return [c for start, stop, major, _ in unicode_age.unicode_age_db.iter_spans()
            if major >= 9 for c in range(start, stop + 1)]


def multiscript_strings(n, seed):
    """Seeded random strings of words from one to three pools, with spaces, punctuation and,
    now and then, a recently assigned or an arbitrary (often unassigned) code point."""
    rng = random.Random(seed)
    recent = recent_code_points()
    names = sorted(POOLS)

    def pick(pool):
        lo, hi = rng.choice(POOLS[pool])
        return chr(rng.randint(lo, hi))

    def any_code_point():
        while True:
            c = rng.randrange(0x110000)
            if not 0xD800 <= c < 0xE000:
                return chr(c)

    out = []
    for _ in range(n):
        scripts = rng.sample(names, rng.randint(1, 3))
        words = []
        for _ in range(rng.randint(1, 8)):
            word = []
            for _ in range(rng.randint(1, 7)):
                r = rng.random()
                if r < 0.12:
                    word.append(chr(rng.choice(recent)))
                elif r < 0.17:
                    word.append(any_code_point())
                else:
                    word.append(pick(rng.choice(scripts)))
            words.append("".join(word))
        out.append("".join(w + rng.choice([" ", " ", " ", "", pick("punctuation"),
                                           pick("space"), pick("control")]) for w in words))
    return out


def options(max_length=None, truncation="none", padding="none"):
    return {"max_length": max_length, "truncation": truncation, "padding": padding}


def call(tok, texts, pairs, opts):
    kwargs = dict(add_special_tokens=True, return_attention_mask=True, return_token_type_ids=True)
    kwargs["truncation"] = False if opts["truncation"] == "none" else opts["truncation"]
    kwargs["padding"] = False if opts["padding"] == "none" else opts["padding"]
    if opts["max_length"] is not None:
        kwargs["max_length"] = opts["max_length"]
    record = {"texts": texts, "pairs": pairs, "options": opts}
    try:
        enc = tok(texts, text_pair=pairs, **kwargs) if pairs is not None else tok(texts, **kwargs)
    except Exception as e:  # HF refuses, e.g. only_first cannot reach max_length
        record["error"] = f"{type(e).__name__}: {e}"
        return record
    record["expected"] = [
        {"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
         "token_type_ids": enc["token_type_ids"][i]}
        for i in range(len(texts))
    ]
    return record


def main():
    tok = BertTokenizerFast.from_pretrained(MODEL_DIR, local_files_only=True)
    if not tok.is_fast:
        sys.exit("expected the fast (Rust tokenizers) BertTokenizer")
    with open(DATA, encoding="utf-8", newline="") as f:
        real = [row["text"] for row in csv.DictReader(f)]
    if len(real) < N_REAL + 2 * N_PAIRS:
        sys.exit(f"{DATA}: only {len(real)} texts")

    records = []
    for text in real[:N_REAL]:
        records.append(call(tok, [text], None, options()))
    for text in HARD:
        records.append(call(tok, [text], None, options()))
        for n in (3, 8):
            records.append(call(tok, [text], None, options(n, "longest_first")))
        records.append(call(tok, [text], None, options(16, "longest_first", "max_length")))
    # Single texts under every strategy (only_second has no second sequence).
    for text in real[N_REAL:N_REAL + 40] + HARD[-8:]:
        for t in TRUNCATIONS:
            records.append(call(tok, [text], None, options(12, t)))
        records.append(call(tok, [text], None, options(None, "longest_first", "max_length")))
        records.append(call(tok, [text], None, options(64, "none", "max_length")))
    # Pairs: real and hard, every strategy, several lengths (some too short on purpose).
    pairs = [(real[N_REAL + 100 + 2 * i], real[N_REAL + 101 + 2 * i]) for i in range(N_PAIRS)]
    pairs += HARD_PAIRS + [(HARD[i], HARD[-1 - i]) for i in range(0, len(HARD), 5)]
    for a, b in pairs:
        records.append(call(tok, [a], [b], options()))
        for t in TRUNCATIONS:
            for n in (5, 9, 16, 27, 40):
                records.append(call(tok, [a], [b], options(n, t)))
        records.append(call(tok, [a], [b], options(32, "longest_first", "max_length")))
    # Batches: padding to the batch's longest, with and without truncation.
    for start in range(0, 400, 8):
        batch = real[N_REAL + 400 + start:N_REAL + 408 + start]
        records.append(call(tok, batch, None, options(None, "none", "longest")))
        records.append(call(tok, batch, None, options(20, "longest_first", "longest")))
    for start in range(0, len(HARD), 7):
        records.append(call(tok, HARD[start:start + 7], None, options(None, "none", "longest")))
    for start in range(0, len(pairs), 6):
        chunk = pairs[start:start + 6]
        records.append(call(tok, [a for a, _ in chunk], [b for _, b in chunk],
                            options(24, "longest_first", "longest")))

    write(OUT, records)

    # Random multi-script strings, each alone and whole; ensure_ascii keeps the control and
    # unassigned code points readable in the file and safe through any editor.
    multiscript = multiscript_strings(N_MULTISCRIPT, SEED)
    write(OUT_MULTISCRIPT, [call(tok, [text], None, options()) for text in multiscript],
          {"seed": SEED, "unicode_age": ".".join(map(str, unicode_age.unicode_age_db.UCD_VERSION))},
          ensure_ascii=True)


def write(path, records, extra_header=None, ensure_ascii=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # mtime=0 and sorted keys: the same inputs give the same bytes.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        header = {"generator": "tools/goldens/tokenizer_goldens.py",
                  "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                  "model_dir": "all-minilm-l6-v2", "records": len(records), **(extra_header or {})}
        gz.write((json.dumps({"header": header}, sort_keys=True) + "\n").encode())
        for r in records:
            gz.write((json.dumps(r, ensure_ascii=ensure_ascii, sort_keys=True) + "\n").encode("utf-8"))
    errors = sum(1 for r in records if "error" in r)
    texts = sum(len(r["texts"]) for r in records)
    print(f"{path}: {len(records)} calls, {texts} encodings, {errors} refused by HF")


if __name__ == "__main__":
    main()
