// A Store that lives in one process: a map under a mutex, with waiters on a condition variable.
//
// For tests that run N ranks as threads (CONVENTIONS.md), and for world-size-1 runs that need
// no rendezvous service. Blocking calls honour their timeout and throw TimeoutError naming the
// missing key(s).
// Thread-safety: every member may be called from any thread concurrently.
//
//   tenax::elastic::InMemoryStore store;
//   auto comm = tenax::elastic::make_gloo_communicator(store, rank, world, {});
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tenax/elastic/store.h"

namespace tenax::elastic {

class InMemoryStore final : public Store {
 public:
  InMemoryStore() = default;
  InMemoryStore(const InMemoryStore&) = delete;
  InMemoryStore& operator=(const InMemoryStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override;
  /// The value is stored as the decimal text of the integer (as KvService does).
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  /// Removes every key that starts with `prefix`; returns how many were removed.
  std::size_t drop_prefix(const std::string& prefix);
  /// Number of keys held.
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace tenax::elastic
