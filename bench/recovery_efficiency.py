"""Step efficiency under repeated failures: `bench/recovery_bench.py --efficiency` (make bench-recovery-efficiency).

Each system of bench/recovery_bench.py runs the same 2-rank synthetic job twice per round, in an
order shuffled per round (bench/bench_rules.py), each run --duration seconds from the launcher's
start, then SIGTERM:
  faults    one worker SIGKILLed by pid, from outside, every --fail-every seconds (at 30 s, 60 s,
            ...; rank 1 first, then rank 0, alternately), the job left to recover on its own;
  baseline  the same job, uninterrupted.
The job never ends by itself (--max-steps far beyond what fits), so both runs train for the whole
duration; --max-restarts is high enough for every kill. Figures per run, from the step lines that
reached the bench before the end:
  useful steps  the job's step at the end (progress kept: a step redone after a rollback counts once)
  lost steps    work thrown away: for a restart, the steps since the checkpoint it resumed from;
                for torchft, the steps its surviving group did not commit (taken again)
  recoveries    the system's own count (Tenax: in-process recoveries or restarts in agent.json's
                log lines; torchrun/torchft: "will restart worker group")
  stall per kill  the longest pause between step lines from the last step before the kill to the
                next kill (the time the job made no progress), median over the kills
  efficiency    useful steps / the baseline's steps, within a round; for torchft also in samples,
                since its surviving group trains on 16 of the 32 samples per step until the
                restarted group is back
When --baseline-duration is shorter than --duration, the baseline's steps at --duration are
extrapolated at the rate of its second half (start-up counted once), and the results say so.
"""
import os
import re
import resource
import signal
import statistics
import time

import bench_rules
import procfs
from bench_rules import cpu_busy_seconds
from recovery_bench import TENAX_STEP, Job, fmt, job_command, label, pid_file_worker

NEVER_ENDS = 100_000_000  # --max-steps: far more than a run can take
TORCHFT_STEP = re.compile(r"^\[[\d.]+\] step (\d+)/\d+ .* replicas (\d+) replica (\d+) restart (\d+)$")
NOT_COMMITTED = re.compile(r"replica \d+ restart \d+: step (\d+) not committed")
REPLACED = re.compile(r"in-process recovery: rank (\d+) \(pid \d+\) is replaced by .* \(pid (\d+)\)")
RECOVERY_LINE = {
    "tenax-in-process": re.compile(r"in-process recovery: rank \d+ \(pid|restarting all .* as generation"),
    "tenax": re.compile(r"restarting all .* as generation"),
}


def tenax_worker_pid(job, rank):
    """The live process that holds `rank` under `tenax run`: the warm spare the agent named last as
    its replacement, else the child started for that rank (RANK in its environment, no spare id)."""
    alive = {p for p in procfs.children(job.proc.pid) if procfs.state(p) not in (None, "Z")}
    with job.cond:
        lines = list(job.lines)
    holder = None
    for _, x in lines:
        m = REPLACED.search(x)
        if m and int(m.group(1)) == rank:
            holder = int(m.group(2))
    if holder in alive:
        return holder
    for p in sorted(alive):
        env = procfs.environ(p)
        if "TENAX_SPARE_ID" not in env and env.get("RANK") == str(rank):
            return p
    return None


def victim_pid(system, job, run_dir, rank):
    if system.startswith("tenax"):
        return tenax_worker_pid(job, rank)
    return pid_file_worker(run_dir, rank)  # torchrun's rank, or torchft's replica group


def progress(system, lines, t_end):
    """(useful steps, samples, lost steps, [(arrival, step)]) from the lines that arrived by t_end."""
    steps = []  # (arrival, step)
    replicas_at = {}
    lost = 0
    not_committed = set()
    prev = None
    for t, x in lines:
        if t > t_end:
            break
        if system == "torchft":
            m = TORCHFT_STEP.match(x)
            if m:
                step = int(m.group(1))
                steps.append((t, step))
                replicas_at[step] = max(replicas_at.get(step, 0), int(m.group(2)))
                continue
            m = NOT_COMMITTED.search(x)
            if m:
                not_committed.add(int(m.group(1)))
            continue
        m = (TENAX_STEP if system.startswith("tenax") else STEP_ANY).match(x)
        if not m:
            continue
        step = int(m.group(1))
        if prev is not None and step <= prev:
            lost += prev - (step - 1)  # a rollback: the steps since the checkpoint are done again
        prev = step
        steps.append((t, step))
    if system == "torchft":
        # the counter never goes back; a step not committed is taken again
        useful = max((s for _, s in steps), default=0)
        samples = sum(16 * replicas_at.get(s, 2) for s in range(1, useful + 1))
        lost = len(not_committed)
    else:
        useful = steps[-1][1] if steps else 0
        samples = 32 * useful
    return useful, samples, lost, steps


STEP_ANY = re.compile(r"^\[[\d.]+\] step (\d+)/(\d+) .* restart (\d+)$")  # the torchrun worker's rank 0


def rate_between(step_lines, t_from, t_to):
    """Steps per second between two instants, from the step lines (None without two lines)."""
    inside = [(t, step) for t, step in step_lines if t_from <= t <= t_to]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def early_late_rates(r, fail_every):
    """The step rate of a run in its first and its last 15 s clear of a start or a kill: whether a
    system runs as fast after many recoveries as before the first one (a lasting slowdown from
    recoveries shows here; the cost of each recovery itself does not)."""
    t0, t_end = r["t0"], r["t0"] + r["duration"]
    early = rate_between(r["step_lines"], t0 + 10, min(t0 + 25, t0 + (fail_every or 1e9) - 1))
    last_kill = t0 + fail_every * int((r["duration"] - 1e-3) // fail_every) if fail_every else t0
    late = rate_between(r["step_lines"], max(last_kill + 5, t_end - 20), t_end - 1)
    return early, late


def stall_after(kill_t, until, step_times):
    """The longest pause between step lines from the last one before the kill to `until` (the next
    kill or the end): for a restart, from the last step before the kill to the first after the
    restart; for torchft, the longer of the survivor's pause at the loss and at the rejoin."""
    inside = [t for t in step_times if kill_t <= t <= until]
    before = [t for t in step_times if t < kill_t]
    points = ([before[-1]] if before else []) + inside
    gaps = [b - a for a, b in zip(points, points[1:])]
    return max(gaps) if gaps else None


def run_one(system, kind, a, run_dir, round_no, duration, fail_every):
    os.makedirs(run_dir, exist_ok=True)
    cmd, env, step_re = job_command(system, a, run_dir, NEVER_ENDS, max_restarts=1000)
    busy0, ru0, self0 = cpu_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    job = Job(system, cmd, env, os.path.join(run_dir, "output.log"), step_re)
    r = {"system": system, "kind": kind, "round": round_no, "run_dir": run_dir, "duration": duration}
    t_end = job.t0 + duration
    kills, skipped = [], 0
    k = 1
    while fail_every and job.t0 + k * fail_every < t_end - 1e-3:
        t_next = job.t0 + k * fail_every
        job.wait_for(lambda: False, max(0.0, t_next - time.time()))  # sleeps, or returns at once if the job ended
        if job.eof:
            break
        rank = k % 2  # rank 1 first, then rank 0, alternately
        victim = None
        give_up = time.time() + 10
        while victim is None and time.time() < give_up and not job.eof:
            victim = victim_pid(system, job, run_dir, rank)
            if victim is None:
                time.sleep(0.05)
        if victim is None:
            skipped += 1
        else:
            t_kill = time.time()
            try:
                os.kill(victim, signal.SIGKILL)
                kills.append((t_kill, rank, victim))
            except ProcessLookupError:
                skipped += 1
        k += 1
    job.wait_for(lambda: False, max(0.0, t_end - time.time()))
    ended_early = job.eof
    with job.cond:
        lines = list(job.lines)
    if not ended_early:
        job.proc.send_signal(signal.SIGTERM)
    rc = job.finish(60)
    wall = min(time.time(), t_end) - job.t0
    busy1, ru1, self1 = cpu_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    job_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    own_cpu = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    elapsed = time.time() - job.t0
    useful, samples, lost, step_lines = progress(system, lines, t_end)
    step_times = [t for t, _ in step_lines]
    if system in RECOVERY_LINE:
        recoveries = sum(1 for t, x in lines if t <= t_end and RECOVERY_LINE[system].search(x))
    else:
        recoveries = sum(1 for t, x in lines if t <= t_end and "will restart worker group" in x)
    stalls = []
    for i, (t_kill, _, _) in enumerate(kills):
        until = kills[i + 1][0] if i + 1 < len(kills) else t_end
        stalls.append(stall_after(t_kill, until, step_times))
    r.update(exit=rc, wall=wall, useful=useful, samples=samples, lost=lost, recoveries=recoveries,
             kills=len(kills), skipped=skipped, stalls=stalls,
             killed=[f"r{rank}" for _, rank, _ in kills], load1=os.getloadavg()[0],
             other_cores=max(0.0, (busy1 - busy0) - job_cpu - own_cpu) / max(elapsed, 1e-9),
             job_cores=job_cpu / max(elapsed, 1e-9), step_lines=step_lines, t0=job.t0)
    problems = []
    if ended_early:
        problems.append(f"the job ended before {duration:.0f} s (exit {rc})")
    if fail_every and step_times and step_times[-1] < t_end - fail_every:
        problems.append("no step in the last interval: the job stopped training")
    if kind == "faults" and skipped:
        problems.append(f"{skipped} kill(s) found no worker to kill")
    if problems:
        r["error"] = "; ".join(problems) + f" (log: {job.log_path})"
    return r


def steps_at(r, duration):
    """The baseline's steps at `duration`: its own when it ran that long, else extrapolated at the
    step rate of its second half."""
    if r["duration"] >= duration:
        return r["useful"], r["samples"]
    t0, d = r["t0"], r["duration"]
    # step numbers, not lines: torchft's two groups both print every step
    rate = rate_between(r["step_lines"], t0 + d / 2, float("inf"))
    if rate is None:
        return None, None
    extra = rate * (duration - d)
    per_step = r["samples"] / max(r["useful"], 1)
    return r["useful"] + extra, r["samples"] + extra * per_step


def run(a, systems, left_out):
    duration, fail_every = a.duration, a.fail_every
    base_duration = a.baseline_duration or duration
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    work = os.path.join(a.work_dir, f"efficiency-{stamp}")
    os.makedirs(work, exist_ok=True)
    report = bench_rules.Report("recovery-efficiency", a.results, a.rounds)
    say = report.say
    items = [(s, kind) for s in systems for kind in ("baseline", "faults")]
    order = bench_rules.RoundOrder(items, a.seed)
    say(bench_rules.header("recovery efficiency bench", a.build))
    say(f"  build {a.build}; torch {a.pypi_version or '-'} for torchrun-pypi/torchft ({a.pypi_python})"
        + (f"; torchft {a.torchft_version}: heartbeat {a.torchft_heartbeat_ms} ms, timeout "
           f"{a.torchft_heartbeat_timeout_ms} ms, join timeout {a.torchft_join_timeout_ms} ms" if a.torchft_version else ""))
    for line in left_out:
        say(line)
    for line in a.note:
        say(f"  note: {line}")
    say(f"  job: 2 ranks, synthetic_regression model, checkpoint every {a.save_steps} steps, never ending "
        f"(--max-steps {NEVER_ENDS}); each run {duration:.0f} s from the launcher's start, a SIGKILL of one worker "
        f"every {fail_every:.0f} s (rank 1, rank 0, ...); baseline {base_duration:.0f} s uninterrupted"
        + ("" if base_duration >= duration else
           f", its steps extrapolated to {duration:.0f} s at its second half's rate (NOT the full-length baseline)"))
    say(f"  {a.rounds} round(s); systems {', '.join(systems)}; work dir {work}")
    # A 5-minute run keeps the 1-minute load average above the core count for a minute after it
    # ends: the start check looks at the cores busy now instead (bench_rules.run_on_quiet_machine).
    max_busy = a.max_load if a.max_load is not None else 0.5
    say(f"  a run starts when the machine keeps at most {max_busy} cores busy (over 2 s), else it waits"
        + ("" if a.max_load is None else " (--max-load: a smoke run, not by the rules)"))
    say(f"  {order.describe()}")
    say()
    runs = []
    for rnd in range(1, a.rounds + 1):
        for s, kind in order.next_round():
            attempt = iter(range(1000))
            d = duration if kind == "faults" else base_duration
            r = bench_rules.run_on_quiet_machine(
                lambda: run_one(s, kind, a, os.path.join(work, f"round{rnd}-{s}-{kind}-{next(attempt)}"), rnd, d,
                                fail_every if kind == "faults" else 0),
                say, f"round {rnd} {s} {kind}", load=lambda: bench_rules.busy_cores(2.0), max_load=max_busy)
            runs.append(r)
            stalls = [x for x in r.get("stalls", []) if x is not None]
            say(f"  round {rnd}  {s:<19} {kind:<8} {r['duration']:.0f} s: step {r['useful']}  samples {r['samples']}  "
                f"lost {r['lost']}  recoveries {r['recoveries']}/{r['kills']} kills"
                + (f"  stall per kill {bench_rules.median_range(stalls)} s" if stalls else "")
                + ("  steps/s early {} late {}".format(*(fmt(x, 0) for x in early_late_rates(r, fail_every)))
                   if kind == "faults" and "step_lines" in r else "")
                + f"  exit {r['exit']}  busy at start {r['load0']:.2f} cores, load after {r['load1']:.2f}  other work {r['other_cores']:.2f} cores"
                + (f"  ERROR: {r['error']}" if "error" in r else ""))

    say()
    say(f"step efficiency with a SIGKILL every {fail_every:.0f} s over {duration:.0f} s "
        f"(median (range) over {a.rounds} round(s); efficiency within a round: useful steps / baseline steps):")
    say(f"  {'system':<52} {'useful steps':>13} {'baseline':>10} {'efficiency':>22} {'samples eff.':>22} "
        f"{'lost/run':>9} {'recov./kills':>13} {'stall per kill s':>24} {'late/early rate':>22}")
    for s in systems:
        eff, seff, useful, base, lost, rec, stalls, late_early = [], [], [], [], [], [], [], []
        for rnd in range(1, a.rounds + 1):
            f = [r for r in runs if r["system"] == s and r["kind"] == "faults" and r["round"] == rnd and "error" not in r]
            b = [r for r in runs if r["system"] == s and r["kind"] == "baseline" and r["round"] == rnd and "error" not in r]
            if f:
                useful.append(f[0]["useful"])
                lost.append(f[0]["lost"])
                rec.append(f"{f[0]['recoveries']}/{f[0]['kills']}")
                stalls += [x for x in f[0]["stalls"] if x is not None]
                early, late = early_late_rates(f[0], fail_every)
                if early and late:
                    late_early.append(late / early)
            if f and b:
                bs, bsamples = steps_at(b[0], duration)
                if bs:
                    base.append(bs)
                    eff.append(f[0]["useful"] / bs)
                    seff.append(f[0]["samples"] / bsamples)
        pct = lambda xs: "-" if not xs else (f"{100 * statistics.median(xs):.1f}% "
                                             f"({100 * min(xs):.1f}..{100 * max(xs):.1f})")
        say(f"  {label(s, a.pypi_version, a.torchft_version):<52} {fmt(statistics.median(useful) if useful else None, 0):>13} "
            f"{fmt(statistics.median(base) if base else None, 0):>10} {pct(eff):>22} "
            f"{(pct(seff) if s == 'torchft' else '(= steps)'):>22} "
            f"{fmt(statistics.median(lost) if lost else None, 0):>9} {','.join(rec) or '-':>13} "
            f"{bench_rules.median_range(stalls):>24} {bench_rules.median_range(late_early):>22}")
    busy = [r for r in runs if r["other_cores"] > 0.3 or r["load0"] > max_busy]
    say()
    if busy:
        say(f"machine busy: {len(busy)} of {len(runs)} runs saw other work above 0.3 cores, or more than {max_busy} "
            f"cores busy at the start; figures from those runs are disturbed")
    else:
        say("machine quiet: no run saw other work above 0.3 cores")
    errors = [r for r in runs if "error" in r]
    for r in errors:
        say(f"FAILED: round {r['round']} {r['system']} {r['kind']}: {r['error']}")
    report.save()
    return 1 if errors else 0
