// The agent-to-worker contract of in-process recovery (DESIGN.md decision 13): what the agents
// and the workers of a `tenax run` job say to each other through the job's key-value store (the
// agent's own on one node, the rendezvous host's across nodes), outside any generation's
// "gen/<n>/" prefix.
//
//   worker (Trainer::begin, after every rejoin): add(ready_key(g), 1)   "I heal in process in g"
//   agent, when a worker of generation g dies and every live one was ready in g, once it knows
//   generation g' (one node: the next number; several: the one the rendezvous formed next):
//       set(layout_key(g', node), "<rank offset> <world size>")  where this node's ranks stand in g'
//       set(kLatestKey, g'), set(declared_key(g + 1 .. g'), g')
//       add("gen/<g>/" + kSupersededKey, 1)      wakes g's waits outside collectives (a commit)
//       and either set(spare_key(node, id), "<local rank> <g'> <restarts>") for a warm spare, or
//       starts a new process with TENAX_REPLACEMENT=1
//   survivor: its collective fails → drops its communicator → waits for declared_key(g + 1) →
//       reads kLatestKey (several failures may have declared more than one) → reads its node's
//       layout there: its rank is the offset plus its local rank, which never changes, so a
//       lost node renumbers the survivors and shrinks the world → builds that generation's
//       communicator and heals (sdk/src/peer_heal.h)
//   spare: WorkerContext::from_env() waits for spare_key(its node, its id), then joins as that
//       local rank.
//
// A worker learns that the agent recovers in process from TENAX_RECOVERY=in-process; without
// it (the default, a Python script, an MPI launch) every failure restarts the generation.
// Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tenax::elastic {

inline constexpr const char* kRecoveryVariable = "TENAX_RECOVERY";
inline constexpr const char* kRecoveryInProcess = "in-process";
/// Set (to "1") for a fresh process that takes a lost rank's place in a running generation.
inline constexpr const char* kReplacementVariable = "TENAX_REPLACEMENT";
/// Set for a warm spare: its id, under which the agent assigns it a rank (spare_key).
inline constexpr const char* kSpareIdVariable = "TENAX_SPARE_ID";
/// The agent's node id (--node-id; "local" for a one-node run): names the node's layout and
/// spares in the job-wide store.
inline constexpr const char* kNodeIdVariable = "TENAX_NODE_ID";

inline constexpr const char* kLatestKey = "recovery/latest";
/// Under the lost generation's own prefix ("gen/<g>/"), non-zero once the agent declared a
/// newer one. A worker of g that waits on its peers outside a collective — a checkpoint commit
/// waiting for a dead rank's shard — reads it (Store::add(key, 0), which never blocks) and
/// stops waiting: a collective fails at once when a peer dies, a store wait would only time out.
inline constexpr const char* kSupersededKey = "superseded";
inline std::string declared_key(std::int64_t generation) { return "recovery/declared/" + std::to_string(generation); }
inline std::string ready_key(std::int64_t generation) { return "recovery/ready/" + std::to_string(generation); }
inline std::string spare_key(const std::string& node_id, int spare_id) {
  return "recovery/spare/" + node_id + "/" + std::to_string(spare_id);
}
inline std::string layout_key(std::int64_t generation, const std::string& node_id) {
  return "recovery/layout/" + std::to_string(generation) + "/" + node_id;
}

/// A spare's assignment: the local rank it takes, the generation it joins, and the job's
/// restart count (TENAX_RESTART_COUNT) at that point, which the spare's start-up environment
/// predates. Its rank and the world size come from its node's layout in that generation.
struct SpareAssignment {
  int local_rank = 0;
  std::int64_t generation = 0;
  std::int64_t restart_count = 0;
};
std::string format_spare_assignment(const SpareAssignment& assignment);
/// nullopt when `text` is not "<local rank> <generation> <restart count>", each >= 0.
std::optional<SpareAssignment> parse_spare_assignment(const std::string& text);

/// Where one node's workers stand in a generation: local rank l is rank rank_offset + l of
/// world_size.
struct NodeLayout {
  int rank_offset = 0;
  int world_size = 1;
};
std::string format_node_layout(const NodeLayout& layout);
/// nullopt when `text` is not "<rank offset> <world size>" with 0 <= offset < world size.
std::optional<NodeLayout> parse_node_layout(const std::string& text);

}  // namespace tenax::elastic
