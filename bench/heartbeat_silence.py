#!/usr/bin/env python3
"""How long can a healthy agent be silent? The measurement behind the heartbeat defaults.

Runs the synthetic_regression example as two `tenax run --nnodes 2:2` agents on this host (one
worker each, the default heartbeat: 500 ms x 5 = 2.5 s), under each load condition:
  quiet  nothing else started by this script
  cpu2   stress-ng --cpu 2             (as many CPU hogs as this machine has cores)
  cpu4   stress-ng --cpu 4             (twice as many: an oversubscribed node)
  vm     stress-ng --vm 2 --vm-bytes 2G (memory traffic and page faults)
The hosting agent logs the rendezvous service's `longest silence of a live node` at exit: the
longest gap between two messages from a node that was never declared dead. The figure reported
is that silence as a fraction of the expiry (interval x liveness): below 1.0 means no false alarm.
Also counted: false alarms ("missed heartbeats" in the logs) and restarts.

The rules of bench/bench_rules.py: conditions in an order shuffled per round from a printed seed
(--seed repeats it), at least 5 rounds, median and spread (min..max) per condition, the machine's
load printed per run, the header with the commit and the command, written to --results. A "quiet"
run starts only once the 1-minute load is at most the core count (the previous condition's hogs
have faded), and is run again when it started above it; the others are loaded on purpose.

  python3 bench/heartbeat_silence.py --build build [--rounds 5] [--steps 3000] [--seed N] [--results FILE]
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402
import procfs  # noqa: E402  (tools/procfs.py)

CONDITIONS = {
    "quiet": None,
    "cpu2": ["stress-ng", "--cpu", "2", "--quiet"],
    "cpu4": ["stress-ng", "--cpu", "4", "--quiet"],
    "vm": ["stress-ng", "--vm", "2", "--vm-bytes", "2G", "--quiet"],
}
EXPIRY_MS = 2500  # the defaults: 500 ms x 5
SILENCE = re.compile(r"longest silence of a live node was (\d+) ms")


def find(build, name):
    for root, _, files in os.walk(os.path.join(build, "examples")):
        if name in files:
            return os.path.join(root, name)
    sys.exit(f"heartbeat_silence.py: no {name} under {build}/examples (build first)")


def one_run(tenax, example, steps, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    port = procfs.free_port()
    env = dict(os.environ, TENAX_GLOO_HOSTNAME="127.0.0.1")
    agents = []
    for node in (0, 1):
        argv = [tenax, "run", "--nproc-per-node", "1", "--nnodes", "2", "--node-id", str(node),
                "--rdzv-endpoint", f"127.0.0.1:{port}", "--max-restarts", "5",
                "--run-dir", os.path.join(out, "run-node%n"), "--",
                example, "--output-dir", os.path.join(out, "train"), "--max-steps", str(steps),
                "--save-steps", "100", "--logging-steps", "100"]
        log = open(os.path.join(out, f"node{node}.log"), "w")
        agents.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env), log))
    codes = []
    for p, log in agents:
        try:
            codes.append(p.wait(timeout=900))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
        log.close()
    text = "".join(open(os.path.join(out, f"node{n}.log")).read() for n in (0, 1))
    m = SILENCE.search(text)
    return {
        "codes": codes,
        "silence_ms": int(m.group(1)) if m else None,
        "false_alarms": text.count("missed heartbeats"),
        "restarts": text.count("re-joining the rendezvous"),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--conditions", default=",".join(CONDITIONS))
    p.add_argument("--results", default=None, help="results file (default bench/results/results-heartbeat-<UTC date>.txt)")
    args = p.parse_args()
    conditions = args.conditions.split(",")
    for c in conditions:
        if c not in CONDITIONS:
            sys.exit(f"heartbeat_silence.py: unknown condition '{c}' (known: {', '.join(CONDITIONS)})")
    if any(CONDITIONS[c] for c in conditions) and not shutil.which("stress-ng"):
        sys.exit("heartbeat_silence.py: stress-ng is missing (apt-get install stress-ng)")
    tenax = os.path.join(args.build, "launcher", "tenax")
    example = find(args.build, "synthetic_regression")
    report = bench_rules.Report("heartbeat", args.results, args.rounds)
    say = report.say
    order = bench_rules.RoundOrder(conditions, args.seed)
    say(bench_rules.header("heartbeat_silence", args.build))
    say(f"  {args.rounds} round(s), {args.steps} steps, heartbeat 500 ms x 5 (expiry {EXPIRY_MS} ms); "
        f"{order.describe()}")
    results = {c: [] for c in conditions}
    work = tempfile.mkdtemp(prefix="tenax-heartbeat-")

    def run(c):
        hog = subprocess.Popen(CONDITIONS[c], start_new_session=True) if CONDITIONS[c] else None
        try:
            time.sleep(1 if hog else 0)
            return one_run(tenax, example, args.steps, os.path.join(work, c))
        finally:
            if hog:
                os.killpg(hog.pid, signal.SIGKILL)
                hog.wait()

    for r in range(1, args.rounds + 1):
        conds = order.next_round()
        say(f"round {r}: order {' '.join(conds)}")
        for c in conds:
            # The load that matters is what runs beside the job, so it is judged before the run
            # (before the hog starts; the 1-minute average lags: a quiet run waits for the previous
            # condition's hogs to fade, and one that starts above the core count is run again).
            # The other conditions are loaded on purpose: they neither wait nor run again.
            quiet = c == "quiet"
            res = bench_rules.run_on_quiet_machine(lambda: run(c), say, c, attempts=3 if quiet else 1,
                                                   max_wait_s=600.0 if quiet else 0.0)
            ratio = res["silence_ms"] / EXPIRY_MS if res["silence_ms"] is not None else None
            say(f"  {c:5s}: exit {res['codes']}, longest silence {res['silence_ms']} ms "
                f"({'?' if ratio is None else f'{ratio:.3f}'} of the expiry), false alarms {res['false_alarms']}, "
                f"restarts {res['restarts']}, load {res['load0']:.2f} before, {os.getloadavg()[0]:.2f} after"
                + ("  (LOADED)" if quiet and res.get("loaded") else ""))
            results[c].append((res, ratio))
    say()
    say("condition  median silence  spread (min..max)   median/expiry  max/expiry  false alarms  runs ok")
    for c in conditions:
        vals = [res["silence_ms"] for res, _ in results[c] if res["silence_ms"] is not None]
        alarms = sum(res["false_alarms"] for res, _ in results[c])
        ok = sum(1 for res, _ in results[c] if res["codes"] == [0, 0])
        if not vals:
            say(f"{c:9s}  (no measurement)")
            continue
        med = statistics.median(vals)
        say(f"{c:9s}  {med:10.0f} ms   {min(vals):5d}..{max(vals):5d} ms   {med / EXPIRY_MS:13.3f}  "
            f"{max(vals) / EXPIRY_MS:10.3f}  {alarms:12d}  {ok}/{len(results[c])}")
    shutil.rmtree(work, ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
