// Decides, from the `tenax run` flags and the Slurm environment, whether this agent runs in
// multi-node (rendezvous) mode, and then its node id, its host, the rendezvous endpoint and
// whether it hosts the rendezvous service. Flags win over Slurm; Slurm wins over defaults.
//
//   multi-node when any of --nnodes, --rdzv-endpoint is given or srun started the agent;
//   otherwise, or with --standalone, nullopt: the single-node agent (its own key-value store,
//   no service).
//
// Pure: the caller passes the Slurm job, the host name and the pid, so every rule is tested.
// Thread-safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>

#include "tenax/core/endpoint.h"

#include "run_options.h"
#include "slurm_job.h"

namespace tenax::launcher {

struct MultiNodePlan {
  NodeRange nodes;             ///< MIN:MAX nodes per generation
  std::string node_id;         ///< the rendezvous node id ("node-000003" for a numeric id)
  std::string raw_node_id;     ///< as given (--node-id or SLURM_NODEID): "3"; replaces %n in --run-dir
  std::string host;            ///< where this node's workers can be reached (JOIN host)
  bool hosts_service = false;  ///< this agent starts the RendezvousService (term 0 of the lease)
  /// This node's place in the job's node list (SLURM_NODEID, a numeric --node-id; else 0 for the
  /// designated host and 1 for the others): the failover order (host_election.h).
  int position = 0;
  /// Whether this agent may take over hosting when the host is lost (not with --rdzv-host no:
  /// a stand-alone `tenax rdzv` serves the job).
  bool may_host = true;
  std::string rdzv_host;  ///< host part of the rendezvous endpoint
  int rdzv_port = 0;      ///< 0 only when hosting: any free port
  std::string rdzv_bind;  ///< "tcp://HOST_OR_*:PORT" when hosting, else ""
  std::optional<SlurmJob> slurm;

  /// "tcp://host:port" for the client (with `bound_port` when the service chose the port).
  std::string connect_endpoint(int bound_port = 0) const {
    return Endpoint{rdzv_host, rdzv_port != 0 ? rdzv_port : bound_port}.str();
  }
};

/// nullopt for a single-node run. Throws ConfigError naming the flag when the flags cannot
/// work (a node that does not host and has no endpoint; --nnodes with MAX > 1 and no endpoint
/// outside Slurm; more than MAX nodes in the Slurm step).
std::optional<MultiNodePlan> plan_multi_node(const RunOptions& options, const std::optional<SlurmJob>& slurm,
                                             const std::string& hostname, int pid);

/// "7" → "node-000007" (so that ids sort as numbers); anything else unchanged.
std::string rendezvous_node_id(const std::string& id);

}  // namespace tenax::launcher
