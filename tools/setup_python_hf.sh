#!/usr/bin/env bash
# Creates the Python environment of the transformers tests (tests/python/hf_trainer_test.py):
# Debian's python3-torch 1.13 (tools/bootstrap.sh) through a venv made with
# --system-site-packages, plus the wheels of tests/python/requirements-hf.txt, each pinned by
# version and SHA-256 and installed with --no-deps --require-hashes (no resolver, nothing
# unpinned). Idempotent and quiet: a venv stamped with the requirements file's hash is left
# alone, so a second run prints nothing and touches no network.
#
#   bash tools/setup_python_hf.sh     # into ${TENAX_ASSETS:-<repo>/.assets}/venv-hf-torch113
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
assets=${TENAX_ASSETS:-$repo/.assets}
venv=$assets/venv-hf-torch113
wheels=$assets/.wheels
req=$repo/tests/python/requirements-hf.txt
py=/usr/bin/python3  # Debian's interpreter: python3-torch is built for it, whatever python3 is in PATH

die() { echo "setup_python_hf: $*" >&2; exit 1; }

want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.tenax-requirements" 2>/dev/null)" = "$want" ]; then
  exit 0
fi

"$py" -c "import torch" 2>/dev/null || die "$py cannot import torch: run tools/bootstrap.sh (it installs python3-torch)"
"$py" -c "import ensurepip" 2>/dev/null || die "$py has no venv support: run tools/bootstrap.sh (it installs python3-venv)"

log=$(mktemp /tmp/tenax-setup-python-hf.XXXXXX.log)
mkdir -p "$wheels"
# The stamp is written last: a venv left half-made by an interrupted run is made again.
rm -rf "$venv"
{
  "$py" -m venv --system-site-packages "$venv" &&
  "$venv/bin/python" -m pip download --no-deps --require-hashes --only-binary=:all: \
      --disable-pip-version-check -q -d "$wheels" -r "$req" &&
  "$venv/bin/python" -m pip install --no-deps --require-hashes --no-index --find-links "$wheels" \
      --disable-pip-version-check -q -r "$req"
} >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "creating $venv failed (needs PyPI for the first run); full log in $log"; }
rm -f "$log"
"$venv/bin/python" -c '
import sys, torch, transformers, accelerate
sys.exit(0 if torch.__file__.startswith("/usr/lib/python3/") and transformers.__version__ == "4.44.2" else 1)' \
  || die "$venv does not import Debian's torch and transformers 4.44.2; see '$venv/bin/python -m pip list'"
echo "$want" >"$venv/.tenax-requirements"
echo "setup_python_hf: $venv <- Debian's python3-torch + tests/python/requirements-hf.txt (sha256 ok)"
