// ProgressFile: what `tenax run --hang-timeout` watches. It writes the step, rate-limits its
// writes, and is a no-op without a path. Beside it, while it exists, the wait beacon says from a
// thread of its own whether the process is blocked on its peers (PeerWaitGuard), so that the
// agent can tell a worker waiting in a collective from the one that hung.
#include "tenax/elastic/progress_file.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "support/eventually.h"
#include "tenax/elastic/peer_wait.h"
#include "tenax/elastic/wait_beacon.h"

namespace tenax::elastic {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(ElasticProgressFile, WritesTheLatestStepAtMostOncePerInterval) {
  const auto path = std::filesystem::path(::testing::TempDir()) / ("tenax-progress-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ProgressFile progress(path, std::chrono::milliseconds(200));
  ASSERT_TRUE(progress.enabled());
  progress.report(7);
  EXPECT_EQ(read(path), "7") << "the first report always writes";
  progress.report(8);
  EXPECT_EQ(read(path), "7") << "a report within the interval is skipped";
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  progress.report(9);
  EXPECT_EQ(read(path), "9");
  std::filesystem::remove(path);
}

TEST(ElasticProgressFile, FinishRemovesTheFileAndTheNextReportWritesAtOnce) {
  const auto path = std::filesystem::path(::testing::TempDir()) / ("tenax-progress-fin-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ProgressFile progress(path, std::chrono::hours(1));  // no report would pass the rate limit again
  progress.report(30);
  ASSERT_TRUE(std::filesystem::exists(path));
  progress.finish();
  EXPECT_FALSE(std::filesystem::exists(path)) << "a finished phase leaves nothing for the agent to judge";
  progress.finish();  // idempotent
  progress.report(31);
  EXPECT_EQ(read(path), "31") << "a new phase reports at once, despite the rate limit";
  std::filesystem::remove(path);
}

TEST(ElasticProgressFile, WithoutThePathItDoesNothing) {
  ::unsetenv(kProgressFileVariable);
  ProgressFile progress = ProgressFile::from_env();
  EXPECT_FALSE(progress.enabled());
  progress.report(1);  // no file, no throw
}

TEST(ElasticProgressFile, AnUnwritablePathIsNotFatal) {
  ProgressFile progress("/nonexistent-dir/tenax/progress");
  EXPECT_NO_THROW(progress.report(1));
  EXPECT_NO_THROW(progress.report(2));
}

std::filesystem::path fresh_path(const std::string& stem) {
  const auto path = std::filesystem::path(::testing::TempDir()) / (stem + "-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  std::filesystem::remove(wait_beacon_path(path));
  return path;
}

std::optional<PeerWaitState> beacon_of(const std::filesystem::path& progress) {
  return parse_wait_beacon(read(wait_beacon_path(progress)) + "\n");
}

TEST(ElasticPeerWait, AGuardMarksTheProcessWaitingFromTheFirstInToTheLastOut) {
  ASSERT_FALSE(peer_wait_state().waiting) << "no guard of this test is alive yet";
  auto outer = std::make_unique<PeerWaitGuard>();
  EXPECT_TRUE(peer_wait_state().waiting);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  // Another thread's guard (GradSync's allreduce while the training thread waits for it) joins
  // the wait that is under way: the wait still counts from the first guard in.
  std::unique_ptr<PeerWaitGuard> inner;
  std::thread([&inner] { inner = std::make_unique<PeerWaitGuard>(); }).join();
  EXPECT_GE(peer_wait_state().waited, std::chrono::milliseconds(30));
  outer.reset();
  EXPECT_TRUE(peer_wait_state().waiting) << "the other thread's guard is still alive";
  EXPECT_GE(peer_wait_state().waited, std::chrono::milliseconds(30));
  const auto ending = std::chrono::steady_clock::now();
  inner.reset();
  const PeerWaitState after = peer_wait_state();
  const auto since_ending =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - ending);
  EXPECT_FALSE(after.waiting);
  ASSERT_TRUE(after.since_wait.has_value()) << "a wait has ended";
  // Counted from the last guard out (whole milliseconds on both sides: one of rounding).
  EXPECT_LE(*after.since_wait, since_ending + std::chrono::milliseconds(1));
}

TEST(ElasticWaitBeacon, ItsLineSaysWhetherTheProcessWaitsAndForHowLong) {
  PeerWaitState waiting;
  waiting.waiting = true;
  waiting.waited = std::chrono::milliseconds(1234);
  EXPECT_EQ(format_wait_beacon(waiting), "waiting 1234\n");
  PeerWaitState working;
  working.since_wait = std::chrono::milliseconds(56);
  EXPECT_EQ(format_wait_beacon(working), "working 56\n");
  EXPECT_EQ(format_wait_beacon(PeerWaitState{}), "working -1\n") << "no wait has ended yet";
  for (const PeerWaitState& s : {waiting, working, PeerWaitState{}}) {
    const std::optional<PeerWaitState> back = parse_wait_beacon(format_wait_beacon(s));
    ASSERT_TRUE(back.has_value()) << format_wait_beacon(s);
    EXPECT_EQ(back->waiting, s.waiting);
    EXPECT_EQ(back->waited, s.waited);
    EXPECT_EQ(back->since_wait, s.since_wait);
  }
  for (const char* bad : {"", "waiting", "waiting -5\n", "working -2\n", "sleeping 3\n", "waiting 3 more\n", "7\n"}) {
    EXPECT_FALSE(parse_wait_beacon(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_EQ(wait_beacon_path("/run/progress/rank-3"), std::filesystem::path("/run/progress/rank-3.wait"));
}

TEST(ElasticProgressFile, TheFirstReportStartsTheWaitBeaconWhichTracksTheGuards) {
  const auto path = fresh_path("tenax-progress-beacon");
  ProgressFile progress(path, std::chrono::milliseconds(1));
  progress.report(1);
  ASSERT_TRUE(std::filesystem::exists(wait_beacon_path(path))) << "the beacon is there as soon as the progress file";
  ASSERT_TRUE(beacon_of(path).has_value()) << read(wait_beacon_path(path));
  EXPECT_FALSE(beacon_of(path)->waiting);
  {
    const PeerWaitGuard in_a_collective;
    EXPECT_TRUE(tenax::testing::eventually([&] {
      const auto b = beacon_of(path);
      return b && b->waiting;
    })) << read(wait_beacon_path(path));
  }
  EXPECT_TRUE(tenax::testing::eventually([&] {
    const auto b = beacon_of(path);
    return b && !b->waiting && b->since_wait.has_value();
  })) << read(wait_beacon_path(path));
}

TEST(ElasticProgressFile, TheBeaconBeatsWhileTheReportsStop) {
  const auto path = fresh_path("tenax-progress-beat");
  ProgressFile progress(path, std::chrono::hours(1));
  progress.report(5);
  const auto beacon = wait_beacon_path(path);
  const auto first = std::filesystem::last_write_time(beacon);
  const auto reported = std::filesystem::last_write_time(path);
  // No report comes (a training thread stuck in a collective): the beacon's own thread goes on.
  EXPECT_TRUE(tenax::testing::eventually([&] { return std::filesystem::last_write_time(beacon) > first; }));
  EXPECT_EQ(std::filesystem::last_write_time(path), reported) << "only report() writes the progress file";
}

TEST(ElasticProgressFile, FinishAndDestructionStopTheBeaconAndRemoveItsFile) {
  const auto path = fresh_path("tenax-progress-stop");
  const auto beacon = wait_beacon_path(path);
  {
    ProgressFile progress(path, std::chrono::hours(1));
    progress.report(1);
    ASSERT_TRUE(std::filesystem::exists(beacon));
    progress.finish();
    EXPECT_FALSE(std::filesystem::exists(beacon));
    // Its thread is gone: nothing writes the file again (three of its intervals).
    std::this_thread::sleep_for(3 * kWaitBeaconInterval);
    EXPECT_FALSE(std::filesystem::exists(beacon)) << "a beacon thread outlived finish()";
    progress.report(2);
    EXPECT_TRUE(std::filesystem::exists(beacon)) << "the next phase starts it again";
  }
  EXPECT_FALSE(std::filesystem::exists(beacon)) << "destruction stops it and removes its file";
  std::this_thread::sleep_for(3 * kWaitBeaconInterval);
  EXPECT_FALSE(std::filesystem::exists(beacon)) << "a beacon thread outlived its ProgressFile";
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(beacon.string() + ".tmp")));
  std::filesystem::remove(path);
}

TEST(ElasticProgressFile, AMovedProgressFileKeepsItsBeacon) {
  const auto path = fresh_path("tenax-progress-move");
  ProgressFile first(path, std::chrono::hours(1));
  first.report(1);
  ProgressFile second = std::move(first);
  EXPECT_TRUE(std::filesystem::exists(wait_beacon_path(path)));
  second.finish();
  EXPECT_FALSE(std::filesystem::exists(wait_beacon_path(path)));
}

}  // namespace
}  // namespace tenax::elastic
