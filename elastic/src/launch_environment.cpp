// Who this rank is, from the variables of the launcher that started it (direct_launch.h).
#include <cctype>
#include <cstdlib>
#include <limits>
#include <vector>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/elastic/direct_launch.h"

namespace tenax::elastic {
namespace {

// Typed reads from the snapshot; errors name the variable, as core/env.h does for the process.
class Variables {
 public:
  explicit Variables(const EnvironmentMap& env) : env_(env) {}

  std::optional<std::string> get(const std::string& name) const {
    const auto it = env_.find(name);
    if (it == env_.end()) return std::nullopt;
    return it->second;
  }
  bool has(const std::string& name) const { return env_.count(name) != 0; }
  std::int64_t require_int(const std::string& name, const std::string& why) const {
    const auto value = get(name);
    if (!value) throw ConfigError("environment variable " + name + " is not set; " + why);
    return env::parse_int(*value, name);
  }
  std::optional<std::int64_t> get_int(const std::string& name) const {
    const auto value = get(name);
    if (!value) return std::nullopt;
    return env::parse_int(*value, name);
  }

 private:
  const EnvironmentMap& env_;
};

int checked(const std::string& name, std::int64_t value, std::int64_t low, std::int64_t high, const std::string& why) {
  if (value < low || value > high) throw ConfigError(name + "=" + std::to_string(value) + " is invalid: " + why);
  return static_cast<int>(value);
}

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

// Rank and world size from a launcher's pair of variables, checked against each other.
void read_rank(const Variables& vars, WorkerIdentity& id, const std::string& rank_name, const std::string& size_name,
               const std::string& launcher) {
  const std::string why = "set by " + launcher;
  id.world_size = checked(size_name, vars.require_int(size_name, why), 1, kIntMax, "must be at least 1");
  id.rank = checked(rank_name, vars.require_int(rank_name, why), 0, id.world_size - 1,
                    "must be in [0, " + size_name + ") with " + size_name + "=" + std::to_string(id.world_size));
}

// Local rank and size; when the launcher gives none, the whole world counts as one node (as
// from_env defaults LOCAL_WORLD_SIZE to WORLD_SIZE).
void read_local(const Variables& vars, WorkerIdentity& id, const std::string& local_rank_name,
                std::optional<std::int64_t> local_size, const std::string& local_size_name) {
  id.local_world_size = checked(local_size_name, local_size.value_or(id.world_size), 1, id.world_size,
                                "must be in [1, world size] with world size " + std::to_string(id.world_size));
  id.local_rank = checked(local_rank_name, vars.get_int(local_rank_name).value_or(id.rank % id.local_world_size), 0,
                          id.local_world_size - 1,
                          "must be in [0, " + std::to_string(id.local_world_size) + ") (the tasks on this node)");
}

// Slurm's compressed task counts per node, "2(x3),1" = 2,2,2,1; the count of node `node`.
std::optional<std::int64_t> tasks_on_node(const std::string& name, const std::string& text, std::int64_t node) {
  std::int64_t index = 0;
  std::size_t pos = 0;
  const auto bad = [&] { return ConfigError(name + "='" + text + "' is not Slurm's task list (e.g. '2(x3),1')"); };
  while (pos < text.size()) {
    std::size_t end = pos;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end == pos) throw bad();
    const std::int64_t tasks = env::parse_int(text.substr(pos, end - pos), name);
    std::int64_t repeat = 1;
    pos = end;
    if (pos < text.size() && text[pos] == '(') {
      if (text.compare(pos, 2, "(x") != 0) throw bad();
      const std::size_t close = text.find(')', pos);
      if (close == std::string::npos) throw bad();
      repeat = env::parse_int(text.substr(pos + 2, close - pos - 2), name);
      pos = close + 1;
    }
    if (node < index + repeat) return tasks;
    index += repeat;
    if (pos < text.size()) {
      if (text[pos] != ',') throw bad();
      ++pos;
    }
  }
  return std::nullopt;
}

std::string safe_name(const std::string& text) {
  std::string out;
  for (const char c : text) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return out;
}

}  // namespace

const char* launch_mode_name(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kSingleProcess: return "single process";
    case LaunchMode::kTenaxRun: return "tenax run";
    case LaunchMode::kOpenMpi: return "mpirun (Open MPI)";
    case LaunchMode::kMpich: return "mpirun (MPICH)";
    case LaunchMode::kSlurm: return "srun";
  }
  return "unknown";
}

LaunchIdentity parse_launch_environment(const EnvironmentMap& env) {
  const Variables vars(env);
  LaunchIdentity out;
  WorkerIdentity& id = out.worker;
  if (vars.has("RANK")) {
    out.mode = LaunchMode::kTenaxRun;
    read_rank(vars, id, "RANK", "WORLD_SIZE", "`tenax run`");
    read_local(vars, id, "LOCAL_RANK", vars.get_int("LOCAL_WORLD_SIZE"), "LOCAL_WORLD_SIZE");
    if (!vars.has("LOCAL_RANK"))
      id.local_rank =
          checked("RANK", id.rank, 0, id.local_world_size - 1, "LOCAL_RANK is unset and RANK is not a local rank");
  } else if (vars.has("OMPI_COMM_WORLD_RANK")) {
    out.mode = LaunchMode::kOpenMpi;
    read_rank(vars, id, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun");
    read_local(vars, id, "OMPI_COMM_WORLD_LOCAL_RANK", vars.get_int("OMPI_COMM_WORLD_LOCAL_SIZE"),
               "OMPI_COMM_WORLD_LOCAL_SIZE");
  } else if (vars.has("PMI_RANK")) {
    out.mode = LaunchMode::kMpich;
    read_rank(vars, id, "PMI_RANK", "PMI_SIZE", "MPICH's mpirun (hydra)");
    read_local(vars, id, "MPI_LOCALRANKID", vars.get_int("MPI_LOCALNRANKS"), "MPI_LOCALNRANKS");
  } else if (vars.has("SLURM_PROCID")) {
    out.mode = LaunchMode::kSlurm;
    const std::string size_name = vars.has("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    read_rank(vars, id, "SLURM_PROCID", size_name, "srun");
    std::optional<std::int64_t> local_size;
    std::string local_size_name = "SLURM_NTASKS_PER_NODE";
    const auto node = vars.get_int("SLURM_NODEID");
    for (const char* list : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      if (local_size || !node || !vars.has(list)) continue;
      local_size = tasks_on_node(list, *vars.get(list), *node);
      local_size_name = list;
    }
    if (!local_size) local_size = vars.get_int("SLURM_NTASKS_PER_NODE");
    if (!local_size && vars.get_int("SLURM_NNODES").value_or(1) > 1) {
      throw ConfigError("srun: cannot tell how many tasks run on this node in a " +
                        std::to_string(*vars.get_int("SLURM_NNODES")) +
                        "-node job: SLURM_NODEID with SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE), or "
                        "SLURM_NTASKS_PER_NODE, must be set (srun sets them; pass --ntasks-per-node)");
    }
    read_local(vars, id, "SLURM_LOCALID", local_size, local_size_name);
  } else {
    return out;  // a single process
  }

  // Generation and restarts: the agent's under `tenax run`; else each requeue is a generation.
  const auto counter = [&](const char* name) -> std::optional<std::int64_t> {
    const auto value = vars.get_int(name);
    if (value && *value < 0) throw ConfigError(std::string(name) + "=" + std::to_string(*value) + " must be >= 0");
    return value;
  };
  const auto restarts = counter(out.mode == LaunchMode::kTenaxRun ? "TENAX_RESTART_COUNT" : "SLURM_RESTART_COUNT");
  id.restart_count = restarts.value_or(0);
  id.generation = counter("TENAX_GENERATION").value_or(out.mode == LaunchMode::kTenaxRun ? 0 : id.restart_count);

  // The launch id: the same on every rank of this launch, new for each requeue of the job.
  std::vector<std::string> parts;
  if (const auto job = vars.get("TENAX_JOB_ID")) parts.push_back("job-" + safe_name(*job));
  if (const auto job = vars.get("SLURM_JOB_ID")) {
    std::string part = "slurm-" + safe_name(*job);
    // An mpirun's ranks on other nodes run inside the step of Open MPI's daemons, not the
    // batch step of mpirun itself: only srun's tasks all share one step id.
    if (out.mode == LaunchMode::kSlurm) part += "-step-" + safe_name(vars.get("SLURM_STEP_ID").value_or("none"));
    parts.push_back(part + "-restart-" + std::to_string(restarts.value_or(0)));
  }
  if (out.mode == LaunchMode::kOpenMpi) {
    if (const auto job = vars.get("OMPI_MCA_ess_base_jobid")) {
      parts.push_back("ompi-" + safe_name(*job));
    } else if (const auto ns = vars.get("PMIX_NAMESPACE")) {
      parts.push_back("ompi-" + safe_name(*ns));
    }
  }
  for (const auto& p : parts) out.launch_id += (out.launch_id.empty() ? "" : ".") + p;
  out.node_name = vars.get("SLURMD_NODENAME").value_or("");
  return out;
}

EnvironmentMap launch_environment() {
  static const char* const kNames[] = {"RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE",
                                       "TENAX_GENERATION",
                                       "TENAX_RESTART_COUNT",
                                       "TENAX_JOB_ID",
                                       "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "OMPI_MCA_ess_base_jobid",
                                       "PMIX_NAMESPACE",
                                       "PMI_RANK",
                                       "PMI_SIZE",
                                       "MPI_LOCALRANKID",
                                       "MPI_LOCALNRANKS",
                                       "SLURM_PROCID",
                                       "SLURM_NTASKS",
                                       "SLURM_STEP_NUM_TASKS",
                                       "SLURM_LOCALID",
                                       "SLURM_NODEID",
                                       "SLURM_NNODES",
                                       "SLURM_STEP_TASKS_PER_NODE",
                                       "SLURM_TASKS_PER_NODE",
                                       "SLURM_NTASKS_PER_NODE",
                                       "SLURM_JOB_ID",
                                       "SLURM_STEP_ID",
                                       "SLURM_RESTART_COUNT",
                                       "SLURMD_NODENAME"};
  EnvironmentMap out;
  for (const char* name : kNames) {
    if (const auto value = env::get(name)) out.emplace(name, *value);
  }
  return out;
}

}  // namespace tenax::elastic
