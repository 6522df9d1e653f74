#include "spare_pool.h"

#include <csignal>
#include <thread>

#include "tenax/core/error.h"

namespace tenax::launcher {

// A program that cannot even start as a spare would otherwise be restarted on every loop.
constexpr int kMaxFailedStarts = 3;

SparePool::SparePool(int size, Spawn spawn, int* next_id, std::shared_ptr<spdlog::logger> log)
    : size_(size), spawn_(std::move(spawn)), log_(std::move(log)), next_id_(next_id) {}

SparePool::~SparePool() { stop(std::chrono::milliseconds(0)); }

void SparePool::fill() {
  while (static_cast<int>(spares_.size()) < size_ && failed_starts_ < kMaxFailedStarts) {
    const int id = (*next_id_)++;
    try {
      spares_.push_back(Spare{id, spawn_(id)});
      log_->info("warm spare {} started (pid {})", id, spares_.back().process.pid());
    } catch (const Error& e) {
      ++failed_starts_;
      log_->warn("warm spare {} could not be started: {}{}", id, e.what(),
                 failed_starts_ >= kMaxFailedStarts ? "; no more spares: a lost rank gets a new process" : "");
    }
  }
}

void SparePool::poll() {
  for (auto it = spares_.begin(); it != spares_.end();) {
    if (const auto status = it->process.poll()) {
      ++failed_starts_;
      log_->warn("warm spare {} (pid {}) {}; {}", it->id, it->process.pid(), status->describe(),
                 failed_starts_ < kMaxFailedStarts
                     ? "starting another"
                     : "no more spares after this many losses: a lost rank gets a new process");
      it->process.reap();
      it = spares_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<Spare> SparePool::take() {
  poll();
  if (spares_.empty()) return std::nullopt;
  Spare spare = std::move(spares_.front());
  spares_.erase(spares_.begin());
  return spare;
}

void SparePool::stop(std::chrono::milliseconds grace) {
  for (Spare& s : spares_) s.process.signal_group(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (Spare& s : spares_) {
    while (!s.process.poll() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!s.process.status()) s.process.signal_group(SIGKILL);
    s.process.reap(WorkerProcess::kReapTimeout);
  }
  spares_.clear();
}

}  // namespace tenax::launcher
