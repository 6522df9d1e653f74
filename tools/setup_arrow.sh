#!/usr/bin/env bash
# Fetches Apache Arrow's C++ libraries for the Parquet text reader (sdk/src/text/parquet_records.cpp):
# the pyarrow wheel pinned with its SHA-256 in tools/requirements-arrow.txt, of which only the
# C++ headers and libarrow/libparquet are unpacked. `make configure` runs it and passes the
# prefix to CMake (TENAX_ARROW_PREFIX); so do `make build-cuda` and `make fuzz`. Idempotent and
# silent when the unpacked tree matches the requirements file; ~48 MB download once.
#
#   bash tools/setup_arrow.sh      # prints the prefix on stdout
#
# Layout (cmake/TenaxArrow.cmake relies on it):
#   $TENAX_ASSETS/arrow/include/{arrow,parquet}/...
#   $TENAX_ASSETS/arrow/lib/{libarrow,libparquet}.so.<so version>   (RUNPATH $ORIGIN: side by side)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
assets=${TENAX_ASSETS:-$repo/.assets}
req=$repo/tools/requirements-arrow.txt
prefix=$assets/arrow
python=${TENAX_PYTHON:-python3}

die() { echo "setup_arrow: $*" >&2; exit 1; }

# The stamp covers this script too: a change in what is unpacked re-unpacks.
stamp=$(cat "$req" "$0" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$prefix/.fetched-from" 2>/dev/null)" = "$stamp" ]; then
  echo "$prefix"
  exit 0
fi

wheels=$assets/.wheels-arrow
mkdir -p "$wheels"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "setup_arrow: downloading the pinned pyarrow wheel (~48 MB) into $wheels" >&2
# The wheel for CPython 3.11 on manylinux_2_28 x86_64 whatever interpreter runs pip: only the
# C++ libraries inside are used.
if ! "$python" -m pip download --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check -q \
       --implementation cp --python-version 3.11 --abi cp311 --platform manylinux_2_28_x86_64 \
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
import glob, hashlib, os, re, shutil, sys, zipfile
req, wheels, dest = sys.argv[1:]
lines = [l.split("#")[0].strip() for l in open(req)]
lines = [l for l in lines if l]
if len(lines) != 1:
    sys.exit(f"{req}: expected one pinned pyarrow line, found {len(lines)}")
m = re.match(r"pyarrow==([\w.]+)\s+--hash=sha256:([0-9a-f]{64})$", lines[0])
if not m:
    sys.exit(f"{req}: cannot parse '{lines[0]}'")
version, sha = m.groups()
found = glob.glob(os.path.join(wheels, f"pyarrow-{version}-*.whl"))
whl = next((f for f in found if hashlib.sha256(open(f, "rb").read()).hexdigest() == sha), None)
if whl is None:
    sys.exit(f"no wheel of pyarrow=={version} with sha256 {sha} in {wheels}; delete it and run again")
libs = re.compile(r"pyarrow/(lib(?:arrow|parquet)\.so\.\d+)$")
count = {"include": 0, "lib": 0}
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        name = info.filename
        if info.is_dir() or name.startswith("/") or ".." in name.split("/"):
            continue
        lib = libs.match(name)
        if lib:
            out, kind = os.path.join(dest, "lib", lib.group(1)), "lib"
        elif name.startswith(("pyarrow/include/arrow/", "pyarrow/include/parquet/")) and \
                not name.startswith("pyarrow/include/arrow/python/"):  # needs Python.h; unused
            out, kind = os.path.join(dest, name[len("pyarrow/"):]), "include"
        else:
            continue
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        count[kind] += 1
if count["lib"] != 2 or not os.path.exists(os.path.join(dest, "include/parquet/arrow/reader.h")):
    sys.exit(f"{whl}: expected libarrow, libparquet and include/parquet/arrow/reader.h (the wheel's layout changed?)")
PY
echo "$stamp" >"$tmp/.fetched-from"
rm -rf "$prefix"
mv "$tmp" "$prefix"
rm -rf "$wheels"
echo "setup_arrow: $prefix <- $(basename "$req")" >&2
echo "$prefix"
