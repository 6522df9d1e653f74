#!/usr/bin/python3
"""Recovery of the MiniLM fine-tune from a worker SIGKILL: Tenax in-process vs Tenax restart.

Issue 13's second recovery target is "<= 1 s for the MiniLM fine-tune". This bench measures it on
the `make demo` job (`tenax train` on train/jobs/rotten_tomatoes.toml: all-MiniLM-L6-v2, 22.7 M
parameters, Rotten Tomatoes, AdamW; 2 ranks, one thread each, over Gloo), under the rules of
bench/bench_rules.py (an order shuffled per round from a printed seed, at least 5 rounds, a run
that starts on a busy machine run again):
  tenax-in-process  tenax run --recovery in-process --spares 1: the survivor keeps its process, a
                    warm spare (model and data already loaded) takes rank 1's place and heals from
                    the survivor's memory: parameters, AdamW moments, schedule, step, RNG
  tenax             tenax run (today's restart path): every worker restarts and resumes from the
                    newest checkpoint on disk
Once rank 0 has logged step --kill-after-step and the checkpoint before it is committed, the bench
waits a random fraction of one step (seeded; so the kill lands anywhere in the step: forward,
backward, the gradient allreduce, the optimizer) and SIGKILLs rank 1's process by pid. From that
instant (time.time() just before kill(2)) it measures, on the arrival times of the job's lines:
  detect      the launcher's first line about the dead worker
  ready       training can go on: the survivor's "healed from rank R in N ms" (in-process) or rank
              0's "resumed from <checkpoint>" (restart)
  first step  the first step completed after the kill (the step in flight is redone from its
              start, so this includes one whole step)
  step        the median step time before the kill (rank 0's step lines)
  overhead    first step - step: what the failure cost beyond redoing the step it interrupted
  lost        the last step completed before the kill minus the step the job went on from
The job must then finish (exit 0). The torchrun peers are not run on this job: the synthetic job
(recovery_bench.py) compares them.
"""
import argparse
import os
import random
import re
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402
import train_job  # noqa: E402
from recovery_bench import Job, first_after, fmt, median  # noqa: E402
from recovery_efficiency import tenax_worker_pid  # noqa: E402

REPO = bench_rules.REPO
SYSTEMS = ["tenax-in-process", "tenax"]
LABEL = {"tenax-in-process": "Tenax in-process (survivor kept, warm spare)",
         "tenax": "Tenax restart (every worker, from disk)"}
# rank 0's log line per step (logging_steps=1, disable_tqdm=true)
STEP = re.compile(r"^.*?\[worker r0 g\d+\] \[tenax\.trainer\] info: step (\d+)/(\d+) \|")
READY = {"tenax-in-process": r"\[worker r0 g1\] .*healed from rank \d+ in \d+ ms: .* at step (\d+)",
         "tenax": r"\[worker r0 g1\] .*resumed from .* at step (\d+)"}
DETECT = r"\[agent g0\].* worker rank \d+ .*(killed by signal|exited with)"


def command(system, a, run_dir):
    recovery = ["--recovery", "in-process", "--spares", "1"] if system == "tenax-in-process" else []
    return [os.path.join(a.build, "launcher", "tenax"), "run", "--nproc-per-node", "2", "--max-restarts", "3",
            *recovery, "--run-dir", run_dir, "--",
            *train_job.command(a.build, [
                f"output_dir={os.path.join(run_dir, 'train')}", f"max_steps={a.max_steps}",
                f"save_steps={a.save_steps}", "logging_steps=1", "report_to=jsonl",
                f"per_device_train_batch_size={a.batch}", "disable_tqdm=true",
                # the final evaluation is not timed: kept short
                "data.max_eval_samples=64", "data.max_predict_samples=64"], assets=os.path.join(REPO, ".assets"))]


def step_lines(lines, until=None):
    return [(t, int(m.group(1))) for t, x in lines if until is None or t < until for m in [STEP.match(x)] if m]


def run_one(system, a, run_dir, rng):
    os.makedirs(run_dir, exist_ok=True)
    ckpt = (a.kill_after_step // a.save_steps) * a.save_steps
    job = Job(system, command(system, a, run_dir), dict(os.environ), os.path.join(run_dir, "output.log"), STEP)
    r = {"system": system, "run_dir": run_dir}
    committed = lambda: any("committed checkpoint" in x and f"step-{ckpt:09d}" in x for _, x in job.lines)
    if not job.wait_for(lambda: job.last_step >= a.kill_after_step and committed(), a.timeout):
        r["error"] = f"never reached step {a.kill_after_step} with checkpoint {ckpt} committed (exit {job.finish(5)})"
        return r
    with job.cond:
        before = step_lines(job.lines)
    gaps = [t1 - t0 for (t0, _), (t1, _) in zip(before, before[1:])][2:]  # past the first steps' warm-up
    step_s = statistics.median(gaps) if gaps else 0.0
    victim = tenax_worker_pid(job, 1)  # rank 1's first process: no recovery yet
    if victim is None:
        job.finish(a.timeout)
        r["error"] = "could not find rank 1's process"
        return r
    delay = rng.uniform(0.0, step_s)
    time.sleep(delay)
    with job.cond:
        last_before = job.last_step
    t_kill = time.time()
    os.kill(victim, signal.SIGKILL)
    rc = job.finish(a.timeout)
    lines = job.lines
    rel = lambda t: None if t is None else t - t_kill
    _, t_det, _ = first_after(lines, t_kill, DETECT)
    i_ready, t_ready, x_ready = first_after(lines, t_kill, READY[system])
    after = [(t, s) for t, s in step_lines(lines) if t > (t_ready or float("inf"))]
    t_first = after[0][0] if after else None
    went_on_from = int(re.search(r"at step (\d+)", x_ready).group(1)) if x_ready else None
    # A kill at the very end of a step can land after the step completed on every rank but before
    # rank 0's line for it arrived: the job then goes on from one step past the last line seen
    # before the kill, and nothing was lost (the 2026-11-25 result file shows those runs as -1).
    finished = any("training finished at step" in x for _, x in lines)
    r.update(exit=rc, victim=victim, delay=delay, step_s=step_s, detect=rel(t_det), ready=rel(t_ready),
             first_step=rel(t_first), lost=None if went_on_from is None else max(0, last_before - went_on_from),
             overhead=None if t_first is None else rel(t_first) - step_s)
    if rc != 0 or not finished or t_ready is None or t_first is None:
        r["error"] = f"exit {rc}, finished {finished}, ready line {t_ready is not None}, step after {t_first is not None}"
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--batch", type=int, default=8, help="per-device batch (default 8: about 0.75 s a step here)")
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--save-steps", type=int, default=10)
    p.add_argument("--kill-after-step", type=int, default=14)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-recovery-minilm-bench"))
    p.add_argument("--results", help="result file (default bench/results/results-recovery-minilm-<date>.txt)")
    a = p.parse_args()
    systems = a.systems.split(",")
    for s in systems:
        if s not in SYSTEMS:
            p.error(f"--systems: unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    for f in ("config.json", "model.safetensors"):
        if not os.path.exists(os.path.join(REPO, ".assets", "all-minilm-l6-v2", f)):
            sys.exit(f"recovery_minilm_bench: .assets/all-minilm-l6-v2/{f} is missing; run bash tools/fetch_assets.sh")
    report = bench_rules.Report("recovery-minilm", a.results, a.rounds)
    order = bench_rules.RoundOrder(systems, a.seed)
    rng = random.Random(order.seed)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    report.say(bench_rules.header("recovery MiniLM bench", a.build))
    report.say(f"  job: tenax train train/jobs/rotten_tomatoes.toml, 2 ranks x {a.batch}, {a.max_steps} steps, "
               f"a checkpoint every {a.save_steps}; rank 1 SIGKILLed by pid a random part of one step after step "
               f"{a.kill_after_step}")
    report.say(f"  {a.rounds} round(s); {order.describe()}")
    runs = []
    for rnd in range(1, a.rounds + 1):
        for system in order.next_round():
            run_dir = os.path.join(a.work_dir, stamp, f"round{rnd}-{system}")
            r = bench_rules.run_on_quiet_machine(lambda: run_one(system, a, run_dir, rng), report.say,
                                                 f"round {rnd} {system}")
            r["round"] = rnd
            runs.append(r)
            if "error" in r:
                report.say(f"  round {rnd}  {system:<17} FAILED: {r['error']} (log {run_dir}/output.log)")
                continue
            report.say(f"  round {rnd}  {system:<17} step {fmt(r['step_s'])} s  kill {fmt(r['delay'])} s into it  "
                       f"detect {fmt(r['detect'])}  ready {fmt(r['ready'])}  first step {fmt(r['first_step'])}  "
                       f"overhead {fmt(r['overhead'])}  lost {r['lost']}  load {r['load0']:.2f}")
    report.say("")
    report.say(f"  {'system':<46} {'detect s':>9} {'ready s, median (range)':>26} {'first step s':>22} "
               f"{'step s':>7} {'overhead s':>22} {'lost':>5} {'ok':>5}")
    for s in systems:
        ok = [r for r in runs if r["system"] == s and "error" not in r]
        med = lambda k: median([r[k] for r in ok])
        report.say(f"  {LABEL[s]:<46} {fmt(med('detect')):>9} {bench_rules.median_range([r['ready'] for r in ok]):>26} "
                   f"{bench_rules.median_range([r['first_step'] for r in ok]):>22} {fmt(med('step_s')):>7} "
                   f"{bench_rules.median_range([r['overhead'] for r in ok]):>22} "
                   f"{fmt(med('lost'), 0):>5} {len(ok)}/{sum(1 for r in runs if r['system'] == s):>3}")
    if set(systems) == set(SYSTEMS):
        ratios = []
        for rnd in range(1, a.rounds + 1):
            by = {r["system"]: r for r in runs if r["round"] == rnd and "error" not in r}
            if len(by) == 2:
                ratios.append(by["tenax"]["ready"] / by["tenax-in-process"]["ready"])
        report.say(f"  ready, restart / in-process within a round: {bench_rules.median_range(ratios, 1)}x")
    report.save()
    return 0 if all("error" not in r for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
