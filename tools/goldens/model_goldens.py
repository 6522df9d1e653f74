#!/usr/bin/env python3
"""Goldens for Tenax's BERT model (tests/sdk/models), produced by Python transformers.

Run in the reference venv (Debian's python3-torch 1.13, the same libtorch build as the C++
side, plus transformers pinned in tools/goldens/requirements-model.txt):

    apt-get install python3-torch python3-xxhash
    /usr/bin/python3 -m venv --system-site-packages .venv-torch113
    .venv-torch113/bin/pip install -r tools/goldens/requirements-model.txt
    ninja -C build bert_roundtrip_tool
    .venv-torch113/bin/python tools/goldens/model_goldens.py --build build

It writes two small files into tests/sdk/models/goldens/ (the 90 MB weights are not committed;
they come from tools/fetch_assets.sh into .assets/all-minilm-l6-v2, or $TENAX_ASSETS):

  minilm_parity.safetensors   fixed inputs (padding, and a sentence pair with token types 1),
                              the classifier head transformers initialised under a seed, and
                              transformers' last hidden state, pooled output, logits and loss
                              (fp32, eval mode)
  minilm_roundtrip.safetensors
                              the logits transformers computes with the model that Tenax
                              fine-tuned and saved (build/.../bert_roundtrip_tool), and in its
                              metadata the XXH3-64 and SHA-256 of that model.safetensors

CI has no Python ML stack: the C++ tests repeat the fine-tune, check that their saved
model.safetensors has the recorded hash (so it is the file transformers loaded) and that their
logits equal the recorded ones.
"""
import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import torch
import transformers
import xxhash
from safetensors.torch import load_file, save_file
from transformers import BertForSequenceClassification, BertTokenizerFast

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "sdk" / "models" / "goldens"
NUM_LABELS = 3
HEAD_SEED = 1234
SEQ_LEN = 16


def minilm_dir() -> pathlib.Path:
    root = pathlib.Path(os.environ.get("TENAX_ASSETS", REPO / ".assets"))
    d = root / "all-minilm-l6-v2"
    if not (d / "model.safetensors").exists():
        sys.exit(f"{d}/model.safetensors is missing: run tools/fetch_assets.sh")
    return d


def golden_inputs(tokenizer):
    """Three rows: a full-length sentence, a short one (padding), and a pair (token types 1)."""
    single = tokenizer(
        ["the quick brown fox jumps over the lazy dog near the quiet river bank today",
         "a short one"],
        padding="max_length", truncation=True, max_length=SEQ_LEN, return_tensors="pt")
    pair = tokenizer(["is it raining?"], ["no, the sun is out."], padding="max_length",
                     truncation=True, max_length=SEQ_LEN, return_tensors="pt")
    enc = {k: torch.cat([single[k], pair[k]]) for k in ("input_ids", "attention_mask", "token_type_ids")}
    assert enc["attention_mask"][1].sum() < SEQ_LEN, "row 1 must be padded"
    assert enc["token_type_ids"][2].max() == 1, "row 2 must carry token type 1"
    assert enc["attention_mask"][0].sum() == SEQ_LEN, "row 0 must fill the sequence"
    enc["labels"] = torch.tensor([0, 2, 1], dtype=torch.int64)
    return enc


def parity(assets: pathlib.Path):
    tokenizer = BertTokenizerFast.from_pretrained(assets)
    inputs = golden_inputs(tokenizer)
    torch.manual_seed(HEAD_SEED)
    model, info = BertForSequenceClassification.from_pretrained(
        assets, num_labels=NUM_LABELS, output_loading_info=True)
    assert sorted(info["missing_keys"]) == ["classifier.bias", "classifier.weight"], info
    model.eval()
    with torch.no_grad():
        out = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                    token_type_ids=inputs["token_type_ids"], labels=inputs["labels"],
                    output_hidden_states=True)
    tensors = {
        "input_ids": inputs["input_ids"].contiguous(),
        "attention_mask": inputs["attention_mask"].contiguous(),
        "token_type_ids": inputs["token_type_ids"].contiguous(),
        "labels": inputs["labels"].contiguous(),
        "classifier.weight": model.classifier.weight.detach().contiguous(),
        "classifier.bias": model.classifier.bias.detach().contiguous(),
        "last_hidden_state": out.hidden_states[-1].contiguous(),
        "pooler_output": model.bert.pooler(out.hidden_states[-1]).contiguous(),
        "logits": out.logits.contiguous(),
        "loss": out.loss.reshape(1).contiguous(),
    }
    path = GOLDENS / "minilm_parity.safetensors"
    save_file(tensors, str(path), metadata={
        "generator": f"tools/goldens/model_goldens.py; torch {torch.__version__}, "
                     f"transformers {transformers.__version__}"})
    print(f"wrote {path}: logits {out.logits.tolist()}, loss {out.loss.item():.6f}")


def roundtrip(assets: pathlib.Path, build: pathlib.Path):
    tool = next(build.glob("**/bert_roundtrip_tool"), None)
    if tool is None:
        sys.exit(f"no bert_roundtrip_tool under {build}: ninja -C {build} bert_roundtrip_tool")
    parity_file = load_file(str(GOLDENS / "minilm_parity.safetensors"))
    with tempfile.TemporaryDirectory() as tmp:
        saved = pathlib.Path(tmp) / "finetuned"
        subprocess.run([str(tool), str(assets), str(GOLDENS), str(saved)], check=True)
        weights = (saved / "model.safetensors").read_bytes()
        model, info = BertForSequenceClassification.from_pretrained(saved, output_loading_info=True)
        assert not any(info.values()), f"transformers reported {info}"
        assert model.config.num_labels == NUM_LABELS
        assert model.config.architectures == ["BertForSequenceClassification"]
        tokenizer = BertTokenizerFast.from_pretrained(saved)  # the copied tokenizer files load
        assert tokenizer("a short one")["input_ids"] == parity_file["input_ids"][1][
            parity_file["attention_mask"][1].bool()].tolist()
        # Python's own save of the same weights writes the same bytes.
        resaved = pathlib.Path(tmp) / "resaved"
        model.save_pretrained(resaved)
        assert (resaved / "model.safetensors").read_bytes() == weights, "save differs from Python's"
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=parity_file["input_ids"],
                           attention_mask=parity_file["attention_mask"],
                           token_type_ids=parity_file["token_type_ids"]).logits
    path = GOLDENS / "minilm_roundtrip.safetensors"
    # With several metadata entries the Rust crate orders them by hash, so a rerun may write
    # different bytes with the same contents; commit a regenerated file only if they changed.
    save_file({"logits": logits.contiguous()}, str(path), metadata={
        "model_safetensors_xxh3_64": xxhash.xxh3_64_hexdigest(weights),
        "model_safetensors_sha256": hashlib.sha256(weights).hexdigest(),
        "generator": f"tools/goldens/model_goldens.py; torch {torch.__version__}, "
                     f"transformers {transformers.__version__}"})
    print(f"wrote {path}: logits {logits.tolist()}, xxh3 {xxhash.xxh3_64_hexdigest(weights)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=REPO / "build",
                        help="CMake build directory holding bert_roundtrip_tool")
    parser.add_argument("--skip-roundtrip", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    GOLDENS.mkdir(parents=True, exist_ok=True)
    assets = minilm_dir()
    parity(assets)
    if not args.skip_roundtrip:
        roundtrip(assets, args.build)


if __name__ == "__main__":
    main()
