#!/usr/bin/env bash
# Soak of the Slurm requeue paths (issue 12): the preemption, shipped-template and time-limit
# tests of tests/slurm, each run SOAK_RUNS times (20) on the local Slurm cluster, one process per
# run, round-robin so that a failure shows which test and which iteration. Prints the pass count
# per test and exits 1 if any run failed (2 if it could not start). Not part of `make test`.
#
#   make soak-slurm                      # or: bash tools/soak_slurm.sh [BUILD_DIR]
#   SOAK_RUNS=3 make soak-slurm          # a short one
#
# The cluster is brought up and taken down as the ctest fixture tenax_slurm_cluster does
# (shared/slurm/local-cluster.sh, the state directory and port of the CMake cache), so it must not
# run beside `ctest -L slurm`. A failed run's gtest output (with slurm.out, `scontrol show job` and
# slurmctld's lines about the job) is kept in BUILD_DIR/soak-slurm/; the whole run takes about
# SOAK_RUNS x 95 s (the time-limit test alone takes ~65 s: it waits up to 30 s for Slurm's warning).
set -uo pipefail

build=${1:-build}
runs=${SOAK_RUNS:-20}
tests=(
  SlurmJob.PreemptedJobCheckpointsRequeuesAndResumes
  SlurmJob.TemplatePassesTheBatchWarningToTheAgentsAndTheJobResumes
  SlurmJob.TimeLimitWarningCheckpointsRequeuesAndResumes
)

cache="$build/CMakeCache.txt"
binary="$build/tests/slurm/slurm_test"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
if [ ! -f "$cache" ] || [ ! -x "$binary" ]; then
  echo "soak-slurm: $binary not built (run make build, or give the build directory: $0 BUILD_DIR)" >&2
  exit 2
fi
cluster=$(cache_value TENAX_SLURM_LOCAL_CLUSTER)
state=$(cache_value TENAX_SLURM_STATE_DIR)
port=$(cache_value TENAX_SLURM_PORT)
if [ -z "$cluster" ] || [ ! -x "$cluster" ] || [ -z "$state" ]; then
  echo "soak-slurm: the CMake cache of $build names no local-cluster.sh (TENAX_SLURM_LOCAL_CLUSTER='$cluster');" \
    "configure with -DTENAX_SLURM_LOCAL_CLUSTER=PATH/shared/slurm/local-cluster.sh" >&2
  exit 2
fi
logs="$build/soak-slurm"
rm -rf "$logs" && mkdir -p "$logs"

pid=""
# Stopped early (Ctrl-C): end the running test first, then take the cluster down.
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; "$cluster" down "$state" > "$logs/cluster-down.log" 2>&1' EXIT
trap 'exit 130' INT TERM
if ! SLURM_LOCAL_PORT=$port "$cluster" up "$state" > "$logs/cluster-up.log" 2>&1; then
  cat "$logs/cluster-up.log" >&2
  echo "soak-slurm: the local Slurm cluster did not come up (log above)" >&2
  exit 2
fi

declare -A passed failed seconds
for t in "${tests[@]}"; do passed[$t]=0; failed[$t]=0; seconds[$t]=""; done
started=$SECONDS
for ((i = 1; i <= runs; i++)); do
  for t in "${tests[@]}"; do
    log="$logs/${t#SlurmJob.}-$i.log"
    t0=$SECONDS
    "$binary" --gtest_filter="$t" > "$log" 2>&1 &
    pid=$!
    wait "$pid"
    rc=$?
    took=$((SECONDS - t0))
    pid_done=$pid
    pid=""
    rmdir "/tmp/tenax-slurm-$pid_done" 2> /dev/null  # the test's empty base directory (kept if it failed)
    if [ "$rc" -eq 0 ] && grep -q "^\[  PASSED  \] 1 test" "$log"; then
      passed[$t]=$((passed[$t] + 1))
      rm -f "$log"
      verdict=ok
    else
      failed[$t]=$((failed[$t] + 1))
      verdict="FAILED (exit $rc; output: $log)"
    fi
    seconds[$t]+="$took "
    printf '[%s] run %d/%d %s: %s, %d s\n' "$(date -u +%H:%M:%S)" "$i" "$runs" "${t#SlurmJob.}" "$verdict" "$took"
  done
done

echo
echo "soak-slurm: $runs runs per test, $(((SECONDS - started) / 60)) min in all"
total_failed=0
for t in "${tests[@]}"; do
  read -r min max < <(tr ' ' '\n' <<< "${seconds[$t]}" | sed '/^$/d' | sort -n | sed -n '1p;$p' | xargs)
  printf '  %-66s %2d/%d passed (%d s .. %d s a run)\n' "${t#SlurmJob.}" "${passed[$t]}" "$runs" "$min" "${max:-$min}"
  total_failed=$((total_failed + failed[$t]))
done
if [ "$total_failed" -ne 0 ]; then
  echo "soak-slurm: $total_failed of $((runs * ${#tests[@]})) runs FAILED (their output is in $logs/)"
  exit 1
fi
echo "soak-slurm: all $((runs * ${#tests[@]})) runs passed"
