// Runs N ranks as threads in one process over an in-memory store with real communicators
// (CONVENTIONS.md: multi-rank logic tested in one process): Gloo where the build has it, Tenax's
// TCP ring where it does not (the build on PyPI's torch), or the one TENAX_BACKEND names (gloo
// or tcp), so that the whole suite runs on either.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "tenax/elastic/backend.h"
#include "tenax/elastic/communicator.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/worker_context.h"

namespace tenax::testing {

/// The CPU backend the tests' ranks use: TENAX_BACKEND when it names gloo or tcp, else what
/// `auto` picks on a machine without GPUs.
inline elastic::Backend test_backend() {
  const elastic::Backend wanted = elastic::backend_from_env();
  if (wanted == elastic::Backend::kGloo || wanted == elastic::Backend::kTcp) return wanted;
  return elastic::resolve_backend(elastic::Backend::kAuto, false, 0, elastic::gloo_built());
}

/// Calls fn(comm) on `world` threads, one communicator of `backend` each; rethrows the first
/// failure.
inline void run_ranks(int world, const std::function<void(elastic::Communicator&)>& fn,
                      elastic::Backend backend = test_backend()) {
  elastic::InMemoryStore store;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        elastic::CommunicatorOptions options;
        options.timeout = std::chrono::seconds(30);
        auto comm = elastic::make_communicator(backend, store, r, world, options);
        fn(*comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

/// Calls fn(ctx) on `world` threads, each with a WorkerContext of generation `generation` whose
/// open_store() gives a view of one shared in-memory store under "gen/<generation>/", and whose
/// fence() is `fence` (none by default).
inline void run_contexts(int world, const std::function<void(elastic::WorkerContext&)>& fn, std::int64_t generation = 0,
                         const std::optional<elastic::GenerationFence>& fence = std::nullopt) {
  elastic::InMemoryStore shared;
  run_ranks(world, [&](elastic::Communicator& comm) {
    elastic::WorkerIdentity id;
    id.rank = comm.rank();
    id.world_size = comm.size();
    id.local_rank = comm.rank();
    id.local_world_size = comm.size();
    id.generation = generation;
    // A non-owning view: the communicator is borrowed from run_ranks for the call.
    struct Borrowed final : elastic::Communicator {
      explicit Borrowed(elastic::Communicator& c) : c_(c) {}
      int rank() const override { return c_.rank(); }
      int size() const override { return c_.size(); }
      void allreduce(void* d, std::size_t n, elastic::ElementType t, elastic::ReduceOp op,
                     std::chrono::milliseconds timeout) override {
        c_.allreduce(d, n, t, op, timeout);
      }
      void broadcast(void* d, std::size_t b, int root, std::chrono::milliseconds timeout) override {
        c_.broadcast(d, b, root, timeout);
      }
      void allgather(const void* in, void* out, std::size_t b, std::chrono::milliseconds timeout) override {
        c_.allgather(in, out, b, timeout);
      }
      void barrier(std::chrono::milliseconds timeout) override { c_.barrier(timeout); }
      void abort() override { c_.abort(); }
      elastic::Communicator& c_;
    };
    const std::string prefix = elastic::generation_prefix(generation);
    elastic::WorkerContext ctx(
        id, std::make_unique<elastic::PrefixStore>(prefix, shared), std::make_unique<Borrowed>(comm),
        [&shared, prefix]() -> std::unique_ptr<elastic::Store> {
          return std::make_unique<elastic::PrefixStore>(prefix, shared);
        },
        fence);
    fn(ctx);
  });
}

/// A world-1 communicator for single-process tests.
inline std::unique_ptr<elastic::Communicator> single_rank_communicator() {
  static elastic::InMemoryStore store;  // world 1 needs no exchange; kept alive for the adapter
  return elastic::make_gloo_communicator(store, 0, 1, elastic::GlooOptions{});
}

}  // namespace tenax::testing
