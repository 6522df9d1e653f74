#!/usr/bin/env python3
"""The Hugging Face side of the image workload: train/jobs/fashion_mnist.toml's job done with
transformers.Trainer, to check the accuracy Tenax reaches on Fashion-MNIST.

The same job, setting by setting (train/jobs/fashion_mnist.toml and its model, train/jobs/fashion_mnist_vit):
  * data: Debian's dataset-fashion-mnist IDX files, train 60,000 / test 10,000; each 28x28 gray
    image replicated to RGB (Image.convert("RGB")) and preprocessed as ViTImageProcessor with
    do_resize=False does (rescale 1/255, normalize mean 0.5 std 0.5; batched here, checked equal
    to the processor's output), as tenax::sdk::IdxImageDataset;
  * model: ViTForImageClassification(ViTConfig(image_size=28, patch_size, hidden_size, layers,
    heads, intermediate_size, num_channels=3, dropout 0)) initialised by transformers from the
    seed (Tenax initialises the same distributions from its own generator: not the same draws);
  * optimisation: AdamW (betas 0.9/0.999, eps 1e-8, weight decay without biases and LayerNorm
    weights), learning rate, warmup_ratio, linear decay, max_grad_norm 1.0, the same epochs;
  * batch: one process with the global batch of Tenax's ranks (2 x 64 = 128 by default), the last
    incomplete batch of an epoch dropped as Tenax's sampler drops it (468 steps per epoch);
  * seed policy: transformers' set_seed(seed) before the model, Trainer's seed for the order;
  * held-out accuracy on the 10,000 test images after every epoch and at the end.

Prints one line: HF_RESULT {"test_accuracy":..,"test_loss":..,"epoch_accuracy":[..],
"train_runtime_s":..,"global_step":..,...} and writes it to --result-file when given.

  .assets/venv-hf-torch113/bin/python bench/hf_image_trainer.py --output-dir runs/hf-image
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time


def read_idx(path, dims):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic != 0x0800 | dims:
        sys.exit(f"hf_image_trainer: {path}: magic {magic:#010x}, expected {0x0800 | dims:#010x}")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    import numpy as np
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims)
    if array.size != int(np.prod(shape)):
        sys.exit(f"hf_image_trainer: {path}: {array.size} data bytes, header says {shape}")
    return array.reshape(shape)


def split_files(data_dir, prefix):
    def pick(name):
        gz = os.path.join(data_dir, name + ".gz")
        return gz if os.path.exists(gz) else os.path.join(data_dir, name)
    return pick(f"{prefix}-images-idx3-ubyte"), pick(f"{prefix}-labels-idx1-ubyte")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--train-batch-size", type=int, default=128, help="the global batch (Tenax: ranks x per device)")
    p.add_argument("--eval-batch-size", type=int, default=500)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup-ratio", type=float, default=0.05)
    p.add_argument("--patch-size", type=int, default=4)
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument("--num-hidden-layers", type=int, default=4)
    p.add_argument("--num-attention-heads", type=int, default=4)
    p.add_argument("--intermediate-size", type=int, default=128)
    p.add_argument("--seed", type=int, default=42)
    # 1: on the shared 2-core machine, 2 OpenMP threads beside other work spun and ran 4x slower.
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--eval-limit", type=int, default=0)
    p.add_argument("--result-file", default="")
    a = p.parse_args()

    import numpy as np
    import torch
    import transformers
    from transformers import (Trainer, TrainingArguments, ViTConfig, ViTForImageClassification, ViTImageProcessor,
                              set_seed)

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
    splits = {}
    for name, prefix, limit in (("train", "train", a.train_limit), ("test", "t10k", a.eval_limit)):
        images_path, labels_path = split_files(a.data_dir, prefix)
        images, labels = read_idx(images_path, 3), read_idx(labels_path, 1)
        if limit > 0:
            images, labels = images[:limit], labels[:limit]
        splits[name] = (images, labels.astype(np.int64))
    size = splits["train"][0].shape[1]

    processor = ViTImageProcessor(do_resize=False, size={"height": size, "width": size})

    class Images(torch.utils.data.Dataset):
        def __init__(self, images, labels):
            self.images, self.labels = images, labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return {"image": self.images[i], "labels": int(self.labels[i])}

    # ViTImageProcessor's arithmetic without its per-image Python overhead (called per batch it
    # made the run several times slower than the model): rescale in float64, then float32,
    # normalize with float32 mean and std, channels first. Checked equal to the processor itself
    # on the first 512 training images before training.
    mean = np.array(processor.image_mean, dtype=np.float32)[:, None, None]
    std = np.array(processor.image_std, dtype=np.float32)[:, None, None]

    def pixel_values_of(images):
        x = (images.astype(np.float64) * processor.rescale_factor).astype(np.float32)
        x = np.repeat(x[:, None, :, :], 3, axis=1)  # gray to RGB, as Image.convert("RGB")
        return torch.from_numpy((x - mean) / std)

    sample = splits["train"][0][:512]
    by_processor = processor(images=[np.repeat(g[:, :, None], 3, axis=2) for g in sample],
                             return_tensors="pt")["pixel_values"]
    difference = float((pixel_values_of(sample) - by_processor).abs().max())
    if difference != 0.0:
        sys.exit(f"hf_image_trainer: the batched preprocessing differs from ViTImageProcessor by {difference}")

    def collate(features):
        images = np.stack([f["image"] for f in features])
        return {"pixel_values": pixel_values_of(images), "labels": torch.tensor([f["labels"] for f in features])}

    set_seed(a.seed)
    config = ViTConfig(image_size=size, patch_size=a.patch_size, num_channels=3, hidden_size=a.hidden_size,
                       num_hidden_layers=a.num_hidden_layers, num_attention_heads=a.num_attention_heads,
                       intermediate_size=a.intermediate_size, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0, encoder_stride=a.patch_size,
                       id2label=dict(enumerate(classes)), label2id={c: i for i, c in enumerate(classes)})
    model = ViTForImageClassification(config)
    parameters = sum(t.numel() for t in model.parameters())

    def compute_metrics(p):
        return {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())}

    args = TrainingArguments(
        output_dir=a.output_dir, num_train_epochs=a.epochs, per_device_train_batch_size=a.train_batch_size,
        per_device_eval_batch_size=a.eval_batch_size, learning_rate=a.learning_rate, weight_decay=a.weight_decay,
        warmup_ratio=a.warmup_ratio, lr_scheduler_type="linear", max_grad_norm=1.0, eval_strategy="epoch",
        save_strategy="no", logging_steps=50, seed=a.seed, report_to=[], dataloader_drop_last=True,
        dataloader_num_workers=0, remove_unused_columns=False, use_cpu=True, disable_tqdm=True)
    train = Images(*splits["train"])
    test = Images(*splits["test"])
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=test, data_collator=collate,
                      compute_metrics=compute_metrics)
    start = time.monotonic()
    out = trainer.train()
    train_runtime = time.monotonic() - start
    final = trainer.evaluate(test, metric_key_prefix="test")
    epoch_accuracy = [round(e["eval_accuracy"], 4) for e in trainer.state.log_history if "eval_accuracy" in e]
    result = {"test_accuracy": final["test_accuracy"], "test_loss": final["test_loss"],
              "epoch_accuracy": epoch_accuracy, "train_runtime_s": train_runtime,
              "train_samples_per_second": out.global_step * a.train_batch_size / train_runtime,
              "global_step": out.global_step, "parameters": parameters, "threads": a.threads,
              "transformers": transformers.__version__, "torch": torch.__version__,
              "args": {k: v for k, v in vars(a).items() if k not in ("output_dir", "result_file")}}
    line = "HF_RESULT " + json.dumps(result, sort_keys=True)
    print(line, flush=True)
    if a.result_file:
        with open(a.result_file, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
