#!/usr/bin/env python3
"""The Hugging Face side of bench/finetune_bench.sh: the fine-tuning job that Tenax runs as
`tenax train train/jobs/rotten_tomatoes.toml` (with the bench's settings), done with
transformers.Trainer.

BertForSequenceClassification from a local all-MiniLM-L6-v2 is fine-tuned on train.csv and
evaluated on test.csv (columns text,label), with the settings the benches give both sides (as
flags here, as keys to `tenax train`) and Tenax's TrainingArguments defaults (sdk/include/tenax/sdk/training_arguments.h), which are HF's
names: AdamW (betas 0.9/0.999, eps 1e-8), weight_decay 0, linear schedule, no warmup,
max_grad_norm 1.0, learning_rate 5e-5 unless given.

What is made the same as Tenax on purpose:
  * labels: id2label sorted as strings, like tenax::sdk::LabelMap (fresh = 0, rotten = 1);
  * tokenization up front, outside the timed loop (TokenizedTextDataset does the same):
    truncation to max_length, no padding; each batch is padded to its own longest sequence
    (DataCollatorWithPadding, like tenax::sdk::text_collator);
  * the last incomplete batch of an epoch is dropped (Tenax's ResumableSampler does;
    dataloader_drop_last=True here), so both run floor(N / batch) steps per epoch;
  * checkpoints: the Tenax Trainer saves every --save-steps (0: never) and always at the last
    step, and that final save is inside its train_runtime; here too (save_strategy "steps"
    plus a callback that asks for a save at the last step; --no-final-save leaves it out);
  * threads: torch.set_num_threads(--threads) (and set_num_interop_threads(1)).

Throughput: HF's own train_samples_per_second is num_train_samples / train_runtime, where
num_train_samples is len(train_dataset) * epochs for an epoch-based run (it counts the dropped
remainder) or max_steps * batch. The figure reported here as train_samples_per_second is what
Tenax reports: global_step * global batch / train_runtime (samples actually processed per
second of the training loop); HF's own is kept as hf_train_samples_per_second.

Prints one line: HF_RESULT {"test_accuracy":..,"test_f1":..,"train_samples_per_second":..,
"train_runtime_s":..,"eval_runtime_s":..,"global_step":..,"world_size":..,...}
test_f1 is the binary F1 of label id 1 (sklearn's average="binary"), as tenax::sdk::f1_binary.
"""
import argparse
import csv
import json
import math
import os
import sys
import time


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or "text" not in rows[0] or "label" not in rows[0]:
        sys.exit(f"hf_trainer_finetune: {path}: expected columns text,label")
    return [r["text"] for r in rows], [r["label"] for r in rows]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--per-device-train-batch-size", type=int, default=8)
    p.add_argument("--per-device-eval-batch-size", type=int, default=0,
                   help="0: the train batch size")
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--save-steps", type=int, default=500, help="0: no periodic saves")
    p.add_argument("--no-final-save", action="store_true",
                   help="do not save at the last step (Tenax always does)")
    p.add_argument("--logging-steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--train-limit", type=int, default=0, help="first N train texts (0: all)")
    p.add_argument("--eval-limit", type=int, default=0, help="first N test texts (0: all)")
    a = p.parse_args()

    import torch
    if a.threads > 0:
        torch.set_num_threads(a.threads)
        torch.set_num_interop_threads(1)
    import transformers
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer,
                              DataCollatorWithPadding, Trainer, TrainerCallback,
                              TrainingArguments, set_seed)
    transformers.logging.set_verbosity_warning()

    set_seed(a.seed)
    train_texts, train_labels = read_csv(os.path.join(a.data_dir, "train.csv"))
    test_texts, test_labels = read_csv(os.path.join(a.data_dir, "test.csv"))
    if a.train_limit > 0:  # the splits are hash-bucketed: a prefix is an unbiased sample
        train_texts, train_labels = train_texts[:a.train_limit], train_labels[:a.train_limit]
    if a.eval_limit > 0:
        test_texts, test_labels = test_texts[:a.eval_limit], test_labels[:a.eval_limit]
    names = sorted(set(train_labels))  # tenax::sdk::LabelMap: sorted as strings
    label2id = {n: i for i, n in enumerate(names)}
    unknown = set(test_labels) - set(names)
    if unknown:
        sys.exit(f"hf_trainer_finetune: test labels not in train: {sorted(unknown)}")

    tok = AutoTokenizer.from_pretrained(a.model_dir, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        a.model_dir, local_files_only=True, num_labels=len(names),
        id2label={i: n for i, n in enumerate(names)}, label2id=label2id)

    class Encoded(torch.utils.data.Dataset):
        def __init__(self, texts, labels):
            enc = tok(texts, truncation=True, max_length=a.max_length)
            self.rows = [{"input_ids": ids, "token_type_ids": tt, "attention_mask": m,
                          "labels": label2id[l]}
                         for ids, tt, m, l in zip(enc["input_ids"], enc["token_type_ids"],
                                                  enc["attention_mask"], labels)]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            return self.rows[i]

    t0 = time.perf_counter()
    train_ds = Encoded(train_texts, train_labels)
    test_ds = Encoded(test_texts, test_labels)
    tokenize_s = time.perf_counter() - t0

    batch = a.per_device_train_batch_size
    kwargs = dict(
        output_dir=a.output_dir,
        num_train_epochs=a.epochs,
        max_steps=a.max_steps,
        per_device_train_batch_size=batch,
        per_device_eval_batch_size=a.per_device_eval_batch_size or batch,
        learning_rate=a.learning_rate,
        weight_decay=a.weight_decay,
        adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
        max_grad_norm=1.0,
        lr_scheduler_type="linear",
        warmup_steps=a.warmup_steps,
        seed=a.seed,
        dataloader_drop_last=True,
        dataloader_num_workers=0,
        logging_strategy="steps" if a.logging_steps > 0 else "no",
        logging_steps=max(a.logging_steps, 1),
        save_strategy="steps" if a.save_steps > 0 else "no",
        save_steps=max(a.save_steps, 1),
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
    )
    # transformers renamed evaluation_strategy to eval_strategy in 4.41.
    kwargs["eval_strategy" if "eval_strategy" in TrainingArguments.__dataclass_fields__
           else "evaluation_strategy"] = "no"
    fields = TrainingArguments.__dataclass_fields__
    if "overwrite_output_dir" in fields:  # gone in transformers 5
        kwargs["overwrite_output_dir"] = True
    args = TrainingArguments(**kwargs)

    class FinalSave(TrainerCallback):
        """Tenax's Trainer saves at the last step whatever save_steps is."""
        def on_step_end(self, args, state, control, **kw):
            if state.global_step >= state.max_steps:
                control.should_save = True

    class ProfileSteps(TrainerCallback):
        """bench/profile_finetune.sh: torch.profiler over steps FIRST..LAST, the window that
        train/src/profile_steps.h profiles on the Tenax side (same env variables)."""
        def __init__(self, trace, steps):
            self.trace, (self.first, self.last) = trace, map(int, steps.split(":"))
            self.prof = None

        def on_step_begin(self, args, state, control, **kw):
            if state.global_step + 1 == self.first and self.prof is None:
                self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                self.prof.start()
                self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step == self.last and self.prof is not None:
                wall_s = time.perf_counter() - self.t0
                self.prof.stop()
                self.prof.export_chrome_trace(self.trace)
                with open(self.trace + ".meta.json", "w") as f:
                    json.dump({"system": "hf", "first_step": self.first, "last_step": self.last,
                               "wall_s": wall_s, "torch": torch.__version__,
                               "optim": str(args.optim)}, f)

    callbacks = [] if a.no_final_save else [FinalSave()]
    if os.environ.get("TENAX_PROFILE_TRACE"):
        callbacks.append(ProfileSteps(os.environ["TENAX_PROFILE_TRACE"],
                                      os.environ.get("TENAX_PROFILE_STEPS") or "6:25"))
    trainer = Trainer(model=model, args=args, train_dataset=train_ds,
                      data_collator=DataCollatorWithPadding(tok), callbacks=callbacks)
    out = trainer.train()
    m = out.metrics
    runtime = m["train_runtime"]
    steps = out.global_step
    samples = steps * batch * args.gradient_accumulation_steps  # 1 rank

    t0 = time.perf_counter()
    pred = trainer.predict(test_ds)
    eval_s = time.perf_counter() - t0
    y_pred = pred.predictions.argmax(-1).tolist()
    y_true = [label2id[l] for l in test_labels]
    acc = sum(int(p == t) for p, t in zip(y_pred, y_true)) / len(y_true)
    tp = sum(int(p == 1 and t == 1) for p, t in zip(y_pred, y_true))
    fp = sum(int(p == 1 and t != 1) for p, t in zip(y_pred, y_true))
    fn = sum(int(p != 1 and t == 1) for p, t in zip(y_pred, y_true))
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0

    result = {
        "test_accuracy": acc,
        "test_f1": f1,
        "train_samples_per_second": samples / runtime if runtime > 0 else 0.0,
        "train_runtime_s": runtime,
        "eval_runtime_s": eval_s,
        "global_step": steps,
        "world_size": 1,
        "train_samples": samples,
        "hf_train_samples_per_second": m.get("train_samples_per_second"),
        "training_loss": out.training_loss,
        "tokenize_s": tokenize_s,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "labels": names,
    }
    print("HF_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
