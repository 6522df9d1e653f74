#!/usr/bin/env bash
# `make demo-sim`: a simulation code that embeds Tenax survives a kill -9, bit for bit.
#
# examples/sim_surrogate (C++, through the C API tenax.h) solves the 2-D heat equation on 2 ranks
# under `tenax run` and trains an MLP surrogate of its own update online; every SAVE solver
# steps it checkpoints field, time, step, model and optimizer together. The demo runs it once
# uninterrupted, then again and, once a checkpoint is committed, SIGKILLs rank 1 by pid from this
# script (kill -9, as the OOM killer or a dying node would). The agent restarts both ranks, they
# resume at the saved solver step, and the final field and surrogate are compared byte for byte
# with the uninterrupted run. Then the same for the Fortran version (examples/sim_surrogate/
# fortran), when it is built.
#
# About a minute on a 2-core machine. Usage: bash tools/demo_sim.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
tenax="$build/launcher/tenax"
cxx="$build/examples/sim_surrogate/sim_surrogate"
fortran="$build/examples/sim_surrogate/fortran/sim_surrogate_f"
config=examples/sim_surrogate/surrogate.toml
runs=runs/demo-sim
# The problem: 192 x 192 cells in 2 strips, 3000 solver steps; the surrogate trains every 10
# steps on 64 cells per rank; a checkpoint every 500 steps. A few seconds per run, long enough
# for the kill to land in the middle.
problem=(--nx 192 --ny 192 --steps 3000 --train-every 10 --save-every 500 --batch 64)
export OMP_NUM_THREADS=1  # one intra-op thread per rank: 2 ranks share 2 cores

for f in "$tenax" "$cxx"; do
  [ -x "$f" ] || { echo "demo-sim: $f is missing; run 'make demo-sim' (it builds first)" >&2; exit 1; }
done
rm -rf "$runs"
mkdir -p "$runs"
# The lines worth showing: the solvers' progress (C++ "[sim] ...", Fortran "sim_surrogate_f: ...").
progress='^\[sim\]|^sim_surrogate_f: '
bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }

# The pid of the worker with RANK=$2 among the children of agent $1 (from /proc), or nothing.
worker_pid() {
  local child
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    if tr '\0' '\n' < /proc/"$child"/environ 2>/dev/null | grep -qx "RANK=$2"; then
      echo "$child"
      return
    fi
  done
}

# run_pair LABEL BINARY ARGS...: the uninterrupted run, then the killed one; compares results.
run_pair() {
  local label=$1 binary=$2
  shift 2
  local ref="$runs/$label-uninterrupted" killed="$runs/$label-killed"

  bold "[$label] 1/2 uninterrupted: tenax run --nproc-per-node 2 -- $(basename "$binary") ${*}"
  set +e
  "$tenax" run --nproc-per-node 2 --max-restarts 3 --run-dir "$ref/run" -- \
    "$binary" --output-dir "$ref/train" "$@" 2>&1 | tee "$ref.log" | grep -E "$progress"
  local first=${PIPESTATUS[0]}
  set -e
  [ "$first" -eq 0 ] || { echo "demo-sim: the uninterrupted $label run failed (log: $ref.log)" >&2; exit 1; }

  bold "[$label] 2/2 the same job; rank 1 gets kill -9 once a checkpoint is committed"
  "$tenax" run --nproc-per-node 2 --max-restarts 3 --run-dir "$killed/run" -- \
    "$binary" --output-dir "$killed/train" "$@" > "$killed.log" 2>&1 &
  local agent=$!
  tail -n +1 -f "$killed.log" --pid "$agent" 2>/dev/null | grep --line-buffered -E "$progress|killed by signal|restarting all" &
  local tailer=$!
  local pid=""
  for _ in $(seq 1 3000); do  # up to 5 minutes
    if [ -s "$killed/train/checkpoints/latest" ]; then
      pid=$(worker_pid "$agent" 1)
      [ -n "$pid" ] && break
    fi
    kill -0 "$agent" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$pid" ]; then
    wait "$agent" || true
    echo "demo-sim: the $label run ended before a checkpoint was committed; nothing was killed (log: $killed.log)" >&2
    exit 1
  fi
  bold "    >>> kill -9 $pid  (rank 1; committed checkpoint: $(cat "$killed/train/checkpoints/latest"))"
  kill -9 "$pid"
  local status=0
  wait "$agent" || status=$?
  sleep 0.2
  kill "$tailer" 2>/dev/null || true
  wait "$tailer" 2>/dev/null || true
  [ "$status" -eq 0 ] || { echo "demo-sim: the killed $label run did not finish (exit $status; log: $killed.log)" >&2; exit 1; }

  local restarts resumed
  restarts=$(grep -o '"restarts": *[0-9]*' "$killed/run/agent.json" | grep -o '[0-9]*$' || echo '?')
  resumed=$(grep -o 'resumed at solver step [0-9]*' "$killed.log" | tail -1 | grep -o '[0-9]*$' || echo '?')
  echo
  echo "  [$label] what happened"
  grep -m1 -o 'worker rank [0-9]* (pid [0-9]*[^)]*) was killed by signal [0-9]* ([A-Z]*)' "$killed.log" \
    | sed 's/^/    failure seen by the agent: /' || echo "    failure seen by the agent: (not in the log!)"
  echo "    restarts by the agent:     $restarts"
  echo "    resumed at solver step:    $resumed"
  if cmp -s "$ref/train/result.txt" "$killed/train/result.txt"; then
    echo "    final field + surrogate:   IDENTICAL to the uninterrupted run ($(wc -c < "$ref/train/result.txt") bytes," \
         "cmp $ref/train/result.txt $killed/train/result.txt)"
  else
    echo "    final field + surrogate:   DIFFERENT from the uninterrupted run!"
    cmp "$ref/train/result.txt" "$killed/train/result.txt" || true
    exit 1
  fi
  echo
}

bold "== Tenax demo: a heat-equation solver with an online surrogate, killed with kill -9 and resumed =="
t0=$(date +%s)
run_pair "C++" "$cxx" --config "$config" "${problem[@]}" --log-every 500
if [ -x "$fortran" ]; then
  run_pair "Fortran" "$fortran" "${problem[@]}"
else
  bold "[Fortran] skipped: $fortran is not built (needs gfortran: TENAX_WITH_FORTRAN=ON)"
fi
bold "demo-sim done in $(( $(date +%s) - t0 )) s; logs and results under $runs/"
