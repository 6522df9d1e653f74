// The TCP backend of Communicator: ring collectives on TcpRing (tcp_ring.h).
#include "tenax/elastic/tcp_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "tcp_ring.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/peer_wait.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using detail::TcpRing;

void check_timeout(std::chrono::milliseconds timeout, const char* what) {
  if (timeout.count() <= 0) {
    throw ConfigError(fmt::format("{}: timeout must be positive, got {} ms", what, timeout.count()));
  }
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// Reduces `count` elements of `in` into `inout` (inout = op(inout, in)).
template <typename T>
void reduce_into(T* inout, const T* in, std::size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      for (std::size_t i = 0; i < count; ++i) inout[i] = static_cast<T>(inout[i] + in[i]);
      return;
    case ReduceOp::kMax:
      for (std::size_t i = 0; i < count; ++i) inout[i] = std::max(inout[i], in[i]);
      return;
    case ReduceOp::kMin:
      for (std::size_t i = 0; i < count; ++i) inout[i] = std::min(inout[i], in[i]);
      return;
  }
  throw Error(fmt::format("allreduce: unknown ReduceOp {}", static_cast<int>(op)));
}

using ReduceFn = void (*)(std::byte* inout, const std::byte* in, std::size_t count, ReduceOp op);

template <typename T>
void reduce_bytes(std::byte* inout, const std::byte* in, std::size_t count, ReduceOp op) {
  // Both ranges hold whole, suitably aligned elements: data's segments start at element
  // boundaries, and the scratch buffer is a std::vector (aligned for any scalar).
  reduce_into(reinterpret_cast<T*>(inout), reinterpret_cast<const T*>(in), count, op);
}

ReduceFn reduce_function(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return &reduce_bytes<float>;
    case ElementType::kFloat64: return &reduce_bytes<double>;
    case ElementType::kInt64: return &reduce_bytes<std::int64_t>;
    case ElementType::kUInt8: return &reduce_bytes<std::uint8_t>;
  }
  throw Error(fmt::format("allreduce: unknown ElementType {}", static_cast<int>(type)));
}

class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(std::shared_ptr<TcpRing> ring, std::shared_ptr<AbortSignal> signal)
      : ring_(std::move(ring)), signal_(std::move(signal)), rank_(ring_->rank()), size_(ring_->size()) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(void* data, std::size_t count, ElementType type, ReduceOp op,
                 std::chrono::milliseconds timeout) override {
    run("allreduce", timeout, [&](Clock::time_point deadline) {
      if (count == 0) return;
      if (data == nullptr) throw Error("allreduce: null buffer");
      const std::size_t element = element_size(type);
      const ReduceFn reduce = reduce_function(type);
      auto* bytes = static_cast<std::byte*>(data);
      const auto begin = [&](int segment) { return count * static_cast<std::size_t>(segment) / size_; };
      const auto length = [&](int segment) { return begin(segment + 1) - begin(segment); };
      const std::size_t longest = (count + static_cast<std::size_t>(size_) - 1) / static_cast<std::size_t>(size_);
      if (scratch_.size() < longest * element) scratch_.resize(longest * element);
      // Reduce-scatter: at step s this rank passes on segment (rank - s), which it has reduced
      // s times, and reduces segment (rank - s - 1) with what arrives, element by element as the
      // bytes come in. After n - 1 steps it holds segment (rank + 1) reduced over every rank.
      for (int s = 0; s + 1 < size_; ++s) {
        const int out = mod(rank_ - s, size_);
        const int in = mod(rank_ - s - 1, size_);
        std::byte* target = bytes + begin(in) * element;
        std::size_t reduced = 0;
        TcpRing::Transfer t;
        t.send = bytes + begin(out) * element;
        t.send_bytes = length(out) * element;
        t.recv = scratch_.data();
        t.recv_bytes = length(in) * element;
        t.on_received = [&](std::size_t received) {
          const std::size_t whole = received / element;
          if (whole == reduced) return;
          reduce(target + reduced * element, scratch_.data() + reduced * element, whole - reduced, op);
          reduced = whole;
        };
        ring_->exchange(t, deadline);
      }
      // Allgather: each reduced segment travels once round the ring.
      for (int s = 0; s + 1 < size_; ++s) {
        const int out = mod(rank_ + 1 - s, size_);
        const int in = mod(rank_ - s, size_);
        TcpRing::Transfer t;
        t.send = bytes + begin(out) * element;
        t.send_bytes = length(out) * element;
        t.recv = bytes + begin(in) * element;
        t.recv_bytes = length(in) * element;
        ring_->exchange(t, deadline);
      }
    });
  }

  void broadcast(void* data, std::size_t bytes, int root, std::chrono::milliseconds timeout) override {
    run("broadcast", timeout, [&](Clock::time_point deadline) {
      if (root < 0 || root >= size_) {
        throw Error(fmt::format("broadcast: root {} outside world size {}", root, size_));
      }
      if (bytes == 0) return;
      if (data == nullptr) throw Error("broadcast: null buffer");
      auto* buffer = static_cast<std::byte*>(data);
      const int position = mod(rank_ - root, size_);  // 0 is the root, size - 1 the end of the line
      TcpRing::Transfer t;
      if (position != size_ - 1) {
        t.send = buffer;
        t.send_bytes = bytes;
      }
      if (position != 0) {
        t.recv = buffer;
        t.recv_bytes = bytes;
        t.relay = position != size_ - 1;
      }
      ring_->exchange(t, deadline);
    });
  }

  void allgather(const void* in, void* out, std::size_t bytes_per_rank, std::chrono::milliseconds timeout) override {
    run("allgather", timeout, [&](Clock::time_point deadline) {
      if (bytes_per_rank == 0) return;
      if (in == nullptr || out == nullptr) throw Error("allgather: null buffer");
      gather(in, static_cast<std::byte*>(out), bytes_per_rank, deadline);
    });
  }

  void barrier(std::chrono::milliseconds timeout) override {
    run("barrier", timeout, [&](Clock::time_point deadline) {
      // Once every rank's byte has come round, every rank has entered.
      const std::byte mine{1};
      std::vector<std::byte> all(static_cast<std::size_t>(size_));
      gather(&mine, all.data(), 1, deadline);
    });
  }

  void abort() override {
    aborted_.store(true);
    ring_->cut();
  }

 private:
  void gather(const void* in, std::byte* out, std::size_t block, Clock::time_point deadline) {
    std::memmove(out + static_cast<std::size_t>(rank_) * block, in, block);
    for (int s = 0; s + 1 < size_; ++s) {
      const int sent = mod(rank_ - s, size_);
      const int received = mod(rank_ - s - 1, size_);
      TcpRing::Transfer t;
      t.send = out + static_cast<std::size_t>(sent) * block;
      t.send_bytes = block;
      t.recv = out + static_cast<std::size_t>(received) * block;
      t.recv_bytes = block;
      ring_->exchange(t, deadline);
    }
  }

  std::string cut_reason() const {
    if (signal_ && signal_->raised()) return signal_->reason();
    return "the communicator was aborted";
  }

  std::string who() const { return fmt::format("rank {} of {}", rank_, size_); }

  // Runs one collective: refuses after abort() or an earlier failure, and words the ring's
  // errors with the operation, the rank and the timeout.
  template <typename Body>
  void run(const char* what, std::chrono::milliseconds timeout, Body&& body) {
    if (aborted_.load() || ring_->was_cut()) {
      throw PeerLostError(fmt::format("{} on {}: {}; build a new one", what, who(), cut_reason()));
    }
    if (!failure_.empty()) {
      throw PeerLostError(
          fmt::format("{} on {}: the communicator is unusable after an earlier failure ({}); build a "
                      "new one for the next generation",
                      what, who(), failure_));
    }
    check_timeout(timeout, what);
    const auto deadline = Clock::now() + timeout;
    try {
      // Blocked on the peers until they all arrive: --hang-timeout's beacon reports it.
      const PeerWaitGuard waiting;
      body(deadline);
      return;
    } catch (const TimeoutError& e) {
      failure_ = e.what();
      if (aborted_.load() || ring_->was_cut()) {
        throw PeerLostError(fmt::format("{} failed on {}: {} [{}]", what, who(), failure_, cut_reason()));
      }
      throw TimeoutError(fmt::format("{} failed on {} (timeout {} ms): {}; a peer is slow, hung or gone", what, who(),
                                     timeout.count(), failure_));
    } catch (const PeerLostError& e) {
      failure_ = e.what();
      if (aborted_.load() || ring_->was_cut()) {
        throw PeerLostError(fmt::format("{} failed on {}: {} [{}]", what, who(), failure_, cut_reason()));
      }
      throw PeerLostError(fmt::format("{} failed on {} (timeout {} ms): {}; a peer has died or closed its connection",
                                      what, who(), timeout.count(), failure_));
    }
  }

  std::shared_ptr<TcpRing> ring_;
  std::shared_ptr<AbortSignal> signal_;  // may be null
  int rank_;
  int size_;
  std::vector<std::byte> scratch_;  // allreduce: the segment arriving from the previous rank
  std::string failure_;             // non-empty once a collective has failed
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<Communicator> make_tcp_communicator(Store& store, int rank, int size,
                                                    const CommunicatorOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw ConfigError(
        fmt::format("TCP communicator: rank {} is outside world size {} (need 0 <= rank < size)", rank, size));
  }
  check_timeout(options.timeout, "make_tcp_communicator");
  if (size == 1) return make_local_communicator();

  const std::string who = fmt::format("rank {} of {}", rank, size);
  auto ring = std::make_shared<TcpRing>(rank, size);
  if (options.abort) {
    // Weak: the signal outlives the communicator of its generation, and must not keep it alive.
    options.abort->set_cut([weak = std::weak_ptr<TcpRing>(ring)] {
      if (auto r = weak.lock()) r->cut();
    });
  }
  const auto deadline = Clock::now() + options.timeout;
  const auto cut_message = [&] {
    return options.abort && options.abort->raised() ? options.abort->reason() : std::string("aborted");
  };
  try {
    ring->connect(store, options.hostname, deadline);
  } catch (const TimeoutError& e) {
    if (ring->was_cut()) throw PeerLostError("TCP rendezvous for " + who + " was cut: " + cut_message());
    throw TimeoutError(
        fmt::format("TCP rendezvous for {} did not complete within {} ms: {}", who, options.timeout.count(), e.what()));
  } catch (const PeerLostError& e) {
    if (ring->was_cut()) throw PeerLostError("TCP rendezvous for " + who + " was cut: " + cut_message());
    throw PeerLostError(fmt::format("TCP rendezvous for {} lost a peer: {}", who, e.what()));
  }
  // connect() returns once this rank's two connections are up; a neighbour may still be
  // connecting its own. The barrier makes construction complete everywhere.
  auto communicator = std::make_unique<TcpCommunicator>(std::move(ring), options.abort);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  communicator->barrier(std::max(left, std::chrono::milliseconds(1)));
  logger("tenax.elastic")->debug("TCP communicator ready: {} on {}", who, options.hostname);
  return communicator;
}

}  // namespace tenax::elastic
