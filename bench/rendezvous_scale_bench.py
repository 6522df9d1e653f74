#!/usr/bin/python3
"""Rendezvous at scale: one Tenax rendezvous service (CURVE on) and N agents, N = 64, 256, 1,024.

Each run is one invocation of build/bench/rendezvous_scale_bench (bench/rendezvous_scale_bench.cpp
says what it measures and checks): the service in a process of its own, N RendezvousClients with
their own node ids as threads of another, default heartbeat (500 ms x 5) and last call (3 s),
min_nodes N-1, max_nodes N. Per run: the time for generation 0 to form, the service's CPU and the
loopback bytes per second over a steady window, then one agent destroyed without leave() and the
time until the N-1 survivors hold generation 1 (detection, notification and re-form apart).

The rules of bench/bench_rules.py: the order of the N is shuffled per round from a printed seed,
at least 5 rounds, medians with their range, the load printed at the start and end of every run
and a run that starts beside other work (more than --max-other-cores busy over the 2 s before it:
the 1-minute load would still count the bench's own previous run) or that has other work beside
it run again; the header names the commit. Targets (issue 15): at 1,024 nodes a generation forms in <= 2 s and
re-forms in <= 2 s after a death; the service uses <= 10 % of one core with the default heartbeat.

--systems tenax,c10d also runs torchrun's c10d rendezvous at the same N in the same invocation
(bench/c10d_rendezvous_scale.py with PyPI torch from .venv-hf-pypi: bash bench/setup_hf_peers.sh
pypi; that script says what it runs and how it models a death). The (system, N) runs are shuffled
together per round, and per round and N the c10d figure is divided by Tenax's (formation, re-form,
service CPU, bytes/s): the table gives the median and range of those ratios.

Usage: bench/rendezvous_scale_bench.py [--build build] [--systems tenax,c10d] [--rounds 5]
                                       [--nodes 64,256,1024] [--steady-s 10] [--seed S] [--results FILE]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_rules  # noqa: E402

TARGET_NODES = 1024
TARGET_FORM_S = 2.0
TARGET_REFORM_S = 2.0
# Issue 37: the re-form itself (every survivor told of the death -> all hold the new generation).
# The service closes a re-form as soon as every live member has joined; the last call is only
# the longest it waits for a member that may still come.
TARGET_REFORM_AFTER_NOTICE_S = 1.0
TARGET_CPU_SHARE = 0.10
C10D_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c10d_rendezvous_scale.py")
SYSTEMS = ("tenax", "c10d")


def run_one(a, system, nodes, seed, label):
    log = os.path.join(a.work_dir, f"{label.replace(' ', '-')}-service.log")
    if system == "tenax":
        cmd = [a.bin, "--nodes", str(nodes), "--steady-s", str(a.steady_s), "--seed", str(seed), "--service-log", log]
    else:
        cmd = [a.c10d_python, C10D_SCRIPT, "--nodes", str(nodes), "--steady-s", str(a.steady_s), "--seed", str(seed),
               "--monitor-interval", str(a.monitor_interval), "--nodes-per-proc", str(a.c10d_nodes_per_proc),
               "--form-timeout", str(a.c10d_phase_timeout), "--reform-timeout", str(a.c10d_phase_timeout)]
    loadavg0 = os.getloadavg()[0]
    t0 = time.time()
    busy0 = bench_rules.cpu_busy_seconds()
    children0 = sum(os.times()[2:4])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        out, err, code = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, err, code = e.stdout or "", (e.stderr or "") + f"\n(killed after {a.timeout} s)", -1
        out = out.decode() if isinstance(out, bytes) else out
        err = err.decode() if isinstance(err, bytes) else err
    wall = time.time() - t0
    # CPU seconds of the whole machine during the run beyond the bench's own (its processes'),
    # per second: other work that shared the 2 cores.
    job_cpu = sum(os.times()[2:4]) - children0
    other_cores = max(0.0, (bench_rules.cpu_busy_seconds() - busy0) - job_cpu) / wall
    with open(os.path.join(a.work_dir, f"{label.replace(' ', '-')}-bench.log"), "w") as f:
        f.write(out + err)
    line = next((x for x in out.splitlines() if x.startswith("RDZV_RESULT ")), None)
    if line is None:
        r = {"failed": (err.strip().splitlines() or [f"exit {code}"])[-1]}
    else:
        # c10d_rendezvous_scale.py reports what it measured before a failure ("failed" says what).
        r = json.loads(line[len("RDZV_RESULT "):])
        if code != 0:
            r.setdefault("failed", (err.strip().splitlines() or [f"exit {code}"])[-1])
        if "service" in r:
            r["longest_silence_ms"] = r["service"]["longest_silence_ms"]
    r.update(wall_s=wall, other_cores=other_cores, loadavg0=loadavg0, load_end=os.getloadavg()[0])
    return r


TENAX_ROWS = [
    ("generation forms: first join() -> all hold an Assignment (s)", "form_s", 1, 3),
    ("death -> first survivor sees ABORTED (detection) (s)", "detect_s", 1, 3),
    ("death -> last survivor sees ABORTED (s)", "notified_s", 1, 3),
    ("death -> all survivors hold generation 1 (s)", "reform_s", 1, 3),
    ("  of which last ABORTED -> all hold gen. 1: the re-form (s)", "reform_after_notified_s", 1, 3),
    ("service CPU, steady, % of one core", "service_cpu_share", 100, 2),
    ("  its ZeroMQ I/O threads (CURVE, TCP), % of one core", "service_zmq_io_share", 100, 2),
    ("  its busiest other thread (the service thread), % of one core", "service_busiest_other_share", 100, 2),
    ("service CPU per heartbeat round trip (us)", "service_us_per_heartbeat", 1, 1),
    ("loopback bytes/s, steady (kB/s, both directions)", "lo_Bps", 1e-3, 1),
    ("  loopback bytes/s before the clients started (kB/s)", "lo_baseline_Bps", 1e-3, 1),
    ("bytes per heartbeat round trip on loopback (B)", "bytes_per_heartbeat", 1, 0),
    ("the N agents' CPU (this machine), % of one core", "clients_cpu_share", 100, 1),
    ("service CPU from the first join() to generation 0 formed (s)", "form_service_cpu_s", 1, 3),
    ("service CPU from the death to generation 1 formed, heartbeats included (s)", "reform_service_cpu_s", 1, 3),
    ("constructing the N clients (connect) (s)", "connect_s", 1, 3),
    ("service CPU for the N CURVE handshakes (s)", "connect_service_cpu_s", 1, 3),
    ("longest silence of a healthy node, at the service (ms)", "longest_silence_ms", 1, 0),
]
C10D_ROWS = [
    ("round 0 forms: go -> all hold their RendezvousInfo (s)", "form_s", 1, 3),
    ("  the median agent (s)", "form_median_s", 1, 3),
    ("  participants of round 0 when it formed or timed out", "round0_participants", 1, 0),
    ("  the agents' CPU until then (on a cluster: spread over N machines) (s)", "form_agents_cpu_s", 1, 1),
    ("death -> round 1 open: the dead node dropped after 15 s of silence (s)", "round1_open_s", 1, 3),
    ("death -> N-1 participants: the 30 s last call starts (s)", "last_call_start_s", 1, 3),
    ("death -> all survivors hold round 1 (s)", "reform_s", 1, 3),
    ("  of which after the last call's 30 s (s)", "reform_after_last_call_s", 1, 3),
    ("service (TCPStore) CPU, steady, % of one core", "service_cpu_share", 100, 2),
    ("service CPU per keep-alive interval and node (us)", "service_us_per_heartbeat", 1, 1),
    ("loopback bytes/s, steady (kB/s, both directions)", "lo_Bps", 1e-3, 1),
    ("  loopback bytes/s before the agents started (kB/s)", "lo_baseline_Bps", 1e-3, 1),
    ("bytes per keep-alive interval and node on loopback (B)", "bytes_per_heartbeat", 1, 0),
    ("the rendezvous state (one store value, base64) (B)", "state_bytes", 1, 0),
    ("store reads (get_state) per s, steady", "store_gets_per_s", 1, 1),
    ("store compare-and-sets (set_state) per s, steady", "store_sets_per_s", 1, 1),
    ("  of which failed (a stale state), per s", "store_failed_sets_per_s", 1, 1),
    ("keep-alives that failed (5 s of lost compare-and-sets) in the steady window", "steady_keepalive_failures", 1, 0),
    ("the N agents' CPU (this machine), % of one core", "clients_cpu_share", 100, 1),
    ("service CPU from go to round 0 formed (s)", "form_service_cpu_s", 1, 3),
    ("service CPU from the death to round 1 formed (s)", "reform_service_cpu_s", 1, 3),
    ("the N agents connecting (TCPStore clients) (s)", "connect_s", 1, 3),
]
RATIO_ROWS = [
    ("formation", "form_s"),
    ("re-form after a death", "reform_s"),
    ("service CPU, steady", "service_cpu_share"),
    ("loopback bytes/s, steady", "lo_Bps"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(bench_rules.REPO, "build"))
    p.add_argument("--systems", default="tenax,c10d", help="comma-separated: tenax, c10d (torchrun's c10d rendezvous)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--nodes", default="64,256,1024", help="comma-separated N")
    p.add_argument("--steady-s", type=float, default=10.0, help="the steady window for CPU and bytes (s)")
    p.add_argument("--seed", type=int, default=None, help="seed of the per-round order and the victims (default: random)")
    p.add_argument("--timeout", type=float, default=600, help="the limit of one run (s)")
    p.add_argument("--c10d-python", default=os.path.join(bench_rules.REPO, ".venv-hf-pypi", "bin", "python"),
                   help="the interpreter with PyPI torch for c10d (bash bench/setup_hf_peers.sh pypi makes it)")
    p.add_argument("--monitor-interval", type=float, default=0.1,
                   help="c10d: torchrun's --monitor-interval, the agents' num_nodes_waiting() poll (default 0.1 s)")
    p.add_argument("--c10d-nodes-per-proc", type=int, default=128, help="c10d: agents (threads) per process")
    p.add_argument("--c10d-phase-timeout", type=float, default=240,
                   help="c10d: how long formation and re-formation may each take before the run is failed (s)")
    p.add_argument("--max-other-cores", type=float, default=0.5,
                   help="a run beside more other work than this (cores) is run again")
    p.add_argument("--max-wait-s", type=float, default=120, help="how long to wait for the load to fall before a run")
    p.add_argument("--work-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "tenax-rdzv-scale-bench"))
    p.add_argument("--results", default=None, help="results file (default bench/results/results-rendezvous-scale-<UTC date>.txt)")
    a = p.parse_args()
    systems = [x for x in a.systems.split(",") if x]
    if not systems or any(x not in SYSTEMS for x in systems):
        raise SystemExit(f"rendezvous_scale_bench: --systems takes a comma-separated list of {', '.join(SYSTEMS)}")
    a.bin = os.path.join(os.path.abspath(a.build), "bench", "rendezvous_scale_bench")
    if "tenax" in systems and not os.access(a.bin, os.X_OK):
        raise SystemExit(f"rendezvous_scale_bench: {a.bin} is missing; build it: "
                         f"cmake --build {a.build} --target rendezvous_scale_bench")
    if "c10d" in systems and not os.access(a.c10d_python, os.X_OK):
        raise SystemExit(f"rendezvous_scale_bench: {a.c10d_python} is missing: make it with "
                         f"'bash bench/setup_hf_peers.sh pypi', pass --c10d-python, or leave c10d out (--systems tenax)")
    os.makedirs(a.work_dir, exist_ok=True)
    node_counts = [int(x) for x in a.nodes.split(",")]
    report = bench_rules.Report("rendezvous-scale", a.results, a.rounds)
    say = report.say

    order = bench_rules.RoundOrder([(sy, n) for sy in systems for n in node_counts], a.seed)
    say(bench_rules.header("rendezvous scale bench", a.build if "tenax" in systems else None))
    if "tenax" in systems:
        say(f"  tenax: one RendezvousService (CURVE, the job's keys) in its own process; N RendezvousClients as "
            f"threads of another; heartbeat 500 ms x 5, last call 3 s, min N-1, max N")
    if "c10d" in systems:
        torch_version = subprocess.run([a.c10d_python, "-c", "import torch; print(torch.__version__)"],
                                       capture_output=True, text=True).stdout.strip() or "?"
        say(f"  c10d: torch {torch_version} ({a.c10d_python}): one TCPStore server (libuv) in its own process; N "
            f"DynamicRendezvousHandlers + C10dRendezvousBackend as threads of ceil(N / {a.c10d_nodes_per_proc}) "
            f"processes (+1 for the victim); torch's defaults: keep-alive 5 s x 3, last call 30 s, join 600 s; "
            f"min N-1, max N; num_nodes_waiting() every {a.monitor_interval:g} s (torchrun's monitor interval); "
            f"the survivors' workers fail at the death (a collective with the dead node) and they re-rendezvous")
    say(f"  steady window {a.steady_s:g} s; {a.rounds} round(s)")
    say(f"  {order.describe()}; the victim of each run is drawn from seed + 1000 x round + N")
    say(f"  logs: {a.work_dir}")
    say()
    runs = []
    for rnd in range(1, a.rounds + 1):
        for system, n in order.next_round():
            label = f"round {rnd} {system} N={n}"
            seed = order.seed + 1000 * rnd + n
            # A run starts when the machine is idle now (busy cores over 2 s), not by the 1-minute
            # load: a c10d run at 1,024 nodes keeps ~50 threads runnable and leaves that average
            # above the core count for minutes after it ended, which is no other work.
            r = bench_rules.run_on_quiet_machine(
                lambda: run_one(a, system, n, seed, label), say, label, max_wait_s=a.max_wait_s,
                disturbed=lambda r: f"{r['other_cores']:.2f} cores busy" if r["other_cores"] > a.max_other_cores else "",
                load=bench_rules.busy_cores, max_load=a.max_other_cores)
            r.update(round=rnd, n=n, system=system)
            runs.append(r)
            tail = (f"busy {r['load0']:.2f} cores at the start, load {r['loadavg0']:.2f}->{r['load_end']:.2f}, "
                    f"other work {r['other_cores']:.2f} cores, {r['wall_s']:.0f} s{'  (LOADED)' if r.get('loaded') else ''}")
            if "failed" in r:
                got = ", ".join(f"{k} {r[k]:.3f}" for k in ("form_s", "service_cpu_share", "reform_s") if k in r)
                say(f"  {label:<22} FAILED: {r['failed']}{'  (measured: ' + got + ')' if got else ''}  ({tail})")
            elif system == "tenax":
                say(f"  {label:<22} form {r['form_s']:6.3f} s  detect {r['detect_s']:5.2f} s  reform {r['reform_s']:5.2f} s "
                    f"(after notice {r['reform_after_notified_s']:5.2f} s)  service CPU "
                    f"{100 * r['service_cpu_share']:5.2f} % {r['lo_Bps'] / 1e3:7.1f} kB/s  ({tail})")
            else:
                say(f"  {label:<22} form {r['form_s']:6.3f} s  round 1 open {r.get('round1_open_s', math.nan):5.2f} s  "
                    f"reform {r['reform_s']:5.2f} s  service CPU {100 * r['service_cpu_share']:5.2f} % "
                    f"{r['lo_Bps'] / 1e3:7.1f} kB/s  state {r['state_bytes'] / 1e3:.1f} kB  ({tail})")

    def values(system, n, key, scale=1.0):
        # A failed c10d run still gives what it measured before the failure (its "failed" says what).
        return [r[key] * scale for r in runs if r["system"] == system and r["n"] == n and r.get(key) is not None]

    def median(system, n, key):
        xs = values(system, n, key)
        return statistics.median(xs) if xs else None

    for system, rows in (("tenax", TENAX_ROWS), ("c10d", C10D_ROWS)):
        if system not in systems:
            continue
        mine = [r for r in runs if r["system"] == system]
        say()
        say(f"{system}: medians (min-max) over the rounds; {sum('failed' in r for r in mine)} failed run(s) of "
            f"{len(mine)}")
        say()
        say("| measure | " + " | ".join(f"N = {n:,}" for n in node_counts) + " |")
        say("| --- |" + " --- |" * len(node_counts))
        for title, key, scale, digits in rows:
            say(f"| {title} | " + " | ".join(bench_rules.median_range(values(system, n, key, scale), digits)
                                             for n in node_counts) + " |")

    if systems == list(SYSTEMS) or set(systems) == set(SYSTEMS):
        say()
        say("c10d / Tenax, per round at the same N (how many times Tenax's figure c10d's is): median (min-max)")
        say()
        say("| c10d / Tenax | " + " | ".join(f"N = {n:,}" for n in node_counts) + " |")
        say("| --- |" + " --- |" * len(node_counts))
        for title, key in RATIO_ROWS:
            cells = []
            for n in node_counts:
                ratios = []
                for rnd in range(1, a.rounds + 1):
                    pair = {r["system"]: r.get(key) for r in runs if r["n"] == n and r["round"] == rnd}
                    if pair.get("tenax") and pair.get("c10d") is not None:
                        ratios.append(pair["c10d"] / pair["tenax"])
                cells.append(bench_rules.median_range(ratios, 1))
            say(f"| {title} | " + " | ".join(cells) + " |")

    say()
    if "tenax" in systems and TARGET_NODES in node_counts and median("tenax", TARGET_NODES, "form_s") is not None:
        form, reform = median("tenax", TARGET_NODES, "form_s"), median("tenax", TARGET_NODES, "reform_s")
        cpu = median("tenax", TARGET_NODES, "service_cpu_share")
        after = median("tenax", TARGET_NODES, "reform_after_notified_s")
        last_call = median("tenax", TARGET_NODES, "last_call_s")
        say(f"targets at N = {TARGET_NODES:,} (Tenax, medians):")
        say(f"  generation forms in <= {TARGET_FORM_S:g} s: {form:.3f} s  "
            f"{'MET' if form <= TARGET_FORM_S else 'NOT MET'}")
        say(f"  re-forms in <= {TARGET_REFORM_S:g} s after a death: {reform:.3f} s  "
            f"{'MET' if reform <= TARGET_REFORM_S else 'NOT MET'} (of which detection, {reform - after:.3f} s, "
            f"takes up to 2.6 s by design at the default heartbeat: 500 ms x 5 + a 100 ms sweep)")
        say(f"  the re-form itself (last survivor told -> all hold the new generation) in "
            f"<= {TARGET_REFORM_AFTER_NOTICE_S:g} s: {after:.3f} s  "
            f"{'MET' if after <= TARGET_REFORM_AFTER_NOTICE_S else 'NOT MET'} (it waits at most the "
            f"{last_call:g} s last call)")
        say(f"  service <= {100 * TARGET_CPU_SHARE:g} % of one core: {100 * cpu:.2f} %  "
            f"{'MET' if cpu <= TARGET_CPU_SHARE else 'NOT MET'}")
    if "c10d" in systems and TARGET_NODES in node_counts:
        got = {k: median("c10d", TARGET_NODES, k) for k in ("form_s", "reform_s", "service_cpu_share")}
        failed = [r["failed"] for r in runs if r["system"] == "c10d" and r["n"] == TARGET_NODES and "failed" in r]
        say(f"torchrun's c10d at N = {TARGET_NODES:,} (medians): "
            + ", ".join(f"{k} {v:.3f}" if v is not None else f"{k} -" for k, v in got.items())
            + (f"; {len(failed)} failed run(s): {failed[0]}" if failed else ""))
    report.save()
    return 1 if any("failed" in r for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
