#!/usr/bin/env python3
"""Chaos/soak driver for Tenax's elastic runtime (`make chaos`; not part of `make test`).

1. Reference: one `tenax run --nproc-per-node 2N` of the synthetic_regression example (N is
   --nproc-per-node, 1 or 2: the chaos run's world size, so that the comparison is bit-exact),
   under the chaos run's --recovery (in-process mode carries each rank's RNG state in the
   gradient allreduce, which changes the order of the sums above two ranks: it is bit-identical
   to an uninterrupted in-process run, not to a restart-mode one).
2. Chaos: the same training as two `tenax run --nnodes 2:2` agents on this host (N workers
   each, --node-id 0 and 1, run dirs with %n so that the job's keys and the rendezvous lease
   lie in the shared chaos/ directory; node 0 hosts the rendezvous first, either node may take
   it over), while a seeded RNG injects, every few seconds, one fault among (--kinds):
     kill-worker      SIGKILL one worker (a child of an agent; never a waiting warm spare);
     stop-worker      SIGSTOP one worker, on either node, that is making progress (its
                      TENAX_PROGRESS_FILE is fresh), never SIGCONT: the agent's --hang-timeout
                      must find it and kill it. A worker without a progress file (an agent
                      older than the one that gives warm spares their own) could not be found
                      stopped: it is no target, and when every worker is such a one, a
                      stop-worker is skipped at once;
     kill-node        SIGKILL an agent and its workers (node loss), then start that agent again
                      after 0.5-3 s;
     pause-agent      SIGSTOP an agent (not its workers) for 0.5-4 s, then SIGCONT: a false
                      alarm (a node under memory pressure, a stalled file system, a debugger);
                      the job must go on, at the cost of at most a restart;
     kill-rdzv-host   kill-node of the agent that holds the rendezvous lease (`holder` of
                      chaos/tenax-rdzv.lease): the survivor takes the hosting over (term + 1),
                      the restarted agent finds the service through the lease;
     partition        the two nodes (agents and workers) cannot reach each other for 2-8 s
                      while both still see the shared file system (needs --net netns);
     double           two faults close together: kill-worker, kill-node or pause-agent on one
                      node, then kill-worker, pause-agent or kill-node on the other 0-1 s later
                      (0.6 of the time) or 1-3 s later (while the job re-forms after the first);
     kill-two         SIGKILL two workers, on one node or on the two (the RNG chooses; one node
                      needs N = 2), 0-100 ms apart (the delay is printed);
     kill-during-heal SIGKILL one worker, then watch the agents' logs (polled every ms) for the
                      recovery to reach a stage the RNG chose, and SIGKILL a second worker at
                      that moment: "lost-peer" (a survivor's "generation G lost a peer during
                      step"), "formed" (an agent's "generation G formed") or "replaced" (an
                      agent's "in-process recovery: rank R (pid P) is replaced by ..."); the
                      second is a survivor (a worker from before the first kill), or at the
                      "replaced" stage, by the RNG's choice, the replacement itself; skipped if
                      the stage is not seen within 10 s;
     kill-during-save SIGKILL a worker while a checkpoint save is in flight. Detected by
                      polling train/checkpoints every ms for a new `.tmp-step-<S>-g<G>`
                      directory (rank 0 creates it before any shard is written and renames it
                      to step-<S> at the commit; a save of the example takes 10-300 ms
                      here) whose step-<S> has no manifest.json yet; if none shows within 5 s,
                      the kill comes the moment the next step-<S>/manifest.json appears (right
                      after a save: logged as "just after the commit", not "in flight"); if
                      neither shows within 10 s, skipped.
   Every injection is logged with its time (seconds into the chaos run, and the wall clock of
   the agents' log lines), kind, node(s), pid(s) and the workers' step.
   --recovery in-process passes `--recovery in-process --spares K` (--spares, default 1) to
   both agents; its default kinds are kill-worker, stop-worker, kill-two, kill-during-heal and
   kill-during-save (--recovery restart, the default, keeps the first seven). A warm spare is
   a child of the agent too: it is told apart by TENAX_SPARE_ID in /proc/<pid>/environ, and
   once the agent hands it a rank (its environ still says TENAX_SPARE_ID), by the agent's log
   line "is replaced by warm spare S (pid P)". Waiting spares are never targets. In in-process
   mode a worker fault waits (up to 30 s, then it is skipped) until the job trains steadily:
   N workers per node, every progress file fresh (when every rank came from a spare and none
   has one: a commit within the last max(3 s, 2 x the longest interval)), and the step past
   that of the last injection, so that each fault meets a job that can heal it.
   --net netns (the default when partition is among the kinds; needs root, `ip`, `nsenter`
   and `iptables`) runs each agent in a network namespace of its own, joined to the other by
   a veth pair (node i at 10.79.0.<i+1>, its --node-host and TENAX_GLOO_HOSTNAME); a
   partition is an iptables DROP of everything entering either namespace over the veth
   (silent, like a failed switch: connects time out, nothing is refused), checked by a TCP
   probe each way, and undone after the partition and always at exit (Ctrl-C included), when
   the namespaces are deleted. --net loopback runs both agents on 127.0.0.1 of this host.
3. Verify: both agents exit 0 and the final checkpoint's model/ tensors are bit-identical to
   the reference (`tenax ckpt diff`): the world size is 2N throughout, so any difference is a
   resume or heal bug (the summary names the first checkpoint that differs, found by bisecting
   the checkpoints both runs committed). In in-process mode also, for every single-worker fault (kill-worker,
   stop-worker, kill-during-save): it was healed in process, i.e. an `in_process_recoveries`
   record of the target's node (run-node<i>/agent.json; for agent incarnations that were
   killed and wrote none, the same records read from the agent's log lines) lists the target
   pid among `replaced` (`lost_pid`), and every other worker that was alive at the injection
   is among the `survivors` (`pid`) of its node's record of that generation: it kept its
   process. A summary table gives, per kind, the injections, how many were healed in process
   (every pid killed is a `lost_pid` of a record and no rank restored from disk), how many
   fell back to a restart from disk (a worker logged "resumed from" after the injection) and
   how many neither (e.g. a second kill that ended the job); the overlapping kinds are
   reported, not checked. A failed check names the injection (number, time, kind, pids) and
   the agents' lines that followed it (why in-process recovery was not possible, hung
   workers, errors), after the seed and the tails of the agents' logs. A stall (the workers'
   step unchanged: progress files, else the newest commit) longer than --max-stall (default
   120 s in in-process mode; restart mode only reports the longest) fails the run too, naming
   the injection before it: a job that heals only after minutes did not heal.

Python 3 standard library only. Everything lands under --out (default /tmp/tenax-chaos-<pid>):
ref/ (reference run), chaos/ (run dirs, train/, keys, lease, one log per agent incarnation).
The seed is always printed; --seed replays the same sequence of choices (kinds, targets,
delays, intervals; the choices of the last three kinds come from a second stream derived from
the seed, so that restart-mode seeds replay as before); the timing of the runtime itself is
not replayable. Without --max-steps the run trains max(12000, 500 x --injections) steps, so
that the training outlasts the injections; --timeout defaults to max(900, 300 + 20 x
--injections) s and --reference-timeout to max(600, --max-steps / 20) s.

From make: `make chaos CHAOS_ARGS="--recovery in-process --nproc-per-node 2 --injections 100"`
(CHAOS_ARGS goes to this script as it is).

Exit status: 0 bit-identical, both agents exited 0 and (in-process) every single-worker fault
healed in process and no stall over --max-stall; 1 otherwise; 2 usage error.
"""

import argparse
import atexit
import glob
import json
import statistics
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time

import procfs  # tools/procfs.py, beside this script

FAULTS = ("kill-worker", "stop-worker", "kill-node", "pause-agent", "kill-rdzv-host", "partition", "double",
          "kill-two", "kill-during-heal", "kill-during-save")
DEFAULT_KINDS = FAULTS[:7]  # --recovery restart
IN_PROCESS_KINDS = ("kill-worker", "stop-worker", "kill-two", "kill-during-heal", "kill-during-save")
# Faults of one worker: under --recovery in-process each must heal in process (checked).
SINGLE_WORKER_KINDS = ("kill-worker", "stop-worker", "kill-during-save")
# The stages of an in-process recovery at which kill-during-heal kills its second worker: the
# first line of that stage in an agent's log (agent and worker lines share it) after the first kill.
HEAL_STAGES = {
    "lost-peer": re.compile(r"\[tenax\.trainer\] warning: generation \d+ lost a peer during step"),
    "formed": re.compile(r"\] (?:info|warning): generation \d+ formed"),
    "replaced": re.compile(r"in-process recovery: rank \d+ \(pid -?\d+\) is replaced by .+? \(pid (\d+)\)"),
}
# launcher/src/recovery_coordinator.cpp's lines, from which the recoveries of an agent
# incarnation that wrote no agent.json (killed) are read.
REPLACED_LINE = re.compile(r"in-process recovery: rank (\d+) \(pid (-?\d+)\) is replaced by (.+?) \(pid (\d+)\) "
                           r"in generation (\d+)")
KEPT_LINE = re.compile(r"in-process recovery: generation (\d+) formed with \d+ ranks? \(was \d+\); this node's "
                       r"workers keep their processes \((.*?)\)(?: and heal|$)")
KEPT_WORKER = re.compile(r"rank (\d+)(?: -> (\d+))? pid (\d+)")
# A rank restored from disk (sdk/src/trainer_checkpoint.cpp, rank 0 only).
DISK_RESTORE = re.compile(r"\] info: resumed from ")
# Lines kept with the injection they follow, for the report of a failed check.
NOTABLE = re.compile(r"in-process recovery|not possible|treating it as hung|lost a peer|timed out while|"
                     r"no rank holds training state|resumed from |asking every node to restart|healed from rank|"
                     r"error:|was killed by signal|exited with|generation \d+ formed")
SAVE_WATCH_S = 5.0      # kill-during-save: how long to look for a save in flight, then for a commit
HEAL_WATCH_S = 10.0     # kill-during-heal: how long to wait for the chosen stage
# The faults a `double` combines (the first on one node, the second on the other).
DOUBLE_FIRST = ("kill-worker", "kill-node", "pause-agent")
DOUBLE_SECOND = ("kill-worker", "pause-agent", "kill-node")
MARKER = ".tenax-chaos"
LEASE_FILE = "tenax-rdzv.lease"  # elastic/include/tenax/elastic/rendezvous_lease.h, beside the keys


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


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def wall_clock():
    """Now, as the agents' log lines stamp it (local time, HH:MM:SS.mmm)."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"


def step_dir(train_dir, step):
    return os.path.join(train_dir, "checkpoints", f"step-{step:09d}")


def committed_steps(train_dir):
    steps = []
    for d in glob.glob(os.path.join(train_dir, "checkpoints", "step-*")):
        m = re.fullmatch(r"step-(\d+)", os.path.basename(d))
        if m and os.path.exists(os.path.join(d, "manifest.json")):
            steps.append(int(m.group(1)))
    return sorted(steps)


# --- network namespaces (--net netns) ----------------------------------------------------------

class NetLabError(RuntimeError):
    pass


def sh(argv, check=True, timeout=30):
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise NetLabError(f"`{shlex.join(argv)}` exited {r.returncode}: {r.stdout.strip()}")
    return r


# Run inside a namespace by NetLab.probe(): one TCP connect. "refused" (a RST came back) and
# "connected" both mean that the packets got through; "timeout" means that they did not.
PROBE = """
import socket, sys
s = socket.socket()
s.settimeout(float(sys.argv[3]))
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
except OSError as e:
    print("error", e)
"""


class NetLab:
    """Two network namespaces, tenax-chaos-<pid>-n0 and -n1, joined by one veth pair (node i at
    10.79.0.<i+1>/24, names that carry the driver's pid, so that parallel runs never collide).
    Only the namespaces' own interfaces and firewalls are touched, never the host's; the file
    system is the host's (only the network namespace is entered), so both nodes always see the
    job's shared directory. cut()/heal(): iptables DROP of every packet that enters either node
    over the veth, so a partition is silent in both directions (DROP in OUTPUT would fail the
    sender's send with EPERM at once, which no real partition does)."""

    SUBNET = "10.79.0"
    PREFIX = "tenax-chaos-"
    PROBE_PORT = 9  # nothing listens there: a reachable node answers with a RST at once

    def __init__(self):
        pid = os.getpid()
        self.ns = [f"{self.PREFIX}{pid}-n{i}" for i in (0, 1)]
        self.veth = [f"tcx{pid}{c}" for c in "ab"]
        self.addr = [f"{self.SUBNET}.{i + 1}" for i in (0, 1)]
        self.made = False
        self.is_cut = False

    @staticmethod
    def missing_tools():
        if os.geteuid() != 0:
            return "--net netns needs root (network namespaces and iptables)"
        for tool in ("ip", "nsenter", "iptables"):
            if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]):
                return f"--net netns needs `{tool}` on PATH"
        return None

    @classmethod
    def remove_stale(cls):
        """Namespaces of chaos.py runs that died before their cleanup (their pid is gone)."""
        r = sh(["ip", "netns", "list"], check=False)
        for line in r.stdout.splitlines():
            m = re.match(rf"({re.escape(cls.PREFIX)}(\d+)-n[01])\b", line)
            if m and not os.path.exists(f"/proc/{m.group(2)}"):
                sh(["ip", "netns", "del", m.group(1)], check=False)
                log(f"   removed the stale network namespace {m.group(1)} of a dead chaos.py run")

    def setup(self):
        self.remove_stale()
        self.made = True  # from here on teardown() removes whatever exists
        for ns in self.ns:
            sh(["ip", "netns", "add", ns])
        sh(["ip", "link", "add", self.veth[0], "netns", self.ns[0], "type", "veth", "peer", "name", self.veth[1],
            "netns", self.ns[1]])
        for i in (0, 1):
            sh(["ip", "-n", self.ns[i], "addr", "add", f"{self.addr[i]}/24", "dev", self.veth[i]])
            sh(["ip", "-n", self.ns[i], "link", "set", self.veth[i], "up"])
            sh(["ip", "-n", self.ns[i], "link", "set", "lo", "up"])
        # The lab must be what it claims: each node reaches the other, and a cut cuts.
        deadline = time.monotonic() + 10
        while self.probe() != ["refused", "refused"]:
            if time.monotonic() > deadline:
                raise NetLabError(f"the nodes cannot reach each other over the new veth pair: {self.probe()}")
            time.sleep(0.2)
        self.cut()
        try:
            got = self.probe()
            if got != ["timeout", "timeout"]:
                raise NetLabError(f"iptables DROP did not cut the veth pair: probes {got} (expected timeouts)")
        finally:
            self.heal()
        got = self.probe()
        if got != ["refused", "refused"]:
            raise NetLabError(f"the veth pair did not come back after the test cut: probes {got}")

    def prefix(self, node):
        """The argv prefix that runs a program in node `node`'s namespace (nsenter execs it: the
        pid is the program's)."""
        return ["nsenter", f"--net=/run/netns/{self.ns[node]}", "--"]

    def probe(self, timeout=0.4):
        """A TCP connect from each node to the other, in parallel: ["refused"|"timeout"|..., ...]
        for 0 -> 1 and 1 -> 0."""
        procs = [subprocess.Popen(self.prefix(i) + [sys.executable, "-c", PROBE, self.addr[1 - i],
                                                    str(self.PROBE_PORT), str(timeout)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for i in (0, 1)]
        out = []
        for p in procs:
            try:
                text, _ = p.communicate(timeout=timeout + 20)
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
            out.append(text.strip() or f"exit {p.returncode}")
        return out

    def _rule(self, op, i):
        return ["ip", "netns", "exec", self.ns[i], "iptables", "-w", op, "INPUT", "-i", self.veth[i], "-j", "DROP"]

    def cut(self):
        self.is_cut = True
        for i in (0, 1):
            sh(self._rule("-I", i))

    def dropped(self):
        """Packets the cut dropped so far, per node (the DROP rules' counters)."""
        out = []
        for i in (0, 1):
            r = sh(["ip", "netns", "exec", self.ns[i], "iptables", "-w", "-L", "INPUT", "-v", "-x", "-n"], check=False)
            n = 0
            for line in r.stdout.splitlines():
                f = line.split()
                if len(f) > 3 and f[2] == "DROP" and self.veth[i] in f:
                    n += int(f[0])
            out.append(n)
        return out

    def heal(self):
        """Removes every DROP rule cut() added (idempotent)."""
        for i in (0, 1):
            for _ in range(10):
                if sh(self._rule("-D", i), check=False).returncode != 0:
                    break
        self.is_cut = False

    def teardown(self):
        if not self.made:
            return
        self.made = False
        try:
            self.heal()
        except Exception:  # noqa: BLE001 - deleting the namespaces below removes the rules anyway
            pass
        for ns in self.ns:
            sh(["ip", "netns", "del", ns], check=False)


# --- agents ----------------------------------------------------------------------------------

class Agent:
    """One `tenax run` agent (one node), restarted with the same arguments after a node kill.
    Each incarnation logs to its own file, which new_lines() follows."""

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
        self.resume_at = None      # monotonic time of a pending SIGCONT (after pause-agent)
        self.exit_code = None      # the final incarnation's exit code, once it exited by itself
        self.promoted = {}         # pid -> rank: warm spares the agent handed a rank (its log says so)
        self.read_at = {}          # log path -> (offset read up to, the unfinished last line)

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
        self.resume_at = None
        self.exit_code = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def workers(self):
        """Live worker processes: children of the agent that are neither zombies nor dead nor
        warm spares still waiting for a rank."""
        if not self.alive():
            return []
        return [w for w in proc_children(self.proc.pid)
                if proc_state(w) not in (None, "Z", "X") and not self.waiting_spare(w)]

    def waiting_spare(self, pid):
        """A warm spare (TENAX_SPARE_ID in the environment it started with) that the agent's log
        does not show taking a rank yet. /proc/<pid>/environ keeps the start-up environment, so
        a spare that took a rank still carries TENAX_SPARE_ID there: only the log tells."""
        return pid not in self.promoted and "TENAX_SPARE_ID" in proc_environ(pid)

    def rank_of(self, pid):
        """The rank `pid` started as (RANK) or took over as a spare; None if unknown."""
        if pid in self.promoted:
            return self.promoted[pid]
        rank = proc_environ(pid).get("RANK")
        return int(rank) if rank and rank.isdigit() else None

    def new_lines(self):
        """Complete lines the agent's incarnations (and their workers) logged since the last
        call, oldest first; a spare handed a rank is noted on the way."""
        out = []
        for path in self.logs:
            offset, partial = self.read_at.get(path, (0, b""))
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            if not data:
                continue
            data = partial + data
            cut = data.rfind(b"\n") + 1
            self.read_at[path] = (offset + len(data) - len(partial), data[cut:])
            for raw in data[:cut].splitlines():
                line = raw.decode(errors="replace")
                m = REPLACED_LINE.search(line)
                if m and m.group(3).startswith("warm spare"):
                    self.promoted[int(m.group(4))] = int(m.group(1))
                out.append(line)
        return out

    def pause(self, seconds):
        """SIGSTOP the agent alone (its workers run on); SIGCONT after `seconds` (resume_due)."""
        kill_quietly(self.proc.pid, signal.SIGSTOP)
        self.resume_at = time.monotonic() + seconds

    def resume(self):
        self.resume_at = None
        if self.alive():  # the same incarnation: kill_node() reaps before a restart
            kill_quietly(self.proc.pid, signal.SIGCONT)

    def kill_node(self):
        """SIGSTOP the agent (so that it cannot start another worker meanwhile), SIGKILL its
        workers and their groups, then SIGKILL the agent and reap it. Returns the workers."""
        self.resume_at = None  # a paused agent dies paused: nothing to SIGCONT
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
    world = 2 * args.nproc_per_node
    # Under the chaos run's --recovery: in-process mode adds each rank's RNG state to the
    # gradient allreduce's last bucket, which changes the order of the sums above 2 ranks, so
    # it is bit-identical to an uninterrupted in-process run only (no spares: no faults here).
    recovery = ["--recovery", "in-process", "--spares", "0"] if args.recovery == "in-process" else []
    argv = [tenax, "run", "--nproc-per-node", str(world)] + recovery + ["--run-dir", run_dir, "--"] + \
        train_args(train)
    log_path = os.path.join(ref_dir, "agent.log")
    log(f"== reference: 1 agent, {world} workers, recovery {args.recovery}, {args.max_steps} steps (log {log_path})")
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
    def __init__(self, args, tenax, train_args, chaos_dir, seed, lab):
        self.args = args
        self.tenax = tenax
        self.dir = chaos_dir
        self.train = os.path.join(chaos_dir, "train")
        self.rng = random.Random(seed)
        # The choices of kill-two, kill-during-heal and kill-during-save: a stream of their own,
        # so that the restart mode's stream, and the replays of its seeds, stayed as they were.
        self.rng2 = random.Random(f"{seed}/overlap")
        self.lab = lab
        self.in_process = args.recovery == "in-process"
        self.injections = []   # one per injection (new_injection())
        self.faults = []       # every fault applied (both of a double's): t, kind, node, step, detail
        self.skipped = []
        self.problems = []     # the harness's own failures (a partition that did not cut)
        self.heal_at = None    # monotonic time to end the current partition
        self.cut_started = None
        self.second = None     # a double's pending second fault
        self.pending = None    # a kill-during-heal's second kill or a kill-during-save's watch
        self.longest_stall = None  # (start s, seconds) without a change of the workers' step
        self.stall_after = {}      # injection number -> its longest stall (s): what the fault cost
        self.stalls = []       # those over --max-stall
        self.port = args.port or free_port()
        self.addr = lab.addr if lab else ["127.0.0.1", "127.0.0.1"]
        self.agents = []
        for node in (0, 1):
            env = dict(os.environ)
            env["TENAX_GLOO_HOSTNAME"] = self.addr[node]
            recovery = ["--recovery", "in-process", "--spares", str(args.spares)] if self.in_process else []
            argv = (lab.prefix(node) if lab else []) + [
                tenax, "run", "--nproc-per-node", str(args.nproc_per_node), "--nnodes", "2:2", "--node-id", str(node),
                "--rdzv-endpoint", f"{self.addr[0]}:{self.port}", "--node-host", self.addr[node],
                "--heartbeat-interval", str(args.heartbeat_interval), "--lease-timeout", str(args.lease_timeout),
                "--join-timeout", str(args.join_timeout), "--max-restarts", str(args.max_restarts),
                "--hang-timeout", str(args.hang_timeout)] + recovery + [
                "--run-dir", os.path.join(chaos_dir, "run-node%n"), "--"] + train_args(self.train)
            self.agents.append(Agent(node, argv, env, chaos_dir))
        self.t0 = None

    def now(self):
        return time.monotonic() - self.t0

    def progress_step(self):
        """The highest step the workers reported (TENAX_PROGRESS_FILE), else the newest
        committed checkpoint."""
        best = -1
        # rank-<r> for the workers an agent started, spare-<id> for warm spares at work.
        for path in glob.glob(os.path.join(self.dir, "run-node*", "progress", "*-*")):
            if path.endswith(".wait"):  # the wait beacon beside each progress file
                continue
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

    def lease(self):
        """The rendezvous lease (the job's keys file, and so the lease, lie in chaos/ because
        the run dirs hold %n), or None."""
        return read_json(os.path.join(self.dir, LEASE_FILE))

    def lease_holder(self):
        """(agent, lease) of the node holding the lease ("holder": "node-000001" is --node-id 1)."""
        lease = self.lease()
        m = re.fullmatch(r"node-0*(\d+)", str((lease or {}).get("holder", "")))
        if not m or int(m.group(1)) not in (0, 1):
            return None, lease
        return self.agents[int(m.group(1))], lease

    def not_steady(self):
        """Why the job does not train steadily right now, or None when it does: N workers on
        each node (waiting spares not counted), none stopped, progress within the last second
        and the step past that of the last injection. In-process mode injects a worker fault
        only then, so that each one meets a job that can heal it. Progress is each worker's
        progress file (progress/spare-<id> for a warm spare at work); when no worker has one
        (an older agent gave spares none), the checkpoints' `latest` stands in (written at
        every commit, every --save-steps)."""
        with_file = 0
        for a in self.agents:
            if a.restart_at is not None or a.resume_at is not None or not a.alive():
                return f"node {a.node}'s agent is down or paused"
            ws = a.workers()
            if len(ws) != self.args.nproc_per_node:
                return f"node {a.node} has {len(ws)} worker(s)"
            for w in ws:
                if proc_state(w) in ("T", "t"):
                    return f"worker pid {w} is stopped"
                if "TENAX_PROGRESS_FILE" in proc_environ(w):
                    if not self.progress_fresh(w, 1.0):
                        return f"worker pid {w} made no progress in the last second"
                    with_file += 1
        if with_file == 0:
            try:
                age = time.time() - os.stat(os.path.join(self.train, "checkpoints", "latest")).st_mtime
            except OSError:
                return "no progress file and no checkpoint yet"
            if age > max(3.0, 2 * self.args.interval[1]):
                return f"no worker writes a progress file and the last commit is {age:.0f} s old"
        if self.injections and self.progress_step() <= self.injections[-1]["step"]:
            return f"the step is not past that of injection #{self.injections[-1]['n']} yet"
        return None

    def why_no_target(self, kind):
        """(why `kind` finds no target or "", whether waiting is in vain). A steady in-process
        job whose workers all came from warm spares has no worker for stop-worker until its next
        restart: a spare that took a rank has no TENAX_PROGRESS_FILE, so --hang-timeout would
        never find it stopped, and the job would hang."""
        if not self.in_process or kind not in SINGLE_WORKER_KINDS + ("kill-two", "kill-during-heal"):
            return "", False
        why = self.not_steady()
        if why:
            return why, False
        if kind == "stop-worker" and not any("TENAX_PROGRESS_FILE" in proc_environ(w) for w in self.worker_map()):
            return ("every worker took its rank as a warm spare and has no TENAX_PROGRESS_FILE, so the agents' "
                    "--hang-timeout could not find one stopped"), True
        return "", False

    def worker_map(self):
        """{pid: node} of every live worker (no waiting spare)."""
        return {w: a.node for a in self.agents for w in a.workers()}

    def eligible(self, kind):
        """(agent, worker pid or None) targets for `kind` right now."""
        if kind == "partition":
            return [(None, None)] if self.lab and not self.lab.is_cut else []
        if self.in_process and kind in SINGLE_WORKER_KINDS + ("kill-two", "kill-during-heal") and self.not_steady():
            return []
        out = []
        for a in self.agents:
            if a.restart_at is not None or not a.alive():
                continue
            if kind in ("kill-node", "kill-rdzv-host"):
                if kind == "kill-rdzv-host" and self.lease_holder()[0] is not a:
                    continue
                ws = a.workers()
                out.append((a, ws[0] if ws else None))
                continue
            if kind == "pause-agent":
                if a.resume_at is None:
                    out.append((a, None))
                continue
            for w in a.workers():
                state = proc_state(w)
                if state in ("T", "t"):
                    continue  # already stopped: the agent is about to deal with it
                if kind == "stop-worker" and not self.progress_fresh(w, 1.0):
                    continue
                out.append((a, w))
        return out

    def who(self, agent, pid):
        rank = agent.rank_of(pid)
        return f"worker pid {pid}{'' if rank is None else f' (rank {rank})'} of node {agent.node}"

    def kill(self, agent, pid, rec):
        """SIGKILL one worker for `rec`; its description ("... (already gone)" if it was)."""
        what = self.who(agent, pid)  # before the kill: /proc still knows it
        gone = not kill_quietly(pid, signal.SIGKILL)
        rec["pids"].append(pid)
        rec["nodes"].append(agent.node)
        return f"SIGKILL {what}" + (" (already gone)" if gone else "")

    def apply(self, kind, agent, worker, plan, rec, targets=()):
        """Injects one fault (not a double) into `agent`/`worker` for injection `rec`; returns
        its description. `targets` are the eligible ones (kill-two picks its second there)."""
        if kind == "kill-worker":
            return self.kill(agent, worker, rec)
        if kind == "stop-worker":
            what = self.who(agent, worker)
            kill_quietly(worker, signal.SIGSTOP)
            rec["pids"].append(worker)
            rec["nodes"].append(agent.node)
            return f"SIGSTOP {what} (left stopped)"
        if kind == "kill-two":
            same = [(a, w) for a, w in targets if a is agent and w != worker]
            other = [(a, w) for a, w in targets if a is not agent]
            if plan["two_same_node"] and same:
                pool, where = same, "one node"
            elif other:
                pool = other
                where = "two nodes" + (" (the RNG chose one node; it has no second worker)"
                                       if plan["two_same_node"] else "")
            else:
                pool, where = same, "one node (the RNG chose two nodes; the other has no worker)"
            agent2, worker2 = pool[int(plan["pick_b"] * len(pool)) % len(pool)]
            first = self.kill(agent, worker, rec)
            time.sleep(plan["two_gap"])
            second = self.kill(agent2, worker2, rec)
            return f"{where}: {first}, then {plan['two_gap'] * 1000:.0f} ms later {second}"
        if kind == "kill-during-heal":
            first = self.kill(agent, worker, rec)
            self.pending = {"kind": kind, "rec": rec, "stage": plan["heal_stage"], "victim": plan["heal_victim"],
                            "pick": plan["pick_b"], "since": time.monotonic(),
                            "deadline": time.monotonic() + HEAL_WATCH_S}
            return (f"{first}; the second kill waits for the {plan['heal_stage']} stage of the recovery "
                    f"(victim: {plan['heal_victim'] if plan['heal_stage'] == 'replaced' else 'survivor'})")
        if kind == "pause-agent":
            pid, ws = agent.pid, agent.workers()
            agent.pause(plan["pause"])
            rec["nodes"].append(agent.node)
            return (f"SIGSTOP agent pid {pid} of node {agent.node} for {plan['pause']:.2f} s "
                    f"(worker(s) {','.join(map(str, ws)) or 'none'} run on)")
        if kind in ("kill-node", "kill-rdzv-host"):
            prefix = ""
            if kind == "kill-rdzv-host":
                _, lease = self.lease_holder()
                prefix = (f"rendezvous host (lease term {lease.get('term')}, {lease.get('endpoint')}, "
                          f"generation {lease.get('generation')}): ")
            pid = agent.pid
            killed = agent.kill_node()
            agent.restart_at = time.monotonic() + plan["delay"]
            rec["nodes"].append(agent.node)
            return (f"{prefix}SIGKILL agent pid {pid} of node {agent.node} and its children "
                    f"{','.join(map(str, killed)) or 'none'}; restart in {plan['delay']:.2f} s")
        if kind == "partition":
            self.lab.cut()
            self.cut_started = time.monotonic()
            self.heal_at = self.cut_started + plan["cut"]
            probes = self.lab.probe()
            if probes != ["timeout", "timeout"]:
                self.problems.append(f"partition at {self.now():.1f} s did not cut the nodes apart: TCP probes "
                                     f"0->1 {probes[0]}, 1->0 {probes[1]} (expected timeouts)")
            rec["nodes"] += [0, 1]
            return (f"nodes 0 and 1 cut apart for {plan['cut']:.2f} s (TCP probe 0->1: {probes[0]}, "
                    f"1->0: {probes[1]})")
        raise AssertionError(kind)

    def record(self, t, kind, agent, step, detail, into):
        rec = {"t": t, "kind": kind, "node": agent.node if agent else -1, "step": step, "detail": detail}
        into.append(rec)
        return rec

    def new_injection(self, kind, agent, before=None):
        """The record of an injection about to happen: t (s into the run), wall (the agents' log
        clock), kind, node (the first target's), nodes and pids (every target's, filled as they
        are hit), step, detail, before ({pid: node} of the live workers just before), notes (the
        agents' lines that followed, NOTABLE) and disk (ranks restored from disk after it)."""
        rec = {"n": len(self.injections) + 1, "t": self.now(), "wall": wall_clock(), "kind": kind,
               "node": agent.node if agent else -1, "nodes": [], "pids": [], "step": self.progress_step(),
               "detail": "", "before": self.worker_map() if before is None else before, "notes": [], "disk": 0}
        self.injections.append(rec)
        return rec

    def log_injection(self, rec):
        nodes = ",".join(str(n) for n in sorted(set(rec["nodes"]))) or "-"
        log(f"   [{rec['t']:7.1f} s {rec['wall']}] #{rec['n']:<3} {rec['kind']:<16} at step ~{rec['step']} "
            f"(node(s) {nodes}; pid(s) {','.join(map(str, rec['pids'])) or '-'}): {rec['detail']}")

    def inject(self, plan):
        kind = plan["kind"]
        if kind == "kill-during-save":
            return self.watch_save(plan)
        first = plan["first"] if kind == "double" else kind
        targets = self.eligible(first)
        if not targets or (kind == "kill-two" and len(targets) < 2):
            return False
        agent, worker = targets[int(plan["pick"] * len(targets)) % len(targets)]
        if kind == "kill-during-heal":
            self.poll_logs()  # from here on, a stage's line comes after the first kill
        rec = self.new_injection(kind, agent)
        detail = self.apply(first, agent, worker, plan, rec, targets)
        self.record(rec["t"], first, agent, rec["step"], detail, self.faults)
        if kind == "double":
            other = self.agents[1 - agent.node]
            self.second = {"at": time.monotonic() + plan["gap"], "kind": plan["second"], "node": other.node,
                           "pick": plan["pick2"], "delay": plan["delay2"], "pause": plan["pause2"], "gap": plan["gap"]}
            detail = f"{first}: {detail}; then {plan['second']} on node {other.node} in {plan['gap']:.2f} s"
        rec["detail"] = detail
        self.log_injection(rec)
        return True

    def inject_second(self):
        """The pending second fault of a double, once due: on the other node if it offers a
        target within 2 s of the due time, else on any node; dropped if none."""
        s = self.second
        now = time.monotonic()
        if now < s["at"]:
            return
        targets = [tw for tw in self.eligible(s["kind"]) if tw[0].node == s["node"]]
        if not targets and now > s["at"] + 2.0:
            targets = self.eligible(s["kind"])
            if not targets:
                self.second = None
                self.skipped.append({"t": self.now(), "kind": f"double's {s['kind']}"})
                log(f"   [{self.now():7.1f} s]      double's second fault ({s['kind']}) skipped: no target for 2 s")
                return
        if not targets:
            return
        self.second = None
        agent, worker = targets[int(s["pick"] * len(targets)) % len(targets)]
        step = self.progress_step()
        late = now - s["at"]
        t = self.now()
        detail = self.apply(s["kind"], agent, worker, s, self.injections[-1])
        self.record(t, s["kind"], agent, step, detail, self.faults)
        self.injections[-1]["detail"] += f"; second: {detail}"
        log(f"   [{self.now():7.1f} s {wall_clock()}]      double's second fault ({s['kind']}, {s['gap']:.2f} s "
            f"after the first" + (f", {late:.2f} s late for want of a target" if late > 0.2 else "") + f"): {detail}")

    def watch_save(self, plan):
        """kill-during-save, part 1: once the job is steady, start watching for a save in
        flight (tend_pending() kills when it shows). The target is drawn then, from the workers
        of that moment, so that the kill itself costs no look at /proc."""
        targets = self.eligible("kill-during-save")
        if not targets:
            return False
        ckpt = os.path.join(self.train, "checkpoints")
        try:
            old = set(os.listdir(ckpt))
        except OSError:
            old = set()
        targets = [(a, w, self.who(a, w)) for a, w in targets]
        self.pending = {"kind": "kill-during-save", "targets": targets, "pick": plan["pick"],
                        "before": self.worker_map(), "ckpt": ckpt, "old_tmp": old,
                        "latest": read_text(os.path.join(ckpt, "latest")), "since": time.monotonic()}
        return True

    def tend_pending(self, lines):
        """The pending second kill of a kill-during-heal (once its stage shows in `lines`, the
        agents' new log lines) or the kill of a kill-during-save (once a save is in flight);
        called every ms while one is pending."""
        p = self.pending
        mono = time.monotonic()
        if any(a.exit_code is not None or (not a.alive() and a.restart_at is None) for a in self.agents):
            self.pending = None
            log(f"   [{self.now():7.1f} s]      {p['kind']}: dropped, an agent exited")
            return
        if p["kind"] == "kill-during-heal":
            self.tend_heal_kill(p, lines, mono)
        else:
            self.tend_save_kill(p, mono)

    def tend_heal_kill(self, p, lines, mono):
        rec = p["rec"]
        rx = HEAL_STAGES[p["stage"]]
        hit = next(((a, line, m) for a, line in lines for m in [rx.search(line)] if m), None)
        if hit is None:
            if mono > p["deadline"]:
                self.pending = None
                note = f"second kill skipped: no {p['stage']} line within {HEAL_WATCH_S:g} s of the first kill"
                rec["detail"] += "; " + note
                self.skipped.append({"t": self.now(), "kind": "kill-during-heal's second kill"})
                log(f"   [{self.now():7.1f} s {wall_clock()}]      #{rec['n']} kill-during-heal: {note}")
            return
        agent, line, m = hit
        replacement = int(m.group(1)) if p["stage"] == "replaced" else None
        survivors = [(a, w) for a in self.agents for w in a.workers()
                     if w in rec["before"] and w not in rec["pids"] and proc_state(w) not in ("T", "t")]
        if replacement is not None and (p["victim"] == "replacement" or not survivors):
            target, role = (agent, replacement), "the replacement"
        elif survivors:
            target, role = survivors[int(p["pick"] * len(survivors)) % len(survivors)], "a survivor"
        else:
            self.pending = None
            rec["detail"] += f"; second kill skipped: no survivor left at the {p['stage']} stage"
            log(f"   [{self.now():7.1f} s {wall_clock()}]      #{rec['n']} kill-during-heal: no survivor left "
                f"at the {p['stage']} stage; second kill skipped")
            return
        self.pending = None
        what = self.kill(target[0], target[1], rec)
        after = (time.monotonic() - p["since"]) * 1000
        seen = line.split("] ", 2)[-1][:160]
        detail = (f"{role}: {what}, {after:.0f} ms after the first kill, at the {p['stage']} stage "
                  f"(node {agent.node} logged: {seen})")
        rec["detail"] += "; then " + detail
        log(f"   [{self.now():7.1f} s {wall_clock()}]      #{rec['n']} kill-during-heal's second kill (step "
            f"~{self.progress_step()}): {detail}")

    def tend_save_kill(self, p, mono):
        ckpt = p["ckpt"]
        try:
            names = os.listdir(ckpt)
        except OSError:
            names = []
        how = None
        for name in names:
            m = re.fullmatch(r"\.tmp-step-(\d+)-g(\d+)", name)
            if m and name not in p["old_tmp"] and not os.path.exists(
                    os.path.join(ckpt, f"step-{int(m.group(1)):09d}", "manifest.json")):
                how = f"while the save of step {int(m.group(1))} was in flight ({name} without a manifest)"
                break
        waited = mono - p["since"]
        if how is None and waited > SAVE_WATCH_S:
            latest = read_text(os.path.join(ckpt, "latest"))
            if latest and latest != p["latest"]:
                how = (f"just after the commit of {latest.strip()} (no save in flight seen in "
                       f"{SAVE_WATCH_S:g} s)")
        if how is None:
            if waited > 2 * SAVE_WATCH_S:
                self.pending = None
                self.skipped.append({"t": self.now(), "kind": "kill-during-save"})
                log(f"   [{self.now():7.1f} s]      kill-during-save skipped: neither a save in flight nor a "
                    f"commit in {2 * SAVE_WATCH_S:g} s")
            return
        live = [t for t in p["targets"] if proc_state(t[1]) not in (None, "Z", "X", "T", "t")]
        if not live:
            self.pending = None
            self.skipped.append({"t": self.now(), "kind": "kill-during-save"})
            log(f"   [{self.now():7.1f} s]      kill-during-save skipped: its targets are gone")
            return
        self.pending = None
        agent, worker, what = live[int(p["pick"] * len(live)) % len(live)]
        gone = not kill_quietly(worker, signal.SIGKILL)  # first, while the save is still in flight
        rec = self.new_injection("kill-during-save", agent, before=p["before"])
        rec["pids"].append(worker)
        rec["nodes"].append(agent.node)
        rec["detail"] = (f"SIGKILL {what}{' (already gone)' if gone else ''} {how}, "
                         f"{waited * 1000:.0f} ms into the watch")
        self.record(rec["t"], "kill-during-save", agent, rec["step"], rec["detail"], self.faults)
        self.log_injection(rec)

    def poll_logs(self):
        """The agents' new log lines as (agent, line). Each line that tells how the job took a
        fault (NOTABLE) is kept with the last injection, and a rank's restore from disk counted
        there."""
        out = []
        for a in self.agents:
            for line in a.new_lines():
                out.append((a, line))
                if self.injections and NOTABLE.search(line):
                    rec = self.injections[-1]
                    if DISK_RESTORE.search(line):
                        rec["disk"] += 1
                    if len(rec["notes"]) < 40:
                        rec["notes"].append(f"node {a.node}: {line}")
        return out

    def heal(self):
        dropped = self.lab.dropped()
        self.lab.heal()
        took = time.monotonic() - self.cut_started
        self.heal_at = self.cut_started = None
        log(f"   [{self.now():7.1f} s]      partition healed after {took:.2f} s: the cut dropped "
            f"{dropped[0]} packet(s) entering node 0 and {dropped[1]} entering node 1")

    def run(self):
        args = self.args
        self.t0 = time.monotonic()
        where = (f"network namespaces {self.lab.ns[0]} ({self.addr[0]}) and {self.lab.ns[1]} ({self.addr[1]})"
                 if self.lab else "127.0.0.1")
        n = args.nproc_per_node
        recovery = (f"recovery in-process ({args.spares} warm spare(s) per node)" if self.in_process
                    else "recovery restart")
        log(f"== chaos: 2 agents x {n} worker{'s' if n > 1 else ''} on {where}, {recovery}, rendezvous first at "
            f"{self.addr[0]}:{self.port}, up to {args.injections} injection(s) of {','.join(args.kinds)} every "
            f"{args.interval[0]:g}-{args.interval[1]:g} s")
        for a in self.agents:
            a.start()
            log(f"   node {a.node}: agent pid {a.pid}, log {a.logs[-1]}")
        stop_at = int(args.stop_fraction * args.max_steps)
        rng, rng2 = self.rng, self.rng2

        def draw():
            # A fixed number of draws per injection, in a fixed order: --seed replays the choices.
            d = {"kind": rng.choice(args.kinds), "pick": rng.random(), "delay": rng.uniform(0.5, 3.0),
                 "interval": rng.uniform(*args.interval), "pause": rng.uniform(0.5, 4.0),
                 "cut": rng.uniform(2.0, 8.0), "first": rng.choice(DOUBLE_FIRST),
                 "second": rng.choice(DOUBLE_SECOND)}
            near = rng.random() < 0.6
            far = rng.uniform(1.0, 3.0)
            d["gap"] = rng.uniform(0.0, 1.0) if near else far
            d.update(pick2=rng.random(), delay2=rng.uniform(0.5, 3.0), pause2=rng.uniform(0.5, 4.0))
            d.update(two_same_node=rng2.random() < 0.5, two_gap=rng2.uniform(0.0, 0.1),
                     heal_stage=rng2.choice(tuple(HEAL_STAGES)), heal_victim=rng2.choice(("survivor", "replacement")),
                     pick_b=rng2.random())
            return d

        plan = draw()
        next_fire = args.interval[0] + rng.uniform(0, args.interval[1] - args.interval[0])
        waiting_since = None
        injecting = True
        next_status = 15.0
        failure = None
        deadline = args.timeout
        last_step, last_change, stall_said, last_look = None, time.monotonic(), False, 0.0
        while True:
            t = self.now()
            mono = time.monotonic()
            lines = self.poll_logs()
            # Stalls: no change of the workers' step (a restore from disk changes it too).
            if mono - last_look >= 0.05:
                last_look = mono
                step_now = self.progress_step()
                if step_now != last_step:
                    if last_step is not None:
                        self.note_stall(last_change, mono)
                    last_step, last_change, stall_said = step_now, mono, False
                elif args.max_stall and mono - last_change > args.max_stall and not stall_said:
                    stall_said = True
                    log(f"   [{t:7.1f} s] no progress for {args.max_stall:g} s (step ~{step_now} since "
                        f"{last_change - self.t0:.1f} s{self.after_injection(last_change - self.t0)})")
            if self.pending is not None:
                self.tend_pending(lines)
            if self.heal_at is not None and mono >= self.heal_at:
                self.heal()
            for a in self.agents:
                if a.resume_at is not None and mono >= a.resume_at:
                    a.resume()
                    log(f"   [{t:7.1f} s]      node {a.node} agent pid {a.pid} resumed (SIGCONT)")
            if self.second is not None:
                self.inject_second()
            for a in self.agents:
                if a.restart_at is not None and time.monotonic() >= a.restart_at:
                    a.start()
                    log(f"   [{t:7.1f} s]      node {a.node} restarted: agent pid {a.pid}, log {a.logs[-1]}")
                elif a.restart_at is None and a.exit_code is None and a.proc.poll() is not None:
                    a.exit_code = a.proc.returncode
                    log(f"   [{t:7.1f} s] node {a.node} agent exited {a.exit_code}")
                    if a.exit_code != 0 and failure is None:
                        failure = f"agent of node {a.node} exited {a.exit_code}"
                        if self.injections:
                            last = self.injections[-1]
                            failure += (f" ({t - last['t']:.1f} s after injection #{last['n']}, {last['kind']} "
                                        f"at {last['t']:.1f} s, {last['wall']}: {last['detail']})")
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
                elif t >= next_fire and self.second is None and self.pending is None:
                    if self.inject(plan):
                        next_fire = t + plan["interval"]
                        plan = draw()
                        waiting_since = None
                    else:
                        waiting_since = waiting_since if waiting_since is not None else t
                        why, at_once = self.why_no_target(plan["kind"])
                        if at_once or t - waiting_since > 30:
                            self.skipped.append({"t": t, "kind": plan["kind"]})
                            log(f"   [{t:7.1f} s] skipped a {plan['kind']}: "
                                + (why if at_once else f"no eligible target for 30 s{' (' + why + ')' if why else ''}"))
                            next_fire = t + plan["interval"]
                            plan = draw()
                            waiting_since = None
            if t >= next_status:
                next_status = t + 15.0
                alive = ", ".join(f"node {a.node} " + ("restarting" if a.restart_at else
                                                       f"pid {a.pid}{' (paused)' if a.resume_at else ''} "
                                                       f"workers {a.workers() or '-'}"
                                                       if a.alive() else f"exited {a.exit_code}")
                                  for a in self.agents)
                holder, lease = self.lease_holder()
                log(f"   [{t:7.1f} s] step ~{self.progress_step()} of {args.max_steps}; "
                    f"{len(self.injections)} injection(s); {alive}; rendezvous lease term "
                    f"{(lease or {}).get('term')} held by node {holder.node if holder else '?'}"
                    + ("; partitioned" if self.heal_at else ""))
            # Every ms while a kill waits for its moment (a heal's stage, a save in flight).
            time.sleep(0.001 if self.pending is not None else 0.05)
        self.poll_logs()
        if any(a.exit_code != 0 for a in self.agents):
            self.note_stall(last_change, time.monotonic())  # the run may have ended in one
        return failure

    def injection_before(self, t):
        """The last injection at or before `t` (s into the run; 0.5 s of slack), or None."""
        before = [i for i in self.injections if i["t"] <= t + 0.5]
        return before[-1] if before else None

    def after_injection(self, t):
        """", after injection #n, kind at s" for the last injection at or before `t`."""
        i = self.injection_before(t)
        return f", after injection #{i['n']}, {i['kind']} at {i['t']:.1f} s" if i else ""

    def note_stall(self, since, until):
        """Keeps the longest stall, and every one over --max-stall (a problem)."""
        took = until - since
        start = since - self.t0
        if self.longest_stall is None or took > self.longest_stall[1]:
            self.longest_stall = (start, took)
        if (i := self.injection_before(start)) is not None:
            self.stall_after[i["n"]] = max(took, self.stall_after.get(i["n"], 0.0))
        if self.args.max_stall and took > self.args.max_stall:
            self.stalls.append((start, took, self.injection_before(start)))
            self.problems.append(f"the job made no progress for {took:.0f} s from {start:.1f} s"
                                 f"{self.after_injection(start)} (--max-stall {self.args.max_stall:g} s)")

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


def recoveries_in_log(path):
    """The in-process recoveries an agent incarnation logged, as agent.json's
    `in_process_recoveries` holds them: generation, replaced [{rank, lost_pid, pid, by}],
    survivors [{rank, lost_rank, pid}]."""
    by_gen = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = REPLACED_LINE.search(line)
                if m:
                    r = by_gen.setdefault(int(m.group(5)), {"generation": int(m.group(5)), "replaced": [],
                                                            "survivors": []})
                    r["replaced"].append({"rank": int(m.group(1)), "lost_pid": int(m.group(2)),
                                          "by": m.group(3), "pid": int(m.group(4))})
                    continue
                m = KEPT_LINE.search(line)
                if m:
                    r = by_gen.setdefault(int(m.group(1)), {"generation": int(m.group(1)), "replaced": [],
                                                            "survivors": []})
                    r["survivors"] = [{"lost_rank": int(k.group(1)), "rank": int(k.group(2) or k.group(1)),
                                       "pid": int(k.group(3))} for k in KEPT_WORKER.finditer(m.group(2))]
    except OSError:
        pass
    return [by_gen[g] for g in sorted(by_gen)]


def node_recoveries(chaos, agent):
    """(records, source) of every in-process recovery of `agent`'s node: its last incarnation's
    from run-node<i>/agent.json (written when the agent exits), those of incarnations that were
    killed (no agent.json) from their log lines."""
    summary = read_json(os.path.join(chaos.dir, f"run-node{agent.node}", "agent.json"))
    logs = agent.logs
    records = []
    if summary is not None and agent.exit_code is not None:
        logs = agent.logs[:-1]
        source = "agent.json" + (f" and the log lines of {len(logs)} killed incarnation(s)" if logs else "")
    else:
        source = "the agent's log lines (no agent.json)"
        summary = None
    for path in logs:
        records += recoveries_in_log(path)
    if summary is not None:
        records += summary.get("in_process_recoveries") or []
    return records, source


def judge_in_process(chaos):
    """Per injection: its outcome (healed in process, restart from disk, other) and, for the
    single-worker faults, the checks: the target replaced in an in-process recovery of its node,
    every other worker of that moment kept its process. Returns (outcomes, problems, sources)."""
    recs, sources = {}, {}
    for a in chaos.agents:
        recs[a.node], sources[a.node] = node_recoveries(chaos, a)

    def replaced_in(pid, node):
        return next((r for r in recs.get(node, []) if any(x.get("lost_pid") == pid for x in r.get("replaced", []))),
                    None)

    outcomes, problems = [], []
    for rec in chaos.injections:
        healed = bool(rec["pids"]) and all(replaced_in(pid, node) for pid, node in zip(rec["pids"], rec["nodes"]))
        outcome = "disk" if rec["disk"] else "healed" if healed else "other"
        failed = []
        if rec["kind"] in SINGLE_WORKER_KINDS and rec["pids"]:
            pid, node = rec["pids"][0], rec["nodes"][0]
            r = replaced_in(pid, node)
            if r is None:
                failed.append(f"not healed in process: no in-process recovery of node {node} replaced pid {pid}")
            else:
                g = r.get("generation")
                for w, wn in sorted(rec["before"].items()):
                    if w == pid:
                        continue
                    kept = any(sv.get("pid") == w for r2 in recs.get(wn, []) if r2.get("generation") == g
                               for sv in r2.get("survivors", []))
                    if kept:
                        continue
                    lost = replaced_in(w, wn)
                    why = (f"it was replaced itself in generation {lost.get('generation')}" if lost
                           else f"not among node {wn}'s survivors there")
                    failed.append(f"worker pid {w} of node {wn} did not keep its process through the recovery "
                                  f"into generation {g} ({why})")
            if rec["disk"]:
                failed.append(f"{rec['disk']} line(s) \"resumed from\" after it: the job restored from disk")
        outcomes.append((rec, outcome, failed))
        if failed:
            problems.append(f"injection #{rec['n']} ({rec['kind']} at {rec['t']:.1f} s, {rec['wall']}, node(s) "
                            f"{','.join(map(str, rec['nodes']))}, pid(s) {','.join(map(str, rec['pids']))}, step "
                            f"~{rec['step']}): " + "; ".join(failed))
    return outcomes, problems, sources


def outcome_table(kinds, outcomes, skipped, stall_after=None):
    """The lines of the per-kind table of in-process outcomes (`skipped`: Chaos.skipped;
    `stall_after`: Chaos.stall_after, the longest stretch without a step after each injection:
    what the fault cost the job, detection and heal included)."""
    stall_after = stall_after or {}
    rows = [("kind", "injected", "healed in process", "restart from disk", "other", "checks failed", "skipped",
             "stall median", "stall max")]
    for k in kinds:
        mine = [(o, f) for rec, o, f in outcomes if rec["kind"] == k]
        stalls = sorted(stall_after[rec["n"]] for rec, _, _ in outcomes if rec["kind"] == k and rec["n"] in stall_after)
        rows.append((k, str(len(mine)), str(sum(o == "healed" for o, _ in mine)),
                     str(sum(o == "disk" for o, _ in mine)), str(sum(o == "other" for o, _ in mine)),
                     str(sum(bool(f) for _, f in mine)) if k in SINGLE_WORKER_KINDS else "-",
                     str(sum(s["kind"] == k for s in skipped)),
                     f"{statistics.median(stalls):.2f} s" if stalls else "-",
                     f"{stalls[-1]:.2f} s" if stalls else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in rows]


def first_difference(tenax, ref_train, chaos_train):
    """(last identical step or None, first differing step) among the checkpoints both runs
    committed, by bisection (a difference, once there, stays); None when none differs."""
    common = sorted(set(committed_steps(ref_train)) & set(committed_steps(chaos_train)))

    def same(step):
        return diff(tenax, step_dir(ref_train, step), step_dir(chaos_train, step))[0] == 0

    if not common or same(common[-1]):
        return None
    lo, hi = -1, len(common) - 1  # common[hi] differs; common[lo] is identical (or before the first)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if same(common[mid]):
            lo = mid
        else:
            hi = mid
    return (common[lo] if lo >= 0 else None), common[hi]


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
        epilog="Examples: python3 tools/chaos.py --build build --injections 3 --seed 42; "
        "python3 tools/chaos.py --kinds pause-agent,kill-rdzv-host --net loopback; "
        "python3 tools/chaos.py --recovery in-process --nproc-per-node 2 --injections 100")
    p.add_argument("--build", default="build", help="build directory holding tenax and the example (default build)")
    p.add_argument("--tenax", help="tenax binary (default BUILD/launcher/tenax)")
    p.add_argument("--example", help="synthetic_regression binary (default: found under BUILD/examples)")
    p.add_argument("--out", help="output directory (default /tmp/tenax-chaos-<pid>)")
    p.add_argument("--seed", type=int, help="RNG seed (default: time-based; always printed)")
    p.add_argument("--injections", type=int, default=20, help="faults to inject (default 20)")
    p.add_argument("--kinds", "--faults", dest="kinds", default=None,
                   help="comma-separated fault kinds among " + ",".join(FAULTS) + " (default: the first seven "
                   "under --recovery restart, " + ",".join(IN_PROCESS_KINDS) + " under --recovery in-process; "
                   "a kind given twice is drawn twice as often)")
    p.add_argument("--recovery", choices=("restart", "in-process"), default="restart",
                   help="the agents' --recovery (default restart); in-process also checks that every "
                   "single-worker fault healed in process")
    p.add_argument("--spares", type=int, default=None,
                   help="the agents' --spares under --recovery in-process (default 1)")
    p.add_argument("--nproc-per-node", type=int, choices=(1, 2), default=1,
                   help="workers per chaos agent (default 1); the reference runs 2 x this many")
    p.add_argument("--net", choices=("auto", "netns", "loopback"), default="auto",
                   help="netns: each agent in a network namespace of its own (root; needed for "
                   "partition); loopback: both on 127.0.0.1; auto (default): netns when partition "
                   "is among the kinds")
    p.add_argument("--interval", default="3:8",
                   help="MIN:MAX seconds from one injection to the next (default 3:8)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="training steps (default max(12000, 500 x --injections))")
    p.add_argument("--save-steps", type=int, default=100, help="checkpoint every S steps (default 100)")
    p.add_argument("--logging-steps", type=int, default=500, help="log every L steps (default 500)")
    p.add_argument("--max-stall", type=float, default=None,
                   help="a time without training progress (the workers' step unchanged) longer than "
                   "this many seconds fails the run, naming the injection before it (default 120 under "
                   "--recovery in-process; under restart the longest is only reported; 0: never fails)")
    p.add_argument("--stop-fraction", type=float, default=0.9,
                   help="no injection once the workers are past this fraction of --max-steps (default 0.9)")
    p.add_argument("--hang-timeout", type=int, default=3, help="the agents' --hang-timeout (default 3)")
    p.add_argument("--max-restarts", type=int, default=1000, help="the agents' --max-restarts (default 1000)")
    p.add_argument("--join-timeout", type=int, default=60, help="the agents' --join-timeout (default 60)")
    p.add_argument("--heartbeat-interval", type=int, default=100,
                   help="the agents' --heartbeat-interval in ms (default 100)")
    p.add_argument("--lease-timeout", type=int, default=1000,
                   help="the agents' --lease-timeout in ms (default 1000: the runtime's default, "
                   "2 x interval x liveness 5, for the default interval)")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (default: a free one)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds for the whole chaos run, then everything is killed (default "
                   "max(900, 300 + 20 x --injections))")
    p.add_argument("--reference-timeout", type=float, default=None,
                   help="seconds for the reference run (default max(600, --max-steps / 20))")
    p.add_argument("--reference-dir",
                   help="reuse the train/ directory of an earlier reference run (same --max-steps "
                   "and --save-steps) instead of running one")
    a = p.parse_args(argv)
    if a.spares is None:
        a.spares = 1
    elif a.recovery != "in-process":
        fail_usage("--spares needs --recovery in-process")
    if a.spares < 0:
        fail_usage("--spares must be >= 0")
    defaulted = a.kinds is None
    if defaulted:
        a.kinds = list(IN_PROCESS_KINDS if a.recovery == "in-process" else DEFAULT_KINDS)
    else:
        a.kinds = [f.strip() for f in a.kinds.split(",") if f.strip()]
    bad = [f for f in a.kinds if f not in FAULTS]
    if bad or not a.kinds:
        fail_usage(f"--kinds: unknown {','.join(bad) or '(none given)'}; choose from {','.join(FAULTS)}")
    if defaulted and "partition" in a.kinds and a.net in ("auto", "loopback") and (
            a.net == "loopback" or NetLab.missing_tools()):
        # The default kinds on a machine without network namespaces (not root): every kind but
        # partition, said loudly; an explicit --kinds partition is an error below instead.
        why = "--net loopback" if a.net == "loopback" else NetLab.missing_tools()
        a.kinds.remove("partition")
        print(f"chaos.py: note: no partition faults ({why})", flush=True)
    if a.net == "auto":
        a.net = "netns" if "partition" in a.kinds else "loopback"
    if "partition" in a.kinds and a.net != "netns":
        fail_usage("--kinds partition needs --net netns (on 127.0.0.1 both nodes share one network)")
    if a.net == "netns":
        why = NetLab.missing_tools()
        if why:
            fail_usage(f"{why}; or leave partition out of --kinds and use --net loopback")
    try:
        lo, hi = (float(x) for x in a.interval.split(":"))
    except ValueError:
        fail_usage(f"--interval must be MIN:MAX seconds, got {a.interval!r}")
    if not 0 < lo <= hi:
        fail_usage(f"--interval must satisfy 0 < MIN <= MAX, got {a.interval!r}")
    a.interval = (lo, hi)
    if a.injections < 0:
        fail_usage("--injections must be >= 0")
    if a.max_stall is None:
        a.max_stall = 120.0 if a.recovery == "in-process" else 0.0
    if a.max_stall < 0:
        fail_usage("--max-stall must be >= 0")
    if a.max_steps is None:
        a.max_steps = max(12000, 500 * a.injections)
    if a.timeout is None:
        a.timeout = max(900.0, 300.0 + 20.0 * a.injections)
    if a.reference_timeout is None:
        a.reference_timeout = max(600.0, a.max_steps / 20.0)
    if a.max_steps <= 0 or a.save_steps <= 0 or a.save_steps > a.max_steps or a.logging_steps <= 0:
        fail_usage("need 0 < --save-steps <= --max-steps and --logging-steps > 0")
    if a.reference_dir:
        a.reference_dir = os.path.abspath(a.reference_dir)
        manifest = read_json(os.path.join(step_dir(a.reference_dir, a.max_steps), "manifest.json"))
        if manifest is None:
            fail_usage(f"--reference-dir {a.reference_dir} holds no committed step {a.max_steps}")
        if manifest.get("world_size") != 2 * a.nproc_per_node:
            fail_usage(f"--reference-dir {a.reference_dir} was written by {manifest.get('world_size')} ranks; "
                       f"--nproc-per-node {a.nproc_per_node} needs a reference of {2 * a.nproc_per_node}")
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
    lab = None
    failure = None
    ref_elapsed = chaos_elapsed = None

    # A SIGTERM or SIGHUP ends the driver like a Ctrl-C: through the cleanup below, which
    # kills the agents and removes the network namespaces (and with them any partition). A
    # signal ignored at start (nohup, a background job of a script) stays ignored.
    def interrupted(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, interrupted)
    try:
        if args.net == "netns":
            lab = NetLab()
            atexit.register(lab.teardown)  # even past an exception the finally below misses
            lab.setup()
            log(f"   network: {lab.ns[0]} ({lab.addr[0]}) <-> {lab.ns[1]} ({lab.addr[1]}) over veth "
                f"{lab.veth[0]}/{lab.veth[1]}; checked: TCP probes get through, and a cut stops them both ways")
        if args.reference_dir:
            ref_elapsed = 0.0
            log(f"== reference: reusing {args.reference_dir}")
        else:
            ref_elapsed = run_reference(args, tenax, train_args, ref_dir)
            if ref_elapsed is None:
                log("RESULT: FAILED (the reference run failed; no chaos run)")
                return 1
        chaos = Chaos(args, tenax, train_args, chaos_dir, seed, lab)
        failure = chaos.run()
        chaos_elapsed = chaos.now()
    except NetLabError as e:
        log(f"RESULT: FAILED (network namespaces: {e})")
        return 1
    except KeyboardInterrupt:
        log("interrupted: killing every process this driver started, removing its network namespaces")
        if chaos:
            chaos.kill_all()
        return 130
    finally:
        if chaos:
            for a in chaos.agents:
                if a.resume_at is not None:
                    a.resume()
            chaos.kill_all()
        if lab:
            lab.teardown()

    # --- verify ------------------------------------------------------------------------------
    ref_train = args.reference_dir or os.path.join(ref_dir, "train")
    ref_final = step_dir(ref_train, args.max_steps)
    chaos_final = step_dir(chaos.train, args.max_steps)
    problems = []
    if failure:
        problems.append(failure)
    problems += chaos.problems
    outcomes = sources = None
    if chaos.in_process:
        outcomes, heal_problems, sources = judge_in_process(chaos)
        problems += heal_problems
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
            where = first_difference(tenax, ref_train, chaos.train)
            if where:
                same, differs = where
                near = [i for i in chaos.injections if same is None or i["step"] >= same - args.save_steps]
                text += (f"\nthe first checkpoint that differs is step {differs}"
                         + (f" (step {same} is identical)" if same is not None else " (the first common one)")
                         + "; injections from around there: "
                         + ("; ".join(f"#{i['n']} {i['kind']} at {i['t']:.1f} s, step ~{i['step']}" for i in near[:4])
                            or "none"))
            problems.append(f"model differs from the reference:\n{text}")
        # The diff must be able to see a difference: the reference's final step against an
        # earlier one of its own.
        earlier = [s for s in committed_steps(ref_train) if s < args.max_steps]
        if earlier:
            scode, stext = diff(tenax, ref_final, step_dir(ref_train, earlier[-1]))
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
    kinds = [k for k in FAULTS if k in args.kinds]
    by_kind = {k: [i for i in chaos.injections if i["kind"] == k] for k in kinds}
    log(f"network:     {'network namespaces joined by a veth pair' if chaos.lab else '127.0.0.1'}")
    log(f"injections:  {len(chaos.injections)} ("
        + ", ".join(f"{k} {len(v)}" for k, v in by_kind.items()) + ")"
        + (f"; {len(chaos.skipped)} skipped (no target)" if chaos.skipped else ""))
    basic = {k: sum(1 for f in chaos.faults if f["kind"] == k) for k in FAULTS if k != "double"}
    log(f"faults:      {len(chaos.faults)} applied, a double's two included ("
        + ", ".join(f"{k} {n}" for k, n in basic.items() if n) + ")")
    for k, v in by_kind.items():
        if v:
            log(f"   {k:<16} at " + ", ".join(f"{i['t']:.1f}s(n{i['node'] if i['node'] >= 0 else '*'},~{i['step']})"
                                               for i in v))
    if outcomes is not None:
        log(f"in process:  per kind (healed: every pid killed is a `lost_pid` of an in-process recovery and no "
            f"rank restored from disk; checked for {', '.join(SINGLE_WORKER_KINDS)}); records from "
            + "; ".join(f"node {n}: {src}" for n, src in sorted(sources.items())))
        for line in outcome_table(kinds, outcomes, chaos.skipped, chaos.stall_after):
            log(line)
    all_logs = [p for a in chaos.agents for p in a.logs]
    for a in chaos.agents:
        s = read_json(os.path.join(chaos_dir, f"run-node{a.node}", "agent.json"))
        started_gens = count_in_logs(a.logs, r"\] info: starting \d+ worker")
        exit_text = f"exit {a.exit_code}" if a.exit_code is not None else "killed by chaos.py at the end"
        summary = (f"agent.json: outcome {s.get('outcome')!r}, {s.get('generations')} generation(s), "
                   f"{s.get('restarts')} restart(s), {len(s.get('in_process_recoveries') or [])} in-process "
                   f"recovery(ies) (of its last incarnation)") if s else "no agent.json"
        log(f"node {a.node}:      {exit_text}; {a.incarnation} agent incarnation(s); "
            f"{started_gens} worker generation(s) started in all; {summary}")
    killed = count_in_logs(all_logs, r"launcher\] error: worker .* was killed by signal 9")
    hung = count_in_logs(all_logs, r"launcher\] error: worker .* treating it as hung")
    lost = count_in_logs(all_logs, r"missed heartbeats|the rendezvous service does not know node")
    resumed = count_in_logs(all_logs, r"resumed from ")
    log(f"agents saw:  {killed} worker(s) killed by SIGKILL, {hung} hung worker(s), {lost} line(s) on lost "
        f"nodes or a restarted service; rank 0 resumed from a checkpoint {resumed} time(s)")
    hosted = [count_in_logs(a.logs, r"hosts the rendezvous service at") for a in chaos.agents]
    deposed = count_in_logs(all_logs, r"no longer holds the rendezvous lease")
    moved = count_in_logs(all_logs, r"the rendezvous service moved to|looking for the job's rendezvous service")
    lease = chaos.lease() or {}
    log(f"rendezvous:  hosting claimed {hosted[0]} time(s) by node 0 and {hosted[1]} by node 1; {deposed} host(s) "
        f"deposed; {moved} search(es) for a lost or moved service; last lease term {lease.get('term')} "
        f"(holder {lease.get('holder')}, generation {lease.get('generation')})")
    if chaos.longest_stall:
        start, took = chaos.longest_stall
        log(f"stalls:      longest {took:.1f} s without progress, from {start:.1f} s{chaos.after_injection(start)}"
            + (f"; {len(chaos.stalls)} over --max-stall {args.max_stall:g} s" if args.max_stall else ""))
    ref_text = "reused" if args.reference_dir else f"{ref_elapsed:.1f} s"
    log(f"wall time:   reference {ref_text}, chaos {chaos_elapsed:.1f} s, "
        f"total {time.monotonic() - started:.1f} s")
    log(f"reference:   {ref_final}")
    log(f"chaos:       {chaos_final}")
    log("logs:        " + (os.path.join(ref_dir, "agent.log") if not args.reference_dir else "(reference reused)"))
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
        # The injections a problem points at: failed checks, the last before a stall or an
        # agent's failure; each with what the agents logged after it.
        flagged = [rec for rec, _, failed in outcomes or [] if failed]
        flagged += [i for _, _, i in chaos.stalls if i]
        if failure and chaos.injections:
            flagged.append(chaos.injections[-1])
        seen = set()
        for rec in sorted(flagged, key=lambda r: r["n"]):
            if rec["n"] in seen:
                continue
            seen.add(rec["n"])
            log(f"\n--- injection #{rec['n']} ({rec['kind']} at {rec['t']:.1f} s, {rec['wall']}): {rec['detail']}\n"
                f"    what the agents logged next (up to the next injection):\n"
                + ("\n".join("    " + line[:400] for line in rec["notes"]) or "    (nothing notable)"))
        log("")
        for p in problems:
            log(f"PROBLEM: {p}")
        log(f"RESULT: FAILED (seed {seed})")
        return 1
    log("RESULT: BIT-IDENTICAL (final model of the chaos run equals the reference, both agents exited 0"
        + (", every single-worker fault healed in process)" if chaos.in_process else ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
