#!/usr/bin/env python3
"""Unit tests of bench_rules.binaries()/header()/blas_kernels(): a result header names the binaries
measured from the first line of `<build>/launcher/tenax --version` and the BLAS kernels from its
second, says 'unknown' with a reason when the launcher is missing or too old to know --version, sets
OPENBLAS_CORETYPE for every system when OpenBLAS falls back, and refuses forced slower kernels (fake
launchers in a temporary directory)."""
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
            self.assertTrue(lines[4].startswith("  blas: unknown ("), lines[4])  # this fake names no BLAS
            self.assertEqual(len(lines), 5)


VERSION = 'echo "tenax 0.1.0 (commit 1111111, tree clean, flavour cpu, libtorch 1.13.0, Release)"\n'


class BlasKernels(unittest.TestCase):
    def setUp(self):
        self.saved = os.environ.pop("OPENBLAS_CORETYPE", None)

    def tearDown(self):
        os.environ.pop("OPENBLAS_CORETYPE", None)
        if self.saved is not None:
            os.environ["OPENBLAS_CORETYPE"] = self.saved

    def test_native_kernels_are_recorded_and_nothing_is_set(self):
        with tempfile.TemporaryDirectory() as d:
            fake_build(d, VERSION + 'echo "BLAS: OpenBLAS 0.3.21, core Cooperlake; CPU AVX-512"\n')
            self.assertEqual(bench_rules.blas_kernels(d), "blas: OpenBLAS 0.3.21, core Cooperlake; CPU AVX-512")
            self.assertNotIn("OPENBLAS_CORETYPE", os.environ)

    def test_a_fallback_sets_the_better_core_for_every_system(self):
        with tempfile.TemporaryDirectory() as d:
            fake_build(d, VERSION + 'echo "BLAS: OpenBLAS 0.3.21 does not know this CPU (AVX-512) and falls back to '
                                    'its Prescott kernels; the workers get OPENBLAS_CORETYPE=SkylakeX (set '
                                    'OPENBLAS_CORETYPE yourself to choose otherwise)"\n')
            line = bench_rules.blas_kernels(d)
            self.assertTrue(line.endswith("OPENBLAS_CORETYPE=SkylakeX for every system of this bench"), line)
            self.assertEqual(os.environ.get("OPENBLAS_CORETYPE"), "SkylakeX")

    def test_forced_slower_kernels_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            fake_build(d, VERSION + 'echo "BLAS: OpenBLAS 0.3.21 with OPENBLAS_CORETYPE=Prescott (yours) runs its '
                                    'Prescott kernels; CPU AVX-512: slower kernels than this CPU can run; unset '
                                    'OPENBLAS_CORETYPE (tenax run then chooses) or set OPENBLAS_CORETYPE=SkylakeX"\n')
            with self.assertRaises(SystemExit) as stop:
                bench_rules.blas_kernels(d)
            self.assertEqual(stop.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
