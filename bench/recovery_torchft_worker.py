"""The torchft peer of bench/recovery_bench.py: the job of bench/recovery_torchrun_worker.py (the
synthetic example written the usual PyTorch way) made fault tolerant the torchft way, one replica
group per rank, each group one process under its own torchrun (PyPI torch, .venv-hf-pypi; torchft
0.2.0 from bench/setup_torchft.sh). bench/recovery_torchft_launch.py starts the Lighthouse and the
two groups.

Same data, model, batch, optimizer, schedule and clipping as recovery_torchrun_worker.py (see its
docstring); what differs is what torchft requires:
  - torchft.DistributedDataParallel (with a comm hook that survives a failed allreduce, as
    torchft-nightly's does; 0.2.0's own kills the survivor: see RobustDDP) + the torchft.Optimizer
    wrapper over a torchft.ProcessGroupGloo:
    every step starts a quorum (Lighthouse), the gradient allreduce runs through the Manager, and
    the optimizer steps only if every replica group commits (should_commit);
  - a replica group that dies is restarted by its torchrun (--max_restarts) and heals from a live
    peer's memory (the Manager's HTTP checkpoint transport: model, optimizer and LR schedule); the
    surviving group keeps its process and trains on alone meanwhile (min_replica_size 1), with its
    16 samples per step instead of the 32 of both groups (torchft's DYNAMIC world size: gradients
    are averaged over the groups that take part);
  - the step counter is the Manager's (committed steps): a step in flight when a peer died is not
    committed and is taken again.
Replica group r takes the r-th 16-sample slice of each global batch of 32, as rank r does in the
other peers. The group of participating rank 0 also torch.saves a checkpoint every --save-steps steps,
as the other peers do (the same I/O per step); torchft heals from a peer, so the files are not read
back. The groups start training together (a file barrier after their Managers are up).

Lines (one write(2) each; [t] = time.time()):
  [t] rank R restart C pid P: process started | imports done | manager ready
  [t] step K/N loss L lr X replicas W replica R restart C     (every --logging-steps committed steps)
  [t] replica R restart C: step K not committed (replicas W)   (a step thrown away)
  [t] replica R restart C: healed from a peer at step S       (the first committed step of a
                                                               restarted group came after step S)
  [t] replica R restart C: training finished at step N (T s, X samples/s)
  [t] replica R restart C: the job finished at step N in another group; stopping at step K
"""
import time

T_PROCESS_START = time.time()

import argparse
import os
import sys


def stamp() -> str:
    return f"[{time.time():.6f}]"


def say(line: str) -> None:
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
    p.add_argument("--heartbeat-ms", type=int, default=100, help="the Manager's heartbeat to the Lighthouse")
    p.add_argument("--stock-ddp-hook", action="store_true",
                   help="torchft 0.2.0's own DDP comm hook, which kills the survivor when the peer dies in the allreduce")
    p.add_argument("--timeout-s", type=float, default=10, help="the Manager's timeout for collectives and RPCs")
    a = p.parse_args()

    group = int(os.environ["REPLICA_GROUP_ID"])
    groups = int(os.environ.get("NUM_REPLICA_GROUPS", "2"))
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    who = f"rank {group} restart {restart} pid {os.getpid()}"
    if a.pid_dir:
        os.makedirs(a.pid_dir, exist_ok=True)
        path = os.path.join(a.pid_dir, f"rank{group}-restart{restart}.pid")
        with open(path + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(path + ".tmp", path)
    say(f"[{T_PROCESS_START:.6f}] {who}: process started")

    from datetime import timedelta

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchft

    torch.set_num_threads(1)
    say(f"{stamp()} {who}: imports done (torch {torch.__version__}, torchft)")

    from torchft.manager import _ManagedFuture

    class RobustDDP(torchft.DistributedDataParallel):
        """torchft 0.2.0's DistributedDataParallel with a comm hook that survives a failed allreduce.

        0.2.0's hook waits on the Manager's work and asserts that the work's inner future
        exists; when the peer dies during the allreduce, wait() reports the error to the Manager
        and returns False before that future is made, the assertion fails inside backward(), and
        the surviving group dies too (seen in this bench: both groups restart from step 0).
        torchft-nightly 2026.10.26's ddp.py handles this case: the Manager already knows of the
        error and should_commit() will throw the step away, so the hook hands DDP the bucket
        unchanged. This hook does the same, so that torchft is measured as it is meant to work.
        """

        @staticmethod
        def _comm_hook(state, bucket):
            work = state.allreduce(bucket.buffer())
            if not work.wait():  # the error is reported to the Manager; this step will not commit
                done = torch.futures.Future()
                done.set_result(bucket.buffer())
                return done
            fut = work.get_future()
            # after an earlier error in this step the Manager returns a finished plain future
            return fut._fut if isinstance(fut, _ManagedFuture) else fut

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
    inner = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=a.learning_rate, betas=(0.9, 0.999), eps=1e-8)

    def linear_with_warmup(step: int) -> float:
        if step < a.warmup_steps:
            return step / max(1, a.warmup_steps)
        return max(0.0, (a.max_steps - step) / max(1, a.max_steps - a.warmup_steps))

    sched = torch.optim.lr_scheduler.LambdaLR(inner, linear_with_warmup)

    def state_dict():
        return {"model": net.state_dict(), "optim": inner.state_dict(), "sched": sched.state_dict()}

    def load_state_dict(state):
        net.load_state_dict(state["model"])
        inner.load_state_dict(state["optim"])
        sched.load_state_dict(state["sched"])

    timeout = timedelta(seconds=a.timeout_s)
    pg = torchft.ProcessGroupGloo(timeout=timeout)
    manager = torchft.Manager(pg=pg, min_replica_size=1, load_state_dict=load_state_dict, state_dict=state_dict,
                              replica_id=f"recovery_bench_{group}", timeout=timeout, quorum_timeout=timeout,
                              heartbeat_interval=timedelta(milliseconds=a.heartbeat_ms))
    ddp = torchft.DistributedDataParallel if a.stock_ddp_hook else RobustDDP
    model = ddp(manager, net)
    opt = torchft.Optimizer(manager, inner)
    say(f"{stamp()} {who}: manager ready")
    if restart == 0:
        # The groups start together, as the ranks of the other peers do: without this, the group
        # whose `import torch` finishes first trains alone (min_replica_size 1) and may be far
        # ahead, or done, before the other joins. Both Managers heartbeat by now, so the
        # Lighthouse waits (join timeout) for both in the first quorum.
        ready_dir = os.path.join(a.output_dir, "ready")
        os.makedirs(ready_dir, exist_ok=True)
        open(os.path.join(ready_dir, str(group)), "w").close()
        while len(os.listdir(ready_dir)) < groups:
            time.sleep(0.005)

    ckpt_dir = os.path.join(a.output_dir, "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)

    def save(step: int) -> None:
        final = os.path.join(ckpt_dir, f"step-{step:09d}.pt")
        tmp = final + ".tmp"
        with open(tmp, "wb") as f:
            torch.save({**state_dict(), "step": step, "rng": torch.get_rng_state()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)

    global_batch = a.per_device_batch * groups
    steps_per_epoch = a.dataset_size // global_batch
    perm_epoch, perm = -1, None
    first_commit = True
    samples = 0
    t_train = time.time()
    # torchft has no end of job across groups: a group restarted after the others finished would
    # find no peer to heal from and train the whole job again alone. The first group to finish
    # leaves this file; a group that sees it stops (as the scheduler would end the job).
    finished_marker = os.path.join(a.output_dir, "finished")
    while manager.current_step() < a.max_steps:
        if os.path.exists(finished_marker):
            say(f"{stamp()} replica {group} restart {restart}: the job finished at step "
                f"{open(finished_marker).read().strip()} in another group; stopping at step {manager.current_step()}")
            manager.shutdown(wait=False)
            return 0
        step = manager.current_step()  # the step being taken; a restarted group learns it in the quorum
        opt.zero_grad()  # starts the quorum
        epoch, b = divmod(step, steps_per_epoch)
        if epoch != perm_epoch:
            perm = torch.randperm(a.dataset_size, generator=torch.Generator().manual_seed(a.seed + epoch))
            perm_epoch = epoch
        idx = perm[b * global_batch:(b + 1) * global_batch][group * a.per_device_batch:(group + 1) * a.per_device_batch]
        loss = F.mse_loss(model(inputs[idx]), targets[idx])
        loss.backward()  # the allreduce, through the Manager
        if a.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), a.max_grad_norm)
        lr = sched.get_last_lr()[0]
        replicas = manager.num_participants()
        before = manager.current_step()
        opt.step()  # steps the optimizer only if every group commits
        done = manager.current_step()
        if done == before:
            say(f"{stamp()} replica {group} restart {restart}: step {before + 1} not committed (replicas {replicas})")
            continue
        sched.step()
        samples += a.per_device_batch * replicas
        if first_commit:
            first_commit = False
            if done > 1 and restart > 0:
                say(f"{stamp()} replica {group} restart {restart}: healed from a peer at step {done - 1}")
        if a.logging_steps > 0 and done % a.logging_steps == 0:
            say(f"{stamp()} step {done}/{a.max_steps} loss {loss.item():.4f} lr {lr:.3e} replicas {replicas} "
                f"replica {group} restart {restart}")
        if ((a.save_steps > 0 and done % a.save_steps == 0) or done == a.max_steps) and manager.participating_rank() == 0:
            save(done)

    secs = time.time() - t_train
    if manager.current_step() >= a.max_steps:
        with open(finished_marker + ".tmp", "w") as f:
            f.write(f"{manager.current_step()}\n")
        os.replace(finished_marker + ".tmp", finished_marker)
    say(f"{stamp()} replica {group} restart {restart}: training finished at step {manager.current_step()} "
        f"({secs:.1f} s, {samples / max(secs, 1e-9):.1f} samples/s)")
    manager.shutdown(wait=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
