#!/usr/bin/env python3
"""Goldens for Tenax's ViT (tests/sdk/models/vit_test.cpp), made by Python transformers.

No pretrained ViT can be fetched here, so parity is proven on a small ViT that transformers
initialises from a seed and saves. Run in the reference venv (Debian's python3-torch 1.13 plus
tools/goldens/requirements-model.txt, see model_goldens.py):

    .venv-torch113/bin/python tools/goldens/vit_goldens.py

It writes into tests/sdk/models/goldens/:

  vit_tiny/                   the model directory transformers saved (config.json,
                              model.safetensors; 32x32 images, 8x8 patches)
  vit_parity.safetensors      seeded pixel values, every hidden state, the last hidden state,
                              logits and loss in eval mode; the logits with the position table
                              interpolated to 48x48 and to 32x48 images; in the metadata the
                              missing and unexpected keys transformers reports when loading a
                              bare ViTModel checkpoint (with its pooler)
"""
import json
import pathlib
import shutil
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import ViTConfig, ViTForImageClassification, ViTModel

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


def main():
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    model = ViTForImageClassification(tiny_config())
    if MODEL_DIR.exists():
        shutil.rmtree(MODEL_DIR)
    model.save_pretrained(MODEL_DIR)

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


if __name__ == "__main__":
    main()
