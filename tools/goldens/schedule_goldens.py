#!/usr/bin/env python3
"""Goldens for Tenax's learning-rate schedules and optimizers, produced by transformers and torch.

Regenerate (in the reference venv of tools/goldens/requirements-model.txt: Debian's
python3-torch 1.13, the libtorch build the C++ side links, plus transformers 4.44.2):

    .venv-torch113/bin/python tools/goldens/schedule_goldens.py

It writes two small JSON files into tests/sdk/goldens/:

  lr_schedule_goldens.json  the rate of every optimizer step (and a few past the end) of
                            transformers.get_scheduler's linear, cosine, cosine_with_restarts,
                            polynomial, constant and constant_with_warmup, over cases with and
                            without warmup and with lr_scheduler_kwargs (num_cycles, lr_end,
                            power); tests/sdk/lr_schedule_test.cpp compares tenax::sdk::LrSchedule
  adamw_goldens.json        a tiny model (Linear, LayerNorm, Linear, with biases), its initial
                            weights, fixed inputs and targets, the names transformers'
                            Trainer.get_decay_parameter_names gives, and the parameters after each
                            of 10 steps of torch.optim.AdamW over transformers' two parameter
                            groups (weight decay / none), non-default betas and eps, a linear
                            schedule with warmup and clip_grad_norm_(1.0);
                            tests/sdk/adamw_golden_test.cpp replays it with libtorch
  optimizer_goldens.json    the same replay for optim = "sgd" and "adafactor", each optimizer
                            built by transformers' own Trainer.get_optimizer_cls_and_kwargs (SGD
                            with learning_rate; Adafactor with scale_parameter and relative_step
                            off) over the same two groups; tests/sdk/optimizer_goldens_test.cpp
                            replays it with tenax::sdk::create_optimizer_for

CI has no Python: the goldens are committed and the C++ tests read them.
"""
import json
import pathlib
import tempfile

import torch
import transformers
from torch import nn
from transformers import Trainer, TrainingArguments, get_scheduler

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "sdk" / "goldens"
STEPS_PAST_END = 3  # the rates after num_training_steps are part of the contract too

# (name, warmup, total, base lr, scheduler_specific_kwargs)
SCHEDULE_CASES = []
for _type in ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup"):
    SCHEDULE_CASES.append((_type, 0, 20, 1.0, {}))
    SCHEDULE_CASES.append((_type, 5, 30, 1.0, {}))
    SCHEDULE_CASES.append((_type, 7, 19, 5e-5, {}))
SCHEDULE_CASES += [
    ("linear", 12, 10, 1.0, {}),  # warmup longer than the run
    ("cosine", 4, 25, 1.0, {"num_cycles": 1.5}),
    ("cosine", 0, 16, 3e-4, {"num_cycles": 0.25}),
    ("cosine_with_restarts", 4, 25, 1.0, {"num_cycles": 2}),
    ("cosine_with_restarts", 0, 17, 1.0, {"num_cycles": 3}),
    ("polynomial", 3, 23, 1e-3, {"lr_end": 1e-5, "power": 2.0}),
    ("polynomial", 0, 15, 1e-3, {"lr_end": 1e-5, "power": 2.0}),
    ("polynomial", 5, 20, 2e-2, {"lr_end": 1e-4, "power": 0.5}),
]

# AdamW replay: transformers' defaults replaced by values that show up if ignored.
ADAMW_STEPS = 10
ADAMW = {"lr": 5e-2, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.01, "warmup_steps": 3,
         "max_grad_norm": 1.0, "batch": 6, "in": 4, "hidden": 8, "out": 3}


def schedule_goldens():
    cases = []
    for name, warmup, total, base_lr, kwargs in SCHEDULE_CASES:
        param = torch.zeros(1, requires_grad=True)
        optimizer = torch.optim.SGD([param], lr=base_lr)
        scheduler = get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total,
                                  scheduler_specific_kwargs=dict(kwargs))
        lrs = []
        for _ in range(total + STEPS_PAST_END):
            lrs.append(optimizer.param_groups[0]["lr"])  # the rate of this optimizer step
            optimizer.step()  # no gradient: changes nothing, keeps the scheduler's order check quiet
            scheduler.step()
        cases.append({"type": name, "warmup_steps": warmup, "total_steps": total, "base_lr": base_lr,
                      "kwargs": kwargs, "lrs": lrs})
    return {"transformers": transformers.__version__, "torch": torch.__version__, "cases": cases}


class TinyNet(nn.Module):
    """Linear -> tanh -> LayerNorm -> Linear; the LayerNorm's name does not say what it is."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(ADAMW["in"], ADAMW["hidden"])
        self.post = nn.LayerNorm(ADAMW["hidden"])
        self.head = nn.Linear(ADAMW["hidden"], ADAMW["out"])

    def forward(self, x):
        return self.head(self.post(torch.tanh(self.encoder(x))))


def named_values(model):
    return {n: p.detach().flatten().tolist() for n, p in model.named_parameters()}


def tiny_replay_setup():
    """The replays' model at its initial weights, its inputs and targets (the same for every optimizer)."""
    torch.manual_seed(20240611)
    model = TinyNet()
    with torch.no_grad():  # LayerNorm parameters away from 1 and 0, so their update shows
        model.post.weight.copy_(1.0 + 0.3 * torch.randn(ADAMW["hidden"]))
        model.post.bias.copy_(0.2 * torch.randn(ADAMW["hidden"]))
    generator = torch.Generator().manual_seed(7)
    inputs = torch.randn(ADAMW_STEPS, ADAMW["batch"], ADAMW["in"], generator=generator)
    targets = 0.5 * torch.randn(ADAMW_STEPS, ADAMW["batch"], ADAMW["out"], generator=generator)
    return model, inputs, targets


def decay_groups(model):
    """transformers.Trainer.create_optimizer's grouping (self is unused by this method)."""
    decay = Trainer.get_decay_parameter_names(None, model)
    groups = [
        {"params": [p for n, p in model.named_parameters() if n in decay and p.requires_grad],
         "weight_decay": ADAMW["weight_decay"]},
        {"params": [p for n, p in model.named_parameters() if n not in decay and p.requires_grad],
         "weight_decay": 0.0},
    ]
    return decay, groups


def replay(model, optimizer, inputs, targets):
    """ADAMW_STEPS steps as transformers' Trainer takes them: clip, step, schedule."""
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=ADAMW["warmup_steps"],
                              num_training_steps=ADAMW_STEPS)
    steps = []
    for step in range(ADAMW_STEPS):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs[step]), targets[step])
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), ADAMW["max_grad_norm"])
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        steps.append({"loss": loss.item(), "grad_norm": grad_norm.item(), "lr": lr,
                      "params": named_values(model)})
    return steps


def replay_record(model, initial, inputs, targets, steps):
    return {"config": ADAMW, "steps_count": ADAMW_STEPS,
            "shapes": {n: list(p.shape) for n, p in model.named_parameters()}, "initial": initial,
            "inputs": inputs.flatten().tolist(), "targets": targets.flatten().tolist(), "steps": steps}


def adamw_goldens():
    model, inputs, targets = tiny_replay_setup()
    initial = named_values(model)
    decay, groups = decay_groups(model)
    optimizer = torch.optim.AdamW(groups, lr=ADAMW["lr"], betas=tuple(ADAMW["betas"]), eps=ADAMW["eps"])
    steps = replay(model, optimizer, inputs, targets)
    print("grad norms:", " ".join(f"{s['grad_norm']:.3f}" for s in steps))
    assert any(s["grad_norm"] > ADAMW["max_grad_norm"] for s in steps), "clipping must act in some step"
    assert any(s["grad_norm"] < ADAMW["max_grad_norm"] for s in steps), "and not in some other"
    return {"transformers": transformers.__version__, "torch": torch.__version__,
            "decay_parameter_names": decay, **replay_record(model, initial, inputs, targets, steps)}


def optimizer_replay(optim):
    """adamw_goldens' replay with the optimizer transformers' Trainer builds for `optim`."""
    model, inputs, targets = tiny_replay_setup()
    initial = named_values(model)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, optim=optim, learning_rate=ADAMW["lr"],
                                 weight_decay=ADAMW["weight_decay"], adam_beta1=ADAMW["betas"][0],
                                 adam_beta2=ADAMW["betas"][1], adam_epsilon=ADAMW["eps"], use_cpu=True,
                                 report_to="none")
        optimizer_cls, optimizer_kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    _, groups = decay_groups(model)
    optimizer = optimizer_cls(groups, **optimizer_kwargs)
    steps = replay(model, optimizer, inputs, targets)
    state_keys = sorted({k for s in optimizer.state.values() for k in s if k != "RMS"})
    print(f"{optim}: {optimizer_cls.__name__} {optimizer_kwargs}; state {state_keys}")
    return {"optimizer": optimizer_cls.__name__,
            "kwargs": {k: v for k, v in optimizer_kwargs.items() if isinstance(v, (int, float, bool, str))},
            "state_keys": state_keys, **replay_record(model, initial, inputs, targets, steps)}


def optimizer_goldens():
    return {"transformers": transformers.__version__, "torch": torch.__version__,
            "replays": {optim: optimizer_replay(optim) for optim in ("sgd", "adafactor")}}


def write(name, data):
    GOLDENS.mkdir(parents=True, exist_ok=True)
    path = GOLDENS / name
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size} bytes)")


def main():
    torch.set_num_threads(1)
    write("lr_schedule_goldens.json", schedule_goldens())
    write("adamw_goldens.json", adamw_goldens())
    write("optimizer_goldens.json", optimizer_goldens())


if __name__ == "__main__":
    main()
