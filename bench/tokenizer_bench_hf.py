#!/usr/bin/env python3
"""Hugging Face's side of bench/tokenizer_bench.py: bench/tokenizer_bench.cpp's program for
transformers' BertTokenizerFast (Rust `tokenizers` underneath), same arguments, same output:

    tokenizer_bench_hf.py MODEL_DIR TEXTS_FILE [--api transformers|tokenizers] [--max-length 128]
                          [--batch 64] [--passes 3]
    single <seconds> <texts> <tokens> <id_sum>
    batch  <seconds> <texts> <tokens> <id_sum>

single calls tok(text, truncation=True, max_length=L) per text, as a data loader's map does;
batch calls tok(texts, truncation=True, max_length=L, padding="longest") per --batch texts, as
Dataset.map(batched=True) does. --api tokenizers calls the Rust library without transformers'
wrapper (tokenizers.Tokenizer from the directory's tokenizer.json, truncation and padding enabled
on it, encode / encode_batch, the ids read from each Encoding): HF's fastest path. Both after one untimed pass, whose encodings give the totals (outside the timing). The driver pins it to one core
and sets RAYON_NUM_THREADS=1 (tokenizers' batch encoding would otherwise start a thread per
core); TOKENIZERS_PARALLELISM=false keeps it from warning about that.
"""
import argparse
import os
import time

import tokenizers
from transformers import BertTokenizerFast


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("texts_file")
    p.add_argument("--api", choices=("transformers", "tokenizers"), default="transformers")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--passes", type=int, default=3)
    a = p.parse_args()
    tok = BertTokenizerFast.from_pretrained(a.model_dir)
    rust = None
    if a.api == "tokenizers":
        rust = tokenizers.Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))
        rust.enable_truncation(max_length=a.max_length, strategy="longest_first")
        rust.no_padding()
    with open(a.texts_file, encoding="utf-8") as f:
        texts = f.read().split("\n")
    if texts and texts[-1] == "":
        texts.pop()

    def single_rust():
        return [rust.encode(text).ids for text in texts]

    def batch_rust():
        out = []
        for begin in range(0, len(texts), a.batch):
            out.extend(e.ids for e in padded.encode_batch(texts[begin:begin + a.batch]))
        return out

    def single():
        return [tok(text, truncation=True, max_length=a.max_length)["input_ids"] for text in texts]

    def batch():
        out = []
        for begin in range(0, len(texts), a.batch):
            out.extend(tok(texts[begin:begin + a.batch], truncation=True, max_length=a.max_length,
                           padding="longest")["input_ids"])
        return out

    if rust is not None:
        padded = tokenizers.Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))
        padded.enable_truncation(max_length=a.max_length, strategy="longest_first")
        padded.enable_padding(pad_id=tok.pad_token_id, pad_token=tok.pad_token)  # to the longest of the batch
        single, batch = single_rust, batch_rust
    for mode, run in (("single", single), ("batch", batch)):
        ids = run()  # untimed: warms up, and gives the totals that check the encodings
        tokens = sum(len(x) for x in ids) * a.passes
        id_sum = sum(sum(x) for x in ids) * a.passes
        start = time.perf_counter()
        for _ in range(a.passes):
            run()
        seconds = time.perf_counter() - start
        print(f"{mode} {seconds:.6f} {len(texts) * a.passes} {tokens} {id_sum}", flush=True)

if __name__ == "__main__":
    main()
