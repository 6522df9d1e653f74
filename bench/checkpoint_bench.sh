#!/usr/bin/env bash
# Checkpoint benchmark (issue: checkpoints that never lose a run). One invocation measures, on
# the same disk:
#   dd write of the same bytes with fsync, and dd cold read   (the baseline)
#   Tenax synchronous save, async stall, cold load, N→M reshard load
# and prints each Tenax figure as a ratio against its baseline:
#   save throughput / dd write     (target >= 0.8)
#   load throughput / dd read      (target >= 0.8)
#   async stall / sync save time   (target <= 0.05)
#   reshard load / same-size load  (target <= 1.2)
# Usage: bench/checkpoint_bench.sh [BUILD_DIR] [WORK_DIR]   (WORK_DIR must be on the disk to test)
set -euo pipefail
build=${1:-build}
work=${2:-$build/bench-work}
bin="$build/bench/checkpoint_bench"
[ -x "$bin" ] || { echo "checkpoint_bench: $bin is missing; run 'make build' first" >&2; exit 2; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
df -h "$work" | tail -1 | awk '{print "disk: " $1 " mounted on " $6 ", " $4 " free"}'

drop() { sync; if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo yes; else echo no; fi; }

echo "== Tenax (checkpoint_bench) =="
out=$("$bin" "$work" --reshard-writers 4)
echo "$out"
field() { echo "$out" | awk -v k="$1" '$1 == k { print $'"$2"' }'; }
bytes=$(field save_sync 3)

echo "== dd baseline: $bytes bytes =="
blocks=$(( (bytes + 16777215) / 16777216 ))
dd_w=$( { /usr/bin/time -f %e dd if=/dev/zero of="$work/dd.bin" bs=16M count=$blocks conv=fsync status=none; } 2>&1 | tail -1)
cold=$(drop)
dd_r=$( { /usr/bin/time -f %e dd if="$work/dd.bin" of=/dev/null bs=16M status=none; } 2>&1 | tail -1)
dd_bytes=$((blocks * 16777216))
rm -f "$work/dd.bin"
echo "dd write ${dd_w} s, dd cold read ${dd_r} s (page cache dropped: $cold)"

awk -v b="$bytes" -v db="$dd_bytes" -v ddw="$dd_w" -v ddr="$dd_r" \
    -v save="$(field save_sync 2)" -v stall="$(field async_stall 2)" \
    -v load="$(field load_same 2)" -v reshard="$(field load_reshard 2)" -v cold="$(field cache_dropped 2)" '
BEGIN {
  mb = 1e6
  printf "\n%-34s %10s %10s %8s %s\n", "measure", "Tenax", "baseline", "ratio", "target"
  printf "%-34s %8.0f MB/s %8.0f MB/s %8.2f %s\n", "save throughput vs dd write+fsync", b/save/mb, db/ddw/mb, (b/save)/(db/ddw), ">= 0.8"
  printf "%-34s %8.0f MB/s %8.0f MB/s %8.2f %s\n", "load throughput vs dd cold read", b/load/mb, db/ddr/mb, (b/load)/(db/ddr), ">= 0.8"
  printf "%-34s %10.3f s %8.3f s %8.3f %s\n", "async stall vs sync save", stall, save, stall/save, "<= 0.05"
  printf "%-34s %10.3f s %8.3f s %8.2f %s\n", "4-rank ckpt load vs 1-rank load", reshard, load, reshard/load, "<= 1.2"
  if (cold != 1) print "note: the page cache could not be dropped (not root): loads were warm"
}'
rm -rf "$work"
