#!/usr/bin/env bash
# Creates the two Python Hugging Face peers of bench/finetune_bench.sh (DESIGN.md section 6),
# in the repository root (gitignored). Idempotent: a venv that already imports the pinned
# versions is left alone, so a second run prints one line per peer and downloads nothing.
#
#   .venv-hf-debian  like-for-like: Debian's python3-torch 1.13.1 (the same libtorch build Tenax
#                    links) via --system-site-packages + transformers 4.44.2 + accelerate 0.34.2
#                    (bench/requirements-hf-debian.txt), and datasets 2.21.0 + evaluate 0.4.2 for
#                    run_classification.py (bench/requirements-hf-classification.txt, with hashes)
#   .venv-hf-pypi    what a user would pick instead: current PyPI torch + transformers +
#                    accelerate, pinned in bench/requirements-hf-pypi.txt (PyPI's Linux x86_64
#                    torch wheel pulls the CUDA nvidia-* wheels: several GB, unused on CPU)
#
#   bash bench/setup_hf_peers.sh [debian|pypi|all]      (default all; root or sudo for apt-get)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
which=${1:-all}
py=/usr/bin/python3   # Debian's interpreter for both peers (python3-torch is built for it)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
die() { echo "setup_hf_peers: $*" >&2; exit 1; }

# versions_ok VENV PY_SNIPPET: the venv exists and the snippet exits 0 in it.
versions_ok() { [ -x "$1/bin/python" ] && "$1/bin/python" -c "$2" >/dev/null 2>&1; }

setup_debian() {
  local venv=$repo/.venv-hf-debian
  local check='
import torch, transformers, accelerate, datasets, evaluate, sys
ok = (torch.__version__.startswith("1.13.") and torch.__file__.startswith("/usr/lib/python3/")
      and transformers.__version__ == "4.44.2" and accelerate.__version__ == "0.34.2"
      and datasets.__version__ == "2.21.0" and evaluate.__version__ == "0.4.2")
sys.exit(0 if ok else 1)'
  if versions_ok "$venv" "$check"; then
    echo "setup_hf_peers: .venv-hf-debian ready"; return
  fi
  local missing=()
  for p in python3-torch python3-venv python3-pip python3-xxhash python3-numpy python3-psutil python3-yaml; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup_hf_peers: apt-get install ${missing[*]}"
    as_root apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
  fi
  [ -x "$venv/bin/python" ] || "$py" -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$repo/bench/requirements-hf-debian.txt"
  # run_classification.py's datasets and evaluate, every wheel checked against its pinned hash. A
  # second install, after the first: datasets 2.21.0 needs an older fsspec than the goldens' pin.
  "$venv/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$repo/bench/requirements-hf-classification.txt"
  versions_ok "$venv" "$check" || die ".venv-hf-debian does not import Debian's torch 1.13 (it reports 1.13.0a0) + transformers 4.44.2 + accelerate 0.34.2 + datasets 2.21.0 + evaluate 0.4.2; see '$venv/bin/pip list'"
  echo "setup_hf_peers: .venv-hf-debian <- Debian python3-torch + bench/requirements-hf-debian.txt + bench/requirements-hf-classification.txt"
}

setup_pypi() {
  local venv=$repo/.venv-hf-pypi req=$repo/bench/requirements-hf-pypi.txt
  if [ -s "$req" ] && versions_ok "$venv" "
import sys
from importlib.metadata import version
pins = [l.split('#')[0].strip() for l in open('$req')]
sys.exit(0 if all(version(n) == v for n, v in (p.split('==') for p in pins if p)) else 1)"; then
    echo "setup_hf_peers: .venv-hf-pypi ready"; return
  fi
  local avail_kb
  avail_kb=$(df -Pk "$repo" | awk 'NR == 2 { print $4 }')
  [ "$avail_kb" -gt $((8 * 1024 * 1024)) ] \
    || die "less than 8 GB free on $(df -P "$repo" | awk 'NR == 2 { print $6 }'): PyPI's torch wheel with its CUDA wheels needs about 5 GB"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
  if [ -s "$req" ]; then
    # The pins of a previous run: the same versions again.
    "$venv/bin/pip" install -q -r "$req"
  else
    # First run: today's releases, then pin them.
    "$venv/bin/pip" install -q torch transformers accelerate
    {
      echo "# Current PyPI peer for bench/finetune_bench.sh, pinned as resolved by bench/setup_hf_peers.sh"
      echo "# on $(date -u +%Y-%m-%d) (delete this file and .venv-hf-pypi to move to newer releases)."
      "$venv/bin/pip" freeze --all | grep -Ev '^(pip|setuptools|wheel)=='
    } >"$req"
  fi
  echo "setup_hf_peers: .venv-hf-pypi <- $(grep -E '^(torch|transformers|accelerate)==' "$req" | tr '\n' ' ')"
}

case $which in
  debian) setup_debian ;;
  pypi) setup_pypi ;;
  all) setup_debian; setup_pypi ;;
  *) die "usage: bench/setup_hf_peers.sh [debian|pypi|all]" ;;
esac
