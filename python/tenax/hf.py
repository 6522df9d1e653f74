"""Tenax's fault tolerance for a Hugging Face `transformers.Trainer` script run by `tenax run`.

    import tenax
    from tenax.hf import TenaxCallback, resume_checkpoint
    trainer = Trainer(model=..., args=args, train_dataset=..., callbacks=[TenaxCallback()])
    trainer.train(resume_from_checkpoint=resume_checkpoint(args.output_dir))
    tenax.exit_worker(0)   # the script's last statement, on every rank (tenax.exit_worker: why)

TenaxCallback reports progress after every step (the agent's --hang-timeout) and turns a
preemption signal (SIGUSR1 / SIGTERM, forwarded by the agent) into Hugging Face's own checkpoint
at the next step boundary, agreed by every rank (tenax.StepGuard), after which every process
exits tenax.EXIT_PREEMPTED (3): `tenax run` reports the job preempted and slurm/tenax-requeue
requeues it. resume_checkpoint() picks the newest checkpoint that Hugging Face finished writing.

What Tenax promises here is Hugging Face's own resume (model, optimizer, scheduler, RNG and data
position as `resume_from_checkpoint` restores them), not the C++ Trainer's bit-exact one.

transformers is imported only by this module, never by `import tenax`, so the plain-PyTorch
helper works without it.
"""
from transformers import TrainerCallback

from . import EXIT_PREEMPTED, StepGuard, exit_worker, newest_complete_checkpoint

__all__ = ["TenaxCallback", "resume_checkpoint"]


def _restore_cpu_index(obj, location):
    if location.startswith("cpu:"):
        return obj
    return None


def _accept_cpu_index_on_torch1():
    """Lets torch 1.x's torch.load map to "cpu:N". On a multi-process CPU (Gloo) job, the
    Trainer resumes the optimizer with map_location=args.device, which accelerate makes
    torch.device("cpu", local_rank); torch 1.13 only knows the location "cpu" and fails with
    "don't know how to restore data location of torch.storage.UntypedStorage (tagged with
    cpu:1)", so no such job could resume. A CPU tensor needs no moving: the deserializer returns
    it as it is. Registered through torch's public register_package, after torch's own "cpu" one."""
    import torch
    import torch.serialization
    if int(torch.__version__.split(".")[0]) >= 2:
        return
    torch.serialization.register_package(11, lambda obj: None, _restore_cpu_index)


_accept_cpu_index_on_torch1()


def resume_checkpoint(output_dir):
    """The argument for `trainer.train(resume_from_checkpoint=...)`: the newest complete
    `checkpoint-N` under `output_dir`, or None to start from scratch. Unlike
    `resume_from_checkpoint=True` (transformers' get_last_checkpoint, which takes the highest N
    whatever its state), a checkpoint whose trainer_state.json is missing or unreadable, i.e. one
    a kill interrupted, is skipped."""
    return newest_complete_checkpoint(output_dir)


class TenaxCallback(TrainerCallback):
    """Progress, agreed preemption and "save, then exit 3" for `transformers.Trainer`.

    exit_on_preemption=False leaves the exit to the script: train() then returns after the
    checkpoint, and `callback.preempted` holds the signal (0: none)."""

    def __init__(self, guard=None, exit_on_preemption=True):
        self.guard = StepGuard() if guard is None else guard
        self.exit_on_preemption = exit_on_preemption
        self.preempted = 0

    # Progress also while no optimizer step ends: loading a checkpoint, gradient accumulation,
    # evaluation, saving. ProgressFile rate-limits the writes.
    def on_train_begin(self, args, state, control, **kwargs):
        self.guard.progress.report(state.global_step)

    # The end of a phase: see ProgressFile.finish (the next step's report judges again).
    def on_train_end(self, args, state, control, **kwargs):
        self.guard.progress.finish()

    def on_evaluate(self, args, state, control, **kwargs):
        self.guard.progress.finish()

    def on_predict(self, args, state, control, **kwargs):
        self.guard.progress.finish()

    def on_substep_end(self, args, state, control, **kwargs):
        self.guard.progress.report(state.global_step)

    def on_prediction_step(self, args, state, control, **kwargs):
        self.guard.progress.report(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        # Collective when torch.distributed is initialised: every rank calls on_step_end once per
        # optimizer step, so every rank learns the preemption at the same step and the
        # checkpoint below is one consistent checkpoint of that step.
        signum = self.guard.step_end(state.global_step)
        if signum and not self.preempted:
            self.preempted = signum
            print("tenax: rank %s: preempted (signal %d) after step %d: saving checkpoint-%d"
                  % (args.process_index, signum, state.global_step, state.global_step), flush=True)
            # The Trainer saves right after on_step_end when should_save is set (its
            # _maybe_log_save_evaluate), then leaves the loop on should_training_stop.
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        self.guard.progress.report(state.global_step)
        if not (self.preempted and self.exit_on_preemption):
            return control
        # Every rank writes its own part of the checkpoint (rank 0 the model, optimizer and
        # trainer_state.json; each rank its rng_state_<rank>.pth): exit_worker's barrier waits for
        # all of them, so that the requeued job finds the whole checkpoint, and it skips the
        # teardown that can deadlock (its docstring). A script that needs its own cleanup passes
        # exit_on_preemption=False and exits itself.
        print("tenax: rank %s: checkpoint-%d saved; exiting %d (preempted)"
              % (args.process_index, state.global_step, EXIT_PREEMPTED), flush=True)
        exit_worker(EXIT_PREEMPTED)
