#!/usr/bin/env bash
# `make demo`: 2-rank data-parallel training through the Trainer with an injected failure.
# Rank 1 SIGKILLs itself between two checkpoints; the agent sees it, stops rank 0, starts
# generation 1; both ranks resume from the newest committed checkpoint and finish. The final
# parameters are then compared, byte for byte, with an uninterrupted run of the same job.
set -euo pipefail
build=${1:-build}
tenax="$build/launcher/tenax"
app="$build/examples/synthetic_regression/synthetic_regression"
runs=runs/demo
steps=60 save=20 fail_at=30 fail_rank=1
for f in "$tenax" "$app"; do
  [ -x "$f" ] || { echo "demo: $f is missing; run 'make demo' (it builds first)" >&2; exit 1; }
done
rm -rf "$runs"
mkdir -p "$runs"
bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }

job() {  # job NAME EXTRA_ARGS...
  local name=$1
  shift
  "$tenax" run --nproc-per-node 2 --max-restarts 3 --run-dir "$runs/$name/run" -- \
    "$app" --output-dir "$runs/$name/train" --max-steps $steps --save-steps $save --logging-steps 10 "$@"
}

bold "== Tenax demo: 2 ranks over Gloo, checkpoint every $save steps, rank $fail_rank killed after step $fail_at =="
bold "[1/3] reference run without failure (log: $runs/reference.log)"
t0=$(date +%s.%N)
job reference > "$runs/reference.log" 2>&1 || { cat "$runs/reference.log"; echo "demo: reference run failed" >&2; exit 1; }
t1=$(date +%s.%N)

bold "[2/3] the same job with rank $fail_rank SIGKILLed after step $fail_at"
job failure --fail-at-step $fail_at --fail-rank $fail_rank 2>&1 | tee "$runs/failure.log"
status=${PIPESTATUS[0]}
t2=$(date +%s.%N)
[ "$status" -eq 0 ] || { echo "demo: the job with the injected failure did not finish (exit $status)" >&2; exit 1; }

bold "[3/3] final parameters: uninterrupted run vs. killed-and-resumed run"
final=$(printf 'step-%09d' $steps)
if "$tenax" ckpt diff "$runs/reference/train/checkpoints/$final" "$runs/failure/train/checkpoints/$final" --prefix model/; then
  identical=yes
else
  identical=no
fi

echo
bold "What happened"
grep -m1 -o 'worker rank [0-9]* (pid [0-9]*[^)]*) was killed by signal [0-9]* ([A-Z]*)' "$runs/failure.log" | sed 's/^/  failure seen:   /' || echo "  failure seen:   (not found in the log!)"
restarts=$(grep -o '"restarts": *[0-9]*' "$runs/failure/run/agent.json" | grep -o '[0-9]*$' || echo '?')
echo "  restarts:       $restarts (the job ran as generation $restarts after it)"
grep -m1 -o 'resumed from .* at step [0-9]*' "$runs/failure.log" | sed 's/.*at step /  resumed at step: /' || true
grep -m1 -o 'training finished at step [0-9]*' "$runs/failure.log" | sed 's/training finished at step /  finished at:    step /' || true
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "  wall time:      reference %.1f s, with failure + restart %.1f s\n", b - a, c - b }'
if [ "$identical" = yes ]; then
  bold "  final parameters are BIT-IDENTICAL to the uninterrupted run"
else
  bold "  final parameters DIFFER from the uninterrupted run"
  exit 1
fi
