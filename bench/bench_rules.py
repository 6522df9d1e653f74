"""The benchmark rules of bench/README.md, in one place for every Python bench script.

- the systems run in an order shuffled per round from a seed that is printed (--seed repeats it);
- a run that starts while the machine's load is above its core count is run again, not kept;
- figures are ratios taken within a round, reported as the median with the range over rounds;
- the header names the commit of the scripts' checkout (and says whether the tree had uncommitted
  changes), and, when the bench measured Tenax binaries, the commit, tree state and flavour those
  binaries were built from (`tenax --version`), the machine's cores and load, and the command line,
  so a result file says what produced it;
- every system runs with the BLAS kernels the CPU has: when OpenBLAS would fall back to older
  ones (`tenax --version`'s second line says so), OPENBLAS_CORETYPE is set for all of them, peers
  included, and a bench whose user forced slower kernels is refused (blas_kernels()).
"""
import datetime
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commit() -> str:
    """Short commit of the repository, with '+ uncommitted changes' when tracked files differ."""
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + (" + uncommitted changes" if dirty else "")
    except OSError:
        return "?"


def binaries(build_dir) -> str:
    """What the Tenax binaries of `build_dir` were built from, as one header line: `binaries: commit
    <hash>, tree clean|dirty, flavour <f> (<build_dir>/launcher/tenax --version: "<its first line>")`,
    or `binaries: unknown (<reason>)` when the launcher is missing or too old to know --version."""
    tenax = os.path.join(os.path.abspath(build_dir), "launcher", "tenax")
    if not os.access(tenax, os.X_OK):
        return f"binaries: unknown (no {tenax})"
    try:
        run = subprocess.run([tenax, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"binaries: unknown ({tenax} --version: {e})"
    first = (run.stdout.strip().splitlines() or [""])[0].strip()
    found = [re.search(r"\bcommit ([0-9a-f]+|unknown)\b", first), re.search(r"\btree (clean|dirty)\b", first),
             re.search(r"\bflavour (\w+)", first)]
    if found[0] and found[0].group(1) == "unknown" and not found[1]:
        found[1] = re.search(r"(unknown)", "unknown")  # not built from git: no tree to speak of
    if run.returncode != 0 or not first.startswith("tenax ") or not all(found):
        said = first or (run.stderr.strip().splitlines() or [""])[0].strip()
        return f"binaries: unknown ({tenax} --version exited {run.returncode}: {said[:120]!r}; a build older than --version?)"
    commit_, tree, flavour = (m.group(1) for m in found)
    return f'binaries: commit {commit_}, tree {tree}, flavour {flavour} ({tenax} --version: "{first}")'


def blas_kernels(build_dir) -> str:
    """The `blas:` header line from `<build_dir>/launcher/tenax --version`. When OpenBLAS falls back
    to kernels older than the CPU, sets OPENBLAS_CORETYPE (as `tenax run` does for its workers) in
    this process's environment, so every system of the bench runs on the same, right kernels; exits
    with status 2 when the user's OPENBLAS_CORETYPE forces slower ones (no result is published from
    them)."""
    tenax = os.path.join(os.path.abspath(build_dir), "launcher", "tenax")
    try:
        run = subprocess.run([tenax, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"blas: unknown ({tenax} --version: {e})"
    said = next((l.strip() for l in run.stdout.splitlines() if l.startswith("BLAS: ")), "")
    if not said:
        return f"blas: unknown ({tenax} --version names no BLAS; a build older than the BLAS check?)"
    if "slower kernels than this CPU can run" in said:
        print(f"bench: refused: {said}", file=sys.stderr)
        sys.exit(2)
    chosen = re.search(r"the workers get OPENBLAS_CORETYPE=(\w+)", said)
    if chosen:
        os.environ["OPENBLAS_CORETYPE"] = chosen.group(1)
        return f"blas: {said[len('BLAS: '):]}; OPENBLAS_CORETYPE={chosen.group(1)} for every system of this bench"
    return f"blas: {said[len('BLAS: '):]}"


def cpu_busy_seconds() -> float:
    """Busy CPU time of the whole machine (all cores) from /proc/stat, in seconds."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def header(name: str, *builds) -> str:
    """The result file's header: date, the scripts' commit, cores, load, the command line, and one
    `binaries:` line (binaries() above) per build directory whose Tenax binaries the bench ran."""
    stamp = datetime.datetime.now(datetime.timezone.utc)
    lines = [f"{name} {stamp:%Y-%m-%d %H:%M:%S} UTC, scripts at commit {commit()}, {os.cpu_count()} cores, "
             f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
             f"  command: {' '.join(shlex.quote(x) for x in sys.argv)}"]
    lines += [f"  {binaries(b)}" for b in builds if b]
    if any(builds):
        lines.append(f"  {blas_kernels(next(b for b in builds if b))}")
    return "\n".join(lines)


class Report:
    """What a bench script prints, kept for its result file: say() prints a line and keeps it,
    save() writes the lines to `path` (default bench/results/results-<name>-<UTC date>.txt). Fewer than
    5 rounds is noted on stderr: a smoke run, not a result."""

    def __init__(self, name, path=None, rounds=None):
        if rounds is not None and rounds < 5:
            print(f"{name} bench: note: fewer than 5 rounds is a smoke run, not a result", file=sys.stderr)
        stamp = datetime.datetime.now(datetime.timezone.utc)
        self.path = path or os.path.join(REPO, "bench", "results", f"results-{name}-{stamp:%Y-%m-%d}.txt")
        self.lines = []

    def say(self, s=""):
        print(s, flush=True)
        self.lines.append(s)

    def save(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")
        print(f"results: {self.path}")


class RoundOrder:
    """Per-round shuffles of the systems from one printed seed."""

    def __init__(self, systems, seed=None):
        self.systems = list(systems)
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        self._rng = random.Random(self.seed)

    def describe(self) -> str:
        return f"system order: shuffled per round with seed {self.seed} (--seed {self.seed} repeats it)"

    def next_round(self):
        order = list(self.systems)
        self._rng.shuffle(order)
        return order


def busy_cores(seconds=2.0) -> float:
    """Cores the whole machine keeps busy now, measured over `seconds` (/proc/stat)."""
    busy0 = cpu_busy_seconds()
    time.sleep(seconds)
    return (cpu_busy_seconds() - busy0) / seconds


def run_on_quiet_machine(run, say, label, attempts=3, wait_s=5.0, max_wait_s=600.0, disturbed=None, load=None,
                         max_load=None):
    """Calls run() -> dict until it starts on a machine whose 1-minute load is at most the core
    count (it waits up to max_wait_s for that first) and, when `disturbed(result)` is given, until
    that says no (e.g. other work came during the run). The dict gets 'load0' (the load at its
    start) and 'reruns'. After `attempts` loaded runs the last result is kept, marked 'loaded'.
    `load` and `max_load` replace the 1-minute load average and the core count where the bench's
    own previous run would dominate that average (a run that keeps 50 threads runnable leaves a
    load above the core count for minutes after it ended): e.g. busy_cores() and 0.5, which see
    only the work that runs now, when no run of the bench does."""
    cores = max_load if max_load is not None else os.cpu_count()
    load = load or (lambda: os.getloadavg()[0])
    result = {}
    for attempt in range(attempts):
        waited = 0.0
        while load() > cores and waited < max_wait_s:
            time.sleep(wait_s)
            waited += wait_s
        load0 = load()
        result = run()
        result["load0"] = load0
        result["reruns"] = attempt
        again = "run again" if attempt + 1 < attempts else "kept, marked loaded"
        if load0 > cores:
            say(f"  ({label}: load {load0:.2f} above {cores} at the start; {again})")
        elif disturbed is not None and disturbed(result):
            say(f"  ({label}: other work ran beside it ({disturbed(result)}); {again})")
        else:
            return result
    result["loaded"] = True
    return result


def median_range(xs, digits=3) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):.{digits}f} ({min(xs):.{digits}f}..{max(xs):.{digits}f})"
