#!/usr/bin/env python3
"""Exports an MNIST-layout IDX data set (MNIST, Fashion-MNIST: Debian's dataset-fashion-mnist) to
an image folder — OUT/train/CLASS/NNNNN.png and OUT/test/CLASS/NNNNN.png, the layout of
torchvision's ImageFolder and the datasets library's `imagefolder` builder — so that
`tenax train` (data.train_dir) and Hugging Face's run_image_classification.py read the same
images. The PNGs are 8-bit gray, written with the standard library only (zlib); a second run
with the same arguments writes the same bytes.

    python3 tools/idx_to_image_folder.py /usr/share/datasets/fashion-mnist runs/fashion-mnist-folder \\
        [--limit N]   (the first N images of each split; default all)

Exit 2 for a missing or malformed IDX file, naming it.
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

FASHION_CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle_boot"]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except OSError as e:
        print(f"idx_to_image_folder: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)
    if len(data) < 8 or data[0] != 0 or data[1] != 0 or data[2] != 8:
        print(f"idx_to_image_folder: {path} is not an unsigned-byte IDX file", file=sys.stderr)
        sys.exit(2)
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    body = data[4 + 4 * dims:]
    count = 1
    for d in shape:
        count *= d
    if len(body) != count:
        print(f"idx_to_image_folder: {path} holds {len(body)} bytes of data, its header says {count}", file=sys.stderr)
        sys.exit(2)
    return shape, body


def png_gray(width, height, pixels):
    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    rows = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


def find(directory, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    print(f"idx_to_image_folder: no {stem}[.gz] in {directory} (Debian: apt-get install dataset-fashion-mnist)",
          file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("idx_dir")
    p.add_argument("out")
    p.add_argument("--limit", type=int, default=0)
    a = p.parse_args()
    fashion = "fashion" in os.path.abspath(a.idx_dir).lower()
    for split, prefix in (("train", "train"), ("test", "t10k")):
        (n, h, w), images = read_idx(find(a.idx_dir, f"{prefix}-images-idx3-ubyte"))
        (m,), labels = read_idx(find(a.idx_dir, f"{prefix}-labels-idx1-ubyte"))
        if n != m:
            print(f"idx_to_image_folder: {n} {split} images but {m} labels", file=sys.stderr)
            sys.exit(2)
        count = min(n, a.limit) if a.limit > 0 else n
        for i in range(count):
            label = labels[i]
            name = FASHION_CLASSES[label] if fashion and label < len(FASHION_CLASSES) else str(label)
            folder = os.path.join(a.out, split, name)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{i:05d}.png"), "wb") as f:
                f.write(png_gray(w, h, images[i * h * w:(i + 1) * h * w]))
        print(f"{a.out}/{split}: {count} images")


if __name__ == "__main__":
    main()
