#!/usr/bin/env python3
"""Evaluates a model directory that `tenax train train/jobs/fashion_mnist.toml` saved (<output_dir>/model) with
Python transformers: ViTForImageClassification.from_pretrained and
ViTImageProcessor.from_pretrained on it, then the accuracy on Fashion-MNIST's 10,000 test images
(gray replicated to RGB, as Tenax does). It must equal Tenax's own test_accuracy: the
saved model is what Tenax trained, and transformers computes the same logits from it.

  .assets/venv-hf-torch113/bin/python bench/hf_image_evaluate.py runs/demo-image/train/model
"""
import argparse
import gzip
import struct

import numpy as np
import torch
from transformers import ViTForImageClassification, ViTImageProcessor


def idx(path, dims):
    data = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    torch.set_num_threads(1)
    images = idx(f"{a.data_dir}/t10k-images-idx3-ubyte.gz", 3)
    labels = idx(f"{a.data_dir}/t10k-labels-idx1-ubyte.gz", 1)
    model = ViTForImageClassification.from_pretrained(a.model_dir).eval()
    processor = ViTImageProcessor.from_pretrained(a.model_dir)
    correct = 0
    with torch.no_grad():
        for i in range(0, len(labels), 500):
            rgb = [np.repeat(g[:, :, None], 3, axis=2) for g in images[i:i + 500]]
            pixel_values = processor(images=rgb, return_tensors="pt")["pixel_values"]
            correct += int((model(pixel_values=pixel_values).logits.argmax(-1).numpy() == labels[i:i + 500]).sum())
    print(f"transformers on {a.model_dir}: test accuracy {correct / len(labels):.4f} on {len(labels)} images")


if __name__ == "__main__":
    main()
