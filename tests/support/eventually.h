// Polling for a condition that another thread or process makes true, with a deadline.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace tenax::testing {

/// True as soon as `condition` holds (checked every 10 ms); its last value at `timeout`.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

}  // namespace tenax::testing
