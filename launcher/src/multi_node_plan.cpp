#include "multi_node_plan.h"

#include <cstdio>

#include "tenax/core/endpoint.h"
#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

std::string rendezvous_node_id(const std::string& id) {
  if (!all_digits(id)) return id;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "node-%06d", std::stoi(id));
  return buffer;
}

std::optional<MultiNodePlan> plan_multi_node(const RunOptions& options, const std::optional<SlurmJob>& slurm,
                                             const std::string& hostname, int pid) {
  if (options.standalone) return std::nullopt;  // torchrun's --standalone: one node, also under srun
  if (!options.nnodes && options.rdzv_endpoint.empty() && !slurm) return std::nullopt;
  MultiNodePlan plan;
  plan.slurm = slurm;
  if (options.nnodes) {
    plan.nodes = *options.nnodes;
  } else if (slurm) {
    plan.nodes = {slurm->num_nodes, slurm->num_nodes};
  }
  if (slurm && slurm->num_nodes < plan.nodes.min) {
    throw ConfigError("tenax run: the Slurm step has " + std::to_string(slurm->num_nodes) +
                      " nodes but --nnodes needs at least " + std::to_string(plan.nodes.min) +
                      ": no generation could ever form; lower MIN or start more nodes (srun -N / sbatch -N)");
  }
  if (slurm && slurm->num_nodes > plan.nodes.max) {
    throw ConfigError("tenax run: the Slurm step has " + std::to_string(slurm->num_nodes) +
                      " nodes but --nnodes allows at most " + std::to_string(plan.nodes.max) +
                      "; raise MAX or start fewer nodes (srun -N)");
  }

  std::string raw_id = options.node_id;
  if (raw_id.empty()) raw_id = slurm ? std::to_string(slurm->node_id) : hostname + "-" + std::to_string(pid);
  plan.node_id = rendezvous_node_id(raw_id);
  plan.raw_node_id = raw_id;

  if (!options.node_host.empty()) {
    plan.host = options.node_host;
  } else if (slurm) {
    plan.host = !slurm->node_name.empty() ? slurm->node_name : slurm->nodes[static_cast<std::size_t>(slurm->node_id)];
  } else {
    plan.host = hostname.empty() ? "127.0.0.1" : hostname;
  }

  switch (options.rdzv_host) {
    case RdzvHosting::kYes: plan.hosts_service = true; break;
    case RdzvHosting::kNo: plan.hosts_service = false; break;
    case RdzvHosting::kAuto:
      if (!options.node_id.empty()) {
        plan.hosts_service = all_digits(options.node_id) && std::stoi(options.node_id) == 0;
      } else if (slurm) {
        plan.hosts_service = slurm->node_id == 0;
      } else {
        plan.hosts_service = options.rdzv_endpoint.empty();
      }
      break;
  }

  if (all_digits(options.node_id)) {
    plan.position = std::stoi(options.node_id);
  } else if (options.node_id.empty() && slurm) {
    plan.position = slurm->node_id;
  } else {
    plan.position = plan.hosts_service ? 0 : 1;
  }
  if (plan.hosts_service) plan.position = 0;
  plan.may_host = options.rdzv_host != RdzvHosting::kNo;

  if (!options.rdzv_endpoint.empty()) {
    const Endpoint given = Endpoint::parse(options.rdzv_endpoint, /*allow_any_port=*/true);
    plan.rdzv_host = given.host;
    plan.rdzv_port = given.port;
  } else if (slurm) {
    plan.rdzv_host = slurm->first_host();
    plan.rdzv_port = rdzv_port_for_job(slurm->job_id);
  } else if (plan.hosts_service && plan.nodes.max == 1) {
    plan.rdzv_host = "127.0.0.1";
    plan.rdzv_port = 0;
  } else {
    throw ConfigError("tenax run: --nnodes " + std::to_string(plan.nodes.min) + ":" + std::to_string(plan.nodes.max) +
                      " outside Slurm needs --rdzv-endpoint HOST:PORT on every agent (the host of the agent "
                      "started with --rdzv-host yes or --node-id 0)");
  }
  if (plan.rdzv_port == 0 && !plan.hosts_service) {
    throw ConfigError("tenax run: --rdzv-endpoint " + options.rdzv_endpoint +
                      " has port 0, which only the hosting agent may use; give the port the host listens on");
  }
  if (plan.hosts_service) {
    const bool loopback = plan.rdzv_host == "127.0.0.1" || plan.rdzv_host == "localhost";
    plan.rdzv_bind = "tcp://" + std::string(loopback ? "127.0.0.1" : "*") + ":" + std::to_string(plan.rdzv_port);
  }
  return plan;
}

}  // namespace tenax::launcher
