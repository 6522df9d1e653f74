#include "generation_claim.h"

#include <algorithm>
#include <utility>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

// Another process may move the fence between current() and advance(): take the next number.
constexpr int kClaimAttempts = 8;

StatusOr<std::int64_t> advance_above(const elastic::GenerationFence& fence, std::int64_t wanted) {
  for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
    StatusOr<std::int64_t> current = fence.current();
    if (!current.is_ok()) return current.status();
    const std::int64_t number = std::max(wanted, current.value() + 1);
    Status advanced = fence.advance(number);
    if (advanced.is_ok()) return number;
    if (advanced.code() != StatusCode::kAborted) return advanced;
  }
  return Status(StatusCode::kAborted, "the generation fence in " + fence.dir().string() + " kept moving under " +
                                          std::to_string(kClaimAttempts) + " attempts to number a generation");
}

}  // namespace

std::function<StatusOr<std::int64_t>(std::int64_t)> fenced_generation_claim(elastic::LeaseFile lease,
                                                                            elastic::GenerationFence fence,
                                                                            std::int64_t term, std::string holder) {
  return [lease = std::move(lease), fence = std::move(fence), term,
          holder = std::move(holder)](std::int64_t wanted) -> StatusOr<std::int64_t> {
    const std::optional<elastic::LeaseRecord> now = lease.read();
    if (!now || now->term != term || now->holder != holder) {
      return Status(StatusCode::kAborted,
                    "this rendezvous service (" + holder + ", lease term " + std::to_string(term) +
                        ") no longer holds the lease" +
                        (now ? " (node '" + now->holder + "' holds term " + std::to_string(now->term) + ")"
                             : std::string(" (no lease file)")) +
                        "; it forms no generation");
    }
    return advance_above(fence, wanted);
  };
}

std::int64_t advance_fence_from(const elastic::GenerationFence& fence, std::int64_t wanted) {
  StatusOr<std::int64_t> number = advance_above(fence, wanted);
  if (!number.is_ok()) {
    throw Error("cannot record generation " + std::to_string(wanted) + " in the job's generation fence (" +
                fence.dir().string() + "): " + number.status().message() +
                "; check that the directory is writable and its file system supports flock");
  }
  return number.value();
}

}  // namespace tenax::launcher
