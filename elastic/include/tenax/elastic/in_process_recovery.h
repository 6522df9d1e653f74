// The agent-to-worker contract of in-process recovery (DESIGN.md decision 13): what the agent
// and the workers of one `tenax run` node say to each other through the node's key-value store,
// outside any generation's "gen/<n>/" prefix.
//
//   worker (Trainer::begin, after every rejoin): add(ready_key(g), 1)   "I heal in process in g"
//   agent, when a worker of generation g dies and every live one was ready in g:
//       set(declared_key(g'), g'), set(kLatestKey, g')                 g' = the next generation
//       add("gen/<g>/" + kSupersededKey, 1)      wakes g's waits outside collectives (a commit)
//       and either set(spare_key(id), "<rank> <g'> <restarts>") for a warm spare, or starts a new process
//       with TENAX_REPLACEMENT=1
//   survivor: its collective fails → drops its communicator → waits for declared_key(g + 1) →
//       reads kLatestKey (several failures may have declared more than one) → builds that
//       generation's communicator and heals (sdk/src/peer_heal.h)
//   spare: WorkerContext::from_env() waits for spare_key(its id), then is that rank.
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

inline constexpr const char* kLatestKey = "recovery/latest";
/// Under the lost generation's own prefix ("gen/<g>/"), non-zero once the agent declared a
/// newer one. A worker of g that waits on its peers outside a collective — a checkpoint commit
/// waiting for a dead rank's shard — reads it (Store::add(key, 0), which never blocks) and
/// stops waiting: a collective fails at once when a peer dies, a store wait would only time out.
inline constexpr const char* kSupersededKey = "superseded";
inline std::string declared_key(std::int64_t generation) {
  return "recovery/declared/" + std::to_string(generation);
}
inline std::string ready_key(std::int64_t generation) { return "recovery/ready/" + std::to_string(generation); }
inline std::string spare_key(int spare_id) { return "recovery/spare/" + std::to_string(spare_id); }

/// A spare's assignment: the rank it takes, the generation it joins, and the job's restart
/// count (TENAX_RESTART_COUNT) at that point, which the spare's start-up environment predates.
struct SpareAssignment {
  int rank = 0;
  std::int64_t generation = 0;
  std::int64_t restart_count = 0;
};
std::string format_spare_assignment(const SpareAssignment& assignment);
/// nullopt when `text` is not "<rank> <generation> <restart count>", each >= 0.
std::optional<SpareAssignment> parse_spare_assignment(const std::string& text);

}  // namespace tenax::elastic
