#!/usr/bin/env bash
# Soak for the end of a Python DDP job under `tenax run` (not a ctest: minutes, and it looks for a
# rare event). Each round runs hf_trainer_script.py twice with 2 workers: 20 steps, then 60 steps
# resumed from checkpoint-20, each under a 90 s limit. A round whose workers do not all exit in
# time is a hang: the stacks of every worker still alive (gdb, all threads) go to the round's
# directory and the soak fails at the end.
#
# It found torch 1.13's exit deadlock (~ProcessGroupGloo joining a worker thread that waits for
# the GIL; python/tenax/__init__.py exit_worker) in 2 of 36 rounds beside `stress-ng --cpu 2`
# while the script ended with barrier + destroy_process_group; --plain-exit brings that ending
# back to show it.
#
#   tests/python/exit_soak.sh [--rounds N] [--plain-exit] [--out DIR]
#   (build/launcher/tenax, .assets/venv-hf-torch113 or $TENAX_ASSETS/venv-hf-torch113)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=30 out=/tmp/tenax-exit-soak plain=()
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plain-exit) plain=(--plain-exit); shift ;;
    *) echo "usage: $0 [--rounds N] [--plain-exit] [--out DIR]" >&2; exit 2 ;;
  esac
done
python=${TENAX_ASSETS:-$root/.assets}/venv-hf-torch113/bin/python
tenax=${TENAX_BUILD:-$root/build}/launcher/tenax
for f in "$python" "$tenax"; do
  [[ -x $f ]] || { echo "exit_soak: $f is missing (make build assets)" >&2; exit 2; }
done
command -v gdb > /dev/null || { echo "exit_soak: gdb is missing (apt-get install gdb)" >&2; exit 2; }
export PATH=$(dirname "$python"):$PATH GLOO_SOCKET_IFNAME=lo PYTHONPATH=$root/python
hung=0
for round in $(seq 1 "$rounds"); do
  dir=$out/round-$round
  rm -rf "$dir" && mkdir -p "$dir"
  run() {  # $1: log name, then the script's flags
    local log=$1; shift
    (cd "$dir" && timeout -s KILL 90 "$tenax" run --nproc_per_node=2 --max_restarts=0 \
       "$here/hf_trainer_script.py" --out "$dir/out" --save-steps 10 "${plain[@]}" "$@" > "$dir/$log" 2>&1) &
    local agent=$! waited=0
    while kill -0 $agent 2> /dev/null && ((waited < 80)); do sleep 1; waited=$((waited + 1)); done
    if kill -0 $agent 2> /dev/null; then
      for pid in $(pgrep -f "hf_trainer_script.py --out $dir/out"); do
        gdb -p "$pid" -batch -ex "thread apply all bt" > "$dir/stacks-$pid.txt" 2>&1
      done
      wait $agent
      echo "round $round: HUNG in $log (stacks: $dir/stacks-*.txt)"
      return 1
    fi
    wait $agent
  }
  if run first.log --steps 20 && run resumed.log --steps 60 --step-sleep 0.02; then
    echo "round $round: ok"
  else
    hung=$((hung + 1))
  fi
done
echo "exit_soak: $hung of $rounds round(s) hung"
((hung == 0))
