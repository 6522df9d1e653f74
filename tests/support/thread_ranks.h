// Runs N ranks as threads in one process over an in-memory store with real Gloo
// communicators (CONVENTIONS.md: multi-rank logic tested in one process).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "tenax/elastic/communicator.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"

namespace tenax::testing {

/// Calls fn(comm) on `world` threads, one Gloo communicator each; rethrows the first failure.
inline void run_ranks(int world, const std::function<void(elastic::Communicator&)>& fn) {
  elastic::InMemoryStore store;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        elastic::GlooOptions options;
        options.timeout = std::chrono::seconds(30);
        auto comm = elastic::make_gloo_communicator(store, r, world, options);
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

/// A world-1 communicator for single-process tests.
inline std::unique_ptr<elastic::Communicator> single_rank_communicator() {
  static elastic::InMemoryStore store;  // world 1 needs no exchange; kept alive for the adapter
  return elastic::make_gloo_communicator(store, 0, 1, elastic::GlooOptions{});
}

}  // namespace tenax::testing
