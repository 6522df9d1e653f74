#!/usr/bin/env bash
# `make demo-image`: the image workload, through `tenax train` and the shipped job file
# train/jobs/fashion_mnist.toml (the program and the file a user runs). A small ViT learns
# Fashion-MNIST from its initialisation on 2 ranks under `tenax run`; rank 1 SIGKILLs itself
# in the second epoch (after step 650, the checkpoint of step 600 committed); the agent sees it,
# stops rank 0, starts generation 1, which resumes from that checkpoint (parameters, AdamW
# moments, RNG, data cursor) and finishes. The held-out accuracy on the 10,000 test images is
# printed for every epoch and at the end, beside what Hugging Face's Trainer reaches with the
# same settings (docs/trainer.md, "Images"; the figures in bench/RESULTS.md).
#
# Budget: about 4 minutes on the 2-core machine (3 epochs of 468 steps, 50 steps repeated after
# the restart, 10,000 images evaluated per epoch).
set -euo pipefail
build=${1:-build}
tenax="$build/launcher/tenax"
job=train/jobs/fashion_mnist.toml
data=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
runs=runs/demo-image
fail_at=650 fail_rank=1

for f in "$tenax" "$build/train/tenax-train"; do
  [ -x "$f" ] || { echo "demo-image: $f is missing; run 'make demo-image' (it builds first)" >&2; exit 1; }
done
[ -s "$data/train-images-idx3-ubyte.gz" ] || {
  echo "demo-image: no Fashion-MNIST in $data; install Debian's dataset-fashion-mnist (bash tools/bootstrap.sh)" >&2
  exit 1
}
rm -rf "$runs"
mkdir -p "$runs"
bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }'; }

bold "== Tenax image demo: a small ViT learns Fashion-MNIST on 2 ranks over Gloo =="
bold "tenax train $job: 3 epochs, 2 x 64 per step, a checkpoint every 100 steps; rank $fail_rank is SIGKILLed" \
     "after step $fail_at (log: $runs/train.log)"
t0=$(date +%s.%N)
set +e
"$tenax" run --nproc-per-node 2 --max-restarts 3 --run-dir "$runs/run" -- \
  "$tenax" train "$job" output_dir="$runs/train" disable_tqdm=true \
  data.train_file="$data/train-images-idx3-ubyte.gz" data.validation_file="$data/t10k-images-idx3-ubyte.gz" \
  data.test_file="$data/t10k-images-idx3-ubyte.gz" \
  run.fail_at_step=$fail_at run.fail_rank=$fail_rank 2>&1 | tee "$runs/train.log"
status=${PIPESTATUS[0]}
set -e
wall_s=$(seconds_since "$t0")
[ "$status" -eq 0 ] || { echo "demo-image: the job did not finish (exit $status)" >&2; exit 1; }
results="$runs/train/all_results.json"
[ -s "$results" ] || { echo "demo-image: the job wrote no $results" >&2; exit 1; }

echo
bold "What happened"
grep -m1 -o 'worker rank [0-9]* (pid [0-9]*[^)]*) was killed by signal [0-9]* ([A-Z]*)' "$runs/train.log" \
  | sed 's/^/  failure seen:      /' || echo "  failure seen:      (not found in the log!)"
restarts=$(grep -o '"restarts": *[0-9]*' "$runs/run/agent.json" | grep -o '[0-9]*$' || echo '?')
echo "  restarts:          $restarts (the job ran on as generation $restarts)"
grep -m1 -o 'resumed from .* at step [0-9]*' "$runs/train.log" | sed 's/.*at step /  resumed at step:   /' || true
python3 - "$results" "$runs/train/trainer_state.json" "$wall_s" <<'PY'
import json, sys
r, state, wall = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
evals = {}
for e in state["log_history"]:
    if "eval_accuracy" in e:
        evals[round(e["epoch"])] = e["eval_accuracy"]  # a repeated epoch (after a restart) counts once
for epoch in sorted(evals):
    print(f"  held-out, epoch {epoch}: accuracy {evals[epoch]:.4f}")
print(f"  finished at:       step {state['global_step']} on 2 ranks")
print(f"  held-out test:     accuracy {r['test_accuracy']:.4f} on the 10,000 test images (loss {r['test_loss']:.4f})")
print(f"  throughput:        {r['train_samples_per_second']:.0f} images/s over {r['train_runtime']:.0f} s of "
      f"training after the restart")
print(f"  wall time:         {wall} s for the whole job, failure and restart included")
PY
echo "  trained model:     $runs/train/model (Hugging Face layout with preprocessor_config.json)"
echo "  Hugging Face's Trainer, same settings: see docs/trainer.md (Images) and bench/hf_image_trainer.py"
