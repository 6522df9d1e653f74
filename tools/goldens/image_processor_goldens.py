#!/usr/bin/env python3
"""Goldens for Tenax's image decoding, Pillow resize and ViTImageProcessor (tests/sdk/vision).

Run in the reference venv (tools/goldens/requirements-model.txt, made with
--system-site-packages) with Debian's Pillow (apt-get install python3-pil: it links Debian's
libjpeg-turbo and libpng, the libraries Tenax decodes with):

    .venv-torch113/bin/python tools/goldens/image_processor_goldens.py

The images in tests/sdk/vision/goldens/images are real files from Debian's
python-matplotlib-data 3.6.3-1 (usr/share/matplotlib/mpl-data/sample_data; matplotlib's
license): grace_hopper.jpg, a photograph (public domain), and Minduka_Present_Blue_Pack.png, an
RGBA drawing. Their SHA-256 is checked below. For each image the script writes
tests/sdk/vision/goldens/<image>.safetensors with:

  pixel_values_<name>  ViTImageProcessor(<settings>)(image)["pixel_values"] (float32 [1, 3, h, w])
  metadata rgb_xxh3_64  of Image.open(path).convert("RGB")'s uint8 [H, W, 3] bytes (and its size)
  metadata resized_<h>x<w>_xxh3_64
                       of that image .resize((w, h), Image.BILINEAR)'s bytes: decoding and
                       resizing must be exact, so a hash is enough and keeps the goldens small

and tests/sdk/vision/goldens/processors.json: the settings of each named processor.
"""
import hashlib
import json
import pathlib

import numpy as np
import PIL
import torch
import transformers
import xxhash
from PIL import Image
from safetensors.torch import save_file
from transformers import ViTImageProcessor

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "sdk" / "vision" / "goldens"
IMAGES = {
    "grace_hopper.jpg": "a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130",
    "Minduka_Present_Blue_Pack.png": "5e72868826a7a4329a950e5a9efa393594807833fb7f27e5cd001a8afb9cd081",
}
# ViT's defaults (224 square, mean/std 0.5), a non-square size with ImageNet statistics, and one
# that upsamples every image; plus the sizes resized to with Pillow directly.
PROCESSORS = {
    "default": {},
    "imagenet_96x160": {"size": {"height": 96, "width": 160}, "image_mean": [0.485, 0.456, 0.406],
                        "image_std": [0.229, 0.224, 0.225]},
    "upsample_150x140": {"size": {"height": 150, "width": 140}},
}
RESIZES = [(224, 224), (96, 160), (31, 47), (700, 650), (150, 140), (600, 17)]


# With several metadata entries the safetensors crate orders them by hash, so a rerun may write
# different bytes with the same contents: commit a regenerated file only if its contents changed.


def main():
    generator = (f"tools/goldens/image_processor_goldens.py; Pillow {PIL.__version__}, "
                 f"transformers {transformers.__version__}")
    processors = {name: ViTImageProcessor(**kwargs) for name, kwargs in PROCESSORS.items()}
    (GOLDENS / "processors.json").write_text(json.dumps(
        {name: json.loads(p.to_json_string()) for name, p in processors.items()}, indent=2, sort_keys=True) + "\n")
    for name, sha in IMAGES.items():
        path = GOLDENS / "images" / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha, f"{path} is not the Debian file"
        image = Image.open(path).convert("RGB")
        meta = {"generator": generator, "image": name, "height": str(image.height), "width": str(image.width),
                "rgb_xxh3_64": xxhash.xxh3_64_hexdigest(np.asarray(image).tobytes())}
        for h, w in RESIZES:
            resized = np.asarray(image.resize((w, h), Image.BILINEAR))
            assert resized.shape == (h, w, 3)
            meta[f"resized_{h}x{w}_xxh3_64"] = xxhash.xxh3_64_hexdigest(resized.tobytes())
        tensors = {}
        for pname, processor in processors.items():
            tensors[f"pixel_values_{pname}"] = processor(image, return_tensors="pt")["pixel_values"].contiguous()
        out = GOLDENS / (pathlib.Path(name).stem + ".safetensors")
        save_file(tensors, str(out), metadata=meta)
        print(f"wrote {out}: {image.size} {sorted(tensors)}")


if __name__ == "__main__":
    main()
