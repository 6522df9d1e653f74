#!/usr/bin/python3
"""Proves that Tenax checkpoint shards are plain HDF5 that h5py reads without Tenax.

    /usr/bin/python3 tests/storage/h5py_reads_shards.py STEP_DIR EXPECTED_JSON

Needs Debian's python3-h5py and python3-xxhash (tools/bootstrap.sh installs them), hence
/usr/bin/python3 rather than whichever python3 comes first on PATH. Run by the ctest tests
StorageShardsReadableByH5py and StorageH5pyCheckCatchesCorruption (tests/storage/CMakeLists.txt)
on a checkpoint written by h5py_check_main.cpp, which also writes EXPECTED_JSON:
{"values": {tensor name: [flat values]}} for the float32, float16, bfloat16 and int64 tensors.

For every tensor in manifest.json's index it opens the shard with h5py and checks: the dataset
exists, is contiguous and unfiltered, has the manifest's shape; its attributes dtype, shape and
xxh3 equal the manifest's; the raw bytes (read at the dataset's file offset) have the manifest's
length and XXH3-64 (recomputed with the xxhash module); h5py's own read of the values gives the
same bytes (bfloat16: the HDF5 type is a 16-bit float with bfloat16's bit layout); and the values
equal EXPECTED_JSON's. Each shard's size and whole-file XXH3-64 are checked too.
Exit 0 when everything matches, 1 on any mismatch (each printed), 2 when it cannot run.
"""
import json
import os
import sys

try:
    import h5py
    import numpy as np
    import xxhash
except ImportError as e:
    print("h5py_reads_shards: %s; install python3-h5py and python3-xxhash (tools/bootstrap.sh) "
          "and run with /usr/bin/python3" % e)
    sys.exit(2)

NUMPY_DTYPES = {"float32": "<f4", "float16": "<f2", "int64": "<i8", "uint8": "u1"}
# (sign position, exponent position, exponent size, mantissa position, mantissa size)
BF16_FIELDS = (15, 7, 8, 0, 7)


def text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def shape_attr(value):
    if isinstance(value, h5py.Empty):  # a scalar's shape [] is stored as a null dataspace
        return []
    return [int(v) for v in np.asarray(value).reshape(-1)]


def values_of(raw, dtype):
    if dtype == "bfloat16":
        bits = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
        return bits.view("<f4").tolist()
    return np.frombuffer(raw, dtype=NUMPY_DTYPES[dtype]).tolist()


def check_tensor(f, shard_path, name, entry, expected, problems):
    def bad(message):
        problems.append("%s (%s): %s" % (name, os.path.basename(shard_path), message))

    if name not in f:
        return bad("no such dataset")
    d = f[name]
    if not isinstance(d, h5py.Dataset):
        return bad("not a dataset")
    if list(d.shape) != entry["shape"]:
        bad("h5py shape %s, manifest %s" % (list(d.shape), entry["shape"]))
    if d.chunks is not None or d.compression is not None:
        bad("not a contiguous, unfiltered dataset")
    for key in ("dtype", "shape", "xxh3"):
        if key not in d.attrs:
            bad("attribute %s missing" % key)
    if "dtype" in d.attrs and text(d.attrs["dtype"]) != entry["dtype"]:
        bad("attribute dtype %r, manifest %r" % (text(d.attrs["dtype"]), entry["dtype"]))
    if "shape" in d.attrs and shape_attr(d.attrs["shape"]) != entry["shape"]:
        bad("attribute shape %s, manifest %s" % (shape_attr(d.attrs["shape"]), entry["shape"]))
    if "xxh3" in d.attrs and text(d.attrs["xxh3"]) != entry["checksum"]:
        bad("attribute xxh3 %s, manifest %s" % (text(d.attrs["xxh3"]), entry["checksum"]))

    # The bytes on disk, exactly: contiguous datasets have one file offset (none when empty).
    offset = d.id.get_offset()
    if offset is None:
        raw = b""
    else:
        with open(shard_path, "rb") as raw_file:
            raw_file.seek(offset)
            raw = raw_file.read(d.id.get_storage_size())
    if len(raw) != entry["nbytes"]:
        return bad("%d bytes on disk, manifest says %d" % (len(raw), entry["nbytes"]))
    digest = "%016x" % xxhash.xxh3_64_intdigest(raw)
    if digest != entry["checksum"]:
        bad("xxh3 mismatch: recomputed %s, manifest %s" % (digest, entry["checksum"]))

    if entry["dtype"] == "bfloat16":
        fields = d.id.get_type().get_fields()
        if tuple(fields) != BF16_FIELDS or d.id.get_type().get_size() != 2:
            bad("HDF5 type fields %s are not bfloat16's %s" % (fields, BF16_FIELDS))
    else:
        data = d[()]
        if data.dtype != np.dtype(NUMPY_DTYPES[entry["dtype"]]):
            bad("h5py reads dtype %s" % data.dtype)
        elif np.ascontiguousarray(data).tobytes() != raw:
            bad("h5py's values differ from the bytes on disk")

    if name in expected:
        got = values_of(raw, entry["dtype"])
        want = expected[name]
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            bad("values differ from what the writer wrote: %d values, expected %d; first "
                "difference at element %d" % (len(got), len(want), at))
        expected[name] = None  # seen


def main(argv):
    if len(argv) != 3:
        print("usage: h5py_reads_shards.py STEP_DIR EXPECTED_JSON")
        return 2
    step_dir, expected_path = argv[1], argv[2]
    with open(os.path.join(step_dir, "manifest.json")) as f:
        manifest = json.load(f)
    with open(expected_path) as f:
        expected = json.load(f)["values"]

    problems = []
    for shard in manifest["shards"]:
        path = os.path.join(step_dir, shard["file"])
        with open(path, "rb") as f:
            blob = f.read()
        if len(blob) != shard["bytes"]:
            problems.append("%s: %d bytes, manifest says %d" % (shard["file"], len(blob), shard["bytes"]))
        if "%016x" % xxhash.xxh3_64_intdigest(blob) != shard["checksum"]:
            problems.append("%s: whole-file xxh3 mismatch" % shard["file"])

    by_shard = {}
    for name, entry in manifest["tensors"].items():
        by_shard.setdefault(entry["shard"], []).append((name, entry))
    checked = 0
    for shard, entries in sorted(by_shard.items()):
        path = os.path.join(step_dir, shard)
        try:
            with h5py.File(path, "r") as f:
                for name, entry in sorted(entries):
                    check_tensor(f, path, name, entry, expected, problems)
                    checked += 1
        except OSError as e:
            problems.append("%s: h5py cannot open it: %s" % (shard, e))
    for name, values in sorted(expected.items()):
        if values is not None:
            problems.append("%s: expected values but the manifest has no such tensor" % name)

    for p in problems:
        print("MISMATCH " + p)
    print("h5py %s read %d tensors in %d shards of %s: %s"
          % (h5py.__version__, checked, len(manifest["shards"]), step_dir,
             "%d mismatches" % len(problems) if problems else "all match the manifest"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
