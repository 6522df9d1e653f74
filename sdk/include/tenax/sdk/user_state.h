// State of an embedding application (a simulation's fields and time step, say) saved and
// restored atomically with the model: registered once, captured at every save, restored when
// training resumes.
//
// Names in the checkpoint: "user/<name>" for replicated state (identical on every rank; written
// once, by the rank the byte plan picks) and "user/rank<r>/<name>" for per-rank state (each
// rank's own, e.g. its piece of a decomposed domain). Tensors are restored in place (copy_ into
// the registered tensor, which keeps its shape and dtype); blobs go back through their
// restore function.
// Thread-safety: training thread only. Registration is not collective, but every rank must
// register the same replicated names.
//
//   tenax::sdk::UserState user;
//   user.add_tensor("temperature", field);                      // torch::Tensor, updated in place
//   user.add_blob("time", [&] { return std::to_string(t); },
//                 [&](const std::string& b) { t = std::stod(b); });
//   trainer.set_user_state(&user);                               // or capture()/restore() by hand
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tenax/sdk/state_capture.h"

namespace tenax::sdk {

class UserState {
 public:
  enum class Scope { kReplicated, kPerRank };

  /// Registers `tensor` (shared storage: later in-place updates are what gets saved).
  /// Throws ConfigError for an empty or duplicate name or one containing "..".
  void add_tensor(const std::string& name, torch::Tensor tensor, Scope scope = Scope::kReplicated);
  /// Registers bytes produced by `save` at every checkpoint and handed to `restore` on resume.
  void add_blob(const std::string& name, std::function<std::string()> save,
                std::function<void(const std::string&)> restore, Scope scope = Scope::kReplicated);

  /// Appends the current values: replicated ones to `replicated`, per-rank ones to `per_rank`.
  void capture(int rank, NamedTensors& replicated, NamedTensors& per_rank) const;
  /// The registered tensors (not blobs: their callbacks are not called) under the names a save
  /// gives them on `rank`.
  NamedTensors tensors(int rank) const;
  /// Whether `checkpoint_name` is one this registry restores on `rank`.
  bool wants(const std::string& checkpoint_name, int rank) const;
  /// Restores every entry from `lookup` (undefined tensor = absent). Throws StorageError naming
  /// the entry when the checkpoint lacks it or its shape/dtype differs from the registered one.
  void restore(int rank, const std::function<torch::Tensor(const std::string&)>& lookup) const;

  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string name;
    Scope scope = Scope::kReplicated;
    torch::Tensor tensor;  // undefined for a blob
    std::function<std::string()> save;
    std::function<void(const std::string&)> restore;
  };
  std::string checkpoint_name(const Entry& entry, int rank) const;
  void check_new_name(const std::string& name) const;

  std::vector<Entry> entries_;
};

}  // namespace tenax::sdk
