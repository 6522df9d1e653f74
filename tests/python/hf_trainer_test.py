#!/usr/bin/env python3
"""tenax.hf.TenaxCallback in a real `transformers.Trainer` DDP job under `tenax run` (issue 16).

hf_trainer_script.py (tiny BERT from a BertConfig, synthetic data, Hugging Face's own
checkpoint-N every 5 steps, resume from tenax.hf.resume_checkpoint()) runs with two workers,
started in torchrun's form (`tenax run --nproc_per_node=2 SCRIPT.py`):
  kill     rank 1 stops itself before step 14; the test leaves a half-written checkpoint-15
           behind (a model file and a truncated trainer_state.json, as a kill during Hugging
           Face's save would) and SIGKILLs rank 1 by pid; the agent restarts both workers, which
           must resume from checkpoint-10 (not the half-written 15, not from scratch) and finish;
  preempt  rank 1 stops itself before step 14; SIGUSR1 to the agent (Slurm's --signal=USR1
           warning), and once the agent has forwarded it to the stopped worker, rank 1 goes on:
           both ranks agree at step 14, Hugging Face saves checkpoint-14, every worker exits 3,
           `tenax run` exits 3 with outcome "preempted" and no restart; the same command again
           resumes from checkpoint-14 and finishes;
  hang     rank 1 stops itself before step 14 and nothing is sent: the agent's --hang-timeout
           finds it hung from the progress TenaxCallback reports, restarts, the job resumes from
           checkpoint-10 and finishes;
  linger   no stop; after train() rank 1 takes 12 s to leave, with --hang-timeout 5: training is
           over (on_train_end took the progress file away), so nobody is judged hung, no restart.

It runs the workers with --python (the venv of tools/setup_python_hf.sh: Debian's torch 1.13 +
hashed transformers wheels); without transformers there it fails, saying so: never skipped.

  python3 hf_trainer_test.py --tenax build/launcher/tenax --python .assets/venv-hf-torch113/bin/python --out /tmp/hf
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys

import ddp_kill_resume_test as base
from ddp_guard_test import signal_pending, wait_until
from ddp_kill_resume_test import check, summary

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "hf_trainer_script.py")
STEPS, SAVE_STEPS, STOP_AT = 30, 5, 13  # rank 1 stops before step STOP_AT + 1
EXIT_PREEMPTED = 3
ARGS = None


def start(case_dir, stop=True, log_name="tenax.log", tenax_flags=(), script_flags=()):
    os.makedirs(os.path.join(case_dir, "out"), exist_ok=True)
    env = dict(os.environ)
    env["GLOO_SOCKET_IFNAME"] = "lo"
    # torchrun's form runs `python3` from PATH: the venv's.
    env["PATH"] = os.path.dirname(ARGS.python) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join([base.PYTHON_PACKAGE, env.get("PYTHONPATH", "")])
    env.pop("PYTHONHOME", None)
    command = [ARGS.tenax, "run", "--nproc_per_node=2", "--max_restarts=3"] + list(tenax_flags) + [SCRIPT,
               "--out", os.path.join(case_dir, "out"), "--steps", str(STEPS), "--save-steps", str(SAVE_STEPS)]
    if stop:
        command += ["--stop-at-step", str(STOP_AT), "--stop-rank", "1"]
    command += list(script_flags)
    print("$ (cd %s && %s)" % (case_dir, " ".join(command)), flush=True)
    log = open(os.path.join(case_dir, log_name), "w")
    return subprocess.Popen(command, cwd=case_dir, env=env, stdout=log, stderr=subprocess.STDOUT), log


def wait(name, agent, log, expected):
    try:
        code = agent.wait(timeout=base.STAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        agent.kill()
        code = agent.wait()
    log.close()
    text = open(log.name).read()
    if not check(code == expected, "%s: tenax run exited %s, not %d" % (name, code, expected)):
        print(text[-6000:], flush=True)
    return text


def started_at(case_dir, rank, generation):
    path = os.path.join(case_dir, "out", "start-r%d-g%d.txt" % (rank, generation))
    return int(open(path).read()) if os.path.exists(path) else None


def trainer_step(checkpoint_dir):
    """global_step of a checkpoint's trainer_state.json, or None if it is missing or unreadable."""
    try:
        with open(os.path.join(checkpoint_dir, "trainer_state.json")) as f:
            return json.load(f)["global_step"]
    except (OSError, ValueError, KeyError):
        return None


def check_finished(name, case_dir):
    path = os.path.join(case_dir, "out", "final.json")
    if check(os.path.exists(path), "%s: no final.json: training did not finish" % name):
        step = json.load(open(path))["global_step"]
        check(step == STEPS, "%s: training ended at step %s, expected %d" % (name, step, STEPS))


def stopped_worker(name, agent):
    stopped = base.wait_for_stopped_worker([agent], base.STAGE_TIMEOUT)
    if not check(stopped is not None, "%s: no worker stopped itself before step %d" % (name, STOP_AT + 1)):
        agent.kill()
    return stopped


def run_kill():
    name = "kill"
    case_dir = os.path.join(ARGS.out, name)
    agent, log = start(case_dir)
    stopped = stopped_worker(name, agent)
    if stopped is None:
        return
    # What a kill during Hugging Face's save of checkpoint-15 would leave: the model written, the
    # trainer_state.json (written last, in place) cut short.
    half = os.path.join(case_dir, "out", "hf", "checkpoint-15")
    os.makedirs(half)
    with open(os.path.join(half, "model.safetensors"), "wb") as f:
        f.write(b"\0" * 64)
    with open(os.path.join(half, "trainer_state.json"), "w") as f:
        f.write('{"global_step": 15, "log_hist')
    os.kill(stopped, signal.SIGKILL)
    wait(name, agent, log, 0)
    s = summary(case_dir)
    check(s.get("restarts") == 1, "%s: %s restart(s), expected 1" % (name, s.get("restarts")))
    for r in range(2):
        check(started_at(case_dir, r, 0) == 0, "%s: rank %d started at step %s, expected 0"
              % (name, r, started_at(case_dir, r, 0)))
        check(started_at(case_dir, r, 1) == 10, "%s: rank %d of the restart resumed at step %s, expected 10 "
              "(checkpoint-15 was half-written)" % (name, r, started_at(case_dir, r, 1)))
    check(trainer_step(half) == 15, "%s: the resumed run did not save checkpoint-15 again" % name)
    check_finished(name, case_dir)


def run_preempt():
    name = "preempt"
    case_dir = os.path.join(ARGS.out, name)
    agent, log = start(case_dir)
    stopped = stopped_worker(name, agent)
    if stopped is None:
        return
    os.kill(agent.pid, signal.SIGUSR1)
    check(wait_until(lambda: signal_pending(stopped, signal.SIGUSR1), 30),
          "%s: the agent did not forward SIGUSR1 to the stopped worker %d" % (name, stopped))
    os.kill(stopped, signal.SIGCONT)
    text = wait(name, agent, log, EXIT_PREEMPTED)
    s = summary(case_dir)
    check(s.get("outcome") == "preempted" and s.get("restarts") == 0,
          "%s: agent.json says outcome %s, %s restart(s); expected preempted, 0"
          % (name, s.get("outcome"), s.get("restarts")))
    preempt_step = STOP_AT + 1  # the step in flight when the signal landed
    for r in range(2):
        check("rank %d: preempted (signal %d) after step %d" % (r, signal.SIGUSR1, preempt_step) in text,
              "%s: rank %d did not stop after step %d" % (name, r, preempt_step))
        check("rank %d: checkpoint-%d saved; exiting 3" % (r, preempt_step) in text,
              "%s: rank %d did not exit 3 after the save" % (name, r))
    saved = os.path.join(case_dir, "out", "hf", "checkpoint-%d" % preempt_step)
    check(trainer_step(saved) == preempt_step, "%s: no complete %s" % (name, saved))
    check(not os.path.exists(os.path.join(case_dir, "out", "final.json")), "%s: finished despite the preemption" % name)

    # The requeued job: the same command (a requeued job starts at restart count 0 again, so the
    # stop hook would fire again; it is left out).
    agent, log = start(case_dir, stop=False, log_name="tenax-requeued.log")
    wait("%s (requeued)" % name, agent, log, 0)
    for r in range(2):
        check(started_at(case_dir, r, 0) == preempt_step, "%s: rank %d of the requeued job resumed at step %s, "
              "expected %d" % (name, r, started_at(case_dir, r, 0), preempt_step))
    check_finished("%s (requeued)" % name, case_dir)


def run_hang():
    """Rank 1 stops before step 14 and nothing is sent: only the progress TenaxCallback reports
    lets the agent's --hang-timeout find it hung (a script that reports none is never declared
    hung); the agent kills it, restarts, and the job resumes from checkpoint-10."""
    name = "hang"
    case_dir = os.path.join(ARGS.out, name)
    agent, log = start(case_dir, tenax_flags=["--hang-timeout", "10"])
    stopped = stopped_worker(name, agent)
    if stopped is None:
        return
    text = wait(name, agent, log, 0)
    check("treating it as hung" in text, "%s: the agent did not declare a worker hung" % name)
    s = summary(case_dir)
    check(s.get("restarts") == 1, "%s: %s restart(s), expected 1" % (name, s.get("restarts")))
    for r in range(2):
        check(started_at(case_dir, r, 1) == 10, "%s: rank %d of the restart resumed at step %s, expected 10"
              % (name, r, started_at(case_dir, r, 1)))
    check_finished(name, case_dir)


def run_linger():
    """Training ends, then rank 1 takes longer than --hang-timeout to leave (rank 0 waits for it at
    the last barrier): a slow teardown on a loaded machine, not a hang. TenaxCallback's
    on_train_end takes the progress file away, so the agent judges neither worker and the job
    ends without a restart. (Before it did, the agent declared the lingering worker hung, and the
    restarted job resumed from checkpoint-30 and ran one step more: the flake this case pins.)"""
    name = "linger"
    case_dir = os.path.join(ARGS.out, name)
    agent, log = start(case_dir, stop=False, tenax_flags=["--hang-timeout", "5"],
                       script_flags=["--linger-after-train", "12"])
    text = wait(name, agent, log, 0)
    check("treating it as hung" not in text, "%s: the agent declared a worker hung after training ended" % name)
    s = summary(case_dir)
    check(s.get("restarts") == 0, "%s: %s restart(s), expected 0" % (name, s.get("restarts")))
    check_finished(name, case_dir)


def require_transformers():
    probe = "import torch, transformers; print(transformers.__version__, torch.__version__)"
    try:
        out = subprocess.run([ARGS.python, "-c", probe], capture_output=True, text=True, timeout=120)
    except OSError as e:
        out = None
        why = str(e)
    else:
        why = out.stderr.strip().splitlines()[-1:] if out.returncode else None
    if out is None or out.returncode != 0:
        print("FAILED: %s cannot import torch and transformers (%s); run tools/setup_python_hf.sh (`make assets` "
              "does)" % (ARGS.python, why), flush=True)
        return False
    print("transformers, torch: %s with %s" % (out.stdout.strip(), ARGS.python), flush=True)
    return True


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tenax", required=True, help="the tenax binary")
    p.add_argument("--python", required=True, help="an interpreter with torch and transformers")
    p.add_argument("--out", required=True, help="scratch directory (emptied first)")
    ARGS = p.parse_args()
    ARGS.tenax = os.path.abspath(ARGS.tenax)
    base.ARGS = ARGS
    if not require_transformers():
        return 1
    shutil.rmtree(ARGS.out, ignore_errors=True)
    os.makedirs(ARGS.out)
    run_kill()
    run_preempt()
    run_hang()
    run_linger()
    if base.failures:
        print("%d check(s) failed" % len(base.failures), flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
