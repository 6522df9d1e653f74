#!/usr/bin/python3
"""The image workload: a small ViT on Fashion-MNIST, Tenax vs Hugging Face's Trainer, in rounds.

The job is `make demo-image`'s (train/jobs/fashion_mnist.toml; bench/README.md, "Image
workload"), without the injected failure. Each round runs, in an order shuffled per round from a
printed seed (the rules of bench/bench_rules.py),
  tenax      build/launcher/tenax run --nproc-per-node 2 -- tenax train train/jobs/fashion_mnist.toml
             (2 ranks x 1 thread, 2 x 64 per step, its async checkpoint every 100 steps as in the demo)
  hf-debian  bench/hf_image_trainer.py in .venv-hf-debian (transformers 4.44.2 on Debian's torch
             1.13, the libtorch Tenax links): one process x --hf-threads threads (default 2, all
             cores of the reference machine), global batch 128, no checkpoints (its defaults)
  hf-pypi    (--peers debian,pypi) the same script in .venv-hf-pypi, current PyPI torch and
             transformers: not by default, since transformers 5's ViTImageProcessor needs
             torchvision and pillow, which bench/requirements-hf-pypi.txt does not install
with the same seed on both sides, a different one each round (--seed-base, --seed-base + 1, ...),
so the accuracy comparison spans seeds rather than one draw. Reported, per round and as the median
with the range over rounds: each side's held-out test accuracy (10,000 images) and samples/s of
the training loop (steps x 128 / train runtime, per-epoch evaluations included on both sides), the
accuracy difference Tenax - HF in points (target |d| <= 1) and the ratio Tenax / HF of samples/s
within the round (shown). A run that starts with the load above the core count is run again.

Usage: bench/image_bench.py [--build build] [--rounds 5] [--peers debian] [--epochs 3]
                            [--seed S] [--seed-base 42] [--results FILE]
  smoke run: --rounds 1 --epochs 1 --train-limit 2560 --eval-limit 1000
Needs: the build (make build, or make demo-image), Debian's dataset-fashion-mnist, and the venvs
(bash bench/setup_hf_peers.sh).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

CONFIG = os.path.join(bench_rules.REPO, "train", "jobs", "fashion_mnist.toml")
GLOBAL_BATCH = 128  # 2 ranks x 64 (the config) = the HF script's default --train-batch-size


def result_line(text, prefix):
    line = next((x for x in text.splitlines() if x.startswith(prefix + " ")), None)
    return json.loads(line[len(prefix) + 1:]) if line else None


def tenax_result(out):
    """What hf_image_trainer.py prints, read from the transformers results files `tenax train` writes."""
    try:
        results = json.load(open(os.path.join(out, "all_results.json")))
        state = json.load(open(os.path.join(out, "trainer_state.json")))
    except OSError:
        return None
    return {"test_accuracy": results["test_accuracy"], "test_loss": results["test_loss"],
            "train_runtime_s": results["train_runtime"], "global_step": state["global_step"]}


def run_job(a, system, seed, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if system == "tenax":
        tenax = os.path.join(a.build, "launcher", "tenax")
        idx = lambda split: os.path.join(a.data_dir, f"{split}-images-idx3-ubyte.gz")  # noqa: E731
        cmd = [tenax, "run", "--nproc-per-node", "2", "--max-restarts", "0", "--run-dir", os.path.join(work, "run"),
               "--", tenax, "train", CONFIG, f"output_dir={os.path.join(work, 'train')}", "disable_tqdm=true",
               f"seed={seed}", f"num_train_epochs={a.epochs}", f"data.train_file={idx('train')}",
               f"data.validation_file={idx('t10k')}", f"data.test_file={idx('t10k')}",
               f"data.max_train_samples={a.train_limit}", f"data.max_eval_samples={a.eval_limit}",
               f"data.max_predict_samples={a.eval_limit}"]
        env = dict(os.environ, OMP_NUM_THREADS="1")
    else:
        limits = ["--train-limit", str(a.train_limit), "--eval-limit", str(a.eval_limit)]
        cmd = [a.python[system], os.path.join(bench_rules.REPO, "bench", "hf_image_trainer.py"), "--output-dir", work,
               "--data-dir", a.data_dir, "--seed", str(seed), "--epochs", str(a.epochs), "--threads",
               str(a.hf_threads), *limits]
        env = dict(os.environ, OMP_NUM_THREADS=str(a.hf_threads), PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1")
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
    with open(os.path.join(work, "log.txt"), "w") as f:
        f.write(p.stdout + p.stderr)
    r = tenax_result(os.path.join(work, "train")) if system == "tenax" else result_line(p.stdout, "HF_RESULT")
    if p.returncode != 0 or r is None:
        raise SystemExit(f"image_bench: {system} failed (exit {p.returncode}); log {work}/log.txt:\n"
                         + (p.stdout + p.stderr)[-3000:])
    r["samples_per_s"] = r["global_step"] * GLOBAL_BATCH / r["train_runtime_s"]
    r["wall_s"] = time.time() - t0
    r["load_end"] = os.getloadavg()[0]
    shutil.rmtree(os.path.join(work, "train"), ignore_errors=True)
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--peers", default="debian", help="HF peers, comma-separated: .venv-hf-<peer> for each")
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--hf-threads", type=int, default=2)
    p.add_argument("--train-limit", type=int, default=0, help="0: all 60,000 training images (a prefix: smoke runs)")
    p.add_argument("--eval-limit", type=int, default=0, help="0: all 10,000 test images")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order (default: random)")
    p.add_argument("--seed-base", type=int, default=42, help="the job's seed in round 1; round i uses base + i - 1")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-image-bench"))
    p.add_argument("--results", default=None, help="results file (default bench/results/results-image-<UTC date>.txt)")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.example = os.path.join(a.build, "train", "tenax-train")
    peers = [x.strip() for x in a.peers.split(",") if x.strip()]
    a.python = {f"hf-{x}": os.path.join(bench_rules.REPO, f".venv-hf-{x}", "bin", "python") for x in peers}
    for f in [os.path.join(a.build, "launcher", "tenax"), a.example]:
        if not os.access(f, os.X_OK):
            sys.exit(f"image_bench: {f} is missing; run 'make demo-image' (it builds tenax and tenax-train)")
    for s, py in a.python.items():
        if not os.access(py, os.X_OK):
            sys.exit(f"image_bench: {py} is missing; run 'bash bench/setup_hf_peers.sh {s[3:]}'")
    systems = ["tenax", *a.python]
    report = bench_rules.Report("image", a.results, a.rounds)
    say = report.say
    order = bench_rules.RoundOrder(systems, a.seed)
    versions = {s: subprocess.run([py, "-c", "import torch, transformers; print(f'torch {torch.__version__}, "
                                   "transformers {transformers.__version__}')"], capture_output=True,
                                  text=True).stdout.strip() for s, py in a.python.items()}

    say(bench_rules.header("image bench", a.build))
    say(f"  job: {os.path.relpath(CONFIG, bench_rules.REPO)}, {a.epochs:g} epoch(s), global batch {GLOBAL_BATCH}, "
        f"train limit {a.train_limit or 'none'}, eval limit {a.eval_limit or 'none'}; {a.rounds} round(s), "
        f"job seed {a.seed_base} + round - 1")
    say(f"  tenax: 2 ranks x 1 thread (Debian libtorch 1.13); "
        + "; ".join(f"{s}: 1 process x {a.hf_threads} threads ({versions[s]})" for s in a.python))
    say(f"  {order.describe()}")
    say()
    runs = {}
    for rnd in range(1, a.rounds + 1):
        seed = a.seed_base + rnd - 1
        for s in order.next_round():
            r = bench_rules.run_on_quiet_machine(lambda: run_job(a, s, seed, os.path.join(a.work_dir, s)), say,
                                                 f"round {rnd} {s}")
            runs[(rnd, s)] = r
            say(f"  round {rnd} seed {seed} {s:<10} {r['samples_per_s']:7.1f} samples/s  "
                f"train {r['train_runtime_s']:6.1f} s  step {r['global_step']}  test acc {r['test_accuracy']:.4f}  "
                f"load {r['load0']:.2f}->{r['load_end']:.2f}" + ("  (LOADED)" if r.get("loaded") else ""))

    rounds = range(1, a.rounds + 1)
    mr = bench_rules.median_range
    say()
    say(f"over {a.rounds} round(s): median (range)")
    for s in systems:
        say(f"  {s:<10} test accuracy {mr([runs[(i, s)]['test_accuracy'] for i in rounds], 4)}  "
            f"samples/s {mr([runs[(i, s)]['samples_per_s'] for i in rounds], 1)}")
    for s in a.python:
        d = [100 * (runs[(i, 'tenax')]['test_accuracy'] - runs[(i, s)]['test_accuracy']) for i in rounds]
        q = [runs[(i, 'tenax')]['samples_per_s'] / runs[(i, s)]['samples_per_s'] for i in rounds]
        say(f"  test accuracy tenax - {s} (points): {mr(d, 2)}  |d| <= 1   "
            f"(rounds: {', '.join(f'{x:+.2f}' for x in d)})")
        say(f"  samples/s tenax / {s}: {mr(q)}  (shown)   (rounds: {', '.join(f'{x:.3f}' for x in q)})")
    steps = {runs[k]["global_step"] for k in runs}
    if len(steps) != 1:
        say(f"WARNING: the systems ran different step counts: {sorted(steps)}")
    report.save()


if __name__ == "__main__":
    main()
