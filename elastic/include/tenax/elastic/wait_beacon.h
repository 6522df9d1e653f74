// The agent's second look at a worker whose progress file went stale (`tenax run
// --hang-timeout`, progress_file.h): beside the progress file, "<progress>.wait" says whether the
// process is blocked on its peers (peer_wait.h) and for how long, rewritten every
// kWaitBeaconInterval by a thread of its own. A worker blocked in a collective keeps its beacon
// fresh while its progress stops; a stopped process lets both go stale; a training thread that
// spins or sleeps outside a collective keeps the beacon fresh and saying so. That is how an agent
// that sees only its own node's workers tells the culprit of a hang from the peers that wait for
// it on this node and on every other (launcher/src/hang_verdict.h judges).
//
// The file holds one line: "waiting <ms>" (blocked on peers for that long when written) or
// "working <ms>" (not blocked; the last wait ended that long before, -1: none has). It is
// replaced by rename, so a reader never sees half of it; its modification time says how fresh it
// is. A write that fails is logged once and otherwise ignored: the beacon must never stop a run.
//
// Thread-safety: WaitBeacon's methods from one thread (it owns the writer thread and joins it);
// the functions are pure.
//
//   WaitBeacon beacon(wait_beacon_path(progress));   // the file exists when this returns
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "tenax/elastic/peer_wait.h"

namespace tenax::elastic {

inline constexpr std::chrono::milliseconds kWaitBeaconInterval{250};

/// "<progress file>.wait": where the agent looks for the beacon of the worker reporting there.
std::filesystem::path wait_beacon_path(const std::filesystem::path& progress_file);
/// The beacon's line for `state`.
std::string format_wait_beacon(const PeerWaitState& state);
/// The state a beacon's text reports; nullopt when it is not a beacon's line.
std::optional<PeerWaitState> parse_wait_beacon(const std::string& text);

/// Keeps the beacon at `path` fresh while it lives; removes it when stopped or destroyed.
class WaitBeacon {
 public:
  /// Writes the beacon once, then starts the thread that rewrites it every `interval`.
  explicit WaitBeacon(std::filesystem::path path, std::chrono::milliseconds interval = kWaitBeaconInterval);
  ~WaitBeacon();
  WaitBeacon(const WaitBeacon&) = delete;
  WaitBeacon& operator=(const WaitBeacon&) = delete;

  /// Stops and joins the thread, then removes the file. Idempotent.
  void stop();
  const std::filesystem::path& path() const { return path_; }

 private:
  void write();
  void run();

  std::filesystem::path path_;
  std::filesystem::path temporary_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool warned_ = false;  // the writer thread's, after the first write
  std::thread thread_;
};

}  // namespace tenax::elastic
