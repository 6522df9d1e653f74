#include "peer_heal.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk::detail {

std::optional<HealPlan> plan_heal(const std::vector<HealStatus>& statuses) {
  std::optional<HealPlan> plan;
  for (std::size_t r = 0; r < statuses.size(); ++r) {
    const std::int64_t steps = statuses[r].completed_steps;
    if (steps >= 0 && (!plan || steps > plan->steps)) plan = HealPlan{static_cast<int>(r), steps};
  }
  return plan;
}

std::vector<HealStatus> exchange_heal_status(elastic::Communicator& comm, const HealStatus& mine) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine.completed_steps, all.data(), sizeof(std::int64_t));
  std::vector<HealStatus> out;
  out.reserve(all.size());
  for (std::int64_t steps : all) out.push_back(HealStatus{steps});
  return out;
}

NamedTensors broadcast_named_tensors(elastic::Communicator& comm, int source, const NamedTensors& tensors,
                                     const HealDestination& destination) {
  const bool sending = comm.rank() == source;
  // The manifest first (names, dtypes, shapes), so that receivers can place every tensor.
  std::string manifest;
  std::vector<torch::Tensor> outgoing;
  if (sending) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [name, tensor] : tensors) {
      entries.push_back({{"name", name},
                         {"dtype", static_cast<int>(tensor.scalar_type())},
                         {"shape", std::vector<std::int64_t>(tensor.sizes().begin(), tensor.sizes().end())}});
      outgoing.push_back(tensor.contiguous());
    }
    manifest = entries.dump();
  }
  std::int64_t length = static_cast<std::int64_t>(manifest.size());
  comm.broadcast(&length, sizeof length, source);
  manifest.resize(static_cast<std::size_t>(length));
  comm.broadcast(manifest.data(), manifest.size(), source);
  if (sending) {
    for (torch::Tensor& t : outgoing) comm.broadcast(t.data_ptr(), t.numel() * t.element_size(), source);
    return {};
  }
  const nlohmann::json entries = nlohmann::json::parse(manifest);
  NamedTensors received;
  received.reserve(entries.size());
  for (const auto& entry : entries) {
    const auto name = entry.at("name").get<std::string>();
    const auto dtype = static_cast<torch::ScalarType>(entry.at("dtype").get<int>());
    const auto shape = entry.at("shape").get<std::vector<std::int64_t>>();
    torch::Tensor target = destination ? destination(name, dtype, shape) : torch::Tensor();
    if (target.defined()) {
      if (target.scalar_type() != dtype || !target.sizes().equals(shape) || !target.is_contiguous()) {
        throw StorageError("healing from rank " + std::to_string(source) + ": '" + name + "' arrives as " +
                           c10::toString(dtype) + " " + c10::str(c10::IntArrayRef(shape)) + " but this rank holds " +
                           c10::toString(target.scalar_type()) + " " + c10::str(target.sizes()) +
                           "; do both ranks run the same model?");
      }
    } else {
      target = torch::empty(shape, torch::TensorOptions().dtype(dtype));
    }
    comm.broadcast(target.data_ptr(), target.numel() * target.element_size(), source);
    received.emplace_back(name, target);
  }
  return received;
}

}  // namespace tenax::sdk::detail
