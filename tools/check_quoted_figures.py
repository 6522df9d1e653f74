#!/usr/bin/env python3
"""Fails when a figure quoted in the docs is not in a result file (issue 29, point 5).

The convention: a measured figure in README.md, docs/**/*.md or bench/README.md is a Markdown link
to its section of bench/RESULTS.md, the anchor being the result file's stem:

    [0.070 s](bench/RESULTS.md#results-recovery-2026-11-25)          from README.md
    [32.1×](../bench/RESULTS.md#results-recovery-2026-11-25)         from docs/*.md
    [1.48x](RESULTS.md#results-recovery-2026-11-25)                  from bench/README.md

Reported, one line per problem (file:line, the figure, the stem), exit status 1:
- a link whose stem has no bench/results/<stem>.txt, or whose path does not lead to bench/RESULTS.md;
- a number in the link text (0.070, 32.1, 1,038: compared as written and without thousands
  separators, as a whole number, not part of a longer one) that is not in that result file;
- bench/RESULTS.md out of date (bench/make_results_table.py would write something else);
- outside code, an unlinked figure that looks measured: a ratio with its sign attached, like
  1.14× or 0.88x (not a product like "2 × 8"), or a percentage with decimals, like 4.2 % (not a
  setting like "10 % loss"; not a bound: "≤ 1.5 %", ">= 1.0x", "under 2.5 %" are targets and pass).
  A line holding <!-- not-a-measurement --> is left alone.

Usage: python3 tools/check_quoted_figures.py [--repo DIR] [--files F ...]
"""
import argparse
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]*RESULTS\.md#(?P<stem>[^)\s]*))\)")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
ESCAPE = "<!-- not-a-measurement -->"
BOUND = r"(?:[≤≥<>±~]=?\s*|&[lg]t;=?\s*|\b(?:under|below|above|within|at most|at least|up to|target)\s+)"
# An unlinked measured-looking figure: a ratio with its sign attached ("1.14×", "0.88x", "32x"; not
# "2 × 8", a product) or a percentage with decimals ("4.2 %", "-0.15%"; not "10 % loss", a setting).
RATIO = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)[×x](?![\w])")
PERCENT = re.compile(r"(?<![\w.,])([+-]?\d[\d,]*\.\d+)\s?%")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def doc_files(repo):
    files = [os.path.join(repo, "README.md"), os.path.join(repo, "bench", "README.md")]
    files += sorted(glob.glob(os.path.join(repo, "docs", "**", "*.md"), recursive=True))
    return [f for f in files if os.path.isfile(f)]


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks, inline code removed."""
    fenced = False
    for n, line in enumerate(read(path).splitlines(), 1):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", "", line.rstrip("\n"))


def in_file(number, text):
    """Whether `number` (as written, or without thousands separators) is in `text` as a whole number."""
    plain = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    for form, where in ((number, text), (number.replace(",", ""), plain)):
        if re.search(rf"(?<![\d.,]){re.escape(form)}(?!,?\d|\.\d)", where):
            return True
    return False


def bounded(line, start):
    """Whether the figure at `start` follows a bound word or sign (a target, not a measurement)."""
    return re.search(rf"{BOUND}$", line[:start]) is not None


def check_file(path, repo, results_md):
    problems = []
    rel = os.path.relpath(path, repo)
    for n, line in prose_lines(path):
        for m in LINK.finditer(line):
            stem, target = m.group("stem"), m.group("target")
            where = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
            if where != results_md:
                problems.append(f"{rel}:{n}: link '{m.group(0)}' does not lead to bench/RESULTS.md "
                                f"(write it relative to {rel})")
                continue
            result = os.path.join(repo, "bench", "results", stem + ".txt")
            if not os.path.isfile(result):
                problems.append(f"{rel}:{n}: figure '{m.group('text')}' cites {stem}, but there is no "
                                f"bench/results/{stem}.txt")
                continue
            text = read(result)
            for number in NUMBER.findall(m.group("text")):
                if not in_file(number, text):
                    problems.append(f"{rel}:{n}: figure '{number}' ('{m.group('text')}') is not in "
                                    f"bench/results/{stem}.txt ({stem})")
        if ESCAPE in line:
            continue
        bare = LINK.sub("", line)
        bare = re.sub(r"https?://\S+|\]\([^)]*\)", "", bare)
        for pattern, kind in ((RATIO, "ratio"), (PERCENT, "percentage")):
            for m in pattern.finditer(bare):
                if not bounded(bare, m.start()):
                    problems.append(f"{rel}:{n}: unlinked {kind} '{m.group(0).strip()}': link it to "
                                    f"bench/RESULTS.md#<stem> or mark the line {ESCAPE}")
    return problems


def results_md_problems(repo):
    sys.path.insert(0, os.path.join(HERE, "..", "bench"))
    import make_results_table  # noqa: E402
    path = os.path.join(repo, "bench", "RESULTS.md")
    want = make_results_table.generate(repo)
    have = read(path) if os.path.exists(path) else None
    if have != want:
        return ["bench/RESULTS.md: out of date with bench/results/ (run python3 bench/make_results_table.py)"]
    return []


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=os.path.dirname(HERE))
    p.add_argument("--files", nargs="*", help="the Markdown files to check (default: README.md, bench/README.md, docs/**/*.md)")
    a = p.parse_args(argv)
    repo = os.path.abspath(a.repo)
    results_md = os.path.join(repo, "bench", "RESULTS.md")
    files = [os.path.abspath(f) for f in a.files] if a.files else doc_files(repo)
    problems = results_md_problems(repo)
    for f in files:
        problems += check_file(f, repo, results_md)
    for line in problems:
        print(line)
    if problems:
        print(f"check_quoted_figures: {len(problems)} problem(s) in {len(files)} file(s)", file=sys.stderr)
        return 1
    print(f"check_quoted_figures: {len(files)} file(s), every quoted figure is in its result file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
