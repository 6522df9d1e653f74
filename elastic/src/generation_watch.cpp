#include "generation_watch.h"

#include <string>
#include <utility>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/in_process_recovery.h"

namespace tenax::elastic::detail {

GenerationWatch::GenerationWatch(std::function<std::unique_ptr<Store>()> connect)
    : connect_(std::move(connect)), thread_([this] { run(); }) {}

GenerationWatch::~GenerationWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

std::shared_ptr<AbortSignal> GenerationWatch::watch(std::int64_t generation) {
  auto signal = std::make_shared<AbortSignal>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_ = generation;
    signal_ = signal;
  }
  changed_.notify_all();
  return signal;
}

void GenerationWatch::run() {
  std::unique_ptr<Store> store;
  bool warned = false;
  for (;;) {
    std::int64_t generation = 0;
    std::shared_ptr<AbortSignal> signal;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Nothing to watch until a generation is handed out, or once its signal was raised.
      changed_.wait(lock, [&] { return stop_ || (signal_ && !signal_->raised()); });
      if (stop_) return;
      generation = generation_;
      signal = signal_;
    }
    try {
      if (!store) store = connect_();
      store->wait({declared_key(generation + 1)}, kPark);
      std::string latest = std::to_string(generation + 1);
      try {
        const std::vector<char> raw = store->get(kLatestKey, kPark);
        latest.assign(raw.begin(), raw.end());
      } catch (const Error&) {
        // the declaration is what counts; the number is for the message
      }
      signal->raise("generation " + std::to_string(generation) + " was superseded by generation " + latest +
                    " (the agent declared it after a peer was lost)");
      warned = false;
    } catch (const TimeoutError&) {
      // not declared yet: park again
    } catch (const Error& e) {
      // The store is out of reach (its host moved or is gone): the calls then end at their
      // own timeouts, as without the watch. Try again after a pause.
      if (!warned) {
        logger("tenax.elastic")->debug("generation watch: {}; retrying", e.what());
        warned = true;
      }
      store.reset();
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait_for(lock, kPark, [&] { return stop_; });
    }
  }
}

}  // namespace tenax::elastic::detail
