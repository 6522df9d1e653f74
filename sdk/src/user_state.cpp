#include "tenax/sdk/user_state.h"

#include <cstring>

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

void UserState::check_new_name(const std::string& name) const {
  if (name.empty() || name.find("..") != std::string::npos || name.front() == '/' || name.back() == '/') {
    throw ConfigError("UserState: invalid name '" + name + "' (non-empty, no '..', no leading or trailing '/')");
  }
  for (const Entry& e : entries_) {
    if (e.name == name) throw ConfigError("UserState: '" + name + "' is registered twice");
  }
}

void UserState::add_tensor(const std::string& name, torch::Tensor tensor, Scope scope) {
  check_new_name(name);
  if (!tensor.defined()) throw ConfigError("UserState: tensor '" + name + "' is undefined");
  Entry e;
  e.name = name;
  e.scope = scope;
  e.tensor = std::move(tensor);
  entries_.push_back(std::move(e));
}

void UserState::add_blob(const std::string& name, std::function<std::string()> save,
                         std::function<void(const std::string&)> restore, Scope scope) {
  check_new_name(name);
  if (!save || !restore) throw ConfigError("UserState: blob '" + name + "' needs both a save and a restore function");
  Entry e;
  e.name = name;
  e.scope = scope;
  e.save = std::move(save);
  e.restore = std::move(restore);
  entries_.push_back(std::move(e));
}

std::string UserState::checkpoint_name(const Entry& entry, int rank) const {
  return entry.scope == Scope::kReplicated ? "user/" + entry.name
                                           : "user/rank" + std::to_string(rank) + "/" + entry.name;
}

void UserState::capture(int rank, NamedTensors& replicated, NamedTensors& per_rank) const {
  for (const Entry& e : entries_) {
    torch::Tensor value;
    if (e.tensor.defined()) {
      value = e.tensor.detach();
    } else {
      const std::string bytes = e.save();
      value = torch::empty({static_cast<std::int64_t>(bytes.size())}, torch::kUInt8);
      if (!bytes.empty()) std::memcpy(value.data_ptr(), bytes.data(), bytes.size());
    }
    (e.scope == Scope::kReplicated ? replicated : per_rank).emplace_back(checkpoint_name(e, rank), value);
  }
}

NamedTensors UserState::tensors(int rank) const {
  NamedTensors out;
  for (const Entry& e : entries_) {
    if (e.tensor.defined()) out.emplace_back(checkpoint_name(e, rank), e.tensor.detach());
  }
  return out;
}

bool UserState::wants(const std::string& name, int rank) const {
  for (const Entry& e : entries_) {
    if (checkpoint_name(e, rank) == name) return true;
  }
  return false;
}

void UserState::restore(int rank, const std::function<torch::Tensor(const std::string&)>& lookup) const {
  for (const Entry& e : entries_) {
    const std::string name = checkpoint_name(e, rank);
    torch::Tensor saved = lookup(name);
    if (!saved.defined()) {
      throw StorageError(
          "the checkpoint has no user state '" + name + "'" +
          (e.scope == Scope::kPerRank ? " (per-rank state of a rank the writing world did not have?)" : "") +
          "; register the same user state that was saved");
    }
    if (e.tensor.defined()) {
      if (!saved.sizes().equals(e.tensor.sizes()) || saved.scalar_type() != e.tensor.scalar_type()) {
        throw StorageError("user state '" + name + "' is " + c10::toString(saved.scalar_type()) +
                           c10::str(saved.sizes()) + " in the checkpoint but " + c10::toString(e.tensor.scalar_type()) +
                           c10::str(e.tensor.sizes()) + " registered");
      }
      torch::NoGradGuard no_grad;
      e.tensor.copy_(saved);
    } else {
      if (saved.scalar_type() != torch::kUInt8 || saved.dim() != 1) {
        throw StorageError("user state '" + name + "' is not a byte blob in the checkpoint");
      }
      const torch::Tensor bytes = saved.contiguous();
      e.restore(std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<std::size_t>(bytes.numel())));
    }
  }
}

}  // namespace tenax::sdk
