#!/usr/bin/env bash
# `make bench`: the checkpoint benchmark, bench/checkpoint_bench.py (its docstring says what it
# measures: Tenax save, cold loads, async stall and reshard load against dd on the same disk, the
# systems in a shuffled order per round, ratios within a round, medians with their range).
# Usage: bench/checkpoint_bench.sh [BUILD_DIR [WORK_DIR]] [--rounds R] [--seed S] [--results FILE]
#   WORK_DIR must be on the disk to test (default BUILD_DIR/bench-work).
set -euo pipefail
build=build
work=()
if [ $# -gt 0 ] && [[ $1 != -* ]]; then build=$1; shift; fi
if [ $# -gt 0 ] && [[ $1 != -* ]]; then work=(--work-dir "$1"); shift; fi
exec python3 "$(dirname "$0")/checkpoint_bench.py" --build "$build" "${work[@]+"${work[@]}"}" "$@"
