#!/usr/bin/python3
"""The CPU communicators side by side: allreduce (float32 sum) time per call of Gloo (the default
build's communicator, Debian's libgloo) and Tenax's TCP ring (the communicator of the build on
PyPI's torch, whose libtorch hides its own Gloo; DESIGN.md decision 15), on the same ranks.

Each run is one invocation of build/bench/communicator_bench (communicator_bench.cpp says what it
measures and checks) for one backend: --ranks ranks as threads of one process over an in-memory
store, every size in --sizes (bytes: a flag's allreduce, a mirror-sized message, 1 MiB, and the
gradients of the fine-tuning bench's MiniLM, 22.8 M float32). Per round both backends run, in an
order shuffled from a printed seed; the figure per size is TCP's time per call divided by Gloo's in
the same round: the table gives the median and range over the rounds (bench_rules.py).

Usage: bench/communicator_bench.py [--build build] [--rounds 5] [--ranks 2] [--sizes B,B,...]
                                   [--min-seconds 0.5] [--seed S] [--results FILE]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

SYSTEMS = ("gloo", "tcp")
DEFAULT_SIZES = "8,65536,1048576,91226112"


def run_one(a, backend):
    cmd = [a.bin, "--backend", backend, "--ranks", str(a.ranks), "--sizes", a.sizes, "--min-seconds",
           str(a.min_seconds)]
    load0 = os.getloadavg()[0]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"communicator bench: {' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {"per_call": {r["bytes"]: r["seconds_per_call"] for r in rows}, "load_start": load0,
            "load_end": os.getloadavg()[0]}


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes", default=DEFAULT_SIZES)
    p.add_argument("--min-seconds", type=float, default=0.5)
    p.add_argument("--seed", type=int)
    p.add_argument("--results")
    a = p.parse_args()
    a.bin = os.path.join(a.build, "bench", "communicator_bench")
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"communicator bench: {a.bin} is missing; build it: cmake --build {a.build} --target communicator_bench")
    sizes = [int(s) for s in a.sizes.split(",")]
    report = bench_rules.Report("communicator", a.results, a.rounds)
    order = bench_rules.RoundOrder(SYSTEMS, a.seed)
    report.say(bench_rules.header("communicator bench", a.build))
    report.say(f"allreduce float32 sum, {a.ranks} ranks as threads of one process, sizes {a.sizes} bytes, "
               f"{a.rounds} rounds, >= {a.min_seconds} s of calls per size")
    report.say(order.describe())
    ratios = {s: [] for s in sizes}
    times = {b: {s: [] for s in sizes} for b in SYSTEMS}
    for k in range(1, a.rounds + 1):
        got = {}
        for backend in order.next_round():
            result = bench_rules.run_on_quiet_machine(lambda: run_one(a, backend), report.say,
                                                      f"round {k} {backend}")
            got[backend] = result
            cells = "  ".join(f"{human(s)} {result['per_call'][s] * 1e3:.3f} ms" for s in sizes)
            report.say(f"  round {k} {backend:5s} {cells}  load {result['load_start']:.1f}->{result['load_end']:.1f}"
                       + ("  (loaded)" if result.get("loaded") else ""))
        for s in sizes:
            for b in SYSTEMS:
                times[b][s].append(got[b]["per_call"][s])
            ratios[s].append(got["tcp"]["per_call"][s] / got["gloo"]["per_call"][s])
    report.say()
    report.say(f"medians of {a.rounds} rounds (range over rounds)")
    report.say(f"{'size':>10}  {'gloo ms/call':>26}  {'tcp ms/call':>26}  {'tcp / gloo (time; < 1: tcp faster)':>36}")
    for s in sizes:
        report.say(f"{human(s):>10}  {bench_rules.median_range([t * 1e3 for t in times['gloo'][s]], 4):>26}  "
                   f"{bench_rules.median_range([t * 1e3 for t in times['tcp'][s]], 4):>26}  "
                   f"{bench_rules.median_range(ratios[s]):>36}")
    report.save()


if __name__ == "__main__":
    main()
