// Running a job (`tenax train`, an example program) under `tenax run` from an integration test:
// a scratch directory per test binary, and the job's exit status, output and run summary.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace tenax::testing {

/// A fresh directory under the test temp dir named PREFIX-<pid>. It is removed when the process
/// exits if every test passed (a fine-tuning test leaves ~600 MB of checkpoints: repeated runs
/// filled this machine's disk), and kept for a look when one failed.
inline std::filesystem::path fresh_work_dir(const std::string& prefix) {
  struct RemovedWhenAllPassed {
    std::vector<std::filesystem::path> dirs;
    ~RemovedWhenAllPassed() {
      if (!::testing::UnitTest::GetInstance()->Passed()) return;
      std::error_code ignored;
      for (const auto& dir : dirs) std::filesystem::remove_all(dir, ignored);
    }
  };
  static RemovedWhenAllPassed made;
  auto dir = std::filesystem::path(::testing::TempDir()) / (prefix + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  made.dirs.push_back(dir);
  return dir;
}

struct JobRun {
  int exit_code = -1;       // -1: killed by a signal
  std::string log;          // stdout and stderr together
  std::string stdout_text;  // stdout alone
  nlohmann::json agent;     // DIR/run/agent.json, the agent's run summary (null if absent)
};

/// Runs `command` through the shell with its stdout and stderr in DIR/stdout.txt and
/// DIR/stderr.txt, and reads back what it left.
inline JobRun run_job(const std::string& command, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  const int status = std::system((command + " > " + out.string() + " 2> " + err.string()).c_str());
  JobRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.stdout_text = slurp(out);
  r.log = r.stdout_text + slurp(err);
  std::ifstream agent(dir / "run" / "agent.json");
  if (agent) r.agent = nlohmann::json::parse(agent, nullptr, false);
  return r;
}

}  // namespace tenax::testing
