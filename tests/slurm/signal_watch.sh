#!/usr/bin/env bash
# signal_watch.sh - records every signal sent to the Slurm test cluster's daemons (slurmctld,
# slurmd, munged), with its sender, while the Slurm tests run: a ctest fixture step beside
# local-cluster.sh up/down (tests/slurm/CMakeLists.txt).
#
#   signal_watch.sh start STATE_DIR   trace into STATE_DIR/log/signals.log (after `up`: it wipes log/)
#   signal_watch.sh stop  STATE_DIR   stop tracing, keep the log
#
# Why: a slurmd of the cluster died in one run without a line in its log and without a core
# (node2, while it launched a step; about 1 run in 3 of a full `make test` in a fresh clone),
# and nothing showed what killed it. A signal that kills silently (SIGKILL, or SIGUSR1/SIGALRM,
# which slurmd does not handle) leaves its sender only in the kernel: this keeps the kernel's
# signal_generate events for those daemons (sender comm-pid, signal, target pid, whether it was
# blocked), which the fixture prints when it finds a slurmd dead. A segfault shows there too
# (the daemon as its own sender, sig=11).
# Needs root and tracefs; where either is missing it says so and exits 0: the tests run the same,
# only without this record. It uses a tracefs instance of its own (instances/tenax-slurm-<hash>),
# so the global trace buffer and other tracers are left alone, and two clusters do not mix.
set -u

cmd=${1:-}
state=${2:-}
[[ ($cmd == start || $cmd == stop) && $state == /* ]] || { echo "usage: $0 start|stop STATE_DIR" >&2; exit 2; }

note() { printf '[signal-watch] %s\n' "$*" >&2; }

tracefs=""
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
  [[ -e $d/instances ]] && { tracefs=$d; break; }
done
if [[ -z $tracefs && $EUID -eq 0 ]]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null && [[ -e /sys/kernel/tracing/instances ]] && tracefs=/sys/kernel/tracing
fi
instance_name="tenax-slurm-$(printf '%s' "$state" | cksum | cut -d' ' -f1)"
pidfile=$state/run/signal-watch.pid
log=$state/log/signals.log

stop() {
  local pid
  pid=$(cat "$pidfile" 2>/dev/null)
  # Only our reader: a `cat` whose command line names this instance's trace_pipe.
  if [[ -n $pid ]] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "instances/$instance_name/trace_pipe"; then
    kill "$pid" 2>/dev/null
  fi
  rm -f "$pidfile"
  if [[ -n $tracefs && -d $tracefs/instances/$instance_name ]]; then
    echo 0 > "$tracefs/instances/$instance_name/events/signal/signal_generate/enable" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$tracefs/instances/$instance_name" 2>/dev/null && break; sleep 0.1; done
  fi
}

if [[ $cmd == stop ]]; then
  stop
  exit 0
fi

if [[ -z $tracefs || $EUID -ne 0 ]]; then
  note "not recording signals to the cluster's daemons (needs root and tracefs); the tests run without this record"
  exit 0
fi
stop  # a watch left by an earlier run of this cluster
dir=$tracefs/instances/$instance_name
mkdir "$dir" 2>/dev/null || { note "cannot create the tracefs instance $dir; not recording"; exit 0; }
echo 1024 > "$dir/buffer_size_kb"
# The daemons by name (comm of the target), every signal but SIGCHLD, which they get for each
# child they reap.
if ! { echo '(comm == "slurmd" || comm == "slurmctld" || comm == "munged") && sig != 17' \
          > "$dir/events/signal/signal_generate/filter" &&
        echo 1 > "$dir/events/signal/signal_generate/enable"; }; then
  note "cannot enable signal_generate in $dir; not recording"
  stop
  exit 0
fi
mkdir -p "$state/log" "$state/run"
# The lines' time is seconds since boot: one wall-clock anchor to read them against the logs.
echo "# signal_watch: $(date -u +%FT%T.%N) UTC = $(cut -d' ' -f1 /proc/uptime) s since boot (the clock of the lines below)" >> "$log"
setsid cat "$dir/trace_pipe" >> "$log" 2>/dev/null < /dev/null &
echo $! > "$pidfile"
note "recording signals to slurmctld, slurmd and munged in $log"
