#!/usr/bin/python3
"""Checkpoints vs dd on the same disk: save, cold loads, async stall, reshard load (BERT-base state).

Each round runs two systems, in an order shuffled per round from a printed seed (bench/bench_rules.py):
  tenax  build/bench/checkpoint_bench WORK --reshard-writers 4 (bench/checkpoint_bench.cpp says what
         each of its lines measures: synchronous save, async stall in a training step, cold loads
         in place and into new memory, a 4-rank checkpoint loaded by one rank)
  dd     an untimed dd write of the same bytes (the warm-up checkpoint_bench gives its own save),
         then dd write + fsync and, with the page cache dropped, dd cold read
Every figure is a ratio taken within one round, so a minute in which the VM's disk is slow hits
both sides:
  save throughput / dd write+fsync                  (target >= 0.8)
  cold load, in place (a resume) / dd cold read     (target >= 0.8); into new memory: shown
  async stall / synchronous save                    (target <= 0.05)
  training step with an async save / without        (shown)
  4-rank-written load / 1-rank-written load         (target <= 1.2)
reported as the median over rounds with the range. A run that starts with the machine's load above
its core count is run again. The bytes dd writes are the state's, read once from checkpoint_bench's
first line before the rounds (`--save-repeats 1`: one untimed save, which also warms the disk).

Usage: bench/checkpoint_bench.py [--build build] [--work-dir DIR (on the disk to test)] [--rounds 5]
                                 [--seed S] [--results FILE]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

SYSTEMS = ("tenax", "dd")
BLOCK = 16 << 20  # dd's block size


def drop_caches() -> bool:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def checkpoint_bench(a, *extra):
    """Runs checkpoint_bench; returns {name: (seconds, bytes)} of its 'name seconds [bytes]' lines."""
    p = subprocess.run([a.bin, a.work_dir, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"checkpoint_bench: {a.bin} failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
    out = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if line.startswith("state "):
            out["state"] = (0.0, int(f[1]))
        elif len(f) >= 2 and re.fullmatch(r"[\d.]+", f[1]):
            out[f[0]] = (float(f[1]), int(f[2]) if len(f) > 2 else 0)
    return out


def run_tenax(a):
    shutil.rmtree(a.work_dir, ignore_errors=True)
    os.makedirs(a.work_dir)
    out = checkpoint_bench(a, "--reshard-writers", "4")
    shutil.rmtree(a.work_dir, ignore_errors=True)
    t = {k: v[0] for k, v in out.items()}
    return {"bytes": out["save_sync"][1], "save": t["save_sync"], "stall": t["async_stall"], "load": t["load_same"],
            "fresh": t["load_fresh"], "reshard": t["load_reshard"], "step_plain": t["step_plain"],
            "step_with_save": t["step_with_save"], "cold": t["cache_dropped"] == 1}


def run_dd(a):
    os.makedirs(a.work_dir, exist_ok=True)
    path = os.path.join(a.work_dir, "dd.bin")
    write = ["dd", "if=/dev/zero", f"of={path}", f"bs={BLOCK}", f"count={a.blocks}", "conv=fsync", "status=none"]
    subprocess.run(write, check=True)  # untimed: the first write to never-used blocks is slower
    os.remove(path)
    t0 = time.monotonic()
    subprocess.run(write, check=True)
    write_s = time.monotonic() - t0
    cold = drop_caches()
    t0 = time.monotonic()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={BLOCK}", "status=none"], check=True)
    read_s = time.monotonic() - t0
    os.remove(path)
    return {"bytes": a.blocks * BLOCK, "write": write_s, "read": read_s, "cold": cold}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--work-dir", default=None, help="on the disk to test (default BUILD/bench-work)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order (default: random)")
    p.add_argument("--results", default=None, help="results file (default bench/results/results-checkpoint-<UTC date>.txt)")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.bin = os.path.join(a.build, "bench", "checkpoint_bench")
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"checkpoint_bench: {a.bin} is missing; run 'make build' first")
    # A directory of its own inside the one given: every run starts by removing it.
    a.work_dir = os.path.join(os.path.abspath(a.work_dir or os.path.join(a.build, "bench-work")), "checkpoint-bench")
    report = bench_rules.Report("checkpoint", a.results, a.rounds)
    say = report.say
    order = bench_rules.RoundOrder(SYSTEMS, a.seed)

    say(bench_rules.header("checkpoint bench", a.build))
    os.makedirs(a.work_dir, exist_ok=True)
    df = subprocess.run(["df", "-h", a.work_dir], capture_output=True, text=True).stdout.splitlines()[-1].split()
    say(f"  disk: {df[0]} mounted on {df[5]}, {df[3]} free; work dir {a.work_dir}")
    state = checkpoint_bench(a, "--save-repeats", "1")["state"][1]
    shutil.rmtree(a.work_dir, ignore_errors=True)
    a.blocks = (state + BLOCK - 1) // BLOCK
    say(f"  state: {state} bytes (BERT-base + AdamW moments); dd: {a.blocks} x 16 MiB; {a.rounds} round(s)")
    say(f"  {order.describe()}")
    say()

    rows = []
    for rnd in range(1, a.rounds + 1):
        runs = {}
        for s in order.next_round():
            runs[s] = bench_rules.run_on_quiet_machine(lambda: run_tenax(a) if s == "tenax" else run_dd(a), say,
                                                       f"round {rnd} {s}")
            runs[s]["load_end"] = os.getloadavg()[0]
        t, d = runs["tenax"], runs["dd"]
        mb = lambda b, s: b / s / 1e6
        row = {"save": mb(t["bytes"], t["save"]) / mb(d["bytes"], d["write"]),
               "load": mb(t["bytes"], t["load"]) / mb(d["bytes"], d["read"]),
               "fresh": mb(t["bytes"], t["fresh"]) / mb(d["bytes"], d["read"]),
               "stall": t["stall"] / t["save"], "step": t["step_with_save"] / t["step_plain"],
               "reshard": t["reshard"] / t["load"],
               "tenax_save_mbs": mb(t["bytes"], t["save"]), "dd_write_mbs": mb(d["bytes"], d["write"]),
               "tenax_load_mbs": mb(t["bytes"], t["load"]), "tenax_fresh_mbs": mb(t["bytes"], t["fresh"]),
               "dd_read_mbs": mb(d["bytes"], d["read"]), "stall_s": t["stall"], "save_s": t["save"],
               "cold": t["cold"] and d["cold"], "loaded": t.get("loaded") or d.get("loaded")}
        rows.append(row)
        say(f"  round {rnd} ({', '.join(runs)}): save {row['tenax_save_mbs']:.0f} vs dd {row['dd_write_mbs']:.0f} MB/s "
            f"= {row['save']:.2f}; load {row['tenax_load_mbs']:.0f} (new memory {row['tenax_fresh_mbs']:.0f}) vs dd "
            f"{row['dd_read_mbs']:.0f} MB/s = {row['load']:.2f}; stall {t['stall']:.4f} s = {row['stall']:.4f} of the "
            f"save; step {t['step_plain']:.2f} -> {t['step_with_save']:.2f} s; reshard {row['reshard']:.2f}; "
            + "; ".join(f"load {s} {runs[s]['load0']:.2f}->{runs[s]['load_end']:.2f}" for s in runs)
            + ("  (LOADED)" if row["loaded"] else ""))

    mr = lambda k, digits=2: bench_rules.median_range([r[k] for r in rows], digits)
    say()
    say(f"over {a.rounds} round(s), ratios within each round: median (range)")
    say(f"  {'measure':<44} {'Tenax':>22} {'baseline':>22}  {'ratio':<24} target")
    say(f"  {'save throughput vs dd write+fsync (MB/s)':<44} {mr('tenax_save_mbs', 0):>22} {mr('dd_write_mbs', 0):>22}"
        f"  {mr('save'):<24} >= 0.8")
    dd_read = mr("dd_read_mbs", 0)
    say(f"  {'load (cold, in place) vs dd cold read (MB/s)':<44} {mr('tenax_load_mbs', 0):>22} {dd_read:>22}"
        f"  {mr('load'):<24} >= 0.8")
    say(f"  {'load into new memory vs dd cold read (MB/s)':<44} {mr('tenax_fresh_mbs', 0):>22} {dd_read:>22}"
        f"  {mr('fresh'):<24} (shown)")
    say(f"  {'async stall vs synchronous save (s)':<44} {mr('stall_s', 4):>22} {mr('save_s', 3):>22}"
        f"  {mr('stall', 4):<24} <= 0.05")
    say(f"  {'training step with an async save vs without':<44} {'':>22} {'':>22}  {mr('step'):<24} (shown)")
    say(f"  {'4-rank-written load vs 1-rank (cold)':<44} {'':>22} {'':>22}  {mr('reshard'):<24} <= 1.2")
    if not all(r["cold"] for r in rows):
        say("note: the page cache could not be dropped (not root): the loads and dd reads were warm")
    report.save()
    shutil.rmtree(a.work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
