#!/usr/bin/python3
"""Recovery of the same Python DDP job after a worker SIGKILL: `tenax run` vs torchrun (issue 16).

One job, bench/recovery_torchrun_worker.py (a plain PyTorch DDP script: Gloo, init_method="env://",
torch.save checkpoints every --save-steps, resume from the newest), under two launchers with the
same flags, only the launcher's name differs, on two torch builds:
  tenax          build/launcher/tenax run          --standalone --nproc_per_node=2 --max_restarts=3 --monitor_interval=0.02 WORKER ARGS
  torchrun       python3 -m torch.distributed.run  (the same flags)   workers on Debian's torch 1.13 (/usr/bin/python3)
  tenax-pypi     build/launcher/tenax run          (the same flags)   workers on the current PyPI torch
  torchrun-pypi  .venv-hf-pypi/bin/python -m torch.distributed.run (the same flags; --pypi-python)
(`tenax run` starts a .py script with the python3 it finds in PATH, torchrun with its own
interpreter; the -pypi pair gets the venv's bin/ first in PATH, so each pair runs its workers on
the same torch and is compared within that pair. torchrun also gets --redirects 9:0 --tee 9:0, a
workaround for torch 1.13 on Python 3.11, harmless on 2.x: see launcher(). --monitor_interval
0.02: both agents poll their workers every 20 ms, the setting the issue asks for, torchrun's
fastest and Tenax's default. Without the PyPI venv the -pypi systems are left out, with a note in
the results.) Each round runs every system, in an order shuffled per round from a printed seed
(--seed repeats it; the rules of bench/bench_rules.py), a run that starts with the load above the
core count run again. Once rank 0 has logged step --kill-after-step (after the
checkpoint of step --save-steps), the bench SIGKILLs rank 1 by the pid it wrote, and measures from
the kill instant (time.time() just before kill(2)), by the arrival of the job's output lines at the
bench (one pipe, read by a thread, stamped with time.time()):
  detection    the launcher's first line about the failure (tenax: its "worker rank 1 ... killed"
               error; torchrun: its first torch.distributed.elastic line, 1.13's "WARNING:torch.
               distributed.elastic..." or 2.x's glog-style "W1124 22:25:40.586000 PID torch/
               distributed/elastic/...")
  first step   the first training step of the restarted workers (rank 0 logs every step)
and requires exit status 0 and a resume from the checkpoint. Each run's line also gives the
restarted workers' own milestones (spawned, both imported torch, process group ready), because
one of them is a lottery under both launchers: worker rank 0 hosts PyTorch's TCPStore at
MASTER_PORT, and when rank 1 finishes `import torch` first, its connection is refused and torch
1.13 retries about a second later. Medians over the rounds with their range, and the ratios
torchrun/tenax and torchrun-pypi/tenax-pypi within each round; the results file is written by this
script (default bench/results/results-python-recovery-<UTC date>.txt).

  bench/python_recovery_bench.py --build build [--rounds 5] [--seed S] [--results FILE]
      [--systems tenax,torchrun,tenax-pypi,torchrun-pypi] [--pypi-python .venv-hf-pypi/bin/python]
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
PYPI_PYTHON = os.path.join(REPO, ".venv-hf-pypi", "bin", "python")  # bench/setup_hf_peers.sh makes it
SYSTEMS = ("tenax", "torchrun", "tenax-pypi", "torchrun-pypi")
STEP = re.compile(r"^\[[\d.]+\] step (\d+)/(\d+) .* restart (\d+)$")
RESUMED = re.compile(r"restart (\d+): resumed from .* at step (\d+)")
DETECT = {
    "tenax": re.compile(r"\[tenax\.launcher\] error: worker rank \d+ .*(killed by signal|exited)"),
    # torch 1.13: "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process ..."; torch 2.x, glog
    # style: "W1124 22:25:40.586000 5072 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process ..."
    "torchrun": re.compile(r"^((DEBUG|INFO|WARNING|ERROR|CRITICAL):torch\.distributed\.elastic"
                           r"|[DIWEC]\d{4} [\d:.]+ +\d+ torch/distributed/elastic/)"),
}
MILESTONE = re.compile(r"^\[([\d.]+)\] rank (\d) restart (\d+) pid \d+: (process started|imports done|process group ready)")
FLAGS = ["--standalone", "--nproc_per_node=2", "--max_restarts=3", "--monitor_interval=0.02"]


def launcher(system, args):
    if system.startswith("tenax"):
        return [os.path.join(args.build, "launcher", "tenax"), "run"]
    # --redirects/--tee 9:0: torch 1.13's Std.from_str("0") returns None on Python 3.11 (IntFlag
    # iteration skips the zero member) and torchrun's default "0" crashes it before any worker
    # starts; a mapping for a local rank that does not exist keeps the default (workers inherit
    # the agent's stdout), as bench/recovery_bench.py does. torch 2.x parses it the same way, so
    # both get it. No other difference.
    python = args.pypi_python if system.endswith("-pypi") else PYTHON
    return [python, "-m", "torch.distributed.run", "--redirects", "9:0", "--tee", "9:0"]


def run_once(system, args, work):
    out = os.path.join(work, system)
    subprocess.run(["rm", "-rf", out], check=True)
    os.makedirs(out)
    pid_dir = os.path.join(out, "pids")
    worker_args = ["--output-dir", out, "--max-steps", str(args.steps), "--save-steps", str(args.save_steps),
                   "--logging-steps", "1", "--pid-dir", pid_dir]
    command = launcher(system, args) + FLAGS + [WORKER] + worker_args
    # The python3 that `tenax run` starts the worker with is the first in PATH: Debian's, or the venv's.
    first = os.path.dirname(args.pypi_python) if system.endswith("-pypi") else "/usr/bin"
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PATH=first + ":" + os.environ.get("PATH", ""))
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
    result["detect"] = next((t - t_kill for t, text in after if DETECT[system.split("-")[0]].search(text)), None)
    # The restart that trained: normally restart 1. On torch 2.x a restart can fail in
    # init_process_group (Gloo's connectFullMesh "Connection refused", in smoke runs; a stale
    # address of the killed generation, we suspect) and the agent restarts again; the time to recovery then
    # includes the failed attempt, as a user would see it, and the run says how many restarts it took.
    first = next(((t, int(m.group(3))) for t, text in after if (m := STEP.match(text)) and m.group(3) != "0"), None)
    result["first_step"] = first[0] - t_kill if first else None
    result["restarts"] = first[1] if first else None
    result["resumed"] = next((int(m.group(2)) for _, text in after
                              if (m := RESUMED.search(text)) and first and int(m.group(1)) == first[1]), None)
    # The restarted workers' own stamps, for the breakdown: spawned, imports done, process group
    # ready (init_process_group: rank 0 hosts PyTorch's TCPStore at MASTER_PORT; a rank that
    # connects before it listens retries, on torch 1.13 after about a second).
    marks = {}
    for _, text in after:
        m = MILESTONE.match(text)
        if m and first and int(m.group(3)) == first[1]:
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
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated, of " + ", ".join(SYSTEMS))
    p.add_argument("--pypi-python", default=PYPI_PYTHON,
                   help="the interpreter with the current PyPI torch, for the -pypi systems (without it they are "
                   "left out)")
    p.add_argument("--results", default=None,
                   help="the results file to write (default bench/results/results-python-recovery-<UTC date>.txt)")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    systems = [x.strip() for x in args.systems.split(",") if x.strip()]
    for x in systems:
        if x not in SYSTEMS:
            p.error("unknown system %s (known: %s)" % (x, ", ".join(SYSTEMS)))

    def version(python):
        if not os.access(python, os.X_OK):
            return ""
        return subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                              text=True).stdout.strip()

    debian = [x for x in systems if not x.endswith("-pypi")]
    pypi = [x for x in systems if x.endswith("-pypi")]
    torch_version = version(PYTHON) if debian else ""
    if debian and not torch_version:
        sys.exit("%s cannot import torch: run tools/bootstrap.sh (python3-torch)" % PYTHON)
    pypi_version = version(args.pypi_python) if pypi else ""
    left_out = None
    if pypi and not pypi_version:
        # A peer that cannot run is left out, said in the results, not a crash.
        left_out = "  LEFT OUT: %s: %s cannot import torch (run bench/setup_hf_peers.sh, or give --pypi-python)" % (
            ", ".join(pypi), args.pypi_python)
        print(left_out.strip(), file=sys.stderr)
        systems = debian
        if not systems:
            p.error("no system left to run")
    report = bench_rules.Report("python-recovery", args.results, args.rounds)
    say = report.say
    order = bench_rules.RoundOrder(systems, args.seed)
    say(bench_rules.header("python recovery bench", args.build))
    say("  CPython %s; tenax %s" % (platform.python_version(), os.path.join(args.build, "launcher", "tenax")))
    if torch_version:
        say("  tenax, torchrun: workers in %s, torch %s" % (PYTHON, torch_version))
    if pypi_version:
        say("  tenax-pypi, torchrun-pypi: workers in %s, torch %s" % (args.pypi_python, pypi_version))
    if left_out:
        say(left_out)
    say("  job: %s, 2 ranks, %d steps, checkpoint every %d, SIGKILL rank 1 after step %d; %d round(s)" % (
        os.path.relpath(WORKER, REPO), args.steps, args.save_steps, args.kill_after_step, args.rounds))
    say("  systems %s; launchers: tenax run | PYTHON -m torch.distributed.run, both with %s" % (
        ", ".join(systems), " ".join(FLAGS)))
    say("  " + order.describe())
    say()
    results = []
    for r in range(1, args.rounds + 1):
        for system in order.next_round():
            res = bench_rules.run_on_quiet_machine(
                lambda: run_once(system, args, os.path.join(args.work, "round%d" % r)), say, "round %d %s" % (r, system))
            res["round"] = r
            results.append(res)
            say(("  round %d  %-13s  detect %s s  first step %s s  steps %s -> %s  exit %s   (spawned %s, both "
                 "imported %s, rank %s first; process group ready %s)  load %.2f->%.2f%s%s") % (
                r, system, fmt(res["detect"]), fmt(res["first_step"]), res["killed_after"], res["resumed"],
                res["exit"], fmt(res.get("spawned")), fmt(res.get("imports")), res.get("first_import"),
                fmt(res.get("pg_ready")), res["load0"], os.getloadavg()[0], "  (LOADED)" if res.get("loaded") else "",
                "  (%s restarts: the first failed; times include it)" % res["restarts"]
                if (res.get("restarts") or 1) > 1 else ""))
    bad = [x for x in results if x["exit"] != 0 or x["first_step"] is None or x["resumed"] != args.save_steps]
    say()
    say("median (range) over rounds:")
    for system in systems:
        mine = [x for x in results if x["system"] == system]
        d = bench_rules.median_range([x["detect"] for x in mine])
        f = bench_rules.median_range([x["first_step"] for x in mine])
        g = bench_rules.median_range([x["pg_ready"] - x["imports"] for x in mine
                                      if x.get("pg_ready") is not None and x.get("imports") is not None])
        extra = sum(1 for x in mine if (x.get("restarts") or 1) > 1)
        say("  %-13s  detect %s s  first step after the restart %s s  (init_process_group after both imported: "
            "%s s; %d rounds%s)" % (system, d, f, g, len(mine),
                                    ", %d needed more than one restart" % extra if extra else ""))
    for suffix in ("", "-pypi"):  # each torchrun against tenax with its workers on the same torch
        ratio = [y["first_step"] / x["first_step"] for x in results for y in results
                 if x["system"] == "tenax" + suffix and y["system"] == "torchrun" + suffix and x["round"] == y["round"]
                 and x["first_step"] and y["first_step"]]
        if ratio:
            say("  per-round ratio torchrun%s/tenax%s, first step after the restart: %sx  (rounds: %s)"
                % (suffix, suffix, bench_rules.median_range(ratio, 2), ", ".join("%.2f" % x for x in ratio)))
    if bad:
        say("  INVALID runs (exit != 0, no restart step, or not resumed from step %d): %d" % (args.save_steps, len(bad)))
    report.save()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
