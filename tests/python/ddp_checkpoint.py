#!/usr/bin/env python3
"""A plain PyTorch DDP training script, as a user would run it under torchrun, used by
ddp_kill_resume_test.py to check that `tenax run` is a drop-in for torchrun.

Nothing here knows about Tenax: the process group comes from torchrun's environment
(init_process_group("gloo", init_method="env://") reads MASTER_ADDR, MASTER_PORT, RANK and
WORLD_SIZE), and the fault tolerance is the script's own: rank 0 saves a checkpoint atomically
every --save-every steps, and every start resumes from the newest complete one.

The batch of step s on rank r is a pure function of (seed, s, r), so a run that is killed and
resumed sees the same data as one that is not, and their final parameters are equal bit for bit
(CPU, Gloo, one thread: every sum is done in the same order).

--tenax-guard: the script also uses Tenax's Python helper (python/tenax: StepGuard): it reports
progress every step (for --hang-timeout) and, when every rank agrees a preemption signal arrived,
saves at that step and exits 3 (tenax.EXIT_PREEMPTED); it ends with tenax.exit_worker.

--stop-at-step K --stop-rank R: in the first generation (TORCHELASTIC_RESTART_COUNT=0), rank R
stops itself (SIGSTOP) before step K, so that the test can SIGKILL it by pid at a known step.
"""
import argparse
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT_PREFIX = "ckpt-"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory for checkpoints, env-*.json and final.pt")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--save-every", type=int, default=5)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--stop-at-step", type=int, default=-1)
    p.add_argument("--stop-rank", type=int, default=1)
    p.add_argument("--tenax-guard", action="store_true", help="tenax.StepGuard: progress and agreed preemption")
    return p.parse_args()


def atomic_save(obj, path):
    """torch.save into a temporary file, fsync, rename over `path`, fsync the directory: a reader
    sees the old file or the new one, never half of one, even after a SIGKILL or power loss."""
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, ".tmp-%d-%s" % (os.getpid(), os.path.basename(path)))
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def newest_checkpoint(directory):
    """The complete checkpoint with the highest step, or None. Temporaries start with ".tmp-"."""
    steps = []
    for name in os.listdir(directory):
        if name.startswith(CHECKPOINT_PREFIX) and name.endswith(".pt"):
            steps.append(int(name[len(CHECKPOINT_PREFIX):-3]))
    if not steps:
        return None
    return os.path.join(directory, "%s%06d.pt" % (CHECKPOINT_PREFIX, max(steps)))


def batch(seed, step, rank, size=16):
    g = torch.Generator().manual_seed(seed * 1000003 + step * 64 + rank)
    x = torch.randn(size, 8, generator=g)
    y = (x[:, :1] * 0.7 - x[:, 1:2] * 0.3 + 0.1 * torch.randn(size, 1, generator=g)).tanh()
    return x, y


def main():
    args = parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    ckpt_dir = os.path.join(args.out, "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)

    # What the agent gave this worker, for the test to check against torchrun's contract.
    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
             "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
             "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
             "TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TENAX_RDZV_ENDPOINT"]
    seen = {n: os.environ.get(n) for n in names}
    seen["pid"] = os.getpid()
    with open(os.path.join(args.out, "env-r%d-g%d.json" % (rank, restart)), "w") as f:
        json.dump(seen, f)

    guard = None
    if args.tenax_guard:
        import tenax
        guard = tenax.StepGuard()  # before init_process_group: no signal may be missed
    dist.init_process_group("gloo", init_method="env://")
    world = dist.get_world_size()

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    newest = newest_checkpoint(ckpt_dir)
    if newest is not None:
        state = torch.load(newest)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    with open(os.path.join(args.out, "start-r%d-g%d.txt" % (rank, restart)), "w") as f:
        f.write("%d\n" % start)
    ddp = DistributedDataParallel(model)

    loss = None
    for step in range(start, args.steps):
        if restart == 0 and step == args.stop_at_step and rank == args.stop_rank:
            os.kill(os.getpid(), signal.SIGSTOP)  # the test SIGKILLs this process now
        x, y = batch(args.seed, step, rank)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        done = step + 1
        preempted = guard.step_end(done) if guard is not None else 0
        if rank == 0 and (done % args.save_every == 0 or preempted):
            atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": done},
                        os.path.join(ckpt_dir, "%s%06d.pt" % (CHECKPOINT_PREFIX, done)))
        if preempted:
            print("rank %d: preempted (signal %d) after step %d: checkpoint saved, exit %d"
                  % (rank, preempted, done, tenax.EXIT_PREEMPTED), flush=True)
            tenax.exit_worker(tenax.EXIT_PREEMPTED)  # after a barrier: rank 0's checkpoint is on disk
    if rank == 0:
        atomic_save(model.state_dict(), os.path.join(args.out, "final.pt"))
        print("rank 0 of %d: finished %d steps (started at %d, restart %d), last loss %s"
              % (world, args.steps, start, restart, "-" if loss is None else "%.6f" % loss.item()), flush=True)
    if guard is not None:
        tenax.exit_worker(0)  # the helper's way out (tenax.exit_worker says why)
    dist.barrier()  # no rank leaves (rank 0 takes the store with it) while another still needs it
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
