#!/usr/bin/python3
"""Async checkpoints, whole cost: the stall and the slowdown of the steps during the background write.

Each run is one process of build/bench/async_save_bench (bench/async_save_bench.cpp says what it
does): a BertForSequenceClassification trained through the Trainer's step API on synthetic token
batches (fixed seed, the same batches in every run), every step timed. Per model, three systems:
  none    no save
  async   save_checkpoint() after the steps of --save-at, save_async on (the default)
  sync    the same saves with save_async off (each completes before training goes on), for context
Models: MiniLM (all-MiniLM-L6-v2, 22.7 M parameters, a ~0.27 GB state with AdamW's moments) and a
BERT-base-sized model (bert-base-uncased's config, random initialisation, 109.5 M parameters, a
~1.3 GB state): a save costs what the state's size costs, not what its values are.
The Checkpointer's phases come from TENAX_TRACE_FILE (CLOCK_MONOTONIC, the clock of the step times).
Per save, within each round:
  stall      how long save_checkpoint() blocked the training thread (the call)
  sdk stall  the Trainer's own figure: the call plus the next step's wait for the late copy of
             the parameters and optimizer state (Checkpointer::wait_for_snapshot)
  window     the background write: from the call to the writer's result (copy, HDF5 shard,
             fsync, manifest, rename, `latest`)
  slowdown   mean time of the steps that started while the write was in flight (the one it
             ends in included), against the same step indices of the no-save run of the same round
  whole      (stall + those steps) against the same steps without saves: everything the save
             cost the training thread over its window; the target (<= 5 %) is judged on it
and per run the loop's time (first step to the last save known committed) against no saves.
The first save of a run also maps the snapshot buffers (page faults); later saves copy into them,
as every save after the first does in a long run: both are reported.
A save that did not commit makes async_save_bench fail (it checks on_save and the manifest).

The rules of bench/bench_rules.py: systems in an order shuffled per round from a printed seed,
>= 5 rounds, medians with their range, the load printed, a run that starts with the load above the
core count (or beside other work) run again; the header names the commit and the command.

Usage: bench/async_save_bench.py [--build build] [--rounds 5] [--threads 2] [--models minilm,bert-base]
                                 [--modes none,async,sync] [--seed S] [--results FILE] [--smoke]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

TARGET_SLOWDOWN = 0.05
# Per model: steps, saves (after these optimizer steps), batch x sequence. The gap between two
# saves and the steps after the last leave the background write room to finish (the bench
# reports it when it did not: the next call then waits, which shows as stall).
SCHEDULES = {
    "minilm": {"steps": 30, "save_at": [4, 17], "batch": 4, "seq": 64},
    "bert-base": {"steps": 13, "save_at": [2, 8], "batch": 4, "seq": 64},
}
SDK_STALL = re.compile(r"saved checkpoint (\S+) \(step stalled ([0-9.]+) s for the snapshot; write \+ commit ([0-9.]+) s\)")


def run_one(a, model, mode, label):
    sched = SCHEDULES[model]
    work = os.path.join(a.work_dir, f"{model}-{mode}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    trace = os.path.join(work, "trace.txt")
    cmd = [a.bin, "--model", model, "--output-dir", os.path.join(work, "out"), "--mode", mode,
           "--steps", str(sched["steps"]), "--save-at", ",".join(map(str, sched["save_at"])),
           "--batch", str(sched["batch"]), "--seq", str(sched["seq"]), "--threads", str(a.threads), "--seed", "1"]
    if model == "minilm":
        cmd += ["--model-dir", a.minilm]
    env = dict(os.environ, TENAX_TRACE_FILE=trace, OMP_NUM_THREADS=str(a.threads))
    t0 = time.time()
    busy0 = bench_rules.cpu_busy_seconds()
    children0 = sum(os.times()[2:4])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
        out, err, code = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + f"\n(killed after {a.timeout} s)"
        code = -1
    wall = time.time() - t0
    # Other work that shared the cores: the machine's busy CPU beyond this run's own, per second.
    job_cpu = sum(os.times()[2:4]) - children0
    other_cores = max(0.0, (bench_rules.cpu_busy_seconds() - busy0) - job_cpu) / wall
    with open(os.path.join(a.work_dir, f"{label.replace(' ', '-')}.log"), "w") as f:
        f.write(out + err)
    line = next((x for x in out.splitlines() if x.startswith("ASYNC_SAVE_BENCH ")), None)
    if code != 0 or line is None:
        raise SystemExit(f"async_save_bench: {label} failed (exit {code}):\n" + (out + err)[-3000:])
    r = json.loads(line[len("ASYNC_SAVE_BENCH "):])
    events = {}
    if os.path.exists(trace):
        with open(trace) as f:
            for ln in f:
                ts, _pid, event, value = ln.split()
                events.setdefault(int(value), {})[event] = int(ts)  # the last of a name wins
    r["events"] = events
    r["sdk"] = {int(m.group(1).rsplit("-", 1)[1]): (float(m.group(2)), float(m.group(3)))
                for m in SDK_STALL.finditer(err)}
    r.update(wall_s=wall, other_cores=other_cores, load_end=os.getloadavg()[0])
    shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)  # up to 2.6 GB of checkpoints
    return r


def step_seconds(r):
    return [(e - s) / 1e9 for s, e in r["steps"]]


def analyse(r, base):
    """Per save of run `r`: the figures of the module docstring against the no-save run `base`."""
    steps = r["steps"]
    dt, dt0 = step_seconds(r), step_seconds(base)
    out = []
    for i, save in enumerate(r["saves"]):
        k = save["step"]
        ev = r["events"].get(k, {})
        call = (save["call_end"] - save["call_start"]) / 1e9
        if r["mode"] == "sync" or "save.result" not in ev:
            end = save["call_end"]
        else:
            end = max(ev.values())
        window = (end - save["call_start"]) / 1e9
        inside = [j for j in range(k, len(steps)) if save["call_end"] <= steps[j][0] < end]
        done_before_next = (i + 1 == len(r["saves"])) or end <= r["saves"][i + 1]["call_start"]
        s_with = sum(dt[j] for j in inside)
        s_without = sum(dt0[j] for j in inside)
        out.append({
            "step": k, "first": i == 0, "call": call, "window": window, "n_steps": len(inside),
            "sdk_stall": r["sdk"].get(k, (None, None))[0],
            "copy": (ev["save.copied"] - ev["save.begin"]) / 1e9 if "save.copied" in ev and "save.begin" in ev else None,
            "slowdown": (s_with / s_without - 1.0) if inside else None,
            "whole": ((call + s_with) / s_without - 1.0) if inside else None,
            "step_with": s_with / len(inside) if inside else None,
            "step_without": s_without / len(inside) if inside else None,
            "done_before_next": done_before_next,
        })
    return out


def loop_seconds(r):
    return (r["loop_end"] - r["loop_start"]) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="intra-op threads of the training process")
    p.add_argument("--models", default="minilm,bert-base")
    p.add_argument("--modes", default="none,async,sync")
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order (default: random)")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-async-save-bench"))
    p.add_argument("--results", default=None, help="results file (default bench/results/results-async-save-<UTC date>.txt)")
    p.add_argument("--max-wait-s", type=float, default=600, help="longest wait for the load to fall before a run")
    p.add_argument("--smoke", action="store_true", help="tiny schedules (7 steps, batch 2 x 32): checks the script only")
    a = p.parse_args()
    if a.smoke:
        for sched in SCHEDULES.values():
            sched.update(steps=7, save_at=[2, 4], batch=2, seq=32)
    a.bin = os.path.join(os.path.abspath(a.build), "bench", "async_save_bench")
    assets = os.environ.get("TENAX_ASSETS", os.path.join(bench_rules.REPO, ".assets"))
    a.minilm = os.path.join(assets, "all-minilm-l6-v2")
    models = a.models.split(",")
    modes = a.modes.split(",")
    if "none" not in modes or "async" not in modes:
        raise SystemExit("async_save_bench: --modes needs none and async (the comparison)")
    os.makedirs(a.work_dir, exist_ok=True)
    if os.path.exists(os.path.join(a.work_dir, "runs.jsonl")):
        os.remove(os.path.join(a.work_dir, "runs.jsonl"))
    report = bench_rules.Report("async-save", a.results, a.rounds)
    say = report.say

    systems = [(m, s) for m in models for s in modes]
    order = bench_rules.RoundOrder(systems, a.seed)
    say(bench_rules.header("async save bench", a.build))
    say(f"  job: BertForSequenceClassification through Trainer::step, 1 process x {a.threads} intra-op threads "
        f"(the writer thread at nice 10 beside them), synthetic tokens (seed 1), AdamW, {a.rounds} round(s)")
    for m in models:
        s = SCHEDULES[m]
        say(f"  {m}: batch {s['batch']} x {s['seq']} tokens, {s['steps']} steps, saves after steps "
            f"{', '.join(map(str, s['save_at']))}")
    say(f"  {order.describe()}")
    say()
    runs = {}
    for rnd in range(1, a.rounds + 1):
        for m, s in order.next_round():
            label = f"round {rnd} {m} {s}"
            r = bench_rules.run_on_quiet_machine(
                lambda: run_one(a, m, s, label), say, label, max_wait_s=a.max_wait_s,
                disturbed=lambda r: f"{r['other_cores']:.2f} cores busy" if r["other_cores"] > 0.3 else "")
            runs[(rnd, m, s)] = r
            with open(os.path.join(a.work_dir, "runs.jsonl"), "a") as f:
                f.write(json.dumps({"round": rnd, **r}) + "\n")
            dt = step_seconds(r)
            saves = "  ".join(f"save@{x['step']} call {(x['call_end'] - x['call_start']) / 1e6:.0f} ms"
                              for x in r["saves"])
            say(f"  {label:<28} loop {loop_seconds(r):6.2f} s, median step {statistics.median(dt):.3f} s  {saves}"
                f"  load {r['load0']:.2f}->{r['load_end']:.2f}, other work {r['other_cores']:.2f} cores"
                f"{'  (LOADED)' if r.get('loaded') else ''}")
        report.save()  # the runs so far, should the bench be stopped before the summary
    rounds = range(1, a.rounds + 1)

    say()
    say(f"over {a.rounds} rounds: median (range); slowdown and whole cost against the same step indices without saves")
    met = True
    for m in models:
        par = runs[(1, m, "none")]
        say(f"{m} ({par['parameters'] / 1e6:.1f} M parameters), step without saves "
            f"{bench_rules.median_range([statistics.median(step_seconds(runs[(i, m, 'none')])) for i in rounds])} s")
        for s in [x for x in modes if x != "none"]:
            per = [analyse(runs[(i, m, s)], runs[(i, m, "none")]) for i in rounds]
            for n, which in enumerate(["first save (maps its buffers)", "later save (reuses them)"]):
                rows = [x[n] for x in per if len(x) > n]
                if not rows:
                    continue
                def ms(key, rows=rows):
                    return bench_rules.median_range([None if x[key] is None else x[key] * 1e3 for x in rows], 0)

                def pct(key, rows=rows):
                    return bench_rules.median_range([None if x[key] is None else x[key] * 100 for x in rows], 1)

                say(f"  {s:<5} {which}:")
                if s != "async":
                    say(f"      stall (save_checkpoint call: the whole save) {ms('call')} ms")
                else:
                    say(f"      stall (save_checkpoint call) {ms('call')} ms; the Trainer's stall figure (call + wait for "
                        f"the late copy) {ms('sdk_stall')} ms")
                    say(f"      save window (call -> writer's result) {ms('window')} ms, late copy {ms('copy')} ms, "
                        f"steps in it {bench_rules.median_range([x['n_steps'] for x in rows], 0)}; "
                        f"finished before the next save in {sum(x['done_before_next'] for x in rows)} of {len(rows)}")
                    say(f"      step in the window {ms('step_with')} ms vs {ms('step_without')} ms without saves")
                    each = ", ".join("-" if x["slowdown"] is None else f"{x['slowdown'] * 100:.1f}" for x in rows)
                    say(f"      slowdown over the window {pct('slowdown')} %  (rounds: {each}); "
                        f"whole cost incl. the stall {pct('whole')} %")
                    # Judged on the whole cost (the call too), the stricter of the two.
                    med = statistics.median([x["whole"] for x in rows if x["whole"] is not None] or [float("inf")])
                    ok = med <= TARGET_SLOWDOWN
                    met = met and ok
                    say(f"      target <= {TARGET_SLOWDOWN * 100:.0f} % over the save window (whole cost, median): "
                        f"{'met' if ok else 'NOT met'}")
            ratios = [loop_seconds(runs[(i, m, s)]) / loop_seconds(runs[(i, m, 'none')]) for i in rounds]
            say(f"  {s:<5} run time / no saves: {bench_rules.median_range(ratios)}  "
                f"(rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
    report.save()
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
