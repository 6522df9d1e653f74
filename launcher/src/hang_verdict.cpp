#include "hang_verdict.h"

#include <algorithm>

#include <fmt/format.h>

namespace tenax::launcher {
namespace {

double seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000.0; }

}  // namespace

HangVerdict judge_hang(const HangFacts& facts, std::chrono::seconds timeout) {
  HangVerdict v;
  if (facts.progress_age <= timeout) return v;
  if (facts.stopped) {
    v.role = HangRole::kCulprit;
    v.why = "the process is stopped";
    return v;
  }
  if (!facts.beacon_age) {
    v.role = HangRole::kUnexplained;
    return v;
  }
  const std::chrono::milliseconds age = *facts.beacon_age;
  // Never longer than the timeout: a process that stopped as a whole is then found by the time
  // its progress is stale, wherever it stopped.
  const auto stale_after = std::min<std::chrono::milliseconds>(kBeaconStaleAfter, timeout);
  if (age > stale_after) {
    v.role = HangRole::kCulprit;
    v.why = fmt::format("its wait beacon is {:.1f} s old too: the whole process is stuck", seconds(age));
    return v;
  }
  const elastic::PeerWaitState& b = facts.beacon;
  const bool waiting = b.waiting || (b.since_wait && *b.since_wait + age <= kPeerWaitGrace);
  if (!waiting) {
    v.role = HangRole::kCulprit;
    v.why = "it runs, outside any collective: its training thread spins or is stuck in a system call";
    return v;
  }
  v.waited = b.waiting ? b.waited + age : std::chrono::milliseconds(0);
  // Both the wait and the silence: when the agent restarts a survivor's hang clock (it touches
  // the progress file as a recovery's generation forms), the wait before that does not count.
  if (std::min(v.waited, facts.progress_age) > 2 * timeout) {
    v.role = HangRole::kLongWaiter;
    v.why = fmt::format(
        "it has waited in a collective for {:.1f} s, over twice the timeout, and no worker of this node is the "
        "culprit: a deadlock inside the collective",
        seconds(v.waited));
    return v;
  }
  v.role = HangRole::kWaiter;
  return v;
}

std::vector<bool> hung_workers(const std::vector<HangRole>& roles, bool narrow) {
  const bool culprit = std::find(roles.begin(), roles.end(), HangRole::kCulprit) != roles.end();
  std::vector<bool> hung(roles.size(), false);
  for (std::size_t i = 0; i < roles.size(); ++i) {
    switch (roles[i]) {
      case HangRole::kCulprit: hung[i] = true; break;
      case HangRole::kLongWaiter: hung[i] = !culprit; break;
      case HangRole::kUnexplained: hung[i] = !(narrow && culprit); break;
      case HangRole::kProgressing:
      case HangRole::kWaiter: break;
    }
  }
  return hung;
}

}  // namespace tenax::launcher
