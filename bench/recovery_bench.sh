#!/usr/bin/env bash
# Recovery benchmark: how fast a 2-rank data-parallel job recovers from a worker SIGKILL, Tenax
# (`tenax run` + examples/synthetic_regression) against torchrun / TorchElastic (Debian's
# python3-torch 1.13, the libtorch build Tenax links, + bench/recovery_torchrun_worker.py: the
# same model, batch and optimizer, DDP over Gloo, torch.save checkpoints). In each round the bench
# SIGKILLs rank 1 after step 150 (the checkpoint of step 100 committed) and measures, from the
# kill: detection (the launcher's first line about the failure), recovery (the first training step
# of the restarted workers), caught up (the pre-kill step done again) and the steps lost; every job
# must then finish with exit status 0. Ratios torchrun/Tenax within a round; medians over rounds
# with their range (the rules of bench/bench_rules.py). torchrun runs four times per round:
# Debian's torch 1.13 at --monitor_interval 5 (its default), 0.1 (the default since PyTorch 2.4)
# and 0.02 (as often as Tenax's agent polls), and the current PyPI torch (.venv-hf-pypi, made by
# bench/setup_hf_peers.sh; left out with a note when missing) at 0.02 (torchrun-pypi-0.02s); and
# torchft (PyPI torchft 0.2.0 in the same venv, bench/setup_torchft.sh: a Lighthouse and one
# replica group per rank, each under its own torchrun; bench/recovery_torchft_worker.py), left out
# with a note when the venv cannot import it.
# --efficiency: step efficiency instead, each system --duration s with a SIGKILL every --fail-every
# s against its own uninterrupted run (bench/recovery_efficiency.py; make bench-recovery-efficiency).
# Details: bench/README.md, "Recovery from a worker SIGKILL".
#
# Usage: bench/recovery_bench.sh [BUILD_DIR] [--rounds R] [--max-steps N] [--save-steps S]
#          [--kill-after-step K]
#          [--systems tenax-in-process,tenax,torchrun-5s,torchrun-0.1s,torchrun-0.02s,torchrun-pypi-0.02s,torchft]
#          [--pypi-python .venv-hf-pypi/bin/python] [--seed S] [--work-dir DIR] [--results FILE]
#          [--efficiency [--duration 300] [--fail-every 30] [--baseline-duration D]] [--max-load L]
#   defaults: build, 5 rounds, 1000 steps, a checkpoint every 100, kill after step 150; results in
#   bench/results/results-recovery-<UTC date>.txt (--efficiency: bench/results/results-recovery-efficiency-<date>.txt),
#   logs under ${TMPDIR:-/tmp}/tenax-recovery-bench/.
# Needs: the build (make build) and python3-torch for /usr/bin/python3 (apt-get, as
# bench/setup_hf_peers.sh does; root or sudo the first time).
# Optional: .venv-hf-pypi (bash bench/setup_hf_peers.sh) for torchrun-pypi-0.02s, and torchft in it
# (bash bench/setup_torchft.sh); without them those systems are left out, with a note in the results.
set -euo pipefail
build=build
args=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --efficiency) args+=("$1"); shift ;;  # the one flag without a value
    -*) args+=("$1"); [ $# -ge 2 ] && [[ $1 != *=* ]] && { args+=("$2"); shift; }; shift ;;
    *) build=$1; shift ;;
  esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3   # Debian's interpreter: python3-torch is built for it

die() { echo "recovery_bench: $*" >&2; exit 2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

for f in "$build/launcher/tenax" "$build/examples/synthetic_regression/synthetic_regression"; do
  [ -x "$f" ] || die "$f is missing; run 'make build' first"
done
if ! "$py" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' >/dev/null 2>&1; then
  echo "recovery_bench: apt-get install python3-torch (Debian's torch 1.13 for $py)"
  as_root apt-get install -y --no-install-recommends python3-torch >/dev/null
  "$py" -c 'import torch' || die "$py still cannot import torch"
fi
build=$(cd "$build" && pwd)
cd "$repo"
exec "$py" bench/recovery_bench.py --build "$build" "${args[@]+"${args[@]}"}"
