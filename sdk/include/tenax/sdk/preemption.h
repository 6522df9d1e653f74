// Preemption requests — SIGTERM (scancel, a time limit, the agent passing one on) and SIGUSR1
// (Slurm's --signal warning) — turned into a flag the training loop reads at step boundaries.
//
// DESIGN.md decision 7: the handlers only set a flag; the Trainer acts at a step boundary after
// every rank agrees (the flag rides in each step's gradient allreduce: GradSync::synchronize),
// so all ranks stop at the same step,
// save one consistent checkpoint and exit with tenax::kExitPreempted (3).
// Signal dispositions are process-wide: instances share one flag; the first installs the
// handlers, the last restores the previous ones. Thread-safety: any thread may construct,
// destroy and read.
//
//   tenax::sdk::PreemptionSignals preemption;
//   ... each step: if (preemption.requested() != 0) { ...agree, save, return... }
#pragma once

namespace tenax::sdk {

class PreemptionSignals {
 public:
  PreemptionSignals();
  ~PreemptionSignals();
  PreemptionSignals(const PreemptionSignals&) = delete;
  PreemptionSignals& operator=(const PreemptionSignals&) = delete;

  /// The first preemption signal received while an instance was alive (SIGTERM or SIGUSR1),
  /// or 0. Stays set until the last instance is destroyed.
  int requested() const;
};

}  // namespace tenax::sdk
