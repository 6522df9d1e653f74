#!/usr/bin/env python3
"""Goldens of transformers' length-grouped order (group_by_length's LengthGroupedSampler).

Regenerate in the transformers venv of `make assets` (Debian's python3-torch 1.13 plus
transformers 4.44.2):

    .assets/venv-hf-torch113/bin/python tools/goldens/length_grouped_goldens.py

It writes tests/sdk/goldens/length_grouped_goldens.json: for each case the lengths, the batch,
the shuffled order transformers starts from (torch.randperm with the case's generator) and
get_length_grouped_indices' result from that same generator; tests/sdk/sampler_test.cpp checks
that tenax::sdk::group_by_length turns that order into that result. The shuffle itself is
Tenax's own (ResumableSampler's SplitMix64), so only the grouping is compared.
CI has no Python: the goldens are committed and the C++ test reads them.
"""
import json
import pathlib
import random

import torch
import transformers
from transformers.trainer_pt_utils import get_length_grouped_indices

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "sdk" / "goldens" / "length_grouped_goldens.json"

# (name, number of samples, batch, lengths drawn from [1, max_length], seed)
CASES = [
    ("one mega-batch (fewer than 4 batches' samples)", 11, 4, 30, 1),
    ("several mega-batches of 2 batches", 100, 12, 64, 2),
    ("many ties (lengths 1..3)", 97, 8, 3, 3),
    ("mega-batches of 50 batches, the last short", 2000, 8, 128, 4),
]


def main():
    cases = []
    for name, n, batch, max_length, seed in CASES:
        rng = random.Random(seed)
        lengths = [rng.randint(1, max_length) for _ in range(n)]
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
        grouped = get_length_grouped_indices(lengths, batch, generator=torch.Generator().manual_seed(seed))
        cases.append({"name": name, "batch": batch, "lengths": lengths, "order": order, "grouped": grouped})
    OUT.write_text(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                               "cases": cases}) + "\n")
    print(f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
