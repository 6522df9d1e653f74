#!/usr/bin/env python3
"""Unit tests of tools/check_quoted_figures.py and bench/make_results_table.py on fixture trees
in temporary directories: a figure that is in its result file passes; a fabricated figure, a
missing stem, an unlinked ratio and a stale bench/RESULTS.md fail, each named with file:line."""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import check_quoted_figures  # noqa: E402
import make_results_table  # noqa: E402

RESULT = textwrap.dedent("""\
    recovery bench 2026-11-25 04:59:17 UTC, scripts at commit 2230ae4, 2 cores, load 0.43 1.05 1.63
      command: bench/recovery_bench.py --build build --rounds 5
      binaries: commit 00c7bb9d1e2f, tree clean, flavour cpu (build/launcher/tenax --version: "tenax 0.1.0")
      job: 2 ranks, 1000 steps; 5 round(s); system order: shuffled per round with seed 7 (--seed 7 repeats it)

      round 1  tenax  recover 0.070 s

    ratios other / tenax-in-process (within a round; median (range) over rounds):
      recovery  torchrun-0.02s      32.08 (13.22..38.24)x   (rounds: 36.69, 30.51, 13.22, 32.08, 38.24)
      samples/s tenax                1,038 (1,001..1,100)
    """)


class Fixture:
    def __init__(self, docs):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        os.makedirs(os.path.join(self.root, "bench", "results"))
        with open(os.path.join(self.root, "bench", "results", "results-recovery-2026-11-25.txt"), "w") as f:
            f.write(RESULT)
        for name, text in docs.items():
            path = os.path.join(self.root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(textwrap.dedent(text))
        with open(os.path.join(self.root, "bench", "RESULTS.md"), "w") as f:
            f.write(make_results_table.generate(self.root))

    def check(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = check_quoted_figures.main(["--repo", self.root])
        return rc, out.getvalue()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.dir.cleanup()


class CheckQuotedFigures(unittest.TestCase):
    def test_figures_from_the_result_file_pass(self):
        with Fixture({"README.md": """\
                Recovery in [32.08×](bench/RESULTS.md#results-recovery-2026-11-25) less time, at
                [1,038 samples/s](bench/RESULTS.md#results-recovery-2026-11-25) and [1038](bench/RESULTS.md#results-recovery-2026-11-25).
                A target of ≥ 1.0x and ≤ 1.5 % is no measurement; nor is 2 × 8 threads or 10 % loss.
                """,
                      "docs/recovery.md": "Took [0.070 s](../bench/RESULTS.md#results-recovery-2026-11-25).\n",
                      "bench/README.md": "[32.08x](RESULTS.md#results-recovery-2026-11-25)\n"}) as fx:
            rc, out = fx.check()
            self.assertEqual(rc, 0, out)

    def test_a_fabricated_figure_fails(self):
        with Fixture({"README.md": "intro\nRecovery is [0.044 s](bench/RESULTS.md#results-recovery-2026-11-25) now.\n"}) as fx:
            rc, out = fx.check()
            self.assertEqual(rc, 1)
            self.assertIn("README.md:2: figure '0.044'", out)
            self.assertIn("results-recovery-2026-11-25", out)

    def test_part_of_a_longer_number_is_not_the_figure(self):
        with Fixture({"README.md": "[2.08x](bench/RESULTS.md#results-recovery-2026-11-25)\n"}) as fx:
            rc, out = fx.check()  # 2.08 is only inside 32.08
            self.assertEqual(rc, 1, out)

    def test_a_missing_stem_fails(self):
        with Fixture({"docs/a/b.md": "x\n\ny [22x](../../bench/RESULTS.md#results-recovery-2026-11-24)\n"}) as fx:
            rc, out = fx.check()
            self.assertEqual(rc, 1)
            self.assertIn("docs/a/b.md:3: figure '22x' cites results-recovery-2026-11-24", out)

    def test_a_link_that_misses_results_md_fails(self):
        with Fixture({"docs/x.md": "[32.08x](bench/RESULTS.md#results-recovery-2026-11-25)\n"}) as fx:
            rc, out = fx.check()
            self.assertEqual(rc, 1)
            self.assertIn("does not lead to bench/RESULTS.md", out)

    def test_an_unlinked_ratio_fails_unless_marked_or_in_code(self):
        with Fixture({"README.md": """\
                Tenax is 1.14× faster.
                Tenax is 0.88x as fast. <!-- not-a-measurement -->
                The stall is 4.2 % of a save.
                ```
                speedup 1.14x
                ```
                Inline `1.14x` is code.
                """}) as fx:
            rc, out = fx.check()
            self.assertEqual(rc, 1)
            self.assertIn("README.md:1: unlinked ratio '1.14×'", out)
            self.assertIn("README.md:3: unlinked percentage '4.2 %'", out)
            self.assertEqual(len(out.strip().splitlines()), 2, out)

    def test_a_stale_results_md_fails(self):
        with Fixture({}) as fx:
            with open(os.path.join(fx.root, "bench", "results", "results-sim-2026-11-24.txt"), "w") as f:
                f.write("sim_overhead: commit 80941e4\n")
            rc, out = fx.check()
            self.assertEqual(rc, 1)
            self.assertIn("bench/RESULTS.md: out of date", out)


class MakeResultsTable(unittest.TestCase):
    def test_sections_figures_and_provenance_come_from_the_file(self):
        with Fixture({}) as fx:
            text = make_results_table.read(os.path.join(fx.root, "bench", "RESULTS.md"))
            self.assertIn("## results-recovery-2026-11-25", text)
            self.assertIn("| 32.08 x | 13.22..38.24 |", text)
            self.assertIn("commit: 2230ae4; binaries: commit 00c7bb9d1e2f, tree clean, flavour cpu", text)
            self.assertIn("- rules: yes", text)
            self.assertEqual(text, make_results_table.generate(fx.root))  # deterministic

    def test_check_mode_exits_1_when_out_of_date(self):
        with Fixture({}) as fx:
            script = os.path.join(REPO, "bench", "make_results_table.py")
            self.assertEqual(subprocess.run([sys.executable, script, "--repo", fx.root, "--check"]).returncode, 0)
            with open(os.path.join(fx.root, "bench", "RESULTS.md"), "a") as f:
                f.write("hand edit\n")
            self.assertEqual(subprocess.run([sys.executable, script, "--repo", fx.root, "--check"],
                                            stderr=subprocess.DEVNULL).returncode, 1)

    def test_a_pre_rules_file_is_marked_and_listed_verbatim(self):
        with Fixture({}) as fx:
            with open(os.path.join(fx.root, "bench", "results", "results-finetune-2026-11-23.txt"), "w") as f:
                f.write("finetune bench: 300 steps, seed 42, 2 threads; 3 round(s)\n\nmedians of 3 round(s)\n"
                        "samples/s Tenax / HF-Debian                 1.029  >= 1.0\n")
            text = make_results_table.generate(fx.root)
            self.assertIn("- rules: no (header typed by hand or without a commit; 3 round(s), fewer than 5; "
                          "systems in a fixed order; the same job seed in every round)", text)
            self.assertIn("samples/s Tenax / HF-Debian                 1.029  >= 1.0", text)


if __name__ == "__main__":
    unittest.main()
