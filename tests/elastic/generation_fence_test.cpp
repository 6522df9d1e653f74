// GenerationFence: generations only go up, a stale one is refused, and a FenceHold keeps a new
// generation from forming — checked against a real second process (fork), never by timing.
#include "tenax/elastic/generation_fence.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

fs::path fresh_dir(const std::string& name) { return tenax::testing::fresh_dir("fence", name); }

std::int64_t current_of(const GenerationFence& fence) {
  StatusOr<std::int64_t> current = fence.current();
  EXPECT_TRUE(current.is_ok()) << current.status().to_string();
  return current.is_ok() ? current.value() : -2;
}

// A pipe whose ends close with it; a child writes one byte to say where it got to.
class Pipe {
 public:
  Pipe() {
    int fds[2] = {-1, -1};
    EXPECT_EQ(::pipe(fds), 0);
    read_.reset(fds[0]);
    write_.reset(fds[1]);
  }
  void signal() const { (void)!::write(write_.get(), "x", 1); }
  // Blocks until the other side wrote a byte; false if it closed first (the child died).
  bool await() const {
    char c = 0;
    return ::read(read_.get(), &c, 1) == 1;
  }
  void close_write() { write_.reset(); }

 private:
  UniqueFd read_;
  UniqueFd write_;
};

// Runs `child` in a forked process whose exit status is what it returns; returns the pid.
template <typename Fn>
pid_t fork_child(Fn child) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(child());
  EXPECT_GT(pid, 0);
  return pid;
}

int exit_status(pid_t pid) {
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ElasticGenerationFence, GenerationsOnlyGoUp) {
  GenerationFence fence(fresh_dir("monotonic"));
  EXPECT_EQ(current_of(fence), GenerationFence::kNoGeneration) << "nothing recorded yet";
  ASSERT_TRUE(fence.advance(0).is_ok());
  EXPECT_EQ(current_of(fence), 0);
  ASSERT_TRUE(fence.advance(3).is_ok()) << "numbers may skip (a failover numbers above all it saw)";
  EXPECT_EQ(current_of(fence), 3);

  const Status same = fence.advance(3);
  EXPECT_EQ(same.code(), StatusCode::kAborted) << same.to_string();
  const Status older = fence.advance(2);
  EXPECT_EQ(older.code(), StatusCode::kAborted);
  EXPECT_NE(older.message().find("generation 2 cannot be formed: generation 3 was already formed"), std::string::npos)
      << older.message();
  EXPECT_EQ(current_of(fence), 3) << "a refused advance changes nothing";
  // Durable and shared: another object on the same directory sees it.
  EXPECT_EQ(current_of(GenerationFence(fence.dir())), 3);
}

TEST(ElasticGenerationFence, HoldIsRefusedOnceANewerGenerationFormed) {
  GenerationFence fence(fresh_dir("hold"));
  {
    StatusOr<FenceHold> before_any = fence.hold_if_current(0);
    ASSERT_TRUE(before_any.is_ok()) << "an unused fence fences nothing: " << before_any.status().to_string();
  }
  ASSERT_TRUE(fence.advance(4).is_ok());
  {
    StatusOr<FenceHold> hold = fence.hold_if_current(4);
    ASSERT_TRUE(hold.is_ok()) << hold.status().to_string();
    EXPECT_EQ(hold.value().generation(), 4);
  }
  ASSERT_TRUE(fence.advance(5).is_ok());
  StatusOr<FenceHold> stale = fence.hold_if_current(4);
  ASSERT_FALSE(stale.is_ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kAborted);
  EXPECT_EQ(stale.status().message(), "generation 4 is no longer current (generation 5 formed)");
  EXPECT_TRUE(fence.hold_if_current(5).is_ok());
}

TEST(ElasticGenerationFence, SharedHoldsCoexistButAnAdvanceCannotPassOne) {
  GenerationFence fence(fresh_dir("shared"));
  ASSERT_TRUE(fence.advance(1).is_ok());
  StatusOr<FenceHold> first = fence.hold_if_current(1);
  StatusOr<FenceHold> second = fence.hold_if_current(1, milliseconds(0));
  ASSERT_TRUE(first.is_ok());
  ASSERT_TRUE(second.is_ok()) << "two committers may hold at once: " << second.status().to_string();
  // Each call has its own open file description, so the lock excludes within one process too.
  const Status blocked = fence.advance(2, milliseconds(0));
  EXPECT_EQ(blocked.code(), StatusCode::kUnavailable) << blocked.to_string();
  EXPECT_EQ(current_of(fence), 1);
  { FenceHold gone = std::move(first).value(); }
  EXPECT_EQ(fence.advance(2, milliseconds(0)).code(), StatusCode::kUnavailable) << "the second hold still holds";
  { FenceHold gone = std::move(second).value(); }
  EXPECT_TRUE(fence.advance(2, milliseconds(0)).is_ok());
  EXPECT_EQ(current_of(fence), 2);
}

// The rendezvous service of a new generation runs in another process (on another node): while
// a committer holds the fence, its advance can neither pass nor be lost; it goes through once
// the hold is released, and not before.
TEST(ElasticGenerationFence, AdvanceFromAnotherProcessWaitsUntilTheHoldIsReleased) {
  const fs::path dir = fresh_dir("process");
  const fs::path released = dir / "released-by-parent";
  GenerationFence fence(dir);
  ASSERT_TRUE(fence.advance(2).is_ok());
  auto hold = std::make_unique<StatusOr<FenceHold>>(fence.hold_if_current(2));
  ASSERT_TRUE(hold->is_ok());

  Pipe trying;
  const pid_t child = fork_child([&] {
    GenerationFence other(dir);
    // Deterministic: the lock is held now, so an attempt that does not wait must be refused.
    if (other.advance(3, milliseconds(0)).code() != StatusCode::kUnavailable) return 10;
    trying.signal();
    if (!other.advance(3, std::chrono::minutes(2)).is_ok()) return 11;
    // The parent creates this file before it releases the hold: an advance that got here
    // earlier went through a held fence.
    return fs::exists(released) ? 0 : 12;
  });
  trying.close_write();  // so that await() sees a child that died without writing
  ASSERT_TRUE(trying.await()) << "the child died before trying to advance (exit " << exit_status(child) << ")";
  EXPECT_EQ(current_of(fence), 2) << "the child's advance went through a held fence";
  std::ofstream(released).put('x');
  hold.reset();
  EXPECT_EQ(exit_status(child), 0) << "10: advance not refused while held; 11: advance failed after release; "
                                      "12: advance passed before release";
  EXPECT_EQ(current_of(fence), 3);
  EXPECT_EQ(fence.hold_if_current(2).status().code(), StatusCode::kAborted);
}

// A committer that dies (SIGKILL) while holding the fence does not lock the job out: the kernel
// drops its lock with its last descriptor.
TEST(ElasticGenerationFence, AHolderKilledWithSigkillReleasesTheFence) {
  const fs::path dir = fresh_dir("killed");
  GenerationFence fence(dir);
  ASSERT_TRUE(fence.advance(1).is_ok());
  Pipe holding;
  const pid_t child = fork_child([&] {
    StatusOr<FenceHold> hold = GenerationFence(dir).hold_if_current(1);
    if (!hold.is_ok()) return 10;
    holding.signal();
    for (;;) ::pause();
  });
  holding.close_write();
  ASSERT_TRUE(holding.await()) << "the child could not hold the fence (exit " << exit_status(child) << ")";
  EXPECT_EQ(fence.advance(2, milliseconds(0)).code(), StatusCode::kUnavailable) << "the child holds it";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  EXPECT_EQ(exit_status(child), 128 + SIGKILL);
  EXPECT_TRUE(fence.advance(2, milliseconds(0)).is_ok());
}

// A process that forks while it holds the fence (a worker starting a helper) shares the lock
// with the child; releasing the hold must release it for both, or the fence would stay locked
// for as long as the child lives.
TEST(ElasticGenerationFence, ReleasingAHoldAlsoReleasesTheCopyAForkedChildInherited) {
  const fs::path dir = fresh_dir("forked");
  GenerationFence fence(dir);
  ASSERT_TRUE(fence.advance(1).is_ok());
  auto hold = std::make_unique<StatusOr<FenceHold>>(fence.hold_if_current(1));
  ASSERT_TRUE(hold->is_ok());
  Pipe stop;
  const pid_t child = fork_child([&] {
    stop.close_write();
    (void)stop.await();  // returns when the parent closes its end
    return 0;
  });
  hold.reset();
  const Status advanced = fence.advance(2, milliseconds(0));
  stop.close_write();
  EXPECT_EQ(exit_status(child), 0);
  EXPECT_TRUE(advanced.is_ok()) << advanced.to_string();
}

TEST(ElasticGenerationFence, AnUnreadableGenerationFileFailsClosed) {
  const fs::path dir = fresh_dir("corrupt");
  std::ofstream(dir / GenerationFence::kGenerationFile) << "seven\n";
  GenerationFence fence(dir);
  EXPECT_EQ(fence.current().status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(fence.hold_if_current(7).status().code(), StatusCode::kDataLoss) << "never commit on a guess";
  EXPECT_EQ(fence.advance(8).code(), StatusCode::kDataLoss);
  EXPECT_NE(fence.current().status().message().find((dir / "generation").string()), std::string::npos);
}

TEST(ElasticGenerationFence, AMissingDirectoryIsAnErrorThatNamesIt) {
  GenerationFence fence(fresh_dir("missing") / "not-there");
  const Status advanced = fence.advance(1);
  EXPECT_EQ(advanced.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(advanced.message().find("not-there/generation.lock"), std::string::npos) << advanced.message();
  EXPECT_EQ(fence.hold_if_current(1).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tenax::elastic
