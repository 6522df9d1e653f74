// The requeue helper: after a preemption (every worker saved and exited 3) the agent of node
// rank 0 asks Slurm to put the job back in the queue with `scontrol requeue $SLURM_JOB_ID`, so
// that it resumes from its checkpoint. Once per job run: a marker file in the run directory
// (created with O_EXCL) keeps a second agent process, or a second call, from requeueing again.
// Thread-safety: one calling thread.
//
//   RequeueResult r = requeue_job(job.job_id, job.restart_count.value_or(0), run_dir, 30s);
//   log->warn("{}", r.message);
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace tenax::launcher {

struct RequeueResult {
  enum class Outcome { kRequeued, kAlreadyDone, kFailed };
  Outcome outcome = Outcome::kFailed;
  std::string message;  ///< for the log: the command, its status and output
};

/// Runs `command` (default: scontrol requeue JOB_ID) unless the marker
/// <run_dir>/requeued-job<JOB_ID>-run<restart_count> already exists, waiting at most `timeout`.
RequeueResult requeue_job(const std::string& job_id, int restart_count, const std::filesystem::path& run_dir,
                          std::chrono::seconds timeout, std::vector<std::string> command = {});

}  // namespace tenax::launcher
