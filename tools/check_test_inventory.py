#!/usr/bin/env python3
"""Fails when the test suite is smaller than expected, so that a missing tool is a red CI
instead of a quieter green.

Tests for Fortran, MPI, Slurm, the sim's mpirun cases and others are registered only when their
tool is found at configure time; without a count, a machine without gfortran runs fewer tests
and still passes. `.ci/expected-tests.txt` lists each ctest label with the minimum number of
tests it must have and what provides them; this script reads the build's test list
(`ctest --show-only=json-v1`) and compares.

    python3 tools/check_test_inventory.py BUILD [--expected .ci/expected-tests.txt]

Exit 0 when every label has at least its minimum, 1 when any falls short (one line each, naming
the label, the counts and what to install), 2 for usage errors.
"""
import argparse
import collections
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_expected(path):
    """[(label, minimum, what provides it)] from lines 'label minimum what ...'; # comments."""
    expected = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[1].isdigit():
                raise ValueError(f"{path}:{number}: expected 'LABEL MINIMUM [what provides it]', got {line!r}")
            expected.append((parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""))
    return expected


def label_counts(build):
    """{label: number of tests} and the total, from ctest's JSON test list."""
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ctest --show-only=json-v1 failed in {build}: {out.stderr.strip()}")
    tests = json.loads(out.stdout).get("tests", [])
    counts = collections.Counter()
    unlabelled = []
    for test in tests:
        labels = set()
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels.update(prop.get("value", []))
        counts.update(labels)
        if not labels:
            unlabelled.append(test.get("name", "?"))
    return counts, len(tests), unlabelled


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", help="the build directory (as for ctest --test-dir)")
    parser.add_argument("--expected", default=os.path.join(REPO, ".ci", "expected-tests.txt"))
    args = parser.parse_args()
    if not os.path.isdir(args.build):
        print(f"check_test_inventory: {args.build} is not a build directory; build first (make build)",
              file=sys.stderr)
        return 2
    try:
        expected = read_expected(args.expected)
        counts, total, unlabelled = label_counts(args.build)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"check_test_inventory: {e}", file=sys.stderr)
        return 2
    counts["*"] = total  # the label '*' in the expected file is the whole suite
    short = [(label, minimum, counts.get(label, 0), what) for label, minimum, what in expected
             if counts.get(label, 0) < minimum]
    summary = ", ".join(f"{label} {counts.get(label, 0)}" for label, _, _ in expected)
    print(f"test inventory: {total} tests; {summary}")
    for label, minimum, have, what in short:
        print(f"test inventory: label '{label}' has {have} tests, expected at least {minimum}"
              + (f": {what}" if what else ""), file=sys.stderr)
    # A test with no label escapes every per-label count; checked where the file counts the
    # whole suite ('*'). A flavour that builds only some binaries (the CUDA one) counts labels only.
    if not any(label == "*" for label, _, _ in expected):
        unlabelled = []
    for name in unlabelled:
        print(f"test inventory: test '{name}' has no label: give it one (tenax_test labels by folder; "
              f"add_test needs set_tests_properties(... LABELS ...)) so that it is counted", file=sys.stderr)
    if short or unlabelled:
        print(f"test inventory: {len(short)} label(s) short, {len(unlabelled)} test(s) unlabelled; failing "
              f"rather than passing with a smaller suite", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
