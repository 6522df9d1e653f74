#!/usr/bin/env python3
"""Goldens for Tenax's DistilBERT (tests/sdk/models/distilbert_*_test.cpp), made by Python transformers.

No pretrained DistilBERT can be fetched here, so parity is proven on a small DistilBERT that
transformers initialises from a seed and saves. Run in the reference venv (Debian's
python3-torch 1.13 plus tools/goldens/requirements-model.txt, see model_goldens.py):

    ninja -C build roundtrip_tool
    .venv-torch113/bin/python tools/goldens/distilbert_goldens.py --build build

It writes into tests/sdk/models/goldens/:

  distilbert_tiny/            the model directory transformers saved (config.json,
                              model.safetensors) plus vocab.txt (the first VOCAB_SIZE entries of
                              all-minilm-l6-v2's uncased BERT vocabulary, so the model reads real
                              text: tests/integration/train_rotten_tomatoes_test.cpp fine-tunes
                              it with `tenax train` on Rotten Tomatoes) and
                              tokenizer_config.json
  distilbert_parity.safetensors
                              fixed inputs (one row padded), every hidden state, logits and loss
                              of transformers in eval mode; the sin/cos position table of a fresh
                              sinusoidal_pos_embds model; in the metadata the missing and
                              unexpected keys transformers reports when loading a bare
                              DistilBertModel and a DistilBertForMaskedLM checkpoint
  distilbert_roundtrip.safetensors
                              the logits transformers computes with the model Tenax fine-tuned and
                              saved (roundtrip_tool distilbert), and that file's hashes
"""
import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
import xxhash
from safetensors.torch import load_file, save_file
from transformers import (BertTokenizerFast, DistilBertConfig, DistilBertForMaskedLM,
                          DistilBertForSequenceClassification, DistilBertModel)

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "sdk" / "models" / "goldens"
MODEL_DIR = GOLDENS / "distilbert_tiny"
SEED = 4321
VOCAB_SIZE = 3000
ID2LABEL = {0: "negative", 1: "neutral", 2: "positive"}
GENERATOR = f"tools/goldens/distilbert_goldens.py; torch {torch.__version__}, transformers {transformers.__version__}"


def tiny_config(**overrides) -> DistilBertConfig:
    kwargs = dict(vocab_size=VOCAB_SIZE, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                  max_position_embeddings=128, dropout=0.1, attention_dropout=0.1,
                  seq_classif_dropout=0.2, id2label=ID2LABEL,
                  # Ten times transformers' default: with 0.02 a tiny model's logits are ~1e-2 and
                  # nearly equal across inputs, so a 1e-4 parity bound would prove little.
                  initializer_range=0.2,
                  label2id={v: k for k, v in ID2LABEL.items()})
    kwargs.update(overrides)
    return DistilBertConfig(**kwargs)


def minilm_vocab() -> list:
    root = pathlib.Path(os.environ.get("TENAX_ASSETS", REPO / ".assets"))
    vocab = root / "all-minilm-l6-v2" / "vocab.txt"
    if not vocab.exists():
        sys.exit(f"{vocab} is missing: run tools/fetch_assets.sh")
    return vocab.read_text(encoding="utf-8").splitlines()[:VOCAB_SIZE]


def write_model_dir():
    torch.manual_seed(SEED)
    model = DistilBertForSequenceClassification(tiny_config())
    if MODEL_DIR.exists():
        shutil.rmtree(MODEL_DIR)
    model.save_pretrained(MODEL_DIR)
    (MODEL_DIR / "vocab.txt").write_text("\n".join(minilm_vocab()) + "\n", encoding="utf-8")
    (MODEL_DIR / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "tokenizer_class": "DistilBertTokenizer", "model_max_length": 128,
         "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
         "mask_token": "[MASK]"}, indent=2, sort_keys=True) + "\n")


def golden_inputs():
    """Three rows of real text through the tiny vocabulary: a long one, a padded one, a pair."""
    tokenizer = BertTokenizerFast(vocab_file=str(MODEL_DIR / "vocab.txt"), do_lower_case=True)
    enc = tokenizer(["the film was good and the story was very long , but the end was not",
                     "a short one", "is it good? no, it is not."], padding="max_length",
                    truncation=True, max_length=16, return_tensors="pt")
    assert enc["attention_mask"][1].sum() < 16, "row 1 must be padded"
    assert (enc["input_ids"] == 100).float().mean() < 0.3, "too many [UNK]s"
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "labels": torch.tensor([2, 0, 1], dtype=torch.int64)}


def loading_info(checkpoint_model, tmp: pathlib.Path, name: str) -> dict:
    path = tmp / name
    checkpoint_model.save_pretrained(path)
    keys = sorted(load_file(str(path / "model.safetensors")).keys())
    _, info = DistilBertForSequenceClassification.from_pretrained(path, num_labels=3, output_loading_info=True)
    return {"checkpoint_keys": keys, "missing_keys": sorted(info["missing_keys"]),
            "unexpected_keys": sorted(info["unexpected_keys"])}


def parity():
    model, info = DistilBertForSequenceClassification.from_pretrained(MODEL_DIR, output_loading_info=True)
    assert not any(info.values()), info
    model.eval()
    inputs = golden_inputs()
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    tensors = {k: v.contiguous() for k, v in inputs.items()}
    for i, h in enumerate(out.hidden_states):
        tensors[f"hidden_state_{i}"] = h.contiguous()
    tensors["logits"] = out.logits.contiguous()
    tensors["loss"] = out.loss.reshape(1).contiguous()

    torch.manual_seed(SEED)
    sinusoidal = DistilBertModel(tiny_config(sinusoidal_pos_embds=True))
    tensors["sinusoidal_position_embeddings"] = sinusoidal.embeddings.position_embeddings.weight.detach().contiguous()

    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(SEED)
        base = loading_info(DistilBertModel(tiny_config()), pathlib.Path(tmp), "base")
        torch.manual_seed(SEED)
        mlm = loading_info(DistilBertForMaskedLM(tiny_config()), pathlib.Path(tmp), "mlm")
    assert base["missing_keys"] and mlm["unexpected_keys"], (base, mlm)
    # The tiny model's 3-label head into a 2-label model (fine-tuning on other labels).
    _, info = DistilBertForSequenceClassification.from_pretrained(
        MODEL_DIR, num_labels=2, ignore_mismatched_sizes=True, output_loading_info=True)
    mismatched = {"missing_keys": sorted(info["missing_keys"]), "unexpected_keys": sorted(info["unexpected_keys"]),
                  "mismatched_keys": sorted(k for k, _, _ in info["mismatched_keys"])}
    assert mismatched["mismatched_keys"], info
    path = GOLDENS / "distilbert_parity.safetensors"
    save_file(tensors, str(path), metadata={"generator": GENERATOR, "base_model_loading": json.dumps(base),
                                            "masked_lm_loading": json.dumps(mlm),
                                            "mismatched_head_loading": json.dumps(mismatched)})
    print(f"wrote {path}: logits {out.logits.tolist()}, loss {out.loss.item():.6f}\n mismatched {mismatched}")


def roundtrip(build: pathlib.Path):
    tool = next(build.glob("**/roundtrip_tool"), None)
    if tool is None:
        sys.exit(f"no roundtrip_tool under {build}: ninja -C {build} roundtrip_tool")
    parity_file = load_file(str(GOLDENS / "distilbert_parity.safetensors"))
    with tempfile.TemporaryDirectory() as tmp:
        saved = pathlib.Path(tmp) / "finetuned"
        subprocess.run([str(tool), "distilbert", str(GOLDENS), str(saved)], check=True)
        weights = (saved / "model.safetensors").read_bytes()
        model, info = DistilBertForSequenceClassification.from_pretrained(saved, output_loading_info=True)
        assert not any(info.values()), f"transformers reported {info}"
        assert model.config.id2label == ID2LABEL, model.config.id2label
        assert model.config.architectures == ["DistilBertForSequenceClassification"]
        resaved = pathlib.Path(tmp) / "resaved"
        model.save_pretrained(resaved)
        assert (resaved / "model.safetensors").read_bytes() == weights, "save differs from Python's"
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=parity_file["input_ids"], attention_mask=parity_file["attention_mask"]).logits
    path = GOLDENS / "distilbert_roundtrip.safetensors"
    save_file({"logits": logits.contiguous()}, str(path), metadata={
        "model_safetensors_xxh3_64": xxhash.xxh3_64_hexdigest(weights),
        "model_safetensors_sha256": hashlib.sha256(weights).hexdigest(), "generator": GENERATOR})
    print(f"wrote {path}: logits {logits.tolist()}")


# With several metadata entries the safetensors crate orders them by hash, so a rerun may write
# different bytes with the same contents: commit a regenerated file only if its contents changed.


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=REPO / "build",
                        help="CMake build directory holding roundtrip_tool")
    parser.add_argument("--skip-roundtrip", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    GOLDENS.mkdir(parents=True, exist_ok=True)
    write_model_dir()  # deterministic: the seed fixes every weight
    parity()
    if not args.skip_roundtrip:
        roundtrip(args.build)


if __name__ == "__main__":
    main()
