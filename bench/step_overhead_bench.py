#!/usr/bin/python3
"""The per-step cost of fault tolerance (issue 15, point 3): the tiny model of the recovery
bench (examples/synthetic_regression: a 16-64-64-1 MLP, 2 ranks x 16 samples, one intra-op
thread each), where a framework's per-step overhead shows most, trained for --steps steps by

  tenax-bare     `tenax run` with the fault tolerance off: no periodic saves, no preemption
                 check, no progress file (no --hang-timeout), heartbeats at 60 s;
  tenax-ft       the same Trainer with all of it on: heartbeats at the default 500 ms, the
                 progress file (--hang-timeout 60), the preemption check every step and an
                 async checkpoint every --save-steps steps;
  tenax-inproc   tenax-ft under `--recovery in-process` (the RNG state mirrored in every step's
                 allreduce, one warm spare kept);
  torchrun       the same job written the usual PyTorch way (bench/recovery_torchrun_worker.py:
                 DDP over Gloo, torch.save every --save-steps steps) under torchrun at its
                 fastest monitor interval (0.02 s), Debian's torch 1.13;
  torchrun-pypi  the same under the current PyPI torch (.venv-hf-pypi, bench/setup_hf_peers.sh
                 pypi), when that venv exists.

Each system reports samples/s from its own "training finished at step N (X s, Y samples/s)"
line: the training loop only (after set-up, before teardown). Figures: cost of fault tolerance
= tenax-bare / tenax-ft - 1 (target <= 2 %), and tenax-ft / torchrun (target >= 1.0), each a
ratio within a round, median and range over the rounds (bench/bench_rules.py).

  python3 bench/step_overhead_bench.py --build build [--rounds 5] [--steps 3000] [--seed N]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

REPO = bench_rules.REPO
FINISHED = re.compile(r"training finished at step \d+ \(([\d.]+) s, ([\d.]+) samples/s\)")
PYPI_PYTHON = os.path.join(REPO, ".venv-hf-pypi", "bin", "python")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def commands(system, a, out):
    tenax = os.path.join(a.build, "launcher", "tenax")
    example = os.path.join(a.build, "examples", "synthetic_regression", "synthetic_regression")
    job = ["--output-dir", os.path.join(out, "train"), "--max-steps", str(a.steps), "--logging-steps",
           str(a.logging_steps), "--seed", "42"]
    run = [tenax, "run", "--nproc-per-node", "2", "--run-dir", os.path.join(out, "run")]
    if system == "tenax-bare":
        return run + ["--heartbeat-interval", "60000", "--", example] + job + [
            "--save-steps", "0", "--handle-preemption", "no"]
    if system in ("tenax-ft", "tenax-inproc"):
        extra = ["--recovery", "in-process", "--spares", "1"] if system == "tenax-inproc" else []
        return run + ["--hang-timeout", "60"] + extra + ["--", example] + job + [
            "--save-steps", str(a.save_steps), "--handle-preemption", "yes"]
    python = "/usr/bin/python3" if system == "torchrun" else PYPI_PYTHON
    # torch 1.13's torchrun knows only the underscore spellings (2.x takes both), and crashes
    # before any worker starts on its default --redirects (see bench/recovery_bench.py): a
    # mapping for a local rank that does not exist leaves every rank at the default.
    return [python, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--monitor_interval", "0.02",
            "--max_restarts", "0", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{free_port()}",
            "--redirects", "9:0", "--tee", "9:0",
            os.path.join(REPO, "bench", "recovery_torchrun_worker.py"),
            "--output-dir", os.path.join(out, "train"), "--max-steps", str(a.steps), "--save-steps",
            str(a.save_steps), "--logging-steps", str(a.logging_steps), "--seed", "42"]


def run_once(system, a, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.time()
    with open(os.path.join(out, "job.log"), "w") as log:
        rc = subprocess.run(commands(system, a, out), stdout=log, stderr=subprocess.STDOUT, env=env,
                            timeout=a.timeout).returncode
    wall = time.time() - t0
    text = open(os.path.join(out, "job.log")).read()
    m = None
    for m in FINISHED.finditer(text):
        pass
    if rc != 0 or m is None:
        raise RuntimeError(f"{system}: exit {rc}, no 'training finished' line; see {out}/job.log")
    return {"samples_per_s": float(m.group(2)), "train_s": float(m.group(1)), "wall_s": wall}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--save-steps", type=int, default=100)
    p.add_argument("--logging-steps", type=int, default=100)
    p.add_argument("--systems", default="tenax-bare,tenax-ft,tenax-inproc,torchrun,torchrun-pypi")
    p.add_argument("--seed", type=int)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--work-dir", default="/tmp/tenax-step-overhead")
    p.add_argument("--results")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    systems = [s for s in a.systems.split(",") if s]
    if "torchrun-pypi" in systems and not os.path.exists(PYPI_PYTHON):
        print(f"step_overhead bench: {PYPI_PYTHON} is missing (bash bench/setup_hf_peers.sh pypi); "
              "torchrun-pypi left out", file=sys.stderr)
        systems.remove("torchrun-pypi")
    report = bench_rules.Report("step-overhead", a.results, a.rounds)
    order = bench_rules.RoundOrder(systems, a.seed)
    report.say(bench_rules.header("step overhead bench", a.build))
    report.say(f"  job: examples/synthetic_regression, 2 ranks x 16 samples, 1 thread each, {a.steps} steps, "
               f"logging every {a.logging_steps}, saves every {a.save_steps} (ft systems and torchrun)")
    report.say(f"  build {a.build}; {a.rounds} rounds; systems {', '.join(systems)}")
    report.say("  " + order.describe())
    results = {s: [] for s in systems}
    for rnd in range(1, a.rounds + 1):
        for system in order.next_round():
            out = os.path.join(a.work_dir, f"r{rnd}-{system}")
            r = bench_rules.run_on_quiet_machine(lambda: run_once(system, a, out), report.say, f"round {rnd} {system}")
            results[system].append(r)
            report.say(f"round {rnd}  {system:<14} {r['samples_per_s']:9.0f} samples/s  train {r['train_s']:5.2f} s  "
                       f"wall {r['wall_s']:5.2f} s  load {r['load0']:.2f}{'  LOADED' if r.get('loaded') else ''}")
            shutil.rmtree(out, ignore_errors=True)

    def per_round(num, den, minus_one=False):
        if num not in results or den not in results:
            return None
        xs = [n["samples_per_s"] / d["samples_per_s"] - (1 if minus_one else 0)
              for n, d in zip(results[num], results[den])]
        return xs

    report.say("")
    report.say(f"{'system':<14} {'samples/s, median (range)':>32}")
    for s in systems:
        report.say(f"{s:<14} {bench_rules.median_range([r['samples_per_s'] for r in results[s]], 0):>32}")
    report.say("")
    report.say("ratios within each round, median (range):")
    rows = [("cost of fault tolerance: tenax-bare / tenax-ft - 1 (%)", "tenax-bare", "tenax-ft", True, "<= 2 %"),
            ("cost of in-process recovery: tenax-bare / tenax-inproc - 1 (%)", "tenax-bare", "tenax-inproc", True,
             "(shown)"),
            ("tenax-ft / torchrun (Debian torch 1.13)", "tenax-ft", "torchrun", False, ">= 1.0"),
            ("tenax-ft / torchrun-pypi", "tenax-ft", "torchrun-pypi", False, ">= 1.0"),
            ("tenax-inproc / torchrun (Debian torch 1.13)", "tenax-inproc", "torchrun", False, "(shown)")]
    for label, num, den, pct, target in rows:
        xs = per_round(num, den, pct)
        if xs is None:
            continue
        if pct:
            xs = [100 * x for x in xs]
        report.say(f"  {label:<62} {bench_rules.median_range(xs, 2 if pct else 3):>26}  {target}")
    report.save()


if __name__ == "__main__":
    main()
