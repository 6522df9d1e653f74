#include "user_state_mirror.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include <torch/torch.h>

#include "peer_heal.h"
#include "tenax/core/error.h"

namespace tenax::sdk::detail {
namespace {

// This rank's registered state in registration order (replicated entries, then per-rank ones),
// each as its byte count and its bytes. Names, dtypes and shapes are not sent: a rank decodes only
// its own row, with its own registrations (the same program on the same rank registers the same).
NamedTensors captured(const UserState& state, int rank) {
  NamedTensors replicated;
  NamedTensors per_rank;
  state.capture(rank, replicated, per_rank);
  for (auto& entry : per_rank) replicated.push_back(std::move(entry));
  return replicated;
}

std::string encode(const NamedTensors& entries) {
  std::string row;
  for (const auto& [name, tensor] : entries) {
    const torch::Tensor bytes = tensor.to(torch::kCPU).contiguous();
    const std::uint64_t n = static_cast<std::uint64_t>(bytes.numel()) * bytes.element_size();
    row.append(reinterpret_cast<const char*>(&n), sizeof n);
    row.append(static_cast<const char*>(bytes.data_ptr()), n);
  }
  return row;
}

std::map<std::string, torch::Tensor> decode(const std::string& row, const NamedTensors& templates, int rank) {
  std::map<std::string, torch::Tensor> out;
  std::size_t at = 0;
  for (const auto& [name, like] : templates) {
    std::uint64_t n = 0;
    if (row.size() - at < sizeof n) break;
    std::memcpy(&n, row.data() + at, sizeof n);
    at += sizeof n;
    if (row.size() - at < n) break;
    const bool blob = like.scalar_type() == torch::kUInt8 && like.dim() == 1;
    torch::Tensor value = blob ? torch::empty({static_cast<std::int64_t>(n)}, torch::kUInt8)
                               : torch::empty(like.sizes(), like.options().device(torch::kCPU));
    if (static_cast<std::uint64_t>(value.numel()) * value.element_size() != n) {
      throw RendezvousError("healing user state '" + name + "' of rank " + std::to_string(rank) + ": the copy holds " +
                            std::to_string(n) + " bytes, the registered array " +
                            std::to_string(value.numel() * value.element_size()) +
                            "; every run of the program must register the same state on the same rank");
    }
    if (n > 0) std::memcpy(value.data_ptr(), row.data() + at, n);
    at += n;
    out.emplace(name, std::move(value));
  }
  if (out.size() != templates.size() || at != row.size()) {
    throw RendezvousError("healing the user state of rank " + std::to_string(rank) +
                          ": the copy does not match the registered state (" + std::to_string(out.size()) + " of " +
                          std::to_string(templates.size()) + " entries); register the same state on every run");
  }
  return out;
}

}  // namespace

void UserStateMirror::stage(elastic::Communicator& comm) {
  const std::string mine = encode(captured(state_, comm.rank()));
  row_bytes_ = mine.size();
  const std::size_t world = static_cast<std::size_t>(comm.size());
  if (capacity_ > 0) {
    // One allgather per step: every rank's row in a slot of the agreed capacity, after its length;
    // a row that outgrew it (a blob that grew) sends kOverflow instead, and since every rank then
    // reads the same slots, every rank falls back below together.
    std::string slot(capacity_, '\0');
    const bool fits = mine.size() + sizeof(std::uint64_t) <= capacity_;
    const std::uint64_t length = fits ? mine.size() : kOverflow;
    std::memcpy(slot.data(), &length, sizeof length);
    if (fits) std::memcpy(slot.data() + sizeof length, mine.data(), mine.size());
    std::string all(capacity_ * world, '\0');
    comm.allgather(slot.data(), all.data(), capacity_);
    staged_.clear();
    for (std::size_t r = 0; r < world; ++r) {
      std::uint64_t n = 0;
      std::memcpy(&n, all.data() + r * capacity_, sizeof n);
      if (n == kOverflow) break;
      staged_.emplace_back(all.data() + r * capacity_ + sizeof n, static_cast<std::size_t>(n));
    }
    if (staged_.size() == world) return;
  }
  staged_ = elastic::allgather_strings(comm, mine);  // two allgathers: lengths, then the rows
  set_capacity(staged_);
}

void UserStateMirror::set_capacity(const std::vector<std::string>& rows) {
  // Every rank computes it from the same rows, so every rank agrees on it without a collective.
  std::size_t longest = 0;
  for (const std::string& row : rows) longest = std::max(longest, row.size());
  capacity_ = longest + longest / 8 + sizeof(std::uint64_t);  // some room for a blob that grows
}

void UserStateMirror::commit(std::int64_t step) {
  if (staged_.empty()) return;
  committed_ = std::move(staged_);
  staged_.clear();
  step_ = step;
}

void UserStateMirror::heal(elastic::Communicator& comm, std::int64_t step) {
  const int rank = comm.rank();
  staged_.clear();
  const bool holds = step_ == step && committed_.size() == static_cast<std::size_t>(comm.size());
  const std::optional<HealPlan> plan = plan_heal(exchange_heal_status(comm, {holds ? step_ : -1}));
  if (!plan || plan->steps != step) {
    throw RendezvousError("healing generation at optimizer step " + std::to_string(step) +
                          ": no rank holds the registered user state of that step for a world of " +
                          std::to_string(comm.size()) +
                          " (a rank's own state is copied to every rank at each step, "
                          "for the same world size); the job must restart from its newest checkpoint");
  }
  NamedTensors outgoing;
  if (rank == plan->source) {
    for (std::size_t r = 0; r < committed_.size(); ++r) {
      const std::string& row = committed_[r];
      outgoing.emplace_back(
          "user_mirror/" + std::to_string(r),
          torch::from_blob(const_cast<char*>(row.data()), {static_cast<std::int64_t>(row.size())}, torch::kUInt8));
    }
  }
  const NamedTensors received =
      broadcast_named_tensors(comm, plan->source, outgoing,
                              [](const std::string&, torch::ScalarType, c10::IntArrayRef) { return torch::Tensor(); });
  if (rank != plan->source) {
    if (received.size() != static_cast<std::size_t>(comm.size())) {
      throw RendezvousError("healing the user state: rank " + std::to_string(plan->source) + " sent " +
                            std::to_string(received.size()) + " rows for a world of " + std::to_string(comm.size()));
    }
    committed_.clear();
    for (const auto& [name, bytes] : received) {
      const torch::Tensor b = bytes.contiguous();
      committed_.emplace_back(static_cast<const char*>(b.data_ptr()), static_cast<std::size_t>(b.numel()));
    }
    step_ = step;
  }
  set_capacity(committed_);  // the replacement's too: every rank stages alike from here on
  const std::map<std::string, torch::Tensor> mine =
      decode(committed_[static_cast<std::size_t>(rank)], captured(state_, rank), rank);
  state_.restore(rank, [&](const std::string& name) {
    const auto it = mine.find(name);
    return it == mine.end() ? torch::Tensor() : it->second;
  });
}

}  // namespace tenax::sdk::detail
