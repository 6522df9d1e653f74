#!/usr/bin/env python3
"""Unit tests of bench_rules.binaries()/header(): a result header names the binaries measured from
the first line of `<build>/launcher/tenax --version`, and says 'unknown' with a reason when the
launcher is missing or too old to know --version (fake launchers in a temporary directory)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
import bench_rules  # noqa: E402


def fake_build(root, script):
    os.makedirs(os.path.join(root, "launcher"))
    path = os.path.join(root, "launcher", "tenax")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + script)
    os.chmod(path, 0o755)
    return root


class Binaries(unittest.TestCase):
    def test_version_line_is_parsed(self):
        with tempfile.TemporaryDirectory() as d:
            fake_build(d, 'echo "tenax 0.1.0 (commit 00c7bb9d1e2f, tree dirty, flavour cuda, libtorch 2.11.0, Release)"\n'
                          'echo "second line"\n')
            line = bench_rules.binaries(d)
            self.assertTrue(line.startswith("binaries: commit 00c7bb9d1e2f, tree dirty, flavour cuda ("), line)

    def test_not_built_from_git(self):
        with tempfile.TemporaryDirectory() as d:
            fake_build(d, 'echo "tenax 0.1.0 (commit unknown, tree clean, flavour cpu, libtorch 1.13.0, Debug)"\n')
            self.assertTrue(bench_rules.binaries(d).startswith("binaries: commit unknown, tree clean, flavour cpu"))

    def test_too_old_or_missing_is_unknown_with_a_reason(self):
        with tempfile.TemporaryDirectory() as d:
            fake_build(d, 'echo "tenax: unknown option $1" >&2; exit 2\n')
            line = bench_rules.binaries(d)
            self.assertTrue(line.startswith("binaries: unknown ("), line)
            self.assertIn("unknown option --version", line)
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(bench_rules.binaries(d), f"binaries: unknown (no {d}/launcher/tenax)")

    def test_header_names_the_scripts_and_each_build(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            fake_build(a, 'echo "tenax 0.1.0 (commit 1111111, tree clean, flavour cpu, libtorch 1.13.0, Release)"\n')
            text = bench_rules.header("x bench", a, b, None)
            lines = text.splitlines()
            self.assertIn("scripts at commit ", lines[0])
            self.assertTrue(lines[1].startswith("  command: "))
            self.assertTrue(lines[2].startswith("  binaries: commit 1111111, tree clean, flavour cpu"))
            self.assertTrue(lines[3].startswith("  binaries: unknown (no "))
            self.assertEqual(len(lines), 4)


if __name__ == "__main__":
    unittest.main()
