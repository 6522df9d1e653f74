#include "worker_environment.h"

#include <set>

#include "tenax/core/error.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/in_process_recovery.h"
#include "tenax/elastic/job_keys.h"

namespace tenax::launcher {

const std::vector<std::string>& worker_env_names() {
  static const std::vector<std::string> names = {"RANK",
                                                 "LOCAL_RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_WORLD_SIZE",
                                                 "GROUP_RANK",
                                                 "GROUP_WORLD_SIZE",
                                                 "ROLE_RANK",
                                                 "ROLE_WORLD_SIZE",
                                                 "ROLE_NAME",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "TORCHELASTIC_RESTART_COUNT",
                                                 "TORCHELASTIC_MAX_RESTARTS",
                                                 "TORCHELASTIC_RUN_ID",
                                                 "TORCHELASTIC_USE_AGENT_STORE",
                                                 "TENAX_GENERATION",
                                                 "TENAX_RESTART_COUNT",
                                                 "TENAX_RDZV_ENDPOINT",
                                                 "TENAX_RUN_DIR",
                                                 "TENAX_RECOVERY",
                                                 elastic::kJobKeysVariable,
                                                 elastic::kFenceDirVariable,
                                                 elastic::kNodeIdVariable};
  return names;
}

std::vector<std::string> worker_environment(const std::vector<std::string>& inherited, const WorkerEnvironment& v) {
  if (v.master_port < 1 || v.master_port > 65535) {
    throw Error("MASTER_PORT for worker rank " + std::to_string(v.rank) + " is " + std::to_string(v.master_port) +
                ", not a port in 1..65535 (the agent of node rank 0 picks it)");
  }
  const std::set<std::string> ours(worker_env_names().begin(), worker_env_names().end());
  std::vector<std::string> env;
  env.reserve(inherited.size() + ours.size() + 1);
  bool nccl_error_handling = false;
  for (const std::string& entry : inherited) {
    const std::string name = entry.substr(0, entry.find('='));
    const bool per_process =
        name == kProgressFileEnv || name == elastic::kReplacementVariable || name == elastic::kSpareIdVariable;
    if (ours.count(name) == 0 && !per_process) env.push_back(entry);
    nccl_error_handling = nccl_error_handling || name == "TORCH_NCCL_ASYNC_ERROR_HANDLING";
  }
  auto put = [&env](const char* name, const std::string& value) { env.push_back(std::string(name) + "=" + value); };
  const std::string rank = std::to_string(v.rank);
  const std::string world = std::to_string(v.world_size);
  put("RANK", rank);
  put("LOCAL_RANK", v.local_rank < 0 ? rank : std::to_string(v.local_rank));
  put("WORLD_SIZE", world);
  put("LOCAL_WORLD_SIZE", v.local_world_size <= 0 ? world : std::to_string(v.local_world_size));
  put("GROUP_RANK", std::to_string(v.group_rank));
  put("GROUP_WORLD_SIZE", std::to_string(v.group_world_size));
  put("ROLE_RANK", rank);
  put("ROLE_WORLD_SIZE", world);
  put("ROLE_NAME", kWorkerRoleName);
  put("MASTER_ADDR", v.master_addr);
  put("MASTER_PORT", std::to_string(v.master_port));
  put("TORCHELASTIC_RESTART_COUNT", std::to_string(v.restart_count));
  put("TORCHELASTIC_MAX_RESTARTS", std::to_string(v.max_restarts));
  put("TORCHELASTIC_RUN_ID", v.run_id);
  // Python's str(False), as torchrun writes it: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT
  // (the agent's store is Tenax's own, at TENAX_RDZV_ENDPOINT, which PyTorch cannot speak).
  put("TORCHELASTIC_USE_AGENT_STORE", "False");
  // torchrun's default, kept when the user set it: NCCL errors abort the collective (and the
  // worker) rather than hang it, so that the agent sees a failure and restarts the group.
  if (!nccl_error_handling) put("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  put("TENAX_GENERATION", std::to_string(v.generation));
  put("TENAX_RESTART_COUNT", std::to_string(v.restart_count));
  put("TENAX_RDZV_ENDPOINT", v.rdzv_endpoint);
  put("TENAX_RUN_DIR", v.run_dir);
  if (!v.progress_file.empty()) put(kProgressFileEnv, v.progress_file);
  if (!v.keys_file.empty()) put(elastic::kJobKeysVariable, v.keys_file);
  if (!v.fence_dir.empty()) put(elastic::kFenceDirVariable, v.fence_dir);
  put(elastic::kRecoveryVariable, v.recovery);
  if (v.replacement) put(elastic::kReplacementVariable, "1");
  if (v.spare_id >= 0) put(elastic::kSpareIdVariable, std::to_string(v.spare_id));
  put(elastic::kNodeIdVariable, v.node_id);
  return env;
}

WorkerEnvironment JobEnvironment::for_worker(const GenerationPlan& plan, int local) const {
  WorkerEnvironment values;
  values.rank = plan.rank_offset + local;
  values.world_size = plan.world_size;
  values.generation = plan.generation;
  values.restart_count = plan.restart_count;
  values.max_restarts = options->max_restarts;
  values.rdzv_endpoint = plan.store_endpoint;
  values.master_port = plan.master_port;
  values.run_id = run_id;
  values.run_dir = run_dir.string();
  values.keys_file = keys_file.string();
  values.fence_dir = keys_file.parent_path().string();  // the job's shared control directory
  values.recovery = options->recovery == RecoveryMode::kInProcess ? elastic::kRecoveryInProcess : "restart";
  values.node_id = node_id;
  if (multi_node) {
    values.local_rank = local;
    values.local_world_size = options->nproc_per_node;
    values.group_rank = plan.node_rank;
    values.group_world_size = plan.num_nodes;
    values.master_addr = plan.master_addr;
  }
  if (options->hang_timeout.count() > 0) {
    values.progress_file = (run_dir / "progress" / ("rank-" + std::to_string(values.rank))).string();
  }
  return values;
}

}  // namespace tenax::launcher
