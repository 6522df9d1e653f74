// Which of a node's workers is the culprit of a hang (`tenax run --hang-timeout`), as a pure
// function of what the agent sees of each: how old its progress file is (written by its training
// thread), its wait beacon (elastic/wait_beacon.h, written by a thread of its own: whether the
// process is blocked on its peers, and since when) and whether /proc says it is stopped.
//
// A hung worker stops its peers too: they block in the next collective, on its node and on every
// other, and their progress goes stale as well. An agent sees only its own node, so it cannot
// compare; it tells them apart by the beacon instead. The culprit is stopped, or silent as a
// whole (its beacon went stale), or running outside any wait on its peers (its training thread
// spins or is stuck in a system call); a worker whose beacon is fresh and says it waits on its
// peers is a waiter and keeps its process: the culprit's agent kills the culprit, and the
// waiters' collectives then fail and they heal in process. Waiting is not a licence for ever:
// a waiter blocked and silent for over twice the timeout with no culprit found here is
// deadlocked inside a collective with everyone running, and is hung. A worker without a beacon (the Python
// helper writes none) is judged by its progress alone, as before beacons.
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tenax/elastic/peer_wait.h"

namespace tenax::launcher {

/// A beacon older than this (or than the hang timeout, if shorter) is stale: its process,
/// every thread of it, has stopped. Eight of its intervals, for a loaded machine.
inline constexpr std::chrono::milliseconds kBeaconStaleAfter{2000};
/// A worker that left a wait on its peers this recently still counts as waiting: a failed
/// collective and the rejoin that follows it leave a gap between two waits.
inline constexpr std::chrono::milliseconds kPeerWaitGrace{1000};

/// What the agent knows of one worker when it looks.
struct HangFacts {
  std::chrono::milliseconds progress_age{0};  ///< since its progress file last changed
  bool stopped = false;                       ///< /proc: stopped (SIGSTOP, a debugger)
  /// Since its wait beacon last changed; none: it keeps no beacon.
  std::optional<std::chrono::milliseconds> beacon_age;
  elastic::PeerWaitState beacon;  ///< what the beacon said when it was written
};

enum class HangRole {
  kProgressing,  ///< progress within the timeout: not judged
  kCulprit,      ///< stopped, silent as a whole, or stuck outside any wait on its peers
  kWaiter,       ///< blocked on its peers: waits for a culprit, here or on another node
  kLongWaiter,   ///< blocked on its peers and silent for over twice the timeout: deadlocked unless a culprit is found
  kUnexplained,  ///< stale, with no beacon to say why: judged by its progress alone
};

struct HangVerdict {
  HangRole role = HangRole::kProgressing;
  /// How long it has been blocked on its peers, as of the look (waiters).
  std::chrono::milliseconds waited{0};
  /// For the log: why a culprit is one ("the process is stopped", ...); empty otherwise.
  std::string why;
};

HangVerdict judge_hang(const HangFacts& facts, std::chrono::seconds timeout);

/// Which of the workers judged `roles` are hung: every culprit; the long waiters only when no
/// culprit was found (a culprit here explains their wait); the unexplained unless `narrow` (the
/// others live on: in-process recovery) and a culprit was found.
std::vector<bool> hung_workers(const std::vector<HangRole>& roles, bool narrow);

}  // namespace tenax::launcher
