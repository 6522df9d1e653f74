// What `tenax run` learns from Slurm when srun started it: the job, this node's index, the node
// count, the job's hosts (SLURM_JOB_NODELIST expanded) and how often the job was requeued.
//
// Pure functions over an environment lookup, so that every form is unit-tested without Slurm.
// Thread-safety: plain values and pure functions.
//
//   auto job = tenax::launcher::slurm_job_from_env(tenax::launcher::process_env);
//   if (job) log->info("Slurm job {} node {} of {}", job->job_id, job->node_id, job->num_nodes);
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tenax::launcher {

/// The rendezvous port of a Slurm job when --rdzv-endpoint does not give one: every agent of
/// the job computes the same port from the job id alone.
inline constexpr int kSlurmRdzvPortBase = 29400;
inline constexpr int kSlurmRdzvPortSpan = 10000;

struct SlurmJob {
  std::string job_id;                ///< SLURM_JOB_ID
  int node_id = 0;                   ///< SLURM_NODEID: this node's index in the job
  int num_nodes = 1;                 ///< SLURM_NNODES (or SLURM_JOB_NUM_NODES)
  int proc_id = 0;                   ///< SLURM_PROCID
  std::vector<std::string> nodes;    ///< SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), expanded
  std::optional<int> restart_count;  ///< SLURM_RESTART_COUNT (unset before the first requeue)
  std::string node_name;             ///< SLURMD_NODENAME ("" if unset)

  /// The host the rendezvous service runs on: the job's first node.
  const std::string& first_host() const { return nodes.front(); }
};

/// Looks up one environment variable (nullopt when unset).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

/// The process environment as an EnvLookup.
std::optional<std::string> process_env(const std::string& name);

/// Expands a Slurm host list: "node[01-03,7],gpu-a[1-2]x" → node01 node02 node03 node7 gpu-a1x
/// gpu-a2x. Commas inside brackets separate ranges, outside they separate hosts; a range keeps
/// the zero padding of its lower bound ("[08-10]" → 08 09 10); several bracket groups in one
/// host multiply ("r[1-2]n[1-2]" → r1n1 r1n2 r2n1 r2n2). Throws ConfigError naming the list
/// and the position for unbalanced brackets, empty names, bad or reversed ranges, or more
/// than 100000 hosts.
std::vector<std::string> expand_nodelist(const std::string& list);

/// The job srun started this process in, or nullopt when not under srun (SLURM_JOB_ID,
/// SLURM_NODEID or SLURM_STEP_ID unset: the batch shell has the first two but no step id). Throws ConfigError naming
/// the variable when a value is malformed (not a number, node id outside the node list, empty node list).
std::optional<SlurmJob> slurm_job_from_env(const EnvLookup& env);

/// kSlurmRdzvPortBase + (numeric job id % kSlurmRdzvPortSpan); ConfigError if not numeric.
int rdzv_port_for_job(const std::string& job_id);

}  // namespace tenax::launcher
