#!/usr/bin/env bash
# Fetches the libtorch of the CUDA build flavour (make build-cuda): the wheels pinned with their
# SHA-256 in tools/requirements-cuda-libtorch.txt, unpacked side by side as pip would install
# them, so that the RPATH libtorch carries ($ORIGIN/../../nvidia/<lib>/lib) finds NCCL,
# cuSPARSELt, NVSHMEM, cuFile and the CUDA runtime with no LD_LIBRARY_PATH. Idempotent and silent
# when the unpacked tree matches the requirements file; ~1 GB download once (about 15 s at
# 100 MB/s).
#
#   bash tools/setup_cuda_libtorch.sh      # prints the prefix on stdout
#
# Layout (CMakeLists.txt and the Makefile rely on it):
#   $TENAX_ASSETS/libtorch-cuda/torch/{lib,include,share/cmake/Torch}
#   $TENAX_ASSETS/libtorch-cuda/nvidia/{nccl,cusparselt,nvshmem,cu13}/lib
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
assets=${TENAX_ASSETS:-$repo/.assets}
req=$repo/tools/requirements-cuda-libtorch.txt
prefix=$assets/libtorch-cuda
python=${TENAX_PYTHON:-python3}

die() { echo "setup_cuda_libtorch: $*" >&2; exit 1; }

# The stamp covers this script too: a change in what is unpacked re-unpacks (no new download).
stamp=$(cat "$req" "$0" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$prefix/.fetched-from" 2>/dev/null)" = "$stamp" ]; then
  echo "$prefix"
  exit 0
fi

wheels=$assets/.wheels-cuda
mkdir -p "$wheels"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "setup_cuda_libtorch: downloading the pinned torch CUDA and nvidia wheels (~1 GB) into $wheels" >&2
# The wheels are for CPython 3.11 on manylinux x86_64 whatever interpreter runs pip: only the
# C++ libraries inside are used. Several --platform values because the nvidia wheels are tagged
# manylinux2014 / manylinux_2_18 / manylinux_2_27 (cuFile) and torch manylinux_2_28.
if ! "$python" -m pip download --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check -q \
       --implementation cp --python-version 3.11 --abi cp311 --abi none \
       --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_18_x86_64 \
       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
       -d "$wheels" -r "$req" >"$log" 2>&1; then
  cat "$log" >&2
  die "pip download failed (needs PyPI and '$python -m pip'; set TENAX_PYTHON to another interpreter)"
fi

# Unpack into a fresh directory, then swap it in: an interrupted run leaves no half tree behind
# a valid stamp.
tmp=$prefix.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
"$python" - "$req" "$wheels" "$tmp" <<'PY'
import glob, hashlib, os, re, sys, zipfile
req, wheels, dest = sys.argv[1:]
for line in open(req):
    line = line.split("#")[0].strip()
    if not line:
        continue
    m = re.match(r"([\w.-]+)==([\w.]+)\s+--hash=sha256:([0-9a-f]{64})", line)
    if not m:
        sys.exit(f"{req}: cannot parse '{line}'")
    name, version, sha = m.groups()
    found = glob.glob(os.path.join(wheels, f"{name.replace('-', '_')}-{version}-*.whl"))
    whl = next((f for f in found if hashlib.sha256(open(f, "rb").read()).hexdigest() == sha), None)
    if whl is None:
        sys.exit(f"no wheel of {name}=={version} with sha256 {sha} in {wheels}; delete it and run again")
    # torch: only the C++ parts (lib, include, share/cmake); the nvidia wheels: their libraries.
    keep = ("torch/lib/", "torch/include/", "torch/share/") if name == "torch" else ("nvidia/",)
    # Left out: torch's bundled fmt (v12, header-only). First on the include path, it would
    # shadow Debian's fmt (v9) that spdlog and libfmt.so are built with; the torch headers Tenax
    # includes do not use fmt (only c10d, the profiler and TunableOp's do).
    drop = ("torch/include/fmt/",)
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            if info.is_dir() or not info.filename.startswith(keep) or info.filename.startswith(drop):
                continue
            if info.filename.startswith("/") or ".." in info.filename.split("/"):
                sys.exit(f"{whl}: refusing member path {info.filename}")
            z.extract(info, dest)
PY
echo "$stamp" >"$tmp/.fetched-from"
rm -rf "$prefix"
mv "$tmp" "$prefix"
# The wheels (~1 GB) are not needed once unpacked; a CI machine's disk is not large (a build
# with a full disk fails in the linker). A change of the requirements downloads them again.
rm -rf "$wheels"
echo "setup_cuda_libtorch: $prefix <- $(basename "$req")" >&2
echo "$prefix"
