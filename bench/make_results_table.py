#!/usr/bin/env python3
"""Generates bench/RESULTS.md from the result files bench/results/*.txt: one section per file,
its anchor the file's stem (`## results-recovery-2026-11-25` -> RESULTS.md#results-recovery-2026-11-25),
with the file's date, commits (the scripts' and, where the header names them, the binaries'),
rounds, command and setup lines, whether the figures follow the benchmark rules
(bench/README.md), and a table of its summary figures: measure, figure (median), range, rounds.

Nothing is typed by hand: every figure, range and setup line is copied from its result file, and
the generator checks that every number it writes into a table or a verbatim block is a substring
of that file. A file whose summary has no form parsed here (the older, hand-assembled ones) gets
its summary lines verbatim instead.

Usage: python3 bench/make_results_table.py [--repo DIR] [--check]
  --check: write nothing; exit 1 when bench/RESULTS.md differs from what would be generated.
"""
import argparse
import glob
import os
import re
import sys

NUM = r"[+-]?\d[\d,]*(?:\.\d+)?"
# A median with its range, as bench_rules.median_range() and the older scripts print it:
# "0.070 (0.053..0.085)", "93.7% (91.3..101.5)", "2.310 (2.085-2.436)", "1.48 (1.34..2.26)x".
FIGURE = re.compile(rf"(?<![\w.])(?P<v>{NUM})(?P<u1> ?%)? \((?P<lo>{NUM})(?:\.\.|-)(?P<hi>{NUM})\)(?P<u2>x| ?%| ?(?:ms|s)\b)?")
# A whole table cell that is one figure: "0.029", "6678", "1.000 (0.995-1.007)", "+0.62", "93.7% (91.3..101.5)".
CELL = re.compile(rf"^(?P<v>{NUM})(?P<u1> ?%|x| ?ms| ?s)?(?: \((?P<lo>{NUM})(?:\.\.|-)(?P<hi>{NUM})\)(?P<u2>x|%)?)?(?P<u3> ?ms| ?s)?$")
RANGE_CELL = re.compile(rf"^{NUM}(?:\.\. *|-){NUM}(?: ?ms| ?s)?$")
ROUND_LINE = re.compile(r"^\s*(round \d|r\d+ |\d+ [\w-]+,|== round|FAILED:|detection lines:)")
SKIP_COLUMNS = {"target", "ok", "runs ok", "recov./kills", "lost/run", "versions"}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def cells(line):
    """Cells of a space-aligned table line: (start column, text), split at runs of 2+ spaces
    (a range printed as "500..  503 ms" stays one cell)."""
    out = []
    for m in re.finditer(r"\S+(?: \S+)*", line):
        if out and out[-1][1].endswith(".."):
            out[-1] = (out[-1][0], line[out[-1][0]:m.end()])
        else:
            out.append((m.start(), m.group(0)))
    return out


def column_of(header, start, end):
    """The header cell whose span overlaps [start, end) most (the nearest one when none does)."""
    def overlap(c):
        return min(end, c[0] + len(c[1])) - max(start, c[0])
    return max(header, key=lambda c: (overlap(c), -abs(c[0] - start)))[1]


def clean(s):
    return re.sub(r"\s+", " ", s).strip(" ;,:")


def short(label, limit=90):
    if len(label) <= limit:
        return label
    cut = label[-limit:]
    return "…" + cut[cut.find(" ") + 1:] if " " in cut else "…" + cut


def figure_row(measure, m, rounds):
    unit = (m.group("u1") or "").strip() + "".join((m.groupdict().get(k) or "").strip() for k in ("u2", "u3"))
    rng = f"{m.group('lo')}..{m.group('hi')}" if m.group("lo") is not None else ""
    if rng and rng not in m.string:
        rng = f"{m.group('lo')}-{m.group('hi')}"
    return {"measure": measure, "figure": m.group("v"), "unit": unit, "range": rng, "rounds": rounds}


def per_round(line):
    m = re.search(r"\(rounds: ([^)]*)\)", line)
    return m.group(1) if m else None


def parse_markdown_tables(lines, rounds):
    rows, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s|:-]+\|$", lines[i + 1]):
            head = [c.strip() for c in lines[i].strip("|").split("|")]
            caption = next((clean(lines[k]) for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            what = head[0] if head[0] != "measure" else (caption.split(":")[0] if ":" in caption else "")
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cols = [c.strip() for c in lines[i].strip("|").split("|")]
                for name, text in zip(head[1:], cols[1:]):
                    m = CELL.match(text)
                    if m:
                        rows.append(figure_row(f"{what + ': ' if what else ''}{cols[0]} ({name})", m, rounds))
                        rows[-1]["at"] = (i, len(rows))
                i += 1
        else:
            i += 1
    return rows


def parse_aligned_tables(lines, rounds, used):
    """Space-aligned tables: a header line of labels, then rows whose cells are figures."""
    rows = []
    for i, line in enumerate(lines[:-1]):
        head = cells(line)
        if (len(head) < 2 or ROUND_LINE.match(line) or line.startswith("|") or FIGURE.search(line)
                or any(CELL.match(t) or RANGE_CELL.match(t) for _, t in head)):
            continue
        j = i + 1
        while j < len(lines):
            row = cells(lines[j])
            if len(row) < 2 or ROUND_LINE.match(lines[j]) or not any(CELL.match(t) for _, t in row[1:]):
                break
            label, last = clean(row[0][1]), None
            for start, text in row[1:]:
                name = column_of(head, start, start + len(text))
                m = CELL.match(text)
                if name.lower() in SKIP_COLUMNS:
                    continue
                if name in ("min", "max") and last is not None and m:  # "median  min  max" columns
                    last["range"] = text if name == "min" else f"{last['range']} .. {text}"
                    continue
                if m and not (RANGE_CELL.match(text) and last is not None):
                    measure = f"{label} ({name})" if len(head) > 2 and name != "median" else label
                    last = figure_row(measure, m, per_round(lines[j]) or rounds)
                    last["at"] = (j, start)
                    rows.append(last)
                elif RANGE_CELL.match(text) and last is not None and not last["range"]:
                    last["range"] = text
            used.add(j)
            j += 1
    return rows


def parse_free_lines(lines, rounds, used):
    """Lines outside tables holding 'median (range)' figures; the measure is the text before each
    figure, under the less indented lines above it."""
    rows = []
    for i, line in enumerate(lines):
        if i in used or line.startswith("|") or ROUND_LINE.match(line):
            continue
        found = list(FIGURE.finditer(line))
        if not found:
            continue
        indent = len(line) - len(line.lstrip())
        context = []
        for k in range(i - 1, -1, -1):
            above = lines[k]
            if not above.strip():
                break
            k_indent = len(above) - len(above.lstrip())
            if k_indent < indent and not re.match(r"\s*(over \d+ rounds?\b|medians?\b)", above):
                context.insert(0, clean(re.split(r"[,:(]| " + NUM, above.strip(), maxsplit=1)[0]))
                indent = k_indent
        prev, last = 0, ""
        for m in found:
            label = clean(line[prev:m.start()].split(";")[-1])
            prev = m.end()
            if len(label) < 4 and last:  # "... 386 (343-396) ms vs 193 (190-202) ms": "vs" alone says little
                label = f"{last} {label}".strip()
            last = label
            label = short(" / ".join(context + [label]) if label else " / ".join(context))
            rows.append(figure_row(label, m, per_round(line) or rounds))
            rows[-1]["at"] = (i, m.start())
    return rows


def header_block(lines):
    """The header: the lines up to the first blank line or the first per-round line (a header
    typed by hand: its leading '#' lines)."""
    block = []
    for line in lines:
        if (not line.strip() and block) or ROUND_LINE.match(line) or (block and block[0].startswith("#")
                                                                      and not line.startswith("#")):
            break
        block.append(line)
    return block


def describe(text, stem):
    lines = text.splitlines()
    head = header_block(lines)
    head_text = "\n".join(head)
    info = {}
    m = re.search(r"\d{4}-\d\d-\d\d(?: \d\d:\d\d:\d\d UTC|[ ,]+\d\d:\d\d(?:-\d\d:\d\d)? UTC)?", head_text)
    info["date"] = m.group(0) if m else stem[-10:]
    info["commits"] = list(dict.fromkeys(re.findall(r"\bcommit ([0-9a-f]{7,40})\b", "\n".join(
        x for x in head if "binaries:" not in x))))
    info["binaries"] = [clean(x.split("binaries:", 1)[1].split(" (")[0]) for x in head if "binaries:" in x]
    cmd = next((x.split("command:", 1)[1].strip() for x in head if "command:" in x), None)
    if cmd is None:
        cmd = next((x.lstrip("# ").split(": ", 1)[-1] if x.startswith("sim_overhead:") else x.lstrip("# ")
                    for x in head if re.search(r"bench/[\w./]+\.(py|sh)\b", x) and "=" in x or x.startswith("sim_overhead:")), None)
    info["command"] = cmd
    m = (re.search(r"(\d+) round\(s\)", text) or re.search(r"--rounds (\d+)", head_text)
         or re.search(r"\bROUNDS=(\d+)", head_text) or re.search(r"\b(\d+) rounds\b", head_text)
         or re.search(r"medians of (\d+) rounds", text))
    info["rounds"] = m.group(1) if m else None
    info["setup"] = [x.lstrip("# ").strip() for x in head[1:] if not re.search(r"command:|binaries:|^\s*(logs|work dir)", x)
                     and x.lstrip("# ").strip()]
    # The rules (bench/README.md): a header written by bench_rules, not by hand; at least 5 rounds;
    # the systems in an order shuffled per round; a new seed for the job in each round.
    why = []
    first = lines[0] if lines else ""
    if first.startswith("#") or not re.search(r"\bcommit [0-9a-f]{7}", "\n".join(lines[:2])):
        why.append("header typed by hand or without a commit")
    if info["rounds"] is None:
        why.append("no rounds")
    elif int(info["rounds"]) < 5:
        why.append(f"{info['rounds']} round(s), fewer than 5")
    if not re.search(r"shuffled|order seed|order drawn per round|seed \d+ \(--seed|heartbeat_silence: seed", text):
        why.append("systems in a fixed order")
    if re.search(r"^finetune bench: .*\bseed \d+, ", text, re.M):
        why.append("the same job seed in every round")
    info["rules"] = "yes" if not why else "no (" + "; ".join(why) + ")"
    return info


def summary_lines(lines):
    """The verbatim fallback: the lines from the first summary heading on, or the lines that
    head a profile's sections, or the lines that state an accuracy or a throughput."""
    start = next((i for i, x in enumerate(lines) if re.match(r"^(medians? |measure |condition |system )", x)), None)
    if start is not None:
        out = [x for x in lines[start:] if x.strip() and not re.match(r"^(logs:|rc=|real|user|sys|exit \d)", x)]
    else:
        out = [x for x in lines if re.match(r"^(## |== (?!round))", x)] or \
              [x for x in lines if re.search(r"accuracy|throughput|images/s", x) and len(x) < 260
               and not x.startswith(("TENAX_RESULT", "HF_RESULT"))]
    return out[:40]


def section(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    text = read(path)
    lines = text.splitlines()
    info = describe(text, stem)
    body = lines[len(header_block(lines)):]
    used = set()
    rows = []
    if info["rules"] == "yes":
        rows = parse_markdown_tables(body, info["rounds"]) + parse_aligned_tables(body, info["rounds"], used)
        rows += parse_free_lines(body, info["rounds"], used)
        rows.sort(key=lambda r: r["at"])
    out = [f"## {stem}", "",
           f"- file: [bench/results/{stem}.txt](results/{stem}.txt)",
           f"- rules: {info['rules']}",
           f"- date: {info['date']}",
           "- commit: " + (", ".join(info["commits"]) if info["commits"] else "not recorded")
           + "; binaries: " + ("; ".join(info["binaries"]) if info["binaries"]
                               else "not recorded (the header predates `tenax --version`)"),
           f"- rounds: {info['rounds'] or 'not stated'}",
           "- command: " + (f"`{info['command']}`" if info["command"] else "not recorded")]
    if info["setup"]:
        out.append("- setup (peers and their settings, from the header):")
        out += [f"  - {esc(x)}" for x in info["setup"]]
    out.append("")
    checked = []
    if rows:
        out += ["| measure | figure (median) | range | rounds (or the values per round) |", "| --- | --- | --- | --- |"]
        for r in rows:
            cells_ = [esc(r["measure"]), r["figure"] + (f" {r['unit']}" if r["unit"] else ""), r["range"] or "-",
                      esc(r["rounds"] or "-")]
            checked += cells_[1:]
            out.append("| " + " | ".join(cells_) + " |")
    else:
        verbatim = summary_lines(body if info["rules"] == "yes" else lines)
        checked += verbatim
        out += ["Summary, verbatim from the file (not parsed):", "", "```text"] + verbatim + ["```"]
    for piece in checked:
        for n in re.findall(r"\d+(?:\.\d+)?", piece):
            if n not in text:
                raise SystemExit(f"make_results_table: {stem}: {n!r} would appear in RESULTS.md but is not in {path}")
    return "\n".join(out) + "\n"


def esc(s):
    return s.replace("|", "\\|")


def generate(repo):
    files = sorted(glob.glob(os.path.join(repo, "bench", "results", "*.txt")))
    head = ["# Benchmark results", "",
            "Generated by `python3 bench/make_results_table.py` from the files in `bench/results/`; do not edit.",
            "Every figure below is copied from its result file. `rules: no` marks figures that predate the",
            "benchmark rules of bench/README.md (header by hand, fewer than 5 rounds, a fixed order, the same",
            "seed every round): quote them only with that caveat, or re-run them.", "",
            "| result file | date | rules |", "| --- | --- | --- |"]
    sections = []
    for f in files:
        stem = os.path.splitext(os.path.basename(f))[0]
        info = describe(read(f), stem)
        head.append(f"| [{stem}](#{stem}) | {info['date']} | {'yes' if info['rules'] == 'yes' else 'no'} |")
        sections.append(section(f))
    return "\n".join(head) + "\n\n" + "\n".join(sections)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--check", action="store_true", help="exit 1 when bench/RESULTS.md is out of date")
    a = p.parse_args()
    out = os.path.join(a.repo, "bench", "RESULTS.md")
    text = generate(a.repo)
    old = read(out) if os.path.exists(out) else None
    if a.check:
        if old != text:
            print(f"{out} is out of date: run python3 bench/make_results_table.py", file=sys.stderr)
            return 1
        return 0
    if old != text:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
