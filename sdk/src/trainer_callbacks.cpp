// Trainer and its callbacks: the list (add, pop, remove, as transformers' Trainer), and the
// state of those that export it (ExportableState), which travels in TrainerState: saved with
// every checkpoint and heal, given back on a resume and a heal.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tenax/core/logging.h"
#include "tenax/sdk/trainer.h"

namespace tenax::sdk {
namespace {

// The callbacks that export their state, grouped by state_name() in the order they are called.
std::map<std::string, std::vector<ExportableState*>> exporters(
    const std::vector<std::shared_ptr<TrainerCallback>>& callbacks) {
  std::map<std::string, std::vector<ExportableState*>> out;
  for (const auto& cb : callbacks) {
    if (auto* exportable = dynamic_cast<ExportableState*>(cb.get()))
      out[exportable->state_name()].push_back(exportable);
  }
  return out;
}

}  // namespace

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) { callbacks_.push_back(std::move(callback)); }

std::shared_ptr<TrainerCallback> Trainer::pop_callback(const TrainerCallback& callback) {
  const auto it =
      std::find_if(callbacks_.begin(), callbacks_.end(), [&](const auto& cb) { return cb.get() == &callback; });
  if (it == callbacks_.end()) return nullptr;
  std::shared_ptr<TrainerCallback> out = *it;
  callbacks_.erase(it);
  return out;
}

void Trainer::export_callback_states() {
  nlohmann::json states = nlohmann::json::object();
  for (const auto& [name, group] : exporters(callbacks_)) {
    // transformers' layout: one callback of a name is its state, several are a list.
    if (group.size() == 1) {
      states[name] = group.front()->state();
    } else {
      for (const ExportableState* cb : group) states[name].push_back(cb->state());
    }
  }
  state_.stateful_callbacks = std::move(states);
}

void Trainer::restore_callback_states(const std::string& where) {
  const nlohmann::json& saved = state_.stateful_callbacks;
  const auto groups = exporters(callbacks_);
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  for (const auto& [name, states] : saved.items()) {
    const auto group = groups.find(name);
    if (group == groups.end()) {
      log->warn("{} holds the state of a callback {} that this trainer does not have; it is not restored", where, name);
      continue;
    }
    const std::vector<nlohmann::json> list =
        states.is_array() ? states.get<std::vector<nlohmann::json>>() : std::vector<nlohmann::json>{states};
    if (list.size() != group->second.size()) {
      log->warn("{} holds the state of {} callback(s) {}, this trainer has {}; the first of each are paired", where,
                list.size(), name, group->second.size());
    }
    for (std::size_t i = 0; i < std::min(list.size(), group->second.size()); ++i) {
      group->second[i]->restore_state(list[i]);
    }
  }
}

}  // namespace tenax::sdk
