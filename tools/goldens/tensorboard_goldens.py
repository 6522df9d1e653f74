#!/usr/bin/env python3
"""TensorBoard's side of tests/sdk/callbacks/tensorboard_test.cpp.

    .venv-tb/bin/python tools/goldens/tensorboard_goldens.py           # (a) write the goldens
    .venv-tb/bin/python tools/goldens/tensorboard_goldens.py --read F  # (b) print F's scalars

(a) writes tests/sdk/goldens/tensorboard_scalars.tfevents with tensorboard's own EventFileWriter
    (TFRecord framing, CRC32C, Event protobufs from tensorboard.compat.proto) for the fixed
    scalars below, and tests/sdk/goldens/tensorboard_scalars.json listing them, which the C++
    test writes again through tenax::sdk::tensorboard::EventFileWriter and compares byte for
    byte. EventFileWriter stamps its file_version event with time.time(), so time.time is fixed
    while it is constructed; it also names itself in that event's source_metadata.writer, which
    the JSON records so that the test can have Tenax's writer name the same (Tenax's files say
    "tenax").
(b) reads an event file (or a directory of them) with tensorboard's EventAccumulator, the
    reader behind TensorBoard's scalar dashboard, and prints what it found as JSON.

Environment: tools/goldens/requirements-tensorboard.txt in a venv of its own:
    python3 -m venv .venv-tb && .venv-tb/bin/pip install -r tools/goldens/requirements-tensorboard.txt
"""
import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
from unittest import mock

import tensorboard
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def summary_iterator(path):
    return EventFileLoader(path).Load()

GOLDENS = os.path.join("tests", "sdk", "goldens")
EVENTS_FILE = "tensorboard_scalars.tfevents"
FILE_VERSION_WALL_TIME = 1700000000.125

# (tag, step, value, wall_time). Step 0 (a field proto3 leaves out), a step above 2**32, a
# value of 0 (written anyway: simple_value is in a oneof), values that float32 rounds, a tag of
# 200 bytes (a two-byte length) and one that is not ASCII.
SCALARS = [
    ("train/loss", 0, 0.6931471805599453, 1700000001.5),
    ("train/learning_rate", 0, 5e-05, 1700000001.5),
    ("train/loss", 10, 0.4123, 1700000002.25),
    ("train/learning_rate", 10, 4.5e-05, 1700000002.25),
    ("train/epoch", 10, 0.1, 1700000002.25),
    ("eval/loss", 10, 0.0, 1700000003.0078125),
    ("eval/accuracy", 10, 0.8254, 1700000003.0078125),
    ("train/grad_norm", 500, -3.25, 1700000100.0),
    ("eval/" + "x" * 195, 1000, 3.0e38, 1700000200.5),
    ("eval/f1_\u00e9t\u00e9", 2**40, 1e-30, 1700000300.75),
]


def write_goldens():
    os.makedirs(GOLDENS, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        with mock.patch("time.time", return_value=FILE_VERSION_WALL_TIME):
            writer = EventFileWriter(tmp)
        for tag, step, value, wall_time in SCALARS:
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(event_pb2.Event(wall_time=wall_time, step=step, summary=summary))
        writer.close()
        (written,) = glob.glob(os.path.join(tmp, "events.out.tfevents.*"))
        shutil.copyfile(written, os.path.join(GOLDENS, EVENTS_FILE))
    first = next(summary_iterator(os.path.join(GOLDENS, EVENTS_FILE)))
    assert first.file_version == "brain.Event:2" and first.wall_time == FILE_VERSION_WALL_TIME, first
    with open(os.path.join(GOLDENS, "tensorboard_scalars.json"), "w", encoding="utf-8") as f:
        json.dump({
            "generator": "tools/goldens/tensorboard_goldens.py",
            "tensorboard": tensorboard.__version__,
            "events_file": EVENTS_FILE,
            "file_version_wall_time": FILE_VERSION_WALL_TIME,
            "file_version_source_writer": first.source_metadata.writer,
            "scalars": [{"tag": t, "step": s, "value": v, "wall_time": w} for t, s, v, w in SCALARS],
        }, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {GOLDENS}/{EVENTS_FILE} and tensorboard_scalars.json with tensorboard {tensorboard.__version__}")


def read(path):
    acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    out = {
        "tensorboard": tensorboard.__version__,
        "file_version": getattr(acc, "file_version", None),
        "source_writer": next(summary_iterator(path)).source_metadata.writer if os.path.isfile(path) else None,
        "scalars": {
            tag: [{"step": e.step, "wall_time": e.wall_time, "value": e.value} for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]
        },
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", metavar="EVENT_FILE_OR_DIR", help="print the scalars TensorBoard reads from it")
    args = parser.parse_args()
    if args.read:
        read(args.read)
    else:
        write_goldens()


if __name__ == "__main__":
    main()
