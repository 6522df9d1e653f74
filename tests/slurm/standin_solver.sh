#!/bin/bash
# A stand-in for a simulation rank launched directly by srun, for the requeue tests that need no
# solver (slurm/tenax-requeue's decisions: a configuration error is never requeued, a failing job
# is requeued at most --max-failures times). It behaves as a rank of examples/sim_surrogate does at
# its edges: rank and world from SLURM_PROCID / SLURM_NTASKS, a step counter saved every 10 steps
# and resumed from (per rank, in OUT), SIGUSR1 → save → exit 3, a final file.
#
#   standin_solver.sh OUT STEPS MODE      MODE: run | fail (every run: exit 1 at step 5) |
#                                               config-error (rank 0 exits 2 at once, the others run on:
#                                               srun ends them, and itself exits 143, not 2)
set -u
out=$1 steps=$2 mode=$3
rank=${SLURM_PROCID:?SLURM_PROCID is not set: start me with srun}
world=${SLURM_NTASKS:?SLURM_NTASKS is not set}
run=${SLURM_RESTART_COUNT:-0}
echo $$ > "$out/rank-$rank-run-$run.pid"
if [ "$mode" = config-error ] && [ "$rank" -eq 0 ]; then
  # Once the last rank runs, so that srun must end it (a rank not yet started when the step is
  # being terminated was seen to run on to completion, and srun then reports 2 itself).
  for _ in $(seq 200); do [ -f "$out/rank-$((world - 1))-run-$run.pid" ] && break; sleep 0.1; done
  echo "standin rank $rank: unknown configuration key 'bogus'" >&2
  exit 2
fi
preempt=0
trap 'preempt=1' USR1
step=0
[ -f "$out/saved-$rank" ] && step=$(cat "$out/saved-$rank")
echo "standin rank $rank of $world: run $run, starting at step $step"
while [ "$step" -lt "$steps" ]; do
  if [ "$preempt" -eq 1 ]; then
    echo "$step" > "$out/saved-$rank"
    echo "standin rank $rank: preempted at step $step"
    exit 3
  fi
  [ "$mode" = fail ] && [ "$step" -eq 5 ] && { echo "standin rank $rank: failing at step 5" >&2; exit 1; }
  step=$((step + 1))
  [ $((step % 10)) -eq 0 ] && echo "$step" > "$out/saved-$rank"
  sleep 0.05 & wait $!
done
echo "$step" > "$out/final-$rank"
echo "standin rank $rank: finished at step $step"
