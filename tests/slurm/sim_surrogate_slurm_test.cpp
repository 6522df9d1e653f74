// Simulation ranks started directly by srun (no `tenax run` agent) under the shipped
// slurm/sim_surrogate.sbatch on the local Slurm cluster (2 nodes, one rank each): recovery is a
// Slurm requeue decided by slurm/tenax-requeue, and the requeued job resumes from its newest
// checkpoint. For the C++ and the Fortran sim_surrogate example, whichever are built:
//   (a) one rank SIGKILLed from outside (by its pid on its node) → srun --kill-on-bad-exit ends
//       the other → the batch script requeues → the job resumes from the last checkpoint →
//       result.txt byte-identical to an uninterrupted run;
//   (b) the preemption warning to the batch shell (scancel --batch --signal=USR1, as
//       --signal=B:USR1 sends it) → the trap passes it to the ranks → every rank saves at the same
//       solver step and exits 3 → requeue → resume at that step → byte-identical.
// And the requeue decisions with a stand-in rank (standin_solver.sh; no solver needed): a
// configuration error (exit 2) of one rank is never requeued; failures are requeued at most
// --max-failures times.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "slurm_cluster.h"
#include "support/agent_process.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using tenax::testing::read_text;
using tenax::testing::slurm::run;

namespace {

struct Example {
  std::string name;    ///< for the test's name: cpp, fortran
  std::string binary;  ///< the example's executable
};

// A run long enough that the kill and the warning land mid-run on a loaded 2-core machine: they
// are sent as soon as a checkpoint is committed (the first is step kSaveEvery's, 1/60 of the way), and the
// rest takes ~3 s here (the warning was seen to arrive ~300 steps after it).
constexpr int kSteps = 6000;
constexpr int kSaveEvery = 100;
const std::string kSimArgs = "--steps " + std::to_string(kSteps) + " --save-every " + std::to_string(kSaveEvery) +
                             " --train-every 10 --nx 64 --ny 64 --batch 32";

class SrunLaunch : public tenax::testing::slurm::SlurmClusterTest {
 protected:
  // Submits slurm/sim_surrogate.sbatch (2 nodes, one rank each) running `program`; each rank
  // records its pid in rank-<procid>-run-<restart count>.pid first.
  void submit(const std::string& name, const std::string& program, const std::string& env = "") {
    const fs::path o = fresh_out(name);
    std::FILE* w = std::fopen((o / "rank.sh").c_str(), "w");
    ASSERT_NE(w, nullptr) << o;
    std::fputs(("#!/bin/bash\necho $$ > " + o.string() +
                "/rank-$SLURM_PROCID-run-${SLURM_RESTART_COUNT:-0}.pid\nexec \"$@\"\n")
                   .c_str(),
               w);
    std::fclose(w);
    fs::permissions(o / "rank.sh", fs::perms::owner_all);
    // -t 10: the template's warning (B:USR1@120) is never due while a test's job runs.
    // One intra-op thread per rank: the two "nodes" share this machine's 2 cores.
    job_ = run(env + " OMP_NUM_THREADS=1 TENAX_OUTPUT_DIR=" + o.string() +
               " TENAX_REQUEUE=" TENAX_SOURCE_DIR "/slurm/tenax-requeue sbatch --parsable -t 10 -o " + o.string() +
               "/slurm.out " TENAX_SOURCE_DIR "/slurm/sim_surrogate.sbatch " + o.string() + "/rank.sh " + program +
               " 2>&1");
    ASSERT_FALSE(job_.empty()) << "sbatch said nothing";
    ASSERT_EQ(job_.find_first_not_of("0123456789"), std::string::npos) << "sbatch: " << job_;
  }

  void submit_sim(const std::string& name, const Example& example) {
    submit(name, example.binary + " --output-dir " + (base_dir_of(name) / "sim").string() + " " + kSimArgs);
  }
  static fs::path base_dir_of(const std::string& name) { return tenax::testing::slurm::base_dir() / name; }

  // Waits until a checkpoint of the run is committed, whichever step it is. Not step kSaveEvery's
  // in particular: retention (save_total_limit 3) removes that one ~0.4 s later, and a test
  // process starved that long on a loaded machine missed it and waited in vain.
  bool wait_for_a_checkpoint(std::chrono::seconds timeout) const {
    const fs::path dir = out_ / "sim" / "checkpoints";
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    do {
      std::error_code ec;
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (fs::exists(it->path() / "manifest.json")) return true;
      }
      std::this_thread::sleep_for(20ms);
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
  }
  std::string result() const { return read_text(out_ / "sim" / "result.txt"); }
  pid_t rank_pid(int rank, int run) const {
    const std::string text =
        read_text(out_ / ("rank-" + std::to_string(rank) + "-run-" + std::to_string(run) + ".pid"));
    return text.empty() ? 0 : static_cast<pid_t>(std::stol(text));
  }

  // Both tasks joined one run of world size 2 (a rank that found no peers would run alone, as a
  // world of 1, and write the same result).
  void expect_two_ranks() const {
    const std::string text = log();
    EXPECT_NE(text.find(" cells on 2 rank(s)"), std::string::npos) << text;
    EXPECT_EQ(text.find(" cells on 1 rank(s)"), std::string::npos) << text;
  }

  // The uninterrupted run of `example`: its result.txt.
  std::string reference(const Example& example) {
    submit_sim(example.name + "-reference", example);
    if (HasFatalFailure()) return "";
    const std::string end = wait_done(300s);
    EXPECT_EQ(end, "COMPLETED") << explain();
    EXPECT_NE(log().find("tenax-requeue: the step finished (exit 0)"), std::string::npos) << explain();
    expect_two_ranks();
    const std::string text = result();
    EXPECT_FALSE(text.empty()) << "no result.txt\n" << explain();
    return text;
  }
};

class SimSurrogateUnderSrun : public SrunLaunch {
 protected:
  void a_killed_rank_is_requeued_and_resumes_bit_identical(const Example& example);
  void a_preemption_warning_saves_requeues_and_resumes_bit_identical(const Example& example);
};

// The solver step a line "... <what> at solver step N ..." of rank 0 names, after `from`; -1 if none.
long long step_after(const std::string& text, const std::string& what, std::size_t from = 0) {
  const std::regex pattern(what + "[^\n]* at solver step ([0-9]+)");
  std::smatch match;
  const std::string rest = text.substr(std::min(from, text.size()));
  return std::regex_search(rest, match, pattern) ? std::stoll(match[1]) : -1;
}

void SimSurrogateUnderSrun::a_killed_rank_is_requeued_and_resumes_bit_identical(const Example& example) {
  const std::string expected = reference(example);
  ASSERT_FALSE(HasFailure());
  submit_sim(example.name + "-kill", example);
  ASSERT_TRUE(wait_for_a_checkpoint(120s)) << explain();
  // Rank 1, from outside, as the kernel's OOM killer or a node's watchdog would.
  const pid_t victim = rank_pid(1, 0);
  ASSERT_GT(victim, 0) << explain();
  ASSERT_EQ(::kill(victim, SIGKILL), 0) << "rank 1 (pid " << victim << ") was already gone\n" << explain();
  ASSERT_EQ(start_requeued_job_now(60s), "PENDING") << explain();
  ASSERT_EQ(wait_done(300s), "COMPLETED") << explain();
  const std::string text = log();
  EXPECT_NE(text.find("tenax-requeue: the step failed (exit "), std::string::npos) << text;
  EXPECT_NE(text.find("failed run 1 of at most 4"), std::string::npos) << text;
  const auto second = text.find("SLURM_RESTART_COUNT=1");
  ASSERT_NE(second, std::string::npos) << text;
  const long long resumed = step_after(text, "resumed", second);
  EXPECT_GE(resumed, kSaveEvery) << "the requeued run did not resume from a checkpoint\n" << text;
  EXPECT_EQ(resumed % kSaveEvery, 0) << text;
  expect_two_ranks();
  EXPECT_EQ(result(), expected) << "result.txt differs from the uninterrupted run's\n" << explain();
}

void SimSurrogateUnderSrun::a_preemption_warning_saves_requeues_and_resumes_bit_identical(const Example& example) {
  const std::string expected = reference(example);
  ASSERT_FALSE(HasFailure());
  submit_sim(example.name + "-preempt", example);
  ASSERT_TRUE(wait_for_a_checkpoint(120s)) << explain();
  // To the batch shell only, as #SBATCH --signal=B:USR1@120 sends it.
  ASSERT_EQ(run("scancel --batch --signal=USR1 " + job_ + " 2>&1"), "") << explain();
  ASSERT_EQ(start_requeued_job_now(60s), "PENDING") << explain();
  ASSERT_EQ(wait_done(300s), "COMPLETED") << explain();
  const std::string text = log();
  EXPECT_NE(text.find("batch shell got SIGUSR1"), std::string::npos) << text;
  // Every rank stopped at the same solver step, saved it and exited 3; the requeued run resumed there.
  const long long preempted = step_after(text, "preempted by SIGUSR1");
  ASSERT_GT(preempted, kSaveEvery) << text;
  EXPECT_NE(text.find(": checkpoint committed; exiting 3"), std::string::npos) << text;
  // srun reports the largest exit status of the ranks: 3, or 143 if --kill-on-bad-exit's SIGTERM
  // reached a rank still exiting; the batch shell saw the warning, so both are a preemption.
  EXPECT_TRUE(text.find("tenax-requeue: the step exited 3: preempted") != std::string::npos ||
              text.find("after the preemption warning: treated as preempted") != std::string::npos)
      << text;
  EXPECT_EQ(text.find("tenax-requeue: the step failed"), std::string::npos) << text;
  const auto second = text.find("SLURM_RESTART_COUNT=1");
  ASSERT_NE(second, std::string::npos) << text;
  EXPECT_EQ(step_after(text, "resumed", second), preempted) << text;
  expect_two_ranks();
  EXPECT_EQ(result(), expected) << "result.txt differs from the uninterrupted run's\n" << explain();
}

// Plain tests per built example rather than TEST_P: ctest's names stay stable (gtest_discover_tests
// would append the parameter's bytes to them).
#ifdef SIM_SURROGATE_BINARY
TEST_F(SimSurrogateUnderSrun, CxxAKilledRankIsRequeuedAndResumesBitIdentical) {
  a_killed_rank_is_requeued_and_resumes_bit_identical({"cpp", SIM_SURROGATE_BINARY});
}
TEST_F(SimSurrogateUnderSrun, CxxAPreemptionWarningSavesAtTheSolverStepRequeuesAndResumesBitIdentical) {
  a_preemption_warning_saves_requeues_and_resumes_bit_identical({"cpp", SIM_SURROGATE_BINARY});
}
#endif
#ifdef SIM_SURROGATE_F_BINARY
TEST_F(SimSurrogateUnderSrun, FortranAKilledRankIsRequeuedAndResumesBitIdentical) {
  a_killed_rank_is_requeued_and_resumes_bit_identical({"fortran", SIM_SURROGATE_F_BINARY});
}
TEST_F(SimSurrogateUnderSrun, FortranAPreemptionWarningSavesAtTheSolverStepRequeuesAndResumesBitIdentical) {
  a_preemption_warning_saves_requeues_and_resumes_bit_identical({"fortran", SIM_SURROGATE_F_BINARY});
}
#endif

// The requeue decisions of slurm/tenax-requeue, with stand-in ranks.
using RequeueDecision = SrunLaunch;

TEST_F(RequeueDecision, AConfigurationErrorIsNeverRequeued) {
  submit("config-error", STANDIN_SOLVER " " + base_dir_of("config-error").string() + " 100 config-error");
  ASSERT_EQ(wait_done(60s), "FAILED") << explain();
  const std::string text = log();
  // Not checked: rank 0's own message ("unknown configuration key 'bogus'"). When srun ends the step
  // at once (--kill-on-bad-exit), the last lines a task wrote may never reach the log (seen 1 in 10).
  // Rank 0's 2 ended the other rank (SIGTERM): srun's own status is 143, its report names task 0's 2.
  EXPECT_NE(text.find("a task exited 2 (its peers were then ended by srun)"), std::string::npos) << text;
  EXPECT_NE(text.find("the step exited 2 (a configuration error): not requeued"), std::string::npos) << text;
  EXPECT_EQ(text.find("scontrol requeue"), std::string::npos) << text;
  EXPECT_NE(run("scontrol show job " + job_).find("Restarts=0"), std::string::npos) << explain();
  EXPECT_NE(run("scontrol show job " + job_).find("ExitCode=2:0"), std::string::npos) << explain();
}

TEST_F(RequeueDecision, AFailingJobIsRequeuedAtMostMaxFailuresTimes) {
  submit("fail-twice", STANDIN_SOLVER " " + base_dir_of("fail-twice").string() + " 100 fail", "TENAX_MAX_FAILURES=1");
  ASSERT_EQ(start_requeued_job_now(60s), "PENDING") << explain();
  ASSERT_EQ(wait_done(60s), "FAILED") << explain();
  const std::string text = log();
  EXPECT_NE(text.find("failed run 1 of at most 2 (--max-failures 1 requeues)"), std::string::npos) << text;
  EXPECT_NE(text.find("SLURM_RESTART_COUNT=1"), std::string::npos) << text;
  EXPECT_NE(text.find("2 failed runs of job " + job_ + ", more than --max-failures 1: not requeued"), std::string::npos)
      << text;
  EXPECT_NE(run("scontrol show job " + job_).find("Restarts=1"), std::string::npos) << explain();
}

// The stand-in's run with a warning: exit 3 → requeue → it resumes where it saved (the scaffold
// of (b) without a solver: if this fails and (b) fails too, look at the Slurm side first).
TEST_F(RequeueDecision, APreemptedStandInIsRequeuedAndResumes) {
  const std::string o = base_dir_of("standin-preempt").string();
  submit("standin-preempt", STANDIN_SOLVER " " + o + " 400 run");
  ASSERT_TRUE(tenax::testing::wait_for_path(out_ / "saved-1", 60s)) << explain();
  ASSERT_EQ(run("scancel --batch --signal=USR1 " + job_ + " 2>&1"), "") << explain();
  ASSERT_EQ(start_requeued_job_now(60s), "PENDING") << explain();
  ASSERT_EQ(wait_done(120s), "COMPLETED") << explain();
  const std::string text = log();
  EXPECT_NE(text.find("standin rank 0: preempted at step"), std::string::npos) << text;
  EXPECT_TRUE(text.find("tenax-requeue: the step exited 3: preempted") != std::string::npos ||
              text.find("after the preemption warning: treated as preempted") != std::string::npos)
      << text;
  EXPECT_NE(text.find("standin rank 0 of 2: run 1, starting at step "), std::string::npos) << text;
  EXPECT_EQ(read_text(out_ / "final-0"), "400\n") << explain();
  EXPECT_EQ(read_text(out_ / "final-1"), "400\n") << explain();
}

}  // namespace
