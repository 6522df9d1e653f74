#!/usr/bin/env python3
"""How fast can a heal move the MiniLM job's state from a survivor to its replacement?

An in-process heal (sdk/src/peer_heal.cpp) sends the parameters, both AdamW moments and a step
count per parameter from the survivor to the replacement: one Gloo broadcast per tensor. This
bench moves the same tensors (shapes from the model's safetensors header) between two processes
on this node, each the way a heal could move them, to see what the transfer's levers are worth:

- per-tensor:   one Gloo broadcast per tensor, as Tenax does today (the baseline of the ratios);
- small-packed: tensors under 1 MiB packed into one buffer and broadcast once, large ones direct;
- one-buffer:   every tensor packed into one buffer, one broadcast, unpacked on the receiver;
- shm-fresh:    same-node shared memory (issue 13 point 3's "may also"): the sender copies into
                a new /dev/shm segment, the receiver copies out of it;
- shm-reused:   the same through a segment both sides touched before (no page faults).

Every figure is the receiver holding the tensors, from a barrier to a barrier. Gloo is the one
in Debian's python3-torch, the libtorch the default flavour links. Each rank uses one thread, as
the bench jobs do.

    python3 bench/heal_transfer_bench.py --rounds 5
"""
import argparse
import json
import os
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    sys.exit("heal_transfer_bench: needs Debian's python3-torch: run it with /usr/bin/python3")

SYSTEMS = ["per-tensor", "small-packed", "one-buffer", "shm-fresh", "shm-reused"]
BASELINE = "per-tensor"
SMALL_BYTES = 1 << 20


def heal_shapes(model_dir):
    """The shapes a heal sends for this model: each parameter, its exp_avg and exp_avg_sq, and
    its step count (an int64 scalar), in the safetensors file's order."""
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    shapes = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = tuple(entry["shape"])
        shapes += [(shape, "float"), (shape, "float"), (shape, "float"), ((), "int64")]
    return shapes


def make(shapes, fill):
    dtype = {"float": torch.float32, "int64": torch.int64}
    return [(torch.ones if fill else torch.empty)(s, dtype=dtype[d]) for s, d in shapes]


def nbytes(t):
    return t.numel() * t.element_size()


def as_bytes(t):
    return t.reshape(-1).view(torch.uint8)


def pack(tensors):
    return torch.cat([as_bytes(t) for t in tensors])


def pack_into(buffer, tensors):
    offset = 0
    for t in tensors:
        buffer[offset:offset + nbytes(t)].copy_(as_bytes(t))
        offset += nbytes(t)


def unpack(buffer, tensors):
    offset = 0
    for t in tensors:
        as_bytes(t).copy_(buffer[offset:offset + nbytes(t)])
        offset += nbytes(t)


def move(system, rank, tensors, segment, total_bytes):
    """One transfer of `tensors` from rank 0 to rank 1 the `system` way."""
    if system == "per-tensor":
        for t in tensors:
            dist.broadcast(t, 0)
    elif system == "small-packed":
        small = [t for t in tensors if nbytes(t) < SMALL_BYTES]
        large = [t for t in tensors if nbytes(t) >= SMALL_BYTES]
        buffer = pack(small) if rank == 0 else torch.empty(sum(map(nbytes, small)), dtype=torch.uint8)
        dist.broadcast(buffer, 0)
        for t in large:
            dist.broadcast(t, 0)
        if rank != 0:
            unpack(buffer, small)
    elif system == "one-buffer":
        buffer = pack(tensors) if rank == 0 else torch.empty(total_bytes, dtype=torch.uint8)
        dist.broadcast(buffer, 0)
        if rank != 0:
            unpack(buffer, tensors)
    else:
        # shm-fresh maps a new segment, whose pages both sides fault in; shm-reused the segment
        # both sides touched before the rounds.
        fresh = f"/dev/shm/tenax-heal-bench-{os.getppid()}-fresh" if system == "shm-fresh" else None
        shared = lambda: torch.from_file(fresh, shared=True, size=total_bytes, dtype=torch.uint8) if fresh else segment
        if rank == 0:
            pack_into(shared(), tensors)
        dist.barrier()  # the segment is written
        if rank != 0:
            unpack(shared(), tensors)
        if fresh:
            dist.barrier()
            if rank == 0:
                os.unlink(fresh)


def worker(rank, args, shapes, orders, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=2)
    tensors = make(shapes, fill=(rank == 0))
    total_bytes = sum(map(nbytes, tensors))
    reused_path = f"/dev/shm/tenax-heal-bench-{os.getppid()}-reused"
    segment = torch.from_file(reused_path, shared=True, size=total_bytes, dtype=torch.uint8)
    segment.fill_(0)  # touched by both sides before any round
    dist.barrier()
    for order in orders:
        times = {}
        for system in order:
            if rank != 0:
                for t in tensors:
                    t.zero_()
            dist.barrier()
            start = time.perf_counter()
            move(system, rank, tensors, segment, total_bytes)
            dist.barrier()
            times[system] = time.perf_counter() - start
            if rank != 0 and not all(bool((t == 1).all()) for t in tensors):
                raise SystemExit(f"{system}: the receiver's tensors differ from the sender's")
        if rank == 0:
            queue.put((times, os.getloadavg()[0]))
    dist.barrier()
    if rank == 0:
        os.unlink(reused_path)
        queue.put((None, total_bytes))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int)
    p.add_argument("--model-dir", default=os.path.join(os.environ.get("TENAX_ASSETS", os.path.join(
        bench_rules.REPO, ".assets")), "all-minilm-l6-v2"))
    p.add_argument("--port", type=int, default=29631)
    p.add_argument("--results", help="result file (default bench/results/results-heal-transfer-<date>.txt)")
    args = p.parse_args()
    if not os.path.exists(os.path.join(args.model_dir, "model.safetensors")):
        sys.exit(f"heal_transfer_bench: no model.safetensors in {args.model_dir} (make demo fetches it; "
                 f"or give --model-dir)")
    report = bench_rules.Report("heal-transfer", args.results, args.rounds)
    order = bench_rules.RoundOrder(SYSTEMS, args.seed)
    shapes = heal_shapes(args.model_dir)
    orders = [order.next_round() for _ in range(args.rounds)]
    report.say(bench_rules.header("heal transfer bench"))
    report.say(f"  state: {args.model_dir}: {len(shapes)} tensors (each parameter, its 2 AdamW moments, its step)")
    report.say(f"  {args.rounds} round(s); {order.describe()}")
    # The rounds take seconds, and the bench's own 2 processes fill both cores: the load is
    # checked once, before them (the per-round load lines include the bench itself).
    while os.getloadavg()[0] > os.cpu_count():
        time.sleep(5)
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(worker, args=(args, shapes, orders, queue), nprocs=2, join=True, start_method="spawn")
    rows = []
    while True:
        times, extra = queue.get()
        if times is None:
            total_bytes = extra
            break
        rows.append(times)
        r = len(rows)
        report.say(f"  round {r}  " + "  ".join(f"{s} {times[s] * 1000:.0f} ms" for s in orders[r - 1]) +
                   f"  load {extra:.2f}")
    report.say(f"\n  {total_bytes / 1e6:.1f} MB per heal")
    report.say(f"  {'system':<14} {'ms, median (range)':<26} {'GB/s':>6}  {BASELINE} / system within a round")
    for s in SYSTEMS:
        ms = [row[s] * 1000 for row in rows]
        ratios = [row[BASELINE] / row[s] for row in rows]
        report.say(f"  {s:<14} {bench_rules.median_range(ms, 0):<26} {total_bytes / 1e9 / (statistics.median(ms) / 1000):6.2f}  "
                   f"{bench_rules.median_range(ratios, 2)}x")
    report.save()


if __name__ == "__main__":
    main()
