"""Processes seen through /proc, and a free port: shared by tools/chaos.py and
bench/recovery_bench.py (Python 3 standard library only; Linux)."""

import glob
import socket


def children(pid):
    """Direct children of `pid`, from /proc/<pid>/task/*/children (empty if it is gone)."""
    out = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return sorted(set(out))


def state(pid):
    """The one-letter state of `pid` (R, S, D, T, Z, ...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:].split()
    return rest[0] if rest else None


def environ(pid):
    """The environment `pid` started with, as a dict (empty if it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    env = {}
    for entry in raw.split(b"\0"):
        if b"=" in entry:
            k, v = entry.split(b"=", 1)
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
