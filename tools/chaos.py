#!/usr/bin/env python3
"""Chaos/soak driver for Tenax's elastic runtime (`make chaos`; not part of `make test`).

1. Reference: one `tenax run --nproc-per-node 2` of the synthetic_regression example.
2. Chaos: the same training as two `tenax run --nnodes 2:2` agents on this host (one worker
   each, rendezvous on 127.0.0.1, node 0 hosts it, as tests/integration/multi_node_test.cpp),
   while a seeded RNG injects, every few seconds, one fault among:
     kill-worker  SIGKILL one worker (a child of an agent);
     stop-worker  SIGSTOP one worker that is making progress, never SIGCONT: the agent's
                  --hang-timeout must find it and kill it;
     kill-node    SIGKILL an agent and its worker (node loss; node 0 takes the rendezvous
                  service with it), then start that agent again after 0.5-3 s.
3. Verify: both agents exit 0 and the final checkpoint's model/ tensors are bit-identical to
   the reference (`tenax ckpt diff`): the world size is 2 throughout, so any difference is a
   resume bug.

Python 3 standard library only. Everything lands under --out (default /tmp/tenax-chaos-<pid>):
ref/ (reference run), chaos/ (run dirs, train/, one log per agent incarnation). The seed is
always printed; --seed replays the same sequence of choices (kinds, targets, delays,
intervals); the timing of the runtime itself is not replayable.

Exit status: 0 bit-identical and both agents exited 0; 1 otherwise; 2 usage error.
"""

import argparse
import glob
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time

import procfs  # tools/procfs.py, beside this script

FAULTS = ("kill-worker", "stop-worker", "kill-node")
MARKER = ".tenax-chaos"


def log(msg):
    print(msg, flush=True)


def fail_usage(msg):
    print(f"chaos.py: {msg}", file=sys.stderr)
    sys.exit(2)


# --- /proc helpers (tools/procfs.py) --------------------------------------------------------

proc_children = procfs.children
proc_state = procfs.state
proc_environ = procfs.environ
free_port = procfs.free_port


def kill_quietly(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_worker_tree(pid, sig=signal.SIGKILL):
    """`sig` to a worker and, when it leads its own process group (tenax run's workers do), to
    that group too."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    kill_quietly(pid, sig)


def tail(path, lines=40):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            text = f.read().decode(errors="replace")
    except OSError as e:
        return f"(cannot read {path}: {e})"
    return "\n".join(text.splitlines()[-lines:])


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def step_dir(train_dir, step):
    return os.path.join(train_dir, "checkpoints", f"step-{step:09d}")


def committed_steps(train_dir):
    steps = []
    for d in glob.glob(os.path.join(train_dir, "checkpoints", "step-*")):
        m = re.fullmatch(r"step-(\d+)", os.path.basename(d))
        if m and os.path.exists(os.path.join(d, "manifest.json")):
            steps.append(int(m.group(1)))
    return sorted(steps)


# --- agents ----------------------------------------------------------------------------------

class Agent:
    """One `tenax run` agent (one node), restarted with the same arguments after a node kill.
    Each incarnation logs to its own file."""

    def __init__(self, node, argv, env, log_dir):
        self.node = node
        self.argv = argv
        self.env = env
        self.log_dir = log_dir
        self.incarnation = 0
        self.proc = None
        self.logf = None
        self.logs = []
        self.restart_at = None     # monotonic time of a pending restart (after kill-node)
        self.exit_code = None      # the final incarnation's exit code, once it exited by itself

    def start(self):
        path = os.path.join(self.log_dir, f"node{self.node}.{self.incarnation}.log")
        if self.logf:
            self.logf.close()
        self.logf = open(path, "wb")
        self.logs.append(path)
        # Own session: a Ctrl-C on the driver reaches the driver only; it cleans up.
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.incarnation += 1
        self.restart_at = None
        self.exit_code = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def workers(self):
        """Live worker processes (children of the agent that are neither zombies nor dead)."""
        if not self.alive():
            return []
        return [w for w in proc_children(self.proc.pid) if proc_state(w) not in (None, "Z", "X")]

    def kill_node(self):
        """SIGSTOP the agent (so that it cannot start another worker meanwhile), SIGKILL its
        workers and their groups, then SIGKILL the agent and reap it. Returns the workers."""
        pid = self.proc.pid
        kill_quietly(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 1.0
        while proc_state(pid) not in ("T", "t", "Z", None) and time.monotonic() < deadline:
            time.sleep(0.005)
        workers = proc_children(pid)
        for w in workers:
            kill_worker_tree(w)
        kill_quietly(pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        return workers

    def kill_all(self):
        if self.alive():
            self.kill_node()
        if self.logf:
            self.logf.close()
            self.logf = None


def run_reference(args, tenax, train_args, ref_dir):
    run_dir = os.path.join(ref_dir, "run")
    train = os.path.join(ref_dir, "train")
    os.makedirs(ref_dir, exist_ok=True)
    argv = [tenax, "run", "--nproc-per-node", "2", "--run-dir", run_dir, "--"] + train_args(train)
    log_path = os.path.join(ref_dir, "agent.log")
    log(f"== reference: 1 agent, 2 workers, {args.max_steps} steps (log {log_path})")
    start = time.monotonic()
    with open(log_path, "wb") as f:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=args.reference_timeout)
        except subprocess.TimeoutExpired:
            for w in proc_children(proc.pid):
                kill_worker_tree(w)
            proc.kill()
            proc.wait()
            log(f"reference run did not finish within {args.reference_timeout} s; its log:\n{tail(log_path)}")
            return None
        except BaseException:
            for w in proc_children(proc.pid):
                kill_worker_tree(w)
            proc.kill()
            proc.wait()
            raise
    elapsed = time.monotonic() - start
    if code != 0:
        log(f"reference run exited {code} (expected 0); its log:\n{tail(log_path)}")
        return None
    final = step_dir(train, args.max_steps)
    if not os.path.exists(os.path.join(final, "manifest.json")):
        log(f"reference run left no {final}; its log:\n{tail(log_path)}")
        return None
    log(f"   reference finished in {elapsed:.1f} s")
    return elapsed


class Chaos:
    def __init__(self, args, tenax, train_args, chaos_dir, seed):
        self.args = args
        self.tenax = tenax
        self.dir = chaos_dir
        self.train = os.path.join(chaos_dir, "train")
        self.rng = random.Random(seed)
        self.injections = []   # dicts: t, kind, node, pid, step, detail
        self.skipped = []
        self.port = args.port or free_port()
        env = dict(os.environ)
        env["TENAX_GLOO_HOSTNAME"] = "127.0.0.1"
        self.agents = []
        for node in (0, 1):
            argv = [tenax, "run", "--nproc-per-node", "1", "--nnodes", "2:2", "--node-id", str(node),
                    "--rdzv-endpoint", f"127.0.0.1:{self.port}", "--heartbeat-interval", "100",
                    "--join-timeout", str(args.join_timeout), "--max-restarts", str(args.max_restarts),
                    "--hang-timeout", str(args.hang_timeout),
                    "--run-dir", os.path.join(chaos_dir, "run-node%n"), "--"] + train_args(self.train)
            self.agents.append(Agent(node, argv, env, chaos_dir))
        self.t0 = None

    def now(self):
        return time.monotonic() - self.t0

    def progress_step(self):
        """The highest step the workers reported (TENAX_PROGRESS_FILE), else the newest
        committed checkpoint."""
        best = -1
        for path in glob.glob(os.path.join(self.dir, "run-node*", "progress", "rank-*")):
            try:
                with open(path) as f:
                    best = max(best, int(f.read().strip() or -1))
            except (OSError, ValueError):
                pass
        if best < 0:
            steps = committed_steps(self.train)
            best = steps[-1] if steps else 0
        return best

    def progress_fresh(self, worker_pid, max_age):
        """True when the worker's progress file exists and was written within `max_age` s: it
        is past its start and making progress, so --hang-timeout can judge it."""
        path = proc_environ(worker_pid).get("TENAX_PROGRESS_FILE")
        if not path:
            return False
        try:
            return time.time() - os.stat(path).st_mtime <= max_age
        except OSError:
            return False

    def eligible(self, kind):
        """(node, worker pid or None) targets for `kind` right now."""
        out = []
        for a in self.agents:
            if a.restart_at is not None or not a.alive():
                continue
            if kind == "kill-node":
                ws = a.workers()
                out.append((a, ws[0] if ws else None))
                continue
            for w in a.workers():
                state = proc_state(w)
                if state in ("T", "t"):
                    continue  # already stopped: the agent is about to deal with it
                if kind == "stop-worker" and not self.progress_fresh(w, 1.0):
                    continue
                out.append((a, w))
        return out

    def inject(self, kind, pick, delay):
        targets = self.eligible(kind)
        if not targets:
            return False
        agent, worker = targets[int(pick * len(targets)) % len(targets)]
        step = self.progress_step()
        t = self.now()
        if kind == "kill-worker":
            kill_quietly(worker, signal.SIGKILL)
            detail = f"SIGKILL worker pid {worker} of node {agent.node}"
        elif kind == "stop-worker":
            kill_quietly(worker, signal.SIGSTOP)
            detail = f"SIGSTOP worker pid {worker} of node {agent.node} (left stopped)"
        else:
            killed = agent.kill_node()
            agent.restart_at = time.monotonic() + delay
            detail = (f"SIGKILL agent pid {agent.pid} of node {agent.node} and worker(s) "
                      f"{','.join(map(str, killed)) or 'none'}; restart in {delay:.2f} s")
        rec = {"t": t, "kind": kind, "node": agent.node, "pid": worker, "step": step, "detail": detail}
        self.injections.append(rec)
        log(f"   [{t:7.1f} s] #{len(self.injections):<3} {kind:<11} at step ~{step}: {detail}")
        return True

    def run(self):
        args = self.args
        self.t0 = time.monotonic()
        log(f"== chaos: 2 agents x 1 worker, rendezvous 127.0.0.1:{self.port}, up to {args.injections} "
            f"injection(s) of {','.join(args.faults)} every {args.interval[0]:g}-{args.interval[1]:g} s")
        for a in self.agents:
            a.start()
            log(f"   node {a.node}: agent pid {a.pid}, log {a.logs[-1]}")
        stop_at = int(args.stop_fraction * args.max_steps)
        rng = self.rng

        def draw():
            # A fixed number of draws per injection, in a fixed order: --seed replays the choices.
            return {"kind": rng.choice(args.faults), "pick": rng.random(),
                    "delay": rng.uniform(0.5, 3.0), "interval": rng.uniform(*args.interval)}

        plan = draw()
        next_fire = args.interval[0] + rng.uniform(0, args.interval[1] - args.interval[0])
        waiting_since = None
        injecting = True
        next_status = 15.0
        failure = None
        deadline = args.timeout
        while True:
            t = self.now()
            for a in self.agents:
                if a.restart_at is not None and time.monotonic() >= a.restart_at:
                    a.start()
                    log(f"   [{t:7.1f} s] node {a.node} restarted: agent pid {a.pid}, log {a.logs[-1]}")
                elif a.restart_at is None and a.exit_code is None and a.proc.poll() is not None:
                    a.exit_code = a.proc.returncode
                    log(f"   [{t:7.1f} s] node {a.node} agent exited {a.exit_code}")
                    if a.exit_code != 0 and failure is None:
                        failure = f"agent of node {a.node} exited {a.exit_code}"
                        deadline = min(deadline, t + 120)  # let the other one finish or fail
            if all(a.exit_code is not None for a in self.agents):
                break
            if t >= deadline:
                if failure is None:
                    failure = f"agents still running after {args.timeout} s (hang?)"
                else:
                    failure += "; the other agent did not exit within 120 s"
                log(f"   [{t:7.1f} s] {failure}: killing everything")
                break
            if injecting:
                step = self.progress_step()
                reason = None
                if len(self.injections) >= args.injections:
                    reason = f"{len(self.injections)} injection(s) done"
                elif step >= stop_at:
                    reason = f"training near its end (step ~{step} of {args.max_steps})"
                elif any(a.exit_code is not None for a in self.agents):
                    reason = "an agent exited"
                if reason:
                    injecting = False
                    log(f"   [{t:7.1f} s] no more injections: {reason}; waiting for both agents to exit")
                elif t >= next_fire:
                    if self.inject(plan["kind"], plan["pick"], plan["delay"]):
                        next_fire = t + plan["interval"]
                        plan = draw()
                        waiting_since = None
                    else:
                        waiting_since = waiting_since if waiting_since is not None else t
                        if t - waiting_since > 30:
                            self.skipped.append({"t": t, "kind": plan["kind"]})
                            log(f"   [{t:7.1f} s] skipped a {plan['kind']}: no eligible target for 30 s")
                            next_fire = t + plan["interval"]
                            plan = draw()
                            waiting_since = None
            if t >= next_status:
                next_status = t + 15.0
                alive = ", ".join(f"node {a.node} " + ("restarting" if a.restart_at else
                                                       f"pid {a.pid} workers {a.workers() or '-'}"
                                                       if a.alive() else f"exited {a.exit_code}")
                                  for a in self.agents)
                log(f"   [{t:7.1f} s] step ~{self.progress_step()} of {args.max_steps}; "
                    f"{len(self.injections)} injection(s); {alive}")
            time.sleep(0.05)
        return failure

    def kill_all(self):
        for a in self.agents:
            a.kill_all()


def count_in_logs(paths, pattern):
    n = 0
    rx = re.compile(pattern)
    for p in paths:
        try:
            with open(p, errors="replace") as f:
                n += sum(1 for line in f if rx.search(line))
        except OSError:
            pass
    return n


def diff(tenax, a, b):
    r = subprocess.run([tenax, "ckpt", "diff", a, b, "--prefix", "model/"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    return r.returncode, r.stdout.strip()


def find_synth(build):
    hits = []
    for root, _dirs, files in os.walk(os.path.join(build, "examples")):
        if "synthetic_regression" in files:
            p = os.path.join(root, "synthetic_regression")
            if os.path.isfile(p) and os.access(p, os.X_OK):
                hits.append(p)
    return sorted(hits)[0] if hits else None


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="chaos.py", description=__doc__.split("\n\n")[0],
        epilog="Example: python3 tools/chaos.py --build build --injections 3 --seed 42")
    p.add_argument("--build", default="build", help="build directory holding tenax and the example (default build)")
    p.add_argument("--tenax", help="tenax binary (default BUILD/launcher/tenax)")
    p.add_argument("--example", help="synthetic_regression binary (default: found under BUILD/examples)")
    p.add_argument("--out", help="output directory (default /tmp/tenax-chaos-<pid>)")
    p.add_argument("--seed", type=int, help="RNG seed (default: time-based; always printed)")
    p.add_argument("--injections", type=int, default=20, help="faults to inject (default 20)")
    p.add_argument("--faults", default=",".join(FAULTS),
                   help="comma-separated subset of " + ",".join(FAULTS) + " (default all)")
    p.add_argument("--interval", default="3:8",
                   help="MIN:MAX seconds from one injection to the next (default 3:8)")
    p.add_argument("--max-steps", type=int, default=12000, help="training steps (default 12000)")
    p.add_argument("--save-steps", type=int, default=100, help="checkpoint every S steps (default 100)")
    p.add_argument("--logging-steps", type=int, default=500, help="log every L steps (default 500)")
    p.add_argument("--stop-fraction", type=float, default=0.9,
                   help="no injection once the workers are past this fraction of --max-steps (default 0.9)")
    p.add_argument("--hang-timeout", type=int, default=3, help="the agents' --hang-timeout (default 3)")
    p.add_argument("--max-restarts", type=int, default=1000, help="the agents' --max-restarts (default 1000)")
    p.add_argument("--join-timeout", type=int, default=60, help="the agents' --join-timeout (default 60)")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (default: a free one)")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds for the whole chaos run, then everything is killed (default 900)")
    p.add_argument("--reference-timeout", type=float, default=600,
                   help="seconds for the reference run (default 600)")
    a = p.parse_args(argv)
    a.faults = [f.strip() for f in a.faults.split(",") if f.strip()]
    bad = [f for f in a.faults if f not in FAULTS]
    if bad or not a.faults:
        fail_usage(f"--faults: unknown {','.join(bad) or '(none given)'}; choose from {','.join(FAULTS)}")
    try:
        lo, hi = (float(x) for x in a.interval.split(":"))
    except ValueError:
        fail_usage(f"--interval must be MIN:MAX seconds, got {a.interval!r}")
    if not 0 < lo <= hi:
        fail_usage(f"--interval must satisfy 0 < MIN <= MAX, got {a.interval!r}")
    a.interval = (lo, hi)
    if a.max_steps <= 0 or a.save_steps <= 0 or a.save_steps > a.max_steps or a.logging_steps <= 0:
        fail_usage("need 0 < --save-steps <= --max-steps and --logging-steps > 0")
    if a.injections < 0:
        fail_usage("--injections must be >= 0")
    return a


def main(argv):
    args = parse_args(argv)
    tenax = os.path.abspath(args.tenax or os.path.join(args.build, "launcher", "tenax"))
    example = args.example or find_synth(args.build)
    if not os.access(tenax, os.X_OK):
        fail_usage(f"no tenax binary at {tenax} (build first: make build)")
    if not example or not os.access(example, os.X_OK):
        fail_usage(f"no synthetic_regression under {os.path.join(args.build, 'examples')} (build first)")
    example = os.path.abspath(example)
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % (2 ** 31)
    out = os.path.abspath(args.out or f"/tmp/tenax-chaos-{os.getpid()}")
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, MARKER)):
        fail_usage(f"--out {out} exists, is not empty and is not a chaos.py directory; pick another")
    if os.path.exists(os.path.join(out, MARKER)):
        subprocess.run(["rm", "-rf", os.path.join(out, "ref"), os.path.join(out, "chaos")], check=True)
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, MARKER), "w").close()

    # The same command line with this seed (and without --out, so that a replay keeps this run).
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--seed", "--out"):
            skip = True
        elif not word.startswith(("--seed=", "--out=")):
            kept.append(word)
    replay = shlex.join(["python3", "tools/chaos.py"] + kept + ["--seed", str(seed)])
    log(f"chaos.py: seed {seed}  (replay: {replay})")
    log(f"   tenax {tenax}\n   example {example}\n   output {out}")

    def train_args(train_dir):
        return [example, "--output-dir", train_dir, "--max-steps", str(args.max_steps),
                "--save-steps", str(args.save_steps), "--logging-steps", str(args.logging_steps)]

    started = time.monotonic()
    ref_dir = os.path.join(out, "ref")
    chaos_dir = os.path.join(out, "chaos")
    os.makedirs(chaos_dir, exist_ok=True)
    chaos = None
    failure = None
    ref_elapsed = chaos_elapsed = None
    try:
        ref_elapsed = run_reference(args, tenax, train_args, ref_dir)
        if ref_elapsed is None:
            log("RESULT: FAILED (the reference run failed; no chaos run)")
            return 1
        chaos = Chaos(args, tenax, train_args, chaos_dir, seed)
        failure = chaos.run()
        chaos_elapsed = chaos.now()
    except KeyboardInterrupt:
        log("interrupted: killing every process this driver started")
        if chaos:
            chaos.kill_all()
        return 130
    finally:
        if chaos:
            chaos.kill_all()

    # --- verify ------------------------------------------------------------------------------
    ref_final = step_dir(os.path.join(ref_dir, "train"), args.max_steps)
    chaos_final = step_dir(chaos.train, args.max_steps)
    problems = []
    if failure:
        problems.append(failure)
    codes = [a.exit_code for a in chaos.agents]
    if codes != [0, 0] and not failure:
        problems.append(f"agent exit codes {codes} (expected [0, 0])")
    verdict = None
    selfcheck = None
    if os.path.exists(os.path.join(chaos_final, "manifest.json")):
        r = subprocess.run([tenax, "ckpt", "verify", chaos_final], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        if r.returncode != 0:
            problems.append(f"tenax ckpt verify {chaos_final}: exit {r.returncode}: {r.stdout.strip()}")
        code, text = diff(tenax, ref_final, chaos_final)
        verdict = (code, text)
        if code != 0:
            problems.append(f"model differs from the reference:\n{text}")
        # The diff must be able to see a difference: the reference's final step against an
        # earlier one of its own.
        earlier = [s for s in committed_steps(os.path.join(ref_dir, "train")) if s < args.max_steps]
        if earlier:
            scode, stext = diff(tenax, ref_final, step_dir(os.path.join(ref_dir, "train"), earlier[-1]))
            selfcheck = f"steps {args.max_steps} and {earlier[-1]} of the reference: exit {scode}, " + \
                (stext.splitlines()[-1] if stext else "(no output)")
            if scode == 0:
                problems.append(f"self-check: `tenax ckpt diff` of steps {args.max_steps} and {earlier[-1]} "
                                f"reported no difference ({stext}): its verdict cannot be trusted")
    else:
        problems.append(f"no final checkpoint {chaos_final}")

    # --- summary -----------------------------------------------------------------------------
    log("")
    log("== chaos summary")
    log(f"seed:        {seed}")
    log(f"replay:      {replay}")
    by_kind = {k: [i for i in chaos.injections if i["kind"] == k] for k in FAULTS}
    log(f"injections:  {len(chaos.injections)} ("
        + ", ".join(f"{k} {len(v)}" for k, v in by_kind.items()) + ")"
        + (f"; {len(chaos.skipped)} skipped (no target)" if chaos.skipped else ""))
    for k, v in by_kind.items():
        if v:
            log(f"   {k:<11} at " + ", ".join(f"{i['t']:.1f}s(n{i['node']},~{i['step']})" for i in v))
    all_logs = [p for a in chaos.agents for p in a.logs]
    for a in chaos.agents:
        s = read_json(os.path.join(chaos_dir, f"run-node{a.node}", "agent.json"))
        started_gens = count_in_logs(a.logs, r"\] info: starting \d+ worker")
        exit_text = f"exit {a.exit_code}" if a.exit_code is not None else "killed by chaos.py at the end"
        summary = (f"agent.json: outcome {s.get('outcome')!r}, {s.get('generations')} generation(s), "
                   f"{s.get('restarts')} restart(s) (of its last incarnation)") if s else "no agent.json"
        log(f"node {a.node}:      {exit_text}; {a.incarnation} agent incarnation(s); "
            f"{started_gens} worker generation(s) started in all; {summary}")
    killed = count_in_logs(all_logs, r"launcher\] error: worker .* was killed by signal 9")
    hung = count_in_logs(all_logs, r"launcher\] error: worker .* treating it as hung")
    lost = count_in_logs(all_logs, r"missed heartbeats|the rendezvous service does not know node")
    resumed = count_in_logs(all_logs, r"resumed from ")
    log(f"agents saw:  {killed} worker(s) killed by SIGKILL, {hung} hung worker(s), {lost} line(s) on lost "
        f"nodes or a restarted service; rank 0 resumed from a checkpoint {resumed} time(s)")
    log(f"wall time:   reference {ref_elapsed:.1f} s, chaos {chaos_elapsed:.1f} s, "
        f"total {time.monotonic() - started:.1f} s")
    log(f"reference:   {ref_final}")
    log(f"chaos:       {chaos_final}")
    log("logs:        " + os.path.join(ref_dir, "agent.log"))
    for p in all_logs:
        log("             " + p)
    if verdict is not None:
        log(f"diff:        {verdict[1]}")
    if selfcheck:
        log(f"diff check:  {selfcheck} (must differ)")
    if problems:
        for a in chaos.agents:
            if a.logs:
                log(f"\n--- tail of {a.logs[-1]} ---\n{tail(a.logs[-1])}")
            if len(a.logs) > 1:
                log(f"\n--- tail of {a.logs[-2]} ---\n{tail(a.logs[-2], 15)}")
        errors = []
        for p in all_logs:
            try:
                with open(p, errors="replace") as f:
                    errors += [f"{os.path.basename(p)}: {line.rstrip()}" for line in f
                               if "[tenax.launcher] error:" in line and "treating it as hung" not in line
                               and "was killed by signal" not in line]
            except OSError:
                pass
        if errors:
            log("\n--- the agents' errors (other than the injected faults) ---\n" + "\n".join(errors[-20:]))
        log("")
        for p in problems:
            log(f"PROBLEM: {p}")
        log(f"RESULT: FAILED (seed {seed})")
        return 1
    log("RESULT: BIT-IDENTICAL (final model of the chaos run equals the reference, both agents exited 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
