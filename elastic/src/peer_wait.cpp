#include "tenax/elastic/peer_wait.h"

#include <atomic>
#include <cstdint>

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;

// The number of live guards and when the first of them began, in one word, so that a reader
// never pairs a count with the start of another wait: bits 0-15 the count, the rest the start
// in milliseconds of the steady clock (48 bits: thousands of years of uptime).
constexpr int kCountBits = 16;
constexpr std::uint64_t kCountMask = (std::uint64_t{1} << kCountBits) - 1;

std::atomic<std::uint64_t> g_wait{0};
// When the count last fell to zero (ms of the steady clock); -1 before that.
std::atomic<std::int64_t> g_last_end{-1};

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

PeerWaitState peer_wait_state() {
  const std::uint64_t word = g_wait.load(std::memory_order_acquire);
  const std::int64_t last_end = g_last_end.load(std::memory_order_acquire);
  const std::int64_t now = now_ms();
  PeerWaitState state;
  state.waiting = (word & kCountMask) != 0;
  if (state.waiting) state.waited = std::chrono::milliseconds(now - static_cast<std::int64_t>(word >> kCountBits));
  if (last_end >= 0) state.since_wait = std::chrono::milliseconds(now - last_end);
  return state;
}

PeerWaitGuard::PeerWaitGuard() {
  std::uint64_t word = g_wait.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    const std::uint64_t count = word & kCountMask;
    // The first guard in sets the start; later ones (nested, or another thread's) keep it.
    const std::uint64_t start = count == 0 ? static_cast<std::uint64_t>(now_ms()) : word >> kCountBits;
    next = (start << kCountBits) | (count + 1);
  } while (!g_wait.compare_exchange_weak(word, next, std::memory_order_acq_rel, std::memory_order_relaxed));
}

PeerWaitGuard::~PeerWaitGuard() {
  std::uint64_t word = g_wait.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    const std::uint64_t count = word & kCountMask;
    next = count > 1 ? word - 1 : 0;
  } while (!g_wait.compare_exchange_weak(word, next, std::memory_order_acq_rel, std::memory_order_relaxed));
  if (next == 0) g_last_end.store(now_ms(), std::memory_order_release);
}

}  // namespace tenax::elastic
