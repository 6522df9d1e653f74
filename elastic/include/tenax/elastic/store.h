// The key-value store that bootstraps collectives (Gloo's `Store` shape): set/get/add/wait.
//
// Keys are namespaced per generation through PrefixStore ("gen/<n>/"), so a stale key from an
// earlier generation is never read. Every blocking call takes a timeout and throws
// tenax::TimeoutError naming the key when it passes.
// Thread-safety: implementations state their own; PrefixStore is as safe as its base.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tenax::elastic {

/// Default deadline for store operations.
inline constexpr std::chrono::milliseconds kDefaultStoreTimeout = std::chrono::seconds(60);

class Store {
 public:
  virtual ~Store() = default;
  /// Sets (or overwrites) a key.
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  /// Waits until the key exists, then returns its value. Throws TimeoutError.
  virtual std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Atomically adds `delta` to an integer key (absent = 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Waits until every key exists. Throws TimeoutError naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

/// Prepends a fixed prefix to every key of a borrowed store (which must outlive it).
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, Store& base) : prefix_(std::move(prefix)), base_(base) {}
  void set(const std::string& key, const std::vector<char>& value) override { base_.set(prefix_ + key, value); }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return base_.get(prefix_ + key, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return base_.add(prefix_ + key, delta); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<std::string> prefixed;
    prefixed.reserve(keys.size());
    for (const auto& k : keys) prefixed.push_back(prefix_ + k);
    base_.wait(prefixed, timeout);
  }

 private:
  std::string prefix_;
  Store& base_;
};

/// A PrefixStore that owns its base (e.g. a connection opened for one background thread).
class OwningPrefixStore final : public Store {
 public:
  OwningPrefixStore(std::string prefix, std::unique_ptr<Store> base)
      : base_(std::move(base)), view_(std::move(prefix), *base_) {}
  void set(const std::string& key, const std::vector<char>& value) override { view_.set(key, value); }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return view_.get(key, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return view_.add(key, delta); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    view_.wait(keys, timeout);
  }

 private:
  std::unique_ptr<Store> base_;
  PrefixStore view_;
};

/// "gen/<n>/", the namespace of one generation's keys.
inline std::string generation_prefix(std::int64_t generation) { return "gen/" + std::to_string(generation) + "/"; }

}  // namespace tenax::elastic
