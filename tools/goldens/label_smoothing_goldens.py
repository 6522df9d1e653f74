#!/usr/bin/env python3
"""Goldens of transformers' LabelSmoother (the Trainer's loss when label_smoothing_factor > 0).

Regenerate in the transformers venv of `make assets` (Debian's python3-torch 1.13, the libtorch
the C++ side links, plus transformers 4.44.2):

    .assets/venv-hf-torch113/bin/python tools/goldens/label_smoothing_goldens.py

It writes tests/sdk/goldens/label_smoothing_goldens.json: for each case, float32 logits, integer
labels (some -100, which LabelSmoother ignores), epsilon, the loss and its gradient with respect
to the logits; tests/sdk/label_smoothing_test.cpp compares tenax::sdk::detail::label_smoothed_loss.
CI has no Python: the goldens are committed and the C++ test reads them.
"""
import json
import pathlib

import torch
import transformers
from transformers.trainer_pt_utils import LabelSmoother

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "sdk" / "goldens" / "label_smoothing_goldens.json"

# (name, logits shape, epsilon, positions of labels set to -100 in the flattened labels)
CASES = [
    ("sequence classification, 3 classes", [6, 3], 0.1, []),
    ("sequence classification, 5 classes, strong smoothing", [4, 5], 0.45, []),
    ("two labels ignored", [5, 4], 0.2, [1, 3]),
    ("token classification [batch, tokens, classes]", [2, 4, 6], 0.1, [3, 6, 7]),
]


def main():
    generator = torch.Generator().manual_seed(20261130)
    cases = []
    for name, shape, epsilon, ignored in CASES:
        logits = (3 * torch.randn(*shape, generator=generator)).requires_grad_(True)
        labels = torch.randint(0, shape[-1], shape[:-1], generator=generator)
        flat = labels.view(-1)
        for i in ignored:
            flat[i] = -100
        loss = LabelSmoother(epsilon=epsilon)({"logits": logits}, labels)
        loss.backward()
        cases.append({"name": name, "shape": shape, "epsilon": epsilon,
                      "logits": logits.detach().flatten().tolist(), "labels": labels.flatten().tolist(),
                      "loss": loss.item(), "grad": logits.grad.flatten().tolist()})
    data = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": cases}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
