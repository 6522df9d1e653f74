// A worker's watch on its generation under in-process recovery (issue 33: nobody waits on a
// dead peer). When a peer is lost, the agents declare the next generation in the job's store
// (in_process_recovery.h: declared_key(g + 1)); a worker blocked inside a collective, a send,
// or the connect of generation g's communicator would learn it only when that call times out.
// This thread parks a wait on that key in the store (the service answers the moment it is
// set) and raises the AbortSignal of g, which cuts the communicator (gloo_mesh.h): the call
// fails with PeerLostError at once and the worker moves on to the declared generation.
//
// One generation is watched at a time: watch(g) hands out g's signal and forgets the last.
// Thread-safety: watch() from any thread; the watch runs on its own thread with its own
// connection to the store, stopped by the destructor (within one parked wait, kPark).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tenax/elastic/abort_signal.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic::detail {

class GenerationWatch {
 public:
  /// How long one parked wait lasts: the bound on the destructor's wait for the thread.
  static constexpr std::chrono::milliseconds kPark{200};

  /// `connect` opens the watch's own connection to the job's store (called on the thread,
  /// again after a failure).
  explicit GenerationWatch(std::function<std::unique_ptr<Store>()> connect);
  ~GenerationWatch();
  GenerationWatch(const GenerationWatch&) = delete;
  GenerationWatch& operator=(const GenerationWatch&) = delete;

  /// The signal raised once a generation after `generation` is declared.
  std::shared_ptr<AbortSignal> watch(std::int64_t generation);

 private:
  void run();

  std::function<std::unique_ptr<Store>()> connect_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t generation_ = -1;
  std::shared_ptr<AbortSignal> signal_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace tenax::elastic::detail
