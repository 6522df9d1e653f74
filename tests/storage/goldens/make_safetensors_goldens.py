#!/usr/bin/env python3
"""Writes the safetensors goldens that tests/storage/safetensors_test.cpp checks against.

    python3 -m venv .venv-tools && .venv-tools/bin/pip install safetensors numpy
    .venv-tools/bin/python tests/storage/goldens/make_safetensors_goldens.py

Outputs (committed, so CI needs no Python):
  tiny.safetensors  written by the Python `safetensors` package (its Rust serializer), one
                    tensor of every dtype Tenax supports, metadata {"format": "pt"} as
                    transformers' save_pretrained writes it;
  tiny.json         what the file holds: metadata, and per tensor dtype, shape, the values and
                    the raw little-endian bytes as hex.
bfloat16 goes through safetensors.serialize with raw bytes, since numpy has no bfloat16.
"""
import json
import os
import sys

import numpy as np
import safetensors
from safetensors import TensorSpec, serialize

HERE = os.path.dirname(os.path.abspath(__file__))


def bf16_bits(values):
    """Round-to-nearest-even float32 → bfloat16 bit patterns (the values below are exact)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def main():
    bf16_values = [1.0, -2.5, 0.0078125, 2.0**127]  # exact in bfloat16
    arrays = {
        # name: (safetensors dtype name for TensorSpec, numpy array holding the raw bytes, values)
        "bert.embeddings.word_embeddings.weight": (
            "float32", np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25 - 1.0, None),
        "bert.embeddings.position_ids": (
            "int64", np.array([[0, 1, 2, -3, 2**40, -(2**62)]], dtype=np.int64), None),
        "classifier.bias.f16": (
            "float16", np.array([[0.5, -1.5, 2.0], [65504.0, 2.0**-14, 0.0]], dtype=np.float16), None),
        "classifier.weight.bf16": ("bfloat16", bf16_bits(bf16_values), bf16_values),
        "attention_mask": ("uint8", np.array([1, 1, 0, 255, 7], dtype=np.uint8), None),
        "temperature": ("float32", np.array(3.5, dtype=np.float32), None),
        "empty": ("float32", np.zeros((0, 3), dtype=np.float32), None),
    }
    metadata = {"format": "pt"}
    specs = {
        name: TensorSpec(dtype=dtype, shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
        for name, (dtype, a, _) in arrays.items()
    }
    blob = serialize(specs, metadata=metadata)
    with open(os.path.join(HERE, "tiny.safetensors"), "wb") as f:
        f.write(blob)

    names = {"float32": "F32", "int64": "I64", "float16": "F16", "bfloat16": "BF16", "uint8": "U8"}
    expected = {
        "generator": "make_safetensors_goldens.py with safetensors " + safetensors.__version__ +
                     ", numpy " + np.__version__,
        "metadata": metadata,
        "tensors": {},
    }
    for name, (dtype, a, values) in arrays.items():
        expected["tensors"][name] = {
            "dtype": names[dtype],
            "shape": list(a.shape),
            "values": values if values is not None else a.reshape(-1).tolist(),
            "bytes_hex": a.tobytes().hex(),
        }
    with open(os.path.join(HERE, "tiny.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")
    print("wrote tiny.safetensors (%d bytes) and tiny.json" % len(blob))
    return 0


if __name__ == "__main__":
    sys.exit(main())
