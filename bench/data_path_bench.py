#!/usr/bin/python3
"""The data path's share of the training loop, for the shipped jobs, with and without loading threads.

Each shipped job that `make demo` and `make demo-image` run (train/jobs/rotten_tomatoes.toml: text
read, tokenised and collated; train/jobs/fashion_mnist.toml: IDX images decoded, normalised and
collated) runs for --steps steps (default: 20 and 200, about half a minute each) under `tenax run --nproc-per-node 2`, as the demos run it, once
per setting of dataloader_num_workers (--workers, default 0 and 1). The rounds follow the rules of
bench/bench_rules.py: the settings in an order shuffled per round from a printed seed, a run that
starts with the load above the core count, or beside which other work took more than a tenth of a
core (the machine's busy CPU time less the job's own), run again; ≥ 5 rounds for a result.

Reported for each job and setting, as the median with the range over rounds:
  - the share of the training loop spent waiting for batches, from the line the Trainer logs at
    the end of train() ("data path: the training loop waited X s for batches, Y % of Z s"), which
    is the time the data path set the step rate, and
  - the training loop's samples/s (train_results.json), with the ratio of each setting with
    threads to the setting without, taken within the round.
No evaluation runs (eval_strategy=no, no validation or test file): the figures are the training loop's.

Usage: bench/data_path_bench.py [--build build] [--rounds 5] [--steps N] [--workers 0,1]
                                [--jobs rotten_tomatoes,fashion_mnist] [--seed S] [--results FILE]
  smoke run: --rounds 1 --steps 5
Needs: the build (make build) and the demos' data (make assets; Debian's dataset-fashion-mnist).
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

JOBS = {"rotten_tomatoes": os.path.join(bench_rules.REPO, "train", "jobs", "rotten_tomatoes.toml"),
        "fashion_mnist": os.path.join(bench_rules.REPO, "train", "jobs", "fashion_mnist.toml")}
# Steps per run: about half a minute of training on 2 cores for each job (a MiniLM step is ~100x
# a small ViT step).
STEPS = {"rotten_tomatoes": 20, "fashion_mnist": 200}
WAITED = re.compile(r"data path: the training loop waited ([0-9.]+) s for batches, ([0-9.]+) % of ([0-9.]+) s "
                    r"\(dataloader_num_workers = (\d+)\)")


def children_cpu_seconds():
    """CPU seconds of this process's finished children and their descendants (the job's ranks)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_job(a, job, workers, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tenax = os.path.join(a.build, "launcher", "tenax")
    cmd = [tenax, "run", "--nproc-per-node", "2", "--max-restarts", "0", "--run-dir", os.path.join(work, "run"),
           "--", tenax, "train", JOBS[job], f"output_dir={os.path.join(work, 'train')}", "disable_tqdm=true",
           f"max_steps={a.steps[job]}", f"save_steps={a.steps[job]}", "eval_strategy=no", "data.validation_file=",
           "data.test_file=", f"dataloader_num_workers={workers}"]
    busy0, own0, t0 = bench_rules.cpu_busy_seconds(), children_cpu_seconds(), time.time()
    # The shipped jobs name their data relative to the repository root, as the demos run them.
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=bench_rules.REPO, timeout=a.timeout,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    others = (bench_rules.cpu_busy_seconds() - busy0) - (children_cpu_seconds() - own0)
    others_cores = max(others, 0.0) / max(time.time() - t0, 1e-9)
    log = p.stdout + p.stderr
    with open(os.path.join(work, "log.txt"), "w") as f:
        f.write(log)
    waited = WAITED.search(log)
    try:
        results = json.load(open(os.path.join(work, "train", "train_results.json")))
    except OSError:
        results = None
    if p.returncode != 0 or waited is None or results is None:
        raise SystemExit(f"data_path_bench: {job} with {workers} worker(s) failed (exit {p.returncode}, "
                         f"data path line {'found' if waited else 'missing'}); log {work}/log.txt:\n{log[-3000:]}")
    if int(waited.group(4)) != workers:
        raise SystemExit(f"data_path_bench: {job} ran with dataloader_num_workers = {waited.group(4)}, not {workers}")
    shutil.rmtree(os.path.join(work, "train"), ignore_errors=True)
    return {"waited_s": float(waited.group(1)), "share": float(waited.group(2)), "loop_s": float(waited.group(3)),
            "samples_per_s": results["train_samples_per_second"], "load_end": os.getloadavg()[0],
            "others_cores": others_cores}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=None, help="steps of every job (default: "
                   + ", ".join(f"{j} {n}" for j, n in STEPS.items()) + ")")
    p.add_argument("--workers", default="0,1", help="dataloader_num_workers settings, comma-separated; the first "
                                                   "is the baseline of the ratios")
    p.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of: {', '.join(JOBS)}")
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order (default: random)")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-data-path-bench"))
    p.add_argument("--results", default=None,
                   help="results file (default bench/results/results-data-path-<UTC date>.txt)")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.steps = {j: a.steps or n for j, n in STEPS.items()}
    workers = [int(x) for x in a.workers.split(",") if x.strip()]
    jobs = [x.strip() for x in a.jobs.split(",") if x.strip()]
    for j in jobs:
        if j not in JOBS:
            sys.exit(f"data_path_bench: --jobs: unknown job '{j}'; one of {', '.join(JOBS)}")
    for f in [os.path.join(a.build, "launcher", "tenax"), os.path.join(a.build, "train", "tenax-train")]:
        if not os.access(f, os.X_OK):
            sys.exit(f"data_path_bench: {f} is missing; run 'make build'")
    systems = [(j, w) for j in jobs for w in workers]
    report = bench_rules.Report("data-path", a.results, a.rounds)
    say = report.say
    order = bench_rules.RoundOrder([f"{j}/w{w}" for j, w in systems], a.seed)
    say(bench_rules.header("data path bench", a.build))
    say(f"  jobs: {', '.join(os.path.relpath(JOBS[j], bench_rules.REPO) for j in jobs)}; 2 ranks x 1 thread "
        f"(tenax run --nproc-per-node 2), {', '.join(f'{a.steps[j]} steps of {j}' for j in jobs)}, no evaluation; dataloader_num_workers "
        f"{', '.join(map(str, workers))}; {a.rounds} round(s)")
    say(f"  {order.describe()}")
    say()
    runs = {}
    for rnd in range(1, a.rounds + 1):
        for name in order.next_round():
            job, w = name.split("/w")
            t0 = time.time()
            # A run beside which other work took more than a tenth of a core is not kept (its own
            # loading threads raise the load average, so the CPU time of others is the measure).
            r = bench_rules.run_on_quiet_machine(
                lambda: run_job(a, job, int(w), os.path.join(a.work_dir, name.replace("/", "-"))), say,
                f"round {rnd} {name}",
                disturbed=lambda r: f"{r['others_cores']:.2f} cores busy with other work" if r["others_cores"] > 0.1
                else None)
            runs[(rnd, job, int(w))] = r
            say(f"  round {rnd} {job:<16} workers {w}  waited {r['waited_s']:6.2f} s = {r['share']:5.1f} % of "
                f"{r['loop_s']:6.1f} s  {r['samples_per_s']:7.1f} samples/s  wall {time.time() - t0:5.1f} s  "
                f"load {r['load0']:.2f}->{r['load_end']:.2f}, others {r['others_cores']:.2f} cores"
                + ("  (LOADED)" if r.get("loaded") else ""))

    rounds = range(1, a.rounds + 1)
    mr = bench_rules.median_range
    say()
    say(f"over {a.rounds} round(s): median (range)")
    # One figure per line, its whole name before it (bench/make_results_table.py reads them so).
    for job in jobs:
        for w in workers:
            say(f"  {job} workers {w}: data path share {mr([runs[(i, job, w)]['share'] for i in rounds], 1)} %")
            say(f"  {job} workers {w}: samples/s {mr([runs[(i, job, w)]['samples_per_s'] for i in rounds], 1)}")
            if w != workers[0]:
                q = [runs[(i, job, w)]["samples_per_s"] / runs[(i, job, workers[0])]["samples_per_s"] for i in rounds]
                say(f"  {job} workers {w}: samples/s / workers {workers[0]}'s {mr(q)}")
    report.save()


if __name__ == "__main__":
    main()
