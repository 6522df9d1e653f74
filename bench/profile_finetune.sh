#!/usr/bin/env bash
# Where a fine-tuning step's time goes, Tenax against Hugging Face: the job of
# bench/finetune_bench.sh (MiniLM on Rotten Tomatoes, batch 16, max_length 64, 1 rank), run
# once per system with the op-level profiler on over steps FIRST..LAST (libtorch's autograd
# profiler inside `tenax train` on train/jobs/rotten_tomatoes.toml: train/src/profile_steps.h;
# torch.profiler inside bench/hf_trainer_finetune.py), then split by phase and op by
# bench/profile_summary.py.
# The profiler adds a few microseconds per op, so the ms/step here are above the benchmark's;
# read the shares, and take throughput from finetune_bench.sh.
#
# Usage: bench/profile_finetune.sh [BUILD_DIR] [PEER]    (defaults: build pypi)
#   PEER: debian or pypi, the .venv-hf-PEER of bench/setup_hf_peers.sh; "none" for Tenax only
#   env: THREADS (2), STEPS (6:25, the profiled window; the run does LAST steps), OUT (/tmp/profile-finetune)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build} peer=${2:-pypi}
threads=${THREADS:-2} window=${STEPS:-6:25} out=${OUT:-/tmp/profile-finetune}
assets=${TENAX_ASSETS:-$repo/.assets}
last=${window#*:}
mkdir -p "$out"
# The same settings on both sides: hf_trainer_finetune.py's flags and `tenax train`'s keys.
common=(--model-dir "$assets/all-minilm-l6-v2" --data-dir "$assets/data/rotten_tomatoes" --max-steps "$last"
        --max-length 64 --learning-rate 5e-5 --seed 42 --save-steps 0 --logging-steps 50
        --per-device-eval-batch-size 64 --eval-limit 64 --per-device-train-batch-size 16 --threads "$threads")
tenax_keys=(model.model_name_or_path="$assets/all-minilm-l6-v2" data.train_file="$assets/data/rotten_tomatoes/train.csv"
            data.validation_file="$assets/data/rotten_tomatoes/validation.csv"
            data.test_file="$assets/data/rotten_tomatoes/test.csv" max_steps="$last"
            data.max_seq_length=64 learning_rate=5e-5 seed=42 save_steps=0 logging_steps=50
            per_device_eval_batch_size=64 data.max_eval_samples=64 data.max_predict_samples=64
            per_device_train_batch_size=16 run.threads="$threads")
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONWARNINGS=ignore
export OMP_NUM_THREADS=$threads TENAX_PROFILE_STEPS=$window
python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import bench_rules; build = sys.argv[2]; sys.argv = sys.argv[3:]
print(bench_rules.header("profile finetune", build))' "$repo/bench" "$build" bash "$0" "$@"
echo "profile: steps $window, $threads thread(s), $(nproc) cores, load now $(cut -d' ' -f1-3 /proc/loadavg)"
name=tenax-$(basename "$build")
TENAX_PROFILE_TRACE=$out/$name.json "$build/launcher/tenax" train "$repo/train/jobs/rotten_tomatoes.toml" \
  output_dir="$out/$name-run" "${tenax_keys[@]}" save_total_limit=1 >"$out/$name.log" 2>&1 \
  || { tail -20 "$out/$name.log"; exit 1; }
[ -s "$out/$name.json" ] || { tail -20 "$out/$name.log"; echo "profile_finetune: no trace $out/$name.json" >&2; exit 1; }
traces=("$out/$name.json")
if [ "$peer" != none ]; then
  TENAX_PROFILE_TRACE=$out/hf-$peer.json "$repo/.venv-hf-$peer/bin/python" "$repo/bench/hf_trainer_finetune.py" \
    --output-dir "$out/hf-$peer-run" "${common[@]}" --no-final-save >"$out/hf-$peer.log" 2>&1 \
    || { tail -20 "$out/hf-$peer.log"; exit 1; }
  traces+=("$out/hf-$peer.json")
fi
rm -rf "$out"/*-run
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$repo/bench/profile_summary.py" "${traces[@]}"
