"""torchrun's c10d rendezvous at scale: the peer of bench/rendezvous_scale_bench.cpp (issue 15, point 5).

Run with PyPI torch (bash bench/setup_hf_peers.sh pypi, then .venv-hf-pypi/bin/python); one invocation
measures one N once and prints "RDZV_RESULT {json}", as rendezvous_scale_bench does for Tenax;
bench/rendezvous_scale_bench.py --systems tenax,c10d runs both in one invocation and makes the table.

  c10d_rendezvous_scale.py --nodes N [--steady-s 10] [--seed S] [--nodes-per-proc 128]
                           [--monitor-interval 0.1] [--form-timeout 300] [--reform-timeout 300]

What runs, as a torchrun job with --rdzv-backend c10d --nnodes N-1:N would:
  service     one TCPStore server (is_master, multi_tenant, read timeout 60 s, libuv: what
              c10d_rendezvous_backend._create_tcp_store makes on the rendezvous host), in a process of
              its own (this script with --serve) so that its CPU time (/proc/PID/task/*/schedstat) is its own
  agents      N DynamicRendezvousHandlers made the way torchrun makes them (registry's c10d factory:
              c10d_rendezvous_backend.create_backend + dynamic_rendezvous.create_handler), each with its
              own TCPStore client, node descriptor (local_addr 127.1.x.y, the pid, a local id) and
              keep-alive thread, min_nodes N-1, max_nodes N, every timeout at torch's default: join
              600 s, last call 30 s, close 30 s, heartbeat 5 s, keep_alive_interval 5 s x
              keep_alive_max_attempt 3, cas_backoff_max_seconds 0. One driver thread per agent runs
              what torchrun's agent does with the handler (SimpleElasticAgent._invoke_run): next_rendezvous(),
              then every --monitor-interval (torchrun's default 0.1 s) a look at its workers and, while
              they are healthy, num_nodes_waiting(). The agents are threads of ceil(N / --nodes-per-proc)
              processes forked from this one (one interpreter with 1,024 agents would serialise them on
              its GIL), plus one process for the victim alone, so that the victim dies as a process does.
Measured (time.monotonic(): CLOCK_MONOTONIC, shared by the processes):
  connect     the N TCPStore clients connecting (create_backend); the service's CPU for it
  form        go -> every agent returned from next_rendezvous() with its rank (the RendezvousInfo;
              torch's own 0-0.3 s random delay of the first round is part of it)
  steady      a --steady-s window 1 s after formation: the service process's CPU time / wall time,
              the loopback bytes (/proc/net/dev 'lo', received: every packet once, both directions,
              headers and ACKs included) against a 1 s baseline taken before the agents started,
              and the store operations the agents made (their backends' get_state / set_state,
              failed compare-and-sets apart)
  death       one agent's process (the victim, drawn from --seed), at a random point of its 5 s
              keep-alive cycle, is killed (SIGKILL). The c10d rendezvous tells nobody: a dead node is
              only dropped from the state once its last heartbeat is keep_alive_interval x
              keep_alive_max_attempt (15 s) old, and num_nodes_waiting() counts waiting nodes, not dead
              ones. torchrun's agents learn of a death from their own workers, whose next collective
              with the dead node fails; here that is modelled at its best: every survivor's workers
              fail at the moment of the death, its agent sees it at its next monitor tick and calls
              next_rendezvous() (as _restart_workers does; torchrun's default --max-restarts 0 would
              end the job instead). reform = death -> every survivor holds its round-1 rank. An
              observer (one more store client, in this process, reading the state every 0.2 s from
              the death on) splits it: death -> round 1 open (the dead node dropped), -> the last call
              starts (N-1 participants), -> all hold round 1.
Reverse DNS: torch's TCPStore looks up the name of each peer address it connects or accepts
(getnameinfo on [::ffff:127.0.0.1]); /etc/hosts names 127.0.0.1 but not its IPv4-mapped form,
so each lookup goes to this VM's DNS server, which leaves about one query in 25 unanswered: a 5 s
resolver timeout, on the connecting agent or on the server's loop. A cluster's resolver answers
such lookups; so, as root, this script runs itself in a private mount namespace (unshare -m) in
which /etc/hosts also names ::ffff:127.0.0.1 (the machine's /etc/hosts is not changed), and
"local_reverse_dns" in the result says whether it did.
Checks: round 0 has N agents with ranks 0..N-1, round 1 has the N-1 survivors with ranks 0..N-2.
Counted, not fatal: failed keep-alives (a heartbeat's compare-and-set that kept losing to others'
for its 5 s timeout) and num_nodes_waiting() above 0 in the steady window. A failed check or a
timeout prints RDZV_RESULT with "failed" (and whatever was measured) and exits 1.
"""
import argparse
import base64
import json
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import create_backend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

RUN_ID = "c10d-scale-bench"
STATE_KEY = "torch.rendezvous." + RUN_ID  # C10dRendezvousBackend's key for the whole state
KEEP_ALIVE_S = 5.0  # torch's default keep_alive_interval (create_handler)
LAST_CALL_S = 30.0  # torch's default last_call_timeout (RendezvousTimeout)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """User + system CPU time of a process, all its threads (/proc/PID/stat), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except OSError:
        return 0.0


def threads_cpu_s(pid):
    """CPU time of every thread of a process, in ns resolution (/proc/PID/task/*/schedstat: the
    first field is the time on a CPU); /proc/PID/stat's 10 ms ticks are too coarse for a small N."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass  # a thread that ended between listdir and open
    except OSError:
        return 0.0
    return total / 1e9


def loopback():
    """Received bytes and packets of the loopback interface: on lo every packet sent is received once."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if rest and name.strip() == "lo":
                v = rest.split()
                return int(v[0]), int(v[1])
    raise SystemExit("no 'lo' line in /proc/net/dev")


def serve():
    """The rendezvous host's TCPStore server, as c10d_rendezvous_backend._create_tcp_store makes it."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, multi_tenant=True, timeout=timedelta(seconds=60),
                          wait_for_workers=False)
    print(json.dumps({"port": store.port, "libuv": bool(store.libuvBackend)}), flush=True)
    sys.stdin.read()  # until the parent closes our stdin


# ----- the agents' processes -----

class Counters:
    """Store operations of one agent's backend, counted by wrapping its get_state / set_state."""

    def __init__(self, backend):
        self.gets = self.sets = self.failed_sets = self.bytes_in = 0
        get_state, set_state = backend.get_state, backend.set_state

        def counted_get():
            r = get_state()
            self.gets += 1
            self.bytes_in += len(r[1]) if r else 0
            return r

        def counted_set(state, token=None):
            r = set_state(state, token)
            self.sets += 1
            if r is not None and not r[2]:
                self.failed_sets += 1
            return r

        backend.get_state, backend.set_state = counted_get, counted_set


class KeepAliveFailures(logging.Handler):
    """Counts the handler's 'failed to send a keep-alive heartbeat' warnings (and shows none)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0
        self.last = ""

    def emit(self, record):
        self.count += 1
        self.last = record.getMessage()[:300]


def agents_main(conn, indices, port, nodes, monitor_interval):
    """One forked process: the agents `indices`, one driver thread each; commands from `conn`."""
    threading.stack_size(1 << 20)  # 2 threads per agent (driver, keep-alive): 1 MiB each is plenty
    failures = KeepAliveFailures()
    rdzv_log = logging.getLogger("torch.distributed.elastic.rendezvous.dynamic_rendezvous")
    rdzv_log.addHandler(failures)
    rdzv_log.propagate = False  # counted, not printed: a thousand agents' warnings say nothing more
    send_lock = threading.Lock()

    def send(msg):
        with send_lock:
            conn.send(msg)

    agents = {}  # index -> (handler, counters), filled by the driver threads as they connect
    t0 = time.monotonic()
    go_at = [None]
    go = threading.Event()
    workers_failed = threading.Event()
    stop = threading.Event()
    events = queue.Queue()
    waiting_seen = [0]

    def drive(i):
        # Every agent connects on its own thread, as agents on separate machines connect at once.
        t1 = time.monotonic()
        try:
            params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{port}", run_id=RUN_ID,
                                          min_nodes=nodes - 1, max_nodes=nodes,
                                          local_addr=f"127.1.{i // 250}.{i % 250 + 1}", is_host=False)
            backend, store = create_backend(params)
            counters = Counters(backend)
            handler = create_handler(store, backend, params)
        except Exception as e:  # noqa: BLE001
            events.put(("error", i, time.monotonic(), f"connect: {type(e).__name__}: {e}"))
            return
        agents[i] = (handler, counters)
        events.put(("connected", i, time.monotonic(), time.monotonic() - t1))
        go.wait()
        time.sleep(max(0.0, go_at[0] - time.monotonic()))
        try:
            info = handler.next_rendezvous()
            events.put(("formed", i, time.monotonic(), info.rank, info.world_size, handler._state_holder.state.round))
        except Exception as e:  # noqa: BLE001 -- reported to the parent, which fails the run
            events.put(("error", i, time.monotonic(), f"round 0 next_rendezvous: {type(e).__name__}: {e}"))
            return
        restarted = False
        while not stop.is_set():
            time.sleep(monitor_interval)  # SimpleElasticAgent._invoke_run's loop
            if workers_failed.is_set() and not restarted:  # _monitor_workers -> FAILED: _restart_workers
                restarted = True
                noticed = time.monotonic()
                try:
                    info = handler.next_rendezvous()
                    events.put(("reformed", i, time.monotonic(), info.rank, info.world_size,
                                handler._state_holder.state.round, noticed))
                except Exception as e:  # noqa: BLE001
                    events.put(("error", i, time.monotonic(), f"round 1 next_rendezvous: {type(e).__name__}: {e}"))
                    return
                continue
            try:
                if handler.num_nodes_waiting() > 0:  # torchrun would restart its workers here
                    waiting_seen[0] += 1
            except Exception as e:  # noqa: BLE001
                events.put(("error", i, time.monotonic(), f"num_nodes_waiting: {type(e).__name__}: {e}"))
                return

    def report():
        batches = {"connected": [], "formed": [], "reformed": []}
        while True:
            ev = events.get()
            if ev is None:
                return
            if ev[0] == "error":
                send(ev)
                continue
            batches[ev[0]].append(ev[1:])
            if len(batches[ev[0]]) == len(indices):
                if ev[0] == "connected":
                    send(("connected", (time.monotonic() - t0, max(x[2] for x in batches[ev[0]]))))
                else:
                    send((ev[0], batches[ev[0]]))

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    for i in indices:
        threading.Thread(target=drive, args=(i,), daemon=True).start()

    def totals():
        counters = [c for _, c in list(agents.values())]
        return {"gets": sum(c.gets for c in counters), "sets": sum(c.sets for c in counters),
                "failed_sets": sum(c.failed_sets for c in counters), "bytes_in": sum(c.bytes_in for c in counters),
                "keepalive_failures": failures.count, "keepalive_failure_last": failures.last,
                "waiting_seen": waiting_seen[0], "cpu_s": proc_cpu_s(os.getpid())}

    while True:
        cmd = conn.recv()
        if cmd[0] == "go":
            go_at[0] = cmd[1]
            go.set()
        elif cmd[0] == "snap":
            send(("snap", totals()))
        elif cmd[0] == "fail":
            workers_failed.set()
        elif cmd[0] == "stop":
            stop.set()
            send(("stopped", totals()))
            os._exit(0)  # the handlers' shutdown would close the rendezvous; a killed agent does not


# ----- the parent: service, agents, measurements -----

class Run:
    def __init__(self, a):
        self.a = a
        self.result = {"nodes": a.nodes, "seed": a.seed, "keep_alive_s": KEEP_ALIVE_S, "keep_alive_max_attempt": 3,
                       "last_call_s": LAST_CALL_S, "monitor_interval_s": a.monitor_interval}
        self.procs = []  # (process, connection, indices)
        self.service = None
        self.observer = None

    def state(self):
        """The rendezvous state as the store holds it (the observer's read), or None."""
        try:
            return pickle.loads(base64.b64decode(self.observer.get(STATE_KEY)))
        except Exception:  # noqa: BLE001 -- a read that fails is just skipped
            return None

    def fail(self, why):
        self.result["failed"] = why
        raise RuntimeError(why)

    def collect(self, kind, conns, timeout):
        """Waits for one `kind` message from each connection; an 'error' message or the timeout fails the run."""
        got = {}
        deadline = time.monotonic() + timeout
        while len(got) < len(conns):
            left = deadline - time.monotonic()
            ready = multiprocessing.connection.wait([c for c in conns if c not in got], timeout=max(0.0, left))
            if not ready:
                self.fail(f"{kind}: timed out after {timeout:g} s ({len(got)} of {len(conns)} agent processes done)")
            for c in ready:
                try:
                    msg = c.recv()
                except EOFError:
                    self.fail(f"{kind}: an agent process ended")
                if msg[0] == "error":
                    self.fail(f"{kind}: node {msg[1]}: {msg[3]}")
                if msg[0] == kind:
                    got[c] = msg[1]
        return [got[c] for c in conns]

    def run(self):
        a, r = self.a, self.result
        rng = random.Random(a.seed)
        victim = rng.randrange(a.nodes)
        r["victim"] = victim
        self.service = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = json.loads(self.service.stdout.readline() or "null") or self.fail("the service did not start")
        port, spid = hello["port"], self.service.pid
        r["libuv"] = hello["libuv"]

        lo_b0, t = loopback(), time.monotonic()
        time.sleep(1)
        r["lo_baseline_Bps"] = (loopback()[0] - lo_b0[0]) / (time.monotonic() - t)

        # The victim alone in a process; the others in ceil(N-1 / nodes_per_proc) processes.
        others = [i for i in range(a.nodes) if i != victim]
        nproc = max(1, math.ceil(len(others) / a.nodes_per_proc))
        groups = [[victim]] + [others[k::nproc] for k in range(nproc)]
        ctx = multiprocessing.get_context("fork")
        cpu0 = threads_cpu_s(spid)
        t_connect = time.monotonic()
        for g in groups:
            parent_end, child_end = ctx.Pipe()
            p = ctx.Process(target=agents_main, args=(child_end, g, port, a.nodes, a.monitor_interval), daemon=True)
            p.start()
            child_end.close()
            self.procs.append((p, parent_end, g))
        conns = [c for _, c, _ in self.procs]
        self.observer = dist.TCPStore("127.0.0.1", port, is_master=False, multi_tenant=True,
                                      timeout=timedelta(seconds=60))
        connected = self.collect("connected", conns, a.form_timeout)
        r["connect_s"] = time.monotonic() - t_connect
        r["connect_slowest_agent_s"] = max(x[1] for x in connected)
        time.sleep(1.0)
        cpu1 = threads_cpu_s(spid)
        r["connect_service_cpu_s"] = cpu1 - cpu0

        # Formation.
        go_at = time.monotonic() + 0.2
        agents_cpu = sum(proc_cpu_s(p.pid) for p, _, _ in self.procs)
        for c in conns:
            c.send(("go", go_at))
        try:
            formed = [x for batch in self.collect("formed", conns, a.form_timeout) for x in batch]
        finally:
            # How far round 0 got, and what it cost the agents (on a cluster: N machines' CPU).
            r["form_agents_cpu_s"] = sum(proc_cpu_s(p.pid) for p, _, _ in self.procs) - agents_cpu
            r["form_service_cpu_s"] = threads_cpu_s(spid) - cpu1
            st = self.state()
            if st is not None:
                r["round0_participants"] = len(st.participants)
                r["round0_complete"] = bool(st.complete)
        r["form_s"] = max(x[1] for x in formed) - go_at
        r["form_median_s"] = sorted(x[1] for x in formed)[len(formed) // 2] - go_at
        ranks = sorted(x[2] for x in formed)
        if ranks != list(range(a.nodes)) or {x[3] for x in formed} != {a.nodes} or {x[4] for x in formed} != {0}:
            self.fail(f"round 0: ranks/world sizes/rounds wrong: worlds {sorted({x[3] for x in formed})}, "
                      f"rounds {sorted({x[4] for x in formed})}, {len(set(ranks))} distinct ranks of {a.nodes}")

        # The steady window.
        time.sleep(1.0)
        for c in conns:
            c.send(("snap",))
        snap0 = self.collect("snap", conns, 60)
        s_cpu0, (lo0, pk0), t0 = threads_cpu_s(spid), loopback(), time.monotonic()
        agents_cpu0 = sum(proc_cpu_s(p.pid) for p, _, _ in self.procs)
        time.sleep(a.steady_s)
        s_cpu1, (lo1, pk1), t1 = threads_cpu_s(spid), loopback(), time.monotonic()
        agents_cpu1 = sum(proc_cpu_s(p.pid) for p, _, _ in self.procs)
        for c in conns:
            c.send(("snap",))
        snap1 = self.collect("snap", conns, 60)
        wall = t1 - t0
        d = {k: sum(s1[k] - s0[k] for s0, s1 in zip(snap0, snap1)) for k in ("gets", "sets", "failed_sets", "bytes_in")}
        state_b64 = self.observer.get(STATE_KEY)
        beats = a.nodes * wall / KEEP_ALIVE_S
        r.update(steady_wall_s=wall, service_cpu_share=(s_cpu1 - s_cpu0) / wall,
                 service_us_per_heartbeat=(s_cpu1 - s_cpu0) / beats * 1e6,
                 lo_Bps=(lo1 - lo0) / wall, lo_packets_per_s=(pk1 - pk0) / wall, bytes_per_heartbeat=(lo1 - lo0) / beats,
                 clients_cpu_share=(agents_cpu1 - agents_cpu0) / wall, state_bytes=len(state_b64),
                 store_gets_per_s=d["gets"] / wall, store_sets_per_s=d["sets"] / wall,
                 store_failed_sets_per_s=d["failed_sets"] / wall, store_get_payload_Bps=d["bytes_in"] / wall)
        # Failed keep-alives (a compare-and-set of the heartbeat that lost to others for 5 s) and
        # num_nodes_waiting() > 0 (a torchrun agent would restart its workers) are counted, not
        # fatal: they are how this rendezvous degrades under load.
        for k in ("waiting_seen", "keepalive_failures"):
            r[f"steady_{k}"] = sum(s1[k] - s0[k] for s0, s1 in zip(snap0, snap1))
        r["keepalive_failures_to_steady_end"] = sum(s[k] for s in snap1 for k in ("keepalive_failures",))

        # The death, at a random point of the victim's keep-alive cycle.
        time.sleep(rng.uniform(0, KEEP_ALIVE_S))
        dead_proc = self.procs[0][0]
        cpu3 = threads_cpu_s(spid)
        death = time.monotonic()
        os.kill(dead_proc.pid, signal.SIGKILL)
        survivors = conns[1:]
        for c in survivors:
            c.send(("fail",))
        dead_proc.join()
        marks = {}
        watching = threading.Event()

        def observe():  # when the state shows round 1 open and its last call started
            while not watching.is_set():
                st = self.state()
                now = time.monotonic()
                if st is not None and st.round >= 1:
                    marks.setdefault("round1_open", now)
                    if len(st.participants) >= a.nodes - 1:
                        marks.setdefault("last_call_start", now)
                watching.wait(0.2)

        obs = threading.Thread(target=observe, daemon=True)
        obs.start()
        try:
            reformed = [x for batch in self.collect("reformed", survivors, a.reform_timeout) for x in batch]
        finally:
            watching.set()
            obs.join()
            r.update({f"{k}_s": v - death for k, v in marks.items()})
        cpu4 = threads_cpu_s(spid)
        r["reform_s"] = max(x[1] for x in reformed) - death
        r["noticed_s"] = max(x[5] for x in reformed) - death
        r["reform_service_cpu_s"] = cpu4 - cpu3
        st = self.state()
        if st is not None:
            r["round1_participants"] = len(st.participants)
        if "last_call_start" in marks:
            r["reform_after_last_call_s"] = max(x[1] for x in reformed) - marks["last_call_start"] - LAST_CALL_S
        ranks = sorted(x[2] for x in reformed)
        if ranks != list(range(a.nodes - 1)) or {x[3] for x in reformed} != {a.nodes - 1} or \
                {x[4] for x in reformed} != {1}:
            self.fail(f"round 1: ranks/world sizes/rounds wrong: worlds {sorted({x[3] for x in reformed})}, "
                      f"rounds {sorted({x[4] for x in reformed})}, {len(set(ranks))} distinct ranks of {a.nodes - 1}")

    def teardown(self):
        for p, c, _ in self.procs:
            if p.is_alive():
                try:
                    c.send(("stop",))
                except OSError:
                    pass
        for p, _, _ in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        if self.service is not None:
            self.service.stdin.close()
            try:
                self.service.wait(10)
            except subprocess.TimeoutExpired:
                self.service.kill()
                self.service.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--steady-s", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nodes-per-proc", type=int, default=128, help="agents per forked process (threads)")
    p.add_argument("--monitor-interval", type=float, default=0.1, help="torchrun's --monitor-interval (default 0.1)")
    p.add_argument("--form-timeout", type=float, default=300)
    p.add_argument("--reform-timeout", type=float, default=300)
    a = p.parse_args()
    if a.serve:
        serve()
        return 0
    if a.nodes < 2:
        raise SystemExit("--nodes must be >= 2 (min_nodes is N-1)")
    if os.environ.get("C10D_BENCH_HOSTS") is None and os.geteuid() == 0 and shutil.which("unshare"):
        hosts = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"c10d-rendezvous-scale-hosts-{os.getpid()}")
        with open("/etc/hosts") as f, open(hosts, "w") as out:
            out.write(f.read().rstrip("\n") + "\n::ffff:127.0.0.1 localhost\n")
        os.environ["C10D_BENCH_HOSTS"] = hosts
        os.execvp("unshare", ["unshare", "-m", "sh", "-c", 'mount --bind "$C10D_BENCH_HOSTS" /etc/hosts && exec "$@"',
                              "sh", sys.executable, os.path.abspath(__file__)] + sys.argv[1:])
    run = Run(a)
    run.result["local_reverse_dns"] = os.environ.get("C10D_BENCH_HOSTS") is not None
    if run.result["local_reverse_dns"]:
        os.unlink(os.environ["C10D_BENCH_HOSTS"])  # bind-mounted already
    code = 0
    try:
        run.run()
    except Exception as e:  # noqa: BLE001 -- every failure is reported in the result line
        run.result.setdefault("failed", f"{type(e).__name__}: {e}")
        code = 1
    finally:
        run.teardown()
    print("RDZV_RESULT " + json.dumps(run.result), flush=True)
    if code:
        print(f"c10d_rendezvous_scale: N={a.nodes}: {run.result['failed']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
