#!/usr/bin/env python3
"""What gradient_checkpointing saves and costs on the demo's model (all-MiniLM-L6-v2, 6 layers):
the peak resident memory of a fine-tuning process and its seconds per step, with and without it,
in one invocation. Each round runs both (order shuffled from a printed seed) as
`tenax train train/jobs/rotten_tomatoes.toml max_steps=N` on one rank (`tenax` execs tenax-train:
one process); the figures are ratios within a round (with/without), median and range over the
rounds. Peak memory is the process's ru_maxrss (the kernel's high-water mark: weights, data and
activations); seconds per step are the Trainer's training seconds over its steps (its 'training
finished' line).

    python3 bench/gradient_checkpointing_bench.py [--build build] [--rounds 5] [--seed S]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402
import train_job  # noqa: E402

SYSTEMS = ["without", "gradient_checkpointing"]


# Runs argv[1:] and prints its exit status, its peak resident memory (ru_maxrss of its only
# child, this helper's) and the tail of its output as JSON: the peak of one process, not of the bench.
PEAK_OF_ONE = ("import json,resource,subprocess,sys;"
               "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
               "print(json.dumps({'rc':p.returncode,'rss_kib':resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
               "'out':p.stdout[-4000:]+p.stderr[-4000:]}))")


def command(build, system, args, output_dir):
    return train_job.command(build, [
        f"output_dir={output_dir}", f"max_steps={args.steps}", f"per_device_train_batch_size={args.batch}",
        f"data.max_seq_length={args.max_length}", f"run.threads={os.cpu_count()}", "save_strategy=no",
        "report_to=none", "disable_tqdm=true",
        f"gradient_checkpointing={'true' if system == 'gradient_checkpointing' else 'false'}"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--out")
    args = p.parse_args()
    build = os.path.abspath(args.build)
    report = bench_rules.Report("gradient-checkpointing", args.out, args.rounds)
    report.say(bench_rules.header("gradient-checkpointing bench", args.build))
    order = bench_rules.RoundOrder(SYSTEMS, args.seed)
    report.say(f"  {order.describe()}")
    report.say(f"  job: tenax train train/jobs/rotten_tomatoes.toml (all-MiniLM-L6-v2) on 1 rank, {args.steps} steps "
               f"of {args.batch} texts x {args.max_length} tokens, {os.cpu_count()} threads, no saves")
    ratios_rss, ratios_step, rss = [], [], {s: [] for s in SYSTEMS}
    with tempfile.TemporaryDirectory(prefix="tenax-gc-bench-") as workdir:
        for r in range(args.rounds):
            got = {}
            for system in order.next_round():
                cmd = command(build, system, args, os.path.join(workdir, f"{system}-{r}"))

                def run(cmd=cmd, system=system):
                    start = time.monotonic()
                    done = subprocess.run([sys.executable, "-c", PEAK_OF_ONE] + cmd, capture_output=True, text=True)
                    res = json.loads(done.stdout.strip().splitlines()[-1])
                    res["wall_s"] = time.monotonic() - start
                    if res["rc"] != 0:
                        sys.exit(f"{system}: {' '.join(cmd)} exited {res['rc']}:\n{res['out']}")
                    # The Trainer's own count of its training seconds (loading and tokenising excluded).
                    done_line = re.search(r"training finished at step (\d+) \(([\d.]+) s", res["out"])
                    if not done_line:
                        sys.exit(f"{system}: no 'training finished' line in:\n{res['out']}")
                    res["step_s"] = float(done_line.group(2)) / int(done_line.group(1))
                    return res
                res = bench_rules.run_on_quiet_machine(run, report.say, f"round {r + 1} {system}")
                got[system] = res
                rss[system].append(res["rss_kib"] / 1024)
            ratios_rss.append(got["gradient_checkpointing"]["rss_kib"] / got["without"]["rss_kib"])
            ratios_step.append(got["gradient_checkpointing"]["step_s"] / got["without"]["step_s"])
            report.say(f"  round {r + 1}: peak RSS without {got['without']['rss_kib'] / 1024:.0f} MiB, with "
                       f"{got['gradient_checkpointing']['rss_kib'] / 1024:.0f} MiB; seconds per step without "
                       f"{got['without']['step_s']:.2f}, with {got['gradient_checkpointing']['step_s']:.2f}")
    report.say("")
    report.say(f"peak RSS, MiB: without {bench_rules.median_range(rss['without'], 0)}, with gradient_checkpointing "
               f"{bench_rules.median_range(rss['gradient_checkpointing'], 0)}")
    report.say(f"peak RSS with / without: {bench_rules.median_range(ratios_rss)}")
    report.say(f"seconds per step with / without: {bench_rules.median_range(ratios_step)}")
    report.save()


if __name__ == "__main__":
    main()
