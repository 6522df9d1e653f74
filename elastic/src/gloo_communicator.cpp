// The Gloo backend of Communicator. Gloo headers stay in this file (their configuration must
// match the library libtorch links; see reference notes on Gloo pitfalls).
#include "tenax/elastic/gloo_communicator.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <string>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/math.h>
#include <gloo/transport/tcp/device.h>

#include <fmt/format.h>

#include "gloo_mesh.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/peer_wait.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, std::size_t);
  switch (op) {
    case ReduceOp::kSum: return static_cast<Fn>(&gloo::sum<T>);
    case ReduceOp::kMax: return static_cast<Fn>(&gloo::max<T>);
    case ReduceOp::kMin: return static_cast<Fn>(&gloo::min<T>);
  }
  throw Error(fmt::format("unknown ReduceOp {}", static_cast<int>(op)));
}

template <typename T>
void set_allreduce_buffer(gloo::AllreduceOptions& options, void* data, std::size_t count, ReduceOp op) {
  options.setOutput(static_cast<T*>(data), count);
  options.setReduceFunction(reduce_function<T>(op));
}

bool mentions_timeout(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text.find("timed out") != std::string::npos || text.find("timeout") != std::string::npos;
}

void check_timeout(std::chrono::milliseconds timeout, const char* what) {
  if (timeout.count() <= 0) {
    throw ConfigError(fmt::format("{}: timeout must be positive, got {} ms", what, timeout.count()));
  }
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::transport::Device> device, std::shared_ptr<detail::GlooMesh> context,
                   std::shared_ptr<AbortSignal> signal)
      : device_(std::move(device)),
        context_(std::move(context)),
        signal_(std::move(signal)),
        rank_(context_->rank),
        size_(context_->size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(void* data, std::size_t count, ElementType type, ReduceOp op,
                 std::chrono::milliseconds timeout) override {
    run("allreduce", timeout, [&](std::uint32_t tag) {
      if (count == 0) return;
      if (data == nullptr) throw Error("allreduce: null buffer");
      gloo::AllreduceOptions options(context_);
      // Ring: the reduction order depends only on the world size, so results are bit-identical
      // across ranks and across runs (DESIGN.md decision 6).
      options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      options.setTag(tag);
      options.setTimeout(timeout);
      switch (type) {
        case ElementType::kFloat32: set_allreduce_buffer<float>(options, data, count, op); break;
        case ElementType::kFloat64: set_allreduce_buffer<double>(options, data, count, op); break;
        case ElementType::kInt64: set_allreduce_buffer<std::int64_t>(options, data, count, op); break;
        case ElementType::kUInt8: set_allreduce_buffer<std::uint8_t>(options, data, count, op); break;
        default: throw Error(fmt::format("allreduce: unknown ElementType {}", static_cast<int>(type)));
      }
      gloo::allreduce(options);
    });
  }

  void broadcast(void* data, std::size_t bytes, int root, std::chrono::milliseconds timeout) override {
    run("broadcast", timeout, [&](std::uint32_t tag) {
      if (root < 0 || root >= size_) {
        throw Error(fmt::format("broadcast: root {} outside world size {}", root, size_));
      }
      if (bytes == 0) return;
      if (data == nullptr) throw Error("broadcast: null buffer");
      gloo::BroadcastOptions options(context_);
      options.setOutput(static_cast<std::uint8_t*>(data), bytes);
      options.setRoot(root);
      options.setTag(tag);
      options.setTimeout(timeout);
      gloo::broadcast(options);
    });
  }

  void allgather(const void* in, void* out, std::size_t bytes_per_rank, std::chrono::milliseconds timeout) override {
    run("allgather", timeout, [&](std::uint32_t tag) {
      if (bytes_per_rank == 0) return;
      if (in == nullptr || out == nullptr) throw Error("allgather: null buffer");
      gloo::AllgatherOptions options(context_);
      // Gloo only reads the input; its API takes a non-const pointer.
      options.setInput(static_cast<std::uint8_t*>(const_cast<void*>(in)), bytes_per_rank);
      options.setOutput(static_cast<std::uint8_t*>(out), bytes_per_rank * static_cast<std::size_t>(size_));
      options.setTag(tag);
      options.setTimeout(timeout);
      gloo::allgather(options);
    });
  }

  void barrier(std::chrono::milliseconds timeout) override {
    run("barrier", timeout, [&](std::uint32_t tag) {
      gloo::BarrierOptions options(context_);
      options.setTag(tag);
      options.setTimeout(timeout);
      gloo::barrier(options);
    });
  }

  // Cutting the mesh is what makes a call in flight fail now rather than at its timeout.
  void abort() override {
    aborted_.store(true);
    context_->cut();
  }

 private:
  // Why the mesh was cut, for the message of the call it failed.
  std::string cut_reason() const {
    if (signal_ && signal_->raised()) return signal_->reason();
    return "the communicator was aborted";
  }

  std::string who() const { return "rank " + std::to_string(rank_) + " of " + std::to_string(size_); }

  // Runs one collective: refuses after abort() or an earlier failure, and turns Gloo's
  // exceptions into ours. Every rank calls collectives in the same order, so the per-call tag
  // matches across ranks and a message can never be taken for another operation's.
  template <typename Body>
  void run(const char* what, std::chrono::milliseconds timeout, Body&& body) {
    if (aborted_.load() || context_->was_cut()) {
      throw PeerLostError(std::string(what) + " on " + who() + ": " + cut_reason() + "; build a new one");
    }
    if (!failure_.empty()) {
      throw PeerLostError(std::string(what) + " on " + who() + ": the communicator is unusable after an earlier " +
                          "failure (" + failure_ + "); build a new one for the next generation");
    }
    check_timeout(timeout, what);
    const std::uint32_t tag = next_tag_++;
    try {
      // Blocked on the peers until they all arrive: --hang-timeout's beacon reports it.
      const PeerWaitGuard waiting;
      body(tag);
      return;
    } catch (const gloo::IoException& e) {
      failure_ = e.what();
    } catch (const gloo::EnforceNotMet& e) {
      failure_ = e.what();
    } catch (const gloo::Exception& e) {
      failure_ = e.what();
    }
    const std::string message = std::string(what) + " failed on " + who() + " (timeout " +
                                std::to_string(timeout.count()) + " ms): " + failure_;
    if (aborted_.load() || context_->was_cut()) throw PeerLostError(message + " [" + cut_reason() + "]");
    if (mentions_timeout(failure_)) {
      throw TimeoutError(message + "; a peer is slow, hung or gone");
    }
    throw PeerLostError(message + "; a peer has died or closed its connection");
  }

  std::shared_ptr<gloo::transport::Device> device_;  // declared first: outlives the context
  std::shared_ptr<detail::GlooMesh> context_;
  std::shared_ptr<AbortSignal> signal_;  // may be null
  int rank_;
  int size_;
  std::uint32_t next_tag_ = 0;
  std::string failure_;  // non-empty once a collective has failed
  std::atomic<bool> aborted_{false};
};

}  // namespace

bool gloo_built() { return true; }

std::unique_ptr<Communicator> make_gloo_communicator(Store& store, int rank, int size, const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw ConfigError("Gloo communicator: rank " + std::to_string(rank) + " is outside world size " +
                      std::to_string(size) + " (need 0 <= rank < size)");
  }
  check_timeout(options.timeout, "make_gloo_communicator");
  if (size == 1) return make_local_communicator();

  const std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(size);
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw RendezvousError("cannot create a Gloo TCP device on '" + options.hostname + "' for " + who + ": " + e.what() +
                          "; check MASTER_ADDR / the host's address");
  }

  auto context = std::make_shared<detail::GlooMesh>(rank, size);
  context->setTimeout(options.timeout);
  if (options.abort) {
    // Weak: the signal outlives the communicator of its generation, and must not keep it alive.
    options.abort->set_cut([mesh = std::weak_ptr<detail::GlooMesh>(context)] {
      if (auto m = mesh.lock()) m->cut();
    });
  }
  const auto deadline = Clock::now() + options.timeout;
  const auto cut_message = [&] {
    return options.abort && options.abort->raised() ? options.abort->reason() : std::string("aborted");
  };
  try {
    context->connect(store, device, deadline);
  } catch (const TimeoutError& e) {
    if (context->was_cut()) throw PeerLostError("Gloo rendezvous for " + who + " was cut: " + cut_message());
    throw TimeoutError("Gloo rendezvous for " + who + " did not complete within " +
                       std::to_string(options.timeout.count()) + " ms: " + e.what());
  } catch (const PeerLostError& e) {
    if (context->was_cut()) throw PeerLostError("Gloo rendezvous for " + who + " was cut: " + cut_message());
    throw;
  } catch (const gloo::Exception& e) {
    if (context->was_cut()) throw PeerLostError("Gloo rendezvous for " + who + " was cut: " + cut_message());
    throw PeerLostError("Gloo rendezvous for " + who + " could not connect to a peer: " + e.what());
  }
  // connect() can return on one rank while a peer is still connecting to the others; if
  // this rank then went away, that peer would fail. A barrier makes construction complete
  // everywhere: once it returns, every rank's mesh is up.
  auto communicator = std::make_unique<GlooCommunicator>(std::move(device), std::move(context), options.abort);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  communicator->barrier(std::max(left, std::chrono::milliseconds(1)));
  logger("tenax.elastic")->debug("Gloo communicator ready: {} on {}", who, options.hostname);
  return communicator;
}

}  // namespace tenax::elastic
