#!/usr/bin/env python3
"""A Hugging Face `transformers.Trainer` fine-tuning script as a user would run it under torchrun,
with Tenax's callback (python/tenax/hf.py): used by hf_trainer_test.py.

The model is a tiny BERT built from a BertConfig (random weights, no download) and the data a
synthetic token-classification-free task (label = whether token 5 occurs in the sequence), so a
run takes seconds on a CPU. DDP over Gloo comes from torchrun's environment, which `tenax run`
gives the workers; checkpoints are Hugging Face's own (checkpoint-N every --save-steps), and every
start resumes from tenax.hf.resume_checkpoint().

Records for the test, under --out: start-r<rank>-g<restart>.txt (the global step the Trainer
started from), starts-r<rank>.jsonl (every start: generation, step, SLURM_RESTART_COUNT),
env-r<rank>-g<restart>.json (pid), and on rank 0 final.json when training ended.

--stop-at-step K --stop-rank R: in the first generation (TORCHELASTIC_RESTART_COUNT=0), rank R
stops itself (SIGSTOP) before optimizer step K+1, so that the test can kill or preempt it at a
known step. --step-sleep S: every step sleeps S seconds (the Slurm test's job must still be
running when it preempts it).
"""
import argparse
import json
import os
import signal
import time

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

import tenax
from tenax.hf import TenaxCallback, resume_checkpoint


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--save-steps", type=int, default=5)
    p.add_argument("--stop-at-step", type=int, default=-1)
    p.add_argument("--stop-rank", type=int, default=1)
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help="seconds each step sleeps: a longer run for the Slurm test to preempt mid-run")
    p.add_argument("--linger-after-train", type=float, default=0.0,
                   help="seconds rank 1 sleeps after train() (rank 0 waits at the barrier): a slow teardown")
    p.add_argument("--plain-exit", action="store_true",
                   help="end with barrier + destroy_process_group instead of tenax.exit_worker (exit_soak.sh)")
    return p.parse_args()


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n=512, length=12, vocab=32, seed=7):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(6, vocab, (n, length), generator=g)
        mark = torch.rand(n, generator=g) < 0.5
        self.ids[mark, torch.randint(1, length, (int(mark.sum()),), generator=g)] = 5
        self.ids[:, 0] = 2  # [CLS]
        self.labels = mark.long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.labels[i]}


class Record(TrainerCallback):
    """What the test checks: where each rank of each generation started, and a stop hook."""

    def __init__(self, args, rank, generation):
        self.args, self.rank, self.generation = args, rank, generation

    def on_train_begin(self, args, state, control, **kwargs):
        with open(os.path.join(self.args.out, "start-r%d-g%d.txt" % (self.rank, self.generation)), "w") as f:
            f.write(str(state.global_step))
        # Every start of this rank, one JSON line each: a requeued Slurm job is told apart by
        # SLURM_RESTART_COUNT, since its generation count need not start at 0 again.
        with open(os.path.join(self.args.out, "starts-r%d.jsonl" % self.rank), "a") as f:
            f.write(json.dumps({"generation": self.generation, "step": state.global_step,
                                "slurm_restart_count": os.environ.get("SLURM_RESTART_COUNT")}) + "\n")

    def on_step_begin(self, args, state, control, **kwargs):
        if self.generation == 0 and self.rank == self.args.stop_rank and state.global_step == self.args.stop_at_step:
            print("rank %d: stopping before step %d" % (self.rank, state.global_step + 1), flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.args.step_sleep > 0:
            time.sleep(self.args.step_sleep)


def main():
    args = parse_args()
    rank = int(os.environ.get("RANK", "0"))
    generation = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "env-r%d-g%d.json" % (rank, generation)), "w") as f:
        json.dump({"pid": os.getpid()}, f)
    torch.set_num_threads(1)

    config = BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, num_labels=2)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    output_dir = os.path.join(args.out, "hf")
    training = TrainingArguments(
        output_dir=output_dir, max_steps=args.steps, save_steps=args.save_steps, per_device_train_batch_size=8,
        learning_rate=1e-3, logging_steps=args.save_steps, report_to=[], disable_tqdm=True, use_cpu=True,
        ddp_backend="gloo", ddp_find_unused_parameters=False, dataloader_num_workers=0, seed=42)
    trainer = Trainer(model=model, args=training, train_dataset=Synthetic(),
                      callbacks=[TenaxCallback(), Record(args, rank, generation)])
    checkpoint = resume_checkpoint(output_dir)
    print("rank %d: generation %d resumes from %s" % (rank, generation, checkpoint), flush=True)
    trainer.train(resume_from_checkpoint=checkpoint)
    if rank == 0:
        with open(os.path.join(args.out, "final.json"), "w") as f:
            json.dump({"global_step": trainer.state.global_step}, f)
    if rank == 1 and args.linger_after_train > 0:
        time.sleep(args.linger_after_train)
    if args.plain_exit and torch.distributed.is_initialized():  # the ending exit_soak.sh shows hang
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        return
    # Every rank done (a barrier), then out without the interpreter's teardown, which can deadlock
    # in torch's Gloo process group (tenax.exit_worker says how; exit_soak.sh).
    tenax.exit_worker(0)


if __name__ == "__main__":
    main()
