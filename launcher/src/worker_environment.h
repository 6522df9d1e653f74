// The environment of a worker: torchrun's variables (torch/distributed/elastic/agent/server/
// local_elastic_agent.py) and Tenax's, computed from the job's values and the generation's plan.
// Thread-safety: plain values and pure functions.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "generation.h"
#include "run_options.h"
#include "tenax/elastic/progress_file.h"

namespace tenax::launcher {

/// The environment variable names the agent sets for each worker: those of torchrun's
/// LocalElasticAgent (torch/distributed/elastic/agent/server/local_elastic_agent.py), then Tenax's.
const std::vector<std::string>& worker_env_names();

/// The role torchrun gives its workers by default (ROLE_NAME; `torchrun --role`).
inline constexpr const char* kWorkerRoleName = "default";

/// The environment of worker `rank`: `inherited` ("KEY=VALUE", e.g. from environ) without any
/// of worker_env_names(), followed by this worker's values for them; plus, as torchrun does,
/// TORCH_NCCL_ASYNC_ERROR_HANDLING=1 unless `inherited` sets it. Throws tenax::Error when
/// master_port is not a port (1..65535).
struct WorkerEnvironment {
  int rank = 0;
  int world_size = 1;
  int generation = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string rdzv_endpoint;  ///< "tcp://127.0.0.1:PORT": Tenax's store (TENAX_RDZV_ENDPOINT)
  /// MASTER_PORT: free on master_addr for rank 0 to host the workers' own store (PyTorch's
  /// TCPStore); never Tenax's rendezvous, which a worker's init_process_group cannot bind.
  int master_port = 0;
  std::string run_id = "none";  ///< TORCHELASTIC_RUN_ID (torchrun's --rdzv_id, default "none")
  std::string run_dir;          ///< absolute
  // Multi-node values; the defaults are one node holding every rank.
  int local_rank = -1;                    ///< -1: the same as rank
  int local_world_size = 0;               ///< 0: the same as world_size
  int group_rank = 0;                     ///< node rank
  int group_world_size = 1;               ///< nodes in the generation
  std::string master_addr = "127.0.0.1";  ///< host of node rank 0
  std::string progress_file;              ///< TENAX_PROGRESS_FILE when not empty (--hang-timeout)
  std::string keys_file;                  ///< TENAX_KEYS_FILE when not empty: the job's CURVE keys
  std::string fence_dir;                  ///< TENAX_FENCE_DIR when not empty: the job's GenerationFence
  /// TENAX_RECOVERY: "in-process" when the agent replaces lost ranks while the others live on.
  std::string recovery = "restart";
  bool replacement = false;       ///< TENAX_REPLACEMENT=1: takes a lost rank's place, heals from peers
  int spare_id = -1;              ///< TENAX_SPARE_ID when >= 0: a warm spare waiting for a rank
  std::string node_id = "local";  ///< TENAX_NODE_ID: --node-id, naming the node's layout and spares
};
std::vector<std::string> worker_environment(const std::vector<std::string>& inherited, const WorkerEnvironment& values);

/// Set for a worker only when --hang-timeout is on: the file whose changes show its progress.
inline constexpr const char* kProgressFileEnv = elastic::kProgressFileVariable;  // the worker side writes it

/// The values every worker of this agent shares, and the one place that turns them and a
/// generation's plan into a worker's WorkerEnvironment.
struct JobEnvironment {
  const RunOptions* options = nullptr;  ///< borrowed; outlives this
  bool multi_node = false;
  std::string run_id;               ///< TORCHELASTIC_RUN_ID
  std::filesystem::path run_dir;    ///< absolute
  std::filesystem::path keys_file;  ///< absolute; its directory is the job's control directory
  std::string node_id = "local";
  std::vector<std::string> inherited;  ///< the agent's own environment ("KEY=VALUE")

  /// Local worker `local` of `plan`'s generation.
  WorkerEnvironment for_worker(const GenerationPlan& plan, int local) const;
  /// The whole environment of that worker process: inherited plus worker_environment().
  std::vector<std::string> environ_for(const WorkerEnvironment& values) const {
    return worker_environment(inherited, values);
  }
};

}  // namespace tenax::launcher
