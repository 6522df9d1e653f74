#!/usr/bin/python3
"""Tokenizer speed: Tenax's BertTokenizer against Hugging Face's BertTokenizerFast on one core.

Both systems encode the same texts with the same vocabulary (.assets/all-minilm-l6-v2, BERT's
uncased WordPiece; the texts: the reviews of .assets/data/rotten_tomatoes/train.csv), truncated
to --max-length 128:
  single  one text per call (encode / tok(text));
  batch   --batch 64 texts per call, padded to the longest (encode_batch / tok(texts, padding="longest")).
  tenax   build/bench/tokenizer_bench (bench/tokenizer_bench.cpp)
  hf      bench/tokenizer_bench_hf.py under .venv-goldens (transformers and tokenizers pinned by
          tools/goldens/requirements-text.txt: the current releases the goldens were made with):
          transformers' BertTokenizerFast, as users call it
  hf-rust the same script with --api tokenizers: the Rust `tokenizers` library called directly,
          without transformers' wrapper (HF's fastest path)
Each run is pinned to one core (taskset) with RAYON_NUM_THREADS=1, so `tokenizers`' batch
encoding gets one thread as Tenax's does. Both print their texts' token count and id sum; a run
whose totals differ from the other system's fails the bench (a faster wrong answer is not a
result). Figures: Tenax texts/s / each HF system's within each round, single and batch (target >= 1.0),
median and range over rounds (bench/bench_rules.py: shuffled order from a printed seed, >= 5
rounds, a run on a loaded machine run again).

  python3 bench/tokenizer_bench.py [--build build] [--rounds 5] [--passes 3] [--seed S] [--results FILE]
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

REPO = bench_rules.REPO
HF_PYTHON = os.path.join(REPO, ".venv-goldens", "bin", "python")
HF_SCRIPT = os.path.join(REPO, "bench", "tokenizer_bench_hf.py")
SYSTEMS = ("tenax", "hf", "hf-rust")
PEERS = SYSTEMS[1:]
MODES = ("single", "batch")


def write_texts(data_csv, out):
    """One text per line (a newline inside a review becomes a space); returns the count."""
    with open(data_csv, newline="", encoding="utf-8") as f:
        texts = [" ".join(row["text"].splitlines()) for row in csv.DictReader(f)]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    return len(texts)


def run_once(system, a):
    common = [a.model_dir, a.texts, "--max-length", str(a.max_length), "--batch", str(a.batch),
              "--passes", str(a.passes)]
    if system == "tenax":
        cmd = [a.bin, *common]
    else:
        cmd = [HF_PYTHON, HF_SCRIPT, *common, "--api", "tokenizers" if system == "hf-rust" else "transformers"]
    env = dict(os.environ, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    p = subprocess.run(["taskset", "-c", str(a.core), *cmd], capture_output=True, text=True, env=env,
                       timeout=a.timeout)
    if p.returncode != 0:
        raise SystemExit(f"tokenizer bench: {system} failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")
    out = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 5 and f[0] in MODES:
            seconds, texts, tokens, id_sum = float(f[1]), int(f[2]), int(f[3]), int(f[4])
            out[f[0]] = {"texts_per_s": texts / seconds, "tokens": tokens, "id_sum": id_sum}
    if set(out) != set(MODES):
        raise SystemExit(f"tokenizer bench: {system} printed no result for {set(MODES) - set(out)}:\n{p.stdout}")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--model-dir", default=os.path.join(REPO, ".assets", "all-minilm-l6-v2"))
    p.add_argument("--data", default=os.path.join(REPO, ".assets", "data", "rotten_tomatoes", "train.csv"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--core", type=int, default=1, help="the core both systems are pinned to")
    p.add_argument("--seed", type=int)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--work-dir", default="/tmp/tenax-tokenizer-bench")
    p.add_argument("--results")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.bin = os.path.join(a.build, "bench", "tokenizer_bench")
    for path, fix in ((a.bin, f"build it: ninja -C {a.build} tokenizer_bench"),
                      (HF_PYTHON, "python3 -m venv .venv-goldens && .venv-goldens/bin/pip install -r "
                                  "tools/goldens/requirements-text.txt"),
                      (a.model_dir, "bash tools/fetch_assets.sh"), (a.data, "bash tools/fetch_assets.sh")):
        if not os.path.exists(path):
            raise SystemExit(f"tokenizer bench: {path} is missing; {fix}")
    os.makedirs(a.work_dir, exist_ok=True)
    a.texts = os.path.join(a.work_dir, "texts.txt")
    n = write_texts(a.data, a.texts)
    versions = subprocess.run([HF_PYTHON, "-c", "import transformers, tokenizers; "
                               "print(transformers.__version__, tokenizers.__version__)"],
                              capture_output=True, text=True, check=True).stdout.split()

    report = bench_rules.Report("tokenizer", a.results, a.rounds)
    order = bench_rules.RoundOrder(SYSTEMS, a.seed)
    report.say(bench_rules.header("tokenizer bench", a.build))
    report.say(f"  texts: {n} from {os.path.relpath(a.data, REPO)}, vocabulary {os.path.relpath(a.model_dir, REPO)}; "
               f"max_length {a.max_length}, longest_first truncation; batch {a.batch} padded to the longest; "
               f"{a.passes} timed passes after one untimed")
    report.say(f"  tenax: {os.path.relpath(a.bin, REPO)}; hf: transformers {versions[0]} BertTokenizerFast, "
               f"tokenizers {versions[1]} (.venv-goldens); both on core {a.core} (taskset), RAYON_NUM_THREADS=1")
    report.say(f"  {a.rounds} rounds; " + order.describe())
    results = {s: [] for s in SYSTEMS}
    for rnd in range(1, a.rounds + 1):
        for system in order.next_round():
            r = bench_rules.run_on_quiet_machine(lambda: run_once(system, a), report.say, f"round {rnd} {system}")
            results[system].append(r)
            report.say(f"round {rnd}  {system:<7} single {r['single']['texts_per_s']:9.0f} texts/s  "
                       f"batch {r['batch']['texts_per_s']:9.0f} texts/s  load {r['load0']:.2f}"
                       f"{'  LOADED' if r.get('loaded') else ''}")
    for mode in MODES:
        for peer in PEERS:
            for t, h in zip(results["tenax"], results[peer]):
                if (t[mode]["tokens"], t[mode]["id_sum"]) != (h[mode]["tokens"], h[mode]["id_sum"]):
                    raise SystemExit(f"tokenizer bench: the encodings differ ({mode}): tenax {t[mode]['tokens']} "
                                     f"tokens, id sum {t[mode]['id_sum']}; {peer} {h[mode]['tokens']} tokens, "
                                     f"id sum {h[mode]['id_sum']}")
    tokens = {m: results["tenax"][0][m]["tokens"] // a.passes for m in MODES}
    report.say("")
    report.say(f"encodings identical in every round (tokens per pass: single {tokens['single']}, "
               f"batch {tokens['batch']} with padding)")
    report.say("")
    report.say("| measure | median (range) | target |")
    report.say("| --- | --- | --- |")
    for mode in MODES:
        for s in SYSTEMS:
            report.say(f"| {s} {mode}, texts/s | "
                       f"{bench_rules.median_range([r[mode]['texts_per_s'] for r in results[s]], 0)} | |")
    for peer in PEERS:
        for mode in MODES:
            ratios = [t[mode]["texts_per_s"] / h[mode]["texts_per_s"] for t, h in zip(results["tenax"], results[peer])]
            report.say(f"| tenax / {peer}, {mode} | {bench_rules.median_range(ratios, 2)} | >= 1.0 |")
    report.save()


if __name__ == "__main__":
    main()
