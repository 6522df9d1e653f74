#!/usr/bin/env python3
"""Tenax's Python helper (python/tenax, issue 16 point 2) in a real DDP job under `tenax run`.

ddp_checkpoint.py --tenax-guard (plain DDP, Gloo, its own torch.save checkpoints, and a
tenax.StepGuard called after every step) runs with two workers:
  reference  uninterrupted;
  preempt    rank 1 stops itself before step 23; this test sends SIGUSR1 to the agent (as Slurm's
             --signal=USR1 warning would) and, once the agent has forwarded it to the stopped
             worker (seen in /proc: the signal is pending there), lets rank 1 go on. Both ranks
             must agree on the preemption at the same step (24: the step in flight), rank 0 saves
             there, the job exits 3 with outcome "preempted" and no restart; the same command
             run again resumes at step 24 and ends with parameters equal, bit for bit, to the
             reference's;
  preempt-rank0-only  the same with SIGUSR1 sent to rank 0 alone: rank 1 stops at step 24 too,
             because the guard's decision is agreed across ranks;
  hang       rank 1 stops itself before step 23 and nothing is sent: only the progress that the
             guard reports lets the agent's --hang-timeout find the worker hung; the agent kills
             the stopped process, restarts, the job resumes at step 20 and ends equal.
And newest_complete_checkpoint() on real directories: a checkpoint without its trainer_state.json
(the file Hugging Face's Trainer writes last) is skipped.

Without `import torch` it fails, as ddp_kill_resume_test.py (tools/bootstrap.sh installs it).

  python3 ddp_guard_test.py --tenax build/launcher/tenax --out /tmp/ddp-guard
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import ddp_kill_resume_test as base
from ddp_kill_resume_test import check, finish, start, summary

sys.path.insert(0, base.PYTHON_PACKAGE)
import tenax  # noqa: E402  (python/tenax, from the repository)

STOP_AT = 23
PREEMPT_STEP = STOP_AT + 1  # the step in flight when the signal lands
GUARD = ["--tenax-guard"]


def signal_pending(pid, signum):
    """Whether `signum` is pending for process `pid` (its shared or thread pending set)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return False
    bit = 1 << (signum - 1)
    return any(int(fields.get(key, "0").strip(), 16) & bit for key in ("ShdPnd", "SigPnd"))


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def started_at(case_dir, rank, generation):
    path = os.path.join(case_dir, "out", "start-r%d-g%d.txt" % (rank, generation))
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return int(f.read())


def worker_pid(case_dir, rank):
    """The pid rank `rank` of the first generation recorded at its start (env-r*-g0.json)."""
    import json
    path = os.path.join(case_dir, "out", "env-r%d-g0.json" % rank)
    if not wait_until(lambda: os.path.exists(path), 30):
        return None
    with open(path) as f:
        return json.load(f)["pid"]


def run_preempt(name, to_agent):
    """to_agent: SIGUSR1 to the agent, which forwards it to every worker (Slurm's warning to the
    job step); otherwise to rank 0 alone, by pid: rank 1 never sees a signal, so only the
    guard's agreement can make it stop at the same step (a guard that acted on its own rank's
    signal would leave rank 1 waiting in the next step's allreduce for a peer that has gone)."""
    case_dir = os.path.join(base.ARGS.out, name)
    program = [sys.executable, "-u", base.SCRIPT] + GUARD + ["--stop-at-step", str(STOP_AT), "--stop-rank", "1"]
    agent, log = start(case_dir, ["--nproc-per-node", "2", "--max-restarts", "3", "--"], program)
    stopped = base.wait_for_stopped_worker([agent], base.STAGE_TIMEOUT)
    if not check(stopped is not None, "%s: no worker stopped itself before step %d" % (name, STOP_AT)):
        agent.kill()
        return
    if to_agent:
        os.kill(agent.pid, signal.SIGUSR1)
        check(wait_until(lambda: signal_pending(stopped, signal.SIGUSR1), 30),
              "%s: the agent did not forward SIGUSR1 to the stopped worker %d" % (name, stopped))
    else:
        rank0 = worker_pid(case_dir, 0)
        if not check(rank0 is not None and rank0 != stopped, "%s: rank 0's pid is not known" % name):
            agent.kill()
            return
        os.kill(rank0, signal.SIGUSR1)
    os.kill(stopped, signal.SIGCONT)
    try:
        code = agent.wait(timeout=base.STAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        agent.kill()
        code = agent.wait()
    log.close()
    text = open(log.name).read()
    if not check(code == tenax.EXIT_PREEMPTED, "%s: tenax run exited %s, not %d" % (name, code, tenax.EXIT_PREEMPTED)):
        print(text[-6000:], flush=True)
    s = summary(case_dir)
    check(s.get("outcome") == "preempted" and s.get("restarts") == 0,
          "%s: agent.json says outcome %s, %s restart(s); expected preempted, 0" % (name, s.get("outcome"),
                                                                                    s.get("restarts")))
    for r in range(2):
        check("rank %d: preempted (signal %d) after step %d" % (r, signal.SIGUSR1, PREEMPT_STEP) in text,
              "%s: rank %d did not stop after step %d" % (name, r, PREEMPT_STEP))
    saved = os.path.join(case_dir, "out", "checkpoints", "ckpt-%06d.pt" % PREEMPT_STEP)
    check(os.path.exists(saved), "%s: no checkpoint at the preempted step: %s" % (name, saved))
    check(not os.path.exists(os.path.join(case_dir, "out", "final.pt")), "%s: finished despite the preemption" % name)

    # The requeued job: the same command, no stop this time (TORCHELASTIC_RESTART_COUNT is 0 again,
    # so the stop hook is left out of the command).
    agent, log = start(case_dir, ["--nproc-per-node", "2", "--max-restarts", "3", "--"],
                       [sys.executable, "-u", base.SCRIPT] + GUARD, "tenax-requeued.log")
    finish("%s (requeued)" % name, agent, log)
    for r in range(2):
        check(started_at(case_dir, r, 0) == PREEMPT_STEP,
              "%s: rank %d of the requeued job started at step %s, expected %d"
              % (name, r, started_at(case_dir, r, 0), PREEMPT_STEP))
    base.check_equal_parameters(name, case_dir, base.REFERENCE)


def run_hang():
    name = "hang"
    case_dir = os.path.join(base.ARGS.out, name)
    program = [sys.executable, "-u", base.SCRIPT] + GUARD + ["--stop-at-step", str(STOP_AT), "--stop-rank", "1"]
    agent, log = start(case_dir, ["--nproc-per-node", "2", "--max-restarts", "3", "--hang-timeout", "3", "--"],
                       program)
    stopped = base.wait_for_stopped_worker([agent], base.STAGE_TIMEOUT)
    check(stopped is not None, "%s: no worker stopped itself before step %d" % (name, STOP_AT))
    text = finish(name, agent, log)
    check("treating it as hung" in text, "%s: the agent did not declare a worker hung" % name)
    s = summary(case_dir)
    check(s.get("restarts") == 1, "%s: %s restart(s), expected 1" % (name, s.get("restarts")))
    if stopped is not None:
        check(not os.path.exists("/proc/%d" % stopped) or open("/proc/%d/stat" % stopped).read().split(")")[-1].split()[0] == "Z",
              "%s: the stopped worker %d was left behind" % (name, stopped))
    for r in range(2):
        check(started_at(case_dir, r, 1) == 20, "%s: rank %d of the restart started at step %s, expected 20"
              % (name, r, started_at(case_dir, r, 1)))
    base.check_equal_parameters(name, case_dir, base.REFERENCE)


def check_newest_complete_checkpoint():
    with tempfile.TemporaryDirectory() as d:
        check(tenax.newest_complete_checkpoint(os.path.join(d, "absent")) is None, "an absent directory: not None")
        for step, complete in ((10, True), (20, True), (30, False)):
            path = os.path.join(d, "checkpoint-%d" % step)
            os.makedirs(path)
            with open(os.path.join(path, "model.safetensors"), "w") as f:
                f.write("weights")
            if complete:
                with open(os.path.join(path, "trainer_state.json"), "w") as f:
                    f.write("{}")
        os.makedirs(os.path.join(d, "checkpoint-tmp"))
        got = tenax.newest_complete_checkpoint(d)
        check(got == os.path.join(d, "checkpoint-20"),
              "newest_complete_checkpoint: %s, expected checkpoint-20 (checkpoint-30 is half-written)" % got)
        check(os.path.isdir(os.path.join(d, "checkpoint-30")), "the half-written checkpoint is left alone")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tenax", required=True, help="the tenax binary")
    p.add_argument("--out", required=True, help="scratch directory (emptied first)")
    base.ARGS = p.parse_args()
    base.ARGS.tenax = os.path.abspath(base.ARGS.tenax)
    torch = base.require_torch()
    if torch is None:
        return 1
    print("torch %s from %s" % (torch.__version__, os.path.dirname(torch.__file__)), flush=True)
    shutil.rmtree(base.ARGS.out, ignore_errors=True)
    os.makedirs(base.ARGS.out)

    check_newest_complete_checkpoint()
    name = "reference"
    agent, log = start(os.path.join(base.ARGS.out, name), ["--nproc-per-node", "2", "--"],
                       [sys.executable, "-u", base.SCRIPT] + GUARD)
    finish(name, agent, log)
    final = os.path.join(base.ARGS.out, name, "out", "final.pt")
    if not check(os.path.exists(final), "reference: no final.pt"):
        return 1
    base.REFERENCE = base.final_parameters(os.path.join(base.ARGS.out, name))
    run_preempt("preempt", to_agent=True)
    run_preempt("preempt-rank0-only", to_agent=False)
    run_hang()

    if base.failures:
        print("%d check(s) failed" % len(base.failures), flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
