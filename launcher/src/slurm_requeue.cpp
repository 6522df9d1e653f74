#include "slurm_requeue.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"
#include "worker_process.h"

extern char** environ;

namespace tenax::launcher {

RequeueResult requeue_job(const std::string& job_id, int restart_count, const std::filesystem::path& run_dir,
                          std::chrono::seconds timeout, std::vector<std::string> command) {
  RequeueResult result;
  if (command.empty()) command = {"scontrol", "requeue", job_id};
  std::string shown;
  for (const auto& w : command) shown += (shown.empty() ? "" : " ") + w;

  const auto marker = run_dir / ("requeued-job" + job_id + "-run" + std::to_string(restart_count));
  // Only the marker's existence matters: its descriptor closes at the end of the if.
  if (const UniqueFd created(::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      !created && errno == EEXIST) {
    result.outcome = RequeueResult::Outcome::kAlreadyDone;
    result.message = "job " + job_id + " was already requeued from this run (" + marker.string() + " exists)";
    return result;
  }

  const auto output = run_dir / ("requeue-job" + job_id + ".out");
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  // The command's output goes to a file so that the log can quote it.
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$@\" > '" + output.string() + "' 2>&1", "sh"};
  argv.insert(argv.end(), command.begin(), command.end());
  try {
    WorkerProcess process = WorkerProcess::spawn(argv, env);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!process.poll() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!process.status()) {
      process.signal_group(SIGKILL);
      process.reap(WorkerProcess::kReapTimeout);
      result.message = "`" + shown + "` did not finish within " + std::to_string(timeout.count()) + " s; killed it";
      return result;
    }
    const ExitStatus status = *process.status();
    process.reap(WorkerProcess::kReapTimeout);
    std::ifstream in(output);
    std::stringstream text;
    text << in.rdbuf();
    std::string said = text.str();
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    if (status.succeeded()) {
      result.outcome = RequeueResult::Outcome::kRequeued;
      result.message = "`" + shown + "` succeeded: Slurm will start job " + job_id +
                       " again and it resumes from its newest checkpoint";
    } else {
      std::error_code ec;
      std::filesystem::remove(marker, ec);  // a later attempt may try again
      result.message = "`" + shown + "` " + status.describe() + (said.empty() ? "" : ": " + said) +
                       "; the job was not requeued: resubmit it (sbatch) to resume from its checkpoint";
    }
  } catch (const Error& e) {
    std::error_code ec;
    std::filesystem::remove(marker, ec);
    result.message = "could not run `" + shown + "`: " + e.what() +
                     "; the job was not requeued: resubmit it (sbatch) to resume from its checkpoint";
  }
  return result;
}

}  // namespace tenax::launcher
