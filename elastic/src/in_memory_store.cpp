#include "tenax/elastic/in_memory_store.h"

#include "store_values.h"
#include "tenax/core/error.h"

namespace tenax::elastic {

void InMemoryStore::set(const std::string& key, const std::vector<char>& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::vector<char> InMemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool found = changed_.wait_for(lock, timeout, [&] { return values_.count(key) != 0; });
  if (!found) {
    throw TimeoutError(detail::missing_keys_message({key}, timeout, "in-memory store"));
  }
  return values_.at(key);
}

std::int64_t InMemoryStore::add(const std::string& key, std::int64_t delta) {
  std::int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = values_.find(key);
    result = (it == values_.end() ? 0 : detail::parse_counter(key, it->second)) + delta;
    values_[key] = detail::encode_counter(result);
  }
  changed_.notify_all();
  return result;
}

void InMemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto missing = [&] {
    std::vector<std::string> out;
    for (const auto& key : keys) {
      if (values_.count(key) == 0) out.push_back(key);
    }
    return out;
  };
  const bool all = changed_.wait_for(lock, timeout, [&] { return missing().empty(); });
  if (!all) throw TimeoutError(detail::missing_keys_message(missing(), timeout, "in-memory store"));
}

std::size_t InMemoryStore::drop_prefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t removed = 0;
  auto it = values_.lower_bound(prefix);
  while (it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    it = values_.erase(it);
    ++removed;
  }
  return removed;
}

std::size_t InMemoryStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.size();
}

}  // namespace tenax::elastic
