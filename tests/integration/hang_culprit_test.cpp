// Issue 33, point 4: only the culprit of a hang is replaced. Two `tenax run --nnodes 2` agents on
// this host (127.0.0.1), `--recovery in-process --spares 1 --hang-timeout 3`: one worker stops
// making progress — SIGSTOPped by pid from outside at a random moment, or its training thread
// spinning in a busy loop or asleep in a system call (synthetic_regression --hang-at-step) — and
// its peers, on its node and on the other, block in a collective waiting for it. Each agent sees
// only its own workers, and every one of them has stale progress: the culprit's agent must name
// and replace it, the other workers keep their processes and heal in process, the job ends
// bit-identical to an uninterrupted run, and the culprit is found within the hang timeout plus
// the agent's hang check period. (Before: both agents declared their own worker hung, no worker
// survived, and the job restarted from disk.) Steps, ranks and nodes come from a seeded
// generator (the seed is printed; TENAX_TEST_SEED repeats a run). One case runs one agent with
// two workers: on one node nothing told a spinning culprit from its waiting peer either.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/agent_process.h"
#include "support/model_checkpoints.h"
#include "tenax/storage/layout.h"

namespace fs = std::filesystem;
using tenax::testing::ChildProcess;
using namespace std::chrono_literals;

namespace {

constexpr int kHangTimeout = 3;  // seconds, --hang-timeout
constexpr int kShortSteps = 60;  // the injected hangs: they come at a step of their own
// The stops from outside: long enough that the stop lands mid-run (two ranks take ~3 ms a step
// here, four on two cores ~10-30 ms).
constexpr int kLongSteps = 1500;
constexpr int kLongStepsFourRanks = 800;
constexpr auto kGuard = 120s;  // against a hung test only
// The agent looks for hangs once a second (agent.cpp); its loop wakes every monitor interval
// (20 ms) and may run a little late on a loaded machine: what a culprit's staleness may reach.
constexpr double kDetectionBound = kHangTimeout + 1.0 + 0.25;

fs::path base_dir() {
  static const fs::path dir = [] {
    auto d = fs::path(::testing::TempDir()) / ("tenax-hang-culprit-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::uint32_t test_seed() {
  static const std::uint32_t seed = [] {
    const char* given = std::getenv("TENAX_TEST_SEED");
    const std::uint32_t s =
        given ? static_cast<std::uint32_t>(std::strtoul(given, nullptr, 10)) : std::random_device{}();
    std::cout << "hang culprit test seed: " << s << " (TENAX_TEST_SEED=" << s << " repeats it)\n";
    return s;
  }();
  return seed;
}

// Saves every 20 steps for the short runs, every 100 for the long ones (steps take ~5 ms).
std::vector<std::string> example_args(const fs::path& out, int steps, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {EXAMPLE_BINARY,
                                   "--output-dir",
                                   (out / "train").string(),
                                   "--max-steps",
                                   std::to_string(steps),
                                   "--save-steps",
                                   steps > kShortSteps ? "100" : "20",
                                   "--logging-steps",
                                   "10"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> agent_args(const fs::path& out, int node, int per_node, int port, int steps,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> args = {TENAX_BINARY,
                                   "run",
                                   "--nproc-per-node",
                                   std::to_string(per_node),
                                   "--nnodes",
                                   "2",
                                   "--node-id",
                                   std::to_string(node),
                                   "--rdzv-endpoint",
                                   "127.0.0.1:" + std::to_string(port),
                                   "--heartbeat-interval",  // the default: a loaded machine must not
                                   "500",                   // look like a lost node (100 ms x 5 did)
                                   "--join-timeout",
                                   "20",
                                   "--max-restarts",
                                   "3",
                                   "--recovery",
                                   "in-process",
                                   "--spares",
                                   "1",
                                   "--hang-timeout",
                                   std::to_string(kHangTimeout),
                                   "--run-dir",
                                   (out / "run-node%n").string(),
                                   "--"};
  const auto example = example_args(out, steps, extra);
  args.insert(args.end(), example.begin(), example.end());
  return args;
}

// Gloo binds the address it is told: both "nodes" are this host.
const std::vector<std::string> kEnv = {"TENAX_GLOO_HOSTNAME=127.0.0.1"};

nlohmann::json summary(const fs::path& out, int node) {
  const std::string text = tenax::testing::read_text(out / ("run-node" + std::to_string(node)) / "agent.json");
  return text.empty() ? nlohmann::json() : nlohmann::json::parse(text, nullptr, false);
}

fs::path final_checkpoint(const fs::path& out, int steps) {
  return out / "train" / "checkpoints" / tenax::storage::step_dir_name(steps);
}

// The reference: one agent with all the ranks (the same world size), `steps` long, no fault,
// under --recovery in-process too: its RNG mirrors ride in the gradient allreduce, which for more
// than two ranks changes the ring's chunks and with them the order of the sums.
fs::path reference(int ranks, int steps) {
  static std::map<std::pair<int, int>, fs::path> made;
  const auto key = std::make_pair(ranks, steps);
  if (const auto it = made.find(key); it != made.end()) return it->second;
  const fs::path o = base_dir() / ("reference-" + std::to_string(ranks) + "-" + std::to_string(steps));
  fs::create_directories(o);
  std::vector<std::string> args = {
      TENAX_BINARY, "run", "--nproc-per-node", std::to_string(ranks), "--recovery", "in-process",
      "--spares",   "0",   "--run-dir",        (o / "run").string(),  "--"};
  const auto example = example_args(o, steps, {});
  args.insert(args.end(), example.begin(), example.end());
  ChildProcess agent(args, o / "job.log");
  const auto code = agent.wait(kGuard);
  EXPECT_EQ(code, 0) << agent.log();
  made[key] = o;
  return o;
}

struct TwoNodes {
  fs::path out;
  int per_node = 1;
  int steps = kShortSteps;
  std::unique_ptr<ChildProcess> node0, node1;
  ChildProcess& node(int n) { return n == 0 ? *node0 : *node1; }
  std::string logs() const { return "--- node 0 ---\n" + node0->log() + "--- node 1 ---\n" + node1->log(); }
};

TwoNodes start_two(const std::string& name, int per_node, int steps, const std::vector<std::string>& extra) {
  TwoNodes t;
  t.out = base_dir() / name;
  t.per_node = per_node;
  t.steps = steps;
  fs::remove_all(t.out);
  fs::create_directories(t.out);
  const int port = tenax::testing::free_port();
  t.node0 =
      std::make_unique<ChildProcess>(agent_args(t.out, 0, per_node, port, steps, extra), t.out / "node0.log", kEnv);
  t.node1 =
      std::make_unique<ChildProcess>(agent_args(t.out, 1, per_node, port, steps, extra), t.out / "node1.log", kEnv);
  return t;
}

// The pid of the worker that started as `rank`, waiting for it to be there.
pid_t wait_for_worker(const ChildProcess& agent, int rank) {
  for (int i = 0; i < 3000; ++i) {
    const pid_t pid = tenax::testing::worker_pid(agent, rank);
    if (pid > 0) return pid;
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

// The first line an agent's log (its workers' lines included) logged at error level.
std::string first_error_line(const std::string& log) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("] error: ") != std::string::npos) return line;
  }
  return {};
}

// The hung culprit's staleness as its agent saw it: "made no progress for 3.4 s".
double detection_seconds(const std::string& line) {
  static const std::regex seconds("made no progress for ([0-9.]+) s");
  std::smatch m;
  return std::regex_search(line, m, seconds) ? std::stod(m[1].str()) : -1.0;
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// What every run with one culprit must show once both agents have finished:
//  - the culprit's agent named it (rank, pid, host) in its first error line, soon enough;
//  - the other node's agent took no worker for hung (its workers waited in a collective) and
//    logged no error that names another;
//  - across both nodes exactly one worker was replaced, the culprit, and every other worker of
//    the first generation survived the recovery in its own process;
//  - the lost rank healed from a peer's memory, nothing came from disk, and the final model
//    equals, bit for bit, that of an uninterrupted run.
void expect_only_the_culprit_replaced(TwoNodes& t, int culprit_rank, pid_t culprit_pid) {
  const int culprit_node = culprit_rank / t.per_node;
  const std::string culprit_log = t.node(culprit_node).log();
  const std::string other_log = t.node(1 - culprit_node).log();

  const std::string error = first_error_line(culprit_log);
  EXPECT_NE(error.find("rank " + std::to_string(culprit_rank) + " ("), std::string::npos) << error << "\n" << t.logs();
  EXPECT_NE(error.find("pid " + std::to_string(culprit_pid)), std::string::npos) << error << "\n" << t.logs();
  EXPECT_NE(error.find("host " + hostname()), std::string::npos) << error << "\n" << t.logs();
  EXPECT_NE(error.find("treating it as hung"), std::string::npos) << error << "\n" << t.logs();
  const double seconds = detection_seconds(error);
  std::cout << "the culprit was found " << seconds << " s after its last progress (bound " << kDetectionBound
            << " s)\n";
  EXPECT_GE(seconds, kHangTimeout) << error;  // over the timeout, printed to a tenth
  EXPECT_LE(seconds, kDetectionBound) << error;
  const std::string other_error = first_error_line(other_log);
  EXPECT_TRUE(other_error.empty() || other_error.find("pid " + std::to_string(culprit_pid)) != std::string::npos)
      << "the other node's first error names someone else: " << other_error << "\n"
      << t.logs();
  EXPECT_EQ(other_log.find("treating it as hung"), std::string::npos)
      << "the other node took its waiting worker for hung\n"
      << t.logs();
  // (Whether it also said its workers wait in a collective depends on whether it looked while
  // they were silent: the culprit's agent may kill the culprit first.)

  int replaced = 0;
  int survivors = 0;
  for (int node : {0, 1}) {
    const auto s = summary(t.out, node);
    ASSERT_TRUE(s.is_object()) << t.logs();
    EXPECT_EQ(s["outcome"], "finished") << s.dump(2);
    ASSERT_FALSE(s["in_process_recoveries"].empty()) << s.dump(2);
    std::vector<int> first;
    for (const auto& w : s["history"][0]["workers"]) first.push_back(w["pid"].get<int>());
    const auto& recovery = s["in_process_recoveries"][0];
    for (const auto& r : recovery["replaced"]) {
      ++replaced;
      EXPECT_EQ(r["rank"], culprit_rank) << "a worker other than the culprit was replaced\n" << s.dump(2);
      EXPECT_EQ(r["lost_pid"], culprit_pid) << s.dump(2);
    }
    for (const auto& survivor : recovery["survivors"]) {
      ++survivors;
      EXPECT_NE(std::find(first.begin(), first.end(), survivor["pid"].get<int>()), first.end())
          << "a survivor is not a worker of the first generation\n"
          << s.dump(2);
    }
  }
  EXPECT_EQ(replaced, 1) << t.logs();
  EXPECT_EQ(survivors, 2 * t.per_node - 1) << "every worker but the culprit kept its process\n" << t.logs();
  EXPECT_NE(t.logs().find("healed from rank"), std::string::npos) << t.logs();
  EXPECT_EQ(t.logs().find("resumed from"), std::string::npos) << "healed from memory, not from disk\n" << t.logs();
  tenax::testing::expect_bit_identical_models(final_checkpoint(reference(2 * t.per_node, t.steps), t.steps),
                                              final_checkpoint(t.out, t.steps));
}

// A worker SIGSTOPped by pid from outside, at a random moment after the first checkpoint.
void stop_one_worker(const std::string& name, int per_node, std::uint32_t salt) {
  std::mt19937 random(test_seed() + salt);
  const int culprit = std::uniform_int_distribution<int>(0, 2 * per_node - 1)(random);
  const int delay_ms = std::uniform_int_distribution<int>(100, 1500)(random);
  const int culprit_node = culprit / per_node;
  std::cout << "stopping rank " << culprit << " (node " << culprit_node << ") " << delay_ms
            << " ms after the first checkpoint\n";
  const int steps = per_node == 1 ? kLongSteps : kLongStepsFourRanks;
  ASSERT_FALSE(reference(2 * per_node, steps).empty());
  TwoNodes t = start_two(name, per_node, steps, {});
  const fs::path first_save = final_checkpoint(t.out, 100) / "manifest.json";
  ASSERT_TRUE(tenax::testing::wait_for_path(first_save, 60s)) << t.logs();
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  const pid_t victim = tenax::testing::worker_pid(t.node(culprit_node), culprit);
  ASSERT_GT(victim, 0) << t.logs();
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  ASSERT_EQ(t.node0->wait(kGuard), 0) << t.logs();
  ASSERT_EQ(t.node1->wait(kGuard), 0) << t.logs();
  expect_only_the_culprit_replaced(t, culprit, victim);
  EXPECT_NE(t.node(culprit_node).log().find("the process is stopped"), std::string::npos) << t.logs();
}

// A worker whose training thread hangs after a random step, with its process running.
void hang_one_worker(const std::string& name, const std::string& mode, std::uint32_t salt) {
  std::mt19937 random(test_seed() + salt);
  const int culprit = std::uniform_int_distribution<int>(0, 1)(random);
  const int step = std::uniform_int_distribution<int>(5, kShortSteps - 5)(random);
  std::cout << "rank " << culprit << "'s training thread " << mode << "s after step " << step << "\n";
  ASSERT_FALSE(reference(2, kShortSteps).empty());
  TwoNodes t =
      start_two(name, 1, kShortSteps,
                {"--hang-at-step", std::to_string(step), "--hang-rank", std::to_string(culprit), "--hang-mode", mode});
  const pid_t victim = wait_for_worker(t.node(culprit), culprit);
  ASSERT_GT(victim, 0) << t.logs();
  ASSERT_EQ(t.node0->wait(kGuard), 0) << t.logs();
  ASSERT_EQ(t.node1->wait(kGuard), 0) << t.logs();
  expect_only_the_culprit_replaced(t, culprit, victim);
  EXPECT_EQ(t.logs().find("the process is stopped"), std::string::npos) << t.logs();
}

// (a) One worker per node; the stopped one is on a seeded-random node.
TEST(HangCulprit, AStoppedWorkerIsTheOnlyOneReplacedWhicheverNodeItIsOn) { stop_one_worker("stop-1", 1, 1); }

// (b) Two workers per node: the stopped one's neighbour on its own node waits for it too.
TEST(HangCulprit, WithTwoWorkersPerNodeOnlyTheStoppedOneIsReplaced) { stop_one_worker("stop-2", 2, 2); }

// (c) A training thread spinning in a busy loop: the process runs, its progress stops.
TEST(HangCulprit, ASpinningWorkerIsTheOnlyOneReplaced) { hang_one_worker("spin", "spin", 3); }

// (d) A training thread asleep in a system call for ever.
TEST(HangCulprit, AWorkerStuckInASystemCallIsTheOnlyOneReplaced) { hang_one_worker("sleep", "sleep", 4); }

// (e) The same on one node: nothing is stopped there either, so before the beacon the agent
// could not tell the spinning worker from its waiting peer and took both for hung.
TEST(HangCulprit, OnOneNodeASpinningWorkerIsTheOnlyOneReplaced) {
  std::mt19937 random(test_seed() + 5);
  const int culprit = std::uniform_int_distribution<int>(0, 1)(random);
  const int step = std::uniform_int_distribution<int>(5, kShortSteps - 5)(random);
  std::cout << "rank " << culprit << "'s training thread spins after step " << step << "\n";
  const fs::path expected = final_checkpoint(reference(2, kShortSteps), kShortSteps);
  const fs::path out = base_dir() / "one-node-spin";
  fs::remove_all(out);
  fs::create_directories(out);
  std::vector<std::string> args = {TENAX_BINARY,
                                   "run",
                                   "--nproc-per-node",
                                   "2",
                                   "--recovery",
                                   "in-process",
                                   "--spares",
                                   "1",
                                   "--hang-timeout",
                                   std::to_string(kHangTimeout),
                                   "--max-restarts",
                                   "3",
                                   "--run-dir",
                                   (out / "run").string(),
                                   "--"};
  const auto example = example_args(
      out, kShortSteps,
      {"--hang-at-step", std::to_string(step), "--hang-rank", std::to_string(culprit), "--hang-mode", "spin"});
  args.insert(args.end(), example.begin(), example.end());
  ChildProcess agent(args, out / "job.log");
  const pid_t victim = wait_for_worker(agent, culprit);
  ASSERT_GT(victim, 0) << agent.log();
  ASSERT_EQ(agent.wait(kGuard), 0) << agent.log();
  const std::string log = agent.log();
  const std::string error = first_error_line(log);
  EXPECT_NE(error.find("rank " + std::to_string(culprit) + " (pid " + std::to_string(victim)), std::string::npos)
      << error << "\n"
      << log;
  EXPECT_NE(error.find("its training thread spins"), std::string::npos) << error;
  EXPECT_LE(detection_seconds(error), kDetectionBound) << error;
  EXPECT_NE(log.find("it waits in a collective for the hung one; it keeps its process"), std::string::npos) << log;
  const auto s = nlohmann::json::parse(tenax::testing::read_text(out / "run" / "agent.json"), nullptr, false);
  ASSERT_TRUE(s.is_object()) << log;
  ASSERT_EQ(s["in_process_recoveries"].size(), 1u) << s.dump(2);
  const auto& recovery = s["in_process_recoveries"][0];
  ASSERT_EQ(recovery["replaced"].size(), 1u) << s.dump(2);
  EXPECT_EQ(recovery["replaced"][0]["rank"], culprit) << s.dump(2);
  EXPECT_EQ(recovery["replaced"][0]["lost_pid"], victim) << s.dump(2);
  ASSERT_EQ(recovery["survivors"].size(), 1u) << s.dump(2);
  EXPECT_EQ(recovery["survivors"][0]["pid"], s["history"][0]["workers"][1 - culprit]["pid"])
      << "the waiting peer kept its process\n"
      << s.dump(2);
  EXPECT_EQ(log.find("resumed from"), std::string::npos) << "healed from memory, not from disk\n" << log;
  tenax::testing::expect_bit_identical_models(expected, final_checkpoint(out, kShortSteps));
}

}  // namespace
