#!/usr/bin/env python3
"""Goldens for Tenax's ViT (tests/sdk/models/vit_test.cpp), made by Python transformers.

No pretrained ViT can be fetched here, so parity is proven on a small ViT that transformers
initialises from a seed and saves. Run in the reference venv (Debian's python3-torch 1.13 plus
tools/goldens/requirements-model.txt, see model_goldens.py):

    ninja -C build roundtrip_tool
    .venv-torch113/bin/python tools/goldens/vit_goldens.py --build build

It writes into tests/sdk/models/goldens/:

  vit_tiny/                   the model directory transformers saved (config.json,
                              model.safetensors; 32x32 images, 8x8 patches) and its
                              preprocessor_config.json (ViTImageProcessor to 32x32)
  vit_parity.safetensors      seeded pixel values, every hidden state, the last hidden state,
                              logits and loss in eval mode; the logits with the position table
                              interpolated to 48x48 and to 32x48 images; in the metadata the
                              missing and unexpected keys transformers reports when loading a
                              bare ViTModel checkpoint (with its pooler)
  vit_roundtrip.safetensors   the logits transformers computes with the model Tenax fine-tuned
                              and saved (roundtrip_tool vit), and that file's hashes
"""
import argparse
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
import xxhash
from safetensors.torch import load_file, save_file
from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor, ViTModel

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "sdk" / "models" / "goldens"
MODEL_DIR = GOLDENS / "vit_tiny"
SEED = 777
GENERATOR = f"tools/goldens/vit_goldens.py; torch {torch.__version__}, transformers {transformers.__version__}"


def tiny_config() -> ViTConfig:
    return ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1,
                     # Ten times transformers' default, so that logits differ across inputs far
                     # beyond the 1e-4 parity bound.
                     initializer_range=0.2,
                     id2label={0: "cat", 1: "dog", 2: "bird"}, label2id={"cat": 0, "dog": 1, "bird": 2})


def roundtrip(build: pathlib.Path):
    tool = next(build.glob("**/roundtrip_tool"), None)
    if tool is None:
        sys.exit(f"no roundtrip_tool under {build}: ninja -C {build} roundtrip_tool")
    parity_file = load_file(str(GOLDENS / "vit_parity.safetensors"))
    with tempfile.TemporaryDirectory() as tmp:
        saved = pathlib.Path(tmp) / "finetuned"
        subprocess.run([str(tool), "vit", str(GOLDENS), str(saved)], check=True)
        weights = (saved / "model.safetensors").read_bytes()
        model, info = ViTForImageClassification.from_pretrained(saved, output_loading_info=True)
        assert not any(info.values()), f"transformers reported {info}"
        assert model.config.architectures == ["ViTForImageClassification"]
        resaved = pathlib.Path(tmp) / "resaved"
        model.save_pretrained(resaved)
        assert (resaved / "model.safetensors").read_bytes() == weights, "save differs from Python's"
        model.eval()
        with torch.no_grad():
            logits = model(pixel_values=parity_file["pixel_values"]).logits
    path = GOLDENS / "vit_roundtrip.safetensors"
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
    torch.manual_seed(SEED)
    model = ViTForImageClassification(tiny_config())
    if MODEL_DIR.exists():
        shutil.rmtree(MODEL_DIR)
    model.save_pretrained(MODEL_DIR)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(MODEL_DIR)

    model, info = ViTForImageClassification.from_pretrained(MODEL_DIR, output_loading_info=True)
    assert not any(info.values()), info
    model.eval()
    g = torch.Generator().manual_seed(SEED)
    pixel_values = torch.randn(3, 3, 32, 32, generator=g)
    labels = torch.tensor([2, 0, 1], dtype=torch.int64)
    tensors = {"pixel_values": pixel_values, "labels": labels}
    with torch.no_grad():
        out = model(pixel_values=pixel_values, labels=labels, output_hidden_states=True)
        for i, h in enumerate(out.hidden_states):
            tensors[f"hidden_state_{i}"] = h.contiguous()
        tensors["last_hidden_state"] = model.vit(pixel_values).last_hidden_state.contiguous()
        tensors["logits"] = out.logits.contiguous()
        tensors["loss"] = out.loss.reshape(1).contiguous()
        big = torch.randn(2, 3, 48, 48, generator=g)
        wide = torch.randn(2, 3, 32, 48, generator=g)
        tensors["pixel_values_48x48"] = big
        tensors["logits_48x48"] = model(pixel_values=big, interpolate_pos_encoding=True).logits.contiguous()
        tensors["pixel_values_32x48"] = wide
        tensors["logits_32x48"] = model(pixel_values=wide, interpolate_pos_encoding=True).logits.contiguous()

    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(SEED)
        ViTModel(tiny_config()).save_pretrained(tmp)
        keys = sorted(load_file(str(pathlib.Path(tmp) / "model.safetensors")).keys())
        _, base_info = ViTForImageClassification.from_pretrained(tmp, output_loading_info=True)
    base = {"checkpoint_keys": keys, "missing_keys": sorted(base_info["missing_keys"]),
            "unexpected_keys": sorted(base_info["unexpected_keys"])}
    assert base["missing_keys"] and base["unexpected_keys"], base
    path = GOLDENS / "vit_parity.safetensors"
    save_file(tensors, str(path), metadata={"generator": GENERATOR, "base_model_loading": json.dumps(base)})
    print(f"wrote {path}: logits {out.logits.tolist()}\n base {base['missing_keys']} {base['unexpected_keys']}")
    if not args.skip_roundtrip:
        roundtrip(args.build)


if __name__ == "__main__":
    main()
