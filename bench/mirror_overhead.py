#!/usr/bin/env python3
"""What in-process recovery's mirror of a simulation's registered state costs per solver step
(issue 37, point 4; not a test).

examples/sim_surrogate runs as 2 ranks under `tenax run --nproc-per-node 2 --recovery in-process`
(every core busy: one rank per core), the same launcher, the same job, twice:

  ignore   with --ignore-recovery: the program does not call tenax_enable_in_process_recovery, so
           nothing is mirrored (a lost peer would restart every worker from the checkpoint);
  mirror   as shipped: every tenax_train_step allgathers every rank's registered arrays (its strip
           of the field, the time, the step) and the random state rides in the gradient allreduce,
           so that a lost rank is healed from the survivors' memory.

  mirror share  = the time the mirroring run spent in the mirror (the Trainer reports it at the end
                  of a run: its allgathers and copies, timed inside) / the rest of that run: what
                  it adds to a solver step, measured within one run     (target <= 5 %, at the
                  example's size)
  A/B overhead  = mirror / ignore - 1, per solver step, across runs (shown: it also counts what
                  the mirror does to the timing of the rest, but on 2 busy cores a solver step's
                  halo exchange makes it vary from run to run by more than the target)

Two problem sizes: the example's own (its defaults, 128 x 128 cells) and sim_overhead.py's
(512 x 512: a 1 MB strip per rank, where the mirror's bytes weigh most). Every round runs the four
(size, system) pairs in an order shuffled from a printed seed (--seed repeats it;
bench/bench_rules.py), --repeats times over, interleaved, and keeps each one's fastest run (other
work only ever slows a run). A round starts only when the machine is otherwise idle (at most half a
core busy over 2 s: the 1-minute load average would still count the previous round's two ranks)
and is run again, up to --max-repeats times, when it was not. Medians over rounds and the spread
(min..max) are printed and written with the commit, the command line and the machine to --results
(default bench/results/results-mirror-<UTC date>.txt).

  python3 bench/mirror_overhead.py --build build [--rounds 5] [--seed S] [--results FILE]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_rules  # noqa: E402

TIMING = re.compile(r"\[sim\] timing: (.*)$", re.M)
NOT_HEALING = "did not say it handles a healed step"
MIRRORED = re.compile(r"in-process recovery mirrored the registered state \((\d+) bytes from each rank\) at (\d+) "
                      r"steps: ([0-9.]+) ms per step, ([0-9.]+) % of")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=None, help="order RNG seed (default: drawn and printed)")
    ap.add_argument("--sizes", default="128,512", help="square sizes (cells per side), comma-separated")
    ap.add_argument("--steps", type=int, default=4000, help="solver steps per run")
    ap.add_argument("--repeats", type=int, default=2,
                    help="runs of each (size, system) per round (interleaved); the round keeps each one's fastest")
    ap.add_argument("--max-repeats", type=int, default=3)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--results", default=None,
                    help="results file (default bench/results/results-mirror-<UTC date>.txt)")
    a = ap.parse_args()

    tenax = os.path.join(a.build, "launcher", "tenax")
    example = os.path.join(a.build, "examples", "sim_surrogate", "sim_surrogate")
    for f in (tenax, example):
        if not os.access(f, os.X_OK):
            sys.exit(f"mirror_overhead: {f} is missing: cmake --build {a.build} --target tenax sim_surrogate")
    sizes = [int(s) for s in a.sizes.split(",")]
    work = a.work_dir or tempfile.mkdtemp(prefix="tenax-mirror-bench-")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "TENAX_RDZV_ENDPOINT"):
        env.pop(k, None)  # the launcher below sets what the ranks need
    config = os.path.join(ROOT, "examples", "sim_surrogate", "surrogate.toml")

    def command(size, system):
        out = os.path.join(work, f"{system}-{size}")
        shutil.rmtree(out, ignore_errors=True)  # a fresh run, never a resume
        extra = ["--ignore-recovery"] if system == "ignore" else []
        return [tenax, "run", "--nproc-per-node", "2", "--recovery", "in-process", "--run-dir", os.path.join(out, "run"),
                "--", example, "--config", config, "--output-dir", os.path.join(out, "o"), "--nx", str(size),
                "--ny", str(size), "--steps", str(a.steps), "--save-every", str(100 * a.steps),
                "--log-every", str(a.steps), *extra]

    def run(size, system):
        cmd = command(size, system)
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        m = TIMING.search(p.stdout)
        if p.returncode != 0 or not m:
            sys.exit(f"mirror_overhead: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}")
        # The two must differ in what the bench says they do: the ignoring program is told that a lost
        # peer would restart it from disk, the mirroring one is not.
        warned = NOT_HEALING in p.stdout
        if warned != (system == "ignore"):
            sys.exit(f"mirror_overhead: {system} run {'warned' if warned else 'did not warn'} '{NOT_HEALING}':\n"
                     f"{p.stdout[-3000:]}")
        mirrored = MIRRORED.search(p.stdout)
        if bool(mirrored) != (system == "mirror"):
            sys.exit(f"mirror_overhead: the {system} run {'reported' if mirrored else 'did not report'} a mirror:\n"
                     f"{p.stdout[-3000:]}")
        per_step = float(dict(kv.split("=") for kv in m.group(1).split())["per_step_us"])
        share = float(mirrored.group(4)) / 100.0 if mirrored else 0.0
        return {"per_step_us": per_step, "share": share / (1.0 - share),
                "row_bytes": int(mirrored.group(1)) if mirrored else 0,
                "mirror_ms": float(mirrored.group(3)) if mirrored else 0.0}

    pairs = [(size, system) for size in sizes for system in ("ignore", "mirror")]
    order_of = bench_rules.RoundOrder([f"{size}/{system}" for size, system in pairs], a.seed)
    report = bench_rules.Report("mirror", a.results, a.rounds)
    say = report.say
    say(bench_rules.header("mirror_overhead", a.build))
    say(f"problem: sim_surrogate, 2 ranks under tenax run --recovery in-process, {a.steps} solver steps, an "
        f"optimizer step every 10, no periodic checkpoint, OMP_NUM_THREADS=1; sizes {a.sizes} (cells per side)")
    say(f"{order_of.describe()}; {a.repeats} interleaved runs of each per round (fastest kept)")
    say()
    say(f"{'round':>5} {'order':<48} {'busy':>5} " + " ".join(
        f"{f'{s} ign us':>11} {f'{s} mir us':>11} {f'{s} A/B':>8} {f'{s} ms/st':>9} {f'{s} share':>9}"
        for s in sizes))

    def one_round(order):
        runs = {name: [] for name in order}
        for _ in range(a.repeats):
            for name in order:
                size, system = name.split("/")
                runs[name].append(run(int(size), system))
        # The least disturbed run of each: other work only ever slows a run down.
        return {name: min(v, key=lambda x: x["per_step_us"]) for name, v in runs.items()}

    rounds = []
    for r in range(1, a.rounds + 1):
        order = order_of.next_round()
        t = bench_rules.run_on_quiet_machine(lambda: one_round(order), say, f"round {r}", attempts=a.max_repeats + 1,
                                             load=bench_rules.busy_cores, max_load=0.5)
        row = {"loaded": bool(t.get("loaded"))}
        for s in sizes:
            row[f"{s}/ignore"] = t[f"{s}/ignore"]["per_step_us"]
            row[f"{s}/mirror"] = t[f"{s}/mirror"]["per_step_us"]
            row[f"{s}/overhead"] = row[f"{s}/mirror"] / row[f"{s}/ignore"] - 1.0
            row[f"{s}/share"] = t[f"{s}/mirror"]["share"]
            row[f"{s}/mirror_ms"] = t[f"{s}/mirror"]["mirror_ms"]
            row[f"{s}/row_bytes"] = t[f"{s}/mirror"]["row_bytes"]
        rounds.append(row)
        say(f"{r:>5} {','.join(order):<48} {t['load0']:>5.2f} " + " ".join(
            f"{row[f'{s}/ignore']:>11.1f} {row[f'{s}/mirror']:>11.1f} {100 * row[f'{s}/overhead']:>7.2f}% "
            f"{row[f'{s}/mirror_ms']:>9.3f} {100 * row[f'{s}/share']:>8.2f}%"
            for s in sizes) + ("  LOADED" if row["loaded"] else ""))

    say()
    say(f"{'measure':<58} {'median':>9} {'min':>9} {'max':>9}  target")
    for s in sizes:
        label = "the example's size" if s == 128 else "sim_overhead.py's size" if s == 512 else "shown"
        say(f"{s}x{s} ({label}): {rounds[0][f'{s}/row_bytes']} bytes mirrored from each rank per optimizer step")
        for key, text, scale, target in [
            ("ignore", f"solver step, {s}x{s}, nothing mirrored (us)", 1, ""),
            ("mirror", f"solver step, {s}x{s}, state mirrored (us)", 1, ""),
            ("mirror_ms", f"time in the mirror per optimizer step, {s}x{s} (ms)", 1, ""),
            ("share", f"mirror share of a solver step, {s}x{s} (%)", 100, "<= 5 %" if s == 128 else "(shown)"),
            ("overhead", f"A/B overhead per solver step, {s}x{s} (%)", 100, "(shown)"),
        ]:
            v = [x[f"{s}/{key}"] * scale for x in rounds]
            say(f"{text:<58} {statistics.median(v):>9.2f} {min(v):>9.2f} {max(v):>9.2f}  {target}")
    flagged = sum(1 for x in rounds if x["loaded"])
    if flagged:
        say(f"{flagged} of {len(rounds)} rounds started beside other work (flagged LOADED above)")
    report.save()
    if not a.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
