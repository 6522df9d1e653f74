// How a worker tells its agent that it is making progress (`tenax run --hang-timeout`): it
// rewrites a small file whose path the agent puts in TENAX_PROGRESS_FILE, and the agent treats
// a worker whose file has not changed for the timeout as hung (SIGSTOPped, spinning, stuck in a
// system call or on I/O) and replaces it or restarts the generation. The file holds the last
// reported step. While the file exists, a WaitBeacon (wait_beacon.h) beside it says whether the
// process is blocked on its peers: a worker that waits in a collective for a hung peer makes no
// progress either, and the beacon is how the agent knows it is not the culprit.
//
// report() is cheap enough to call per step or per batch: it writes at most once per
// `min_interval` (the agent checks once a second). Without the variable it does nothing. A
// write that fails is logged once and otherwise ignored: progress reporting must never stop a
// run. Only the caller's thread writes the progress file, so a training thread that stops
// stops its progress even though the beacon's thread lives on.
// Thread-safety: one thread (the training thread); move-only.
//
//   auto progress = tenax::elastic::ProgressFile::from_env();
//   for (...) { train_step(); progress.report(step); }
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "tenax/elastic/wait_beacon.h"

namespace tenax::elastic {

inline constexpr const char* kProgressFileVariable = "TENAX_PROGRESS_FILE";

class ProgressFile {
 public:
  /// The file named by TENAX_PROGRESS_FILE, or a disabled reporter when it is unset or empty.
  static ProgressFile from_env(std::chrono::milliseconds min_interval = std::chrono::milliseconds(250));
  /// Reports to `path` (empty: disabled).
  explicit ProgressFile(std::filesystem::path path,
                        std::chrono::milliseconds min_interval = std::chrono::milliseconds(250));
  ~ProgressFile();
  ProgressFile(ProgressFile&&) noexcept;
  ProgressFile& operator=(ProgressFile&&) noexcept;

  /// Records `step` as the latest progress (rate-limited; the first call always writes, after
  /// starting the wait beacon).
  void report(std::int64_t step);
  /// A phase that reports progress (training, an evaluation) is over: removes the file, and
  /// with it the agent's judgement (it judges only a worker whose file exists), so that what
  /// follows — the last barrier, the teardown — may be silent for longer than the timeout
  /// without being taken for a hang. Stops the wait beacon and removes its file. The next
  /// report() writes at once and judging resumes.
  void finish();
  bool enabled() const { return !path_.empty(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::chrono::milliseconds min_interval_;
  std::chrono::steady_clock::time_point last_write_{};
  bool written_ = false;
  bool warned_ = false;
  std::unique_ptr<WaitBeacon> beacon_;  // while the progress file exists
  bool beacon_failed_ = false;
};

}  // namespace tenax::elastic
