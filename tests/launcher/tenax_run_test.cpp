// End-to-end tests of `tenax run`: the real binary supervising small /bin/sh workers.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Guards against a hung test only; never a timing assertion.
constexpr const char* kHangGuard = "timeout -k 10 300";
constexpr auto kFileWaitGuard = 120s;

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool wait_for_file(const fs::path& path) {
  const auto deadline = std::chrono::steady_clock::now() + kFileWaitGuard;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

struct TenaxResult {
  int exit_code = -1;
  std::string log;
  nlohmann::json summary;  // agent.json, or null when it was not written
};

class LauncherRun : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = fs::temp_directory_path() / "tenax_launcher_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure()) fs::remove_all(dir_, ec);
  }

  fs::path run_dir() const { return dir_ / "run"; }
  // A path inside the test directory, as text to paste into worker scripts.
  std::string at(const std::string& name) const { return (dir_ / name).string(); }

  // The `tenax run` arguments for n workers running `script` under /bin/sh.
  std::vector<std::string> run_args(int n, const std::string& script,
                                    const std::vector<std::string>& flags = {}) const {
    std::vector<std::string> args = {"run", "--nproc-per-node", std::to_string(n), "--run-dir", run_dir().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", script});
    return args;
  }

  std::string command_line(const std::vector<std::string>& args) const {
    std::string cmd = quote(TENAX_BINARY);
    for (const std::string& a : args) cmd += " " + quote(a);
    return cmd + " > " + quote(at("tenax.log")) + " 2>&1";
  }

  TenaxResult collect(int exit_code) const {
    TenaxResult r;
    r.exit_code = exit_code;
    r.log = read_file(dir_ / "tenax.log");
    if (fs::exists(run_dir() / "agent.json")) {
      r.summary = nlohmann::json::parse(read_file(run_dir() / "agent.json"));
    }
    return r;
  }

  TenaxResult tenax(const std::vector<std::string>& args) const {
    const std::string cmd = std::string(kHangGuard) + " " + command_line(args);
    const int status = std::system(cmd.c_str());
    return collect(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }

  TenaxResult tenax_workers(int n, const std::string& script, const std::vector<std::string>& flags = {}) const {
    return tenax(run_args(n, script, flags));
  }

  fs::path dir_;
};

// What the log and summary say, printed when an assertion fails.
std::string explain(const TenaxResult& r) {
  return "exit code " + std::to_string(r.exit_code) + "\n--- log ---\n" + r.log + "--- agent.json ---\n" +
         r.summary.dump(2);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// True when one line of `text` contains all `parts`, in this order.
bool has_line(const std::string& text, const std::vector<std::string>& parts) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::size_t at = 0;
    bool all = true;
    for (const std::string& part : parts) {
      at = line.find(part, at);
      if (at == std::string::npos) {
        all = false;
        break;
      }
      at += part.size();
    }
    if (all) return true;
  }
  return false;
}

TEST_F(LauncherRun, AllWorkersExitZero) {
  TenaxResult r = tenax_workers(2, "exit 0");
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_EQ(r.summary["outcome"], "finished") << explain(r);
  EXPECT_EQ(r.summary["generations"], 1) << explain(r);
  EXPECT_EQ(r.summary["restarts"], 0) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"].size(), 2u) << explain(r);
  EXPECT_TRUE(contains(r.log, "starting 2 workers (generation 0)")) << explain(r);
  EXPECT_TRUE(contains(r.log, "all 2 workers finished")) << explain(r);
}

TEST_F(LauncherRun, WorkersGetTorchrunAndTenaxEnvironment) {
  ASSERT_EQ(::setenv("TENAX_TEST_INHERITED", "from-the-parent", 1), 0);
  ASSERT_EQ(::setenv("RANK", "77", 1), 0);  // the agent's values win over inherited ones
  TenaxResult r = tenax_workers(3,
                                "printf '%s\\n' \"$RANK\" \"$LOCAL_RANK\" \"$WORLD_SIZE\" \"$LOCAL_WORLD_SIZE\" "
                                "\"$GROUP_RANK\" \"$MASTER_ADDR\" \"$MASTER_PORT\" \"$TENAX_GENERATION\" "
                                "\"$TENAX_RESTART_COUNT\" \"$TENAX_RDZV_ENDPOINT\" \"$TENAX_RUN_DIR\" "
                                "\"$TENAX_TEST_INHERITED\" \"$TENAX_KEYS_FILE\" > " +
                                    at("env-") + "$RANK");
  ::unsetenv("TENAX_TEST_INHERITED");
  ::unsetenv("RANK");
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  const std::string endpoint = r.summary["rdzv_endpoint"];
  const std::string prefix = "tcp://127.0.0.1:";
  ASSERT_EQ(endpoint.rfind(prefix, 0), 0u) << endpoint;
  const std::string rdzv_port = endpoint.substr(prefix.size());
  ASSERT_GT(std::stoi(rdzv_port), 0);
  // MASTER_PORT: the generation's free port for rank 0's own store (agent.json records it),
  // the same for every rank, and never the rendezvous port, which PyTorch could not bind.
  const std::string master_port = std::to_string(r.summary["history"][0]["master_port"].get<int>());
  EXPECT_NE(master_port, rdzv_port);
  ASSERT_GT(std::stoi(master_port), 0);
  const std::string run_dir_abs = fs::absolute(run_dir()).lexically_normal().string();
  for (int rank = 0; rank < 3; ++rank) {
    std::ifstream in(at("env-" + std::to_string(rank)));
    std::vector<std::string> v;
    for (std::string line; std::getline(in, line);) v.push_back(line);
    const std::string r_s = std::to_string(rank);
    ASSERT_EQ(v, (std::vector<std::string>{r_s, r_s, "3", "3", "0", "127.0.0.1", master_port, "0", "0", endpoint,
                                           run_dir_abs, "from-the-parent", run_dir_abs + "/tenax-job.keys"}))
        << "rank " << rank;
  }
  // The job's CURVE keys: private to the user who runs it.
  const auto perms = fs::status(run_dir() / "tenax-job.keys").permissions();
  EXPECT_EQ(perms & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(LauncherRun, TorchrunSpellingsRunTheWorkersAndRestartThem) {
  // What a job script written for torchrun passes, with --no-python for a shell worker.
  const std::string script = "echo \"$MASTER_PORT $TORCHELASTIC_RUN_ID $TORCHELASTIC_RESTART_COUNT\" > " + at("port-") +
                             "$RANK-$TORCHELASTIC_RESTART_COUNT; " +
                             "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then kill -9 $$; fi";
  TenaxResult r =
      tenax({"run", "--nproc_per_node=2", "--max_restarts", "1", "--monitor_interval=0.02", "--rdzv_id=job-7",
             "--standalone", "--run_dir", run_dir().string(), "--no-python", "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_EQ(r.summary["generations"], 2) << explain(r);
  EXPECT_EQ(r.summary["max_restarts"], 1) << explain(r);
  for (int g = 0; g < 2; ++g) {
    const std::string expected =
        std::to_string(r.summary["history"][g]["master_port"].get<int>()) + " job-7 " + std::to_string(g) + "\n";
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(read_file(at("port-" + std::to_string(rank) + "-" + std::to_string(g))), expected)
          << "rank " << rank << ", restart " << g << "\n"
          << explain(r);
    }
  }
}

TEST_F(LauncherRun, WorkerKilledBySignalIsRestartedOnce) {
  TenaxResult r =
      tenax_workers(2, "if [ \"$TENAX_GENERATION\" = 0 ] && [ \"$RANK\" = 1 ]; then kill -9 $$; fi; exit 0");
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_EQ(r.summary["generations"], 2) << explain(r);
  EXPECT_EQ(r.summary["restarts"], 1) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["outcome"], "failed") << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][1]["signal"], "SIGKILL") << explain(r);
  EXPECT_EQ(r.summary["history"][1]["outcome"], "finished") << explain(r);
  EXPECT_TRUE(has_line(r.log, {"worker rank 1 (pid ", ", host ", ") was killed by signal 9 (SIGKILL)"})) << explain(r);
  EXPECT_TRUE(contains(r.log, "restarting all 2 workers as generation 1 (restart 1 of 3)")) << explain(r);
}

TEST_F(LauncherRun, NonZeroExitIsAFailureAndRestarts) {
  TenaxResult r = tenax_workers(2, "if [ \"$TENAX_GENERATION\" = 0 ] && [ \"$RANK\" = 0 ]; then exit 7; fi; exit 0");
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_EQ(r.summary["generations"], 2) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][0]["exit_code"], 7) << explain(r);
  EXPECT_TRUE(has_line(r.log, {"worker rank 0 (pid ", ", host ", ") exited with status 7"})) << explain(r);
}

TEST_F(LauncherRun, SuccessfulWorkerDoesNotHideAnotherWorkersFailure) {
  // Generation 0: rank 0 exits 0 first; rank 1 waits until rank 0 is done, then fails.
  // Every worker of generation 1 marks that it started: all N restart, rank 0 included.
  const std::string script = "touch " + at("started-") +
                             "$RANK-$TENAX_GENERATION; "
                             "if [ \"$TENAX_GENERATION\" = 0 ]; then "
                             "  if [ \"$RANK\" = 0 ]; then touch " +
                             at("rank0-done") +
                             "; exit 0; fi; "
                             "  while [ ! -e " +
                             at("rank0-done") +
                             " ]; do sleep 0.05; done; sleep 0.2; exit 5; "
                             "fi; exit 0";
  TenaxResult r = tenax_workers(2, script);
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_EQ(r.summary["generations"], 2) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["outcome"], "failed") << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][0]["exit_code"], 0) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][1]["exit_code"], 5) << explain(r);
  EXPECT_TRUE(fs::exists(at("started-0-1"))) << "rank 0 was not restarted\n" << explain(r);
  EXPECT_TRUE(fs::exists(at("started-1-1"))) << explain(r);
}

TEST_F(LauncherRun, WorkerIgnoringTheStopSignalIsKilledAfterGracePeriod) {
  // Rank 0 ignores the restart's stop signal (and so does its sleep); rank 1 fails once rank 0
  // is ignoring it.
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then "
      "  while [ ! -e " +
      at("ignoring") +
      " ]; do sleep 0.05; done; exit 1; "
      "fi; trap '' USR2; touch " +
      at("ignoring") + "; while :; do sleep 1; done";
  TenaxResult r = tenax_workers(2, script, {"--grace-period", "1", "--max-restarts", "0"});
  ASSERT_EQ(r.exit_code, 1) << explain(r);
  EXPECT_TRUE(contains(r.log, "worker rank 0 (pid ")) << explain(r);
  EXPECT_TRUE(contains(r.log, "did not stop within 1 s of SIGUSR2; sending SIGKILL")) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][0]["signal"], "SIGKILL") << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][0]["stopped_by_agent"], true) << explain(r);
  EXPECT_TRUE(contains(r.log, "restart budget spent (0 restarts); giving up")) << explain(r);
}

// Issue 12: a restart's stop is not a preemption. A worker that answers SIGTERM/SIGUSR1 as a
// preemption (save, exit 3, as the SDK does) must not see either when the agent stops it because
// a peer failed: with SIGTERM it would "save and exit 3", and in a real job its preemption vote
// would reach every rank and end the job as preempted.
TEST_F(LauncherRun, ARestartStopsTheSurvivorsWithoutAPreemptionSignal) {
  const std::string script =
      "if [ \"$TENAX_GENERATION\" != 0 ]; then exit 0; fi; "
      "if [ \"$RANK\" = 1 ]; then "
      "  while [ ! -e " +
      at("trapping") +
      " ]; do sleep 0.05; done; exit 1; "
      "fi; trap 'touch " +
      at("preempted") + "; exit 3' TERM USR1; touch " + at("trapping") + "; while :; do sleep 0.1; done";
  TenaxResult r = tenax_workers(2, script, {"--grace-period", "5", "--max-restarts", "1"});
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_FALSE(fs::exists(at("preempted"))) << "the survivor got a preemption signal\n" << explain(r);
  EXPECT_EQ(r.summary["history"][0]["outcome"], "failed") << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][0]["signal"], "SIGUSR2") << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][0]["stopped_by_agent"], true) << explain(r);
  EXPECT_EQ(r.summary["history"][1]["outcome"], "finished") << explain(r);
}

TEST_F(LauncherRun, RestartBudgetSpentExitsOne) {
  TenaxResult r = tenax_workers(2, "exit 1", {"--max-restarts", "2"});
  ASSERT_EQ(r.exit_code, 1) << explain(r);
  EXPECT_EQ(r.summary["outcome"], "failed") << explain(r);
  EXPECT_EQ(r.summary["generations"], 3) << explain(r);
  EXPECT_EQ(r.summary["restarts"], 2) << explain(r);
  EXPECT_TRUE(contains(r.log, "restarting all 2 workers as generation 2 (restart 2 of 2)")) << explain(r);
  EXPECT_TRUE(contains(r.log, "restart budget spent (2 restarts); giving up")) << explain(r);
}

TEST_F(LauncherRun, AllWorkersPreemptedExitsThreeWithoutRestart) {
  TenaxResult r = tenax_workers(2, "exit 3");
  ASSERT_EQ(r.exit_code, 3) << explain(r);
  EXPECT_EQ(r.summary["outcome"], "preempted") << explain(r);
  EXPECT_EQ(r.summary["generations"], 1) << explain(r);
}

TEST_F(LauncherRun, PreemptionOfOnlySomeWorkersIsAFailure) {
  // Rank 0 says "preempted"; rank 1 carries on past the grace period, so the generation failed.
  const std::string script = "if [ \"$RANK\" = 0 ]; then exit 3; fi; while :; do sleep 1; done";
  TenaxResult r = tenax_workers(2, script, {"--grace-period", "1", "--max-restarts", "0"});
  ASSERT_EQ(r.exit_code, 1) << explain(r);
  EXPECT_EQ(r.summary["outcome"], "failed") << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][0]["exit_code"], 3) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][1]["stopped_by_agent"], true) << explain(r);
  EXPECT_TRUE(has_line(r.log, {"worker rank 1 (pid ",
                               "still running 1 s after another worker "
                               "was preempted"}))
      << explain(r);
}

TEST_F(LauncherRun, UsageErrorsExitTwoNamingTheProblem) {
  const std::string data = at("data.txt");
  std::ofstream(data) << "data\n";
  fs::permissions(data, fs::perms::owner_read | fs::perms::owner_write);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "missing command"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"run", "--nproc-per-node", "2"}, "missing `--`"},
      {{"run", "--nproc-per-node", "2", "/bin/true"}, "put the program and its arguments after"},
      {{"run", "--nproc-per-node", "0", "--", "/bin/true"}, "--nproc-per-node must be at least 1"},
      {{"run", "--nproc-per-node", "two", "--", "/bin/true"}, "--nproc-per-node expects"},
      {{"run", "--nproc-per-node", "1", "--max-restarts", "x", "--", "/bin/true"}, "--max-restarts expects"},
      {{"run", "--nproc-per-node", "1", "--bogus", "--", "/bin/true"}, "unknown flag --bogus"},
      {{"run", "--nproc-per-node", "1", "--"}, "no program after `--`"},
      {{"run", "--nproc-per-node", "1", "--", "tenax-no-such-program-xyz"}, "not found in PATH"},
      {{"run", "--nproc-per-node", "1", "--", data}, "not an executable"},
      // torchrun's flags that tenax run does not take are refused by name, with what to do.
      {{"run", "--nproc_per_node=1", "--rdzv_backend=c10d", "train.py"}, "torchrun's flag --rdzv_backend"},
      {{"run", "--nproc_per_node", "1", "--master_port", "29500", "train.py"}, "torchrun's flag --master_port"},
      {{"run", "--nproc_per_node", "1", "-r", "3", "train.py"}, "torchrun's flag -r"},
      {{"run", "--nproc_per_node", "1", "--no_such_torchrun_flag", "train.py"}, "unknown flag --no_such_torchrun_flag"},
  };
  for (const Case& c : cases) {
    TenaxResult r = tenax(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << explain(r);
    EXPECT_TRUE(contains(r.log, c.message)) << c.message << "\n" << explain(r);
  }
  EXPECT_FALSE(fs::exists(run_dir() / "agent.json"));
}

TEST_F(LauncherRun, HelpPrintsUsage) {
  TenaxResult r = tenax({"--help"});
  EXPECT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_TRUE(contains(r.log, "tenax run")) << explain(r);
  r = tenax({"run", "--help"});
  EXPECT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_TRUE(contains(r.log, "--nproc-per-node N")) << explain(r);
  EXPECT_TRUE(contains(r.log, "--grace-period")) << explain(r);
}

TEST_F(LauncherRun, AgentSigtermStopsWorkersAndExits143) {
  const std::string script = "touch " + at("up-") + "$RANK; while :; do sleep 1; done";
  const std::string cmd = "exec " + command_line(run_args(2, script, {"--grace-period", "30"}));
  std::vector<std::string> argv_s = {"/bin/sh", "-c", cmd};
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ), 0);
  const bool up = wait_for_file(at("up-0")) && wait_for_file(at("up-1"));
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(up) << "workers never started\n" << read_file(at("tenax.log"));
  TenaxResult r = collect(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  ASSERT_EQ(r.exit_code, 143) << explain(r);
  EXPECT_EQ(r.summary["outcome"], "interrupted") << explain(r);
  EXPECT_EQ(r.summary["generations"], 1) << explain(r);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(r.summary["history"][0]["workers"][rank]["signal"], "SIGTERM") << explain(r);
  }
  EXPECT_TRUE(contains(r.log, "received SIGTERM")) << explain(r);
}

TEST_F(LauncherRun, HangTimeoutStopsAWorkerWhoseProgressFileStopsChanging) {
  // Rank 1 reports progress once, then hangs; rank 0 never reports (never judged) and waits.
  TenaxResult r = tenax_workers(2, "if [ \"$RANK\" = 1 ]; then touch \"$TENAX_PROGRESS_FILE\"; fi; sleep 60",
                                {"--hang-timeout", "1", "--max-restarts", "0", "--grace-period", "1"});
  ASSERT_EQ(r.exit_code, 1) << explain(r);
  EXPECT_TRUE(has_line(r.log, {"worker rank 1 (pid ", "made no progress for ", "--hang-timeout 1 s"})) << explain(r);
  EXPECT_EQ(r.summary["history"][0]["workers"][1]["stopped_by_agent"], true) << explain(r);
}

TEST_F(LauncherRun, HangTimeoutFindsAWorkerStoppedOutsideItsProgressPhases) {
  // Rank 1 never reports progress (as before its first step, or after its last, when the progress
  // file is gone) and stops itself in the first generation; rank 0 finishes. A process stopped
  // for longer than the timeout is hung wherever it stopped: the agent must not wait for it for
  // ever (it did), and the restart finishes the job.
  TenaxResult r =
      tenax_workers(2, "if [ \"$RANK\" = 1 ] && [ \"$TENAX_RESTART_COUNT\" = 0 ]; then kill -STOP $$; fi; exit 0",
                    {"--hang-timeout", "1", "--max-restarts", "1"});
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_TRUE(has_line(r.log, {"worker rank 1 (pid ", "made no progress for ", "the process is stopped"}))
      << explain(r);
  EXPECT_EQ(r.summary["restarts"], 1) << explain(r);
}

TEST_F(LauncherRun, SingleNodeRunHasNoProgressFileWithoutHangTimeout) {
  TenaxResult r = tenax_workers(1, "test -z \"$TENAX_PROGRESS_FILE\"");
  EXPECT_EQ(r.exit_code, 0) << explain(r);
}

}  // namespace
