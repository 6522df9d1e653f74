#!/usr/bin/python3
"""Recovery of the same Python DDP job after a worker SIGKILL: `tenax run` vs torchrun (issue 16).

One job, bench/recovery_torchrun_worker.py (a plain PyTorch DDP script: Gloo, init_method="env://",
torch.save checkpoints every --save-steps, resume from the newest), on Debian's torch 1.13, under
two launchers with the same flags, only the launcher's name differs:
  tenax     build/launcher/tenax run          --standalone --nproc_per_node=2 --max_restarts=3 --monitor_interval=0.02 WORKER ARGS
  torchrun  python3 -m torch.distributed.run  --standalone --nproc_per_node=2 --max_restarts=3 --monitor_interval=0.02 WORKER ARGS
(torchrun also gets --redirects 9:0 --tee 9:0, a workaround for torch 1.13 on Python 3.11: see
launcher(). --monitor_interval 0.02: both agents poll their workers every 20 ms, the setting the
issue asks for and Tenax's default.) Each round runs both, in an order shuffled per round from a
printed seed (--seed repeats it; the rules of bench/bench_rules.py), a run that starts with the
load above the core count run again. Once rank 0 has logged step --kill-after-step (after the
checkpoint of step --save-steps), the bench SIGKILLs rank 1 by the pid it wrote, and measures from
the kill instant (time.time() just before kill(2)), by the arrival of the job's output lines at the
bench (one pipe, read by a thread, stamped with time.time()):
  detection    the launcher's first line about the failure (tenax: its "worker rank 1 ... killed"
               error; torchrun: its first torch.distributed.elastic line)
  first step   the first training step of the restarted workers (rank 0 logs every step)
and requires exit status 0 and a resume from the checkpoint. Each run's line also gives the
restarted workers' own milestones (spawned, both imported torch, process group ready), because
one of them is a lottery under both launchers: worker rank 0 hosts PyTorch's TCPStore at
MASTER_PORT, and when rank 1 finishes `import torch` first, its connection is refused and torch
1.13 retries about a second later. Medians over the rounds with their range, and the ratio
torchrun/tenax within each round; the results file is written by this script (default
bench/results-python-recovery-<UTC date>.txt).

  bench/python_recovery_bench.py --build build [--rounds 5] [--seed S] [--results FILE]
"""
import argparse
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

REPO = bench_rules.REPO
WORKER = os.path.join(REPO, "bench", "recovery_torchrun_worker.py")
PYTHON = "/usr/bin/python3"  # Debian's, where python3-torch lives; first in the workers' PATH too
STEP = re.compile(r"^\[[\d.]+\] step (\d+)/(\d+) .* restart (\d+)$")
RESUMED = re.compile(r"restart 1: resumed from .* at step (\d+)")
DETECT = {
    "tenax": re.compile(r"\[tenax\.launcher\] error: worker rank \d+ .*(killed by signal|exited)"),
    "torchrun": re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):torch\.distributed\.elastic"),
}
MILESTONE = re.compile(r"^\[([\d.]+)\] rank (\d) restart (\d+) pid \d+: (process started|imports done|process group ready)")
FLAGS = ["--standalone", "--nproc_per_node=2", "--max_restarts=3", "--monitor_interval=0.02"]


def launcher(system, build):
    if system == "tenax":
        return [os.path.join(build, "launcher", "tenax"), "run"]
    # --redirects/--tee 9:0: torch 1.13's Std.from_str("0") returns None on Python 3.11 (IntFlag
    # iteration skips the zero member) and torchrun's default "0" crashes it before any worker
    # starts; a mapping for a local rank that does not exist keeps the default (workers inherit
    # the agent's stdout), as bench/recovery_bench.py does. No other difference.
    return [PYTHON, "-m", "torch.distributed.run", "--redirects", "9:0", "--tee", "9:0"]


def run_once(system, args, work):
    out = os.path.join(work, system)
    subprocess.run(["rm", "-rf", out], check=True)
    os.makedirs(out)
    pid_dir = os.path.join(out, "pids")
    worker_args = ["--output-dir", out, "--max-steps", str(args.steps), "--save-steps", str(args.save_steps),
                   "--logging-steps", "1", "--pid-dir", pid_dir]
    command = launcher(system, args.build) + FLAGS + [WORKER] + worker_args
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PATH="/usr/bin:" + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    lines = []  # (arrival time, text)
    proc = subprocess.Popen(command, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)

    def reader():
        for line in proc.stdout:
            lines.append((time.time(), line.rstrip("\n")))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    # Wait for rank 0's step --kill-after-step, then kill rank 1 of the first generation by pid.
    deadline = time.monotonic() + args.timeout
    t_kill = None
    while time.monotonic() < deadline and proc.poll() is None:
        if any((m := STEP.match(text)) and int(m.group(1)) >= args.kill_after_step for _, text in list(lines)):
            with open(os.path.join(pid_dir, "rank1-restart0.pid")) as f:
                victim = int(f.read())
            t_kill = time.time()
            os.kill(victim, signal.SIGKILL)
            break
        time.sleep(0.005)
    try:
        code = proc.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    thread.join(timeout=10)
    with open(os.path.join(out, "output.log"), "w") as f:
        f.writelines("%.6f %s\n" % (t, text) for t, text in lines)
    result = {"system": system, "exit": code, "detect": None, "first_step": None, "resumed": None, "killed_after": None}
    if t_kill is None:
        return result
    after = [(t, text) for t, text in lines if t >= t_kill]
    before = [int(m.group(1)) for t, text in lines if t < t_kill and (m := STEP.match(text))]
    result["killed_after"] = max(before) if before else None
    result["detect"] = next((t - t_kill for t, text in after if DETECT[system].search(text)), None)
    result["first_step"] = next((t - t_kill for t, text in after if (m := STEP.match(text)) and m.group(3) == "1"),
                                None)
    result["resumed"] = next((int(m.group(1)) for _, text in after if (m := RESUMED.search(text))), None)
    # The restarted workers' own stamps, for the breakdown: spawned, imports done, process group
    # ready (init_process_group: rank 0 hosts PyTorch's TCPStore at MASTER_PORT; a rank that
    # connects before it listens retries, on torch 1.13 after about a second).
    marks = {}
    for _, text in after:
        m = MILESTONE.match(text)
        if m and m.group(3) == "1":
            marks.setdefault((int(m.group(2)), m.group(4)), float(m.group(1)) - t_kill)
    result["spawned"] = marks.get((0, "process started"))
    imports = [marks.get((r, "imports done")) for r in (0, 1)]
    result["imports"] = max(imports) if None not in imports else None
    result["first_import"] = None if None in imports else (0 if imports[0] <= imports[1] else 1)
    result["pg_ready"] = marks.get((0, "process group ready"))
    return result


def fmt(x):
    return "-" if x is None else "%.3f" % x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order (default: random, printed)")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--save-steps", type=int, default=100)
    p.add_argument("--kill-after-step", type=int, default=150)
    p.add_argument("--timeout", type=float, default=180)
    p.add_argument("--work", default="/tmp/tenax-python-recovery-bench")
    p.add_argument("--results", default=None,
                   help="the results file to write (default bench/results-python-recovery-<UTC date>.txt)")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    torch_version = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                   text=True).stdout.strip()
    if not torch_version:
        sys.exit("%s cannot import torch: run tools/bootstrap.sh (python3-torch)" % PYTHON)
    report = bench_rules.Report("python-recovery", args.results, args.rounds)
    say = report.say
    order = bench_rules.RoundOrder(["tenax", "torchrun"], args.seed)
    say(bench_rules.header("python recovery bench"))
    say("  CPython %s (%s), torch %s; tenax %s" % (platform.python_version(), PYTHON, torch_version,
                                                   os.path.join(args.build, "launcher", "tenax")))
    say("  job: %s, 2 ranks, %d steps, checkpoint every %d, SIGKILL rank 1 after step %d; %d round(s)" % (
        os.path.relpath(WORKER, REPO), args.steps, args.save_steps, args.kill_after_step, args.rounds))
    say("  launchers: tenax run | python3 -m torch.distributed.run, both with " + " ".join(FLAGS))
    say("  " + order.describe())
    say()
    results = []
    for r in range(1, args.rounds + 1):
        for system in order.next_round():
            res = bench_rules.run_on_quiet_machine(
                lambda: run_once(system, args, os.path.join(args.work, "round%d" % r)), say, "round %d %s" % (r, system))
            res["round"] = r
            results.append(res)
            say(("  round %d  %-8s  detect %s s  first step %s s  steps %s -> %s  exit %s   (spawned %s, both "
                 "imported %s, rank %s first; process group ready %s)  load %.2f->%.2f%s") % (
                r, system, fmt(res["detect"]), fmt(res["first_step"]), res["killed_after"], res["resumed"],
                res["exit"], fmt(res.get("spawned")), fmt(res.get("imports")), res.get("first_import"),
                fmt(res.get("pg_ready")), res["load0"], os.getloadavg()[0], "  (LOADED)" if res.get("loaded") else ""))
    bad = [x for x in results if x["exit"] != 0 or x["first_step"] is None or x["resumed"] != args.save_steps]
    say()
    say("median (range) over rounds:")
    for system in ("tenax", "torchrun"):
        mine = [x for x in results if x["system"] == system]
        d = bench_rules.median_range([x["detect"] for x in mine])
        f = bench_rules.median_range([x["first_step"] for x in mine])
        g = bench_rules.median_range([x["pg_ready"] - x["imports"] for x in mine
                                      if x.get("pg_ready") is not None and x.get("imports") is not None])
        say("  %-8s  detect %s s  first step after the restart %s s  (init_process_group after both imported: "
            "%s s; %d rounds)" % (system, d, f, g, len(mine)))
    ratio = [y["first_step"] / x["first_step"] for x in results for y in results
             if x["system"] == "tenax" and y["system"] == "torchrun" and x["round"] == y["round"]
             and x["first_step"] and y["first_step"]]
    if ratio:
        say("  per-round ratio torchrun/tenax, first step after the restart: %sx  (rounds: %s)"
            % (bench_rules.median_range(ratio, 2), ", ".join("%.2f" % x for x in ratio)))
    if bad:
        say("  INVALID runs (exit != 0, no restart step, or not resumed from step %d): %d" % (args.save_steps, len(bad)))
    report.save()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
