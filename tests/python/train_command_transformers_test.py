#!/usr/bin/env python3
"""`tenax train`'s saved model, loaded by transformers, gives Tenax's results.

A small job (the tiny DistilBERT of the goldens, generated CSV data, 12 steps, single process)
is run by `tenax train` for each head: single-label classification, multi-label and regression.
transformers' AutoModelForSequenceClassification and AutoTokenizer load `output_dir/model`, run the
validation split in one batch, and must reproduce Tenax's eval_loss (1e-5) and, for
classification, its eval_accuracy; config.json's labels and problem_type must be transformers'.

The image head the same way: the Fashion-MNIST job (train/jobs/fashion_mnist.toml: a ViT trained
from its config.json on IDX files) for 12 steps; transformers' AutoModelForImageClassification
loads the saved model and runs the first test images, decoded from the IDX file here and
preprocessed as the saved preprocessor_config.json says (rescale, normalise, gray replicated to
RGB; no resize at 28 x 28), so the check needs no Pillow. The logits must reproduce Tenax's
eval_loss and eval_accuracy, and id2label must be the job's label_names.

    train_command_transformers_test.py --tenax BUILD/launcher/tenax --python VENV/bin/python
        --model tests/sdk/models/goldens/distilbert_tiny --image-job train/jobs/fashion_mnist.toml
        --image-model train/jobs/fashion_mnist_vit --idx-dir /usr/share/datasets/fashion-mnist --out DIR
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

CHECK = r'''
import json, sys
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
model_dir, texts_file, max_length = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = json.load(open(texts_file))
model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
tok = AutoTokenizer.from_pretrained(model_dir)
enc = tok([r["text"] for r in rows], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
with torch.no_grad():
    logits = model(**enc).logits
cfg = model.config
out = {"problem_type": cfg.problem_type, "id2label": {str(k): v for k, v in cfg.id2label.items()}}
if cfg.problem_type == "regression":
    y = torch.tensor([float(r["label"]) for r in rows])
    out["eval_loss"] = torch.nn.functional.mse_loss(logits.squeeze(-1), y).item()
elif cfg.problem_type == "multi_label_classification":
    y = torch.zeros(len(rows), cfg.num_labels)
    for i, r in enumerate(rows):
        for name in r["label"]:
            y[i, cfg.label2id[name]] = 1.0
    out["eval_loss"] = torch.nn.functional.binary_cross_entropy_with_logits(logits, y).item()
    out["eval_accuracy"] = ((logits > 0).float() == y).all(dim=1).double().mean().item()
else:
    y = torch.tensor([cfg.label2id[r["label"]] for r in rows])
    out["eval_loss"] = torch.nn.functional.cross_entropy(logits, y).item()
    out["eval_accuracy"] = (logits.argmax(-1) == y).double().mean().item()
print(json.dumps(out))
'''

IMAGE_CHECK = r'''
import gzip, json, struct, sys
import torch
from transformers import AutoModelForImageClassification
model_dir, images_file, labels_file, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with gzip.open(images_file) as f:
    magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
    pixels = torch.frombuffer(bytearray(f.read(n * rows * cols)), dtype=torch.uint8).reshape(n, 1, rows, cols)
with gzip.open(labels_file) as f:
    f.read(8)
    y = torch.tensor(list(f.read(n)), dtype=torch.int64)
pre = json.load(open(model_dir + "/preprocessor_config.json"))
assert not pre["do_resize"] and pre["size"] == {"height": rows, "width": cols}, pre
x = pixels.to(torch.float32).expand(n, 3, rows, cols) * pre["rescale_factor"]
mean = torch.tensor(pre["image_mean"]).view(1, 3, 1, 1)
std = torch.tensor(pre["image_std"]).view(1, 3, 1, 1)
x = (x - mean) / std
model = AutoModelForImageClassification.from_pretrained(model_dir).eval()
with torch.no_grad():
    logits = model(pixel_values=x).logits
print(json.dumps({"id2label": [model.config.id2label[i] for i in range(model.config.num_labels)],
                  "eval_loss": torch.nn.functional.cross_entropy(logits, y).item(),
                  "eval_accuracy": (logits.argmax(-1) == y).double().mean().item()}))
'''


def rows(n, seed, task):
    rng = random.Random(seed)
    good, bad, tags = ["good", "great", "fine"], ["bad", "awful", "dull"], ["red", "green", "blue"]
    out = []
    for _ in range(n):
        positive = rng.random() < 0.5
        chosen = [t for t in tags if rng.random() < 0.4]
        text = " ".join(rng.choice(good if positive else bad) for _ in range(4)) + " " + " ".join(chosen)
        label = {"single": "yes" if positive else "no", "multi": chosen,
                 "regression": round((4.0 if positive else 1.0) + rng.random(), 2)}[task]
        out.append({"text": text.strip(), "label": label})
    return out


def check_image_job(a):
    """The Fashion-MNIST job, 12 steps on 256 images, evaluated on the first 64 test images."""
    d = os.path.join(a.out, "image")
    os.makedirs(d)
    n = 64
    images = os.path.join(a.idx_dir, "t10k-images-idx3-ubyte.gz")
    cmd = [a.tenax, "train", a.image_job, "max_steps=12", "per_device_train_batch_size=16",
           f"per_device_eval_batch_size={n}", "eval_strategy=no", "save_steps=6", "logging_steps=4",
           f"output_dir={d}/out", f"model.model_name_or_path={a.image_model}",
           f"data.train_file={os.path.join(a.idx_dir, 'train-images-idx3-ubyte.gz')}",
           f"data.validation_file={images}", "data.test_file=", "data.max_train_samples=256",
           f"data.max_eval_samples={n}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return [f"image: tenax train exited {r.returncode}\n{r.stdout}\n{r.stderr}"]
    tenax = json.load(open(os.path.join(d, "out", "eval_results.json")))
    check = subprocess.run([a.python, "-c", IMAGE_CHECK, os.path.join(d, "out", "model"), images,
                            os.path.join(a.idx_dir, "t10k-labels-idx1-ubyte.gz"), str(n)],
                           capture_output=True, text=True)
    if check.returncode != 0:
        return [f"image: transformers could not load or run the model\n{check.stderr}"]
    hf = json.loads(check.stdout.strip().splitlines()[-1])
    print(f"image: tenax {json.dumps(tenax)}\nimage: transformers {json.dumps(hf)}")
    failures = []
    label_names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle boot"]
    if hf["id2label"] != label_names:
        failures.append(f"image: transformers reads id2label {hf['id2label']}, expected the job's label_names")
    if abs(hf["eval_loss"] - tenax["eval_loss"]) > 1e-5:
        failures.append(f"image: eval_loss {tenax['eval_loss']} (tenax) vs {hf['eval_loss']} (transformers)")
    if abs(hf["eval_accuracy"] - tenax["eval_accuracy"]) > 1e-9:
        failures.append(f"image: eval_accuracy {tenax['eval_accuracy']} vs {hf['eval_accuracy']}")
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tenax", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--image-job", required=True)
    p.add_argument("--image-model", required=True)
    p.add_argument("--idx-dir", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if not os.path.exists(a.python):
        sys.exit(f"{a.python} is missing: run `make assets` (tools/setup_python_hf.sh) for transformers")
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    failures = []
    for task, expected_type in [("single", "single_label_classification"),
                                ("multi", "multi_label_classification"), ("regression", "regression")]:
        d = os.path.join(a.out, task)
        os.makedirs(d)
        for split, n, seed in [("train", 64, 1), ("validation", 24, 2)]:
            with open(os.path.join(d, f"{split}.jsonl"), "w") as f:
                for r in rows(n, seed, task):
                    f.write(json.dumps(r) + "\n")
        validation = rows(24, 2, task)
        with open(os.path.join(d, "validation.json"), "w") as f:
            json.dump(validation, f)
        cmd = [a.tenax, "train", "max_steps=12", "per_device_train_batch_size=8", "per_device_eval_batch_size=64",
               "learning_rate=1e-3", "save_steps=6", f"output_dir={d}/out", f"model.model_name_or_path={a.model}",
               "model.ignore_mismatched_sizes=true", f"data.train_file={d}/train.jsonl",
               f"data.validation_file={d}/validation.jsonl", "data.max_seq_length=16"]
        if task != "regression":
            cmd.append("metrics.metric_name=accuracy")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{task}: tenax train exited {r.returncode}\n{r.stdout}\n{r.stderr}")
            continue
        tenax = json.load(open(os.path.join(d, "out", "eval_results.json")))
        check = subprocess.run([a.python, "-c", CHECK, os.path.join(d, "out", "model"),
                                os.path.join(d, "validation.json"), "16"], capture_output=True, text=True)
        if check.returncode != 0:
            failures.append(f"{task}: transformers could not load or run the model\n{check.stderr}")
            continue
        hf = json.loads(check.stdout.strip().splitlines()[-1])
        print(f"{task}: tenax {json.dumps(tenax)}\n{task}: transformers {json.dumps(hf)}")
        if hf["problem_type"] != expected_type:
            failures.append(f"{task}: transformers reads problem_type {hf['problem_type']}, expected {expected_type}")
        if abs(hf["eval_loss"] - tenax["eval_loss"]) > 1e-5:
            failures.append(f"{task}: eval_loss {tenax['eval_loss']} (tenax) vs {hf['eval_loss']} (transformers)")
        if "eval_accuracy" in hf and abs(hf["eval_accuracy"] - tenax["eval_accuracy"]) > 1e-9:
            failures.append(f"{task}: eval_accuracy {tenax['eval_accuracy']} vs {hf['eval_accuracy']}")
    failures += check_image_job(a)
    if failures:
        sys.exit("FAILED:\n" + "\n".join(failures))
    print("OK: transformers loads every head tenax train saved (text and image) and reproduces its evaluation")


if __name__ == "__main__":
    main()
