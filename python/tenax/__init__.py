"""Tenax's fault tolerance for Python training scripts run by `tenax run` (or torchrun).

`tenax run` restarts the workers after a failure, declares a worker hung when its progress file
stops changing (--hang-timeout), and turns a preemption (Slurm's warning signal, scancel) into a
SIGUSR1 or SIGTERM to every worker, expecting each to save and exit 3 so that the job is requeued
and resumes. A script takes part with a StepGuard called once per step:

    import tenax
    guard = tenax.StepGuard()                      # installs the SIGUSR1 / SIGTERM handlers
    for step in range(start, steps):
        train_one_step(...)
        if guard.step_end(step + 1):               # collective when torch.distributed is up
            save_checkpoint(step + 1)              # every rank stopped after the same step
            tenax.exit_worker(tenax.EXIT_PREEMPTED)
    tenax.exit_worker(0)                           # the end of the script, on every rank

A transformers.Trainer script uses tenax.hf.TenaxCallback instead (tenax/hf.py; it imports
transformers, which `import tenax` never does).

Pure Python; torch is imported only when a process group is initialised (the agreement).
"""
import logging
import os
import signal
import sys
import time

__all__ = ["EXIT_PREEMPTED", "ProgressFile", "StepGuard", "exit_worker", "newest_complete_checkpoint"]

# The exit status that tells `tenax run` (and slurm/tenax-requeue) "preempted, checkpoint saved:
# requeue me" rather than "failed".
EXIT_PREEMPTED = 3

# The signals a scheduler sends ahead of a preemption: Slurm's --signal=USR1@N warning, and the
# SIGTERM of scancel or of the end of the time limit (the agent forwards SIGINT as SIGTERM).
PREEMPTION_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class ProgressFile:
    """The file named by TENAX_PROGRESS_FILE, rewritten with the latest step (at most every
    `min_interval` seconds; the agent looks at its modification time once a second). Without the
    variable it does nothing. A write that fails is reported once and otherwise ignored: progress
    reporting must never stop a run (elastic/include/tenax/elastic/progress_file.h does the same
    for C++ workers)."""

    def __init__(self, path=None, min_interval=0.25):
        self.path = os.environ.get("TENAX_PROGRESS_FILE", "") if path is None else path
        self.min_interval = min_interval
        self._last_write = None
        self._warned = False

    def report(self, step):
        if not self.path:
            return
        now = time.monotonic()
        if self._last_write is not None and now - self._last_write < self.min_interval:
            return
        try:
            with open(self.path, "w") as f:  # in place, not renamed: only the mtime matters
                f.write("%d\n" % step)
        except OSError as e:
            if not self._warned:
                self._warned = True
                print("tenax: cannot write the progress file %s (%s); the agent's --hang-timeout may take "
                      "this worker for hung" % (self.path, e), flush=True)
        self._last_write = now

    def finish(self):
        """A phase that reports progress (training, an evaluation) is over: the file goes, and with
        it the agent's judgement (it judges only a worker whose file exists), so that what
        follows — the last barrier, the interpreter's teardown — may be silent for longer than
        --hang-timeout without being taken for a hang. The next report() starts judging again."""
        self._last_write = None
        if self.path:
            try:
                os.remove(self.path)
            except OSError:
                pass


class StepGuard:
    """Per-step bookkeeping for a training loop under `tenax run`: reports progress and agrees,
    across every rank, on whether a preemption signal arrived.

    The signal handler only records the signal; the decision is taken at step_end(), where all
    ranks learn it at the same step (one small all_reduce on the default process group, when one
    is initialised) so that they save one consistent checkpoint and exit together. A handler that
    saved on its own could save on one rank at step 23 and on another at step 24."""

    def __init__(self, signals=PREEMPTION_SIGNALS, progress=None, group=None):
        self.progress = ProgressFile() if progress is None else progress
        self.group = group
        self._requested = 0
        for s in signals:
            signal.signal(s, self._on_signal)

    def _on_signal(self, signum, frame):
        # The strongest signal wins when several arrive (SIGTERM over SIGUSR1), as in the C++
        # Trainer's agreement (a max over ranks).
        self._requested = max(self._requested, int(signum))

    @property
    def requested(self):
        """This rank's own view: the signal received so far (0: none). Not agreed."""
        return self._requested

    def step_end(self, step):
        """Call after every optimizer step, on every rank (collective when torch.distributed is
        initialised). Reports `step` as progress; returns the preemption signal every rank agreed
        on (0: go on). On a non-zero result, save a checkpoint and exit EXIT_PREEMPTED."""
        self.progress.report(step)
        return self.agreed()

    def agreed(self):
        """The largest signal any rank received (collective when torch.distributed is initialised)."""
        requested = self._requested
        try:
            import torch.distributed as dist
        except ImportError:
            return requested
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(self.group) == 1:
            return requested
        import torch
        flag = torch.tensor([requested], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        return int(flag.item())


def exit_worker(code=0, group=None):
    """Ends this worker with exit status `code` once every rank has called it: a barrier when
    torch.distributed is initialised (what this rank saved is complete everywhere, and no rank
    takes the store it hosts away from a peer still using it), then stdout, stderr and logging
    are flushed and the process leaves with os._exit, skipping the interpreter's teardown.

    Why not a plain return or sys.exit: the teardown frees DistributedDataParallel's Reducer,
    which holds the last reference to the Gloo process group, and ~ProcessGroupGloo joins its
    worker thread with the GIL held. If that thread is still releasing the last collective's
    tensors (a barrier's work keeps the earlier works, and a tensor created in Python needs the
    GIL to die), the two wait on each other for ever (pytorch#56297; caught in gdb in this
    project's tests about once in 30 runs on torch 1.13). `tenax run` then sees a worker that
    neither exits nor reports progress, and a job that trained to the end never finishes.
    destroy_process_group() does not help: the Reducer keeps the group alive. Call it on every
    rank, as the script's last statement; anything registered with atexit does not run."""
    # Not imported here: a script that never imported torch.distributed has no process group.
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier(group=group)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to lose
            pass
    os._exit(code)


def newest_complete_checkpoint(output_dir, prefix="checkpoint-", marker="trainer_state.json"):
    """The newest `<output_dir>/<prefix><step>` directory that holds `marker`, or None.

    Hugging Face's Trainer writes a checkpoint's trainer_state.json after the model, optimizer,
    scheduler and RNG files, so a directory without it is one a kill interrupted: it is skipped
    (and left alone) and the one before it is taken. The marker is written in place, so a kill
    can also leave half of it: a `.json` marker must parse. Pass the result to
    `trainer.train(resume_from_checkpoint=...)`; None starts from scratch."""
    try:
        names = os.listdir(output_dir)
    except FileNotFoundError:
        return None
    steps = []
    for name in names:
        if not name.startswith(prefix) or not name[len(prefix):].isdigit():
            continue
        path = os.path.join(output_dir, name)
        if os.path.isdir(path) and _marker_complete(os.path.join(path, marker)):
            steps.append((int(name[len(prefix):]), path))
    return max(steps)[1] if steps else None


def _marker_complete(path):
    if not path.endswith(".json"):
        return os.path.isfile(path)
    import json
    try:
        with open(path) as f:
            json.load(f)
        return True
    except (OSError, ValueError):
        return False
