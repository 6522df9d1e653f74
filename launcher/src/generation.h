// What one generation of workers is and how it ended: the plan a GenerationSource hands the
// agent (who runs, where their store is) and the record the agent keeps of it (agent.json).
// Thread-safety: plain values.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tenax::launcher {

/// How a generation ended, as the agent saw it from this node.
enum class Outcome {
  kFinished,
  kFailed,
  kConfigError,
  kPreempted,
  kInterrupted,
  kRendezvousRestart,  ///< multi-node: the rendezvous ended the generation (another node)
  kRendezvousLost,     ///< multi-node: the rendezvous service is gone
  kRequeued,           ///< multi-node under Slurm: no generation could form; the job was requeued
};

/// The name agent.json and the logs use ("finished", "restarted by the rendezvous", ...).
const char* outcome_name(Outcome outcome);

/// Who runs in one generation: all ranks on this node (single node), or this node's share.
struct GenerationPlan {
  int generation = 0;
  int node_rank = 0;
  int num_nodes = 1;
  int rank_offset = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  ///< MASTER_PORT: picked by the agent of node rank 0 for this generation
  std::string store_endpoint;
  /// TORCHELASTIC_RESTART_COUNT / TENAX_RESTART_COUNT as the workers see it: on one node the
  /// restarts so far; across nodes the generation's number, the same on every node (the nodes
  /// do not share their counts, the rendezvous numbers generations for all of them).
  int restart_count = 0;
};

struct GenerationRecord {
  int generation = 0;
  int master_port = 0;
  Outcome outcome = Outcome::kFailed;
  std::string reason;  ///< multi-node: why the rendezvous ended it
  std::vector<nlohmann::json> workers;
};

}  // namespace tenax::launcher
