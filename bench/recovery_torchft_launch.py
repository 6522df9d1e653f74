"""Starts the torchft peer of bench/recovery_bench.py as torchft's own examples run it: a Lighthouse
(torchft_lighthouse, min_replicas 1) and one torchrun per replica group (--nproc_per_node 1, so a
group's dead worker is restarted by its torchrun and heals from the other group), all on this host,
their output on this process's stdout. Exits when both torchruns have, with the worse status;
SIGTERM/SIGINT stop the torchruns (which stop their workers) and the Lighthouse.

  recovery_torchft_launch.py --python VENV/bin/python [--groups 2] [--monitor-interval 0.02]
      [--max-restarts 3] [--heartbeat-timeout-ms 200] [--quorum-tick-ms 10] [--join-timeout-ms 1000]
      -- WORKER ARGS...          (the arguments of bench/recovery_torchft_worker.py)
"""
import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import procfs  # noqa: E402  tools/procfs.py

HERE = os.path.dirname(os.path.abspath(__file__))


def say(line: str) -> None:
    sys.stdout.write(f"[{time.time():.6f}] torchft launch: {line}\n")
    sys.stdout.flush()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python", required=True, help="the interpreter with PyPI torch and torchft (.venv-hf-pypi)")
    p.add_argument("--groups", type=int, default=2)
    p.add_argument("--monitor-interval", default="0.02")
    p.add_argument("--max-restarts", type=int, default=3)
    p.add_argument("--heartbeat-timeout-ms", type=int, default=200)
    p.add_argument("--quorum-tick-ms", type=int, default=10)
    p.add_argument("--join-timeout-ms", type=int, default=1000)
    p.add_argument("worker_args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    worker_args = a.worker_args[1:] if a.worker_args[:1] == ["--"] else a.worker_args
    lighthouse_bin = os.path.join(os.path.dirname(a.python), "torchft_lighthouse")
    if not os.access(lighthouse_bin, os.X_OK):
        print(f"recovery_torchft_launch: {lighthouse_bin} is missing: run bench/setup_torchft.sh", file=sys.stderr)
        return 2

    port = procfs.free_port()
    lighthouse = subprocess.Popen([lighthouse_bin, "--min_replicas", "1", "--bind", f"127.0.0.1:{port}",
                                   "--heartbeat_timeout_ms", str(a.heartbeat_timeout_ms),
                                   "--quorum_tick_ms", str(a.quorum_tick_ms),
                                   "--join_timeout_ms", str(a.join_timeout_ms)],
                                  stdin=subprocess.DEVNULL, env=dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn")))
    say(f"lighthouse pid {lighthouse.pid} on 127.0.0.1:{port}")
    agents = []
    for g in range(a.groups):
        env = dict(os.environ, REPLICA_GROUP_ID=str(g), NUM_REPLICA_GROUPS=str(a.groups),
                   TORCHFT_LIGHTHOUSE=f"http://127.0.0.1:{port}", PYTHONUNBUFFERED="1")
        env.setdefault("LOGLEVEL", "INFO")
        # torchft's Rust side logs several INFO lines per step and replica (quorum, should_commit):
        # thousands of lines a second here. Warnings and errors only.
        env.setdefault("RUST_LOG", "warn")
        # --redirects/--tee 9:0: as bench/recovery_bench.py's torchrun systems (a mapping for a local
        # rank that does not exist: workers inherit the agent's stdout)
        cmd = [a.python, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--max_restarts", str(a.max_restarts),
               "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{procfs.free_port()}",
               "--monitor_interval", a.monitor_interval, "--redirects", "9:0", "--tee", "9:0",
               os.path.join(HERE, "recovery_torchft_worker.py")] + worker_args
        agents.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL))
        say(f"replica group {g}: torchrun pid {agents[-1].pid}")

    stopping = []

    def stop(signum, _frame):
        stopping.append(signum)
        for agent in agents:
            if agent.poll() is None:
                agent.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rcs = [agent.wait() for agent in agents]
    lighthouse.terminate()
    try:
        lighthouse.wait(10)
    except subprocess.TimeoutExpired:
        lighthouse.kill()
        lighthouse.wait()
    say(f"torchruns exited with {rcs}")
    if stopping:
        return 128 + stopping[0]
    return max(abs(rc) for rc in rcs)


if __name__ == "__main__":
    sys.exit(main())
