#!/usr/bin/env python3
"""Splits a Chrome trace of training steps (bench/profile_finetune.sh) by phase and by op.

Reads the traces that train/src/profile_steps.h (libtorch's legacy profiler: a JSON
array of "X" events) and bench/hf_trainer_finetune.py (torch.profiler: {"traceEvents": ...})
write, each with its TRACE.meta.json (the window's wall time and step range), and prints for
each, per training step:

  phases   the top-level events of the training thread in time order: "forward" from
           aten::embedding up to the first autograd::engine::evaluate_function event,
           "backward" those events, "after backward" the rest until the next aten::embedding
           (gradient clipping, the optimizer, zero_grad, the loss read-out, and the next
           batch's collation ops); "data" only the first step's ops before its forward; and
           "outside ops", the window's wall time that no op covers (the trainer's own code:
           Python for HF, C++ for Tenax, plus the collator's pure-Python work on HF's side)
  ops      self time (an op's time minus that of the ops it calls) by op, largest first, and
           grouped into families (GEMM, softmax, layer norm, GELU, dropout, ...)

Usage: bench/profile_summary.py TRACE [TRACE...]
"""
import collections
import json
import sys

FAMILIES = [  # first match wins; op names as aten registers them (both torch 1.13 and 2.x)
    ("GEMM (mm/addmm/bmm)", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                             "aten::linear", "aten::_mkl_linear", "aten::mkldnn_linear")),
    ("attention kernel (SDPA)", ("aten::_scaled_dot_product", "aten::scaled_dot_product")),
    ("softmax (+backward)", ("aten::_softmax", "aten::softmax", "aten::_softmax_backward_data")),
    ("layer norm (+backward)", ("aten::native_layer_norm", "aten::layer_norm", "aten::native_layer_norm_backward")),
    ("GELU (+backward)", ("aten::gelu",)),
    ("dropout masks (bernoulli)", ("aten::bernoulli", "aten::native_dropout", "aten::dropout", "aten::empty_like")),
    ("embedding (+dense backward)", ("aten::embedding", "aten::index_select", "aten::index_add", "aten::index_put",
                                     "aten::_embedding_bag", "aten::embedding_backward",
                                     "aten::embedding_dense_backward", "aten::_index_put_impl_",
                                     "aten::sort", "aten::_unique")),
    ("optimizer kernels (fused/foreach AdamW)", ("aten::_fused_adamw", "aten::_foreach_", "Optimizer.", "tenax::FusedAdamW")),
    ("grad zeroing (zero_/fill_)", ("aten::zero_", "aten::fill_")),
    ("norms (clipping)", ("aten::norm", "aten::linalg_vector_norm", "aten::_foreach_norm", "aten::stack",
                          "aten::clamp")),
    ("copies/layout (copy_/clone/contiguous/t)", ("aten::copy_", "aten::clone", "aten::contiguous", "aten::to",
                                                  "aten::_to_copy", "aten::t", "aten::transpose", "aten::view",
                                                  "aten::reshape", "aten::permute", "aten::expand",
                                                  "aten::as_strided", "aten::_reshape_alias", "aten::unsafe_view",
                                                  "aten::_unsafe_view", "aten::select", "aten::slice",
                                                  "aten::unsqueeze", "aten::squeeze", "aten::detach",
                                                  "aten::narrow", "aten::split", "aten::chunk", "aten::cat")),
    ("elementwise (add/mul/div/sqrt/addcdiv/lerp...)", ("aten::add", "aten::mul", "aten::div", "aten::sqrt",
                                                        "aten::addcdiv", "aten::addcmul", "aten::lerp",
                                                        "aten::sub", "aten::rsub", "aten::neg", "aten::pow",
                                                        "aten::tanh", "aten::where", "aten::masked_fill",
                                                        "aten::sum", "aten::mean", "aten::max", "aten::reciprocal")),
    ("loss (cross entropy)", ("aten::cross_entropy", "aten::log_softmax", "aten::_log_softmax", "aten::nll_loss")),
    ("allocation (empty/zeros)", ("aten::empty", "aten::zeros", "aten::ones", "aten::full", "aten::resize_")),
    ("autograd bookkeeping", ("autograd::", "AccumulateGrad", "torch::autograd::")),
]


def family(name):
    for fam, prefixes in FAMILIES:
        if name.startswith(prefixes):
            return fam
    return "other"


def load(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    with open(path + ".meta.json") as f:
        meta = json.load(f)
    # Ops only: Kineto also writes python_function / Trace / memory events; the annotations the
    # optimizer adds ("Optimizer.step#AdamW.step") are kept as containers of its ops.
    xs = [e for e in events if e.get("ph") == "X" and e.get("cat", "cpu_op") in ("cpu_op", "user_annotation", "")
          and "dur" in e and not e["name"].startswith("ProfilerStep")]
    return xs, meta


def analyse(xs):
    by_tid = collections.defaultdict(list)
    for e in xs:
        by_tid[e.get("tid")].append(e)
    # The training thread: the one with the most op time.
    main = max(by_tid, key=lambda t: sum(float(e["dur"]) for e in by_tid[t]))
    evs = sorted(by_tid[main], key=lambda e: (float(e["ts"]), -float(e["dur"])))
    self_us = collections.Counter()
    top = []
    stack = []  # [event, end, children_dur]
    for e in evs:
        ts, dur = float(e["ts"]), float(e["dur"])
        while stack and ts >= stack[-1][1] - 1e-3:
            done = stack.pop()
            self_us[done[0]["name"]] += float(done[0]["dur"]) - done[2]
        if stack:
            stack[-1][2] += dur
        else:
            top.append(e)
        stack.append([e, ts + dur, 0.0])
    while stack:
        done = stack.pop()
        self_us[done[0]["name"]] += float(done[0]["dur"]) - done[2]
    phases = collections.Counter()
    state = "data"
    for e in top:
        n = e["name"]
        if n.startswith("autograd::engine::evaluate_function"):
            state = "backward"
        elif n == "aten::embedding" and state != "forward":
            state = "forward"
        elif state == "backward":
            state = "after backward"
        phases[state] += float(e["dur"])
    covered = sum(float(e["dur"]) for e in top)
    return self_us, phases, covered, main


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        xs, meta = load(path)
        self_us, phases, covered, tid = analyse(xs)
        steps = meta["last_step"] - meta["first_step"] + 1
        wall_ms = meta["wall_s"] * 1e3 / steps
        print(f"== {path}: {meta['system']}{' (torch ' + meta['torch'] + ', optim ' + meta['optim'] + ')' if 'torch' in meta else ''}, "
              f"steps {meta['first_step']}..{meta['last_step']}: {wall_ms:.1f} ms per step (wall, profiler on)")
        print(f"  {'phase':40} {'ms/step':>8} {'share':>6}")
        for ph in ("data", "forward", "backward", "after backward"):
            print(f"  {ph:40} {phases[ph] / 1e3 / steps:8.2f} {100 * phases[ph] / 1e3 / steps / wall_ms:5.1f}%")
        outside = wall_ms - covered / 1e3 / steps
        print(f"  {'outside ops (trainer code, Python)':40} {outside:8.2f} {100 * outside / wall_ms:5.1f}%")
        fams = collections.Counter()
        for n, us in self_us.items():
            fams[family(n)] += us
        print(f"  {'op family (self time)':40} {'ms/step':>8} {'share':>6}")
        for fam, us in fams.most_common():
            print(f"  {fam:40} {us / 1e3 / steps:8.2f} {100 * us / 1e3 / steps / wall_ms:5.1f}%")
        print(f"  {'op (self time), top 25':40} {'ms/step':>8} {'share':>6}")
        for n, us in self_us.most_common(25):
            print(f"  {n[:40]:40} {us / 1e3 / steps:8.2f} {100 * us / 1e3 / steps / wall_ms:5.1f}%")
        print()


if __name__ == "__main__":
    main()
