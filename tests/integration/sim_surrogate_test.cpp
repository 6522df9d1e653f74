// examples/sim_surrogate (a heat solver embedding Tenax through the C API) with real processes
// and real signals (issue 11, point 5):
//   - under `tenax run --nproc-per-node 2`: a rank frozen by the example's stop hook at a chosen
//     solver step (early, after a checkpoint, during an asynchronous save) is SIGKILLed from here
//     by pid; the agent restarts the job, it resumes at the saved solver step, and its result
//     file (the whole final field and the surrogate's probe predictions) equals, byte for byte,
//     that of an uninterrupted run;
//   - a rank frozen without any signal from here: the agent's --hang-timeout declares it hung,
//     kills it and restarts the job, which resumes and ends identical;
//   - SIGUSR1 to the agent, and to the ranks themselves: every rank stops at the same solver
//     step, saves, exits 3; the next run resumes at that step and ends identical;
//   - under `tenax run --recovery in-process`: a rank killed by pid at a random solver step is
//     healed in process (the survivor keeps its process and its memory; a warm spare heals from
//     it); a program that does not handle TENAX_RECOVERED falls back to the checkpoint, saying why;
//   - the Fortran example under `tenax run --recovery in-process`: a rank killed by pid is healed
//     in process too, and its result equals an uninterrupted run's;
//   - under mpirun (2 MPI ranks, MPI halo, tenax_init_mpi): the same final field as under
//     `tenax run`, and a rank SIGKILLed by pid then a second mpirun (recovery = rerun, as a
//     requeue would) ends identical to an uninterrupted mpirun.
// The stop hook freezes the rank (SIGSTOP) so that the kill lands at a known solver step; the
// kill itself is a real kill(2) from outside, as an OOM killer or a node failure would deliver.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/agent_process.h"

namespace fs = std::filesystem;
using tenax::testing::ChildProcess;
using tenax::testing::read_text;

namespace {

constexpr int kSteps = 300;
constexpr int kSaveEvery = 50;
constexpr auto kJobTimeout = std::chrono::seconds(240);

fs::path base_dir() {
  static const fs::path dir = [] {
    auto d = fs::path(::testing::TempDir()) / ("tenax-sim-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::vector<std::string> example_args(const fs::path& out, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {SIM_BINARY,
                                   "--config",
                                   std::string(TENAX_SOURCE_DIR) + "/examples/sim_surrogate/surrogate.toml",
                                   "--output-dir",
                                   (out / "train").string(),
                                   "--nx",
                                   "32",
                                   "--ny",
                                   "32",
                                   "--steps",
                                   std::to_string(kSteps),
                                   "--train-every",
                                   "5",
                                   "--save-every",
                                   std::to_string(kSaveEvery),
                                   "--batch",
                                   "16",
                                   "--log-every",
                                   "50"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// One intra-op thread per rank: 2 ranks share 2 cores, and fixed threads keep runs bit-identical.
const std::vector<std::string> kEnv = {"OMP_NUM_THREADS=1"};

std::unique_ptr<ChildProcess> start_tenax_run(const std::string& name, const std::vector<std::string>& extra,
                                              bool fresh, const std::vector<std::string>& agent_extra = {}) {
  const fs::path out = base_dir() / name;
  if (fresh) fs::remove_all(out);
  fs::create_directories(out);
  std::vector<std::string> argv = {TENAX_BINARY,     "run", "--nproc-per-node", "2",
                                   "--max-restarts", "3",   "--run-dir",        (out / "run").string()};
  argv.insert(argv.end(), agent_extra.begin(), agent_extra.end());
  argv.push_back("--");
  for (auto& a : example_args(out, extra)) argv.push_back(a);
  // Each run of a job appends to its own log: the resumed run's lines follow the preempted one's.
  int n = 0;
  while (fs::exists(out / ("job" + std::to_string(n) + ".log"))) ++n;
  return std::make_unique<ChildProcess>(argv, out / ("job" + std::to_string(n) + ".log"), kEnv);
}

std::unique_ptr<ChildProcess> start_mpirun(const std::string& name, const std::vector<std::string>& extra, bool fresh) {
  const fs::path out = base_dir() / name;
  if (fresh) fs::remove_all(out);
  fs::create_directories(out);
  std::vector<std::string> argv = {MPIEXEC_BINARY, "-np", "2", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"};
  for (auto& a : example_args(out, extra)) argv.push_back(a);
  int n = 0;
  while (fs::exists(out / ("job" + std::to_string(n) + ".log"))) ++n;
  return std::make_unique<ChildProcess>(
      argv, out / ("job" + std::to_string(n) + ".log"),
      std::vector<std::string>{"OMP_NUM_THREADS=1", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                               "OMPI_MCA_rmaps_base_oversubscribe=1"});
}

struct Outcome {
  int exit_code = -1;
  std::string log;
  nlohmann::json agent;
};

Outcome finish(ChildProcess& job, const std::string& name) {
  Outcome r;
  const auto code = job.wait(kJobTimeout);
  r.exit_code = code ? *code : -1;
  r.log = job.log();
  std::ifstream agent(base_dir() / name / "run" / "agent.json");
  if (agent) r.agent = nlohmann::json::parse(agent, nullptr, false);
  return r;
}

Outcome run_tenax(const std::string& name, const std::vector<std::string>& extra = {}, bool fresh = true) {
  auto job = start_tenax_run(name, extra, fresh);
  return finish(*job, name);
}

std::string result_of(const std::string& name) { return read_text(base_dir() / name / "train" / "result.txt"); }

/// The "field" section of a result file (the solver's state, which no launch mode may change).
std::string field_of(const std::string& result) {
  const auto begin = result.find("\nfield ");
  const auto end = result.find("\nprobes ");
  return begin == std::string::npos || end == std::string::npos ? std::string() : result.substr(begin, end - begin);
}

char process_state(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '\0' : stat[close + 2];
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

/// Every process below `root` (children, grandchildren, ...).
std::vector<pid_t> descendants_of(pid_t root) {
  std::vector<pid_t> out;
  std::vector<pid_t> pending = {root};
  while (!pending.empty()) {
    const pid_t p = pending.back();
    pending.pop_back();
    for (pid_t c : children_of(p)) {
      out.push_back(c);
      pending.push_back(c);
    }
  }
  return out;
}

/// The descendant of `root` that the stop hook froze (state T), once it is; nullopt at the deadline.
std::optional<pid_t> wait_for_stopped_descendant(pid_t root, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (pid_t p : descendants_of(root)) {
      if (process_state(p) == 'T') return p;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

bool wait_for_log(const ChildProcess& job, const std::string& needle, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (job.log().find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

/// The solver step of the last "preempted by SIG... at solver step N" line, or -1.
long preempted_step(const std::string& log) {
  std::smatch m;
  long step = -1;
  std::string rest = log;
  const std::regex line("preempted by SIG[A-Z0-9]+ at solver step ([0-9]+)");
  while (std::regex_search(rest, m, line)) {
    step = std::stol(m[1]);
    rest = m.suffix();
  }
  return step;
}

/// The agent's record of a job under `--recovery in-process` in which `victim` was lost once: no
/// restart from disk, one in-process recovery that replaced `victim`, one generation history, and
/// the survivor's pid unchanged in it.
void expect_one_in_process_recovery_of(const Outcome& r, int victim) {
  EXPECT_EQ(r.agent["restarts"], 0) << "no worker was restarted from disk\n" << r.agent.dump(2);
  const auto& recoveries = r.agent["in_process_recoveries"];
  ASSERT_EQ(recoveries.size(), 1u) << r.agent.dump(2) << r.log;
  ASSERT_EQ(r.agent["history"].size(), 1u) << r.agent.dump(2);
  EXPECT_EQ(recoveries[0]["replaced"][0]["rank"], victim) << r.agent.dump(2);
  const auto& final_workers = r.agent["history"][0]["workers"];
  ASSERT_EQ(recoveries[0]["survivors"].size(), 1u) << r.agent.dump(2);
  for (const auto& survivor : recoveries[0]["survivors"]) {
    const int rank = survivor["rank"];
    EXPECT_EQ(final_workers[static_cast<std::size_t>(rank)]["pid"], survivor["pid"])
        << "rank " << rank << " kept its process\n"
        << r.agent.dump(2);
  }
}

class SimSurrogate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference_ = new Outcome(run_tenax("reference")); }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  static const Outcome& reference() { return *reference_; }
  static void expect_reference_ok() {
    ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
    ASSERT_FALSE(result_of("reference").empty());
  }

 private:
  static Outcome* reference_;
};
Outcome* SimSurrogate::reference_ = nullptr;

TEST_F(SimSurrogate, UninterruptedRunFinishesAndWritesFieldAndSurrogate) {
  expect_reference_ok();
  EXPECT_EQ(reference().agent["restarts"], 0) << reference().agent.dump();
  EXPECT_NE(reference().log.find("starting at solver step 0"), std::string::npos) << reference().log;
  EXPECT_NE(reference().log.find("done: solver step " + std::to_string(kSteps)), std::string::npos) << reference().log;
  const std::string result = result_of("reference");
  EXPECT_NE(result.find("field 32 32"), std::string::npos);
  EXPECT_NE(result.find("probes 16"), std::string::npos);
  EXPECT_EQ(result.find("none"), std::string::npos) << "every probe has a surrogate prediction";
  // The final checkpoint is committed, and running the finished job again changes nothing.
  EXPECT_TRUE(fs::exists(base_dir() / "reference" / "train" / "checkpoints" / "step-000000300" / "manifest.json"));
  const Outcome again = run_tenax("reference", {}, /*fresh=*/false);
  ASSERT_EQ(again.exit_code, 0) << again.log;
  EXPECT_NE(again.log.find("resumed at solver step 300"), std::string::npos) << again.log;
  EXPECT_EQ(result_of("reference"), result);
}

// ---- SIGKILL of a rank from outside, at a varying solver step --------------------------------

struct KillCase {
  const char* name;
  int stop_at_step;
  int rank;
  std::vector<int> resume_steps;  // where the restarted job may resume (-1: from scratch)
};

// gtest prints a parameter by its bytes unless told otherwise.
void PrintTo(const KillCase& c, std::ostream* os) {
  *os << c.name << " (rank " << c.rank << " at step " << c.stop_at_step << ")";
}

class SimSurrogateKill : public SimSurrogate, public ::testing::WithParamInterface<KillCase> {};

TEST_P(SimSurrogateKill, RankKilledByPidResumesAtTheSavedSolverStepBitIdentically) {
  expect_reference_ok();
  const KillCase& c = GetParam();
  const std::string name = std::string("kill-") + c.name;
  auto job =
      start_tenax_run(name, {"--stop-at-step", std::to_string(c.stop_at_step), "--stop-rank", std::to_string(c.rank)},
                      /*fresh=*/true);
  const auto frozen = wait_for_stopped_descendant(job->pid(), std::chrono::seconds(120));
  ASSERT_TRUE(frozen.has_value()) << "no rank stopped itself at step " << c.stop_at_step << "\n" << job->log();
  ASSERT_EQ(::kill(*frozen, SIGKILL), 0);
  const Outcome r = finish(*job, name);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();
  EXPECT_NE(r.log.find("SIGKILL"), std::string::npos) << "the agent names the signal\n" << r.log;
  bool resumed_as_expected = false;
  for (int step : c.resume_steps) {
    const std::string line = step < 0 ? "no checkpoint" : "resumed at solver step " + std::to_string(step) + " ";
    if (step < 0 ? count(r.log, "starting at solver step 0") == 2 : r.log.find(line) != std::string::npos) {
      resumed_as_expected = true;
    }
  }
  EXPECT_TRUE(resumed_as_expected) << r.log;
  EXPECT_EQ(result_of(name), result_of("reference"))
      << "the final field or surrogate differs from the uninterrupted run";
}

INSTANTIATE_TEST_SUITE_P(
    Steps, SimSurrogateKill,
    ::testing::Values(KillCase{"early", 20, 1, {-1}},                    // before the first checkpoint
                      KillCase{"after_checkpoint", 110, 0, {100}},       // 10 steps past a committed one
                      KillCase{"during_async_save", 150, 1, {150, 100}}  // right after save(150) returned
                      ),
    [](const ::testing::TestParamInfo<KillCase>& info) { return std::string(info.param.name); });

// ---- In-process recovery of the step loop (issue 13, point 6) -------------------------------

// Under `tenax run --recovery in-process` a rank frozen at a random solver step (seeded, printed)
// and SIGKILLed by pid is healed in process: the surviving rank keeps its process (same pid in the
// final generation), its collective call returns TENAX_RECOVERED with its field, time and step put
// back in memory to the last completed training step, a warm spare takes the lost rank's place and
// heals from the survivor's memory (model, optimizer, schedule, RNG, and the lost rank's strip from
// the copy every rank keeps), nothing is read from disk, and the final field and surrogate equal,
// byte for byte, those of the uninterrupted run.
TEST_F(SimSurrogate, UnderInProcessRecoveryAKilledRankIsHealedWhileTheSurvivorKeepsItsProcess) {
  expect_reference_ok();
  const unsigned seed = std::random_device{}();
  std::mt19937 pick(seed);
  const int stop_at = std::uniform_int_distribution<int>(10, kSteps - 20)(pick);
  const int victim = std::uniform_int_distribution<int>(0, 1)(pick);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": rank " + std::to_string(victim) + " killed after solver step " +
               std::to_string(stop_at));
  const std::string name = "in-process";
  auto job = start_tenax_run(name, {"--stop-at-step", std::to_string(stop_at), "--stop-rank", std::to_string(victim)},
                             /*fresh=*/true, {"--recovery", "in-process", "--spares", "1"});
  const auto frozen = wait_for_stopped_descendant(job->pid(), std::chrono::seconds(120));
  ASSERT_TRUE(frozen.has_value()) << job->log();
  ASSERT_EQ(::kill(*frozen, SIGKILL), 0);
  const Outcome r = finish(*job, name);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  expect_one_in_process_recovery_of(r, victim);
  if (HasFatalFailure()) return;
  EXPECT_NE(r.log.find("healed from rank " + std::to_string(1 - victim)), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("0 steps lost"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("healed from live peers (not from disk)"), std::string::npos) << "the replacement says so\n"
                                                                                     << r.log;
  EXPECT_EQ(r.log.find("resumed at solver step"), std::string::npos) << "nothing was restored from disk\n" << r.log;
  EXPECT_EQ(r.log.find("in-process recovery is not possible"), std::string::npos) << r.log;
  EXPECT_EQ(result_of(name), result_of("reference"))
      << "the final field or surrogate differs from the uninterrupted run";
}

// A program that does not say it handles TENAX_RECOVERED (here the example with --ignore-recovery,
// as one written before the status existed) is never handed one: it says at the start why it
// cannot heal in process, the agent says why it restarts instead, and the job resumes from its
// checkpoint, bit-identical as before; no rank waits for a heal.
TEST_F(SimSurrogate, UnderInProcessRecoveryAProgramThatIgnoresTheStatusFallsBackToTheCheckpointSayingWhy) {
  expect_reference_ok();
  const std::string name = "in-process-fallback";
  auto job = start_tenax_run(name, {"--stop-at-step", "110", "--stop-rank", "1", "--ignore-recovery"}, /*fresh=*/true,
                             {"--recovery", "in-process", "--spares", "1"});
  const auto frozen = wait_for_stopped_descendant(job->pid(), std::chrono::seconds(120));
  ASSERT_TRUE(frozen.has_value()) << job->log();
  ASSERT_EQ(::kill(*frozen, SIGKILL), 0);
  const Outcome r = finish(*job, name);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();
  EXPECT_TRUE(r.agent["in_process_recoveries"].empty()) << r.agent.dump();
  EXPECT_NE(r.log.find("did not say it handles a healed step"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("in-process recovery is not possible: only 0 of 2 workers"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("resumed at solver step 100 "), std::string::npos) << r.log;
  EXPECT_EQ(result_of(name), result_of("reference"));
}

#ifdef SIM_SURROGATE_F_BINARY
// The Fortran example (examples/sim_surrogate/fortran) handles TENAX_RECOVERED from every
// collective call as the C++ one does. Under `tenax run --recovery in-process`, a rank (random,
// seeded, printed) SIGKILLed by pid from outside, a random moment after the first checkpoint: no
// worker restarts, the survivor keeps its process, the warm spare heals from live peers (nothing
// is read from disk) and the result file equals, byte for byte, an uninterrupted run's.
namespace {

constexpr int kFortranSteps = 4000;

std::unique_ptr<ChildProcess> start_fortran(const std::string& name, const std::vector<std::string>& agent_extra) {
  const fs::path out = base_dir() / name;
  fs::remove_all(out);
  fs::create_directories(out);
  std::vector<std::string> argv = {TENAX_BINARY,     "run", "--nproc-per-node", "2",
                                   "--max-restarts", "3",   "--run-dir",        (out / "run").string()};
  argv.insert(argv.end(), agent_extra.begin(), agent_extra.end());
  for (const std::string& a :
       std::vector<std::string>{"--", SIM_SURROGATE_F_BINARY, "--output-dir", (out / "train").string(), "--steps",
                                std::to_string(kFortranSteps), "--save-every", "100", "--train-every", "10", "--nx",
                                "64", "--ny", "64", "--batch", "32"}) {
    argv.push_back(a);
  }
  return std::make_unique<ChildProcess>(argv, out / "job0.log", kEnv);
}

}  // namespace

TEST(SimSurrogateFortran, UnderInProcessRecoveryARankKilledByPidIsHealedWhileTheSurvivorKeepsItsProcess) {
  auto reference_job = start_fortran("fortran-reference", {});
  const Outcome reference_run = finish(*reference_job, "fortran-reference");
  ASSERT_EQ(reference_run.exit_code, 0) << reference_run.log;
  const std::string expected = result_of("fortran-reference");
  ASSERT_FALSE(expected.empty()) << reference_run.log;

  const unsigned seed = std::random_device{}();
  std::mt19937 pick(seed);
  const int victim = std::uniform_int_distribution<int>(0, 1)(pick);
  const int delay_ms = std::uniform_int_distribution<int>(0, 300)(pick);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": rank " + std::to_string(victim) + " killed " +
               std::to_string(delay_ms) + " ms after the first checkpoint");
  const std::string name = "fortran-in-process";
  auto job = start_fortran(name, {"--recovery", "in-process", "--spares", "1"});
  ASSERT_TRUE(tenax::testing::wait_for_path(base_dir() / name / "train" / "checkpoints" / "step-000000100",
                                            std::chrono::seconds(120)))
      << job->log();
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  const pid_t pid = tenax::testing::worker_pid(*job, victim);
  ASSERT_GT(pid, 0) << job->log();
  ASSERT_EQ(::kill(pid, SIGKILL), 0) << "rank " << victim << " (pid " << pid << ") was already gone\n" << job->log();
  const Outcome r = finish(*job, name);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  expect_one_in_process_recovery_of(r, victim);
  if (HasFatalFailure()) return;
  EXPECT_NE(r.log.find("replaces a lost rank: healed from live peers (not from disk)"), std::string::npos) << r.log;
  if (victim == 1) {  // rank 0, the survivor, says how it went on (only rank 0 prints progress)
    EXPECT_NE(r.log.find("healed in process without restarting this process"), std::string::npos) << r.log;
  }
  EXPECT_EQ(r.log.find("resumed at solver step"), std::string::npos) << "nothing was restored from disk\n" << r.log;
  EXPECT_EQ(r.log.find("in-process recovery is not possible"), std::string::npos) << r.log;
  EXPECT_EQ(result_of(name), expected) << "the final field or surrogate differs from the uninterrupted run";
}
#endif

// ---- A hung rank ----------------------------------------------------------------------------

// A rank that stops making progress without dying (here: frozen by SIGSTOP at solver step 110,
// as a wedged file system or a debugger would leave it; its peer then blocks in the halo
// exchange) is declared hung by the agent's --hang-timeout, killed, and the job restarts from
// the checkpoint at step 100 and ends bit-identical. Nothing from outside sends a signal: the
// agent alone must notice, from the progress the Trainer reports at every training step.
TEST_F(SimSurrogate, AFrozenRankIsDeclaredHungKilledAndTheJobResumesBitIdentically) {
  expect_reference_ok();
  const std::string name = "hung";
  auto job =
      start_tenax_run(name, {"--stop-at-step", "110", "--stop-rank", "1"}, /*fresh=*/true, {"--hang-timeout", "3"});
  const auto frozen = wait_for_stopped_descendant(job->pid(), std::chrono::seconds(120));
  ASSERT_TRUE(frozen.has_value()) << "no rank stopped itself at step 110\n" << job->log();
  const Outcome r = finish(*job, name);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();
  EXPECT_NE(r.log.find("hung"), std::string::npos) << "the agent says why it restarted\n" << r.log;
  EXPECT_NE(r.log.find("resumed at solver step 100 "), std::string::npos) << r.log;
  EXPECT_NE(::kill(*frozen, 0), 0) << "the frozen rank " << *frozen << " is killed, not left behind";
  EXPECT_EQ(result_of(name), result_of("reference"))
      << "the final field or surrogate differs from the uninterrupted run";
}

// ---- Preemption: SIGUSR1 ---------------------------------------------------------------------

// The job is frozen at step 120 (rank 1 stopped, rank 0 blocked in its halo exchange) so that the
// signal lands mid-run whatever the machine's speed; `deliver` sends it; then rank 1 continues.
void expect_preempted_then_resumed(const std::string& name, const std::function<void(ChildProcess&, pid_t)>& deliver) {
  auto job = start_tenax_run(name, {"--stop-at-step", "120", "--stop-rank", "1"}, /*fresh=*/true);
  const auto frozen = wait_for_stopped_descendant(job->pid(), std::chrono::seconds(120));
  ASSERT_TRUE(frozen.has_value()) << job->log();
  deliver(*job, *frozen);
  ASSERT_EQ(::kill(*frozen, SIGCONT), 0);
  const Outcome first = finish(*job, name);
  ASSERT_EQ(first.exit_code, 3) << first.log;
  EXPECT_EQ(first.agent["outcome"], "preempted") << first.agent.dump();
  EXPECT_EQ(first.agent["restarts"], 0) << "a preemption is not a failure to restart from";
  const long saved = preempted_step(first.log);
  ASSERT_GE(saved, 120) << first.log;
  ASSERT_LT(saved, kSteps) << first.log;
  char dir[32];
  std::snprintf(dir, sizeof dir, "step-%09ld", saved);
  EXPECT_TRUE(fs::exists(base_dir() / name / "train" / "checkpoints" / dir / "manifest.json"))
      << "the preemption's checkpoint is committed before exit 3";
  EXPECT_FALSE(fs::exists(base_dir() / name / "train" / "result.txt"));

  const Outcome second = run_tenax(name, {}, /*fresh=*/false);
  ASSERT_EQ(second.exit_code, 0) << second.log;
  EXPECT_NE(second.log.find("resumed at solver step " + std::to_string(saved) + " "), std::string::npos) << second.log;
  EXPECT_EQ(result_of(name), result_of("reference"));
}

TEST_F(SimSurrogate, Sigusr1ToTheAgentSavesAtTheSolverStepExitsThreeAndResumesBitIdentically) {
  expect_reference_ok();
  expect_preempted_then_resumed("preempt-agent", [](ChildProcess& job, pid_t) {
    ASSERT_EQ(::kill(job.pid(), SIGUSR1), 0);
    // The agent forwards it to both ranks (rank 1 gets it pending, delivered on SIGCONT).
    ASSERT_TRUE(wait_for_log(job, "forwarding SIGUSR1", std::chrono::seconds(60))) << job.log();
  });
}

TEST_F(SimSurrogate, Sigusr1ToTheRanksSavesAtTheSolverStepExitsThreeAndResumesBitIdentically) {
  expect_reference_ok();
  expect_preempted_then_resumed("preempt-ranks", [](ChildProcess& job, pid_t) {
    // As `srun --signal` or `scancel --signal` deliver it: to the tasks, not to the agent.
    for (pid_t worker : job.children()) ASSERT_EQ(::kill(worker, SIGUSR1), 0);
  });
}

// ---- mpirun: 2 MPI ranks, MPI halo, tenax_init_mpi --------------------------------------------

#ifdef MPIEXEC_BINARY
Outcome run_mpirun(const std::string& name, const std::vector<std::string>& extra = {}, bool fresh = true) {
  auto job = start_mpirun(name, extra, fresh);
  return finish(*job, name);
}

TEST_F(SimSurrogate, MpirunGivesTheSameFieldAsTenaxRunAndSurvivesAKillAndARerun) {
  expect_reference_ok();
  const Outcome plain = run_mpirun("mpi-reference");
  if (plain.log.find("libtenax was built without MPI") != std::string::npos) {
    GTEST_SKIP() << "libtenax was built without MPI (TENAX_WITH_MPI=OFF): tenax_init_mpi is a configuration error";
  }
  ASSERT_EQ(plain.exit_code, 0) << plain.log;
  EXPECT_NE(plain.log.find("halo over mpi"), std::string::npos) << plain.log;
  // The solver's field is the same whatever carries the halo (MPI or Tenax's allgather).
  const std::string field = field_of(result_of("mpi-reference"));
  ASSERT_FALSE(field.empty()) << result_of("mpi-reference");
  EXPECT_EQ(field, field_of(result_of("reference")));

  // A rank killed by pid: mpirun ends the job; running it again resumes at step 100.
  auto job = start_mpirun("mpi-kill", {"--stop-at-step", "110", "--stop-rank", "1"}, /*fresh=*/true);
  const auto frozen = wait_for_stopped_descendant(job->pid(), std::chrono::seconds(120));
  ASSERT_TRUE(frozen.has_value()) << job->log();
  ASSERT_EQ(::kill(*frozen, SIGKILL), 0);
  const Outcome killed = finish(*job, "mpi-kill");
  EXPECT_NE(killed.exit_code, 0) << killed.log;
  EXPECT_FALSE(fs::exists(base_dir() / "mpi-kill" / "train" / "result.txt"));
  const Outcome rerun = run_mpirun("mpi-kill", {}, /*fresh=*/false);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.log;
  EXPECT_NE(rerun.log.find("resumed at solver step 100 "), std::string::npos) << rerun.log;
  EXPECT_EQ(result_of("mpi-kill"), result_of("mpi-reference"));
}
#endif

}  // namespace
