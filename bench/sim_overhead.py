#!/usr/bin/env python3
"""What embedding Tenax costs a simulation (issue 11's benchmark; not a test).

Four programs run the same heat solver with the same online surrogate, one process each:

  baseline     bench/sim_baseline: a plain libtorch training loop (same MLP, AdamW, clipping,
               schedule, same cells at the same steps), no checkpoints, no Tenax;
  tenax-async  examples/sim_surrogate through the C API: tenax_train_step, the preemption poll
               every solver step, tenax_checkpoint_save every --save-every steps (asynchronous:
               the call returns after the snapshot; a background thread writes and commits);
  tenax-nosave the coupled run without periodic checkpoints (one, asynchronous, at the last
               step): what the C API's training step and the preemption poll cost alone;
  tenax-sync   the same as tenax-async with --sync-save: tenax_checkpoint_wait right after every save, i.e. the
               solver waits for the write and the commit (a synchronous save).

Each prints its solver-loop time per step and the time spent inside the save calls. Per round:

  overhead per solver step = tenax-async / baseline - 1            (target <= 3 %)
                             (and tenax-nosave / baseline - 1: without the checkpoints' writes)
  checkpoint stall          = tenax-async's time in a save call
                              / tenax-sync's time in a save call    (target <= 5 %)

Every round runs the four in an order shuffled per round from a printed seed (--seed repeats it;
bench/bench_rules.py), --repeats times over, interleaved, and keeps each program's fastest run
(other work on a shared machine only ever slows a run down); a round starts only once the 1-minute
load average is at most the core count (waiting up to --load-wait seconds), and is run again (up to
--max-repeats times) when the load was above the core count at its start or end; a round kept
despite the load is flagged. The medians over rounds and the spread (min..max) are printed, and
written with the commit, the command line and the machine to --results (default
bench/results/results-sim-<UTC date>.txt).

  python3 bench/sim_overhead.py --build build [--rounds 7] [--seed S] [--results FILE]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=None, help="order RNG seed (default: drawn and printed)")
    ap.add_argument("--nx", type=int, default=512)
    ap.add_argument("--ny", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--train-every", type=int, default=10)
    ap.add_argument("--save-every", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every program")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each program per round (interleaved); the round keeps each one's fastest")
    ap.add_argument("--load-wait", type=float, default=120.0)
    ap.add_argument("--max-repeats", type=int, default=3)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--results", default=None, help="results file (default bench/results/results-sim-<UTC date>.txt)")
    a = ap.parse_args()

    baseline = os.path.join(a.build, "bench", "sim_baseline")
    example = os.path.join(a.build, "examples", "sim_surrogate", "sim_surrogate")
    for f in (baseline, example):
        if not os.access(f, os.X_OK):
            sys.exit(f"sim_overhead: {f} is missing: cmake --build {a.build} --target sim_baseline sim_surrogate")
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
        "tenax-nosave": lambda: tenax_cmd("nosave", ["--save-every", str(10 * a.steps)]),
        "tenax-async": lambda: tenax_cmd("async", []),
        "tenax-sync": lambda: tenax_cmd("sync", ["--sync-save"]),
    }
    order_of = bench_rules.RoundOrder(systems, a.seed)

    report = bench_rules.Report("sim", a.results, a.rounds)
    say = report.say
    say(bench_rules.header("sim_overhead", a.build))
    say(f"problem: {a.nx} x {a.ny} cells, {a.steps} solver steps, an optimizer step every {a.train_every} "
        f"(batch {a.batch}), a checkpoint every {a.save_every} (tenax-*), OMP_NUM_THREADS={a.threads}, 1 process")
    say(f"{order_of.describe()}; {a.repeats} interleaved runs of each program per round (fastest kept)")
    say()
    say(f"{'round':>5} {'order':<50} {'load':>9} {'base us':>9} {'nosave us':>9} {'async us':>9} {'sync us':>9} "
        f"{'overhead':>9} {'async ms':>9} {'sync ms':>9} {'stall':>7}")

    def one_round(order):
        runs = {name: [] for name in order}
        for _ in range(a.repeats):
            for name in order:
                runs[name].append(run(systems[name](), env))
        # The least disturbed run of each: on a shared machine, other work only ever slows a run.
        return {name: {"per_step_us": min(x["per_step_us"] for x in runs[name]),
                       "per_save_ms": min(x["per_save_ms"] for x in runs[name])} for name in order} | {
            "load_end": os.getloadavg()[0]}

    rounds = []
    for r in range(1, a.rounds + 1):
        order = order_of.next_round()
        t = bench_rules.run_on_quiet_machine(
            lambda: one_round(order), say, f"round {r}", attempts=a.max_repeats + 1, max_wait_s=a.load_wait,
            disturbed=lambda t: f"load {t['load_end']:.1f} at its end" if t["load_end"] > cores else "")
        load_start, load_end, loaded = t["load0"], t["load_end"], bool(t.get("loaded"))
        overhead = t["tenax-async"]["per_step_us"] / t["baseline"]["per_step_us"] - 1.0
        stall = t["tenax-async"]["per_save_ms"] / t["tenax-sync"]["per_save_ms"]
        rounds.append({"overhead": overhead, "stall": stall, "loaded": loaded,
                       "nosave_overhead": t["tenax-nosave"]["per_step_us"] / t["baseline"]["per_step_us"] - 1.0,
                       "sync_overhead": t["tenax-sync"]["per_step_us"] / t["baseline"]["per_step_us"] - 1.0,
                       **{f"{k}_us": t[k]["per_step_us"] for k in systems},
                       "async_ms": t["tenax-async"]["per_save_ms"], "sync_ms": t["tenax-sync"]["per_save_ms"]})
        say(f"{r:>5} {','.join(order):<50} {load_start:>4.1f}/{load_end:<4.1f} {t['baseline']['per_step_us']:>9.1f} "
            f"{t['tenax-nosave']['per_step_us']:>9.1f} "
            f"{t['tenax-async']['per_step_us']:>9.1f} {t['tenax-sync']['per_step_us']:>9.1f} {100 * overhead:>8.2f}% "
            f"{t['tenax-async']['per_save_ms']:>9.3f} {t['tenax-sync']['per_save_ms']:>9.3f} {100 * stall:>6.2f}%"
            + ("  LOADED" if loaded else ""))

    def summary(key, scale=1.0):
        v = [x[key] * scale for x in rounds]
        return statistics.median(v), min(v), max(v)

    say()
    say(f"{'measure':<62} {'median':>9} {'min':>9} {'max':>9}  target")
    for label, key, scale, unit, target in [
        ("solver step, baseline (us)", "baseline_us", 1, "", ""),
        ("solver step, Tenax, no periodic checkpoint (us)", "tenax-nosave_us", 1, "", ""),
        ("solver step, Tenax + async checkpoints (us)", "tenax-async_us", 1, "", ""),
        ("solver step, Tenax + synchronous checkpoints (us)", "tenax-sync_us", 1, "", ""),
        ("overhead per solver step, Tenax no checkpoint vs baseline (%)", "nosave_overhead", 100, "%", "(shown)"),
        ("overhead per solver step, Tenax async vs baseline (%)", "overhead", 100, "%", "<= 3 %"),
        ("overhead per solver step, Tenax sync vs baseline (%)", "sync_overhead", 100, "%", "(shown)"),
        ("time in a save call, async (ms)", "async_ms", 1, "", ""),
        ("time in a save call, synchronous (ms)", "sync_ms", 1, "", ""),
        ("checkpoint stall, async / synchronous (%)", "stall", 100, "%", "<= 5 %"),
    ]:
        med, lo, hi = summary(key, scale)
        say(f"{label:<62} {med:>9.3f} {lo:>9.3f} {hi:>9.3f}  {target}")
    flagged = sum(1 for x in rounds if x["loaded"])
    if flagged:
        say(f"{flagged} of {len(rounds)} rounds ran with a load above {cores} cores (flagged LOADED above)")
    report.save()
    if not a.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
