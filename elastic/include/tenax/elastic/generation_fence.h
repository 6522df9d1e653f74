// Fencing by generation: a generation that is no longer current cannot commit a checkpoint or
// move `latest` (no split brain). Two partitions of a job may both believe they are the job, for
// as long as it takes the stale one to notice (a paused agent, a cut link, a rendezvous host
// that comes back after a failover). The rendezvous service records every generation it forms
// here before any worker of it starts; a committer holds the fence while it renames its
// checkpoint into place and updates `latest`, and does neither once a newer generation formed.
//
// The fence lives in the job's shared control directory (the directory of the job's keys file,
// `tenax-job.keys`, which every node of a job already shares); workers find it in
// TENAX_FENCE_DIR, set by `tenax run`. Two files:
//   <dir>/generation        the highest generation formed, as decimal text; written atomically
//                           (tmp + fsync + rename + fsync of <dir>), so a reader sees the old or
//                           the new number, never a mix;
//   <dir>/generation.lock   an flock(2) lock: advance() takes it exclusive, a FenceHold shared.
// Without the `generation` file no generation has been recorded (kNoGeneration) and every
// generation is current: a job whose rendezvous does not advance the fence is not fenced.
//
// Why flock on the shared file system: the check "no newer generation formed" and the rename +
// `latest` update must be atomic against a new generation forming on another node, and the only
// thing every node of a job shares is that directory. flock is released by the kernel when the
// process dies (SIGKILL included), so a crashed committer never leaves the job fenced off (a
// whole node that dies holding it: when the NFS server's lease for it expires, 90 s on NFSv4).
// Assumptions: the file system gives flock cluster-wide meaning — local file systems (tests,
// one node), NFS (Linux emulates flock with NFS byte-range locks: NFSv4, or NFSv3 with lockd),
// Lustre mounted with `-o flock` (`localflock` makes locks node-local: not enough across nodes;
// `noflock` makes flock fail, which the fence reports instead of ignoring). The lock file is
// opened read-write because NFS's emulation needs a writable descriptor for an exclusive lock.
// A lock that cannot be taken within the deadline is kUnavailable: a committer then does not
// commit (it fails closed), a rendezvous service does not form the generation.
//
// Thread-safety: a GenerationFence is an immutable value (the directory); its calls may run
// concurrently from any thread or process. flock locks belong to the open file description, so
// each call opens its own descriptor: two FenceHolds in one process are as independent as in two
// processes. A FenceHold belongs to the thread that holds it (move-only). A child forked while a
// hold lives shares its lock; releasing the hold (LOCK_UN) releases it for the child too.
//
//   // the rendezvous service, before it sends ASSIGN for generation g (numbered above current()):
//   GenerationFence fence(keys_file.parent_path());
//   if (Status s = fence.advance(g); !s.is_ok()) {
//     // kAborted: g or a newer one was already formed (another service won): do not send ASSIGN
//     // for g; step down, or number again above current().
//   }
//   // a committer of generation g:
//   StatusOr<FenceHold> hold = fence.hold_if_current(g);
//   if (hold.is_ok()) { rename(tmp, step_dir); write(latest); }  // lock released with `hold`
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>

#include "tenax/core/status.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {

/// Where workers find the fence directory (set by `tenax run`); unset or empty: no fencing.
inline constexpr const char* kFenceDirVariable = "TENAX_FENCE_DIR";

/// How long advance() and hold_if_current() wait for the lock by default. Holders keep it for a
/// rename and a small atomic write; a minute covers a stalled shared file system.
inline constexpr std::chrono::milliseconds kDefaultFenceTimeout{std::chrono::seconds(60)};

/// A shared lock on the fence: while it lives no newer generation can be recorded. Released by
/// the destructor (or when the process dies). Move-only.
class FenceHold {
 public:
  FenceHold(FenceHold&& other) noexcept;
  FenceHold& operator=(FenceHold&& other) noexcept;
  FenceHold(const FenceHold&) = delete;
  FenceHold& operator=(const FenceHold&) = delete;
  ~FenceHold();

  /// The generation that was checked to be current when the hold was taken.
  std::int64_t generation() const { return generation_; }

 private:
  friend class GenerationFence;
  FenceHold(UniqueFd fd, std::int64_t generation);
  void unlock() noexcept;

  UniqueFd fd_;  // the lock file, locked shared; unlocked and closed with the hold
  std::int64_t generation_ = 0;
};

class GenerationFence {
 public:
  /// current() before any generation was recorded.
  static constexpr std::int64_t kNoGeneration = -1;
  static constexpr const char* kGenerationFile = "generation";
  static constexpr const char* kLockFile = "generation.lock";

  /// The fence in `dir` (which must exist: it is the job's shared control directory).
  explicit GenerationFence(std::filesystem::path dir);

  /// The directory holding the fence's two files.
  const std::filesystem::path& dir() const { return dir_; }

  /// Records `generation` as formed: under the exclusive lock, if it is above current(), writes
  /// it durably and returns ok. kAborted when current() >= `generation` (the message names both
  /// numbers: a stale rendezvous service must not form it); kUnavailable when the lock cannot be
  /// taken by `timeout`; kFailedPrecondition / kDataLoss for an I/O error or an unreadable file.
  [[nodiscard]] Status advance(std::int64_t generation, std::chrono::milliseconds timeout = kDefaultFenceTimeout) const;

  /// The highest generation recorded, kNoGeneration if none. Reads without the lock (the file
  /// is replaced atomically). kDataLoss when the file holds no generation number.
  [[nodiscard]] StatusOr<std::int64_t> current() const;

  /// Takes the shared lock and checks that no generation above `generation` was recorded; the
  /// returned hold keeps the lock, so no newer generation can form until it is destroyed.
  /// kAborted ("generation G is no longer current (generation H formed)") when one did;
  /// kUnavailable when the lock cannot be taken by `timeout`; other codes as advance().
  [[nodiscard]] StatusOr<FenceHold> hold_if_current(std::int64_t generation,
                                                    std::chrono::milliseconds timeout = kDefaultFenceTimeout) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace tenax::elastic
