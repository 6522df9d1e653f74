// What the Slurm test fixture (slurm_cluster.h) reads from the local cluster to decide whether it
// is whole: node states as sinfo prints them, and which slurmd processes run. Pure functions, no
// I/O, so that the decision is tested without a cluster (cluster_health_test.cpp).
// Why it exists: one slurmd that died in one test (seen: node2's, mid step launch) left the node
// DOWN, and every later test found fewer than 2 nodes: one fault, 16 failures. The fixture now
// fails the test during which a slurmd died or a node went down, and brings the cluster back
// before the next test.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tenax::testing::slurm {

/// One line of `sinfo -h -N -o '%N|%T|%E'`: node name, long state with its flag suffix (e.g.
/// "idle", "down*", "drained", "mixed-"), and the reason Slurm gives ("none" when it has none).
struct NodeStatus {
  std::string name;
  std::string state;
  std::string reason;
};

/// The format string of sinfo that parse_nodes reads.
inline constexpr const char* kSinfoNodeFormat = "%N|%T|%E";

/// Parses the lines of `sinfo -h -N -o '%N|%T|%E'`, one entry per node (a node listed once per
/// partition appears once). Lines without two '|' are ignored.
inline std::vector<NodeStatus> parse_nodes(const std::string& text) {
  std::vector<NodeStatus> nodes;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const auto first = line.find('|');
    const auto second = first == std::string::npos ? first : line.find('|', first + 1);
    if (second == std::string::npos) continue;
    NodeStatus node{line.substr(0, first), line.substr(first + 1, second - first - 1), line.substr(second + 1)};
    bool seen = false;
    for (const NodeStatus& n : nodes) seen = seen || n.name == node.name;
    if (!seen && !node.name.empty()) nodes.push_back(std::move(node));
  }
  return nodes;
}

/// The state without sinfo's flag suffixes ("down*" -> "down", "mixed-" -> "mixed").
inline std::string base_state(const std::string& state) {
  const auto end = state.find_first_of("*~#!%$@^-");
  return state.substr(0, end);
}

/// A node a new job can use now: it responds (no '*') and is idle, mixed, allocated, completing
/// or planned (the backfill scheduler's mark for a node set aside for a waiting job, which a
/// concurrent test's job causes under ctest -j2).
inline bool usable(const NodeStatus& node) {
  if (node.state.find('*') != std::string::npos) return false;
  const std::string s = base_state(node.state);
  return s == "idle" || s == "mixed" || s == "allocated" || s == "completing" || s == "planned";
}

/// A node Slurm has taken out of service (down, drained or draining, failed): it stays so until
/// `scontrol update nodename=NAME state=resume`, even once its slurmd answers again (drain), or
/// until its slurmd registers again (down, with ReturnToService=2).
inline bool out_of_service(const NodeStatus& node) {
  const std::string s = base_state(node.state);
  return s.rfind("down", 0) == 0 || s.rfind("drain", 0) == 0 || s.rfind("fail", 0) == 0;
}

/// slurmd pid of each node (0: not running), as the fixture saw them at two moments.
using SlurmdPids = std::map<std::string, long>;

/// The nodes whose slurmd ran at `before` and is not the same process at `after` (gone, or
/// started again under another pid): a slurmd that died in between. One line per node.
inline std::vector<std::string> slurmd_deaths(const SlurmdPids& before, const SlurmdPids& after) {
  std::vector<std::string> deaths;
  for (const auto& [node, pid] : before) {
    if (pid == 0) continue;
    const auto now = after.find(node);
    const long now_pid = now == after.end() ? 0 : now->second;
    if (now_pid == pid) continue;
    deaths.push_back("slurmd of " + node + " (pid " + std::to_string(pid) + ") died" +
                     (now_pid == 0 ? " and is not running"
                                   : " (it runs again as pid " + std::to_string(now_pid) +
                                         ": another test's fixture restarted it)"));
  }
  return deaths;
}

/// One line per problem that keeps the cluster from being whole: fewer than `want` nodes, a node
/// not usable (with its state and Slurm's reason), a node whose slurmd is not running. Empty
/// when the cluster is whole.
inline std::vector<std::string> cluster_problems(const std::vector<NodeStatus>& nodes, const SlurmdPids& slurmd,
                                                 std::size_t want) {
  std::vector<std::string> problems;
  if (nodes.size() < want) {
    problems.push_back("sinfo lists " + std::to_string(nodes.size()) + " node(s), not " + std::to_string(want));
  }
  for (const NodeStatus& n : nodes) {
    if (!usable(n)) problems.push_back("node " + n.name + " is " + n.state + " (reason: " + n.reason + ")");
  }
  for (const auto& [node, pid] : slurmd) {
    if (pid == 0) problems.push_back("slurmd of " + node + " is not running");
  }
  return problems;
}

}  // namespace tenax::testing::slurm
