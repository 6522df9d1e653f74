#!/usr/bin/env bash
# Adds torchft (PyPI `torchft`, the peer of bench/recovery_bench.py's `torchft` system) to the PyPI
# torch venv .venv-hf-pypi that bench/setup_hf_peers.sh makes (torchft needs torch >= 2.7; Debian's
# torch is 1.13). The wheels of bench/requirements-torchft.txt, each pinned by version and SHA-256,
# are downloaded with --no-deps --require-hashes into a temporary directory and installed from
# there with --no-index: no resolver, nothing unpinned. Idempotent and quiet: a venv stamped with
# the requirements file's hash is left alone, so a second run prints one line and touches no network.
#
#   bash bench/setup_torchft.sh        # after: bash bench/setup_hf_peers.sh pypi
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.venv-hf-pypi
req=$repo/bench/requirements-torchft.txt

die() { echo "setup_torchft: $*" >&2; exit 1; }

[ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null \
  || die "$venv cannot import torch: run 'bash bench/setup_hf_peers.sh pypi' first (torchft needs torch >= 2.7)"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ "$(cat "$venv/.tenax-torchft" 2>/dev/null)" = "$want" ] && "$venv/bin/python" -c 'import torchft' 2>/dev/null; then
  echo "setup_torchft: torchft ready in $venv"
  exit 0
fi
wheels=$(mktemp -d /tmp/tenax-torchft-wheels.XXXXXX)
log=$wheels.log
trap 'rm -rf "$wheels"' EXIT
{
  "$venv/bin/python" -m pip download --no-deps --require-hashes --only-binary=:all: \
      --disable-pip-version-check -q -d "$wheels" -r "$req" &&
  "$venv/bin/python" -m pip install --no-deps --require-hashes --no-index --find-links "$wheels" \
      --disable-pip-version-check -q -r "$req"
} >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "installing torchft into $venv failed (needs PyPI the first time); full log in $log"; }
rm -f "$log"
"$venv/bin/python" -c '
import sys, torchft, torchft._torchft
from importlib.metadata import version
sys.exit(0 if version("torchft") == "0.2.0" else 1)' \
  || die "$venv does not import torchft 0.2.0 after the install; see '$venv/bin/python -m pip list'"
[ -x "$venv/bin/torchft_lighthouse" ] || die "$venv/bin/torchft_lighthouse is missing after the install"
echo "$want" >"$venv/.tenax-torchft"
echo "setup_torchft: $venv <- bench/requirements-torchft.txt (torchft 0.2.0, sha256 ok)"
