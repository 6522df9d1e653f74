#!/usr/bin/env python3
"""What embedding Tenax costs a simulation (issue 11's benchmark; not a test).

Three programs run the same heat solver with the same online surrogate, one process each:

  baseline     bench/sim_baseline: a plain libtorch training loop (same MLP, AdamW, clipping,
               schedule, same cells at the same steps), no checkpoints, no Tenax;
  tenax-async  examples/sim_surrogate through the C API: tenax_train_step, the preemption poll
               every solver step, tenax_checkpoint_save every --save-every steps (asynchronous:
               the call returns after the snapshot; a background thread writes and commits);
  tenax-sync   the same with --sync-save: tenax_checkpoint_wait right after every save, i.e. the
               solver waits for the write and the commit (a synchronous save).

Each prints its solver-loop time per step and the time spent inside the save calls. Per round:

  overhead per solver step = tenax-async / baseline - 1            (target <= 3 %)
  checkpoint stall          = tenax-async's time in a save call
                              / tenax-sync's time in a save call    (target <= 5 %)

Every round runs the three in a random order drawn from a seeded RNG (the seed and each round's
order are printed); a round starts only once the 1-minute load average is at most the core count
(waiting up to --load-wait seconds), and is run again (up to --max-repeats times) when the load
was above the core count at its start or end; a round kept despite the load is flagged. The
medians over rounds and the spread (min..max) are printed, and written with the commit, the
command line and the machine to --results.

  python3 bench/sim_overhead.py --build build --rounds 7 --results bench/results-sim-$(date -u +%F).txt
"""

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TIMING = re.compile(r"\[sim\] timing: (.*)$", re.M)


def parse_timing(output):
    m = TIMING.search(output)
    if not m:
        return None
    return {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"sim_overhead: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}")
    t = parse_timing(p.stdout)
    if t is None:
        sys.exit(f"sim_overhead: no timing line from {' '.join(cmd)}:\n{p.stdout[-3000:]}")
    return t


def git_commit():
    try:
        sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return sha + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=None, help="order RNG seed (default: drawn and printed)")
    ap.add_argument("--nx", type=int, default=512)
    ap.add_argument("--ny", type=int, default=512)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--train-every", type=int, default=10)
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every program")
    ap.add_argument("--load-wait", type=float, default=120.0)
    ap.add_argument("--max-repeats", type=int, default=3)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--results", default=None, help="also write the report to this file")
    a = ap.parse_args()

    baseline = os.path.join(a.build, "bench", "sim_baseline")
    example = os.path.join(a.build, "examples", "sim_surrogate", "sim_surrogate")
    for f in (baseline, example):
        if not os.access(f, os.X_OK):
            sys.exit(f"sim_overhead: {f} is missing: cmake --build {a.build} --target sim_baseline sim_surrogate")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 2**31)
    rng = random.Random(seed)
    cores = os.cpu_count() or 1
    work = a.work_dir or tempfile.mkdtemp(prefix="tenax-sim-bench-")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "TENAX_RDZV_ENDPOINT"):
        env.pop(k, None)  # one process, whatever launched this script
    problem = ["--nx", str(a.nx), "--ny", str(a.ny), "--steps", str(a.steps), "--train-every", str(a.train_every),
               "--batch", str(a.batch)]
    config = os.path.join(ROOT, "examples", "sim_surrogate", "surrogate.toml")

    def tenax_cmd(name, extra):
        out = os.path.join(work, name)
        shutil.rmtree(out, ignore_errors=True)  # a fresh run, never a resume
        return [example, "--config", config, "--output-dir", out, "--save-every", str(a.save_every),
                "--log-every", str(a.steps), *problem, *extra]

    systems = {
        "baseline": lambda: [baseline, *problem],
        "tenax-async": lambda: tenax_cmd("async", []),
        "tenax-sync": lambda: tenax_cmd("sync", ["--sync-save"]),
    }

    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say(f"sim_overhead: {' '.join(sys.argv)}")
    say(f"commit {git_commit()}, {cores} cores, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    say(f"problem: {a.nx} x {a.ny} cells, {a.steps} solver steps, an optimizer step every {a.train_every} "
        f"(batch {a.batch}), a checkpoint every {a.save_every} (tenax-*), OMP_NUM_THREADS={a.threads}, 1 process")
    say(f"order seed {seed}")
    say()
    say(f"{'round':>5} {'order':<38} {'load':>9} {'base us':>9} {'async us':>9} {'sync us':>9} "
        f"{'overhead':>9} {'async ms':>9} {'sync ms':>9} {'stall':>7}")

    rounds = []
    for r in range(1, a.rounds + 1):
        for attempt in range(a.max_repeats + 1):
            deadline = time.time() + a.load_wait
            while os.getloadavg()[0] > cores and time.time() < deadline:
                time.sleep(5)
            load_start = os.getloadavg()[0]
            order = list(systems)
            rng.shuffle(order)
            t = {name: run(systems[name](), env) for name in order}
            load_end = os.getloadavg()[0]
            loaded = max(load_start, load_end) > cores
            if not loaded or attempt == a.max_repeats:
                break
            say(f"{r:>5} load {load_start:.1f}/{load_end:.1f} > {cores} cores: round run again")
        overhead = t["tenax-async"]["per_step_us"] / t["baseline"]["per_step_us"] - 1.0
        stall = t["tenax-async"]["per_save_ms"] / t["tenax-sync"]["per_save_ms"]
        rounds.append({"overhead": overhead, "stall": stall, "loaded": loaded,
                       "sync_overhead": t["tenax-sync"]["per_step_us"] / t["baseline"]["per_step_us"] - 1.0,
                       **{f"{k}_us": t[k]["per_step_us"] for k in systems},
                       "async_ms": t["tenax-async"]["per_save_ms"], "sync_ms": t["tenax-sync"]["per_save_ms"]})
        say(f"{r:>5} {','.join(order):<38} {load_start:>4.1f}/{load_end:<4.1f} {t['baseline']['per_step_us']:>9.1f} "
            f"{t['tenax-async']['per_step_us']:>9.1f} {t['tenax-sync']['per_step_us']:>9.1f} {100 * overhead:>8.2f}% "
            f"{t['tenax-async']['per_save_ms']:>9.3f} {t['tenax-sync']['per_save_ms']:>9.3f} {100 * stall:>6.2f}%"
            + ("  LOADED" if loaded else ""))

    def summary(key, scale=1.0):
        v = [x[key] * scale for x in rounds]
        return statistics.median(v), min(v), max(v)

    say()
    say(f"{'measure':<52} {'median':>9} {'min':>9} {'max':>9}  target")
    for label, key, scale, unit, target in [
        ("solver step, baseline (us)", "baseline_us", 1, "", ""),
        ("solver step, Tenax + async checkpoints (us)", "tenax-async_us", 1, "", ""),
        ("solver step, Tenax + synchronous checkpoints (us)", "tenax-sync_us", 1, "", ""),
        ("overhead per solver step, Tenax async vs baseline (%)", "overhead", 100, "%", "<= 3 %"),
        ("overhead per solver step, Tenax sync vs baseline (%)", "sync_overhead", 100, "%", "(shown)"),
        ("time in a save call, async (ms)", "async_ms", 1, "", ""),
        ("time in a save call, synchronous (ms)", "sync_ms", 1, "", ""),
        ("checkpoint stall, async / synchronous (%)", "stall", 100, "%", "<= 5 %"),
    ]:
        med, lo, hi = summary(key, scale)
        say(f"{label:<52} {med:>9.3f} {lo:>9.3f} {hi:>9.3f}  {target}")
    flagged = sum(1 for x in rounds if x["loaded"])
    if flagged:
        say(f"{flagged} of {len(rounds)} rounds ran with a load above {cores} cores (flagged LOADED above)")
    if a.results:
        with open(a.results, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"written to {a.results}")
    if not a.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
