#include "user_state_mirror.h"

#include <algorithm>
#include <chrono>
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

// The bytes of each entry as a CPU tensor (the registered arrays already are: no copy).
std::vector<torch::Tensor> host_bytes(const NamedTensors& entries) {
  std::vector<torch::Tensor> out;
  out.reserve(entries.size());
  for (const auto& entry : entries) out.push_back(entry.second.to(torch::kCPU).contiguous());
  return out;
}

std::size_t encoded_size(const std::vector<torch::Tensor>& bytes) {
  std::size_t n = 0;
  for (const torch::Tensor& b : bytes) n += sizeof(std::uint64_t) + static_cast<std::size_t>(b.nbytes());
  return n;
}

// Each entry as its byte count, then its bytes, at `out` (encoded_size(bytes) of room).
void encode_into(const std::vector<torch::Tensor>& bytes, char* out) {
  for (const torch::Tensor& b : bytes) {
    const std::uint64_t n = b.nbytes();
    std::memcpy(out, &n, sizeof n);
    out += sizeof n;
    if (n > 0) std::memcpy(out, b.data_ptr(), n);
    out += n;
  }
}

std::map<std::string, torch::Tensor> decode(std::string_view row, const NamedTensors& templates, int rank) {
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

std::string_view UserStateMirror::Table::row(int rank) const {
  const char* slot = bytes.data() + static_cast<std::size_t>(rank) * capacity;
  std::uint64_t n = 0;
  std::memcpy(&n, slot, sizeof n);
  return {slot + sizeof n, static_cast<std::size_t>(n)};
}

bool UserStateMirror::Table::complete() const {
  if (bytes.empty()) return false;
  for (int r = 0; r < world; ++r) {
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data() + static_cast<std::size_t>(r) * capacity, sizeof n);
    if (n == kOverflow || n + sizeof n > capacity) return false;
  }
  return true;
}

namespace {
// Adds the wall time of its scope to `seconds`, on a return or a throw alike (its time was spent).
struct ScopeClock {
  double& seconds;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~ScopeClock() { seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
};
}  // namespace

void UserStateMirror::stage(elastic::Communicator& comm) {
  capture(comm.rank());
  exchange(comm);
}

void UserStateMirror::capture(int rank) {
  const ScopeClock clock{stage_seconds_};
  const std::vector<torch::Tensor> bytes = host_bytes(captured(state_, rank));
  row_bytes_ = encoded_size(bytes);
  // This rank's slot as exchange() sends it: the row's length, then the row; at least the agreed
  // capacity, so that the allgather can send it as it is.
  send_.resize(std::max(capacity_, sizeof(std::uint64_t) + row_bytes_));
  const std::uint64_t length = row_bytes_;
  std::memcpy(send_.data(), &length, sizeof length);
  encode_into(bytes, send_.data() + sizeof length);
  captured_ = true;
}

void UserStateMirror::mark_slot() {
  const std::uint64_t length = sizeof(std::uint64_t) + row_bytes_ <= capacity_ ? row_bytes_ : kOverflow;
  std::memcpy(send_.data(), &length, sizeof length);
}

void UserStateMirror::exchange(elastic::Communicator& comm) {
  if (!captured_) throw std::logic_error("UserStateMirror::exchange() without capture()");
  captured_ = false;
  ++stages_;
  const ScopeClock clock{stage_seconds_};
  if (capacity_ > 0) {
    // One allgather per step, straight into the staged table: this rank's slot of the agreed
    // capacity. A row that outgrew it sends kOverflow as its length instead, and since every rank
    // then reads the same slots, every rank falls back together.
    mark_slot();
    const int world = comm.size();
    staged_.world = 0;  // holds nothing whole until the allgather has returned
    staged_.capacity = capacity_;
    staged_.bytes.resize(capacity_ * static_cast<std::size_t>(world));
    comm.allgather(send_.data(), staged_.bytes.data(), capacity_);
    staged_.world = world;
    if (staged_.complete()) return;
  }
  gather_rows(comm);
}

void UserStateMirror::gather_rows(elastic::Communicator& comm) {
  staged_.world = 0;
  const std::string mine(send_.data() + sizeof(std::uint64_t), row_bytes_);
  const std::vector<std::string> rows = elastic::allgather_strings(comm, mine);  // lengths, then the rows
  capacity_ = capacity_for(rows);
  lay_out(rows, capacity_, staged_);
}

std::size_t UserStateMirror::capacity_for(const std::vector<std::string>& rows) {
  // Every rank computes it from the same rows, so every rank agrees on it without a collective.
  std::size_t longest = 0;
  for (const std::string& row : rows) longest = std::max(longest, row.size());
  // Some room for a blob that grows; little, since every step sends the whole slot (a registered
  // array never changes size, and a row that outgrows its slot costs one step a second allgather).
  return longest + longest / 64 + 4096 + sizeof(std::uint64_t);
}

void UserStateMirror::lay_out(const std::vector<std::string>& rows, std::size_t capacity, Table& table) {
  table.capacity = capacity;
  table.world = static_cast<int>(rows.size());
  table.bytes.assign(capacity * rows.size(), '\0');
  for (std::size_t r = 0; r < rows.size(); ++r) {
    char* slot = table.bytes.data() + r * capacity;
    const std::uint64_t n = rows[r].size();
    std::memcpy(slot, &n, sizeof n);
    std::memcpy(slot + sizeof n, rows[r].data(), rows[r].size());
  }
}

void UserStateMirror::commit(std::int64_t step) {
  if (!staged_.complete()) return;
  std::swap(committed_, staged_);  // the old committed table's memory is the next stage's
  staged_.world = 0;               // not complete() until the next stage fills it
  step_ = step;
}

void UserStateMirror::heal(elastic::Communicator& comm, std::int64_t step) {
  const int rank = comm.rank();
  const bool holds = step_ == step && committed_.world == comm.size() && committed_.complete();
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
    outgoing.emplace_back(
        "user_mirror",
        torch::from_blob(committed_.bytes.data(), {static_cast<std::int64_t>(committed_.bytes.size())}, torch::kUInt8));
  }
  const NamedTensors received =
      broadcast_named_tensors(comm, plan->source, outgoing,
                              [](const std::string&, torch::ScalarType, c10::IntArrayRef) { return torch::Tensor(); });
  if (rank != plan->source) {
    const std::size_t total = received.size() == 1 ? static_cast<std::size_t>(received.front().second.numel()) : 0;
    const auto world = static_cast<std::size_t>(comm.size());
    if (total == 0 || total % world != 0) {
      throw RendezvousError("healing the user state: rank " + std::to_string(plan->source) + " sent " +
                            std::to_string(received.size()) + " tables of " + std::to_string(total) +
                            " bytes, not one of a slot per rank for a world of " + std::to_string(world));
    }
    const torch::Tensor table = received.front().second.contiguous();
    committed_.capacity = total / world;
    committed_.world = comm.size();
    committed_.bytes.assign(static_cast<const char*>(table.data_ptr()),
                            static_cast<const char*>(table.data_ptr()) + total);
    if (!committed_.complete()) {
      throw RendezvousError("healing the user state: the table rank " + std::to_string(plan->source) +
                            " sent has a row longer than its slot");
    }
    step_ = step;
  }
  staged_.clear();
  capacity_ = committed_.capacity;  // the replacement's too: every rank stages alike from here on
  const std::map<std::string, torch::Tensor> mine = decode(committed_.row(rank), captured(state_, rank), rank);
  state_.restore(rank, [&](const std::string& name) {
    const auto it = mine.find(name);
    return it == mine.end() ? torch::Tensor() : it->second;
  });
}

}  // namespace tenax::sdk::detail
