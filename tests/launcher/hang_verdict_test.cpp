// Which worker is the culprit of a hang (launcher/src/hang_verdict.h): the verdict on each
// worker from its progress, its wait beacon and /proc, and which of a node's workers are hung.
#include "hang_verdict.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tenax::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr seconds kTimeout{3};

// One look at a worker: its progress age, whether /proc says it is stopped, and its beacon's age
// and line (no age: it keeps no beacon); the beacon's state is waiting for `waited` ms, or
// working since its last wait ended `since_wait` ms before (-1: none ended).
HangFacts look(int progress_ms, bool stopped, std::optional<int> beacon_ms, bool waiting, int waited_ms,
               int since_wait_ms = -1) {
  HangFacts f;
  f.progress_age = milliseconds(progress_ms);
  f.stopped = stopped;
  if (beacon_ms) f.beacon_age = milliseconds(*beacon_ms);
  f.beacon.waiting = waiting;
  f.beacon.waited = milliseconds(waited_ms);
  if (since_wait_ms >= 0) f.beacon.since_wait = milliseconds(since_wait_ms);
  return f;
}

const char* name(HangRole role) {
  switch (role) {
    case HangRole::kProgressing: return "progressing";
    case HangRole::kCulprit: return "culprit";
    case HangRole::kWaiter: return "waiter";
    case HangRole::kLongWaiter: return "long waiter";
    case HangRole::kUnexplained: return "unexplained";
  }
  return "?";
}

TEST(LauncherHangVerdict, EachWorkerIsJudgedByItsProgressItsBeaconAndProc) {
  struct Case {
    const char* what;
    HangFacts facts;
    seconds timeout;
    HangRole role;
    const char* why;  // a part of the culprit's reason (empty: none given)
  };
  const std::vector<Case> cases = {
      {"progress within the timeout", look(2000, true, 5000, false, 0), kTimeout, HangRole::kProgressing, ""},
      {"progress exactly as old as the timeout", look(3000, false, std::nullopt, false, 0), kTimeout,
       HangRole::kProgressing, ""},
      {"stopped (SIGSTOP), whatever its beacon last said", look(3500, true, 100, true, 3400), kTimeout,
       HangRole::kCulprit, "the process is stopped"},
      {"stale without a beacon (the Python helper)", look(3500, false, std::nullopt, false, 0), kTimeout,
       HangRole::kUnexplained, ""},
      {"its beacon stale too: the whole process is stuck", look(3500, false, 2500, true, 900), kTimeout,
       HangRole::kCulprit, "the whole process is stuck"},
      {"its beacon fresh and waiting in a collective", look(3500, false, 100, true, 3200), kTimeout, HangRole::kWaiter,
       ""},
      {"its beacon fresh, not waiting: it spins or sleeps", look(3500, false, 100, false, 0, 3000), kTimeout,
       HangRole::kCulprit, "spins or is stuck in a system call"},
      {"its beacon fresh, never waited", look(3500, false, 100, false, 0), kTimeout, HangRole::kCulprit,
       "outside any collective"},
      {"left a collective 0.7 s ago (a failed collective, then the rejoin)", look(3500, false, 200, false, 0, 500),
       kTimeout, HangRole::kWaiter, ""},
      {"left a collective 1.1 s ago", look(3500, false, 300, false, 0, 800), kTimeout, HangRole::kCulprit,
       "outside any collective"},
      {"waiting for over twice the timeout", look(7000, false, 100, true, 6000), kTimeout, HangRole::kLongWaiter,
       "a deadlock"},
      {"waiting for exactly twice the timeout", look(7000, false, 100, true, 5900), kTimeout, HangRole::kWaiter, ""},
      {"waiting long, but silent only since the agent restarted its hang clock (a recovery formed)",
       look(4000, false, 100, true, 9000), kTimeout, HangRole::kWaiter, ""},
      {"a beacon of 1.9 s is fresh under a 3 s timeout", look(3500, false, 1900, true, 1000), kTimeout,
       HangRole::kWaiter, ""},
      {"a beacon of 1.5 s is stale under a 1 s timeout", look(1500, false, 1500, true, 1000), seconds(1),
       HangRole::kCulprit, "the whole process is stuck"},
  };
  for (const Case& c : cases) {
    const HangVerdict v = judge_hang(c.facts, c.timeout);
    EXPECT_EQ(v.role, c.role) << c.what << ": " << name(v.role) << " instead of " << name(c.role);
    if (*c.why != '\0') {
      EXPECT_NE(v.why.find(c.why), std::string::npos) << c.what << ": " << v.why;
    }
    if (c.role == HangRole::kProgressing || c.role == HangRole::kWaiter || c.role == HangRole::kUnexplained) {
      EXPECT_TRUE(v.why.empty()) << c.what << ": " << v.why;
    }
  }
}

TEST(LauncherHangVerdict, AWaiterHasWaitedAsLongAsItsBeaconSaidPlusTheBeaconsAge) {
  EXPECT_EQ(judge_hang(look(3500, false, 400, true, 3200), kTimeout).waited, milliseconds(3600));
  EXPECT_EQ(judge_hang(look(3500, false, 200, false, 0, 500), kTimeout).waited, milliseconds(0));
}

TEST(LauncherHangVerdict, OnlyCulpritsAreHungAndWaitersOnlyWhenNoCulpritExplainsTheirWait) {
  using R = HangRole;
  struct Case {
    const char* what;
    std::vector<HangRole> roles;
    bool narrow;
    std::vector<bool> hung;
  };
  const std::vector<Case> cases = {
      {"nobody is stale", {R::kProgressing, R::kProgressing}, true, {false, false}},
      {"the culprit, and a waiter on it", {R::kCulprit, R::kWaiter}, true, {true, false}},
      {"without in-process recovery, a waiter still is no culprit", {R::kWaiter, R::kCulprit}, false, {false, true}},
      {"waiters only: their culprit is on another node", {R::kWaiter, R::kWaiter}, true, {false, false}},
      {"long waiters with no culprit: a deadlock", {R::kLongWaiter, R::kLongWaiter}, true, {true, true}},
      {"a long waiter beside a culprit waits for it", {R::kCulprit, R::kLongWaiter}, true, {true, false}},
      {"no beacons: every stale worker, as before", {R::kUnexplained, R::kUnexplained}, true, {true, true}},
      {"no beacons, one stopped: only it (in-process recovery)", {R::kCulprit, R::kUnexplained}, true, {true, false}},
      {"no beacons, one stopped, restart mode: all", {R::kCulprit, R::kUnexplained}, false, {true, true}},
      {"a worker making progress is never hung", {R::kProgressing, R::kCulprit}, true, {false, true}},
      {"no workers", {}, true, {}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(hung_workers(c.roles, c.narrow), c.hung) << c.what;
  }
}

}  // namespace
}  // namespace tenax::launcher
