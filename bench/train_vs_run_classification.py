#!/usr/bin/python3
"""`tenax train` against Hugging Face's run_classification.py on one job file, in rounds.

Issue 31's benchmark: the runner against transformers' own example script, with the same model,
data, arguments and seed, on the Rotten Tomatoes job (train/jobs/rotten_tomatoes.toml by default).
Each round runs, in an order shuffled per round from a printed seed (bench/bench_rules.py),
  tenax      <build>/launcher/tenax run --nproc-per-node R -- <build>/launcher/tenax train JOB KEY=VALUE...
             (the job file as written: per_device_train_batch_size per rank; --threads / R torch
             threads per rank, OMP_NUM_THREADS the same)
  hf-debian  run_classification.py of transformers 4.44.2 in .venv-hf-debian (Debian's torch 1.13,
             the libtorch Tenax links; datasets 2.21.0, evaluate 0.4.2): one process, --threads
             torch threads (OMP_NUM_THREADS), per_device_train_batch_size = the job's x R (the same
             global batch), run from bench/hf/ so that evaluate.load("accuracy") loads
             bench/hf/accuracy/accuracy.py instead of the Hub's, all Hugging Face libraries offline
with every argument of the job mapped one to one onto the script's flags of the same name (the
job's tables [model], [data] hold run_classification.py's names; the top level is
TrainingArguments on both sides). Round k runs job seed SEED + k - 1 on both systems (SEED: the
job's `seed`, or --seed-base), so the accuracies span as many seeds as rounds.

What is made equal beyond the job file, and why (each is printed in the result file's header):
  - padding: Tenax pads each batch to its longest text; run_classification.py pads to
    max_seq_length unless --pad_to_max_length False, which gives it DataCollatorWithPadding
    (per batch) — so False;
  - metric: accuracy on both (the script takes one metric_name; Tenax's metrics.metric_name is
    set to accuracy as well);
  - do_train, do_eval, do_predict: Tenax trains, evaluates validation_file and test_file because
    the job names them; the script does each only when asked;
  - dataloader_num_workers: --dataloader-num-workers on both (default 0, either side's default);
  - report_to none (the script only): no logging integration on either side;
  - model and data paths: the job's `.assets/...` paths taken from --assets (TENAX_ASSETS).

Reported, per round and as the median with the range over rounds:
  - samples/s of each: the training samples (steps x global batch for a max_steps run, else the
    training rows x num_train_epochs: what transformers' train_samples_per_second counts) over
    the train_runtime of the side's train_results.json (its checkpoints included on both sides);
  - the ratio Tenax / HF within the round;
  - held-out test accuracy of each: Tenax's test_accuracy (test_results.json); for the script,
    its predict_results.txt against test_file's labels (the script drops the labels before
    predicting, so it reports no test accuracy of its own); and Tenax - HF in points (target
    |d| <= 1);
  - validation accuracy of each (eval_accuracy, each side's own metric), shown;
  - Tenax's data-path share: the seconds its training loop waited for batches over its training
    seconds (the `data path:` line of its log; "not measured" when the binaries print none).
A round whose run started with the 1-minute load above the core count is run again (at most 3
times, then kept and marked loaded); a failed run is reported (FAILED, runs ok k/n), not dropped.

run_classification.py is not in the repository: put transformers v4.44.2's
examples/pytorch/text-classification/run_classification.py (Apache-2.0) at
bench/hf/run_classification.py, e.g. from a transformers checkout
  git -C transformers show v4.44.2:examples/pytorch/text-classification/run_classification.py \\
      > bench/hf/run_classification.py
or pass --hf-script. Its sha256 and the transformers version it asks for (check_min_version) are
written into the result file's header.

Usage: bench/train_vs_run_classification.py [--build build] [--job train/jobs/rotten_tomatoes.toml]
           [--ranks 1] [--threads 2] [--rounds 5] [--seed S] [--seed-base N] [--set KEY=VALUE ...]
           [--dataloader-num-workers 0] [--hf-script FILE] [--assets DIR] [--results FILE]
  smoke run: --rounds 1 --set max_steps=10 --set data.max_eval_samples=200 --set data.max_predict_samples=200
Needs: the build (make build), the assets (tools/fetch_assets.sh), .venv-hf-debian
(bash bench/setup_hf_peers.sh debian) and the script (above). `make bench-run-classification`.
"""
import argparse
import csv
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

HF_DIR = os.path.join(bench_rules.REPO, "bench", "hf")  # the script's working directory: accuracy/ is here
DATA_PATH = re.compile(r"data path: the training loop waited ([0-9.]+) s for batches, ([0-9.]+) % of ([0-9.]+) s "
                       r"\(dataloader_num_workers = (\d+)\)")
# Job keys that are paths, resolved against --assets when they start with ".assets/".
PATH_KEYS = {"model.model_name_or_path", "data.train_file", "data.validation_file", "data.test_file"}
# Job keys that are Tenax's own, with no flag in run_classification.py.
TENAX_ONLY = {"run.threads", "metrics.average", "metrics.pos_label", "model.model_type", "model.problem_type",
              "data.format", "data.label_names", "data.label_separator"}


def flatten(job):
    """{'seed': 42, 'data.max_seq_length': 64, ...}: the top level as it is, tables as table.key."""
    out = {}
    for k, v in job.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def text(v):
    """A value as both command lines take it: lists comma-separated, booleans lower-case."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(text(x) for x in v)
    return str(v)


def parse_value(s):
    try:
        return tomllib.loads(f"v = {s}")["v"]
    except tomllib.TOMLDecodeError:
        return s


def settings_of(a):
    """The job's settings after the bench's overrides, as one flat dict of job keys."""
    with open(a.job, "rb") as f:
        s = flatten(tomllib.load(f))
    for k in PATH_KEYS:
        if isinstance(s.get(k), str) and s[k].startswith(".assets/"):
            s[k] = os.path.join(a.assets, s[k][len(".assets/"):])
    s["metrics.metric_name"] = "accuracy"
    s["dataloader_num_workers"] = a.dataloader_num_workers
    for kv in a.set:
        k, _, v = kv.partition("=")
        if not _ or not k:
            sys.exit(f"train_vs_run_classification: --set {kv!r}: expected KEY=VALUE")
        s[k.strip()] = parse_value(v.strip())
    return s


def hf_flags(s, ranks):
    """run_classification.py's flags for the job's settings: every key by its own name."""
    flags = []
    for k, v in s.items():
        if k in TENAX_ONLY or k in ("output_dir", "seed"):
            continue
        name = k.split(".", 1)[-1]
        if name == "per_device_train_batch_size":
            v = int(v) * ranks  # the same global batch in one process
        flags += [f"--{name}", text(v)]
    return flags + ["--do_train", "--do_eval" if s.get("data.validation_file") else "",
                    "--do_predict" if s.get("data.test_file") else "", "--pad_to_max_length", "False",
                    "--report_to", "none"]


def tenax_overrides(s, threads):
    kv = [f"{k}={text(v)}" for k, v in s.items() if k not in ("output_dir", "seed", "run.threads")]
    return kv + [f"run.threads={threads}"]


def rows_of(path, limit):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return rows[:limit] if limit else rows


def read_json(path):
    with open(path) as f:
        return json.load(f)


def run_job(a, system, seed, s, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = os.path.join(work, "train")
    rank_threads = a.threads // a.ranks
    if system == "tenax":
        cmd = [a.tenax, "run", "--nproc-per-node", str(a.ranks), "--max-restarts", "0", "--run-dir",
               os.path.join(work, "run"), "--", a.tenax, "train", a.job, f"output_dir={out}", f"seed={seed}",
               *tenax_overrides(s, rank_threads)]
        env = dict(os.environ, OMP_NUM_THREADS=str(rank_threads))
        cwd = bench_rules.REPO
    else:
        cmd = [a.python, a.hf_script, "--output_dir", out, "--seed", str(seed), *hf_flags(s, a.ranks)]
        cmd = [c for c in cmd if c]
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), TOKENIZERS_PARALLELISM="false",
                   PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   HF_EVALUATE_OFFLINE="1", HF_DATASETS_CACHE=os.path.join(work, "datasets-cache"),
                   HF_MODULES_CACHE=os.path.join(work, "modules-cache"))
        cwd = HF_DIR
    t0 = time.time()
    log_path = os.path.join(work, "log.txt")
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        log.flush()
        try:
            p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=a.timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    r = {"wall_s": time.time() - t0, "load_end": os.getloadavg()[0], "log": log_path, "cmd": cmd}
    try:
        if rc != 0:
            raise RuntimeError(f"exit {rc}")
        train = read_json(os.path.join(out, "train_results.json"))
        state = read_json(os.path.join(out, "trainer_state.json"))
        r["train_runtime_s"] = float(train["train_runtime"])
        r["reported_samples_per_s"] = float(train["train_samples_per_second"])
        r["global_step"] = int(state["global_step"])
        evals = read_json(os.path.join(out, "eval_results.json")) if s.get("data.validation_file") else {}
        r["eval_accuracy"] = evals.get("eval_accuracy")
        if system == "tenax":
            r["test_accuracy"] = float(read_json(os.path.join(out, "test_results.json"))["test_accuracy"])
            with open(log_path, errors="replace") as f:
                m = DATA_PATH.search(f.read())
            if m:
                r["data_wait_s"], r["data_train_s"] = float(m.group(1)), float(m.group(3))
                r["data_share"] = r["data_wait_s"] / r["data_train_s"] if r["data_train_s"] > 0 else None
        else:
            label = s.get("data.label_column_name", "label")
            truth = [row[label] for row in rows_of(s["data.test_file"], s.get("data.max_predict_samples"))]
            with open(os.path.join(out, "predict_results.txt")) as f:
                pred = [line.rstrip("\n").split("\t")[1] for line in f.readlines()[1:] if line.strip()]
            if len(pred) != len(truth):
                raise RuntimeError(f"predict_results.txt has {len(pred)} predictions for {len(truth)} test rows")
            r["test_accuracy"] = sum(p == t for p, t in zip(pred, truth)) / len(truth)
    except (RuntimeError, OSError, KeyError, ValueError, IndexError) as e:
        r["failed"] = str(e)
    shutil.rmtree(out, ignore_errors=True)  # checkpoints: hundreds of MB per run
    shutil.rmtree(os.path.join(work, "datasets-cache"), ignore_errors=True)
    return r


def script_identity(path):
    with open(path, "rb") as f:
        body = f.read()
    m = re.search(rb'^check_min_version\("([^"]+)"\)', body, re.M)
    return hashlib.sha256(body).hexdigest(), (m.group(1).decode() if m else None)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--job", default=os.path.join(bench_rules.REPO, "train", "jobs", "rotten_tomatoes.toml"))
    p.add_argument("--ranks", type=int, default=1, help="Tenax ranks (the script runs one process)")
    p.add_argument("--threads", type=int, default=2, help="torch threads in all, per system (all cores of the "
                   "reference machine); Tenax's are split among its ranks")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order (default: random)")
    p.add_argument("--seed-base", type=int, default=None, help="the job's seed in round 1 (default: the job's "
                   "seed); round k uses base + k - 1")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a job setting for both systems, by its job-file name (top level, or table.key): "
                   "max_steps=10, data.max_train_samples=640")
    p.add_argument("--dataloader-num-workers", type=int, default=0)
    p.add_argument("--hf-script", default=os.path.join(HF_DIR, "run_classification.py"))
    p.add_argument("--venv", default=os.path.join(bench_rules.REPO, ".venv-hf-debian"))
    p.add_argument("--assets", default=os.environ.get("TENAX_ASSETS", os.path.join(bench_rules.REPO, ".assets")))
    p.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per run")
    p.add_argument("--max-reruns", type=int, default=3, help="times a round whose run started loaded runs again")
    p.add_argument("--load-wait", type=float, default=600, help="seconds a run waits for the load to fall")
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-run-classification-bench"))
    p.add_argument("--results", default=None, help="results file (default "
                   "bench/results/results-train-vs-run-classification-<UTC date>.txt)")
    a = p.parse_args()
    a.build, a.job, a.assets = (os.path.abspath(x) for x in (a.build, a.job, a.assets))
    a.hf_script = os.path.abspath(a.hf_script)
    a.tenax = os.path.join(a.build, "launcher", "tenax")
    a.python = os.path.join(a.venv, "bin", "python")
    if a.ranks < 1 or a.threads % a.ranks:
        sys.exit(f"train_vs_run_classification: --threads {a.threads} is not divisible by --ranks {a.ranks}")
    if not os.access(a.tenax, os.X_OK):
        sys.exit(f"train_vs_run_classification: {a.tenax} is missing; run 'make build'")
    if not os.access(a.python, os.X_OK):
        sys.exit(f"train_vs_run_classification: {a.python} is missing; run 'bash bench/setup_hf_peers.sh debian'")
    if not os.path.isfile(a.hf_script):
        sys.exit(f"train_vs_run_classification: {a.hf_script} is missing: put transformers v4.44.2's "
                 "examples/pytorch/text-classification/run_classification.py there (e.g. git -C transformers show "
                 "v4.44.2:examples/pytorch/text-classification/run_classification.py > bench/hf/run_classification.py)"
                 ", or pass --hf-script")
    s = settings_of(a)
    for k in ("data.train_file", "data.test_file", "model.model_name_or_path"):
        if not s.get(k) or not os.path.exists(s[k]):
            sys.exit(f"train_vs_run_classification: {k} = {s.get(k)!r} is missing; run 'bash tools/fetch_assets.sh' "
                     "or pass --assets")
    seed_base = a.seed_base if a.seed_base is not None else int(s.get("seed", 42))
    global_batch = int(s["per_device_train_batch_size"]) * a.ranks
    train_rows = len(rows_of(s["data.train_file"], s.get("data.max_train_samples")))
    max_steps = int(s.get("max_steps", -1))
    samples = (max_steps * global_batch if max_steps > 0
               else train_rows * float(s.get("num_train_epochs", 3.0)))

    systems = ["tenax", "hf-debian"]
    report = bench_rules.Report("train-vs-run-classification", a.results, a.rounds)
    say = report.say
    order = bench_rules.RoundOrder(systems, a.seed)
    versions = subprocess.run([a.python, "-c", "import torch, transformers, datasets, evaluate; print("
                               "f'torch {torch.__version__}, transformers {transformers.__version__}, datasets "
                               "{datasets.__version__}, evaluate {evaluate.__version__}')"],
                              capture_output=True, text=True).stdout.strip() or "unknown (the venv did not import)"
    sha, min_version = script_identity(a.hf_script)
    tf_version = re.search(r"transformers (\S+),", versions)

    say(bench_rules.header("train vs run_classification bench", a.build))
    say(f"  job: {os.path.relpath(a.job, bench_rules.REPO)}; {a.rounds} round(s), job seed {seed_base} + round - 1 on "
        f"both systems; global batch {global_batch}; {samples:g} training samples per run "
        f"({f'max_steps {max_steps} x {global_batch}' if max_steps > 0 else f'{train_rows} rows x num_train_epochs'})")
    say(f"  tenax: tenax train under tenax run, {a.ranks} rank(s) x {a.threads // a.ranks} thread(s), "
        f"per_device_train_batch_size {s['per_device_train_batch_size']}")
    say(f"  hf-debian: {os.path.relpath(a.hf_script, bench_rules.REPO)} (sha256 {sha}, check_min_version "
        f"{min_version or 'none'}) in {os.path.relpath(a.venv, bench_rules.REPO)} ({versions}), 1 process x "
        f"{a.threads} threads, per_device_train_batch_size {global_batch}, working directory bench/hf "
        "(evaluate.load('accuracy') -> bench/hf/accuracy/accuracy.py), offline")
    if not min_version or not tf_version or not min_version.startswith(".".join(tf_version.group(1).split(".")[:2])):
        say(f"  NOTE: the script asks for transformers {min_version or '? (no check_min_version)'}, the venv has "
            f"{tf_version.group(1) if tf_version else '?'}: it is not the venv's own version of run_classification.py")
    say("  settings (job file, then the bench's; both systems get each under its own name):")
    for k, v in s.items():
        if k in ("output_dir", "seed"):
            continue  # per run: below, and a directory under --work-dir
        where = "tenax only" if k in TENAX_ONLY else "both"
        say(f"    {k} = {text(v)}  ({where})")
    say(f"    seed = {seed_base} + round - 1  (both); output_dir: a fresh directory under {a.work_dir} per run")
    say("    padding: Tenax to the batch's longest text; run_classification.py --pad_to_max_length False "
        "(DataCollatorWithPadding: the same)")
    say("    run_classification.py only: --do_train --do_eval --do_predict (Tenax does each because the job names "
        "the files), --report_to none")
    say(f"    threads: tenax run.threads {a.threads // a.ranks} and OMP_NUM_THREADS {a.threads // a.ranks} per rank; "
        f"hf OMP_NUM_THREADS {a.threads}")
    say(f"  {order.describe()}")
    say()

    runs = {}
    cores = os.cpu_count()
    for rnd in range(1, a.rounds + 1):
        seed = seed_base + rnd - 1
        for attempt in range(a.max_reruns + 1):
            got = {}
            for system in order.next_round():
                # Wait (at most --load-wait seconds) for other work to end; a run that starts above
                # the core count makes its round run again (below).
                waited = 0.0
                while os.getloadavg()[0] > cores and waited < a.load_wait:
                    time.sleep(5)
                    waited += 5
                load0 = os.getloadavg()[0]
                r = got[system] = run_job(a, system, seed, s, os.path.join(a.work_dir, system))
                r["load0"] = load0
                if "failed" in r:
                    say(f"  round {rnd} seed {seed} {system:<10} FAILED: {r['failed']} (log {r['log']})")
                    continue
                share = f"{100 * r['data_share']:5.1f} %" if r.get("data_share") is not None else "-"
                eval_acc = f"{r['eval_accuracy']:.4f}" if r.get("eval_accuracy") is not None else "-"
                say(f"  round {rnd} seed {seed} {system:<10} {samples / r['train_runtime_s']:7.2f} samples/s  "
                    f"train {r['train_runtime_s']:7.1f} s  step {r['global_step']}  test acc {r['test_accuracy']:.4f}  "
                    f"eval acc {eval_acc}  data wait {share}  load {r['load0']:.2f}->{r['load_end']:.2f}")
            if all(r["load0"] <= cores for r in got.values()):
                break
            if attempt < a.max_reruns:
                say(f"  round {rnd}: a run started with the load above {cores}; running the round again")
            else:
                say(f"  round {rnd}: kept although loaded ({a.max_reruns} reruns reached)")
                for r in got.values():
                    r["loaded"] = True
        for system, r in got.items():
            runs[(rnd, system)] = r

    rounds = range(1, a.rounds + 1)
    ok = {x: [i for i in rounds if "failed" not in runs[(i, x)]] for x in systems}
    both = [i for i in rounds if i in ok["tenax"] and i in ok["hf-debian"]]
    sps = {k: samples / r["train_runtime_s"] for k, r in runs.items() if "failed" not in r}
    mr = bench_rules.median_range
    say()
    say(f"over {a.rounds} round(s): median (range)")
    for x in systems:
        say(f"  {x:<10} runs ok {len(ok[x])}/{a.rounds}  samples/s {mr([sps[(i, x)] for i in ok[x]], 2)}  "
            f"test accuracy {mr([runs[(i, x)]['test_accuracy'] for i in ok[x]], 4)}  "
            f"eval accuracy {mr([runs[(i, x)]['eval_accuracy'] for i in ok[x]], 4)}")
    q = [sps[(i, 'tenax')] / sps[(i, 'hf-debian')] for i in both]
    d = [100 * (runs[(i, 'tenax')]['test_accuracy'] - runs[(i, 'hf-debian')]['test_accuracy']) for i in both]
    say(f"  samples/s tenax / hf-debian: {mr(q)}  (rounds: {', '.join(f'{x:.3f}' for x in q) or '-'})")
    say(f"  test accuracy tenax - hf-debian (points): {mr(d, 2)}  target |d| <= 1  "
        f"(rounds: {', '.join(f'{x:+.2f}' for x in d) or '-'})")
    shares = [runs[(i, 'tenax')].get("data_share") for i in ok["tenax"]]
    if any(x is not None for x in shares):
        say(f"  tenax data-path share (waited for batches / training seconds, %): "
            f"{mr([100 * x for x in shares if x is not None], 2)}  "
            f"(dataloader_num_workers {a.dataloader_num_workers})")
    else:
        say("  tenax data-path share: not measured (the binaries' log has no 'data path:' line)")
    for i, x in ((i, x) for i in rounds for x in systems):
        r = runs[(i, x)]
        if "failed" not in r and abs(r["reported_samples_per_s"] - sps[(i, x)]) > 0.01 * sps[(i, x)]:
            say(f"  NOTE: round {i} {x} reported {r['reported_samples_per_s']:.2f} samples/s, the bench's count gives "
                f"{sps[(i, x)]:.2f}")
    steps = {runs[k]["global_step"] for k in runs if "failed" not in runs[k]}
    if len(steps) > 1:
        say(f"WARNING: the systems ran different step counts: {sorted(steps)}")
    if any(r.get("loaded") for r in runs.values()):
        say("WARNING: some rounds ran with the load above the core count (marked above)")
    report.save()


if __name__ == "__main__":
    main()
