#!/usr/bin/python3
"""Recovery from a worker SIGKILL: Tenax (`tenax run`) vs torchrun (TorchElastic, Debian's torch 1.13 and PyPI's).

Runs from bench/recovery_bench.sh (which checks the build and installs python3-torch). Each round
runs, back to back on this machine (the rules of bench/bench_rules.py: an order shuffled per round
from a printed seed, at least 5 rounds, a run that starts with the load above the core count run
again),
  tenax-in-process   build/launcher/tenax run ... --recovery in-process --spares 1: the survivor keeps
                     its process, a warm spare takes rank 1 and heals from the survivor's memory
  tenax              build/launcher/tenax run --nproc-per-node 2 --max-restarts 3 -- synthetic_regression
  torchrun-5s        python3 -m torch.distributed.run (c10d rendezvous, --monitor_interval 5: the
                     torch 1.13 default) -- bench/recovery_torchrun_worker.py
  torchrun-0.1s      the same with --monitor_interval 0.1 (the default since PyTorch 2.4,
                     pytorch/pytorch#124692)
  torchrun-0.02s     the same with --monitor_interval 0.02 (as often as Tenax's agent looks)
  torchrun-pypi-0.02s  the same command, --monitor_interval 0.02, under the current PyPI torch
                     (--pypi-python, default .venv-hf-pypi/bin/python from bench/setup_hf_peers.sh;
                     its workers run in that interpreter too; TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1,
                     pytorch#135712's workaround for its restarts); left out, with a note in the results,
                     when that interpreter cannot import torch
  torchft            PyPI torchft 0.2.0 in that interpreter (bench/setup_torchft.sh): a Lighthouse and one
                     replica group per rank, each under its own torchrun (--monitor_interval 0.02), by
                     bench/recovery_torchft_launch.py + bench/recovery_torchft_worker.py; the surviving
                     group keeps its process and trains on alone, the restarted group heals from it.
                     Recovery is the survivor's first step alone; the restarted group's return is shown
                     apart ("both groups again"). Left out, with a note, when torchft cannot be imported
the same 2-rank data-parallel job (examples/synthetic_regression: MLP 16-64-64-1 with dropout,
16 per rank, AdamW, a checkpoint every --save-steps steps). Once rank 0 has logged step
--kill-after-step and the checkpoint before it is committed, the bench SIGKILLs rank 1's
process and measures, from the kill instant (time.time() just before kill(2)):
  detection   until the launcher's first line about the failure reaches the bench
  recovery    until the first training step of the restarted workers is printed
  steps lost  last step completed before the kill minus the step the restart resumed from
and lets the job finish (exit status 0 required). All times are arrival times of the job's
output lines at the bench (one pipe, read by a thread, stamped with time.time()); the lines'
own stamps (Tenax's [HH:MM:SS.mmm] log prefix, the torchrun worker's [epoch seconds]) are
shown as a cross-check. Ratios other/Tenax in-process are taken within a round; medians over
rounds, with their range. This bench installs no PyPI torch itself (bench/setup_hf_peers.sh does) and
no torchft (bench/setup_torchft.sh does). --efficiency runs bench/recovery_efficiency.py instead.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402
import procfs  # noqa: E402  tools/procfs.py
from bench_rules import cpu_busy_seconds  # noqa: E402

REPO = bench_rules.REPO


# ----------------------------------------------------------------------------------------------
# helpers

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


LOG_STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\.(\d{3})\] ")
# torch >= 2.x's agent logs in glog style, local time: "I1124 22:25:40.605000 5072 torch/distributed/..."
GLOG_STAMP = re.compile(r"^[DIWEC](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ")
EPOCH_STAMP = re.compile(r"^\[(\d{9,}\.\d+)\] ")
TENAX_STEP = re.compile(r"^step (\d+)/(\d+) done$")  # synthetic_regression --step-lines yes
TORCH_STEP = re.compile(r"^\[[\d.]+\] step (\d+)/(\d+) .* restart (\d+)$")
# torchrun-<interval>s: Debian's torch 1.13 (--python); torchrun-pypi-<interval>s: the current PyPI torch
# (--pypi-python)
TORCHRUN_SYSTEM = re.compile(r"torchrun-(pypi-)?(\d+(?:\.\d+)?)s")
# A line of torchrun's agent. torch 1.13 logs with Python's default format, "INFO:torch.distributed.elastic.agent
# .server.api:[default] ..."; torch 2.x in glog style, "I1124 22:25:40.605000 5072 torch/distributed/elastic/agent/
# server/api.py:941] [default] ...". The messages the milestones look for are the same words in both. glog
# writes the path relative to the working directory when it lies below it (.venv-hf-pypi/lib/.../torch/...).
TORCHRUN_AGENT = (r"^((DEBUG|INFO|WARNING|ERROR|CRITICAL):torch\.distributed\.elastic"
                  r"|[DIWEC]\d{4} [\d:.]+ +\d+ \S*torch/distributed/elastic/)")


def tenax_stamp_to_epoch(line: str, near: float):
    """[HH:MM:SS.mmm] (spdlog, local time) -> epoch seconds, on the day of `near`."""
    m = LOG_STAMP.match(line)
    if not m:
        return None
    h, mi, s, ms = (int(g) for g in m.groups())
    best = None
    for day_shift in (-1, 0, 1):
        d = datetime.datetime.fromtimestamp(near) + datetime.timedelta(days=day_shift)
        t = d.replace(hour=h, minute=mi, second=s, microsecond=ms * 1000).timestamp()
        if best is None or abs(t - near) < abs(best - near):
            best = t
    return best


def glog_stamp_to_epoch(line: str, near: float):
    """glog's "I1124 22:25:40.605000" (month, day, local time; no year) -> epoch seconds, in the year of `near`."""
    m = GLOG_STAMP.match(line)
    if not m:
        return None
    mo, d, h, mi, s, us = (int(g) for g in m.groups())
    year = datetime.datetime.fromtimestamp(near).year
    best = None
    for y in (year - 1, year, year + 1):  # a run across New Year's Eve
        try:
            t = datetime.datetime(y, mo, d, h, mi, s, us).timestamp()
        except ValueError:
            continue
        if best is None or abs(t - near) < abs(best - near):
            best = t
    return best


def line_stamp(line: str, near: float):
    m = EPOCH_STAMP.match(line)
    if m:
        return float(m.group(1))
    if GLOG_STAMP.match(line):
        return glog_stamp_to_epoch(line, near)
    return tenax_stamp_to_epoch(line, near)


# ----------------------------------------------------------------------------------------------
# one job with one kill

class Job:
    """Runs a launcher with stdout+stderr on one pipe; a thread stamps every line on arrival."""

    def __init__(self, name, cmd, env, log_path, step_re):
        self.name, self.cmd, self.log_path, self.step_re = name, cmd, log_path, step_re
        self.lines = []  # (arrival time.time(), text)
        self.cond = threading.Condition()
        self.last_step = 0
        self.eof = False
        self.t0 = time.time()
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.log_path, "w") as log:
            for raw in self.proc.stdout:
                t = time.time()
                text = raw.decode(errors="replace").rstrip("\n")
                log.write(f"{t:.6f} {text}\n")
                m = self.step_re.match(text)
                with self.cond:
                    self.lines.append((t, text))
                    if m:
                        self.last_step = int(m.group(1))
                    self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait_for(self, predicate, timeout):
        deadline = time.time() + timeout
        with self.cond:
            while not predicate():
                if self.eof:
                    return False
                left = deadline - time.time()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.05))
            return True

    def finish(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)  # both launchers stop their workers on SIGTERM
            try:
                rc = self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                rc = self.proc.wait()
            rc = f"timeout ({rc})"
        self.reader.join(10)
        return rc


def first_after(lines, t_from, pattern, start_index=0):
    rx = re.compile(pattern)
    for i in range(start_index, len(lines)):
        t, text = lines[i]
        if t >= t_from and rx.search(text):
            return i, t, text
    return None, None, None


def job_command(system, a, run_dir, max_steps, max_restarts=3):
    """The command line, environment and step-line pattern of one job of `system`."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    common = ["--output-dir", os.path.join(run_dir, "train"), "--max-steps", str(max_steps),
              "--save-steps", str(a.save_steps)]
    peer_logging = ["--logging-steps", "1"]  # the peers' workers print a line per step
    if system.startswith("tenax"):
        recovery = ["--recovery", "in-process", "--spares", "1"] if system == "tenax-in-process" else []
        # The peers' workers print a line per step and keep nothing; Tenax's log steps each cost a
        # loss allreduce and a log_history entry that every manifest and peer heal carries whole
        # (O(steps) per save and per heal). So: rank 0's "step N/M done" line per step
        # (--step-lines) and a log step every 1,000, as a user logging at a sane interval would.
        cmd = [os.path.join(a.build, "launcher", "tenax"), "run", "--nproc-per-node", "2",
               "--max-restarts", str(max_restarts), *recovery, "--run-dir", run_dir, "--", a.synth] + common + [
                   "--logging-steps", "1000", "--step-lines", "yes"]
        return cmd, env, TENAX_STEP
    env["LOGLEVEL"] = "INFO"  # the agents' INFO lines (restart decisions) for the breakdown
    if system == "torchft":
        # One replica group per rank, each under its own torchrun at the fastest monitor interval
        # (as torchrun-pypi-0.02s); the Lighthouse's failure detector at --torchft-heartbeat-ms /
        # --torchft-heartbeat-timeout-ms (torchft's defaults: 100 ms and 5,000 ms).
        cmd = [a.pypi_python, os.path.join(REPO, "bench", "recovery_torchft_launch.py"), "--python", a.pypi_python,
               "--monitor-interval", "0.02", "--max-restarts", str(max_restarts),
               "--heartbeat-timeout-ms", str(a.torchft_heartbeat_timeout_ms), "--quorum-tick-ms", "10",
               "--join-timeout-ms", str(a.torchft_join_timeout_ms), "--"] + common + peer_logging + [
                   "--pid-dir", os.path.join(run_dir, "pids"), "--heartbeat-ms", str(a.torchft_heartbeat_ms)]
        return cmd, env, TORCH_STEP
    pypi, interval = TORCHRUN_SYSTEM.fullmatch(system).groups()
    # --redirects/--tee 9:0: torch 1.13's Std.from_str("0") returns None on Python 3.11 (IntFlag
    # iteration skips the zero member), and the default "0" crashes torchrun before any worker
    # starts. A mapping for a local rank that does not exist leaves every real rank at NONE
    # (the default behaviour: workers inherit the agent's stdout/stderr). torch 2.x parses the
    # same mapping the same way, so both versions get the identical command line.
    # The workers run in the agent's interpreter (torchrun starts a .py entrypoint with
    # sys.executable), so torchrun-pypi's workers train on the PyPI torch too.
    if pypi:
        # torch >= 2.5 shares its rendezvous TCPStore with the workers by default, and that breaks
        # restarts (pytorch/pytorch#135712: a restarted worker can read the killed generation's
        # keys). Here torchrun 2.15's restarted workers hung or failed in init_process_group in 3 of
        # 4 smoke runs with the default and in 0 of 4 with the workaround: its best setting.
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    cmd = [a.pypi_python if pypi else a.python, "-m", "torch.distributed.run",
           "--nproc_per_node", "2", "--max_restarts", str(max_restarts),
           "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{procfs.free_port()}",
           "--monitor_interval", interval, "--redirects", "9:0", "--tee", "9:0",
           os.path.join(REPO, "bench", "recovery_torchrun_worker.py")] + common + peer_logging + [
               "--pid-dir", os.path.join(run_dir, "pids")]
    return cmd, env, TORCH_STEP


def pid_file_worker(run_dir, rank):
    """The live process of `rank` from the pid files of the torchrun and torchft workers
    (<run dir>/pids/rank<R>-restart<C>.pid, the newest restart), or None."""
    best = None
    for name in os.listdir(os.path.join(run_dir, "pids")) if os.path.isdir(os.path.join(run_dir, "pids")) else []:
        m = re.fullmatch(rf"rank{rank}-restart(\d+)\.pid", name)
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), name)
    if best is None:
        return None
    try:
        with open(os.path.join(run_dir, "pids", best[1])) as f:
            pid = int(f.read())
    except (OSError, ValueError):
        return None
    return pid if procfs.state(pid) not in (None, "Z") else None


def i_det_index(lines, t_from):
    """Index of the first line that arrived at or after t_from."""
    for i, (t, _) in enumerate(lines):
        if t >= t_from:
            return i
    return len(lines)


def run_one(system, a, run_dir, round_no):
    """Runs one job with one kill; returns a dict of figures (seconds since the kill)."""
    os.makedirs(run_dir, exist_ok=True)
    ckpt_step = (a.kill_after_step // a.save_steps) * a.save_steps
    in_process = system == "tenax-in-process"
    cmd, env, step_re = job_command(system, a, run_dir, a.max_steps)
    if system.startswith("tenax"):
        ckpt_ready = lambda: any("committed checkpoint" in x and f"step-{ckpt_step:09d}" in x for _, x in job.lines)
    else:
        ckpt_ready = lambda: os.path.exists(os.path.join(run_dir, "train", "checkpoints", f"step-{ckpt_step:09d}.pt"))

    load0 = os.getloadavg()[0]
    busy0, ru0, self0 = cpu_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    job = Job(system, cmd, env, os.path.join(run_dir, "output.log"), step_re)
    r = {"system": system, "round": round_no, "run_dir": run_dir, "cmd": shlex.join(cmd)}

    ok = job.wait_for(lambda: job.last_step >= a.kill_after_step and ckpt_ready(), a.timeout)
    if not ok:
        rc = job.finish(5)
        r["error"] = f"never reached step {a.kill_after_step} with checkpoint {ckpt_step} committed (exit {rc}); see {job.log_path}"
        return r

    # rank 1's process
    victim = None
    if system.startswith("tenax"):
        for pid in procfs.children(job.proc.pid):
            e = procfs.environ(pid)
            if e.get("RANK") == "1" and e.get("TENAX_GENERATION") == "0" and "TENAX_SPARE_ID" not in e:
                victim = pid
    elif system == "torchft":
        # rank 1 = replica group 1's worker, a grandchild (launch script -> torchrun -> worker)
        victim = pid_file_worker(run_dir, 1)
    else:
        try:
            with open(os.path.join(run_dir, "pids", "rank1-restart0.pid")) as f:
                pid = int(f.read())
            if pid in procfs.children(job.proc.pid):
                victim = pid
        except (OSError, ValueError):
            pass
    if victim is None:
        job.finish(a.timeout)
        r["error"] = "could not find rank 1's process"
        return r

    with job.cond:
        step_seen_at_kill = job.last_step
    t_kill = time.time()
    os.kill(victim, signal.SIGKILL)
    rc = job.finish(a.timeout)
    busy1, ru1, self1 = cpu_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    wall = time.time() - job.t0
    job_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    own_cpu = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    r.update(exit=rc, victim=victim, step_seen_at_kill=step_seen_at_kill, wall=wall, load0=load0,
             load1=os.getloadavg()[0], other_cores=max(0.0, (busy1 - busy0) - job_cpu - own_cpu) / wall,
             job_cores=job_cpu / wall)
    lines = job.lines
    rel = lambda t: None if t is None else t - t_kill

    if in_process:
        # The survivor keeps its process: the agent's line about rank 1, its replacement by the
        # warm spare, the heal (the step the job goes on from), then the first step after it.
        i_det, t_det, x_det = first_after(lines, t_kill, r"\[agent g0\].* worker rank \d+ .*(killed by signal|exited with)")
        i_rs, t_rs, _ = first_after(lines, t_kill, r"\[agent g1\] .*in-process recovery: rank \d+ .* replaced by")
        i_up, t_up, x_up = first_after(lines, t_kill, r"\[worker r1 g1\] .*rank 1 of 2")
        i_res, t_res, x_res = first_after(lines, t_kill, r"\[worker r0 g1\] .*healed from rank \d+ in \d+ ms: .* at step (\d+)")
        i_st, t_st, x_st = first_after(lines, t_kill, r"^step \d+/", (i_res if i_res is not None else len(lines)))
        gen0_end = i_res if i_res is not None else len(lines)
        gen0_steps = [int(m.group(1)) for _, x in lines[:gen0_end] for m in [TENAX_STEP.match(x)] if m]
        resume_step = int(re.search(r"at step (\d+)", x_res).group(1)) if x_res else None
        milestones = [("detected", t_det, x_det), ("spare assigned", t_rs, None), ("spare joined", t_up, x_up),
                      ("healed", t_res, x_res), ("first step", t_st, None)]
        finished = any("training finished at step" in x for _, x in lines)
    elif system == "tenax":
        # the agent's first line about a failed worker: rank 1's SIGKILL, or rank 0's exit when
        # both were found dead in the same poll (rank 0 fails on the broken Gloo connection)
        i_det, t_det, x_det = first_after(lines, t_kill, r"\[agent g0\].* worker rank \d+ .*(killed by signal|exited with)")
        i_rs, t_rs, _ = first_after(lines, t_kill, r"\[agent g1\] .*restarting all")
        i_sp, t_sp, _ = first_after(lines, t_kill, r"\[agent g1\] .*starting \d+ workers \(generation 1\)")
        i_up, t_up, x_up = first_after(lines, t_kill, r"\[worker r0 g1\] .*rank 0 of 2")
        i_res, t_res, x_res = first_after(lines, t_kill, r"\[worker r0 g1\] .*resumed from .* at step (\d+)")
        i_st, t_st, x_st = first_after(lines, t_kill, r"^step \d+/", (i_res if i_res is not None else len(lines)))
        gen0_end = i_rs if i_rs is not None else len(lines)
        gen0_steps = [int(m.group(1)) for _, x in lines[:gen0_end] for m in [TENAX_STEP.match(x)] if m]
        resume_step = int(re.search(r"at step (\d+)", x_res).group(1)) if x_res else None
        milestones = [("detected", t_det, x_det), ("restart decided", t_rs, None), ("workers spawned", t_sp, None),
                      ("rank 0 ready", t_up, x_up), ("resumed", t_res, x_res), ("first step", t_st, None)]
        finished = any("training finished at step" in x for _, x in lines)
    elif system == "torchft":
        # The surviving replica group keeps its process and goes on alone once the Lighthouse has
        # a quorum without the dead group; the dead group's torchrun restarts its worker, which
        # heals from the survivor and joins again. Recovery: the first step committed without the
        # dead group (the survivor alone), as the job's first completed step after the kill;
        # "both again": the first step the restarted group takes part in.
        agent = TORCHRUN_AGENT
        i_ag, t_ag, x_ag = first_after(lines, t_kill, agent + r".*(failed \(exitcode|Worker group (FAILED|UNHEALTHY))")
        i_nc, t_nc, x_nc = first_after(lines, t_kill, r"^\[[\d.]+\] replica 0 restart 0: step \d+ not committed")
        i_st, t_st, x_st = first_after(lines, t_kill, r"^\[[\d.]+\] step \d+/\d+ .* replicas 1 replica 0 restart 0$"
                                       r"|^\[[\d.]+\] step \d+/\d+ .* replica 1 restart [1-9]\d*$")
        seen = [(t, x) for t, x in ((t_ag, x_ag), (t_nc, x_nc), (t_st, x_st)) if t is not None]
        t_det, x_det = min(seen) if seen else (None, None)
        i_rs, t_rs, _ = first_after(lines, t_kill, agent + r".*will restart worker group")
        i_pr, t_pr, x_pr = first_after(lines, t_kill, r"rank 1 restart 1 pid \d+: process started")
        i_im, t_im, x_im = first_after(lines, t_kill, r"rank 1 restart 1 pid \d+: imports done")
        i_up, t_up, x_up = first_after(lines, t_kill, r"rank 1 restart 1 pid \d+: manager ready")
        i_hl, t_hl, x_hl = first_after(lines, t_kill, r"replica 1 restart 1: healed from a peer at step \d+")
        i_bt, t_bt, x_bt = first_after(lines, t_kill, r"^\[[\d.]+\] step \d+/\d+ .* replicas 2 replica 1 restart [1-9]\d*$")
        gen0_steps = [int(m.group(1)) for t, x in lines if t < t_kill for m in [TORCH_STEP.match(x)] if m]
        resume_step = int(TORCH_STEP.match(x_st).group(1)) - 1 if x_st else None
        r["discarded"] = sum(1 for t, x in lines[i_det_index(lines, t_kill):(i_st if i_st is not None else len(lines))]
                             if "not committed" in x)
        r["both_again"] = rel(t_bt)
        milestones = [("detected", t_det, x_det), ("agent saw the exit", t_ag, x_ag),
                      ("first step alone", t_st, x_st), ("restart decided", t_rs, None),
                      ("replacement started", t_pr, x_pr), ("imported torch", t_im, x_im),
                      ("manager ready", t_up, x_up), ("healed", t_hl, x_hl), ("both again", t_bt, x_bt)]
        finished = any("training finished at step" in x for _, x in lines)
    else:
        agent = TORCHRUN_AGENT
        i_det, t_det, x_det = first_after(lines, t_kill, agent + r".*(closing signal|failed \(exitcode|Worker group (FAILED|UNHEALTHY))")
        i_rs, t_rs, _ = first_after(lines, t_kill, agent + r".*will restart worker group")
        i_sp, t_sp, _ = first_after(lines, t_kill, agent + r".*Starting worker group")
        # The restart that trained: normally restart 1. On torch 2.x a restart can fail in
        # init_process_group (Gloo's connectFullMesh "Connection refused", in smoke runs; a stale
        # address of the killed generation, we suspect) and the agent restarts again: recovery then includes the
        # failed attempt, as a user sees it, and the run counts as a success with its restarts
        # noted (torchrun_restarts), not dropped from the medians.
        i_st, t_st, x_st = first_after(lines, t_kill, r"^\[[\d.]+\] step \d+/\d+ .* restart [1-9]\d*$")
        gen = TORCH_STEP.match(x_st).group(3) if x_st else "1"
        i_pr, t_pr, x_pr = first_after(lines, t_kill, rf"rank 0 restart {gen} pid \d+: process started")
        i_im, t_im, x_im = first_after(lines, t_kill, rf"rank 0 restart {gen} pid \d+: imports done")
        i_up, t_up, x_up = first_after(lines, t_kill, rf"rank 0 restart {gen} pid \d+: process group ready")
        i_res, t_res, x_res = first_after(lines, t_kill, rf"restart {gen}: (resumed from .* at step \d+|no checkpoint)")
        gen0_steps = [int(m.group(1)) for _, x in lines for m in [TORCH_STEP.match(x)] if m and m.group(3) == "0"]
        mres = re.search(r"at step (\d+)", x_res or "")
        resume_step = int(mres.group(1)) if mres else (0 if x_res else None)
        milestones = [("detected", t_det, x_det), ("restart decided", t_rs, None), ("workers spawned", t_sp, None),
                      ("rank 0 started", t_pr, x_pr), ("rank 0 imported torch", t_im, x_im),
                      ("rank 0 ready", t_up, x_up), ("resumed", t_res, x_res), ("first step", t_st, x_st)]
        finished = any(f"restart {gen}: training finished at step" in x for _, x in lines)
        if gen != "1":
            r["torchrun_restarts"] = int(gen)

    # training speed of the restarted generation (its own "training finished" line)
    sps = None
    for _, x in lines:
        m = re.search(r"training finished at step \d+ \(([\d.]+) s, ([\d.]+) samples/s\)", x)
        if m:
            sps = float(m.group(2))
    r["samples_per_s"] = sps
    last_step = max(gen0_steps) if gen0_steps else None
    # caught up: the restarted job completes the last step done before the kill again
    t_cu = None
    if last_step is not None and i_st is not None:
        for t, x in lines[i_st:]:
            m = step_re.match(x)
            if m and int(m.group(1)) >= last_step:
                t_cu = t
                break
    r.update(detection=rel(t_det), recovery=rel(t_st), caught_up=rel(t_cu),
             restart=(t_st - t_det) if (t_st is not None and t_det is not None) else None,
             last_step=last_step, resume_step=resume_step,
             lost=(max(0, last_step - resume_step) if system == "torchft" else last_step - resume_step)
             if (last_step is not None and resume_step is not None) else None,
             finished=finished, detect_line=x_det,
             # the lines' own stamps, as a cross-check of the arrival times
             detection_stamp=rel(line_stamp(x_det, t_kill)) if x_det else None,
             recovery_stamp=rel(line_stamp(x_st, t_kill)) if x_st else None,
             milestones=[(name, rel(t), rel(line_stamp(x, t_kill)) if x else None) for name, t, x in milestones])
    expected_restarts = 1
    if system.startswith("tenax"):
        try:
            with open(os.path.join(run_dir, "agent.json")) as f:
                summary = json.load(f)
            r["restarts"] = summary.get("restarts")
            if in_process:
                # One in-process recovery, no process restart; the survivor's pid unchanged.
                recs = summary.get("in_process_recoveries", [])
                r["restarts"] = (r["restarts"] or 0) + len(recs)
                final = {w["rank"]: w["pid"] for w in summary["history"][-1]["workers"]}
                r["survivor_kept_pid"] = bool(recs) and all(final[x["rank"]] == x["pid"] for x in recs[0]["survivors"])
        except (OSError, ValueError, KeyError):
            r["restarts"] = None
    else:
        r["restarts"] = sum(1 for _, x in lines if "will restart worker group" in x)
        # a failed restart attempt (see above) is the peer's own cost, kept in its recovery time
        expected_restarts = r.get("torchrun_restarts", 1)
    problems = []
    if rc != 0:
        problems.append(f"exit status {rc}")
    if not finished:
        problems.append("no 'training finished' line")
    if r["restarts"] != expected_restarts:
        problems.append(f"{r['restarts']} restarts or in-process recoveries (expected {expected_restarts})")
    if in_process and not r.get("survivor_kept_pid"):
        problems.append("the survivor did not keep its process")
    if r["recovery"] is None:
        problems.append("no first step after the restart found")
    if problems:
        r["error"] = "; ".join(problems) + f" (log: {job.log_path})"
    return r


# ----------------------------------------------------------------------------------------------

LABELS = {
    "tenax-in-process": "Tenax in-process (survivor kept, warm spare)",
    "tenax": "Tenax restart (tenax run, 20 ms poll)",
    "torchrun-5s": "torchrun 1.13 (monitor 5 s, its default)",
    "torchrun-0.1s": "torchrun 1.13 (monitor 0.1 s, default >= 2.4)",
    "torchrun-0.02s": "torchrun 1.13 (monitor 0.02 s, its fastest here)",
}


def label(system, pypi_version, torchft_version=""):
    if system == "torchft":
        return f"torchft {torchft_version} (torch {pypi_version.split('+')[0]}, Gloo, 1st step alone)"
    m = TORCHRUN_SYSTEM.fullmatch(system)
    if m and m.group(1):
        interval = float(m.group(2))
        what = "its default" if interval == 0.1 else "its fastest" if interval == 0.02 else ""
        return f"torchrun {pypi_version.split('+')[0]} PyPI (monitor {m.group(2)} s{', ' + what if what else ''})"
    return LABELS.get(system, system)


def round_line(r):
    if "error" in r and r.get("recovery") is None:
        return f"  round {r['round']}  {r['system']:<19} ERROR: {r['error']}"
    s = (f"  round {r['round']}  {r['system']:<19} detect {fmt(r['detection'])} s  recover {fmt(r['recovery'])} s  "
         f"caught up {fmt(r['caught_up'])} s  "
         f"steps {r['last_step']} -> {r['resume_step']} (lost {r['lost']})  exit {r['exit']}  "
         f"{fmt(r['samples_per_s'], 0)} samples/s  load {r['load0']:.2f}->{r['load1']:.2f}  "
         f"other work {r['other_cores']:.2f} cores")
    if r["system"] == "torchft":
        s += f"  discarded {r.get('discarded')} step(s); both groups again {fmt(r.get('both_again'))} s"
    if r.get("torchrun_restarts"):
        s += f"  ({r['torchrun_restarts']} restarts: the first failed; times include it)"
    if "error" in r:
        s += f"  ERROR: {r['error']}"
    return s


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--max-steps", type=int, default=1000)
    p.add_argument("--save-steps", type=int, default=100)
    p.add_argument("--kill-after-step", type=int, default=150,
                   help="SIGKILL rank 1 once rank 0 has printed this step (and the checkpoint before it is committed)")
    p.add_argument("--systems", default="tenax-in-process,tenax,torchrun-5s,torchrun-0.1s,torchrun-0.02s,"
                   "torchrun-pypi-0.02s,torchft",
                   help="comma-separated: tenax-in-process, tenax, torchrun-<monitor interval>s (Debian's torch, "
                   "e.g. torchrun-1s), torchrun-pypi-<monitor interval>s (the current PyPI torch), torchft "
                   "(PyPI torchft in the same interpreter; bench/setup_torchft.sh)")
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round system order (default: random)")
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-recovery-bench"))
    p.add_argument("--results", default=None, help="results file (default bench/results/results-recovery-<UTC date>.txt)")
    p.add_argument("--python", default="/usr/bin/python3", help="the interpreter with Debian's python3-torch")
    p.add_argument("--pypi-python", default=os.path.join(REPO, ".venv-hf-pypi", "bin", "python"),
                   help="the interpreter with the current PyPI torch, for torchrun-pypi-* (bench/setup_hf_peers.sh "
                   "makes it; without it those systems are left out)")
    p.add_argument("--timeout", type=float, default=300, help="seconds a job may take")
    p.add_argument("--torchft-heartbeat-ms", type=int, default=20,
                   help="torchft: the Managers' heartbeat to the Lighthouse (torchft's default 100)")
    p.add_argument("--torchft-heartbeat-timeout-ms", type=int, default=100,
                   help="torchft: the Lighthouse declares a replica group dead after this silence (torchft's default 5000)")
    p.add_argument("--torchft-join-timeout-ms", type=int, default=1000,
                   help="torchft: how long the Lighthouse waits for heartbeating stragglers to join a quorum "
                   "(torchft's default 60000)")
    p.add_argument("--note", action="append", default=[],
                   help="a line for the results' header (e.g. where the build came from); repeatable")
    p.add_argument("--max-load", type=float, default=None,
                   help="a run starts only below this 1-minute load, else it waits and is run again (default: the "
                   "core count, the rules); a higher value is for smoke runs on a busy machine, and the results say so")
    p.add_argument("--efficiency", action="store_true",
                   help="step efficiency instead of the recovery table: each system runs --duration seconds with a "
                   "SIGKILL of one worker every --fail-every seconds, and an uninterrupted baseline run "
                   "(bench/recovery_efficiency.py; results in bench/results/results-recovery-efficiency-<date>.txt)")
    p.add_argument("--duration", type=float, default=300, help="--efficiency: seconds each run lasts")
    p.add_argument("--fail-every", type=float, default=30, help="--efficiency: seconds between kills")
    p.add_argument("--baseline-duration", type=float, default=None,
                   help="--efficiency: seconds of the uninterrupted baseline run (default --duration; shorter "
                   "is extrapolated to --duration at its steady rate, and said so in the results)")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.synth = os.path.join(a.build, "examples", "synthetic_regression", "synthetic_regression")
    if a.kill_after_step < a.save_steps or a.kill_after_step + a.save_steps > a.max_steps:
        p.error("need save-steps <= kill-after-step <= max-steps - save-steps")
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    for s in systems:
        if s not in ("tenax", "tenax-in-process", "torchft") and not TORCHRUN_SYSTEM.fullmatch(s):
            p.error(f"unknown system {s}")
    version = lambda py: subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                        text=True).stdout.strip() if os.access(py, os.X_OK) else ""
    pypi_systems = [s for s in systems if s.startswith("torchrun-pypi-") or s == "torchft"]
    pypi_version = version(a.pypi_python) if pypi_systems else ""
    left_out = []
    if pypi_systems and not pypi_version:
        # A peer that cannot run is left out, said in the results, not a crash: the other systems still compare.
        systems = [s for s in systems if s not in pypi_systems]
        left_out.append(f"  LEFT OUT: {', '.join(pypi_systems)}: {a.pypi_python} cannot import torch "
                        f"(run bench/setup_hf_peers.sh, or give --pypi-python)")
    torchft_version = ""
    if "torchft" in systems:
        torchft_version = subprocess.run([a.pypi_python, "-c", "from importlib.metadata import version; import torchft; "
                                          "print(version('torchft'))"], capture_output=True, text=True).stdout.strip()
        if not torchft_version:
            systems.remove("torchft")
            left_out.append(f"  LEFT OUT: torchft: {a.pypi_python} cannot import torchft (run bench/setup_torchft.sh)")
    for line in left_out:
        print(line.strip(), file=sys.stderr)
    if not systems:
        p.error("no system left to run")
    a.pypi_version, a.torchft_version = pypi_version, torchft_version
    if a.efficiency:
        import recovery_efficiency  # noqa: E402  bench/recovery_efficiency.py
        return recovery_efficiency.run(a, systems, left_out)
    stamp = datetime.datetime.now(datetime.timezone.utc)
    work = os.path.join(a.work_dir, f"{stamp:%Y%m%dT%H%M%S}")
    os.makedirs(work, exist_ok=True)
    report = bench_rules.Report("recovery", a.results, a.rounds)
    say = report.say
    order = bench_rules.RoundOrder(systems, a.seed)

    torch_version = version(a.python)
    say(bench_rules.header("recovery bench", a.build))
    built = ", ".join(f"{os.path.relpath(f, a.build)} {datetime.datetime.fromtimestamp(os.path.getmtime(f), datetime.timezone.utc):%H:%M:%S}"
                      for f in (os.path.join(a.build, "launcher", "tenax"), a.synth) if os.path.exists(f))
    say(f"  {platform.python_implementation()} {platform.python_version()} ({a.python}), torch {torch_version}; "
        f"build {a.build} ({built} UTC)")
    if pypi_version:
        say(f"  torchrun-pypi-*, torchft: {a.pypi_python}, torch {pypi_version} (its workers too)")
    if torchft_version:
        say(f"  torchft {torchft_version}: Lighthouse min_replicas 1, heartbeat {a.torchft_heartbeat_ms} ms, heartbeat "
            f"timeout {a.torchft_heartbeat_timeout_ms} ms, quorum tick 10 ms, join timeout {a.torchft_join_timeout_ms} ms; "
            f"one replica group per rank under torchrun --monitor_interval 0.02")
    for line in left_out:
        say(line)
    say(f"  job: 2 ranks, synthetic_regression model, {a.max_steps} steps, checkpoint every {a.save_steps}, "
        f"SIGKILL rank 1 after step {a.kill_after_step}; {a.rounds} round(s); systems {', '.join(systems)}")
    if a.max_load is not None:
        say(f"  --max-load {a.max_load}: runs may start at a load above the {os.cpu_count()} cores (a smoke run, not "
            f"by the rules)")
    for line in a.note:
        say(f"  note: {line}")
    say(f"  work dir {work}")
    say(f"  {order.describe()}")
    say()

    all_runs = []
    for rnd in range(1, a.rounds + 1):
        for s in order.next_round():
            attempt = iter(range(1000))
            r = bench_rules.run_on_quiet_machine(
                lambda: run_one(s, a, os.path.join(work, f"round{rnd}-{s}-{next(attempt)}"), rnd), say,
                f"round {rnd} {s}", max_load=a.max_load)
            all_runs.append(r)
            say(round_line(r))

    say()
    say("milestones after the kill, per run (seconds; arrival at the bench / the line's own stamp):")
    for r in all_runs:
        if "milestones" not in r:
            continue
        parts = [f"{name} {fmt(t)}" + (f"/{fmt(st)}" if st is not None else "") for name, t, st in r["milestones"]]
        say(f"  r{r['round']} {r['system']:<19} " + "; ".join(parts))
    say("  detection lines: " + " | ".join(f"{r['system']}: {r.get('detect_line')}" for r in all_runs
                                          if r["round"] == 1 and r.get("detect_line")))

    good = lambda s: [r for r in all_runs if r["system"] == s and "error" not in r]
    say()
    say(f"medians over rounds ({a.rounds}):")
    say(f"  {'system':<52} {'detect s':>9} {'recover s':>10} {'(min-max)':>13} {'restart s':>10} {'caught up s':>12} "
        f"{'lost steps':>11} {'samples/s':>10} {'runs ok':>8}")
    med = {}
    for s in systems:
        rs = good(s)
        med[s] = {k: median([r[k] for r in rs]) for k in ("detection", "recovery", "restart", "caught_up", "lost", "samples_per_s")}
        rec = [r["recovery"] for r in rs if r["recovery"] is not None]
        spread = f"{min(rec):.3f}-{max(rec):.3f}" if rec else "-"
        say(f"  {label(s, pypi_version, torchft_version):<52} {fmt(med[s]['detection']):>9} {fmt(med[s]['recovery']):>10} {spread:>13} "
            f"{fmt(med[s]['restart']):>10} "
            f"{fmt(med[s]['caught_up']):>12} {fmt(med[s]['lost'], 0):>11} {fmt(med[s]['samples_per_s'], 0):>10} "
            f"{len(rs):>4}/{a.rounds}")
    for s in systems:
        extra = [r for r in good(s) if r.get("torchrun_restarts")]
        if extra:
            say(f"  {s}: {len(extra)} of {len(good(s))} runs needed more than one restart (a failed restart; "
                f"their times include it)")
    if "torchft" in systems and good("torchft"):
        ft = good("torchft")
        both = [r["both_again"] for r in ft if r.get("both_again") is not None]
        say(f"  torchft: recovery is its surviving group's first step alone (16 samples, not 32); the restarted group "
            f"took part again after {bench_rules.median_range(both)} s (median (range), {len(both)} of {len(ft)} runs; "
            f"in the others the job ended first); steps thrown away in flight: "
            f"{', '.join(str(r.get('discarded')) for r in ft)}")
    say("  (restart: recovery minus detection, from the launcher's reaction to the first step;")
    say("   caught up: until the restarted job has again completed the last step done before the kill;")
    say("   samples/s: training speed of the restarted generation, from its 'training finished' line)")
    base = "tenax-in-process" if "tenax-in-process" in systems else "tenax" if "tenax" in systems else None
    if base:
        say()
        say(f"ratios other / {base} (within a round; median (range) over rounds; > 1: {base} is faster):")
        for s in systems:
            if s == base:
                continue
            for key in ("recovery", "detection", "caught_up"):
                per = []
                for rnd in range(1, a.rounds + 1):
                    t = [r for r in good(base) if r["round"] == rnd]
                    o = [r for r in good(s) if r["round"] == rnd]
                    if t and o and t[0][key] and o[0][key] is not None and t[0][key] > 0:
                        per.append(o[0][key] / t[0][key])
                say(f"  {key:<9} {s:<19} {bench_rules.median_range(per, 2):>18}x   "
                    f"(rounds: {', '.join(f'{x:.2f}' for x in per)})")
    busy = [r for r in all_runs if "other_cores" in r and (r["other_cores"] > 0.3 or r["load0"] > os.cpu_count())]
    say()
    if busy:
        say(f"machine busy: {len(busy)} of {len(all_runs)} runs saw other work above 0.3 cores or a load above "
            f"{os.cpu_count()} (see 'other work' per run); figures from those runs are disturbed")
    else:
        say("machine quiet: no run saw other work above 0.3 cores")
    errors = [r for r in all_runs if "error" in r]
    for r in errors:
        say(f"FAILED: round {r['round']} {r['system']}: {r['error']}")

    report.save()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
