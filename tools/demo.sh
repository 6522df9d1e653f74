#!/usr/bin/env bash
# `make demo`: fine-tune all-MiniLM-L6-v2 on Rotten Tomatoes with 2 ranks under `tenax run`,
# through `tenax train` and the shipped job file train/jobs/rotten_tomatoes.toml (the program
# and the file a user runs), with an injected failure: rank 1 SIGKILLs itself after a checkpoint; the agent sees it, stops
# rank 0, starts generation 1; both ranks resume from the newest committed checkpoint, finish
# the epoch and report held-out test accuracy and throughput. Then the short synthetic job
# shows the other half of the promise: a killed-and-resumed run ends bit-identical to an
# uninterrupted one, and again under in-process recovery (the surviving rank keeps its process,
# a warm spare takes the lost rank's place and heals from the survivor's memory).
#
# Budget: about 10 minutes on a 2-core machine (docs/trainer.md, "The text example", says why
# these settings).
set -euo pipefail
build=${1:-build}
tenax="$build/launcher/tenax"
job=train/jobs/rotten_tomatoes.toml
synthetic="$build/examples/synthetic_regression/synthetic_regression"
assets=${TENAX_ASSETS:-.assets}
runs=runs/demo
# The fine-tuning job is $job (one epoch, 2 ranks x 32 = global batch 64, max_seq_length 64: the
# train snippets' median is 26 tokens, 99th percentile 55, longest 72; learning rate 1e-4, a
# checkpoint every 40 steps); the demo moves its paths under $assets and $runs and kills rank 1
# after step 60.
fail_at=60 fail_rank=1
# The synthetic job (seconds): 60 steps, a checkpoint every 20, rank 1 killed after step 30.
syn_steps=60 syn_save=20 syn_fail_at=30

for f in "$tenax" "$build/train/tenax-train" "$synthetic"; do
  [ -x "$f" ] || { echo "demo: $f is missing; run 'make demo' (it builds first)" >&2; exit 1; }
done
for f in "$assets/all-minilm-l6-v2/model.safetensors" "$assets/data/rotten_tomatoes/train.csv"; do
  [ -s "$f" ] || { echo "demo: $f is missing; run 'bash tools/fetch_assets.sh' (make demo does)" >&2; exit 1; }
done
rm -rf "$runs"
mkdir -p "$runs"
bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }'; }

bold "== Tenax demo: fine-tune all-MiniLM-L6-v2 on Rotten Tomatoes, 2 ranks over Gloo =="
bold "[1/3] tenax train $job: 1 epoch, 2 x 32 per step, a checkpoint every 40 steps;" \
     "rank $fail_rank is SIGKILLed after step $fail_at (log: $runs/finetune.log)"
t0=$(date +%s.%N)
set +e
data="$assets/data/rotten_tomatoes"
"$tenax" run --nproc-per-node 2 --max-restarts 3 --run-dir "$runs/finetune/run" -- \
  "$tenax" train "$job" output_dir="$runs/finetune/train" model.model_name_or_path="$assets/all-minilm-l6-v2" \
  data.train_file="$data/train.csv" data.validation_file="$data/validation.csv" data.test_file="$data/test.csv" \
  run.fail_at_step=$fail_at run.fail_rank=$fail_rank 2>&1 | tee "$runs/finetune.log"
status=${PIPESTATUS[0]}
set -e
finetune_s=$(seconds_since "$t0")
[ "$status" -eq 0 ] || { echo "demo: the fine-tuning job did not finish (exit $status)" >&2; exit 1; }
results="$runs/finetune/train/all_results.json"
[ -s "$results" ] || { echo "demo: the job wrote no $results" >&2; exit 1; }

bold "[2/3] bit-exact resume, on a small MLP: the same job uninterrupted and with rank 1 killed after step $syn_fail_at"
synthetic_job() {  # NAME EXTRA_ARGS...
  local name=$1 agent_flags=()
  shift
  [ "$name" = synthetic-in-process ] && agent_flags=(--recovery in-process --spares 1)
  "$tenax" run --nproc-per-node 2 --max-restarts 3 "${agent_flags[@]}" --run-dir "$runs/$name/run" -- "$synthetic" \
    --output-dir "$runs/$name/train" --max-steps $syn_steps --save-steps $syn_save --logging-steps 20 "$@" \
    > "$runs/$name.log" 2>&1 || { cat "$runs/$name.log"; echo "demo: synthetic job $name failed" >&2; exit 1; }
}
synthetic_job synthetic-reference
synthetic_job synthetic-killed --fail-at-step $syn_fail_at --fail-rank $fail_rank
final=$(printf 'step-%09d' $syn_steps)
if "$tenax" ckpt diff "$runs/synthetic-reference/train/checkpoints/$final" \
     "$runs/synthetic-killed/train/checkpoints/$final" --prefix model/ > "$runs/synthetic-diff.log"; then
  identical=yes
else
  identical=no
fi

bold "[3/3] in-process recovery (--recovery in-process): rank $fail_rank SIGKILLed after step $syn_fail_at again; the other" \
     "rank keeps its process, a warm spare takes rank $fail_rank and heals from its memory"
synthetic_job synthetic-in-process --fail-at-step $syn_fail_at --fail-rank $fail_rank
if "$tenax" ckpt diff "$runs/synthetic-reference/train/checkpoints/$final" \
     "$runs/synthetic-in-process/train/checkpoints/$final" --prefix model/ > "$runs/synthetic-in-process-diff.log"; then
  in_process_identical=yes
else
  in_process_identical=no
fi

echo
bold "What happened"
grep -m1 -o 'worker rank [0-9]* (pid [0-9]*[^)]*) was killed by signal [0-9]* ([A-Z]*)' "$runs/finetune.log" \
  | sed 's/^/  failure seen:      /' || echo "  failure seen:      (not found in the log!)"
restarts=$(grep -o '"restarts": *[0-9]*' "$runs/finetune/run/agent.json" | grep -o '[0-9]*$' || echo '?')
echo "  restarts:          $restarts (the job ran on as generation $restarts)"
grep -m1 -o 'resumed from .* at step [0-9]*' "$runs/finetune.log" | sed 's/.*at step /  resumed at step:   /' || true
python3 - "$results" "$runs/finetune/train/trainer_state.json" "$finetune_s" <<'PY'
import json, sys
r, state, wall = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
print(f"  finished at:       step {state['global_step']} on 2 ranks")
print(f"  held-out test:     accuracy {r['test_accuracy']:.4f}, F1 (rotten) {r['test_f1']:.4f}, "
      f"MCC {r['test_matthews_correlation']:.4f}  (validation accuracy {r['eval_accuracy']:.4f})")
print(f"  throughput:        {r['train_samples_per_second']:.1f} samples/s over {r['train_runtime']:.0f} s of "
      f"training after the restart; test evaluation {r['test_runtime']:.1f} s")
print(f"  wall time:         {wall} s for the whole fine-tuning job, failure and restart included")
PY
echo "  fine-tuned model:  $runs/finetune/train/model (Hugging Face layout: transformers loads it)"
echo "  results:           $runs/finetune/train/{train,eval,test,all}_results.json, trainer_state.json"
if [ "$identical" = yes ]; then
  bold "  synthetic job: final parameters are BIT-IDENTICAL to the uninterrupted run"
else
  bold "  synthetic job: final parameters DIFFER from the uninterrupted run"
  cat "$runs/synthetic-diff.log"
  exit 1
fi
python3 - "$runs/synthetic-in-process/run/agent.json" "$runs/synthetic-in-process.log" <<'PY'
import json, re, sys
agent = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
rec = agent["in_process_recoveries"]
if agent["restarts"] != 0 or len(rec) != 1:
    sys.exit(f"demo: expected one in-process recovery and no restart, agent.json says {agent['restarts']} restarts, "
             f"{len(rec)} recoveries")
final = {w["rank"]: w["pid"] for w in agent["history"][-1]["workers"]}
for s in rec[0]["survivors"]:
    same = "unchanged" if final[s["rank"]] == s["pid"] else f"CHANGED to {final[s['rank']]}"
    print(f"  in-process:        rank {s['rank']} kept pid {s['pid']} ({same})")
for r in rec[0]["replaced"]:
    print(f"  in-process:        rank {r['rank']} (pid {r['lost_pid']}) replaced by {r['by']} (pid {r['pid']})")
healed = re.search(r"healed from rank \d+ in \d+ ms: generation \d+ goes on at step \d+, 0 steps lost", log)
print("  in-process:        " + (healed.group(0) if healed else "(no 'healed' line in the log!)"))
PY
if [ "$in_process_identical" = yes ]; then
  bold "  in-process recovery: final parameters are BIT-IDENTICAL to the uninterrupted run"
else
  bold "  in-process recovery: final parameters DIFFER from the uninterrupted run"
  cat "$runs/synthetic-in-process-diff.log"
  exit 1
fi
