#!/usr/bin/env python3
"""Real network faults between two `tenax run` agents, each in its own network namespace with
its own address and hostname (tools/netns_lab.py builds the namespaces, a bridge and the links,
and removes them at the end). One scenario per run (ctest: netns.<scenario>; README.md beside
this file):

  delay        --nnodes 2:2; frames leaving node 1 held 200 ms (netem's `delay 200ms` on its
               interface; this kernel has no netem: a userspace delay line), the whole run
  rtt400       the same, 200 ms in both directions (a 400 ms round trip)
  loss         --nnodes 2:2; 10 % of the packets in and out of node 1 dropped, the whole run
  cut_link     --nnodes 2:2; node 1's switch port down for 10 s mid-run, then up again: the
               loss is detected, node 1 re-joins a later generation, both agents exit 0
  cut_control  like cut_link, but only node 1's TCP traffic with the rendezvous port is cut:
               the workers still reach each other
  partition    --nnodes 1:2; node 0 (the rendezvous host) and node 1 cannot reach each other
               for 20 s mid-run (each still reaches the shared file system); no split brain

Every scenario ends with: the job finished (node 0's agent exits 0; both for the 2:2 ones),
and the final model equals, bit for bit, an uninterrupted run with the same world size per
step (`tenax ckpt diff`; for a world that shrank, the uninterrupted reference is replayed per
generation from the run's own checkpoint where that generation resumed). While the job runs,
every commit of a checkpoint is watched: after a fault, a generation older than one that
already committed may never commit, and one generation number never commits from two nodes.

Prints a short story (fault injected at t, detected at t, generation re-formed at t, finished
at t; times in seconds from the agents' start). Exit 0 when every check passed, 1 otherwise.
"""

import argparse
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import netns_lab  # noqa: E402  (tools/netns_lab.py)

RDZV_PORT = 29400
# --nnodes 1:2: how long node 1 may go on after node 0 finished the job before it is killed.
MINORITY_GRACE_S = 30  # inside the lab's namespaces: no other user of the port is possible there
# 500 ms x 10: a node is lost after 5 s of silence. Long against the worst stall of a healthy
# link in these scenarios (with 10 % loss TCP needs 5 losses of one segment in a row, about
# 1e-5 per segment, to stall 6 s; the delay line adds 0.4 s to a round trip), short against
# the 10 s cut, which must be detected.
HEARTBEAT = ["--heartbeat-interval", "500", "--heartbeat-liveness", "10"]


SCENARIOS = {
    # Each step needs a few round trips over the delayed link (Gloo allreduces, the trainer's
    # step-boundary vote): ~0.7 s a step, so a short run.
    "delay": dict(nnodes="2:2", max_steps=30, save_steps=10, delay_ms={1: (200, 0)}, guard=150),
    # The same 200 ms on node 1's link in both directions (a 400 ms round trip).
    "rtt400": dict(nnodes="2:2", max_steps=30, save_steps=10, delay_ms={1: (200, 200)}, guard=150),
    "loss": dict(nnodes="2:2", max_steps=600, save_steps=100, loss={1: 0.10}, guard=150),
    # 6000 steps (~17 s on a quiet machine) keep both nodes training past the 5 s detection of a
    # fault injected after the first save: with 1500 a quiet machine finished first.
    "cut_link": dict(nnodes="2:2", max_steps=6000, save_steps=200, fault="cut", fault_s=10, guard=200),
    "cut_control": dict(nnodes="2:2", max_steps=6000, save_steps=200, fault="cut_control", fault_s=10, guard=200),
    # 20 s: four heartbeat expiries; node 0 re-forms alone about 13 s in and trains on; node 1,
    # cut off from the rendezvous host, has 20 s to do something wrong (train and commit on
    # its own). 8000 steps keep node 0 training past the partition on a quiet machine.
    "partition": dict(nnodes="1:2", max_steps=8000, save_steps=200, fault="partition", fault_s=20, guard=200),
}


class Story:
    """Timestamped lines (seconds from the agents' start), printed as they happen and kept."""

    def __init__(self):
        self.t0 = None
        self.t0_wall = None
        self.lines = []

    def start(self):
        self.t0 = time.monotonic()
        self.t0_wall = time.time()

    def now(self):
        return time.monotonic() - self.t0 if self.t0 else 0.0

    def say(self, text, t=None):
        t = self.now() if t is None else t
        self.lines.append((t, text))
        print(f"   [{t:7.2f} s] {text}", flush=True)

    def log_time(self, stamp):
        """A log line's "HH:MM:SS.mmm" as seconds from the start (the agents log local time)."""
        h, m, s = stamp.split(":")
        start = datetime.datetime.fromtimestamp(self.t0_wall)
        at = start.replace(hour=int(h), minute=int(m), second=0, microsecond=0) + datetime.timedelta(seconds=float(s))
        delta = (at - start).total_seconds()
        if delta < -12 * 3600:
            delta += 24 * 3600  # past midnight
        return delta


LINE = re.compile(r"^\[(\d\d:\d\d:\d\d\.\d+)\] \[(agent(?:@\S+)?|worker r(\d+)) g(\d+)\] \[([\w.]+)\] (\w+): (.*)$")

# Lines worth a place in the story: (name, pattern on the message).
EVENTS = [
    ("lost", re.compile(r"missed heartbeats|declared .*(dead|lost)|lost node|node .* lost|no heartbeat")),
    ("service-silent", re.compile(r"no answer from the rendezvous service|rendezvous service .*(silent|lost|unreachable)|"
                                  r"lost the rendezvous")),
    ("restart", re.compile(r"re-rendezvous requested|asking every node to restart|stopping .*worker|re-joining the rendezvous")),
    ("formed", re.compile(r"generation (\d+) formed")),
    ("resumed", re.compile(r"resumed from \S+ at step (\d+)")),
    ("preempt", re.compile(r"preempt", re.I)),
    ("error", re.compile(r".*")),  # every error line (filtered on the level below)
    ("finished", re.compile(r"all \d+ workers? (of node \S+ )?finished")),
]


def split_brain_problems(commits, fault_at, latest_history):
    """Split brain seen in the commits after the fault (dicts with t, step, generation, node, in
    any order) and in `latest` ((t, step) in time order): a generation older than one that
    already committed commits again; one generation commits from two nodes; `latest` moves back."""
    problems = []
    newest = None
    nodes_of = {}
    for c in sorted((c for c in commits if c["t"] >= fault_at), key=lambda c: c["t"]):
        g = c["generation"]
        if g is None:
            continue
        if newest is not None and g < newest:
            problems.append(f"split brain: step {c['step']} committed by generation {g} at {c['t']:.2f} s, "
                            f"after generation {newest} had committed")
        newest = g if newest is None else max(newest, g)
        if c["node"] is not None:
            nodes_of.setdefault(g, set()).add(c["node"])
    for g, ns in sorted(nodes_of.items()):
        if len(ns) > 1:
            problems.append(f"split brain: generation {g} committed checkpoints from nodes {sorted(ns)}")
    for (_t1, s1), (t2, s2) in zip(latest_history, latest_history[1:]):
        if s2 < s1:
            problems.append(f"`latest` moved back from step {s1} to step {s2} at {t2:.2f} s")
    return problems


def self_check():
    """The split-brain judge on made-up histories: it must flag each kind of split brain and
    pass a clean one (no root, no lab: ctest netns.split_brain_judge)."""
    def c(t, step, g, node):
        return {"t": t, "step": step, "generation": g, "node": node}
    clean = [c(1, 200, 0, 0), c(9, 400, 1, 0), c(12, 600, 1, 0), c(30, 800, 2, 0)]
    cases = {
        "clean history": (clean, [(1, 200), (9, 400), (12, 600), (30, 800)], 0),
        "stale generation commits after a newer one": (
            [c(9, 400, 1, 0), c(10, 400, 0, 1), c(12, 600, 1, 0)], [(9, 400), (12, 600)], 1),
        "one generation number from two nodes (two partitions each re-formed)": (
            [c(9, 400, 1, 0), c(10, 400, 1, 1)], [(9, 400), (10, 400)], 1),
        "latest moves back": ([c(9, 400, 1, 0)], [(9, 600), (10, 400)], 1),
    }
    failed = 0
    for name, (commits, latest, want) in cases.items():
        got = split_brain_problems(commits, 0.5, latest)
        ok = (len(got) >= 1) == (want >= 1)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got or 'no problem'}")
    print("RESULT: split-brain judge " + ("FAILED" if failed else "passed"))
    return 1 if failed else 0


class LogWatch:
    """Follows one agent's log file; hands back the complete new lines."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.partial = ""

    def new_lines(self):
        try:
            with open(self.path, errors="replace") as f:
                f.seek(self.pos)
                text = f.read()
                self.pos = f.tell()
        except OSError:
            return []
        text = self.partial + text
        lines = text.split("\n")
        self.partial = lines.pop()
        return lines


class Node:
    def __init__(self, index, argv, log_path):
        self.index = index
        self.argv = argv
        self.log_path = log_path
        self.proc = None
        self.code = None
        self.watch = LogWatch(log_path)

    def start(self, env):
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)

    def poll(self):
        if self.code is None and self.proc and self.proc.poll() is not None:
            self.code = self.proc.returncode
        return self.code


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def step_dir(train, step):
    return os.path.join(train, "checkpoints", f"step-{step:09d}")


def ckpt_diff(tenax, a, b):
    r = subprocess.run([tenax, "ckpt", "diff", a, b, "--prefix", "model/"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    return r.returncode, r.stdout.strip()


def tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "\n".join(f.read().splitlines()[-n:])
    except OSError as e:
        return f"(cannot read {path}: {e})"


class Scenario:
    def __init__(self, name, args):
        self.name = name
        self.cfg = SCENARIOS[name]
        self.args = args
        self.out = args.out
        self.train = os.path.join(self.out, "train")
        self.story = Story()
        self.problems = []
        self.commits = []        # {"t", "step", "generation", "world", "node"} in the order seen
        self.seen_commits = {}   # step -> manifest inode+mtime
        self.latest_history = []  # (t, step)
        self.fault_at = None
        self.fault_end = None
        self.events = []         # (t, node, name, gen, message)
        self.generations = {}    # gen -> {"world": w, "nodes": set, "resume": step (None: restored nothing), "t"}
        self.summarized = False
        self.node0_exit = None
        self.notes = []
        # With --nnodes 1:2 the job needs node 0 only: node 1, cut off, may give up (how it ends
        # is reported, not judged; splitting the brain is judged).
        self.minority_may_fail = self.cfg["nnodes"].startswith("1:")
        self.healed_at = None

    # --- the job and its replays --------------------------------------------------------------

    def example_args(self, train, max_steps=None):
        return [self.args.example, "--output-dir", train, "--max-steps", str(max_steps or self.cfg["max_steps"]),
                "--save-steps", str(self.cfg["save_steps"]), "--logging-steps", str(self.cfg["save_steps"])]

    # --- watching the job ----------------------------------------------------------------------

    def scan_commits(self):
        for d in glob.glob(os.path.join(self.train, "checkpoints", "step-*")):
            m = re.fullmatch(r"step-(\d+)", os.path.basename(d))
            manifest = os.path.join(d, "manifest.json")
            if not m:
                continue
            try:
                st = os.stat(manifest)
            except OSError:
                continue
            key = (st.st_ino, st.st_mtime_ns)
            step = int(m.group(1))
            if self.seen_commits.get(step) == key:
                continue
            self.seen_commits[step] = key
            man = read_json(manifest) or {}
            rec = {"t": self.story.now(), "step": step, "generation": man.get("generation"),
                   "world": man.get("world_size"), "node": None}
            self.commits.append(rec)
        try:
            with open(os.path.join(self.train, "checkpoints", "latest")) as f:
                latest = f.read().strip()
            m = re.fullmatch(r"step-(\d+)", latest)
            if m and (not self.latest_history or self.latest_history[-1][1] != int(m.group(1))):
                self.latest_history.append((self.story.now(), int(m.group(1))))
        except OSError:
            pass

    def read_logs(self, nodes):
        for node in nodes:
            for line in node.watch.new_lines():
                m = LINE.match(line)
                if not m:
                    continue
                stamp, who, _rank, gen, _logger, level, msg = m.groups()
                t = self.story.log_time(stamp)
                gen = int(gen)
                cm = re.search(r"committed checkpoint \S*step-(\d+)", msg)
                if cm:
                    step = int(cm.group(1))
                    # The log says which node's rank committed it: match it to the commit seen.
                    for c in reversed(self.commits):
                        if c["step"] == step and c["node"] is None:
                            c["node"] = node.index
                            break
                    else:
                        self.commits.append({"t": t, "step": step, "generation": gen, "world": None,
                                             "node": node.index})
                    continue
                if who.startswith("worker") and "rank " in msg and " of " in msg and "generation" in msg:
                    wm = re.match(r"rank \d+ of (\d+)", msg)
                    g = self.generations.setdefault(gen, {"world": None, "nodes": set(), "resume": None, "t": t})
                    g["nodes"].add(node.index)
                    if wm:
                        g["world"] = int(wm.group(1))
                # Where the generation's training began: a generation whose workers were stopped
                # before they restored anything trained nothing.
                rm = re.search(r"resumed from \S+ at step (\d+)", msg)
                if rm or "starting from scratch" in msg:
                    self.generations.setdefault(gen, {"world": None, "nodes": set(), "resume": None, "t": t})
                    self.generations[gen]["resume"] = int(rm.group(1)) if rm else 0
                for name, rx in EVENTS:
                    if name == "error":
                        if level == "error":
                            self.note_event(t, node.index, name, gen, msg)
                        continue
                    if rx.search(msg):
                        self.note_event(t, node.index, name, gen, msg)
                        break

    def note_event(self, t, node, name, gen, msg):
        self.events.append((t, node, name, gen, msg))
        if name in ("finished",) or (name == "resumed" and self.fault_at is None):
            return
        short = msg if len(msg) < 170 else msg[:167] + "..."
        self.story.say(f"node {node} g{gen} {name}: {short}", t)

    # --- the run -------------------------------------------------------------------------------

    def agent_argv(self, lab, i):
        argv = [self.args.tenax, "run", "--nproc-per-node", "1", "--nnodes", self.cfg["nnodes"], "--node-id", str(i),
                "--rdzv-endpoint", f"{lab.addr(0)}:{RDZV_PORT}"] + HEARTBEAT + [
                "--join-timeout", "60", "--max-restarts", "5",
                "--run-dir", os.path.join(self.out, "run-node%n"), "--"] + self.example_args(self.train)
        return lab.argv_in(i, argv)

    def check_probe(self, what, result, ok, expectation):
        self.story.say(f"probe {what}: {result['received']}/{result['sent']} echoed, rtt min/median/max "
                       f"{result['rtt_ms']} ms (expected: {expectation})")
        if not ok:
            self.problems.append(f"the lab's fault is not what it should be: probe {what} gave {result}, "
                                 f"expected {expectation}")
            return False
        return True

    def run(self):
        cfg = self.cfg
        print(f"== netns.{self.name}: {cfg['nnodes']} nodes, {cfg['max_steps']} steps, output {self.out}", flush=True)
        with netns_lab.Lab(2, delays_ms=cfg.get("delay_ms"), log=print) as lab:
            print(f"   lab: {lab.ns(0)} ({lab.addr(0)}), {lab.ns(1)} ({lab.addr(1)}) on bridge br0 in {lab.switch}",
                  flush=True)
            self.story.start()
            base = lab.probe(0, 1, count=20)
            if not self.check_probe("node 0 -> node 1 before the job", base, base["received"] >= 1,
                                    "echoes" + (" (delayed)" if cfg.get("delay_ms") else "")):
                return
            if cfg.get("delay_ms"):
                egress, ingress = cfg["delay_ms"][1]
                r = lab.probe(0, 1, count=20, interval_ms=10, wait_ms=3000)
                self.check_probe("over the delay line", r,
                                 r["received"] == 20 and r["rtt_ms"][0] >= (egress + ingress) * 0.99,
                                 f"all 20, rtt >= {egress + ingress} ms")
            elif cfg.get("loss"):
                p = cfg["loss"][1]
                lab.loss(1, p)
                r = lab.probe(0, 1, count=400, interval_ms=2)
                expect = (1 - p) ** 2
                self.check_probe(f"with {p:.0%} loss on node 1", r, abs(r["received"] / r["sent"] - expect) < 0.12,
                                 f"about {expect:.0%} echoed: {p:.0%} lost each way")
                self.story.say(f"fault: {p:.0%} loss on node 1's link (iptables statistic DROP, in and out) "
                               "for the whole run")
                self.fault_at = self.story.now()
            if cfg.get("delay_ms"):
                egress, ingress = cfg["delay_ms"][1]
                self.story.say(f"fault: node 1's link is a delay line: frames leaving node 1 held {egress} ms, "
                               f"frames entering it {ingress} ms, for the whole run")
                self.fault_at = self.story.now()
            if self.problems:
                return

            env = dict(os.environ)
            env.pop("TENAX_GLOO_HOSTNAME", None)  # each node's Gloo binds its own hostname's address
            nodes = [Node(i, self.agent_argv(lab, i), os.path.join(self.out, f"node{i}.log")) for i in range(2)]
            for n in nodes:
                n.start(env)
            self.story.say(f"agents started: node 0 pid {nodes[0].proc.pid} ({lab.host(0)}, {lab.addr(0)}, hosts "
                           f"the rendezvous), node 1 pid {nodes[1].proc.pid} ({lab.host(1)}, {lab.addr(1)})")
            try:
                self.watch(lab, nodes)
            finally:
                for n in nodes:
                    if n.poll() is None:
                        n.proc.kill()
                        n.proc.wait()
                    n.logf.close()
            if cfg.get("loss"):
                print("   iptables counters in node 1:\n" + "\n".join(
                    "      " + ln for ln in lab.packet_counts(1).splitlines() if "DROP" in ln or "Chain" in ln),
                    flush=True)
        if cfg.get("delay_ms"):
            s = lab.delay_line_stats(1)
            if s:
                egress, ingress = cfg["delay_ms"][1]
                self.story.say(f"delay line: {s['frames_from_node']} frames from node 1, each held >= "
                               f"{s['min_held_from_node_ms']:.1f} ms; {s['frames_to_node']} to it, each held >= "
                               f"{s['min_held_to_node_ms']:.1f} ms; at most {s['max_late_ms']:.1f} ms late")
                if (s["min_held_from_node_ms"] or 0) < egress * 0.999 or (s["min_held_to_node_ms"] or 0) < ingress * 0.999:
                    self.problems.append(f"the delay line held a frame less than asked: {s}")
            else:
                self.problems.append("the delay line wrote no counters")
        self.verify(nodes)

    def watch(self, lab, nodes):
        cfg = self.cfg
        guard = cfg["guard"]
        first_save = None
        ended = False
        while True:
            self.scan_commits()
            self.read_logs(nodes)
            t = self.story.now()
            for n in nodes:
                if n.code is None and n.poll() is not None:
                    self.story.say(f"node {n.index} agent exited {n.code}")
            if all(n.code is not None for n in nodes):
                break
            if nodes[0].code is not None and self.node0_exit is None:
                self.node0_exit = t
            if self.minority_may_fail and nodes[1].code is None and self.node0_exit is not None \
                    and t > self.node0_exit + MINORITY_GRACE_S:
                self.notes.append(f"node 1's agent was still running {MINORITY_GRACE_S} s after node 0's had "
                                  "finished the job; killed")
                self.story.say(f"node 1's agent still running {MINORITY_GRACE_S} s after the job finished: killed")
                break
            if t > guard:
                self.problems.append(f"the job did not end within {guard} s (hung?)")
                break
            if first_save is None and any(c["step"] >= cfg["save_steps"] for c in self.commits):
                first_save = t
            if first_save is not None and self.fault_at is None and "fault" in cfg:
                self.inject(lab, cfg["fault"], cfg["fault_s"])
            if self.fault_end is not None and t >= self.fault_end and not ended:
                ended = True
                self.end_fault(lab, cfg["fault"])
            time.sleep(0.05)
        self.scan_commits()
        self.read_logs(nodes)

    def inject(self, lab, fault, seconds):
        if fault == "cut":
            lab.cut(1)
            what = "node 1's switch port down (link cut)"
        elif fault == "cut_control":
            lab.block_port(1, 0, RDZV_PORT)
            what = (f"node 1 <-> node 0 TCP port {RDZV_PORT} dropped (the agents' rendezvous and heartbeats; "
                    "the workers' own traffic still flows)")
        else:
            lab.partition(0, 1)
            what = "partition node 0 | node 1 (iptables DROP both ways; both still see the shared file system)"
        self.fault_at = self.story.now()
        self.fault_end = self.fault_at + seconds
        self.story.say(f"fault: {what} for {seconds} s")
        if fault in ("cut", "partition"):
            r = lab.probe(0, 1, count=10, wait_ms=300)
            self.check_probe("during the fault", r, r["received"] == 0, "nothing echoed")

    def end_fault(self, lab, fault):
        if fault == "cut":
            lab.restore(1)
            self.story.say("fault over: node 1's switch port up again")
        elif fault == "cut_control":
            lab.unblock_port(1, 0, RDZV_PORT)
            self.story.say(f"fault over: port {RDZV_PORT} open again")
        else:
            lab.heal(0, 1)
            self.story.say("fault over: partition healed")
        self.healed_at = self.story.now()

    # --- the verdict ---------------------------------------------------------------------------

    def check_split_brain(self):
        if self.fault_at is not None:
            self.problems += split_brain_problems(self.commits, self.fault_at, self.latest_history)

    def segments(self):
        """The generations that trained, in order: (generation, world size, resumed-from step)."""
        out = []
        for g in sorted(self.generations):
            info = self.generations[g]
            if info["world"] and info["resume"] is not None:
                out.append((g, info["world"], info["resume"]))
        return out

    def replay(self, name, world, resume, stop_at):
        """An uninterrupted WORLD-rank run (loopback, no lab) from the run's own checkpoint at
        `resume` (from scratch when 0), stopped once it has committed step `stop_at`: what the
        run must equal at that step. Returns its train directory."""
        train = os.path.join(self.out, name)
        shutil.rmtree(train, ignore_errors=True)
        os.makedirs(os.path.join(train, "checkpoints"))
        if resume > 0:
            shutil.copytree(step_dir(self.train, resume), step_dir(train, resume))
            with open(os.path.join(train, "checkpoints", "latest"), "w") as f:
                f.write(f"step-{resume:09d}")
        log_path = os.path.join(self.out, f"{name}.log")
        argv = [self.args.tenax, "run", "--nproc-per-node", str(world), "--run-dir",
                os.path.join(self.out, f"{name}-run"), "--"] + self.example_args(train)
        env = dict(os.environ)
        env.pop("TENAX_GLOO_HOSTNAME", None)
        target = os.path.join(step_dir(train, stop_at), "manifest.json")
        with open(log_path, "wb") as f:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
            deadline = time.monotonic() + 300
            try:
                while proc.poll() is None and not os.path.exists(target) and time.monotonic() < deadline:
                    time.sleep(0.05)
            finally:
                if proc.poll() is None:
                    # The workers lead process groups of their own: found before the agent dies.
                    workers = netns_lab.children(proc.pid)
                    os.killpg(proc.pid, signal.SIGKILL)
                    for w in workers:
                        try:
                            os.killpg(w, signal.SIGKILL)
                        except OSError:
                            pass
                    proc.wait()
        if not os.path.exists(target):
            raise RuntimeError(f"the replay {name} ({world} rank(s) from step {resume}) did not commit step "
                               f"{stop_at} (exit {proc.returncode}):\n{tail(log_path)}")
        return train

    def verify_bit_identical(self):
        """The run's model equals, bit for bit, an uninterrupted run with the same world size
        per step: generation by generation (merged while the world size stays the same), an
        uninterrupted run of that world size from the checkpoint the generation resumed from,
        compared where the next one resumed (or at the end)."""
        cfg = self.cfg
        final = step_dir(self.train, cfg["max_steps"])
        if not os.path.exists(os.path.join(final, "manifest.json")):
            self.problems.append(f"no final checkpoint {final}")
            return
        segs = []
        gens = self.segments()
        for k, (g, world, resume) in enumerate(gens):
            end = gens[k + 1][2] if k + 1 < len(gens) else cfg["max_steps"]
            if end <= resume:
                continue  # a generation that committed nothing a later one used
            if segs and segs[-1][1] == world:
                segs[-1] = (segs[-1][0], world, segs[-1][2], end)  # same world size: one uninterrupted run
            else:
                segs.append((g, world, resume, end))
        if not segs:
            self.problems.append("no generation trained (no worker log line 'rank R of W')")
            return
        save = cfg["save_steps"]
        for g, world, resume, end in segs:
            # A worker stopped for a restart may save at an odd step (today's code treats the
            # stop like a preemption); an uninterrupted run has only the regular saves, so such
            # a segment is compared at its last regular save.
            at = end if end % save == 0 or end == cfg["max_steps"] else end - end % save
            note = "" if at == end else f" (it ended at step {end}, a save of a stopped worker: steps {at}..{end} unchecked)"
            if at <= resume:
                self.story.say(f"steps {resume}..{end} (generation {g}, world {world}): no regular save to compare{note}")
                continue
            ref = self.replay(f"replay-g{g}", world, resume, at)
            code, text = ckpt_diff(self.args.tenax, step_dir(ref, at), step_dir(self.train, at))
            verdict = text.splitlines()[-1] if text else ""
            label = f"an uninterrupted {world}-rank run from " + (f"the run's step {resume}" if resume else "scratch")
            self.story.say(f"step {at} (generation {g}, world {world}, from step {resume}) vs {label}: {verdict}{note}")
            if code != 0:
                self.problems.append(f"model at step {at} differs from {label}:\n{text}")
        # The diff must be able to see a difference: the run's last two saves.
        code, text = ckpt_diff(self.args.tenax, final, step_dir(self.train, cfg["max_steps"] - save))
        if code == 0:
            self.problems.append(f"self-check: `tenax ckpt diff` saw no difference between steps {cfg['max_steps']} "
                                 f"and {cfg['max_steps'] - save}: its verdict cannot be trusted")

    def verify(self, nodes):
        cfg = self.cfg
        codes = [n.code for n in nodes]
        if self.minority_may_fail:
            if codes[0] != 0:
                self.problems.append(f"node 0's agent exited {codes[0]}, expected 0 (node 1: {codes[1]})")
        elif codes != [0, 0]:
            self.problems.append(f"agent exit codes {codes}, expected [0, 0]")
        restarts = [(read_json(os.path.join(self.out, f"run-node{i}", "agent.json")) or {}).get("restarts")
                    for i in range(2)]
        if "fault" not in cfg:
            # A delay or a loss that the heartbeats tolerate costs no restart.
            if restarts != [0, 0]:
                self.problems.append(f"restarts {restarts}, expected none: a node was declared lost")
        elif self.fault_at is None:
            self.problems.append("the fault was never injected (no checkpoint committed?)")
        else:
            detected = [e for e in self.events if e[0] >= self.fault_at and e[2] in ("lost", "service-silent")]
            if not detected:
                self.problems.append("no agent logged the fault (no 'missed heartbeats' / 'no answer from the "
                                     "rendezvous service' line after it)")
            rejoined = [e for e in self.events if e[1] == 1 and e[2] == "formed" and e[3] >= 1
                        and e[0] >= self.fault_at]
            if not rejoined and not self.minority_may_fail:
                self.problems.append("node 1 never joined a later generation after the fault")
        self.check_split_brain()
        self.verify_bit_identical()
        self.print_summary(nodes)

    def print_summary(self, nodes):
        self.summarized = True
        print("\n== story", flush=True)
        first = {}
        for t, node, name, gen, msg in self.events:
            first.setdefault(name, (t, node, gen, msg))
        for t, text in self.story.lines:
            if text.startswith(("fault", "agents started")) or "agent exited" in text:
                print(f"   {t:7.2f} s  {text}")
        if self.fault_at is not None:
            print(f"   fault injected at {self.fault_at:.2f} s")
            det = [e for e in self.events if e[0] >= self.fault_at and e[2] in ("lost", "service-silent", "restart", "error")]
            if det:
                t, node, name, gen, msg = det[0]
                print(f"   first reaction at {t:.2f} s (+{t - self.fault_at:.2f} s), node {node}: {msg[:150]}")
            formed = [e for e in self.events if e[0] >= self.fault_at and e[2] == "formed" and "this node" in e[4]]
            for t, node, name, gen, msg in formed:
                print(f"   generation re-formed at {t:.2f} s (+{t - self.fault_at:.2f} s), node {node}: {msg[:150]}")
        for n in nodes:
            s = read_json(os.path.join(self.out, f"run-node{n.index}", "agent.json")) or {}
            print(f"   node {n.index}: exit {n.code if n.code is not None else '- (killed by the test)'}; agent.json outcome {s.get('outcome')!r}, "
                  f"{s.get('restarts')} restart(s)")
        ends = [t for t, text in self.story.lines if "agent exited" in text]
        if ends:
            print(f"   job ended at {max(ends):.2f} s")
        gens = ", ".join(f"g{g}: world {w}, resumed from step {r}" for g, w, r in self.segments())
        print(f"   generations that trained: {gens}")
        after = [c for c in self.commits if self.fault_at is not None and c["t"] >= self.fault_at]
        print(f"   commits after the fault: " + (", ".join(
            f"{c['step']}(g{c['generation']},n{c['node']})" for c in after) or "none"))
        print(f"   logs: {nodes[0].log_path}, {nodes[1].log_path}")
        ck = os.path.join(self.train, "checkpoints")
        pending = sorted(d for d in os.listdir(ck) if d.startswith(".")) if os.path.isdir(ck) else []
        if pending:
            print("   uncommitted: " + ", ".join(f"{d} ({', '.join(sorted(os.listdir(os.path.join(ck, d)))) or 'empty'})"
                                                for d in pending if os.path.isdir(os.path.join(ck, d))))
        if self.problems:
            for n in nodes:
                print(f"\n--- tail of {n.log_path} ---\n{tail(n.log_path)}")
            print()
            for p in self.problems:
                print(f"PROBLEM: {p}")
            print(f"RESULT: netns.{self.name} FAILED")
        else:
            for n in self.notes:
                print(f"NOTE: {n}")
            print(f"RESULT: netns.{self.name} passed")


def main(argv):
    p = argparse.ArgumentParser(prog="netns_test.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=sorted(SCENARIOS))
    p.add_argument("--self-check", action="store_true", help="test the split-brain judge on made-up histories")
    p.add_argument("--tenax", help="the tenax binary")
    p.add_argument("--example", help="the synthetic_regression binary")
    p.add_argument("--out", help="output directory (default /tmp/tenax-netns-<scenario>-<pid>; emptied first)")
    args = p.parse_args(argv)
    if args.self_check:
        return self_check()
    if not (args.scenario and args.tenax and args.example):
        p.error("--scenario, --tenax and --example are required (or --self-check)")
    why = netns_lab.missing_requirements()
    if why:
        for w in why:
            print(f"netns.{args.scenario}: cannot run: {w}", file=sys.stderr)
        print(f"RESULT: netns.{args.scenario} FAILED (not skipped: this test must run where CI runs it)",
              file=sys.stderr)
        return 1
    args.tenax = os.path.abspath(args.tenax)
    args.example = os.path.abspath(args.example)
    args.out = os.path.abspath(args.out or f"/tmp/tenax-netns-{args.scenario}-{os.getpid()}")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    # ctest's timeout sends SIGTERM, then SIGKILL: turn the first into a clean-up.
    def interrupted(*_):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, interrupted)
    s = Scenario(args.scenario, args)
    try:
        s.run()
    except KeyboardInterrupt:
        print(f"RESULT: netns.{args.scenario} FAILED (interrupted; the lab was removed)")
        return 1
    if s.problems and not s.summarized:
        for p in s.problems:
            print(f"PROBLEM: {p}")
        print(f"RESULT: netns.{args.scenario} FAILED")
    return 1 if s.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
