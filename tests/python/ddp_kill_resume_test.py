#!/usr/bin/env python3
"""`tenax run` as a drop-in for torchrun, with a real PyTorch peer (issue 16, points 1 and 3).

ddp_checkpoint.py, a plain DDP script (Gloo, init_method="env://"), runs under `tenax run` with
two workers four times:
  reference   uninterrupted, started as `-m ddp_checkpoint` (torchrun's module form);
  kill        Tenax's spellings (`-- python3 -u SCRIPT`): rank 1 stops itself before step 23 in
              the first generation and this test SIGKILLs it by pid; the agent restarts both
              workers, which resume from the step-20 checkpoint and finish;
  kill-torchrun  the same with torchrun's spellings only (--nproc_per_node=2 --max_restarts=3
              --monitor_interval=0.02 --rdzv_id=... --standalone SCRIPT.py);
  kill-two-nodes  two agents on this host (--nnodes=2, one worker each): MASTER_PORT travels from
              node 0's agent through Tenax's rendezvous to node 1's worker.
Each killed run must end with parameters equal, bit for bit, to the reference's, after a
restart that resumed from a checkpoint (not from scratch, which would be equal too), and every
generation's workers must have had torchrun's environment with one MASTER_PORT that is not
Tenax's rendezvous port.

tools/bootstrap.sh installs Debian's python3-torch; without `import torch` the test fails (exit 1)
with a message saying so: it is never skipped.

  python3 ddp_kill_resume_test.py --tenax build/launcher/tenax --out /tmp/ddp
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "ddp_checkpoint.py")
PYTHON_PACKAGE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
STEPS, SAVE_EVERY, STOP_AT = 40, 5, 23
RESUME_STEP = (STOP_AT // SAVE_EVERY) * SAVE_EVERY  # the newest checkpoint before the kill
# How long a stage may take before the test gives up: generous, for a loaded 2-core machine; no
# assertion depends on it.
STAGE_TIMEOUT = 240
TORCHRUN_ENV = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
                "TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING"]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAILED: " + message, flush=True)
    return condition


def descendants(root):
    """(pid, state) of every process below `root`, from /proc."""
    parent_of, state_of = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rfind(")") + 2:].split()
        parent_of[int(name)] = int(fields[1])
        state_of[int(name)] = fields[0]
    out, pending = [], [root]
    while pending:
        p = pending.pop()
        for child, parent in parent_of.items():
            if parent == p:
                out.append((child, state_of[child]))
                pending.append(child)
    return out


def wait_for_stopped_worker(agents, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(agent.poll() is not None for agent in agents):
            return None
        for agent in agents:
            for pid, state in descendants(agent.pid):
                if state == "T":
                    return pid
        time.sleep(0.05)
    return None


def start(case_dir, tenax_args, program, log_name="tenax.log"):
    os.makedirs(case_dir, exist_ok=True)
    env = dict(os.environ)
    # Gloo on loopback: the test is one host, whatever its name resolves to.
    env["GLOO_SOCKET_IFNAME"] = "lo"
    # The interpreter running this test is the one the agent finds as python3.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    # This directory (ddp_checkpoint as a module) and Tenax's Python helper (python/tenax).
    env["PYTHONPATH"] = os.pathsep.join([HERE, PYTHON_PACKAGE, env.get("PYTHONPATH", "")])
    script_args = ["--out", os.path.join(case_dir, "out"), "--steps", str(STEPS), "--save-every", str(SAVE_EVERY)]
    os.makedirs(os.path.join(case_dir, "out"), exist_ok=True)
    command = [ARGS.tenax, "run"] + tenax_args + program + script_args
    print("$ (cd %s && %s)" % (case_dir, " ".join(command)), flush=True)
    log = open(os.path.join(case_dir, log_name), "w")
    return subprocess.Popen(command, cwd=case_dir, env=env, stdout=log, stderr=subprocess.STDOUT), log


def finish(name, agent, log):
    try:
        code = agent.wait(timeout=STAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        agent.kill()
        code = agent.wait()
        check(False, "%s: tenax run did not finish within %d s" % (name, STAGE_TIMEOUT))
    log.close()
    text = open(log.name).read()
    if not check(code == 0, "%s: tenax run exited %s, not 0" % (name, code)):
        print(text[-6000:], flush=True)
    return text


def summary(case_dir, node=None):
    """agent.json of the single-node agent, or of node `node` (run directory run-%n)."""
    run_dir = "tenax-run" if node is None else "run-%d" % node
    with open(os.path.join(case_dir, run_dir, "agent.json")) as f:
        return json.load(f)


def check_environment(name, case_dir, generations, run_id=None, nodes=1):
    """Every worker of every generation had torchrun's variables, with one MASTER_PORT per
    generation (on every node: node rank 0's) that is not Tenax's rendezvous port and is the one
    each agent recorded. `nodes` 2: one worker per node, node i holding rank i."""
    out = os.path.join(case_dir, "out")
    ports = []
    for g in range(generations):
        seen = []
        for r in range(2):
            path = os.path.join(out, "env-r%d-g%d.json" % (r, g))
            if not check(os.path.exists(path), "%s: rank %d of generation %d left no %s" % (name, r, g, path)):
                return
            with open(path) as f:
                seen.append(json.load(f))
        for r, env in enumerate(seen):
            where = "%s: rank %d, restart %d" % (name, r, g)
            missing = [n for n in TORCHRUN_ENV if env.get(n) is None]
            check(not missing, "%s: torchrun variables missing: %s" % (where, missing))
            local, local_world, group = (0, 1, r) if nodes == 2 else (r, 2, 0)
            expected = {"RANK": str(r), "LOCAL_RANK": str(local), "WORLD_SIZE": "2",
                        "LOCAL_WORLD_SIZE": str(local_world), "GROUP_RANK": str(group),
                        "GROUP_WORLD_SIZE": str(nodes), "ROLE_RANK": str(r), "ROLE_WORLD_SIZE": "2",
                        "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1", "TORCHELASTIC_RESTART_COUNT": str(g),
                        "TORCHELASTIC_MAX_RESTARTS": "3", "TORCHELASTIC_USE_AGENT_STORE": "False",
                        # torchrun's default, unless the user set it
                        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")}
            if run_id is not None:
                expected["TORCHELASTIC_RUN_ID"] = run_id
            for key, value in expected.items():
                check(env.get(key) == value, "%s: %s=%r, expected %r" % (where, key, env.get(key), value))
            rdzv_port = (env.get("TENAX_RDZV_ENDPOINT") or "").rsplit(":", 1)[-1]
            check(env.get("MASTER_PORT") != rdzv_port,
                  "%s: MASTER_PORT %s is Tenax's rendezvous port (%s)" % (where, env.get("MASTER_PORT"),
                                                                         env.get("TENAX_RDZV_ENDPOINT")))
        check(seen[0]["MASTER_PORT"] == seen[1]["MASTER_PORT"],
              "%s: generation %d: the ranks got different MASTER_PORTs %s, %s"
              % (name, g, seen[0]["MASTER_PORT"], seen[1]["MASTER_PORT"]))
        ports.append(seen[0]["MASTER_PORT"])
    for node in ([None] if nodes == 1 else range(nodes)):
        agent_ports = [str(h.get("master_port")) for h in summary(case_dir, node)["history"]]
        check(agent_ports == ports, "%s: node %s's agent.json has master ports %s, the workers had %s"
              % (name, node, agent_ports, ports))


def final_parameters(case_dir):
    import torch
    return torch.load(os.path.join(case_dir, "out", "final.pt"))


def check_equal_parameters(name, case_dir, reference):
    import torch
    path = os.path.join(case_dir, "out", "final.pt")
    if not check(os.path.exists(path), "%s: no final.pt: the job did not finish" % name):
        return
    got = final_parameters(case_dir)
    check(sorted(got) == sorted(reference), "%s: parameter names differ: %s" % (name, sorted(got)))
    for key in reference:
        if key in got:
            check(torch.equal(got[key], reference[key]),
                  "%s: %s differs from the uninterrupted run's (max abs diff %g)"
                  % (name, key, (got[key] - reference[key]).abs().max().item()))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_killed(name, tenax_args, program, run_id=None, nodes=1):
    """`nodes` 1: one agent with tenax_args; 2: two agents on this host (node ids 0 and 1, one
    worker each, node 0 hosting the rendezvous), each with tenax_args plus its own."""
    case_dir = os.path.join(ARGS.out, name)
    began = time.monotonic()
    program = program + ["--stop-at-step", str(STOP_AT), "--stop-rank", "1"]
    if nodes == 1:
        agents = [start(case_dir, tenax_args, program)]
    else:
        endpoint = "127.0.0.1:%d" % free_port()
        agents = [start(case_dir, tenax_args + ["--node-id", str(node), "--rdzv-endpoint", endpoint,
                                                 "--node-host", "127.0.0.1", "--run-dir", "run-%n"],
                        program, "tenax-%d.log" % node) for node in range(nodes)]
    stopped = wait_for_stopped_worker([agent for agent, _ in agents], STAGE_TIMEOUT)
    if check(stopped is not None, "%s: no worker stopped itself before step %d" % (name, STOP_AT)):
        os.kill(stopped, signal.SIGKILL)
        print("%s: SIGKILLed worker pid %d (rank 1, before step %d)" % (name, stopped, STOP_AT), flush=True)
    texts = [finish("%s (node %d)" % (name, i), agent, log) for i, (agent, log) in enumerate(agents)]
    summaries = [summary(case_dir)] if nodes == 1 else [summary(case_dir, node) for node in range(nodes)]
    for node, s in enumerate(summaries):
        check(s["generations"] == 2 and s["restarts"] == 1, "%s: node %d: %d generation(s), %d restart(s); "
              "expected 2 and 1" % (name, node, s["generations"], s["restarts"]))
    killed = [w for s in summaries for w in (s["history"][0]["workers"] if s["history"] else [])
              if w.get("signal") == "SIGKILL" and w.get("pid") == stopped]
    check(killed, "%s: no agent recorded the SIGKILL of pid %s in generation 0" % (name, stopped))
    for r in range(2):
        path = os.path.join(case_dir, "out", "start-r%d-g1.txt" % r)
        if check(os.path.exists(path), "%s: rank %d of the restart did not start training" % (name, r)):
            with open(path) as f:
                resumed = int(f.read())
            check(resumed == RESUME_STEP, "%s: rank %d resumed at step %d, expected %d (the newest checkpoint)"
                  % (name, r, resumed, RESUME_STEP))
    check_environment(name, case_dir, 2, run_id, nodes)
    check_equal_parameters(name, case_dir, REFERENCE)
    print("%s: %.1f s (the restart resumed at step %d); log tail:\n%s"
          % (name, time.monotonic() - began, RESUME_STEP, "\n".join(texts[0].splitlines()[-3:])), flush=True)


def require_torch():
    """torch, imported; or None after saying why. CMake may have found another interpreter first
    (a pyenv or venv python3 in PATH): then this re-executes the test with the system's, where
    Debian's python3-torch lives, if that one has torch."""
    try:
        import torch
        return torch
    except ImportError as e:
        for other in ("/usr/bin/python3",):
            if os.path.realpath(other) != os.path.realpath(sys.executable) and os.access(other, os.X_OK) and \
                    subprocess.call([other, "-c", "import torch"], stderr=subprocess.DEVNULL) == 0:
                print("no torch for %s; running with %s" % (sys.executable, other), flush=True)
                os.execv(other, [other] + sys.argv)
        print("FAILED: no PyTorch for %s (%s); run tools/bootstrap.sh (it installs Debian's python3-torch)"
              % (sys.executable, e), flush=True)
        return None


def main():
    global ARGS, REFERENCE
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tenax", required=True, help="the tenax binary")
    p.add_argument("--out", required=True, help="scratch directory (emptied first)")
    ARGS = p.parse_args()
    ARGS.tenax = os.path.abspath(ARGS.tenax)  # the agents run in their case directories
    torch = require_torch()
    if torch is None:
        return 1
    print("torch %s from %s" % (torch.__version__, os.path.dirname(torch.__file__)), flush=True)
    shutil.rmtree(ARGS.out, ignore_errors=True)
    os.makedirs(ARGS.out)

    began = time.monotonic()
    name = "reference"
    agent, log = start(os.path.join(ARGS.out, name), ["--nproc-per-node", "2"], ["-m", "ddp_checkpoint"])
    finish(name, agent, log)
    check_environment(name, os.path.join(ARGS.out, name), 1)
    if not check(os.path.exists(os.path.join(ARGS.out, name, "out", "final.pt")), "reference: no final.pt"):
        return 1
    REFERENCE = final_parameters(os.path.join(ARGS.out, name))
    print("reference: %.1f s" % (time.monotonic() - began), flush=True)

    run_killed("kill", ["--nproc-per-node", "2", "--max-restarts", "3", "--"], [sys.executable, "-u", SCRIPT])
    run_killed("kill-torchrun",
               ["--nproc_per_node=2", "--max_restarts=3", "--monitor_interval=0.02", "--rdzv_id=ddp-test",
                "--standalone"],
               [SCRIPT], run_id="ddp-test")
    # Two agents ("nodes") with one worker each: MASTER_PORT comes from node 0's agent through
    # the rendezvous, and both workers must get it for init_process_group to meet.
    run_killed("kill-two-nodes", ["--nproc_per_node=1", "--nnodes=2", "--max_restarts=3", "--heartbeat-interval",
                                  "100", "--join-timeout", "60"], [SCRIPT], nodes=2)

    if failures:
        print("%d check(s) failed" % len(failures), flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
