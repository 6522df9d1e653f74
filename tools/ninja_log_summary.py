#!/usr/bin/env python3
"""Summarises a build's .ninja_log: wall time, compile and link seconds, the slowest units.

    python3 tools/ninja_log_summary.py build/.ninja_log [--top 10]

Each line of a .ninja_log (v5) is start ms, end ms, mtime, output, hash; a target rebuilt later in
the same build directory appears again, and only its last entry counts (ninja's own rule).
"Compile" is every object (.o) and precompiled header (.gch); the rest is links and custom steps.
Times are wall-clock per step, so with -j2 the sum of steps is about twice the wall time.
"""
import argparse
import sys


def read_log(path):
    entries = {}
    with open(path) as f:
        header = f.readline()
        if not header.startswith("# ninja log v"):
            raise ValueError(f"{path}: not a .ninja_log (first line {header.strip()!r})")
        for number, line in enumerate(f, 2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                raise ValueError(f"{path}:{number}: expected 5 tab-separated fields")
            start, end, _, output, _ = parts
            entries[output] = (int(start), int(end))
    return entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    try:
        entries = read_log(args.log)
    except (OSError, ValueError) as e:
        print(f"ninja_log_summary: {e}", file=sys.stderr)
        return 2
    seconds = {out: (end - start) / 1000 for out, (start, end) in entries.items()}
    compile_s = sum(s for out, s in seconds.items() if out.endswith((".o", ".gch")))
    other_s = sum(seconds.values()) - compile_s
    wall = (max(end for _, end in entries.values()) - min(start for start, _ in entries.values())) / 1000
    print(f"{args.log}: {len(entries)} steps, wall {wall:.0f} s, compile {compile_s:.0f} s, "
          f"link and other {other_s:.0f} s")
    print(f"slowest {args.top}:")
    for out, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {s:6.1f} s  {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
