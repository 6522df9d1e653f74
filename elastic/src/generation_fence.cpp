#include "tenax/elastic/generation_fence.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string errno_text(int err) { return std::strerror(err); }

StatusOr<UniqueFd> open_lock_file(const fs::path& dir) {
  const fs::path path = dir / GenerationFence::kLockFile;
  // Read-write: NFS emulates flock with byte-range locks, and an exclusive one needs a
  // descriptor open for writing.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) {
    const int err = errno;
    return Status(StatusCode::kFailedPrecondition,
                  "cannot open the generation fence's lock file " + path.string() + ": " + errno_text(err) +
                      (err == ENOENT ? " (the job's shared control directory does not exist on this node)" : ""));
  }
  return StatusOr<UniqueFd>(std::move(fd));
}

// flock(`operation`) on `fd` by `deadline`. Polls with LOCK_NB so that the wait has a deadline
// (a blocking flock cannot be given one without signals); holders keep the lock for
// milliseconds, so the poll starts at 1 ms and backs off to 20 ms.
Status lock_by(int fd, int operation, const fs::path& dir, Clock::time_point deadline,
               std::chrono::milliseconds timeout) {
  const fs::path path = dir / GenerationFence::kLockFile;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (::flock(fd, operation | LOCK_NB) == 0) return Status::ok();
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {
      return Status(StatusCode::kFailedPrecondition,
                    "cannot lock the generation fence " + path.string() + ": flock: " + errno_text(err) +
                        " (the shared file system must support flock across nodes: NFS, or Lustre mounted "
                        "with -o flock)");
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status(StatusCode::kUnavailable,
                    "could not lock the generation fence " + path.string() + " within " +
                        std::to_string(timeout.count()) +
                        " ms: another process holds it (a committer or a rendezvous service; is the shared file "
                        "system stalled?)");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

// The recorded generation, kNoGeneration without the file.
StatusOr<std::int64_t> read_generation(const fs::path& dir) {
  const fs::path path = dir / GenerationFence::kGenerationFile;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    if (err == ENOENT) return GenerationFence::kNoGeneration;
    return Status(StatusCode::kFailedPrecondition,
                  "cannot read the generation fence " + path.string() + ": " + errno_text(err));
  }
  std::string text;
  char buffer[64];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return Status(StatusCode::kFailedPrecondition,
                    "cannot read the generation fence " + path.string() + ": " + errno_text(err));
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > 64) break;  // a generation has at most 18 digits: anything longer is not one
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const bool digits = !text.empty() && text.size() <= 18 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    return Status(StatusCode::kDataLoss,
                  "the generation fence " + path.string() + " holds '" + text.substr(0, 32) +
                      "', not a generation number; it is only ever replaced atomically, so something else wrote "
                      "it. Stop every agent of the job before removing it");
  }
  return static_cast<std::int64_t>(std::stoll(text));
}

}  // namespace

FenceHold::FenceHold(UniqueFd fd, std::int64_t generation) : fd_(std::move(fd)), generation_(generation) {}

FenceHold::FenceHold(FenceHold&& other) noexcept : fd_(std::move(other.fd_)), generation_(other.generation_) {}

FenceHold& FenceHold::operator=(FenceHold&& other) noexcept {
  if (this != &other) {
    unlock();
    fd_ = std::move(other.fd_);
    generation_ = other.generation_;
  }
  return *this;
}

FenceHold::~FenceHold() { unlock(); }

// LOCK_UN before the descriptor closes: a child forked meanwhile shares the open file
// description (and with it the lock) until it exits or execs, and closing only our descriptor
// would leave the fence locked for that long; LOCK_UN releases it for every sharer.
void FenceHold::unlock() noexcept {
  if (fd_) ::flock(fd_.get(), LOCK_UN);
  fd_.reset();
}

GenerationFence::GenerationFence(fs::path dir) : dir_(std::move(dir)) {}

StatusOr<std::int64_t> GenerationFence::current() const { return read_generation(dir_); }

Status GenerationFence::advance(std::int64_t generation, std::chrono::milliseconds timeout) const {
  if (generation < 0) {
    return Status(StatusCode::kInvalidArgument, "generation " + std::to_string(generation) + " is negative");
  }
  const auto deadline = Clock::now() + timeout;
  StatusOr<UniqueFd> opened = open_lock_file(dir_);
  if (!opened.is_ok()) return opened.status();
  const FenceHold exclusive(std::move(opened).value(), generation);  // unlocks on every return
  if (Status locked = lock_by(exclusive.fd_.get(), LOCK_EX, dir_, deadline, timeout); !locked.is_ok()) return locked;
  StatusOr<std::int64_t> recorded = read_generation(dir_);
  if (!recorded.is_ok()) return recorded.status();
  if (recorded.value() >= generation) {
    return Status(StatusCode::kAborted, "generation " + std::to_string(generation) + " cannot be formed: generation " +
                                            std::to_string(recorded.value()) + " was already formed (recorded in " +
                                            (dir_ / kGenerationFile).string() + "); number new generations above it");
  }
  try {
    files::atomic_write(dir_ / kGenerationFile, std::to_string(generation) + "\n");
  } catch (const StorageError& e) {
    return Status(StatusCode::kFailedPrecondition,
                  "cannot record generation " + std::to_string(generation) + " in the fence: " + e.what());
  }
  return Status::ok();  // `exclusive` ends here: the lock is released once the number is durable
}

StatusOr<FenceHold> GenerationFence::hold_if_current(std::int64_t generation, std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  StatusOr<UniqueFd> opened = open_lock_file(dir_);
  if (!opened.is_ok()) return opened.status();
  FenceHold hold(std::move(opened).value(), generation);  // unlocks on every return but the last
  if (Status locked = lock_by(hold.fd_.get(), LOCK_SH, dir_, deadline, timeout); !locked.is_ok()) return locked;
  StatusOr<std::int64_t> recorded = read_generation(dir_);
  if (!recorded.is_ok()) return recorded.status();
  if (recorded.value() > generation) {
    return Status(StatusCode::kAborted, "generation " + std::to_string(generation) +
                                            " is no longer current (generation " + std::to_string(recorded.value()) +
                                            " formed)");
  }
  return StatusOr<FenceHold>(std::move(hold));
}

}  // namespace tenax::elastic
