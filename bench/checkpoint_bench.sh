#!/usr/bin/env bash
# Checkpoint benchmark (issue: checkpoints that never lose a run). One invocation measures, on
# the same disk:
#   dd write of the same bytes with fsync, and dd cold read   (the baseline)
#   Tenax synchronous save, async stall in a real BERT-base training step, cold loads, N→M
#   reshard load (what each measures: bench/checkpoint_bench.cpp)
# and prints each Tenax figure as a ratio against its baseline:
#   save throughput / dd write                       (target >= 0.8)
#   load throughput (in place, as a resume) / dd read (target >= 0.8); into new memory: shown
#   async stall / sync save time                     (target <= 0.05)
#   reshard load / same-size load                    (target <= 1.2)
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

rounds=${ROUNDS:-5}
# The disk of a VM swings a lot from one minute to the next, so each round measures Tenax and
# dd back to back, and the ratios reported are the medians of the rounds' ratios.
ratios=()
for round in $(seq 1 "$rounds"); do
  echo "== round $round of $rounds: Tenax (checkpoint_bench) =="
  out=$("$bin" "$work" --reshard-writers 4 2>/dev/null)
  echo "$out" | sed 's/^/  /'
  field() { echo "$out" | awk -v k="$1" '$1 == k { print $'"$2"' }'; }
  bytes=$(field save_sync 3)
  blocks=$(( (bytes + 16777215) / 16777216 ))
  # An untimed write of the same size first, as checkpoint_bench does before its save.
  dd if=/dev/zero of="$work/dd.bin" bs=16M count=$blocks conv=fsync status=none && rm -f "$work/dd.bin"
  dd_w=$( { /usr/bin/time -f %e dd if=/dev/zero of="$work/dd.bin" bs=16M count=$blocks conv=fsync status=none; } 2>&1 | tail -1)
  cold=$(drop)
  dd_r=$( { /usr/bin/time -f %e dd if="$work/dd.bin" of=/dev/null bs=16M status=none; } 2>&1 | tail -1)
  dd_bytes=$((blocks * 16777216))
  rm -f "$work/dd.bin"
  echo "  dd: $dd_bytes bytes, write+fsync ${dd_w} s, cold read ${dd_r} s (page cache dropped: $cold)"
  ratios+=("$(awk -v b="$bytes" -v db="$dd_bytes" -v ddw="$dd_w" -v ddr="$dd_r" \
      -v save="$(field save_sync 2)" -v stall="$(field async_stall 2)" \
      -v load="$(field load_same 2)" -v reshard="$(field load_reshard 2)" -v fresh="$(field load_fresh 2)" \
      -v plain="$(field step_plain 2)" -v with_save="$(field step_with_save 2)" \
      'BEGIN { printf "%.4f %.4f %.4f %.4f %.0f %.0f %.0f %.0f %.4f %.4f %.4f %.0f %.3f %.3f %.4f %.4f %.4f %.4f %.4f %.4f %.0f %.0f", (b/save)/(db/ddw), (b/load)/(db/ddr), stall/save, reshard/load, b/save/1e6, db/ddw/1e6, b/load/1e6, db/ddr/1e6, stall, save, (b/fresh)/(db/ddr), b/fresh/1e6, plain, with_save, with_save/plain, load, ddw, ddr, fresh, reshard, b, db }')")
done

printf '%s\n' "${ratios[@]}" | awk -v n="$rounds" '
function best(col,   i, m) {
  m = row[1, col]
  for (i = 2; i <= n; ++i) if (row[i, col] < m) m = row[i, col]
  return m
}
function median(col,   i, v, tmp, j, k) {
  for (i = 1; i <= n; ++i) v[i] = row[i, col]
  for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
  return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{ for (c = 1; c <= NF; ++c) row[NR, c] = $c }
END {
  printf "\nmedians of %d rounds\n%-36s %-26s %7s  %s\n", n, "measure", "Tenax vs baseline", "ratio", "target"
  printf "%-36s %5.0f vs %5.0f MB/s         %7.2f  >= 0.8\n", "save throughput vs dd write+fsync", median(5), median(6), median(1)
  printf "%-36s %5.0f vs %5.0f MB/s         %7.2f  >= 0.8\n", "load (cold, verified) vs dd cold read", median(7), median(8), median(2)
  printf "%-36s %5.0f vs %5.0f MB/s         %7.2f  (shown)\n", "load into new memory vs dd cold read", median(12), median(8), median(11)
  printf "%-36s %5.3f s vs %5.3f s         %7.3f  <= 0.05\n", "async stall vs synchronous save", median(9), median(10), median(3)
  printf "%-36s %5.2f s vs %5.2f s           %7.3f  (shown)\n", "training step with async save vs without", median(14), median(13), median(15)
  printf "%-36s %-26s %7.2f  <= 1.2\n", "4-rank checkpoint load vs 1-rank", "(cold loads, same bytes)", median(4)
  # The VM disk swings by 2-4x between minutes (first writes to fresh blocks especially), so
  # the best time of each side over the rounds is shown too (as timeit does).
  b = best(21); db = best(22)
  printf "\nbest of %d rounds, each side\n", n
  printf "%-36s %5.0f vs %5.0f MB/s         %7.2f  >= 0.8\n", "save throughput vs dd write+fsync", b/best(10)/1e6, db/best(17)/1e6, (b/best(10))/(db/best(17))
  printf "%-36s %5.0f vs %5.0f MB/s         %7.2f  >= 0.8\n", "load (cold, in place) vs dd cold read", b/best(16)/1e6, db/best(18)/1e6, (b/best(16))/(db/best(18))
  printf "%-36s %5.0f vs %5.0f MB/s         %7.2f  (shown)\n", "load into new memory vs dd cold read", b/best(19)/1e6, db/best(18)/1e6, (b/best(19))/(db/best(18))
  printf "%-36s %5.3f s vs %5.3f s         %7.3f  <= 0.05\n", "async stall vs synchronous save", best(9), best(10), best(9)/best(10)
  printf "%-36s %-26s %7.2f  <= 1.2\n", "4-rank checkpoint load vs 1-rank", "(cold loads, same bytes)", best(20)/best(16)
}'
[ "$cold" = yes ] || echo "note: the page cache could not be dropped (not root): loads were warm"
rm -rf "$work"
