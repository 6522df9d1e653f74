#!/usr/bin/python3
"""The torchrun peer of bench/recovery_bench.py: examples/synthetic_regression written the usual
PyTorch way, run under `python3 -m torch.distributed.run` (TorchElastic) on Debian's torch 1.13.

Same job as the synthetic example (examples/synthetic_regression/main.cpp):
  - data: 4096 x 16 inputs x ~ N(0, 1), y = sin(x . w) + 0.05 noise, from a private generator
    (seed + 1), identical on every rank and in every restart;
  - model: Linear(16, 64) -> GELU -> Dropout(0.1) -> Linear(64, 64) -> GELU -> Dropout(0.1)
    -> Linear(64, 1), MSE loss, weights from torch.manual_seed(seed) on every rank;
  - 16 samples per rank per step (global batch 32 on 2 ranks); rank r takes the r-th slice of
    each global batch of a per-epoch permutation; the last incomplete batch of an epoch dropped;
  - AdamW(lr 3e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, none on biases), linear
    schedule with 5 warmup steps (transformers' get_linear_schedule_with_warmup), gradient
    clipping at norm 1.0, one intra-op thread;
  - DDP over Gloo (env:// rendezvous from the variables torchrun sets).

Checkpoints, the usual way: every --save-steps steps (and at the last step) rank 0 torch.saves
{model, optimizer, scheduler, step, rng} to a temporary file, flushes and fsyncs it, then
os.replace()s it to <output-dir>/checkpoints/step-NNNNNNNNN.pt; then all ranks meet at a barrier.
On start every rank loads the newest such file, if there is one, and goes on from its step.

For the bench, every line this script prints starts with the wall clock, `[%.6f]` seconds since
the epoch (time.time(), the same clock the bench takes the kill instant from), and carries the
restart count:
  [t] rank R restart C pid P: process started | imports done | process group ready | ...
  [t] restart C: resumed from ... at step S | no checkpoint; starting from scratch
  [t] step K/N loss L lr X restart C          (rank 0, every --logging-steps steps; L: mean over ranks)
Each worker writes its pid to <pid-dir>/rank<R>-restart<C>.pid, so that the bench can find rank 1.
"""
import time

T_PROCESS_START = time.time()  # before the imports: Python start-up and `import torch` count

import argparse
import os
import sys


def stamp() -> str:
    return f"[{time.time():.6f}]"


def say(line: str) -> None:
    """One write(2) per line. Under `python3 -u` (how `tenax run` starts a script) print() writes
    the text and its newline in two calls, and the two ranks' lines, on one pipe, can splice
    ("...ready (world 2)[...] rank 0 ...: process group ready"): the bench then misses a milestone."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--output-dir", required=True)
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--save-steps", type=int, default=20)
    p.add_argument("--logging-steps", type=int, default=10)
    p.add_argument("--per-device-batch", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dataset-size", type=int, default=4096)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--pid-dir", default="")
    a = p.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    who = f"rank {rank} restart {restart} pid {os.getpid()}"

    if a.pid_dir:
        os.makedirs(a.pid_dir, exist_ok=True)
        path = os.path.join(a.pid_dir, f"rank{rank}-restart{restart}.pid")
        with open(path + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(path + ".tmp", path)
    say(f"[{T_PROCESS_START:.6f}] {who}: process started")

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)  # as the synthetic example: ranks share the cores
    say(f"{stamp()} {who}: imports done (torch {torch.__version__})")

    dist.init_process_group("gloo")
    say(f"{stamp()} {who}: process group ready (world {world})")

    class Regressor(nn.Module):
        def __init__(self, features: int):
            super().__init__()
            self.fc1 = nn.Linear(features, 64)
            self.fc2 = nn.Linear(64, 64)
            self.out = nn.Linear(64, 1)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x):
            h = self.dropout(F.gelu(self.fc1(x)))
            h = self.dropout(F.gelu(self.fc2(h)))
            return self.out(h)

    gen = torch.Generator().manual_seed(a.seed + 1)
    inputs = torch.randn(a.dataset_size, a.features, generator=gen)
    w = torch.randn(a.features, 1, generator=gen)
    targets = torch.sin(inputs @ w) + 0.05 * torch.randn(a.dataset_size, 1, generator=gen)

    torch.manual_seed(a.seed)
    net = Regressor(a.features)
    decay = [p_ for n, p_ in net.named_parameters() if not n.endswith("bias")]
    no_decay = [p_ for n, p_ in net.named_parameters() if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.learning_rate, betas=(0.9, 0.999), eps=1e-8)

    def linear_with_warmup(step: int) -> float:
        if step < a.warmup_steps:
            return step / max(1, a.warmup_steps)
        return max(0.0, (a.max_steps - step) / max(1, a.max_steps - a.warmup_steps))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_with_warmup)

    ckpt_dir = os.path.join(a.output_dir, "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    start = 0
    found = sorted(f for f in os.listdir(ckpt_dir) if f.startswith("step-") and f.endswith(".pt"))
    if found:
        path = os.path.join(ckpt_dir, found[-1])
        state = torch.load(path, map_location="cpu")
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start = int(state["step"])
        torch.manual_seed(a.seed + 1000003 * rank + 7919 * start)  # dropout stream per rank
        if rank == 0:
            say(f"{stamp()} restart {restart}: resumed from {path} at step {start}")
    elif rank == 0:
        say(f"{stamp()} restart {restart}: no checkpoint; starting from scratch")

    model = DDP(net)  # broadcasts rank 0's parameters
    global_batch = a.per_device_batch * world
    steps_per_epoch = a.dataset_size // global_batch
    perm_epoch, perm = -1, None

    def save(step: int) -> None:
        if rank == 0:
            final = os.path.join(ckpt_dir, f"step-{step:09d}.pt")
            tmp = final + ".tmp"
            with open(tmp, "wb") as f:
                torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(),
                            "scheduler": sched.state_dict(), "step": step,
                            "rng": torch.get_rng_state()}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        dist.barrier()

    t_train = time.time()
    for step in range(start, a.max_steps):
        epoch, b = divmod(step, steps_per_epoch)
        if epoch != perm_epoch:
            perm = torch.randperm(a.dataset_size, generator=torch.Generator().manual_seed(a.seed + epoch))
            perm_epoch = epoch
        idx = perm[b * global_batch:(b + 1) * global_batch][rank * a.per_device_batch:(rank + 1) * a.per_device_batch]
        loss = F.mse_loss(model(inputs[idx]), targets[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), a.max_grad_norm)
        lr = sched.get_last_lr()[0]
        opt.step()
        sched.step()
        done = step + 1
        if a.logging_steps > 0 and done % a.logging_steps == 0:
            # the logged loss is the mean over ranks, as the Tenax Trainer (and HF's) logs it
            logged = loss.detach().clone()
            dist.all_reduce(logged)
            if rank == 0:
                say(f"{stamp()} step {done}/{a.max_steps} loss {logged.item() / world:.4f} lr {lr:.3e} "
                      f"restart {restart}")
        if (a.save_steps > 0 and done % a.save_steps == 0) or done == a.max_steps:
            save(done)

    if rank == 0:
        n = a.max_steps - start
        secs = time.time() - t_train
        say(f"{stamp()} restart {restart}: training finished at step {a.max_steps} "
              f"({secs:.1f} s, {n * global_batch / max(secs, 1e-9):.1f} samples/s)")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
