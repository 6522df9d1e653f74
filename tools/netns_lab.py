#!/usr/bin/env python3
"""A throw-away network lab of Linux network namespaces, for the network-fault tests
(tests/netns/; Python 3 standard library only; needs root, `ip` (iproute2), `unshare` and,
for loss and partitions, `iptables`).

Topology, made and removed by the lab itself (names carry the driver's pid and start time, so
parallel runs never collide; a run killed before its cleanup is cleaned up by the next one):

    tenax-lab-<id>-sw      the "switch": a bridge br0 with one port n<i> per node
    tenax-lab-<id>-n<i>    node i: lo, and eth0 = 10.77.0.<i+1>/24 (a private range that
                           exists only inside these namespaces); hostname tenax-lab-<id>-n<i>
                           (a UTS namespace per agent), resolvable from every node through
                           /etc/netns/<ns>/hosts, which `ip netns exec` binds over /etc/hosts

Node i's link is either a veth pair (eth0 <-> n<i>) or, with a delay, a *delay line*: two TAP
devices (eth0 in the node, n<i> on the bridge) joined by a userspace forwarder (this script's
`delay-line` command) that holds every Ethernet frame leaving the node for EGRESS ms and every
frame entering it for INGRESS ms, in order, before passing it on. `netem delay 200ms` on the
node's interface is EGRESS 200, INGRESS 0. Why userspace: this kernel has no netem
(CONFIG_NET_SCH_NETEM is not set; `tc qdisc add ... netem` says "Specified qdisc kind is
unknown"), and tbf/htb shape rate, not latency. The delay line is a real link in the data
path: every packet of every protocol (ZeroMQ, Gloo, TCP handshakes, ACKs, ARP) crosses it, and
the lab's probe measures it.

Faults (methods of Lab):
    cut(i) / restore(i)     the switch port of node i down / up (an unplugged cable)
    loss(i, p) / no_loss(i) iptables `statistic --mode random` DROP of a fraction p of the
                            packets entering and leaving node i's eth0 (in node i's namespace)
    partition(i, j) / heal(i, j)  iptables DROP of every packet between nodes i and j, in both
                            nodes (silent: like a failed switch path); each node still reaches
                            the shared file system, which is the host's own file system
    block_port(i, j, port) / unblock_port(i, j, port)  iptables DROP, in node i, of its TCP
                            traffic with port `port` of node j only (one service firewalled)
The host's own network and firewall are never touched: every command runs in a namespace of
the lab (`ip -n NS`, `ip netns exec NS`), and the only addresses are 10.77.0.0/24 inside them.

Commands (the lab is normally driven from Python, see tests/netns/netns_test.py):
    netns_lab.py cleanup                    remove every stale tenax-lab-* namespace
    netns_lab.py delay-line ...             the forwarder (started by the lab)
    netns_lab.py echo-server / echo-probe   the UDP probe (run inside namespaces by the lab)
"""

import argparse
import collections
import ctypes
import fcntl
import json
import os
import re
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procfs  # noqa: E402  (tools/procfs.py, beside this file)

PREFIX = "tenax-lab-"
SUBNET = "10.77.0"
NETNS_DIR = "/run/netns"
ETC_NETNS = "/etc/netns"
HERE = os.path.abspath(__file__)

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


class LabError(RuntimeError):
    pass


def run(argv, check=True, quiet=False):
    """Runs argv; raises LabError with its output when it fails and `check`."""
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    if check and r.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` exited {r.returncode}: {r.stdout.strip()}")
    if not quiet and r.returncode != 0:
        print(f"netns_lab: `{' '.join(argv)}` exited {r.returncode}: {r.stdout.strip()}", file=sys.stderr)
    return r


def missing_requirements(need_iptables=True):
    """Why this host cannot run the lab (a list of sentences; empty when it can)."""
    why = []
    if os.geteuid() != 0:
        why.append("the network-fault tests need root (they create network namespaces, veth pairs, "
                   "a bridge and iptables rules inside them); run them as root, e.g. `sudo ctest -L netns`")
    tools = ["ip", "unshare"] + (["iptables"] if need_iptables else [])
    for tool in tools:
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]):
            pkg = {"ip": "iproute2", "unshare": "util-linux", "iptables": "iptables"}[tool]
            why.append(f"`{tool}` is not installed (Debian package {pkg}; tools/bootstrap.sh installs it)")
    if not os.path.exists("/dev/net/tun"):
        why.append("/dev/net/tun is missing: the delay line needs TAP devices (modprobe tun)")
    return why


# --- namespaces and their processes ------------------------------------------------------------

def netns_inode(name):
    try:
        return os.stat(os.path.join(NETNS_DIR, name)).st_ino
    except OSError:
        return None


def pids_in_netns(inodes):
    """Pids of the processes whose network namespace is one of `inodes`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ino = os.stat(f"/proc/{entry}/ns/net").st_ino
        except OSError:
            continue
        if ino in inodes:
            out.append(int(entry))
    return out


def kill_processes_in(names):
    """SIGKILLs every process living in one of the namespaces `names` and waits (bounded) for
    them to go: a namespace with a process left in it would outlive `ip netns del`."""
    inodes = {i for i in (netns_inode(n) for n in names) if i is not None}
    if not inodes:
        return
    me = os.getpid()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = [p for p in pids_in_netns(inodes) if p != me]
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


children = procfs.children  # direct children of a pid (tools/procfs.py)


def list_lab_namespaces():
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(PREFIX))
    except OSError:
        return []


def start_time(pid):
    """The start time of process `pid` (clock ticks after boot), or None if it is gone: with the
    pid it names one process for good, where a pid alone may be reused."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2:].split()[19])


def driver_alive(pid, started):
    return start_time(pid) == started


def remove_namespaces(names):
    kill_processes_in(names)
    for n in names:
        run(["ip", "netns", "del", n], check=False, quiet=True)
        etc = os.path.join(ETC_NETNS, n)
        if os.path.isdir(etc):
            for f in os.listdir(etc):
                os.unlink(os.path.join(etc, f))
            os.rmdir(etc)


def cleanup_stale(log=print):
    """Removes the namespaces (and /etc/netns entries) of earlier labs whose driver is gone."""
    stale = {}
    tag = re.compile(re.escape(PREFIX) + r"(\d+)-(\d+)-")
    for n in list_lab_namespaces():
        m = tag.match(n)
        if m and not driver_alive(int(m.group(1)), int(m.group(2))):
            stale.setdefault(int(m.group(1)), []).append(n)
    for pid, names in sorted(stale.items()):
        log(f"netns_lab: removing {len(names)} stale namespace(s) of a lab whose driver (pid {pid}) is gone: "
            + ", ".join(names))
        remove_namespaces(names)
    if os.path.isdir(ETC_NETNS):
        for n in os.listdir(ETC_NETNS):
            m = tag.match(n)
            if m and not driver_alive(int(m.group(1)), int(m.group(2))) and n not in list_lab_namespaces():
                remove_namespaces([n])
    return sum(len(v) for v in stale.values())


# --- the lab -----------------------------------------------------------------------------------

class Lab:
    """N node namespaces on one bridge. Use as a context manager: everything it made is removed
    on exit, whatever happened (and a lab killed before that is removed by the next one)."""

    def __init__(self, nodes, delays_ms=None, log=print):
        """`delays_ms`: {node: (egress ms, ingress ms)} for the nodes whose link is a delay line."""
        self.n = nodes
        # The driver's pid and start time: unique, and a later run can tell whether it still runs.
        self.tag = f"{PREFIX}{os.getpid()}-{start_time(os.getpid())}"
        self.switch = f"{self.tag}-sw"
        self.delays_ms = dict(delays_ms or {})
        self.log = log
        self.delay_lines = {}  # node -> (Popen, stats path)
        self.made = []

    # names and addresses
    def ns(self, i):
        return f"{self.tag}-n{i}"

    def host(self, i):
        return self.ns(i)

    def addr(self, i):
        return f"{SUBNET}.{i + 1}"

    def port(self, i):
        return f"n{i}"

    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def _add_ns(self, name):
        run(["ip", "netns", "add", name])
        self.made.append(name)
        run(["ip", "-n", name, "link", "set", "lo", "up"])

    def up(self):
        cleanup_stale(self.log)
        self._add_ns(self.switch)
        run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        hosts = "127.0.0.1 localhost\n" + "".join(f"{self.addr(i)} {self.host(i)}\n" for i in range(self.n))
        for i in range(self.n):
            ns = self.ns(i)
            self._add_ns(ns)
            if i in self.delays_ms:
                self._start_delay_line(i, self.delays_ms[i])
            else:
                run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", self.port(i),
                     "netns", self.switch])
            run(["ip", "-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            run(["ip", "-n", self.switch, "link", "set", self.port(i), "master", "br0"])
            run(["ip", "-n", self.switch, "link", "set", self.port(i), "up"])
            etc = os.path.join(ETC_NETNS, ns)
            os.makedirs(etc, exist_ok=True)
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write(hosts)

    def _start_delay_line(self, i, delay_ms):
        egress, ingress = delay_ms
        stats = f"/tmp/{self.ns(i)}-delay-line.json"
        proc = subprocess.Popen([sys.executable, HERE, "delay-line", "--node-ns", self.ns(i), "--switch-ns",
                                 self.switch, "--switch-if", self.port(i), "--egress-ms", str(egress),
                                 "--ingress-ms", str(ingress), "--stats", stats],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        self.delay_lines[i] = (proc, stats)
        line = proc.stdout.readline().strip()
        if line != "ready":
            proc.kill()
            proc.wait()
            raise LabError(f"the delay line of node {i} did not start (said {line!r})")

    def down(self):
        """Removes everything: the processes in the lab's namespaces (agents, workers, probes),
        the delay lines, the namespaces and their /etc/netns entries."""
        for i, (proc, _stats) in self.delay_lines.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        remove_namespaces(list(reversed(self.made)))
        self.made = []

    def delay_line_stats(self, i):
        try:
            with open(self.delay_lines[i][1]) as f:
                return json.load(f)
        except (KeyError, OSError, ValueError):
            return None

    # processes in a node
    def argv_in(self, i, argv):
        """argv run as node i: its network namespace, and its own hostname (UTS namespace)."""
        return ["ip", "netns", "exec", self.ns(i), "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.host(i)] + list(argv)

    # faults
    def cut(self, i):
        run(["ip", "-n", self.switch, "link", "set", self.port(i), "down"])

    def restore(self, i):
        run(["ip", "-n", self.switch, "link", "set", self.port(i), "up"])

    def _iptables(self, i, *rule):
        run(["ip", "netns", "exec", self.ns(i), "iptables", "-w", "5"] + list(rule))

    def loss(self, i, fraction):
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self._iptables(i, "-A", chain, flag, "eth0", "-m", "statistic", "--mode", "random", "--probability",
                           f"{fraction:g}", "-m", "comment", "--comment", "tenax-lab-loss", "-j", "DROP")

    def no_loss(self, i):
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self._iptables(i, "-D", chain, flag, "eth0", "-m", "statistic", "--mode", "random", "--probability",
                           self._loss_of(i, chain), "-m", "comment", "--comment", "tenax-lab-loss", "-j", "DROP")

    def _loss_of(self, i, chain):
        out = run(["ip", "netns", "exec", self.ns(i), "iptables", "-w", "5", "-S", chain]).stdout
        m = re.search(r"--probability (\S+)", out)
        if not m:
            raise LabError(f"node {i} has no loss rule in {chain}")
        return m.group(1)

    def partition(self, i, j):
        for a, b in ((i, j), (j, i)):
            self._iptables(a, "-I", "INPUT", "-s", self.addr(b), "-j", "DROP")
            self._iptables(a, "-I", "OUTPUT", "-d", self.addr(b), "-j", "DROP")

    def heal(self, i, j):
        for a, b in ((i, j), (j, i)):
            self._iptables(a, "-D", "INPUT", "-s", self.addr(b), "-j", "DROP")
            self._iptables(a, "-D", "OUTPUT", "-d", self.addr(b), "-j", "DROP")

    def block_port(self, i, j, port):
        """Drops, in node i, the TCP traffic between node i and port `port` of node j (a
        firewall on one service; everything else between them still flows)."""
        self._iptables(i, "-I", "OUTPUT", "-d", self.addr(j), "-p", "tcp", "--dport", str(port), "-j", "DROP")
        self._iptables(i, "-I", "INPUT", "-s", self.addr(j), "-p", "tcp", "--sport", str(port), "-j", "DROP")

    def unblock_port(self, i, j, port):
        self._iptables(i, "-D", "OUTPUT", "-d", self.addr(j), "-p", "tcp", "--dport", str(port), "-j", "DROP")
        self._iptables(i, "-D", "INPUT", "-s", self.addr(j), "-p", "tcp", "--sport", str(port), "-j", "DROP")

    def packet_counts(self, i):
        """iptables -L -v -x of node i's INPUT and OUTPUT (how many packets its rules dropped)."""
        return run(["ip", "netns", "exec", self.ns(i), "iptables", "-w", "5", "-L", "-v", "-x", "-n"],
                   check=False).stdout

    # the probe
    def probe(self, src, dst, count=50, interval_ms=5, wait_ms=1500, port=47001):
        """UDP echo from node src to node dst: {"sent", "received", "rtt_ms": [min, median, max]}."""
        server = subprocess.Popen(self.argv_in(dst, [sys.executable, HERE, "echo-server", "--bind",
                                                     f"{self.addr(dst)}:{port}"]),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        try:
            if server.stdout.readline().strip() != "ready":
                raise LabError(f"the echo server in node {dst} did not start")
            r = run(self.argv_in(src, [sys.executable, HERE, "echo-probe", "--to", f"{self.addr(dst)}:{port}",
                                       "--count", str(count), "--interval-ms", str(interval_ms),
                                       "--wait-ms", str(wait_ms)]))
            return json.loads(r.stdout.strip().splitlines()[-1])
        finally:
            server.kill()
            server.wait()


# --- the delay line ----------------------------------------------------------------------------

def open_tap_in(netns_name, ifname):
    """A TAP device named `ifname`, created in network namespace `netns_name`; returns its fd.
    The fd keeps working after this process moves to another namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(os.path.join(NETNS_DIR, netns_name), os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns_name}")
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", ifname.encode(), IFF_TAP | IFF_NO_PI))
        return fd
    finally:
        if libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back home")
        os.close(home)
        os.close(target)


def delay_line(args):
    """Forwards Ethernet frames between eth0 in the node and a port on the bridge, those from
    the node --egress-ms late, those to it --ingress-ms late, each direction in order. Writes
    its counters to --stats on exit."""
    # Dies with the lab's driver even when that is SIGKILLed: a delay line left running would
    # spin on the TAP devices of namespaces that are gone.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:
        return 1
    node_fd = open_tap_in(args.node_ns, "eth0")
    switch_fd = open_tap_in(args.switch_ns, args.switch_if)
    other = {node_fd: switch_fd, switch_fd: node_fd}
    # Frames read from the node leave it (egress); frames read from the switch enter it.
    delay = {node_fd: args.egress_ms / 1000.0, switch_fd: args.ingress_ms / 1000.0}
    queues = {node_fd: collections.deque(), switch_fd: collections.deque()}  # frames due OUT of fd
    stats = {"egress_ms": args.egress_ms, "ingress_ms": args.ingress_ms, "frames_to_node": 0,
             "frames_from_node": 0, "bytes": 0, "write_errors": 0, "max_late_ms": 0.0,
             "min_held_from_node_ms": None, "min_held_to_node_ms": None}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    print("ready", flush=True)
    while not stop:
        now = time.monotonic()
        for dst, q in queues.items():
            while q and q[0][0] <= now:
                due, arrived, frame = q.popleft()
                try:
                    os.write(dst, frame)
                except OSError:
                    stats["write_errors"] += 1  # the port is down (a cut): the frame is lost
                    continue
                stats["max_late_ms"] = max(stats["max_late_ms"], (now - due) * 1000)
                held = (now - arrived) * 1000
                key = "to_node" if dst == node_fd else "from_node"
                stats["frames_" + key] += 1
                m = stats["min_held_" + key + "_ms"]
                stats["min_held_" + key + "_ms"] = held if m is None else min(m, held)
                stats["bytes"] += len(frame)
        waits = [q[0][0] - now for q in queues.values() if q]
        timeout = max(0.0, min(waits)) if waits else 0.5
        try:
            ready, _, _ = select.select([node_fd, switch_fd], [], [], timeout)
        except InterruptedError:
            continue
        for fd in ready:
            while True:
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    stop.append(1)  # the device is gone (its namespace was removed)
                    break
                if not frame:
                    break
                t = time.monotonic()
                queues[other[fd]].append((t + delay[fd], t, frame))
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(stats, f)
    return 0


# --- the UDP probe -----------------------------------------------------------------------------

def echo_server(args):
    host, port = args.bind.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, int(port)))
    print("ready", flush=True)
    while True:
        data, peer = s.recvfrom(2048)
        try:
            s.sendto(data, peer)
        except OSError:
            pass  # an iptables DROP in OUTPUT (a partition) says EPERM: the echo is lost


def echo_probe(args):
    host, port = args.to.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    sent = {}
    rtts = []
    next_send = time.monotonic()
    end = None
    seq = 0
    while True:
        now = time.monotonic()
        if seq < args.count and now >= next_send:
            sent[seq] = now
            try:
                s.sendto(struct.pack("!Q", seq), (host, int(port)))
            except OSError:
                pass  # an iptables DROP in OUTPUT (a partition, loss) says EPERM: lost
            seq += 1
            next_send = now + args.interval_ms / 1000.0
            if seq == args.count:
                end = now + args.wait_ms / 1000.0
        if end is not None and (now >= end or len(rtts) == args.count):
            break
        r, _, _ = select.select([s], [], [], 0.002)
        if r:
            try:
                data = s.recv(64)
            except BlockingIOError:
                continue
            (k,) = struct.unpack("!Q", data[:8])
            if k in sent:
                rtts.append((time.monotonic() - sent.pop(k)) * 1000)
    out = {"sent": args.count, "received": len(rtts),
           "rtt_ms": [round(min(rtts), 2), round(statistics.median(rtts), 2), round(max(rtts), 2)] if rtts else None}
    print(json.dumps(out))
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="netns_lab.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("cleanup", help="remove every stale tenax-lab-* namespace")
    d = sub.add_parser("delay-line", help="the frame forwarder of a delayed link (started by the lab)")
    d.add_argument("--node-ns", required=True)
    d.add_argument("--switch-ns", required=True)
    d.add_argument("--switch-if", required=True)
    d.add_argument("--egress-ms", type=float, required=True, help="delay of the frames leaving the node")
    d.add_argument("--ingress-ms", type=float, required=True, help="delay of the frames entering the node")
    d.add_argument("--stats")
    e = sub.add_parser("echo-server")
    e.add_argument("--bind", required=True)
    q = sub.add_parser("echo-probe")
    q.add_argument("--to", required=True)
    q.add_argument("--count", type=int, default=50)
    q.add_argument("--interval-ms", type=float, default=5)
    q.add_argument("--wait-ms", type=float, default=1500)
    a = p.parse_args(argv)
    if a.cmd == "cleanup":
        n = cleanup_stale()
        print(f"netns_lab: {n} stale namespace(s) removed")
        return 0
    if a.cmd == "delay-line":
        return delay_line(a)
    if a.cmd == "echo-server":
        return echo_server(a)
    return echo_probe(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
