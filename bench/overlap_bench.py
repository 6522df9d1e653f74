#!/usr/bin/python3
"""DDP overlap: allreducing gradient buckets during backward vs after it (2 Gloo ranks, MiniLM).

The same fine-tuning job (`tenax train` on train/jobs/rotten_tomatoes.toml: all-MiniLM-L6-v2 ->
BertForSequenceClassification on Rotten Tomatoes, 2 ranks x 1 thread under `tenax run`, global
batch 16, max_seq_length 64) with
  overlap          ddp_overlap_backward=true (the default): a bucket (25 MiB) is allreduced on
                   GradSync's thread as soon as backward has finished its gradients
  after-backward   ddp_overlap_backward=false: every bucket after backward, as before
in a per-round order shuffled from a printed seed (bench/bench_rules.py). Reported: samples/s of
the training loop (train_samples_per_second of train_results.json), the ratio overlap / after-backward
within each round (median and range), and whether the two runs of a round ended with the same
fine-tuned weights (sha256 of model.safetensors): the overlap changes when the sums run, not
what they compute.

Usage: bench/overlap_bench.py [--build build] [--rounds 5] [--max-steps 80] [--seed S]
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402
import train_job  # noqa: E402

SYSTEMS = {"overlap": "true", "after-backward": "false"}


def run_job(a, system, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = os.path.join(work, "train")
    cmd = [os.path.join(a.build, "launcher", "tenax"), "run", "--nproc-per-node", "2", "--max-restarts", "0",
           "--run-dir", os.path.join(work, "run"), "--",
           *train_job.command(a.build, [
               f"output_dir={out}", f"max_steps={a.max_steps}", "per_device_train_batch_size=8",
               "data.max_seq_length=64", "learning_rate=5e-5", "seed=42", "save_steps=0", "logging_steps=20",
               "data.max_eval_samples=64", "data.max_predict_samples=64", "per_device_eval_batch_size=64",
               "run.threads=1", "disable_tqdm=true", f"ddp_overlap_backward={SYSTEMS[system]}"])]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.time()
    busy0 = bench_rules.cpu_busy_seconds()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
    # CPU seconds of the whole machine during the run beyond the job's own (children's) time.
    wall = time.time() - t0
    job_cpu = sum(os.times()[2:4]) - a.children_cpu
    a.children_cpu = sum(os.times()[2:4])
    other_cores = max(0.0, (bench_rules.cpu_busy_seconds() - busy0) - job_cpu) / wall
    with open(os.path.join(work, "log.txt"), "w") as f:
        f.write(p.stdout + p.stderr)
    try:
        r = train_job.results(out) if p.returncode == 0 else None
    except (OSError, KeyError, ValueError) as e:
        r = None
        p.stderr += f"\noverlap_bench: no results in {out}: {e}"
    if r is None:
        raise SystemExit(f"overlap_bench: {system} failed (exit {p.returncode}); log {work}/log.txt:\n"
                         + (p.stdout + p.stderr)[-3000:])
    with open(os.path.join(out, "model", "model.safetensors"), "rb") as f:
        r["weights_sha256"] = hashlib.sha256(f.read()).hexdigest()
    r["wall_s"] = wall
    r["other_cores"] = other_cores
    r["load_end"] = os.getloadavg()[0]
    shutil.rmtree(out, ignore_errors=True)  # ~270 MB of checkpoint
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--max-steps", type=int, default=80)
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order (default: random)")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-overlap-bench"))
    p.add_argument("--results", default=None, help="results file (default bench/results/results-overlap-<UTC date>.txt)")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.children_cpu = sum(os.times()[2:4])
    report = bench_rules.Report("overlap", a.results, a.rounds)
    say = report.say

    order = bench_rules.RoundOrder(SYSTEMS, a.seed)
    say(bench_rules.header("overlap bench", a.build))
    say(f"  job: tenax train train/jobs/rotten_tomatoes.toml, all-MiniLM-L6-v2, 2 ranks x 1 thread (Gloo), "
        f"global batch 16, max_seq_length 64, "
        f"{a.max_steps} steps, {a.rounds} round(s)")
    say(f"  {order.describe()}")
    say()
    runs = []
    for rnd in range(1, a.rounds + 1):
        for s in order.next_round():
            r = bench_rules.run_on_quiet_machine(
                lambda: run_job(a, s, os.path.join(a.work_dir, s)), say, f"round {rnd} {s}",
                disturbed=lambda r: f"{r['other_cores']:.2f} cores busy" if r["other_cores"] > 0.25 else "")
            r.update(round=rnd, system=s)
            runs.append(r)
            say(f"  round {rnd} {s:<15} {r['train_samples_per_second']:7.2f} samples/s  train {r['train_runtime_s']:6.1f} s"
                f"  load {r['load0']:.2f}->{r['load_end']:.2f}, other work {r['other_cores']:.2f} cores"
                f"{'  (LOADED)' if r.get('loaded') else ''}")

    by = {(r["round"], r["system"]): r for r in runs}
    rounds = range(1, a.rounds + 1)
    ratios = [by[(i, "overlap")]["train_samples_per_second"] / by[(i, "after-backward")]["train_samples_per_second"]
              for i in rounds]
    same = [by[(i, "overlap")]["weights_sha256"] == by[(i, "after-backward")]["weights_sha256"] for i in rounds]
    say()
    say(f"over {a.rounds} rounds: median (range)")
    for s in SYSTEMS:
        say(f"  {s:<15} samples/s {bench_rules.median_range([by[(i, s)]['train_samples_per_second'] for i in rounds], 2)}")
    say(f"  overlap / after-backward samples/s: {bench_rules.median_range(ratios)}  "
        f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
    say(f"  same fine-tuned weights (sha256) in {sum(same)} of {len(same)} rounds")
    report.save()
    return 0 if all(same) else 1


if __name__ == "__main__":
    sys.exit(main())
